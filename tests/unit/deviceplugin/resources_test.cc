#include "deviceplugin/resources.h"

#include <gtest/gtest.h>

namespace gpuop::deviceplugin {
namespace {

// H100-like GPUs and MIG devices, as nvml::Client reports them.
nvml::Gpu Gpu(unsigned index, bool mig_enabled = false) {
  nvml::Gpu g;
  g.index = index;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-0000000" + std::to_string(index) + "-1111-2222-3333-444444444444";
  g.minor = static_cast<int>(index);
  g.numa_node = index < 4 ? 0 : 1;
  g.pci.bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  g.mig_capable = true;
  g.mig_enabled = mig_enabled;
  return g;
}

void AddMig(nvml::Gpu* g, unsigned gi, unsigned ci, const std::string& profile) {
  nvml::MigDevice m;
  m.index = static_cast<unsigned>(g->mig_devices.size());
  m.uuid = "MIG-" + std::to_string(g->index) + std::to_string(m.index) +
           "000000-aaaa-bbbb-cccc-dddddddddddd";
  m.gi_id = gi;
  m.ci_id = ci;
  m.profile = profile;
  g->mig_devices.push_back(m);
}

Config WithMig(MigStrategy s) {
  Config c;
  c.mig_strategy = s;
  return c;
}

std::vector<std::string> Names(const std::vector<Resource>& rs) {
  std::vector<std::string> out;
  for (const Resource& r : rs) out.push_back(r.name);
  return out;
}

std::vector<std::string> Indexes(const Resource& r) {
  std::vector<std::string> out;
  for (const Unit& u : r.units) out.push_back(u.index);
  return out;
}

// GPU 0 plain; GPU 1 with MIG 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb+me.
std::vector<nvml::Gpu> MixedNode() {
  std::vector<nvml::Gpu> gpus = {Gpu(1, true), Gpu(0)};  // out of order on purpose
  AddMig(&gpus[0], 1, 0, "3g.40gb");
  AddMig(&gpus[0], 5, 0, "2g.20gb");
  AddMig(&gpus[0], 13, 0, "1g.10gb");
  AddMig(&gpus[0], 14, 0, "1g.10gb+me");
  return gpus;
}

TEST(DpResourcesTest, NoneAdvertisesEveryGpuWhole) {
  auto rs = BuildResources(MixedNode(), WithMig(MigStrategy::kNone), nullptr);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  ASSERT_EQ(Names(*rs), std::vector<std::string>{"nvidia.com/gpu"});
  const Resource& r = rs->front();
  EXPECT_EQ(Indexes(r), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(r.replicas, 1);
  const Unit& u = r.units[1];
  EXPECT_EQ(u.uuid, Gpu(1).uuid);
  EXPECT_EQ(u.parent_uuid, u.uuid);
  EXPECT_FALSE(u.is_mig());
  EXPECT_EQ(u.bus_id, "00000000:11:00.0");
  EXPECT_EQ(u.device_nodes, std::vector<std::string>{"/dev/nvidia1"});
  EXPECT_EQ(r.Devices(),
            (std::vector<PluginDevice>{{Gpu(0).uuid, true, 0}, {Gpu(1).uuid, true, 0}}));
}

TEST(DpResourcesTest, MixedNamesEachProfile) {
  host::MigMinors minors;
  for (unsigned gi : {1u, 5u, 13u, 14u}) {
    minors.Add(1, gi, -1, 100 + gi);
    minors.Add(1, gi, 0, 200 + gi);
  }
  auto rs = BuildResources(MixedNode(), WithMig(MigStrategy::kMixed), &minors);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  EXPECT_EQ(Names(*rs), (std::vector<std::string>{
                            "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb.me",
                            "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"}));
  EXPECT_EQ(Indexes((*rs)[0]), std::vector<std::string>{"0"});
  const Unit& me = (*rs)[2].units.at(0);
  EXPECT_EQ(me.index, "1:3");
  EXPECT_EQ(me.mig, 3u);
  EXPECT_EQ(me.gpu, 1u);
  EXPECT_EQ(me.profile, "1g.10gb+me");
  EXPECT_EQ(me.parent_uuid, Gpu(1).uuid);
  EXPECT_EQ(me.device_nodes,
            (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap114",
                                      "/dev/nvidia-caps/nvidia-cap214"}));
  EXPECT_EQ(MigResourceName("1g.10gb+me"), "nvidia.com/mig-1g.10gb.me");
}

TEST(DpResourcesTest, MixedRejectsPartialComputeInstances) {
  std::vector<nvml::Gpu> gpus = {Gpu(0, true)};
  AddMig(&gpus[0], 2, 0, "1c.2g.20gb");
  auto rs = BuildResources(gpus, WithMig(MigStrategy::kMixed), nullptr);
  ASSERT_FALSE(rs.ok());
  EXPECT_EQ(rs.status().message(),
            "MIG device 0:0 (" + gpus[0].mig_devices[0].uuid +
                ", 1c.2g.20gb): MIG profile does not match any resource pattern; mig-strategy "
                "mixed exposes only devices whose compute instance fills its GPU instance: "
                "recreate it as a full GPU instance (e.g. 2g.20gb)");
}

TEST(DpResourcesTest, SingleExposesUniformMigDevicesAsGpu) {
  std::vector<nvml::Gpu> gpus = {Gpu(0, true), Gpu(1, true)};
  for (auto& g : gpus) {
    AddMig(&g, 7, 0, "1g.10gb");
    AddMig(&g, 8, 0, "1g.10gb");
  }
  host::MigMinors minors;
  for (unsigned m : {0u, 1u}) {
    for (unsigned gi : {7u, 8u}) {
      minors.Add(m, gi, -1, m * 100 + gi);
      minors.Add(m, gi, 0, m * 100 + gi + 50);
    }
  }
  auto rs = BuildResources(gpus, WithMig(MigStrategy::kSingle), &minors);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  ASSERT_EQ(Names(*rs), std::vector<std::string>{"nvidia.com/gpu"});
  EXPECT_EQ(Indexes(rs->front()), (std::vector<std::string>{"0:0", "0:1", "1:0", "1:1"}));
  EXPECT_EQ(rs->front().units[3].device_nodes,
            (std::vector<std::string>{"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap108",
                                      "/dev/nvidia-caps/nvidia-cap158"}));
}

TEST(DpResourcesTest, SingleRejectsInvalidLayouts) {
  // MIG on one GPU only.
  std::vector<nvml::Gpu> half = {Gpu(0, true), Gpu(1)};
  AddMig(&half[0], 7, 0, "1g.10gb");
  auto a = BuildResources(half, WithMig(MigStrategy::kSingle), nullptr);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "all devices on the node must be configured with the same migEnabled value: GPU 0 (" +
                half[0].uuid + ") has MIG enabled, GPU 1 (" + half[1].uuid +
                ") has not; enable MIG on every GPU or use mig-strategy mixed");
  // Two profiles.
  std::vector<nvml::Gpu> two = {Gpu(0, true), Gpu(1, true)};
  AddMig(&two[0], 7, 0, "1g.10gb");
  AddMig(&two[1], 1, 0, "3g.40gb");
  auto b = BuildResources(two, WithMig(MigStrategy::kSingle), nullptr);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "invalid MIG configuration: more than one MIG device type present on node (1g.10gb "
            "and 3g.40gb on GPU 1 (" +
                two[1].uuid +
                ")); mig-strategy single needs one profile on every GPU: repartition the GPUs "
                "alike or use mig-strategy mixed");
  // MIG enabled, nothing created (also an error under mixed).
  std::vector<nvml::Gpu> empty = {Gpu(0, true)};
  for (MigStrategy s : {MigStrategy::kSingle, MigStrategy::kMixed}) {
    auto c = BuildResources(empty, WithMig(s), nullptr);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().message(),
              "invalid MIG configuration: GPU 0 (" + empty[0].uuid +
                  ") has MIG enabled but no MIG devices; create MIG devices (the "
                  "nvidia.com/mig.config label) or disable MIG on it");
  }
  // ...but not under none, where the GPU is advertised whole.
  EXPECT_TRUE(BuildResources(empty, WithMig(MigStrategy::kNone), nullptr).ok());
}

