// Pod attribution: which containers hold which GPU or MIG GPU instance, from
// the kubelet's pod-resources List (kubelet/pod_resources.h).
//
// AttributePods is the pure core: containers' device ids + the GPUs → the
// pods per device. PodResourcesCache is the thin adapter that calls a lister
// (kubelet::ListPodResources in production, a fake in tests) on its own
// thread every interval, so a scrape never waits on the kubelet.
//
// Matching (as dcgm-exporter): resources nvidia.com/gpu, nvidia.com/mig-*
// and those named in NVIDIA_RESOURCE_NAMES are kept; a device id loses its
// "::N" replica suffix (time-sliced GPUs); a MIG UUID maps to (parent GPU, GPU
// instance); a GPU id is its UUID (with or without "GPU-") for
// --kubernetes-gpu-id-type uid, or "nvidia<minor>" for device-name. Several
// containers on one device (shared GPUs) each get their own entry.
#pragma once

#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "kubelet/pod_resources.h"
#include "nvml/device.h"

namespace gpuop::exporter {

enum class GpuIdType { kUid, kDeviceName };
// "uid" | "device-name".
Result<GpuIdType> ParseGpuIdType(std::string_view s);

struct PodRef {
  std::string pod;
  std::string namespace_;
  std::string container;
  auto operator<=>(const PodRef&) const = default;
};

// A GPU (gi_id empty) or one of its MIG GPU instances.
struct DeviceKey {
  unsigned gpu = 0;
  std::optional<unsigned> gi_id;
  auto operator<=>(const DeviceKey&) const = default;
};

// The pods of each device, each list sorted and without duplicates.
using PodMap = std::map<DeviceKey, std::vector<PodRef>>;

// True for nvidia.com/gpu, nvidia.com/mig-* and the names in `extra`.
bool IsGpuResource(std::string_view resource, const std::vector<std::string>& extra);

// Pure. Device ids that match no GPU (another node's plugin, a stale list)
// are ignored.
PodMap AttributePods(const std::vector<kubelet::ContainerDevices>& containers,
                     const std::vector<nvml::Gpu>& gpus, GpuIdType id_type,
                     const std::vector<std::string>& extra_resource_names);

// Calls `lister` now and then every `interval` on its own thread and keeps the
// last good answer. Thread-safe: Latest() and errors() from any thread.
class PodResourcesCache {
 public:
  using Lister = std::function<Result<std::vector<kubelet::ContainerDevices>>()>;
  using Containers = std::vector<kubelet::ContainerDevices>;

  // `on_change` runs on the cache's thread after an answer that differs from
  // the previous one (the exporter re-renders then).
  PodResourcesCache(Lister lister, std::chrono::milliseconds interval,
                    std::function<void()> on_change);
  ~PodResourcesCache();  // stops the thread
  PodResourcesCache(const PodResourcesCache&) = delete;
  PodResourcesCache& operator=(const PodResourcesCache&) = delete;

  // The last good answer; null before the first.
  std::shared_ptr<const Containers> Latest() const;
  // Failed List calls so far.
  uint64_t errors() const;

 private:
  void Run(std::stop_token stop);

  const Lister lister_;
  const std::chrono::milliseconds interval_;
  const std::function<void()> on_change_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::shared_ptr<const Containers> latest_ GPUOP_GUARDED_BY(mu_);
  uint64_t errors_ GPUOP_GUARDED_BY(mu_) = 0;
  std::jthread thread_;  // last: starts after the members above
};

}  // namespace gpuop::exporter
