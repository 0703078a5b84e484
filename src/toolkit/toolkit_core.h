// The decision core of `gpuop toolkit`, the DaemonSet that keeps the node's
// CDI spec current: what the GPUs look like now (a Fingerprint), and, each
// time the loop wakes, whether to regenerate the spec, when to wake next, and
// what to report. It holds no I/O and reads no clock: the loop in
// toolkit_daemon.h hands it NVML's view and the time, and does what it says.
//
// Policy (docs/toolkit.md, "Failure handling"):
//   - Regenerate at start, whenever the fingerprint differs from the one last
//     attempted, when NVML comes back after being unavailable (a driver
//     reload), on SIGHUP, the trigger file or a watched file change (driver
//     libraries, device nodes), and every `resync` as a backstop.
//   - NVML unavailable (driver not loaded yet, or being reloaded): keep what
//     is on disk, say so once, retry with exponential backoff; never exit.
//   - A failed regeneration keeps the last good spec and the ready file; the
//     error is kept for the status report and retried with backoff (an
//     explicit trigger or a new fingerprint retries at once).
//
// Thread-compatible: one loop thread owns a ToolkitCore. The free functions
// are pure and thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "nvml/device.h"

namespace gpuop::toolkit {

// What the spec depends on that NVML can tell cheaply: the driver version and
// every GPU and MIG device with the numbers that end up in the spec.
struct Fingerprint {
  std::string driver_version;
  // One canonical line per device, sorted, e.g.
  //   "gpu GPU-1234 index=0 minor=0 bus=00000000:18:00.0 mig=on"
  //   "mig MIG-abcd parent=GPU-1234 index=0:1 minor=0 gi=2 ci=0 profile=1g.10gb"
  std::vector<std::string> devices;

  bool operator==(const Fingerprint&) const = default;
  // "driver=570.172.08 gpus=8 mig-devices=2", for logs.
  std::string Summary() const;
};

Fingerprint FingerprintOf(const nvml::SystemInfo& system, const std::vector<nvml::Gpu>& gpus);

struct FingerprintDiff {
  bool driver_changed = false;
  std::vector<std::string> added, removed;  // device lines
  bool empty() const { return !driver_changed && added.empty() && removed.empty(); }
  // "driver 550.1->570.2; +2 -1 devices: +mig MIG-... ; -gpu GPU-...", short.
  std::string ToString() const;
};
FingerprintDiff DiffFingerprints(const Fingerprint& before, const Fingerprint& after);

// Why the loop woke (bits; several may be pending at once).
enum Trigger : unsigned {
  kTriggerNone = 0,
  kTriggerTick = 1u << 0,        // the periodic fingerprint check
  kTriggerFileChange = 1u << 1,  // driver libraries, ld.so.cache or device nodes changed
  kTriggerSighup = 1u << 2,
  kTriggerRequestFile = 1u << 3,  // someone touched the trigger file
  // The validator's driver-ready changed: the driver root is read again, and
  // only a root that moved regenerates (its removal at uninstall must not
  // bring back a spec the toolkit's preStop just deleted).
  kTriggerDriverReady = 1u << 4,
};

// Which watched directory an inotify event came from.
enum class WatchKind {
  kDriverEtc,    // <driver-root>/etc: only ld.so.cache matters
  kDriverLib,    // a library directory: libnvidia-*, libcuda*
  kDev,          // <dev-root>/dev: nvidia* nodes
  kDevCaps,      // <dev-root>/dev/nvidia-caps: every entry
  kTriggerDir,   // the trigger file's directory: only the trigger file
  kValidations,  // the validations directory: only the validator's driver-ready
};

// The trigger bits an event on `name` in a `kind` directory stands for
// (kTriggerNone for unrelated files: other libraries, our own temp files).
unsigned ClassifyWatchEvent(WatchKind kind, const std::string& name,
                            const std::string& trigger_name);

struct ToolkitTiming {
  std::chrono::milliseconds check_interval{5000};             // cheap NVML fingerprint check
  std::chrono::milliseconds resync{std::chrono::minutes(5)};  // backstop regeneration
  std::chrono::milliseconds retry_min{1000};                  // backoff after a failure...
  std::chrono::milliseconds retry_max{60000};                 // ...doubling up to this
};


enum class ToolkitPhase {
  kStarting,          // no spec written by this process yet
  kWaitingForDriver,  // NVML is unavailable; whatever spec is on disk stays
  kReady,             // the spec on disk matches the GPUs as last seen
  kDegraded,          // the last regeneration failed; the last good spec stays
};
std::string_view ToolkitPhaseName(ToolkitPhase phase);

struct ToolkitDecision {
  bool regenerate = false;
  std::string reason;  // start, layout-changed, driver-back, sighup, trigger-file,
                       // file-change, retry, resync
  // True on the first observation of NVML being unavailable after it was
  // available (or at start): the loop logs that once, not on every retry.
  bool log_unavailable = false;
  FingerprintDiff diff;  // set for layout-changed
};

// What the daemon reports (status file, logs).
struct ToolkitReport {
  ToolkitPhase phase = ToolkitPhase::kStarting;
  std::string last_error;    // empty when the last attempt succeeded
  std::string fingerprint;   // Summary() of the last good spec's fingerprint
  uint64_t generations = 0;  // successful regenerations
  uint64_t failures = 0;     // failed regenerations and NVML checks, in a row
  bool operator==(const ToolkitReport&) const = default;
};

class ToolkitCore {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ToolkitCore(ToolkitTiming timing) : timing_(timing) {}

  // The loop woke for `triggers` and read `observed` from NVML at `now`.
  ToolkitDecision Decide(unsigned triggers, const Result<Fingerprint>& observed,
                         Clock::time_point now);

  // The outcome of the regeneration Decide asked for, of fingerprint `fp`.
  void Generated(const Fingerprint& fp, const Status& result, Clock::time_point now);

  // The latest time the loop should wake next, absent events.
  Clock::time_point NextWake() const { return next_wake_; }

  const ToolkitReport& report() const { return report_; }
  // True once a spec was written successfully by this process.
  bool has_spec() const { return has_spec_; }

 private:
  std::chrono::milliseconds Backoff() const;
  // When the next retry or resync is due (time_point::max() for neither).
  Clock::time_point ResyncOrRetryAt() const;

  ToolkitTiming timing_;
  ToolkitReport report_;
  bool has_spec_ = false;
  bool nvml_down_ = false;
  bool last_failed_ = false;
  bool attempted_ = false;
  Fingerprint attempted_fp_;
  Fingerprint good_fp_;
  unsigned streak_ = 0;  // failures in a row (NVML or generation)
  Clock::time_point last_success_{};
  Clock::time_point retry_at_{};
  Clock::time_point next_wake_{};
};

}  // namespace gpuop::toolkit