TEST(DpResourcesTest, MissingCapabilityMinorIsAnError) {
  host::MigMinors minors;
  minors.Add(1, 1, -1, 10);  // no CI entry; GI 5, 13, 14 missing entirely
  auto rs = BuildResources(MixedNode(), WithMig(MigStrategy::kMixed), &minors);
  ASSERT_FALSE(rs.ok());
  EXPECT_NE(rs.status().message().find("/proc/driver/nvidia-caps/mig-minors has no entry gpu1/gi"),
            std::string::npos)
      << rs.status().message();
}

TEST(DpResourcesTest, UnknownMinorIsAnError) {
  std::vector<nvml::Gpu> gpus = {Gpu(0)};
  gpus[0].minor = -1;
  auto rs = BuildResources(gpus, Config{}, nullptr);
  ASSERT_FALSE(rs.ok());
  EXPECT_NE(rs.status().message().find("GPU 0 (" + gpus[0].uuid + "): NVML reports no minor"),
            std::string::npos);
}

Config TimeSliced(int replicas, ReplicaDevices devices = {}, std::string rename = "") {
  Config c;
  c.sharing.kind = Sharing::Kind::kTimeSlicing;
  c.sharing.fail_requests_greater_than_one = true;
  c.sharing.resources = {{"nvidia.com/gpu", std::move(rename), std::move(devices), replicas}};
  return c;
}

