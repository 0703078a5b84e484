// HealthMonitor: the adapter that feeds a HealthTracker from NVML.
//
// One owned thread waits on an NVML event set (every GPU registered for XID
// and ECC events) and, between waits, probes the GPUs that have an open fault
// (Client::ReadHealth) every `probe_interval`, and once right after each
// fault so that the evidence a recovery needs is seen. Each change of a unit's
// health is reported at once through `on_change` (unit UUID → healthy), on
// the monitor thread. A failed event wait (not a timeout) marks every unit
// unhealthy, as upstream does, but probing goes on so units can come back;
// the wait is retried after a probe interval.
//
// Threads: Start/Stop/Snapshot may be called from any thread; `on_change`
// must not call Stop (it runs on the thread Stop joins). REQUIRES: the
// Client outlives the monitor.
#pragma once

#include <chrono>
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
#include "deviceplugin/health.h"
#include "nvml/client.h"

namespace gpuop::deviceplugin {

// Every unit health is decided for: the GPU and MIG UUIDs of `gpus`. A
// monitor watches these; when a MIG layout change replaces them, it is
// started again.
std::set<std::string> HealthUnits(const std::vector<nvml::Gpu>& gpus);

struct HealthMonitorOptions {
  // How often GPUs with an open fault are probed.
  std::chrono::milliseconds probe_interval{5000};
  // Longest single NVML event wait: bounds how long Stop() takes.
  std::chrono::milliseconds wait_slice{200};
};

class HealthMonitor {
 public:
  using Callback = std::function<void(const std::map<std::string, bool>& changed)>;

  // Registers every GPU of `gpus` for nvml::kHealthEvents (a GPU that
  // supports none is skipped with a log line) and starts the thread. Fails
  // when NVML cannot create an event set or a registration fails otherwise.
  static Result<std::unique_ptr<HealthMonitor>> Start(const nvml::Client& client,
                                                      const std::vector<nvml::Gpu>& gpus,
                                                      HealthPolicy policy, Callback on_change,
                                                      HealthMonitorOptions options = {});

  ~HealthMonitor();  // Stop()
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Stops and joins the thread; returns within about one wait slice.
  void Stop();

  // Every unit and whether it is healthy now.
  std::map<std::string, bool> Snapshot() const;
  // The unhealthy units and why.
  std::map<std::string, OpenFault> OpenFaults() const;

  // NVML answers again after the driver was gone (a reload, which resets
  // every GPU): open faults clear at their GPU's next clean probe.
  void OnDriverReloaded();

 private:
  HealthMonitor(const nvml::Client& client, std::unique_ptr<nvml::EventWatcher> watcher,
                HealthTracker tracker, Callback on_change, HealthMonitorOptions options);

  void Run(std::stop_token stop);
  void Probe(const std::vector<unsigned>& gpus);
  void Report(const std::vector<HealthChange>& changes);

  const nvml::Client& client_;
  std::unique_ptr<nvml::EventWatcher> watcher_;
  const Callback on_change_;
  const HealthMonitorOptions options_;

  mutable Mutex mu_;
  HealthTracker tracker_ GPUOP_GUARDED_BY(mu_);

  std::jthread thread_;
};

}  // namespace gpuop::deviceplugin
