// Pod attribution: whole GPUs, MIG GPU instances, shared ("::N") replicas,
// resource filtering and the device-name id type; and the background cache
// with a fake lister.
#include "exporter/attribution.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include "tests/testing/wait.h"

namespace gpuop::exporter {
namespace {

using kubelet::ContainerDevices;

std::vector<nvml::Gpu> TwoGpus() {
  std::vector<nvml::Gpu> gpus(2);
  gpus[0].index = 0;
  gpus[0].uuid = "GPU-aaaa";
  gpus[0].minor = 0;
  gpus[1].index = 1;
  gpus[1].uuid = "GPU-bbbb";
  gpus[1].minor = 3;
  gpus[1].mig_enabled = true;
  nvml::MigDevice m1;
  m1.index = 0;
  m1.uuid = "MIG-1111";
  m1.gi_id = 7;
  nvml::MigDevice m2;
  m2.index = 1;
  m2.uuid = "MIG-2222";
  m2.gi_id = 2;
  gpus[1].mig_devices = {m1, m2};
  return gpus;
}

ContainerDevices Cd(std::string pod, std::string container, std::string resource,
                    std::vector<std::string> ids, std::string ns = "default") {
  return {std::move(pod), std::move(ns), std::move(container), std::move(resource), std::move(ids)};
}

TEST(Attribution, WholeGpuByUuidWithAndWithoutPrefix) {
  auto map = AttributePods({Cd("train-0", "main", "nvidia.com/gpu", {"GPU-aaaa"}),
                            Cd("infer-0", "srv", "nvidia.com/gpu", {"bbbb"}, "ml")},
                           TwoGpus(), GpuIdType::kUid, {});
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(map[(DeviceKey{0, std::nullopt})],
            (std::vector<PodRef>{{"train-0", "default", "main"}}));
  EXPECT_EQ(map[(DeviceKey{1, std::nullopt})], (std::vector<PodRef>{{"infer-0", "ml", "srv"}}));
}

TEST(Attribution, MigUuidMapsToParentAndGpuInstance) {
  auto map = AttributePods({Cd("a", "c", "nvidia.com/mig-1g.10gb", {"MIG-1111"}),
                            Cd("b", "c", "nvidia.com/mig-3g.40gb", {"MIG-2222"})},
                           TwoGpus(), GpuIdType::kUid, {});
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(map[(DeviceKey{1, 7u})], (std::vector<PodRef>{{"a", "default", "c"}}));
  EXPECT_EQ(map[(DeviceKey{1, 2u})], (std::vector<PodRef>{{"b", "default", "c"}}));
  EXPECT_FALSE(map.contains(DeviceKey{1, std::nullopt}));
}

TEST(Attribution, SharedReplicasGiveOneEntryPerContainer) {
  auto map = AttributePods({Cd("p1", "c", "nvidia.com/gpu", {"GPU-aaaa::0"}),
                            Cd("p2", "c", "nvidia.com/gpu", {"GPU-aaaa::3"}),
                            // two replicas of the same GPU in one container: one entry
                            Cd("p3", "c", "nvidia.com/gpu", {"GPU-aaaa::1", "GPU-aaaa::2"})},
                           TwoGpus(), GpuIdType::kUid, {});
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map[(DeviceKey{0, std::nullopt})],
            (std::vector<PodRef>{
                {"p1", "default", "c"}, {"p2", "default", "c"}, {"p3", "default", "c"}}));
}

TEST(Attribution, KeepsOnlyGpuResourcesAndNamedExtras) {
  std::vector<ContainerDevices> in = {
      Cd("x", "c", "example.com/fpga", {"GPU-aaaa"}),
      Cd("y", "c", "nvidia.com/gpu.shared", {"GPU-bbbb"}),
      Cd("z", "c", "nvidia.com/gpu", {"GPU-unknown"}),  // not on this node
  };
  EXPECT_TRUE(AttributePods(in, TwoGpus(), GpuIdType::kUid, {}).empty());
  auto map = AttributePods(in, TwoGpus(), GpuIdType::kUid, {"nvidia.com/gpu.shared"});
  ASSERT_EQ(map.size(), 1u);
  EXPECT_EQ(map[(DeviceKey{1, std::nullopt})], (std::vector<PodRef>{{"y", "default", "c"}}));
  EXPECT_TRUE(IsGpuResource("nvidia.com/mig-2g.20gb", {}));
  EXPECT_FALSE(IsGpuResource("nvidia.com/gpux", {}));
}

TEST(Attribution, DeviceNameIdsAreMinorNumbers) {
  auto map = AttributePods({Cd("a", "c", "nvidia.com/gpu", {"nvidia3"}),
                            Cd("b", "c", "nvidia.com/gpu", {"GPU-aaaa"}),  // uid: not matched
                            Cd("m", "c", "nvidia.com/mig-1g.10gb", {"MIG-1111"})},
                           TwoGpus(), GpuIdType::kDeviceName, {});
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(map[(DeviceKey{1, std::nullopt})], (std::vector<PodRef>{{"a", "default", "c"}}));
  EXPECT_EQ(map[(DeviceKey{1, 7u})], (std::vector<PodRef>{{"m", "default", "c"}}));
  EXPECT_TRUE(ParseGpuIdType("device-name").ok());
  EXPECT_FALSE(ParseGpuIdType("index").ok());
}

using testing::WaitFor;

TEST(PodResourcesCache, RefreshesInTheBackgroundAndKeepsTheLastGoodAnswer) {
  std::atomic<int> calls{0};
  std::atomic<int> changes{0};
  std::mutex mu;
  Result<std::vector<ContainerDevices>> answer =
      std::vector<ContainerDevices>{Cd("a", "c", "nvidia.com/gpu", {"GPU-aaaa"})};
  PodResourcesCache cache(
      [&]() -> Result<std::vector<ContainerDevices>> {
        ++calls;
        std::lock_guard lock(mu);
        return answer;
      },
      std::chrono::milliseconds(1), [&] { ++changes; });
  ASSERT_TRUE(WaitFor([&] { return cache.Latest() != nullptr; }));
  EXPECT_EQ(cache.Latest()->at(0).pod, "a");
  ASSERT_TRUE(WaitFor([&] { return calls > 5; }));
  EXPECT_EQ(changes.load(), 1) << "an unchanged answer is not a change";

  {
    std::lock_guard lock(mu);
    answer = Unavailable("kubelet down");
  }
  ASSERT_TRUE(WaitFor([&] { return cache.errors() >= 2; }));
  ASSERT_NE(cache.Latest(), nullptr);
  EXPECT_EQ(cache.Latest()->at(0).pod, "a") << "the last good mapping stays";

  {
    std::lock_guard lock(mu);
    answer = std::vector<ContainerDevices>{Cd("b", "c", "nvidia.com/gpu", {"GPU-aaaa"})};
  }
  ASSERT_TRUE(WaitFor([&] { return cache.Latest()->at(0).pod == "b"; }));
  EXPECT_TRUE(WaitFor([&] { return changes.load() == 2; }));
}

}  // namespace
}  // namespace gpuop::exporter