TEST(DpResourcesTest, FourReplicasPerGpu) {
  std::vector<nvml::Gpu> gpus = {Gpu(0), Gpu(5)};
  auto rs = BuildResources(gpus, TimeSliced(4), nullptr);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  ASSERT_EQ(rs->size(), 1u);
  const Resource& r = rs->front();
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.replicas, 4);
  EXPECT_EQ(r.sharing, Sharing::Kind::kTimeSlicing);
  EXPECT_TRUE(r.fail_requests_greater_than_one);
  auto devices = r.Devices([&](const Unit& u) { return u.index != "5"; });
  ASSERT_EQ(devices.size(), 8u);
  EXPECT_EQ(devices[0], (PluginDevice{gpus[0].uuid + "::0", true, 0}));
  EXPECT_EQ(devices[3], (PluginDevice{gpus[0].uuid + "::3", true, 0}));
  EXPECT_EQ(devices[7], (PluginDevice{gpus[1].uuid + "::3", false, 1}));

  EXPECT_EQ(r.FindUnit(gpus[1].uuid + "::3"), &r.units[1]);
  EXPECT_EQ(r.FindUnit(gpus[1].uuid), &r.units[1]);
  EXPECT_EQ(r.FindUnit("5"), &r.units[1]);
  EXPECT_EQ(r.FindUnit(gpus[1].uuid + "::4"), nullptr);  // beyond the replicas
  EXPECT_EQ(r.FindUnit(gpus[1].uuid + "::x"), nullptr);
  EXPECT_EQ(r.FindUnit(gpus[1].uuid + "::"), nullptr);
  EXPECT_EQ(r.FindUnit("GPU-unknown"), nullptr);
}

TEST(DpResourcesTest, ReplicaIdsAreUnknownOnUnsharedResources) {
  auto rs = BuildResources({Gpu(0)}, Config{}, nullptr);
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->front().FindUnit(Gpu(0).uuid + "::0"), nullptr);
  EXPECT_NE(rs->front().FindUnit(Gpu(0).uuid), nullptr);
}

