// BuildSpec, the pure core: a golden spec for a small 2-GPU machine with one
// MIG-enabled GPU, name strategies, the "all" device, and the errors for
// missing inputs. Regenerate the golden file with GPUOP_UPDATE_GOLDEN=1.
#include "toolkit/cdi_build.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "base/files.h"

namespace gpuop::toolkit {
namespace {

constexpr const char* kV = "570.172.08";
constexpr const char* kLib = "/usr/lib/x86_64-linux-gnu";

host::DeviceNodeInfo Node(uint32_t major, uint32_t minor, uint32_t mode = 0666, uint32_t gid = 0) {
  host::DeviceNodeInfo n;
  n.major = major;
  n.minor = minor;
  n.mode = mode;
  n.gid = gid;
  return n;
}

// Two H100s: GPU 0 in MIG mode with two 1g.10gb devices (GIs 9 and 10), GPU 1
// whole, with its DRI nodes.
CdiInputs TwoGpus() {
  CdiInputs in;
  in.driver_version = kV;
  CdiGpuInput g0;
  g0.index = 0;
  g0.minor = 0;
  g0.uuid = "GPU-00000000-1111-2222-3333-444444444444";
  g0.pci_bus_id = "0000:18:00.0";
  g0.mig_enabled = true;
  g0.migs = {{0, 9, 0, "MIG-aaaaaaaa-1111-2222-3333-444444444444", "1g.10gb"},
             {1, 10, 0, "MIG-bbbbbbbb-1111-2222-3333-444444444444", "1g.10gb"}};
  CdiGpuInput g1;
  g1.index = 1;
  g1.minor = 1;
  g1.uuid = "GPU-11111111-1111-2222-3333-444444444444";
  g1.pci_bus_id = "0000:2a:00.0";
  in.gpus = {g0, g1};
  in.device_nodes = {
      {"/dev/nvidiactl", Node(195, 255)},
      {"/dev/nvidia-modeset", Node(195, 254)},
      {"/dev/nvidia-uvm", Node(510, 0)},
      {"/dev/nvidia-uvm-tools", Node(510, 1)},
      {"/dev/nvidia0", Node(195, 0)},
      {"/dev/nvidia1", Node(195, 1)},
      {"/dev/nvidia-caps/nvidia-cap84", Node(511, 84, 0444)},
      {"/dev/nvidia-caps/nvidia-cap85", Node(511, 85, 0444)},
      {"/dev/nvidia-caps/nvidia-cap93", Node(511, 93, 0444)},
      {"/dev/nvidia-caps/nvidia-cap94", Node(511, 94, 0444)},
      {"/dev/dri/card2", Node(226, 2, 0660, 44)},
      {"/dev/dri/renderD130", Node(226, 130, 0666)},
  };
  in.cap_minors.Add(0, 9, -1, 84);
  in.cap_minors.Add(0, 9, 0, 85);
  in.cap_minors.Add(0, 10, -1, 93);
  in.cap_minors.Add(0, 10, 0, 94);
  in.dri_by_pci["0000:2a:00.0"] = {"/dev/dri/card2", "/dev/dri/renderD130"};
  in.libraries = {std::string(kLib) + "/libcuda.so." + kV,
                  std::string(kLib) + "/libnvidia-ml.so." + kV,
                  std::string(kLib) + "/libnvidia-nvvm70.so.4",
                  std::string(kLib) + "/libnvidia-opticalflow.so." + kV,
                  std::string(kLib) + "/vdpau/libvdpau_nvidia.so." + kV};
  in.libcuda_dir = kLib;
  in.binaries = {"/usr/bin/nvidia-smi", "/usr/bin/nvidia-persistenced"};
  in.firmware = {std::string("/lib/firmware/nvidia/") + kV + "/gsp_ga10x.bin"};
  in.sockets = {"/run/nvidia-persistenced/socket", "/tmp/nvidia-mps"};
  return in;
}

CdiBuildOptions Options() {
  CdiBuildOptions o;
  o.hook_path = "/usr/local/nvidia/toolkit/gpuop";
  return o;
}

std::vector<std::string> Names(const cdi::Spec& s) {
  std::vector<std::string> n;
  for (const auto& d : s.devices) n.push_back(d.name);
  return n;
}

const cdi::Device* Find(const cdi::Spec& s, const std::string& name) {
  for (const auto& d : s.devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

TEST(CdiBuildTest, GoldenTwoGpusOneMigEnabled) {
  auto spec = BuildSpec(TwoGpus(), Options());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const std::string got = cdi::ToYaml(*spec);
  const std::string path = std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/cdi/two-gpu-mig.yaml";
  if (std::getenv("GPUOP_UPDATE_GOLDEN")) {
    ASSERT_TRUE(WriteFileAtomic(path, got).ok());
  }
  auto want = ReadFile(path);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_EQ(got, *want) << "regenerate with GPUOP_UPDATE_GOLDEN=1 if the change is intended";
  // The golden file is itself a valid spec that parses back to the same value.
  auto back = cdi::Parse(*want);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *spec);
  EXPECT_TRUE(cdi::Validate(*back).ok());
}

TEST(CdiBuildTest, MigEnabledGpuHasOnlyItsMigDevices) {
  auto spec = BuildSpec(TwoGpus(), Options());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(Names(*spec),
            (std::vector<std::string>{"0:0", "MIG-aaaaaaaa-1111-2222-3333-444444444444", "0:1",
                                      "MIG-bbbbbbbb-1111-2222-3333-444444444444", "1",
                                      "GPU-11111111-1111-2222-3333-444444444444", "all"}));
  const cdi::Device* mig = Find(*spec, "0:1");
  ASSERT_NE(mig, nullptr);
  ASSERT_EQ(mig->edits.device_nodes.size(), 3u);
  EXPECT_EQ(mig->edits.device_nodes[0].path, "/dev/nvidia0");
  EXPECT_EQ(mig->edits.device_nodes[1].path, "/dev/nvidia-caps/nvidia-cap93");
  EXPECT_EQ(mig->edits.device_nodes[2].path, "/dev/nvidia-caps/nvidia-cap94");
  EXPECT_EQ(mig->edits.device_nodes[2].minor, 94);
  // The whole GPU 1 has its DRI nodes and the card's group.
  const cdi::Device* g1 = Find(*spec, "1");
  ASSERT_NE(g1, nullptr);
  EXPECT_EQ(g1->edits.device_nodes.size(), 3u);
  EXPECT_TRUE(g1->edits.additional_gids.empty()) << "additionalGids is opt-in";
  ASSERT_EQ(g1->edits.hooks.size(), 1u);
  EXPECT_EQ(g1->edits.hooks[0].args,
            (std::vector<std::string>{"gpuop", "cdi", "hook", "create-symlinks", "--link",
                                      "../card2::/dev/dri/by-path/pci-0000:2a:00.0-card", "--link",
                                      "../renderD130::/dev/dri/by-path/pci-0000:2a:00.0-render"}));
  // "all" has every node once.
  const cdi::Device* all = Find(*spec, "all");
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->edits.device_nodes.size(), 8u);
  // Digits-first names and hostPath need 0.5.0, which podman 4.3 still reads.
  EXPECT_EQ(spec->cdi_version, "0.5.0");
}

TEST(CdiBuildTest, AdditionalGidsOnRequestRaiseTheVersion) {
  CdiBuildOptions o = Options();
  o.additional_gids = true;
  auto spec = BuildSpec(TwoGpus(), o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const cdi::Device* g1 = Find(*spec, "1");
  ASSERT_NE(g1, nullptr);
  EXPECT_EQ(g1->edits.additional_gids, std::vector<uint32_t>{44});  // the card's group
  EXPECT_EQ(spec->cdi_version, "0.7.0");
}

TEST(CdiBuildTest, TopLevelEdits) {
  auto spec = BuildSpec(TwoGpus(), Options());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const cdi::ContainerEdits& e = spec->edits;
  ASSERT_EQ(e.device_nodes.size(), 4u);
  EXPECT_EQ(e.device_nodes[3].path, "/dev/nvidiactl");
  EXPECT_EQ(e.device_nodes[3].type, "c");
  EXPECT_EQ(e.device_nodes[3].major, 195);
  EXPECT_EQ(e.device_nodes[3].minor, 255);
  EXPECT_EQ(e.device_nodes[3].file_mode, 0666u);
  EXPECT_TRUE(e.device_nodes[3].host_path.empty());
  EXPECT_EQ(e.env, (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=void",
                                             "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu"}));
  ASSERT_EQ(e.mounts.size(), 10u);
  EXPECT_EQ(e.mounts[0].options, kReadOnlyMountOptions);
  EXPECT_EQ(e.mounts.back().container_path, "/tmp/nvidia-mps");
  EXPECT_EQ(e.mounts.back().options, kSocketMountOptions);
  ASSERT_EQ(e.hooks.size(), 2u);
  EXPECT_EQ(e.hooks[0].path, "/usr/local/nvidia/toolkit/gpuop");
  EXPECT_EQ(e.hooks[0].hook_name, "createContainer");
  EXPECT_EQ(e.hooks[0].args,
            (std::vector<std::string>{
                "gpuop", "cdi", "hook", "create-symlinks", "--link",
                "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so", "--link",
                "libnvidia-opticalflow.so.1::/usr/lib/x86_64-linux-gnu/libnvidia-opticalflow.so"}));
  EXPECT_EQ(e.hooks[1].args, (std::vector<std::string>{"gpuop", "cdi", "hook", "update-ldcache",
                                                       "--folder", "/usr/lib/x86_64-linux-gnu"}));
}

TEST(CdiBuildTest, RootsPrefixHostPaths) {
  CdiBuildOptions o = Options();
  o.driver_root = "/run/nvidia/driver";
  o.dev_root = "/run/nvidia/dev";
  auto spec = BuildSpec(TwoGpus(), o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->edits.device_nodes[3].host_path, "/run/nvidia/dev/dev/nvidiactl");
  EXPECT_EQ(spec->edits.mounts[0].host_path,
            "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08");
  EXPECT_EQ(spec->edits.mounts[0].container_path,
            "/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08");
}

TEST(CdiBuildTest, NameStrategies) {
  const CdiInputs in = TwoGpus();
  const CdiGpuInput& g0 = in.gpus[0];
  const CdiGpuInput& g1 = in.gpus[1];
  using S = DeviceNameStrategy;
  EXPECT_EQ(GpuDeviceNames(g1, {S::kIndex, S::kUuid, S::kTypeIndex}),
            (std::vector<std::string>{"1", g1.uuid, "gpu1"}));
  EXPECT_EQ(MigDeviceNames(g0, g0.migs[1], {S::kTypeIndex, S::kIndex}),
            (std::vector<std::string>{"mig0:1", "0:1"}));
  CdiBuildOptions o = Options();
  o.name_strategies = {S::kTypeIndex};
  o.no_all_device = true;
  auto spec = BuildSpec(TwoGpus(), o);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(Names(*spec), (std::vector<std::string>{"mig0:0", "mig0:1", "gpu1"}));

  auto parsed = ParseDeviceNameStrategies("uuid, index,uuid");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, (std::vector<S>{S::kUuid, S::kIndex}));
  auto bad = ParseDeviceNameStrategies("index,serial");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"serial\""), std::string::npos);
  EXPECT_FALSE(ParseDeviceNameStrategies("").ok());
}

