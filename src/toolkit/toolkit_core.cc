#include "toolkit/toolkit_core.h"

#include <algorithm>

#include "base/backoff.h"
#include "base/strings.h"
#include "host/driver_ready.h"

namespace gpuop::toolkit {

std::string Fingerprint::Summary() const {
  size_t gpus = 0, migs = 0;
  for (const std::string& d : devices) {
    if (StartsWith(d, "gpu ")) ++gpus;
    if (StartsWith(d, "mig ")) ++migs;
  }
  return "driver=" + driver_version + " gpus=" + std::to_string(gpus) +
         " mig-devices=" + std::to_string(migs);
}

Fingerprint FingerprintOf(const nvml::SystemInfo& system, const std::vector<nvml::Gpu>& gpus) {
  Fingerprint fp;
  fp.driver_version = system.driver_version;
  for (const nvml::Gpu& g : gpus) {
    fp.devices.push_back("gpu " + g.uuid + " index=" + std::to_string(g.index) +
                         " minor=" + std::to_string(g.minor) + " bus=" + g.pci.bus_id +
                         " mig=" + (g.mig_enabled ? "on" : "off"));
    for (const nvml::MigDevice& m : g.mig_devices) {
      fp.devices.push_back("mig " + m.uuid + " parent=" + g.uuid +
                           " index=" + std::to_string(g.index) + ":" + std::to_string(m.index) +
                           " minor=" + std::to_string(g.minor) + " gi=" + std::to_string(m.gi_id) +
                           " ci=" + std::to_string(m.ci_id) + " profile=" + m.profile);
    }
  }
  std::sort(fp.devices.begin(), fp.devices.end());
  return fp;
}

std::string FingerprintDiff::ToString() const {
  std::vector<std::string> parts;
  if (driver_changed) parts.push_back("driver changed");
  if (!added.empty() || !removed.empty()) {
    std::string s =
        "+" + std::to_string(added.size()) + " -" + std::to_string(removed.size()) + " devices:";
    // Name the devices by their first two words ("mig MIG-..."), at most 4.
    size_t shown = 0;
    auto name = [](const std::string& line) {
      size_t sp = line.find(' ', line.find(' ') + 1);
      return line.substr(0, sp);
    };
    for (const std::string& a : added) {
      if (shown++ < 4) s += " +" + name(a);
    }
    for (const std::string& r : removed) {
      if (shown++ < 4) s += " -" + name(r);
    }
    if (shown > 4) s += " ...";
    parts.push_back(s);
  }
  return Join(parts, "; ");
}

FingerprintDiff DiffFingerprints(const Fingerprint& before, const Fingerprint& after) {
  FingerprintDiff d;
  d.driver_changed = before.driver_version != after.driver_version;
  std::set_difference(after.devices.begin(), after.devices.end(), before.devices.begin(),
                      before.devices.end(), std::back_inserter(d.added));
  std::set_difference(before.devices.begin(), before.devices.end(), after.devices.begin(),
                      after.devices.end(), std::back_inserter(d.removed));
  return d;
}

unsigned ClassifyWatchEvent(WatchKind kind, const std::string& name,
                            const std::string& trigger_name) {
  switch (kind) {
    case WatchKind::kDriverEtc:
      return name == "ld.so.cache" ? kTriggerFileChange : kTriggerNone;
    case WatchKind::kDriverLib:
      return (StartsWith(name, "libnvidia-") || StartsWith(name, "libcuda")) &&
                     name.find(".tmp") == std::string::npos
                 ? kTriggerFileChange
                 : kTriggerNone;
    case WatchKind::kDev:
      return StartsWith(name, "nvidia") ? kTriggerFileChange : kTriggerNone;
    case WatchKind::kDevCaps:
      return kTriggerFileChange;
    case WatchKind::kTriggerDir:
      return name == trigger_name ? kTriggerRequestFile : kTriggerNone;
    case WatchKind::kValidations:
      return name == host::kDriverReadyFile ? kTriggerDriverReady : kTriggerNone;
  }
  return kTriggerNone;
}

std::string_view ToolkitPhaseName(ToolkitPhase phase) {
  switch (phase) {
    case ToolkitPhase::kStarting:
      return "starting";
    case ToolkitPhase::kWaitingForDriver:
      return "waiting-for-driver";
    case ToolkitPhase::kReady:
      return "ready";
    case ToolkitPhase::kDegraded:
      return "degraded";
  }
  return "unknown";
}

std::chrono::milliseconds ToolkitCore::Backoff() const {
  return ExponentialDelay(static_cast<int>(std::min(streak_, 64u)), timing_.retry_min,
                          timing_.retry_max);
}

ToolkitDecision ToolkitCore::Decide(unsigned triggers, const Result<Fingerprint>& observed,
                                    Clock::time_point now) {
  ToolkitDecision d;
  if (!observed.ok()) {
    d.log_unavailable = !nvml_down_;
    nvml_down_ = true;
    ++streak_;
    report_.failures = streak_;
    report_.last_error = observed.status().message();
    report_.phase = ToolkitPhase::kWaitingForDriver;
    next_wake_ = now + Backoff();
    return d;
  }
  const bool came_back = nvml_down_;
  nvml_down_ = false;
  if (came_back && !last_failed_) {
    // NVML failures only: the streak was about NVML, not generation.
    streak_ = 0;
    report_.failures = 0;
    report_.last_error.clear();
    report_.phase = has_spec_ ? ToolkitPhase::kReady : ToolkitPhase::kStarting;
  }

  if (!attempted_) {
    d.reason = "start";
  } else if (came_back) {
    d.reason = "driver-back";
  } else if (*observed != attempted_fp_) {
    d.reason = "layout-changed";
    d.diff = DiffFingerprints(attempted_fp_, *observed);
  } else if (triggers & kTriggerSighup) {
    d.reason = "sighup";
  } else if (triggers & kTriggerRequestFile) {
    d.reason = "trigger-file";
  } else if (triggers & kTriggerFileChange) {
    d.reason = "file-change";
  } else if (last_failed_ && now >= retry_at_) {
    d.reason = "retry";
  } else if (has_spec_ && now - last_success_ >= timing_.resync) {
    d.reason = "resync";
  }
  d.regenerate = !d.reason.empty();
  if (!d.regenerate) next_wake_ = std::min(now + timing_.check_interval, ResyncOrRetryAt());
  return d;
}

ToolkitCore::Clock::time_point ToolkitCore::ResyncOrRetryAt() const {
  if (last_failed_) return retry_at_;
  if (has_spec_) return last_success_ + timing_.resync;
  return Clock::time_point::max();
}

void ToolkitCore::Generated(const Fingerprint& fp, const Status& result, Clock::time_point now) {
  attempted_ = true;
  attempted_fp_ = fp;
  if (result.ok()) {
    has_spec_ = true;
    good_fp_ = fp;
    last_failed_ = false;
    streak_ = 0;
    last_success_ = now;
    report_.phase = ToolkitPhase::kReady;
    report_.last_error.clear();
    report_.fingerprint = fp.Summary();
    report_.failures = 0;
    ++report_.generations;
  } else {
    last_failed_ = true;
    ++streak_;
    retry_at_ = now + Backoff();
    report_.phase = has_spec_ ? ToolkitPhase::kDegraded : ToolkitPhase::kStarting;
    report_.last_error = result.message();
    report_.failures = streak_;
  }
  next_wake_ = std::min(now + timing_.check_interval, ResyncOrRetryAt());
}

}  // namespace gpuop::toolkit
