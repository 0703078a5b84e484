// The exporter daemon behind `gpuop exporter`: a collector thread reads every
// GPU and MIG GPU instance once per interval into an immutable snapshot and
// renders its Prometheus text there; a scrape only hands out the latest
// rendered text (a shared_ptr swap), so scrapes never touch NVML and cost the
// same however many scrapers there are.
//
// Threads (all owned, std::jthread, stopped by Stop()/the destructor):
//   - collector: opens NVML (retrying until it loads), collects at the
//     interval, or at once when woken by an XID or a pod mapping change;
//     on GPUs with GPM (Hopper and newer) each collection also takes one GPM
//     sample per GPU and MIG GPU instance, and the profiling fields are the
//     metrics since the previous collection (none on the first);
//   - events: waits for NVML XID events; DCGM_FI_DEV_XID_ERRORS is the last
//     XID of each GPU (0 before any);
//   - pod-resources (with a lister): see PodResourcesCache.
// Metrics()/Health()/Snapshot() may be called from any thread at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "exporter/attribution.h"
#include "exporter/counters.h"
#include "exporter/render.h"
#include "http/server.h"
#include "nvml/client.h"
#include "nvml/gpm.h"

namespace gpuop::exporter {

struct ExporterOptions {
  std::vector<Counter> counters;  // DefaultCounters() when empty
  std::chrono::milliseconds collect_interval{30000};
  // How often opening NVML is retried while it fails.
  std::chrono::milliseconds nvml_retry_interval{5000};
  std::string hostname;
  std::function<Result<std::unique_ptr<nvml::Client>>()> open_nvml;

  // Pod attribution: off when `pod_lister` is empty.
  PodResourcesCache::Lister pod_lister;
  std::chrono::milliseconds pod_resources_interval{10000};
  GpuIdType gpu_id_type = GpuIdType::kUid;
  std::vector<std::string> extra_resource_names;  // NVIDIA_RESOURCE_NAMES
};

class Exporter {
 public:
  // Starts the threads; NVML need not be loadable yet.
  static Result<std::unique_ptr<Exporter>> Start(ExporterOptions options);
  ~Exporter();  // Stop()
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  void Stop();

  // The latest rendered text; null before the first collection.
  std::shared_ptr<const std::string> Snapshot() const;
  // Completed collections (tests wait on it).
  uint64_t collections() const;
  // GPM sample buffers the collector holds now (tests check they do not pile up).
  size_t gpm_samples_held() const;
  // Wakes the collector for a collection now.
  void CollectNow();
  // True once the events thread has registered the GPUs for XID events.
  bool WatchingEvents() const;

  // GET /metrics: the snapshot plus the scrape counter; 503 before the first.
  http::Response Metrics();
  // GET /health: 200 when a snapshot exists and NVML is open, else 503.
  http::Response Health() const;

 private:
  explicit Exporter(ExporterOptions options);
  void RunCollector(std::stop_token stop);
  void RunEvents(std::stop_token stop);
  // One collection with `client`; false when NVML as a whole failed.
  bool Collect(const nvml::Client& client);
  // The GPM metrics of a GPU or GI since the last collection; nullopt without.
  std::optional<nvml::GpmMetrics> ReadGpm(unsigned gpu, std::optional<unsigned> gi_id);
  std::shared_ptr<nvml::Client> CurrentClient() const;
  void DropClient();

  const ExporterOptions options_;
  const bool needs_gpm_;  // a counter is a profiling field

  mutable Mutex mu_;
  std::condition_variable_any wake_cv_;
  bool wake_ GPUOP_GUARDED_BY(mu_) = false;
  std::shared_ptr<nvml::Client> client_ GPUOP_GUARDED_BY(mu_);
  uint64_t client_generation_ GPUOP_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const std::string> snapshot_ GPUOP_GUARDED_BY(mu_);
  std::map<unsigned, uint64_t> last_xid_ GPUOP_GUARDED_BY(mu_);  // by GPU index

  // Collector-thread state, reused across collections.
  std::unique_ptr<nvml::GpmSampler> gpm_;                // of the current client; null without one
  std::set<std::pair<unsigned, unsigned>> gpm_failing_;  // (GPU, GI or ~0u) logged as failing
  std::vector<nvml::Gpu> known_gpus_;                    // last good identity per GPU index
  std::vector<bool> was_healthy_;                        // per GPU index, to log changes once
  Collection collection_;
  SelfStats self_;
  size_t last_render_size_ = 0;

  std::atomic<uint64_t> collections_{0};
  std::atomic<size_t> gpm_samples_held_{0};
  std::atomic<uint64_t> scrapes_{0};
  std::atomic<bool> watching_events_{false};

  std::unique_ptr<PodResourcesCache> pods_;
  std::jthread collector_;
  std::jthread events_;
};

}  // namespace gpuop::exporter
