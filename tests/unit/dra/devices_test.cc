#include "dra/devices.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/files.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::dra {
namespace {

using testing::SimNode;

struct Inventory {
  std::vector<nvml::Gpu> gpus;
  nvml::SystemInfo system;
};

// The node's GPUs as NVML (the simulator) reports them.
Inventory Read(SimNode& node) {
  Inventory inv;
  auto nvml = node.OpenNvmlOrFail();
  if (nvml == nullptr) return inv;
  auto gpus = nvml->Gpus();
  auto system = nvml->System();
  EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_TRUE(system.ok()) << system.status().ToString();
  if (gpus.ok()) inv.gpus = *gpus;
  if (system.ok()) inv.system = *system;
  return inv;
}

std::vector<Device> Build(const Inventory& inv, const DeviceInputs& inputs = {}) {
  auto devices = BuildDevices(inv.gpus, inv.system, inputs);
  EXPECT_TRUE(devices.ok()) << devices.status().ToString();
  return devices.ok() ? *devices : std::vector<Device>{};
}

const Device* Find(const std::vector<Device>& devices, const std::string& name) {
  for (const Device& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::vector<std::string> Names(const std::vector<Device>& devices) {
  std::vector<std::string> out;
  for (const Device& d : devices) out.push_back(d.name);
  return out;
}

TEST(DevicesTest, DgxH100PublishesEightWholeGpusWithNvidiasAttributes) {
  SimNode node("dgx-h100", "dra-devices");
  ASSERT_TRUE(node.booted());
  const Inventory inv = Read(node);
  ASSERT_EQ(inv.gpus.size(), 8u);
  const std::vector<Device> devices = Build(inv);
  EXPECT_EQ(Names(devices), (std::vector<std::string>{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4",
                                                      "gpu-5", "gpu-6", "gpu-7"}));

  const Device& d = devices[0];
  EXPECT_EQ(d.kind, Device::Kind::kGpu);
  EXPECT_EQ(d.uuid, inv.gpus[0].uuid);
  EXPECT_TRUE(d.uuid.starts_with("GPU-"));
  const std::map<std::string, AttributeValue> want = {
      {"type", std::string("gpu")},
      {"uuid", inv.gpus[0].uuid},
      {"productName", std::string("NVIDIA H100 80GB HBM3")},
      {"brand", std::string("NVIDIA")},
      {"architecture", std::string("Hopper")},
      {"cudaComputeCapability", Version{"9.0.0"}},
      {"driverVersion", Version{"570.172.8"}},   // NVML: "570.172.08"
      {"cudaDriverVersion", Version{"12.8.0"}},  // NVML: 12080
      {"resource.kubernetes.io/pciBusID", std::string("0000:18:00.0")},
      {"resource.kubernetes.io/numaNode", int64_t{0}},
  };
  EXPECT_EQ(d.attributes, want);
  // 81559 MiB in bytes.
  EXPECT_EQ(d.capacity, (std::map<std::string, uint64_t>{{"memory", 85520809984ull}}));
  EXPECT_TRUE(d.taints.empty());
  // The second socket's GPUs.
  EXPECT_EQ(std::get<int64_t>(devices[7].attributes.at("resource.kubernetes.io/numaNode")), 1);
  EXPECT_EQ(std::get<std::string>(devices[7].attributes.at("resource.kubernetes.io/pciBusID")),
            "0000:db:00.0");
}

TEST(DevicesTest, L40sHasAdaAttributesAndNoMig) {
  SimNode node("l40s-4", "dra-devices");
  ASSERT_TRUE(node.booted());
  const std::vector<Device> devices = Build(Read(node));
  ASSERT_EQ(devices.size(), 4u);
  for (const Device& d : devices) {
    EXPECT_EQ(std::get<std::string>(d.attributes.at("type")), "gpu");
    EXPECT_EQ(std::get<std::string>(d.attributes.at("productName")), "NVIDIA L40S");
    EXPECT_EQ(std::get<std::string>(d.attributes.at("architecture")), "Ada Lovelace");
    EXPECT_EQ(std::get<Version>(d.attributes.at("cudaComputeCapability")).semver, "8.9.0");
    EXPECT_EQ(d.capacity.at("memory"), 46068ull << 20);
  }
  EXPECT_EQ(std::get<std::string>(devices[3].attributes.at("resource.kubernetes.io/pciBusID")),
            "0000:e1:00.0");
}

TEST(DevicesTest, MigGpuPublishesItsMigDevicesInsteadOfItself) {
  SimNode node("dgx-a100", "dra-devices");
  ASSERT_TRUE(node.booted());
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 0, true, std::vector<std::string>(7, "1g.5gb")).ok());
  const Inventory inv = Read(node);
  ASSERT_EQ(inv.gpus.size(), 8u);
  ASSERT_EQ(inv.gpus[0].mig_devices.size(), 7u);
  const std::vector<Device> devices = Build(inv);

  EXPECT_EQ(Find(devices, "gpu-0"), nullptr);  // the MIG GPU itself is not published
  EXPECT_NE(Find(devices, "gpu-1"), nullptr);
  EXPECT_EQ(devices.size(), 7u + 7u);
  for (unsigned start = 0; start < 7; ++start) {
    const std::string name = "gpu-0-mig-1g5gb-19-" + std::to_string(start);
    const Device* d = Find(devices, name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->kind, Device::Kind::kMig);
    EXPECT_EQ(d->gpu_index, 0u);
    EXPECT_EQ(d->parent_uuid, inv.gpus[0].uuid);
    EXPECT_TRUE(d->uuid.starts_with("MIG-")) << d->uuid;
    EXPECT_EQ(std::get<std::string>(d->attributes.at("type")), "mig");
    EXPECT_EQ(std::get<std::string>(d->attributes.at("uuid")), d->uuid);
    EXPECT_EQ(std::get<std::string>(d->attributes.at("parentUUID")), inv.gpus[0].uuid);
    EXPECT_EQ(std::get<std::string>(d->attributes.at("profile")), "1g.5gb");
    EXPECT_EQ(std::get<std::string>(d->attributes.at("productName")), "NVIDIA A100-SXM4-40GB");
    EXPECT_EQ(std::get<std::string>(d->attributes.at("architecture")), "Ampere");
    EXPECT_EQ(std::get<Version>(d->attributes.at("cudaComputeCapability")).semver, "8.0.0");
    EXPECT_EQ(std::get<std::string>(d->attributes.at("resource.kubernetes.io/pciBusID")),
              "0000:07:00.0");
    const std::map<std::string, uint64_t> capacity = {
        {"multiprocessors", 14},   {"copyEngines", 1},
        {"decoders", 0},           {"encoders", 0},
        {"jpegEngines", 0},        {"ofaEngines", 0},
        {"memory", 4864ull << 20}, {"memorySlice" + std::to_string(start), 1},
    };
    EXPECT_EQ(d->capacity, capacity) << name;
  }
}

TEST(DevicesTest, MigMemorySlicesCoverTheWholePlacement) {
  SimNode node("dgx-a100", "dra-devices");
  ASSERT_TRUE(node.booted());
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 2, true, {"3g.20gb", "3g.20gb"}).ok());
  const std::vector<Device> devices = Build(Read(node));
  const Device* first = Find(devices, "gpu-2-mig-3g20gb-9-0");
  const Device* second = Find(devices, "gpu-2-mig-3g20gb-9-4");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  for (unsigned i = 0; i < 8; ++i) {
    const std::string key = "memorySlice" + std::to_string(i);
    EXPECT_EQ(first->capacity.count(key), i < 4 ? 1u : 0u) << key;
    EXPECT_EQ(second->capacity.count(key), i >= 4 ? 1u : 0u) << key;
  }
  EXPECT_EQ(first->capacity.at("multiprocessors"), 42u);
  EXPECT_EQ(first->capacity.at("memory"), 19968ull << 20);
}