TEST(DpResourcesTest, RenameMovesSharedUnitsToTheNewName) {
  std::vector<nvml::Gpu> gpus = {Gpu(0), Gpu(1), Gpu(2)};
  auto rs = BuildResources(
      gpus,
      TimeSliced(2, ReplicaDevices{.all = false, .count = 0, .list = {"2", gpus[0].uuid}},
                 "nvidia.com/gpu.shared"),
      nullptr);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  ASSERT_EQ(Names(*rs), (std::vector<std::string>{"nvidia.com/gpu", "nvidia.com/gpu.shared"}));
  EXPECT_EQ(Indexes((*rs)[0]), std::vector<std::string>{"1"});
  EXPECT_EQ((*rs)[0].replicas, 1);
  EXPECT_EQ(Indexes((*rs)[1]), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ((*rs)[1].replicas, 2);

  // All devices renamed: the original name disappears.
  auto all = BuildResources(gpus, TimeSliced(2, {}, "nvidia.com/gpu.shared"), nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Names(*all), std::vector<std::string>{"nvidia.com/gpu.shared"});

  auto count = BuildResources(
      gpus, TimeSliced(3, ReplicaDevices{.all = false, .count = 1, .list = {}}, "nvidia.com/x"),
      nullptr);
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(Indexes(count->back()), std::vector<std::string>{"0"});
  EXPECT_EQ(count->back().name, "nvidia.com/x");
}

TEST(DpResourcesTest, SharingSelectionErrors) {
  std::vector<nvml::Gpu> gpus = {Gpu(0), Gpu(1)};
  auto partial = BuildResources(
      gpus, TimeSliced(2, ReplicaDevices{.all = false, .count = 1, .list = {}}), nullptr);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.status().message(),
            "sharing.timeSlicing.resources[0] (nvidia.com/gpu): devices selects 1 of 2 devices "
            "but sets no rename, so shared and whole devices would share one name; add rename "
            "(e.g. nvidia.com/gpu.shared)");
  auto too_many = BuildResources(
      gpus, TimeSliced(2, ReplicaDevices{.all = false, .count = 3, .list = {}}, "nvidia.com/s"),
      nullptr);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().message(),
            "sharing.timeSlicing.resources[0] (nvidia.com/gpu): requested 3 devices to be "
            "replicated, but only 2 nvidia.com/gpu devices are available; lower devices or use "
            "\"all\"");
  auto unknown = BuildResources(
      gpus, TimeSliced(2, ReplicaDevices{.all = false, .count = 0, .list = {"7"}}, "nvidia.com/s"),
      nullptr);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "sharing.timeSlicing.resources[0] (nvidia.com/gpu): no nvidia.com/gpu device with "
            "index or UUID \"7\" on this node; list devices this node has (nvidia-smi -L)");
}

TEST(DpResourcesTest, SharingAMissingResourceIsANoOp) {
  Config c = TimeSliced(2);
  c.sharing.resources[0].name = "nvidia.com/mig-1g.10gb";
  auto rs = BuildResources({Gpu(0)}, c, nullptr);
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->front().replicas, 1);
}

TEST(DpResourcesTest, TimeSlicingAMigResource) {
  Config c = TimeSliced(2);
  c.mig_strategy = MigStrategy::kMixed;
  c.sharing.resources[0].name = "nvidia.com/mig-1g.10gb";
  auto rs = BuildResources(MixedNode(), c, nullptr);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  const Resource& r = (*rs)[1];
  ASSERT_EQ(r.name, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(r.replicas, 2);
  auto devices = r.Devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1].id, r.units[0].uuid + "::1");
  EXPECT_EQ(r.FindUnit("1:2"), &r.units[0]);
  EXPECT_EQ((*rs)[0].replicas, 1);  // nvidia.com/gpu untouched
}

TEST(DpResourcesTest, MpsRejectsMigDevices) {
  Config c = TimeSliced(2);
  c.sharing.kind = Sharing::Kind::kMps;
  c.mig_strategy = MigStrategy::kSingle;
  std::vector<nvml::Gpu> gpus = {Gpu(0, true)};
  AddMig(&gpus[0], 7, 0, "1g.10gb");
  auto rs = BuildResources(gpus, c, nullptr);
  ASSERT_FALSE(rs.ok());
  EXPECT_EQ(rs.status().message(),
            "sharing.mps.resources[0] (nvidia.com/gpu): sharing using MPS is not supported for "
            "MIG devices (0:0 " +
                gpus[0].mig_devices[0].uuid + "); use timeSlicing, or share only whole GPUs");
}

}  // namespace
}  // namespace gpuop::deviceplugin
