#include "exporter/attribution.h"

#include <algorithm>
#include <unordered_map>

#include "base/log.h"
#include "base/strings.h"

namespace gpuop::exporter {

Result<GpuIdType> ParseGpuIdType(std::string_view s) {
  if (s == "uid") return GpuIdType::kUid;
  if (s == "device-name") return GpuIdType::kDeviceName;
  return InvalidArgument("--kubernetes-gpu-id-type \"" + std::string(s) +
                         "\" is not uid or device-name");
}

bool IsGpuResource(std::string_view resource, const std::vector<std::string>& extra) {
  if (resource == "nvidia.com/gpu" || StartsWith(resource, "nvidia.com/mig-")) return true;
  return std::find(extra.begin(), extra.end(), resource) != extra.end();
}

PodMap AttributePods(const std::vector<kubelet::ContainerDevices>& containers,
                     const std::vector<nvml::Gpu>& gpus, GpuIdType id_type,
                     const std::vector<std::string>& extra_resource_names) {
  // Every id a device may be listed under → the device.
  std::unordered_map<std::string, DeviceKey> by_id;
  for (const nvml::Gpu& g : gpus) {
    if (id_type == GpuIdType::kUid) {
      if (!g.uuid.empty()) {
        by_id[g.uuid] = {g.index, std::nullopt};
        if (StartsWith(g.uuid, "GPU-")) by_id[g.uuid.substr(4)] = {g.index, std::nullopt};
      }
    } else if (g.minor >= 0) {
      by_id["nvidia" + std::to_string(g.minor)] = {g.index, std::nullopt};
    }
    // MIG devices are named by UUID in both modes.
    for (const nvml::MigDevice& m : g.mig_devices) {
      if (!m.uuid.empty()) by_id[m.uuid] = {g.index, m.gi_id};
    }
  }

  PodMap out;
  for (const kubelet::ContainerDevices& c : containers) {
    if (!IsGpuResource(c.resource_name, extra_resource_names)) continue;
    for (const std::string& raw : c.device_ids) {
      std::string_view id = raw;
      if (size_t sep = id.find("::"); sep != std::string_view::npos) id = id.substr(0, sep);
      auto it = by_id.find(std::string(id));
      if (it == by_id.end()) continue;
      out[it->second].push_back({c.pod, c.namespace_, c.container});
    }
  }
  for (auto& [key, pods] : out) {
    std::sort(pods.begin(), pods.end());
    pods.erase(std::unique(pods.begin(), pods.end()), pods.end());
  }
  return out;
}

PodResourcesCache::PodResourcesCache(Lister lister, std::chrono::milliseconds interval,
                                     std::function<void()> on_change)
    : lister_(std::move(lister)),
      interval_(interval),
      on_change_(std::move(on_change)),
      thread_([this](std::stop_token stop) { Run(stop); }) {}

PodResourcesCache::~PodResourcesCache() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const PodResourcesCache::Containers> PodResourcesCache::Latest() const {
  MutexLock lock(mu_);
  return latest_;
}

uint64_t PodResourcesCache::errors() const {
  MutexLock lock(mu_);
  return errors_;
}

void PodResourcesCache::Run(std::stop_token stop) {
  std::string last_error;
  while (!stop.stop_requested()) {
    auto listed = lister_();
    bool changed = false;
    if (listed.ok()) {
      if (!last_error.empty()) LogInfo("pod-resources answers again");
      last_error.clear();
      MutexLock lock(mu_);
      if (!latest_ || *latest_ != *listed) {
        latest_ = std::make_shared<const Containers>(std::move(listed).value());
        changed = true;
      }
    } else {
      // Logged once per distinct error; the last good answer stays in use.
      if (listed.status().message() != last_error) {
        last_error = listed.status().message();
        LogWarn("pod-resources List failed; keeping the last pod mapping",
                {{"error", listed.status()}});
      }
      MutexLock lock(mu_);
      ++errors_;
    }
    if (changed && on_change_) on_change_();
    MutexLock lock(mu_);
    cv_.wait_for(lock.native(), stop, interval_, [] { return false; });
  }
}

}  // namespace gpuop::exporter
