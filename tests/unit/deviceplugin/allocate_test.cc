#include "deviceplugin/allocate.h"

#include <gtest/gtest.h>

namespace gpuop::deviceplugin {
namespace {

constexpr char kGpu0[] = "GPU-6f1e4a2b-1c3d-4e5f-8a9b-0c1d2e3f4a5b";
constexpr char kGpu1[] = "GPU-7a2b3c4d-5e6f-4a1b-9c8d-7e6f5a4b3c2d";
constexpr char kMig10[] = "MIG-1b2c3d4e-5f6a-5b7c-8d9e-0f1a2b3c4d5e";
constexpr char kMig11[] = "MIG-2c3d4e5f-6a7b-5c8d-9e0f-1a2b3c4d5e6f";
constexpr char kFixedUuid[] = "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e";

Unit GpuUnit(unsigned i, const char* uuid) {
  Unit u;
  u.uuid = uuid;
  u.index = std::to_string(i);
  u.gpu = i;
  u.parent_uuid = uuid;
  u.device_nodes = {"/dev/nvidia" + std::to_string(i)};
  return u;
}

Unit MigUnit(unsigned j, const char* uuid, unsigned gi_cap, unsigned ci_cap) {
  Unit u;
  u.uuid = uuid;
  u.index = "1:" + std::to_string(j);
  u.gpu = 1;
  u.mig = j;
  u.parent_uuid = kGpu1;
  u.profile = "1g.10gb";
  u.device_nodes = {"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap" + std::to_string(gi_cap),
                    "/dev/nvidia-caps/nvidia-cap" + std::to_string(ci_cap)};
  return u;
}

Resource Gpus() {
  return {.name = "nvidia.com/gpu", .units = {GpuUnit(0, kGpu0), GpuUnit(1, kGpu1)}};
}

Resource Migs() {
  return {.name = "nvidia.com/mig-1g.10gb",
          .units = {MigUnit(0, kMig10, 21, 22), MigUnit(1, kMig11, 30, 31)}};
}

Resource Shared(bool fail_greater_than_one) {
  Resource r = Gpus();
  r.replicas = 4;
  r.sharing = Sharing::Kind::kTimeSlicing;
  r.fail_requests_greater_than_one = fail_greater_than_one;
  return r;
}

Config With(std::string_view strategies) {
  Config c;
  c.device_list = *ParseDeviceListStrategy(strategies);
  return c;
}

std::function<std::string()> FixedUuid() {
  return [] { return std::string(kFixedUuid); };
}

std::function<std::string()> NoUuid() {
  return []() -> std::string {
    ADD_FAILURE() << "new_uuid called without cdi-annotations";
    return "x";
  };
}

TEST(DpAllocateTest, EnvvarListsUuids) {
  auto a = Allocate(Gpus(), {kGpu1, kGpu0}, Config{}, NoUuid());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ContainerAllocation want;
  want.envs["NVIDIA_VISIBLE_DEVICES"] = std::string(kGpu1) + "," + kGpu0;
  EXPECT_EQ(*a, want);
}

TEST(DpAllocateTest, IndexStrategyNamesMigDevicesByIndex) {
  Config c;
  c.id_strategy = DeviceIdStrategy::kIndex;
  auto a = Allocate(Migs(), {kMig10, kMig11}, c, NoUuid());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "1:0,1:1");
}

TEST(DpAllocateTest, ReplicaSuffixesAreStrippedAndDuplicatesDropped) {
  auto a =
      Allocate(Shared(false),
               {std::string(kGpu0) + "::0", std::string(kGpu0) + "::3", std::string(kGpu1) + "::1"},
               Config{}, NoUuid());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), std::string(kGpu0) + "," + kGpu1);
}

TEST(DpAllocateTest, FailRequestsGreaterThanOneUsesUpstreamText) {
  auto a = Allocate(Shared(true), {std::string(kGpu0) + "::0", std::string(kGpu1) + "::2"},
                    Config{}, NoUuid());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(),
            "request for 'nvidia.com/gpu: 2' too large: maximum request size for shared "
            "resources is 1");
  EXPECT_TRUE(Allocate(Shared(true), {std::string(kGpu0) + "::3"}, Config{}, NoUuid()).ok());
}

TEST(DpAllocateTest, UnknownDeviceIsAnErrorNamingItAndTheResource) {
  auto a = Allocate(Gpus(), {kGpu0, "GPU-gone"}, Config{}, NoUuid());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(),
            "invalid allocation request for 'nvidia.com/gpu': unknown device: GPU-gone (the "
            "kubelet's device list is stale; it refreshes from ListAndWatch)");
  EXPECT_FALSE(Allocate(Gpus(), {}, Config{}, NoUuid()).ok());
}

TEST(DpAllocateTest, VolumeMountsPointDevNullAtEachId) {
  auto a = Allocate(Gpus(), {kGpu0, kGpu1}, With("volume-mounts"), NoUuid());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->envs, (std::map<std::string, std::string>{
                         {"NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices"}}));
  EXPECT_EQ(a->mounts,
            (std::vector<Mount>{
                {std::string("/var/run/nvidia-container-devices/") + kGpu0, "/dev/null", false},
                {std::string("/var/run/nvidia-container-devices/") + kGpu1, "/dev/null", false}}));
}