TEST(DevicesTest, XidAndLostGpusAreTainted) {
  SimNode node("dgx-a100", "dra-devices");
  ASSERT_TRUE(node.booted());
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 0, true, {"3g.20gb", "3g.20gb"}).ok());
  const Inventory inv = Read(node);
  DeviceInputs inputs;
  const std::string t = "2026-12-04T07:00:00Z";
  inputs.health[inv.gpus[0].uuid] = GpuHealthState{48, false, t};  // double-bit ECC
  inputs.health[inv.gpus[1].uuid] = GpuHealthState{13, false, t};  // an application's fault
  inputs.health[inv.gpus[2].uuid] = GpuHealthState{94, false, t};  // ignored by flag below
  inputs.health[inv.gpus[3].uuid] = GpuHealthState{79, true, t};   // fell off the bus
  inputs.health[inv.gpus[4].uuid] = GpuHealthState{};              // healthy
  inputs.additional_ignored_xids = {94};
  const std::vector<Device> devices = Build(inv, inputs);

  const std::vector<DeviceTaint> xid48 = {{"gpu.nvidia.com/xid", "48", "NoSchedule", t}};
  EXPECT_EQ(Find(devices, "gpu-0-mig-3g20gb-9-0")->taints, xid48);
  EXPECT_EQ(Find(devices, "gpu-0-mig-3g20gb-9-4")->taints, xid48);
  EXPECT_EQ(Find(devices, "gpu-1")->taints,
            (std::vector<DeviceTaint>{{"gpu.nvidia.com/xid", "13", "None", t}}));
  EXPECT_EQ(Find(devices, "gpu-2")->taints,
            (std::vector<DeviceTaint>{{"gpu.nvidia.com/xid", "94", "None", t}}));
  EXPECT_EQ(Find(devices, "gpu-3")->taints,
            (std::vector<DeviceTaint>{{"gpu.nvidia.com/xid", "79", "NoSchedule", t},
                                      {"gpu.nvidia.com/gpu-lost", "", "NoSchedule", t}}));
  EXPECT_TRUE(Find(devices, "gpu-4")->taints.empty());
  EXPECT_TRUE(Find(devices, "gpu-5")->taints.empty());
}