TEST(CdiBuildTest, MissingInputsAreClearErrors) {
  struct Case {
    const char* what;
    void (*change)(CdiInputs&, CdiBuildOptions&);
    const char* error;
  };
  const Case cases[] = {
      {"no nvidiactl",
       [](CdiInputs& in, CdiBuildOptions& o) {
         in.device_nodes.erase("/dev/nvidiactl");
         o.driver_root = "/run/nvidia/driver";
         o.dev_root = "/run/nvidia/driver";
       },
       "/run/nvidia/driver/dev/nvidiactl is missing: is the NVIDIA driver loaded? (driver root "
       "/run/nvidia/driver"},
      {"no libraries", [](CdiInputs& in, CdiBuildOptions&) { in.libraries.clear(); },
       "no NVIDIA driver libraries for driver version 570.172.08 under driver root /"},
      {"no gpus", [](CdiInputs& in, CdiBuildOptions&) { in.gpus.clear(); }, "NVML reports no GPUs"},
      {"gpu node", [](CdiInputs& in, CdiBuildOptions&) { in.device_nodes.erase("/dev/nvidia1"); },
       "GPU 1 (GPU-11111111-1111-2222-3333-444444444444): device node /dev/nvidia1 is missing"},
      {"cap node",
       [](CdiInputs& in, CdiBuildOptions&) {
         in.device_nodes.erase("/dev/nvidia-caps/nvidia-cap94");
       },
       "MIG device 0:1 (MIG-bbbbbbbb-1111-2222-3333-444444444444, GPU instance 10, compute "
       "instance "
       "0): device node /dev/nvidia-caps/nvidia-cap94 is missing"},
      {"cap table", [](CdiInputs& in, CdiBuildOptions&) { in.cap_minors = {}; },
       "no entry gpu0/gi9/access in /proc/driver/nvidia-caps/mig-minors"},
      {"mig without devices",
       [](CdiInputs& in, CdiBuildOptions&) {
         in.gpus.pop_back();
         in.gpus[0].migs.clear();
       },
       "every GPU is in MIG mode without MIG devices"},
      {"relative hook", [](CdiInputs&, CdiBuildOptions& o) { o.hook_path = "gpuop"; },
       "--hook-path"},
      {"bad vendor", [](CdiInputs&, CdiBuildOptions& o) { o.vendor = "nvidia com"; },
       "vendor \"nvidia com\""},
  };
  for (const Case& c : cases) {
    CdiInputs in = TwoGpus();
    CdiBuildOptions o = Options();
    c.change(in, o);
    auto spec = BuildSpec(in, o);
    ASSERT_FALSE(spec.ok()) << c.what;
    EXPECT_NE(spec.status().message().find(c.error), std::string::npos)
        << c.what << ": " << spec.status().message();
  }
}

TEST(CdiBuildTest, OptionalControlNodesMayBeAbsent) {
  CdiInputs in = TwoGpus();
  in.device_nodes.erase("/dev/nvidia-modeset");
  in.device_nodes.erase("/dev/nvidia-uvm-tools");
  auto spec = BuildSpec(in, Options());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->edits.device_nodes.size(), 2u);
}

}  // namespace
}  // namespace gpuop::toolkit
