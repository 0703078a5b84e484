#include "deviceplugin/health_monitor.h"

#include <algorithm>

#include "base/log.h"

namespace gpuop::deviceplugin {

std::set<std::string> HealthUnits(const std::vector<nvml::Gpu>& gpus) {
  std::set<std::string> units;
  for (const nvml::Gpu& g : gpus) {
    units.insert(g.uuid);
    for (const nvml::MigDevice& m : g.mig_devices) units.insert(m.uuid);
  }
  return units;
}

Result<std::unique_ptr<HealthMonitor>> HealthMonitor::Start(const nvml::Client& client,
                                                            const std::vector<nvml::Gpu>& gpus,
                                                            HealthPolicy policy, Callback on_change,
                                                            HealthMonitorOptions options) {
  GPUOP_ASSIGN_OR_RETURN(std::unique_ptr<nvml::EventWatcher> watcher, client.NewEventWatcher());
  for (const nvml::Gpu& g : gpus) {
    auto mask = watcher->Register(g.index, nvml::kHealthEvents);
    if (mask.ok()) continue;
    if (mask.status().code() == StatusCode::kNotSupported) {
      LogWarn("GPU has no health events; it is not health-checked",
              {{"gpu", g.index}, {"uuid", g.uuid}, {"error", mask.status()}});
      continue;
    }
    return mask.status().Annotate("registering GPU " + std::to_string(g.index) +
                                  " for health events");
  }
  HealthTracker tracker(std::move(policy), gpus);
  std::unique_ptr<HealthMonitor> m(new HealthMonitor(client, std::move(watcher), std::move(tracker),
                                                     std::move(on_change), options));
  m->thread_ = std::jthread([p = m.get()](std::stop_token st) { p->Run(st); });
  return m;
}

HealthMonitor::HealthMonitor(const nvml::Client& client,
                             std::unique_ptr<nvml::EventWatcher> watcher, HealthTracker tracker,
                             Callback on_change, HealthMonitorOptions options)
    : client_(client),
      watcher_(std::move(watcher)),
      on_change_(std::move(on_change)),
      options_(options),
      tracker_(std::move(tracker)) {}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

std::map<std::string, bool> HealthMonitor::Snapshot() const {
  MutexLock lock(mu_);
  return tracker_.Snapshot();
}

std::map<std::string, OpenFault> HealthMonitor::OpenFaults() const {
  MutexLock lock(mu_);
  return tracker_.OpenFaults();
}

void HealthMonitor::OnDriverReloaded() {
  MutexLock lock(mu_);
  tracker_.OnDriverReloaded();
}

void HealthMonitor::Report(const std::vector<HealthChange>& changes) {
  if (changes.empty()) return;
  std::map<std::string, bool> changed;
  for (const HealthChange& c : changes) {
    changed[c.unit] = c.healthy;
    if (c.healthy) {
      LogInfo("device healthy again", {{"unit", c.unit}, {"reason", c.reason}});
    } else {
      LogWarn("device unhealthy", {{"unit", c.unit}, {"reason", c.reason}});
    }
  }
  if (on_change_) on_change_(changed);
}

void HealthMonitor::Probe(const std::vector<unsigned>& gpus) {
  std::vector<HealthChange> changes;
  for (unsigned gpu : gpus) {
    auto h = client_.ReadHealth(gpu);
    if (!h.ok()) {
      // The probe could not run at all (NVML itself failing): no evidence.
      LogWarn("health probe failed", {{"gpu", gpu}, {"error", h.status()}});
      continue;
    }
    MutexLock lock(mu_);
    auto c = tracker_.OnProbe(gpu, *h);
    changes.insert(changes.end(), c.begin(), c.end());
  }
  Report(changes);
}

void HealthMonitor::Run(std::stop_token stop) {
  using Clock = std::chrono::steady_clock;
  const auto slice = std::max(options_.wait_slice, std::chrono::milliseconds(1));
  auto next_probe = Clock::now() + options_.probe_interval;
  auto wait_again = Clock::now();  // after a failed wait, when to try the next one

  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    if (now >= next_probe) {
      std::vector<unsigned> faulted;
      {
        MutexLock lock(mu_);
        faulted = tracker_.FaultedGpus();
      }
      Probe(faulted);
      next_probe = Clock::now() + options_.probe_interval;
      continue;
    }
    auto until = std::min(next_probe, now + slice);
    if (now < wait_again) {
      // The event set failed recently: only probe, in slices Stop can cut.
      std::this_thread::sleep_for(std::min(until, wait_again) - now);
      continue;
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    auto ev = watcher_->Wait(static_cast<unsigned>(std::max<long long>(ms, 1)));
    if (!ev.ok()) {
      LogWarn(
          "NVML event wait failed; marking every device unhealthy until probes show it "
          "answering",
          {{"error", ev.status()}});
      std::vector<HealthChange> changes;
      {
        MutexLock lock(mu_);
        changes = tracker_.OnWaitError(ev.status().message());
      }
      Report(changes);
      wait_again = Clock::now() + options_.probe_interval;
      continue;
    }
    if (!ev->has_value()) continue;  // timeout
    std::vector<HealthChange> changes;
    std::vector<unsigned> faulted;
    {
      MutexLock lock(mu_);
      changes = tracker_.OnEvent(**ev);
      if (!changes.empty()) faulted = tracker_.FaultedGpus();
    }
    if (changes.empty()) continue;
    // Probe the GPU at once, before reporting: the evidence a recovery will
    // need (a posted recovery action, a DBE count, a lost GPU) is there now.
    std::vector<HealthChange> probe_changes;
    unsigned gpu = (**ev).gpu;
    if (std::find(faulted.begin(), faulted.end(), gpu) != faulted.end()) {
      auto h = client_.ReadHealth(gpu);
      if (h.ok()) {
        MutexLock lock(mu_);
        probe_changes = tracker_.OnProbe(gpu, *h);
      }
    }
    Report(changes);
    Report(probe_changes);
  }
}

}  // namespace gpuop::deviceplugin