TEST(DevicesTest, IgnoredXidsAreNvidias) {
  for (uint64_t xid : {13, 31, 43, 45, 68, 109}) EXPECT_EQ(kIgnoredXids.count(xid), 1u) << xid;
  EXPECT_EQ(kIgnoredXids.size(), 6u);
}

TEST(DevicesTest, PcieRootAndNumaNodeOnlyWhenKnown) {
  SimNode node("t4-1", "dra-devices");
  ASSERT_TRUE(node.booted());
  Inventory inv = Read(node);
  ASSERT_EQ(inv.gpus.size(), 1u);
  inv.gpus[0].numa_node = -1;
  std::vector<Device> devices = Build(inv);
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].attributes.count("resource.kubernetes.io/numaNode"), 0u);
  EXPECT_EQ(devices[0].attributes.count("resource.kubernetes.io/pcieRoot"), 0u);

  DeviceInputs inputs;
  inputs.pcie_roots["0000:3b:00.0"] = "pci0000:3a";
  devices = Build(inv, inputs);
  EXPECT_EQ(std::get<std::string>(devices[0].attributes.at("resource.kubernetes.io/pcieRoot")),
            "pci0000:3a");
}

TEST(DevicesTest, GpuWithoutMinorOrDuplicateNamesIsAnError) {
  nvml::Gpu gpu;
  gpu.index = 2;
  gpu.name = "NVIDIA L40S";
  gpu.uuid = "GPU-a";
  gpu.minor = -1;
  nvml::SystemInfo system{"570.172.08", 12080, "12.8", ""};
  auto r = BuildDevices({gpu}, system);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPU 2 (NVIDIA L40S"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("minor"), std::string::npos);

  gpu.minor = 0;
  nvml::Gpu twin = gpu;
  twin.uuid = "GPU-b";
  r = BuildDevices({gpu, twin}, system);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gpu-0"), std::string::npos) << r.status().message();

  system.driver_version = "r570";
  r = BuildDevices({gpu}, system);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"r570\""), std::string::npos) << r.status().message();
}

TEST(DevicesTest, SemverCoercion) {
  EXPECT_EQ(*CoerceSemver("9.0"), "9.0.0");
  EXPECT_EQ(*CoerceSemver("580.105.08"), "580.105.8");
  EXPECT_EQ(*CoerceSemver("12"), "12.0.0");
  EXPECT_EQ(*CoerceSemver("535.129.03"), "535.129.3");
  EXPECT_FALSE(CoerceSemver("1.2.3.4").ok());
  EXPECT_FALSE(CoerceSemver("").ok());
  EXPECT_FALSE(CoerceSemver("1..2").ok());
  EXPECT_FALSE(CoerceSemver("1.2-beta").ok());
  EXPECT_EQ(CudaDriverSemver(12080), "12.8.0");
  EXPECT_EQ(CudaDriverSemver(13000), "13.0.0");
  EXPECT_EQ(CudaDriverSemver(11040), "11.4.0");
}

TEST(DevicesTest, SysfsBusIdIsLowercaseWithAFourDigitDomain) {
  nvml::PciInfo pci;
  pci.bus_id = "00000000:DB:00.0";
  pci.domain = 0;
  pci.bus = 0xdb;
  pci.device = 0;
  EXPECT_EQ(SysfsBusId(pci), "0000:db:00.0");
}

TEST(DevicesTest, PcieRootFromTheSysfsLink) {
  EXPECT_EQ(PcieRootFromLinkTarget("../../../devices/pci0000:17/0000:17:01.0/0000:18:00.0"),
            "pci0000:17");
  EXPECT_EQ(PcieRootFromLinkTarget("/sys/devices/pci0000:00/0000:00:02.0"), "pci0000:00");
  EXPECT_EQ(PcieRootFromLinkTarget("../../../devices/platform/foo"), std::nullopt);
  EXPECT_EQ(PcieRootFromLinkTarget("pci0000:00/0000:00:02.0"), std::nullopt);

  testing::TempDir root("pcieroot");
  ASSERT_TRUE(MakeDirs(root.path() + "/sys/bus/pci/devices").ok());
  ASSERT_TRUE(MakeDirs(root.path() + "/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0").ok());
  ASSERT_EQ(::symlink("../../../devices/pci0000:17/0000:17:01.0/0000:18:00.0",
                      (root.path() + "/sys/bus/pci/devices/0000:18:00.0").c_str()),
            0);
  ASSERT_TRUE(MakeDirs(root.path() + "/sys/bus/pci/devices/0000:2a:00.0").ok());
  EXPECT_EQ(ReadPcieRoot(root.path(), "0000:18:00.0"), "pci0000:17");
  EXPECT_EQ(ReadPcieRoot(root.path(), "0000:2a:00.0"), std::nullopt);  // a directory
  EXPECT_EQ(ReadPcieRoot(root.path(), "0000:99:00.0"), std::nullopt);  // absent
}

}  // namespace
}  // namespace gpuop::dra