TEST(DpAllocateTest, CdiAnnotationsOnlyUseTheToolkitsNames) {
  Config c = With("cdi-annotations");
  c.pass_device_specs = true;  // ignored when only CDI strategies are selected
  c.gds = true;
  auto a = Allocate(Migs(), {kMig11, kMig10}, c, FixedUuid());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ContainerAllocation want;
  want.annotations[std::string("cdi.k8s.io/nvidia-device-plugin_") + kFixedUuid] =
      std::string("nvidia.com/gpu=") + kMig11 + ",nvidia.com/gpu=" + kMig10;
  EXPECT_EQ(*a, want);
}

TEST(DpAllocateTest, CdiCriWithEnvvarSetsBoth) {
  Config c = With("envvar,cdi-cri");
  c.id_strategy = DeviceIdStrategy::kIndex;  // CDI names stay UUIDs
  c.cdi_annotation_prefix = "cdi.example.com/";
  auto a = Allocate(Gpus(), {kGpu0}, c, NoUuid());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->cdi_devices, std::vector<std::string>{std::string("nvidia.com/gpu=") + kGpu0});
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "0");
  EXPECT_TRUE(a->annotations.empty());

  Config both = With("cdi-annotations,cdi-cri");
  both.cdi_annotation_prefix = "cdi.example.com/";
  auto b = Allocate(Gpus(), {kGpu1}, both, FixedUuid());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->annotations.count(std::string("cdi.example.com/nvidia-device-plugin_") + kFixedUuid),
            1u);
  EXPECT_EQ(b->cdi_devices.size(), 1u);
  EXPECT_TRUE(b->envs.empty());
}

TEST(DpAllocateTest, BadAnnotationIdIsAnError) {
  auto a = Allocate(Gpus(), {kGpu0}, With("cdi-annotations"), [] { return std::string(50, 'a'); });
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("over 63 characters"), std::string::npos);
  EXPECT_EQ(*CdiAnnotationKey("cdi.k8s.io/", "vendor.gpu", "a/b"), "cdi.k8s.io/vendor.gpu_a_b");
  EXPECT_FALSE(CdiAnnotationKey("cdi.k8s.io/", "vendor.gpu", "x-").ok());
  EXPECT_FALSE(CdiAnnotationKey("cdi.k8s.io/", "vendor gpu", "x").ok());
  EXPECT_FALSE(CdiAnnotationKey("cdi.k8s.io/", "", "x").ok());
}

TEST(DpAllocateTest, PassDeviceSpecsUnderTheDevRoot) {
  Config c;
  c.pass_device_specs = true;
  c.nvidia_driver_root = "/run/nvidia/driver";
  c.control_device_nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm"};
  auto a = Allocate(Migs(), {kMig10, kMig11}, c, NoUuid());
  ASSERT_TRUE(a.ok());
  const std::string root = "/run/nvidia/driver";
  auto spec = [&](const std::string& p) { return DeviceSpec{p, root + p, "rw"}; };
  EXPECT_EQ(a->devices,
            (std::vector<DeviceSpec>{
                spec("/dev/nvidiactl"), spec("/dev/nvidia-uvm"), spec("/dev/nvidia1"),
                spec("/dev/nvidia-caps/nvidia-cap21"), spec("/dev/nvidia-caps/nvidia-cap22"),
                spec("/dev/nvidia-caps/nvidia-cap30"), spec("/dev/nvidia-caps/nvidia-cap31")}));

  c.nvidia_dev_root = "/";
  auto b = Allocate(Gpus(), {kGpu1}, c, NoUuid());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->devices.back(), (DeviceSpec{"/dev/nvidia1", "/dev/nvidia1", "rw"}));
  // The default control nodes.
  auto d = Allocate(Gpus(), {kGpu0}, Config{.pass_device_specs = true}, NoUuid());
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->devices.size(), 5u);
  EXPECT_EQ(d->devices[3].container_path, "/dev/nvidia-modeset");
}

TEST(DpAllocateTest, MpsPipeAndShm) {
  Resource r = Shared(true);
  r.sharing = Sharing::Kind::kMps;
  Config c = With("cdi-cri");  // MPS edits apply with CDI too
  c.mps_root = "/run/nvidia/mps";
  auto a = Allocate(r, {std::string(kGpu0) + "::1"}, c, NoUuid());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->envs, (std::map<std::string, std::string>{
                         {"CUDA_MPS_PIPE_DIRECTORY", "/mps/nvidia.com/gpu/pipe"}}));
  EXPECT_EQ(a->mounts, (std::vector<Mount>{{"/mps/nvidia.com/gpu/pipe",
                                            "/run/nvidia/mps/nvidia.com/gpu/pipe", false},
                                           {"/dev/shm", "/run/nvidia/mps/shm", false}}));
  EXPECT_EQ(a->cdi_devices.size(), 1u);
}

TEST(DpAllocateTest, FeatureAndImexEnvs) {
  Config c;
  c.gdrcopy = c.gds = c.mofed = true;
  c.imex.channel_ids = {0};
  auto a = Allocate(Gpus(), {kGpu0}, c, NoUuid());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->envs, (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", kGpu0},
                                                         {"NVIDIA_IMEX_CHANNELS", "0"},
                                                         {"NVIDIA_GDRCOPY", "enabled"},
                                                         {"NVIDIA_GDS", "enabled"},
                                                         {"NVIDIA_MOFED", "enabled"}}));
}

}  // namespace
}  // namespace gpuop::deviceplugin
