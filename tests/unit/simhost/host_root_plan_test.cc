#include <algorithm>
#include <string>
#include <vector>

#include "base/strings.h"
#include "gtest/gtest.h"
#include "sim/host/host_root.h"
#include "tests/unit/simhost/test_machines.h"

namespace gpuop::sim {
namespace {

using testing::DgxH100;
using testing::FourL40s;
using testing::OneA100;

const char kLib[] = "/usr/lib/x86_64-linux-gnu/";
const char kVer[] = "570.172.08";

HostRootPlan Plan(const Machine& m, HostRootOptions o = {}) {
  auto plan = PlanHostRoot(m, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : HostRootPlan{};
}

const HostEntry& Get(const HostRootPlan& plan, const std::string& path) {
  const HostEntry* e = plan.Find(path);
  static const HostEntry kMissing{HostEntryType::kDirectory, "<missing>"};
  EXPECT_NE(e, nullptr) << path << " is not in the plan";
  return e ? *e : kMissing;
}

void ExpectCharDev(const HostRootPlan& plan, const std::string& path, unsigned major,
                   unsigned minor, mode_t mode) {
  const HostEntry& e = Get(plan, path);
  EXPECT_EQ(e.type, HostEntryType::kCharDevice) << path;
  EXPECT_EQ(e.major, major) << path;
  EXPECT_EQ(e.minor, minor) << path;
  EXPECT_EQ(e.mode, mode) << path;
}

std::vector<std::string> PathsUnder(const HostRootPlan& plan, const std::string& prefix) {
  std::vector<std::string> out;
  for (const HostEntry& e : plan.entries) {
    if (StartsWith(e.path, prefix)) out.push_back(e.path);
  }
  return out;
}

TEST(MigMinorsTest, NumberingFollowsTheDriverTable) {
  EXPECT_EQ(MigGiCapMinor(0, 0), 3u);
  EXPECT_EQ(MigCiCapMinor(0, 0, 0), 4u);
  EXPECT_EQ(MigCiCapMinor(0, 0, 7), 11u);
  EXPECT_EQ(MigGiCapMinor(0, 1), 12u);
  EXPECT_EQ(MigGiCapMinor(0, 11), 102u);
  EXPECT_EQ(MigCiCapMinor(0, 14, 7), 137u);
  EXPECT_EQ(MigGiCapMinor(1, 0), 138u);
  EXPECT_EQ(MigCiCapMinor(31, 14, 7), 4322u);
}

TEST(MigMinorsTest, FileListsTheWholeStaticTableInOrder) {
  std::vector<std::string> lines = Split(MigMinorsFileContent(), '\n');
  ASSERT_EQ(lines.size(), 2u + 32u * 15u * 9u);
  EXPECT_EQ(lines[0], "config 1");
  EXPECT_EQ(lines[1], "monitor 2");
  EXPECT_EQ(lines[2], "gpu0/gi0/access 3");
  EXPECT_EQ(lines[3], "gpu0/gi0/ci0/access 4");
  EXPECT_EQ(lines[10], "gpu0/gi0/ci7/access 11");
  EXPECT_EQ(lines[11], "gpu0/gi1/access 12");
  EXPECT_EQ(lines[12], "gpu0/gi1/ci0/access 13");
  EXPECT_EQ(lines[2 + 135], "gpu1/gi0/access 138");
  EXPECT_EQ(lines.back(), "gpu31/gi14/ci7/access 4322");
  // Minors are dense and increasing, as the driver allocates them.
  for (size_t i = 0; i < lines.size(); ++i) {
    auto parts = Split(lines[i], ' ');
    ASSERT_EQ(parts.size(), 2u) << lines[i];
    EXPECT_EQ(parts[1], std::to_string(i + 1)) << lines[i];
  }
}

TEST(SysfsPciAddressTest, ConvertsNvmlBusIds) {
  EXPECT_EQ(*SysfsPciAddress("00000000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(*SysfsPciAddress("00000000:DB:00.0"), "0000:db:00.0");
  EXPECT_EQ(*SysfsPciAddress("0001:A0:1f.7"), "0001:a0:1f.7");
  for (const char* bad : {"", "18:00.0", "00000000:18:00", "00000000:18:00.0x", "00000000:100:00.0",
                          "00000000:18:20.0", "00000000:18:00.8", "00000000:18:00.-1",
                          "-0000000:18:00.0", "0x000000:18:00.0"}) {
    EXPECT_FALSE(SysfsPciAddress(bad).ok()) << bad;
  }
}

TEST(PciClassTest, DataCentreGpusAre3dControllers) {
  EXPECT_EQ(PciClassForModel(testing::H100Model()), 0x030200u);
  EXPECT_EQ(PciClassForModel(testing::L40sModel()), 0x030200u);
  GpuModel vga;
  vga.name = "NVIDIA GeForce RTX 4090";
  EXPECT_EQ(PciClassForModel(vga), 0x030000u);
}

TEST(HostRootPlanTest, DgxH100DeviceNodes) {
  HostRootPlan plan = Plan(DgxH100());
  EXPECT_EQ(plan.gpus, 8u);
  ExpectCharDev(plan, "/dev/nvidiactl", 195, 255, 0666);
  ExpectCharDev(plan, "/dev/nvidia-modeset", 195, 254, 0666);
  ExpectCharDev(plan, "/dev/nvidia-uvm", kNvidiaUvmMajor, 0, 0666);
  ExpectCharDev(plan, "/dev/nvidia-uvm-tools", kNvidiaUvmMajor, 1, 0666);
  ExpectCharDev(plan, "/dev/nvidia-caps/nvidia-cap1", kNvidiaCapsMajor, 1, 0400);
  ExpectCharDev(plan, "/dev/nvidia-caps/nvidia-cap2", kNvidiaCapsMajor, 2, 0444);
  for (unsigned i = 0; i < 8; ++i) {
    ExpectCharDev(plan, "/dev/nvidia" + std::to_string(i), 195, i, 0666);
    ExpectCharDev(plan, "/dev/dri/card" + std::to_string(i), 226, i, 0660);
    ExpectCharDev(plan, "/dev/dri/renderD" + std::to_string(128 + i), 226, 128 + i, 0666);
  }
  EXPECT_EQ(Get(plan, "/dev/dri/card0").gid, 44u);
  // Every GI and CI cap of each of the 8 MIG-capable GPUs, and no others.
  EXPECT_EQ(PathsUnder(plan, "/dev/nvidia-caps/").size(), 2u + 8u * 135u);
  ExpectCharDev(plan, "/dev/nvidia-caps/nvidia-cap3", kNvidiaCapsMajor, 3, 0444);
  ExpectCharDev(plan, "/dev/nvidia-caps/nvidia-cap1082", kNvidiaCapsMajor, 1082, 0444);
  EXPECT_EQ(plan.Find("/dev/nvidia-caps/nvidia-cap1083"), nullptr);
  EXPECT_EQ(plan.CountDeviceNodes(), 4u + 2u + 8u * 3u + 8u * 135u);
  EXPECT_EQ(Get(plan, "/dev/dri/by-path/pci-0000:db:00.0-render").content, "../renderD135");
}

TEST(HostRootPlanTest, DgxH100ProcFiles) {
  HostRootPlan plan = Plan(DgxH100());
  EXPECT_EQ(Get(plan, "/proc/driver/nvidia-caps/mig-minors").content, MigMinorsFileContent());
  const std::string info = Get(plan, "/proc/driver/nvidia/gpus/0000:2a:00.0/information").content;
  EXPECT_NE(info.find("Model: \t\t NVIDIA H100 80GB HBM3\n"), std::string::npos) << info;
  EXPECT_NE(info.find("GPU UUID: \t GPU-00000001-1111-2222-3333-444444444444\n"),
            std::string::npos);
  EXPECT_NE(info.find("Bus Location: \t 0000:2a:00.0\n"), std::string::npos);
  EXPECT_NE(info.find("Device Minor: \t 1\n"), std::string::npos);
  EXPECT_NE(info.find("IRQ:"), std::string::npos);
  EXPECT_TRUE(StartsWith(Get(plan, "/proc/driver/nvidia/version").content, "NVRM version: "));
  EXPECT_NE(Get(plan, "/proc/driver/nvidia/version").content.find("  570.172.08  "),
            std::string::npos);
  const std::string devices = Get(plan, "/proc/devices").content;
  EXPECT_NE(devices.find("\n195 nvidia-frontend\n"), std::string::npos);
  EXPECT_NE(devices.find("\n510 nvidia-uvm\n"), std::string::npos);
  EXPECT_NE(devices.find("\n511 nvidia-caps\n"), std::string::npos);
  EXPECT_EQ(Get(plan, "/proc/driver/nvidia/capabilities/mig/config").content,
            "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n");
}

TEST(HostRootPlanTest, DgxH100Sysfs) {
  HostRootPlan plan = Plan(DgxH100());
  const std::string gpu = "/sys/bus/pci/devices/0000:5d:00.0/";
  EXPECT_EQ(Get(plan, gpu + "vendor").content, "0x10de\n");
  EXPECT_EQ(Get(plan, gpu + "device").content, "0x2330\n");
  EXPECT_EQ(Get(plan, gpu + "class").content, "0x030200\n");
  EXPECT_EQ(Get(plan, gpu + "subsystem_vendor").content, "0x10de\n");
  EXPECT_EQ(Get(plan, gpu + "subsystem_device").content, "0x16c1\n");
  EXPECT_EQ(Get(plan, gpu + "numa_node").content, "0\n");
  EXPECT_EQ(Get(plan, "/sys/bus/pci/devices/0000:db:00.0/numa_node").content, "1\n");
  EXPECT_EQ(Get(plan, gpu + "drm/card3/dev").content, "226:3\n");
  EXPECT_EQ(Get(plan, gpu + "drm/renderD131/dev").content, "226:131\n");
  EXPECT_EQ(Get(plan, gpu + "driver").content, "../../drivers/nvidia");
  // Other vendors' devices sit beside the GPUs; one is even a VGA controller.
  size_t vendors = 0, nvidia = 0;
  for (const HostEntry& e : plan.entries) {
    if (StartsWith(e.path, "/sys/bus/pci/devices/") && EndsWith(e.path, "/vendor")) {
      ++vendors;
      nvidia += e.content == "0x10de\n";
    }
  }
  EXPECT_EQ(nvidia, 8u);
  EXPECT_GE(vendors, 11u);
  EXPECT_EQ(Get(plan, "/sys/bus/pci/devices/0000:03:00.0/class").content, "0x030000\n");
  EXPECT_EQ(Get(plan, "/sys/bus/pci/devices/0000:03:00.0/vendor").content, "0x1a03\n");
}

TEST(HostRootPlanTest, DriverLibrariesCarryTheirRealSonames) {
  HostRootPlan plan = Plan(DgxH100());
  EXPECT_EQ(plan.lib_dir, "/usr/lib/x86_64-linux-gnu");
  struct Want {
    std::string file, soname;
  };
  const std::string v = kVer;
  for (const Want& w : std::vector<Want>{
           {"libcuda.so." + v, "libcuda.so.1"},
           {"libnvidia-ml.so." + v, "libnvidia-ml.so.1"},
           {"libnvidia-ptxjitcompiler.so." + v, "libnvidia-ptxjitcompiler.so.1"},
           {"libnvidia-nvvm.so." + v, "libnvidia-nvvm.so.4"},
           {"libcudadebugger.so." + v, "libcudadebugger.so.1"},
           {"libnvidia-opencl.so." + v, "libnvidia-opencl.so.1"},
           {"libnvidia-cfg.so." + v, "libnvidia-cfg.so.1"},
           {"libnvidia-gpucomp.so." + v, "libnvidia-gpucomp.so." + v},
           {"libnvidia-allocator.so." + v, "libnvidia-allocator.so.1"},
           {"libnvidia-pkcs11.so." + v, "libnvidia-pkcs11.so." + v},
           {"libnvidia-encode.so." + v, "libnvidia-encode.so.1"},
           {"libnvcuvid.so." + v, "libnvcuvid.so.1"},
           {"libnvidia-opticalflow.so." + v, "libnvidia-opticalflow.so.1"},
           {"libnvidia-fbc.so." + v, "libnvidia-fbc.so.1"},
           {"libnvidia-nvvm70.so.4", "libnvidia-nvvm70.so.4"},
           {"vdpau/libvdpau_nvidia.so." + v, "libvdpau_nvidia.so.1"},
       }) {
    const HostEntry& e = Get(plan, kLib + w.file);
    EXPECT_EQ(e.type, HostEntryType::kFile) << w.file;
    EXPECT_EQ(e.soname, w.soname) << w.file;
    auto elf = ReadElfSharedObject(e.content);
    ASSERT_TRUE(elf.ok()) << w.file << ": " << elf.status().ToString();
    EXPECT_EQ(elf->soname, w.soname) << w.file;
    EXPECT_EQ(elf->machine, kElfMachineX86_64);
  }
  EXPECT_EQ(plan.CountLibraries(), 17u);
  EXPECT_EQ(Get(plan, std::string(kLib) + "vdpau/libvdpau_nvidia.so.1").content,
            "libvdpau_nvidia.so." + v);
  EXPECT_EQ(Get(plan, "/etc/ld.so.conf").content.find("/usr/lib/x86_64-linux-gnu\n") == 0 ||
                Get(plan, "/etc/ld.so.conf").content.find("\n/usr/lib/x86_64-linux-gnu\n") !=
                    std::string::npos,
            true);
}

TEST(HostRootPlanTest, NvmlSimulatorIsInstalledAsLibnvidiaMl) {
  HostRootOptions o;
  o.nvml_sim_library = "/opt/gpuop/lib/libnvml-sim.so";
  HostRootPlan plan = Plan(DgxH100(), o);
  const HostEntry& e = Get(plan, std::string(kLib) + "libnvidia-ml.so." + kVer);
  EXPECT_EQ(e.type, HostEntryType::kCopy);
  EXPECT_EQ(e.content, "/opt/gpuop/lib/libnvml-sim.so");
  EXPECT_EQ(e.soname, "libnvidia-ml.so.1");
}

TEST(HostRootPlanTest, BinariesFirmwareSocketsAndDirectories) {
  HostRootPlan plan = Plan(DgxH100());
  for (const char* bin : {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                          "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}) {
    const HostEntry& e = Get(plan, std::string("/usr/bin/") + bin);
    EXPECT_EQ(e.mode, 0755u) << bin;
    EXPECT_TRUE(StartsWith(e.content, "#!/bin/sh\n")) << bin;
    EXPECT_NE(e.content.find("simulated"), std::string::npos) << bin;
  }
  EXPECT_EQ(Get(plan, "/lib/firmware/nvidia/570.172.08/gsp_ga10x.bin").type, HostEntryType::kFile);
  EXPECT_EQ(Get(plan, "/lib/firmware/nvidia/570.172.08/gsp_tu10x.bin").type, HostEntryType::kFile);
  EXPECT_EQ(Get(plan, "/run/nvidia-persistenced/socket").type, HostEntryType::kSocket);
  EXPECT_EQ(Get(plan, "/run/nvidia-fabricmanager/socket").type, HostEntryType::kSocket);
  for (const char* dir : {"/tmp/nvidia-mps", "/etc/kubernetes/node-feature-discovery/features.d",
                          "/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources",
                          "/run/nvidia/validations"}) {
    EXPECT_EQ(Get(plan, dir).type, HostEntryType::kDirectory) << dir;
  }
  EXPECT_EQ(Get(plan, "/var/run").content, "../run");  // relative: stays in the root
}

TEST(HostRootPlanTest, OneA100HasCapsForItsOwnMinorOnly) {
  HostRootPlan plan = Plan(OneA100());
  EXPECT_EQ(Get(plan, "/sys/bus/pci/devices/0000:07:00.0/device").content, "0x20b0\n");
  EXPECT_EQ(Get(plan, "/sys/bus/pci/devices/0000:07:00.0/subsystem_device").content, "0x134f\n");
  EXPECT_EQ(PathsUnder(plan, "/dev/nvidia-caps/").size(), 2u + 135u);
  EXPECT_NE(plan.Find("/dev/nvidia-caps/nvidia-cap137"), nullptr);
  EXPECT_EQ(plan.Find("/dev/nvidia-caps/nvidia-cap138"), nullptr);
}

TEST(HostRootPlanTest, L40sHasNoMigCapabilityNodes) {
  HostRootPlan plan = Plan(FourL40s());
  std::vector<std::string> caps = PathsUnder(plan, "/dev/nvidia-caps/");
  EXPECT_EQ(caps, (std::vector<std::string>{"/dev/nvidia-caps/nvidia-cap1",
                                            "/dev/nvidia-caps/nvidia-cap2"}));
  EXPECT_EQ(plan.CountDeviceNodes(), 4u + 2u + 4u * 3u);
  EXPECT_EQ(Get(plan, "/sys/bus/pci/devices/0000:c1:00.0/device").content, "0x26b9\n");
  // The driver's mig-minors table does not depend on the GPUs.
  EXPECT_EQ(Get(plan, "/proc/driver/nvidia-caps/mig-minors").content, MigMinorsFileContent());
}

TEST(HostRootPlanTest, Aarch64UsesItsTripletAndMachine) {
  HostRootOptions o;
  o.elf_machine = kElfMachineAarch64;
  HostRootPlan plan = Plan(OneA100(), o);
  EXPECT_EQ(plan.lib_dir, "/usr/lib/aarch64-linux-gnu");
  const HostEntry& e = Get(plan, "/usr/lib/aarch64-linux-gnu/libcuda.so.570.172.08");
  EXPECT_EQ(ReadElfSharedObject(e.content)->machine, kElfMachineAarch64);
  EXPECT_NE(Get(plan, "/proc/driver/nvidia/version").content.find("for aarch64"),
            std::string::npos);
}

TEST(HostRootPlanTest, NoGpusStillGivesADriverTree) {
  Machine m = testing::MakeMachine("empty", testing::L40sModel(), {});
  HostRootPlan plan = Plan(m);
  EXPECT_EQ(plan.gpus, 0u);
  EXPECT_EQ(plan.CountDeviceNodes(), 6u);
  EXPECT_EQ(plan.CountLibraries(), 17u);
}

TEST(HostRootPlanTest, RejectsBadMachines) {
  Machine dup = DgxH100();
  dup.gpus[3].minor = 1;
  auto r = PlanHostRoot(dup, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPU 3 has minor 1"), std::string::npos)
      << r.status().message();

  Machine bad_bus = OneA100();
  bad_bus.gpus[0].bus_id = "nonsense";
  r = PlanHostRoot(bad_bus, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPU 0"), std::string::npos);

  Machine same_bus = DgxH100();
  same_bus.gpus[1].bus_id = same_bus.gpus[0].bus_id;
  EXPECT_FALSE(PlanHostRoot(same_bus, {}).ok());

  Machine no_version = OneA100();
  no_version.driver_version = "";
  EXPECT_FALSE(PlanHostRoot(no_version, {}).ok());

  HostRootOptions arm32;
  arm32.elf_machine = 40;
  EXPECT_EQ(PlanHostRoot(OneA100(), arm32).status().code(), StatusCode::kNotSupported);
}

TEST(HostRootPlanTest, PathsAreAbsoluteAndUnique) {
  HostRootPlan plan = Plan(DgxH100());
  std::vector<std::string> paths;
  for (const HostEntry& e : plan.entries) {
    EXPECT_TRUE(StartsWith(e.path, "/")) << e.path;
    EXPECT_EQ(e.path.find(".."), std::string::npos) << e.path;
    paths.push_back(e.path);
  }
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(std::adjacent_find(paths.begin(), paths.end()), paths.end());
}

}  // namespace
}  // namespace gpuop::sim

namespace gpuop::sim {
namespace {

// The presets of machine.cc all make valid host roots.
TEST(HostRootPresetTest, EveryPresetPlans) {
  for (const std::string& preset : PresetNames()) {
    auto machine = LoadMachine(preset, "node-a");
    ASSERT_TRUE(machine.ok()) << preset << ": " << machine.status().ToString();
    auto plan = PlanHostRoot(*machine, {});
    ASSERT_TRUE(plan.ok()) << preset << ": " << plan.status().ToString();
    EXPECT_EQ(plan->gpus, machine->gpus.size()) << preset;
    size_t mig_gpus = 0;
    for (const SimGpu& g : machine->gpus) {
      mig_gpus += g.model.mig_capable();
      EXPECT_NE(plan->Find("/dev/nvidia" + std::to_string(g.minor)), nullptr) << preset;
      const HostEntry* vendor =
          plan->Find("/sys/bus/pci/devices/" + *SysfsPciAddress(g.bus_id) + "/vendor");
      ASSERT_NE(vendor, nullptr) << preset << " " << g.bus_id;
      EXPECT_EQ(vendor->content, "0x10de\n") << preset;
    }
    EXPECT_EQ(plan->CountDeviceNodes(), 6 + 3 * machine->gpus.size() + 135 * mig_gpus) << preset;
  }
}

TEST(HostRootPresetTest, DgxH100Preset) {
  auto machine = LoadMachine("dgx-h100", "dgx-h100");
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  auto plan = PlanHostRoot(*machine, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->gpus, 8u);
  EXPECT_EQ(plan->CountDeviceNodes(), 6u + 8u * 3u + 8u * 135u);
  const SimGpu& g = machine->gpus[0];
  const HostEntry* info =
      plan->Find("/proc/driver/nvidia/gpus/" + *SysfsPciAddress(g.bus_id) + "/information");
  ASSERT_NE(info, nullptr);
  EXPECT_NE(info->content.find(g.uuid), std::string::npos);
  EXPECT_NE(info->content.find(g.model.name), std::string::npos);
}

// The driver's installation (what a driver container brings) against the node
// (what the kernel and the hardware show).
TEST(HostRootPlanTest, DriverFilesAreTheInstallation) {
  HostRootPlan plan = Plan(DgxH100());
  const std::string lib = std::string(kLib) + "libnvidia-ml.so." + kVer;
  const std::string firmware = std::string("/lib/firmware/nvidia/") + kVer + "/gsp_ga10x.bin";
  for (const std::string& path : {lib, std::string("/usr/bin/nvidia-smi"), firmware}) {
    EXPECT_TRUE(IsDriverFile(plan, Get(plan, path))) << path;
  }
  for (const char* path : {"/dev/nvidia0", "/dev/nvidiactl", "/proc/driver/nvidia/version",
                           "/sys/module/nvidia/version", "/etc/ld.so.conf",
                           "/sys/module/firmware_class/parameters/path"}) {
    EXPECT_FALSE(IsDriverFile(plan, Get(plan, path))) << path;
  }
}

TEST(HostRootPlanTest, WithoutDriverFilesIsABareNode) {
  HostRootPlan plan = Plan(DgxH100());
  HostRootPlan bare = WithoutDriverFiles(plan);
  EXPECT_EQ(bare.gpus, plan.gpus);
  EXPECT_EQ(bare.lib_dir, plan.lib_dir);
  EXPECT_EQ(bare.CountLibraries(), 0u);
  EXPECT_EQ(bare.CountDeviceNodes(), plan.CountDeviceNodes());  // the node's, kept
  for (const HostEntry& e : bare.entries) {
    EXPECT_FALSE(StartsWith(e.path, std::string(kLib) + "libnvidia-ml")) << e.path;
    EXPECT_FALSE(StartsWith(e.path, "/usr/bin/nvidia-")) << e.path;
    EXPECT_FALSE(StartsWith(e.path, "/lib/firmware/")) << e.path;
    EXPECT_FALSE(IsDriverFile(plan, e)) << e.path;
  }
  // What only a loaded module shows is gone too.
  EXPECT_EQ(bare.Find("/proc/driver/nvidia/version"), nullptr);
  EXPECT_EQ(bare.Find("/sys/module/nvidia/version"), nullptr);
  for (const char* path : {"/dev/nvidia0", "/dev/nvidia7", "/dev/nvidiactl", "/dev/nvidia-uvm",
                           "/dev/nvidia-caps/nvidia-cap1", "/proc/driver/nvidia-caps/mig-minors",
                           "/sys/module/firmware_class/parameters/path"}) {
    EXPECT_NE(bare.Find(path), nullptr) << path;
  }
}

TEST(HostRootPlanTest, DriverFilesOnlyIsTheDriverRoot) {
  HostRootPlan plan = Plan(DgxH100());
  HostRootPlan driver = DriverFilesOnly(plan);
  EXPECT_EQ(driver.CountLibraries(), plan.CountLibraries());
  EXPECT_EQ(driver.CountDeviceNodes(), 0u);
  for (const HostEntry& e : driver.entries) {
    EXPECT_TRUE(IsDriverFile(plan, e) || e.path == "/etc/ld.so.conf" ||
                e.path == "/var/cache/ldconfig")
        << e.path;
  }
  for (const std::string& path :
       {std::string(kLib) + "libnvidia-ml.so." + kVer, std::string("/usr/bin/nvidia-smi"),
        std::string("/lib/firmware/nvidia/") + kVer + "/gsp_tu10x.bin",
        std::string("/etc/ld.so.conf")}) {
    EXPECT_NE(driver.Find(path), nullptr) << path;
  }
  EXPECT_EQ(driver.Find("/proc/driver/nvidia/version"), nullptr);
  // The two halves are the whole plan: the loader configuration (ld.so.conf,
  // its aux cache dir) is in both, what only a loaded module shows in neither.
  EXPECT_EQ(WithoutDriverFiles(plan).entries.size() + driver.entries.size(), plan.entries.size());
}

TEST(HostRootPlanTest, FirmwareSearchPathParameterIsEmptyAndWritable) {
  HostRootPlan plan = Plan(OneA100());
  const HostEntry& e = Get(plan, "/sys/module/firmware_class/parameters/path");
  EXPECT_EQ(e.type, HostEntryType::kFile);
  EXPECT_EQ(e.content, "\n");  // no custom path: the kernel searches /lib/firmware
  EXPECT_EQ(e.mode, 0644u);    // root sets it to point the loader at a driver root
}

}  // namespace
}  // namespace gpuop::sim
