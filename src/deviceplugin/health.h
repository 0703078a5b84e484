// Device health: which XIDs count (the policy), and a tracker that turns NVML
// events and health probes into Healthy/Unhealthy per unit.
//
// A unit is what health is decided for: a GPU (by its UUID) or one MIG device
// (by its MIG UUID). The device plugin maps units to the devices it lists
// (replicas of a unit share its health).
//
// Upstream (k8s-device-plugin internal/rm/health.go) marks a device Unhealthy
// on any XID it does not ignore and never brings it back. gpuop adds the way
// back: each fault is classified, and a probe of the GPU must show NVML
// evidence that the fault is gone (see HealthTracker) before its units are
// Healthy again.
//
// Everything here is pure (no I/O, clock or threads). HealthTracker is a
// value owned by one thread at a time (health_monitor.h drives it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "nvml/device.h"

namespace gpuop::deviceplugin {

// ---- Policy -----------------------------------------------------------------

// XIDs upstream always ignores: application faults that say nothing about the
// GPU. 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped
// processing (the application's channel), 45 preemptive cleanup (a process
// was killed), 68 video decoder exception, 109 context switch timeout.
inline constexpr uint64_t kAlwaysIgnoredXids[] = {13, 31, 43, 45, 68, 109};

struct HealthPolicy {
  bool all_disabled = false;    // DP_DISABLE_HEALTHCHECKS=all|xids: no XID counts
  bool all_enabled = false;     // DP_ENABLE_HEALTHCHECKS=all|xids: every XID counts
  std::set<uint64_t> disabled;  // kAlwaysIgnoredXids + DP_DISABLE_HEALTHCHECKS numbers
  std::set<uint64_t> enabled;   // DP_ENABLE_HEALTHCHECKS numbers (win over disabled)

  // Whether an XID event makes its device unhealthy.
  bool Counts(uint64_t xid) const;
  // False when no XID can count: the monitor need not run at all (upstream
  // then skips health checking entirely).
  bool Active() const { return !all_disabled || all_enabled || !enabled.empty(); }
};

// Parses DP_DISABLE_HEALTHCHECKS and DP_ENABLE_HEALTHCHECKS (either may be
// empty): comma- or space-separated XID numbers, or "all"/"xids" for every
// XID. An enabled XID counts even when disabled or always ignored. Anything
// else is InvalidArgument naming the variable and the bad entry.
Result<HealthPolicy> ParseHealthPolicy(std::string_view disable, std::string_view enable);

// ---- Classification ---------------------------------------------------------

// What a fault needs before the GPU is fit again, and so what evidence its
// recovery takes (HealthTracker::OnProbe).
enum class FaultClass {
  kApplication,   // the application failed; the GPU is fine once it answers
  kGpuReset,      // the GPU must be reset (nvidia-smi -r) before new work
  kDriverReload,  // a reset does not fix it: reload the driver or reboot the node
  kLost,          // the GPU fell off the bus or stopped answering NVML
  kMonitor,       // the event wait itself failed: health is unknown
};

const char* FaultClassName(FaultClass c);  // "application", "gpu-reset", ...

// The class of an XID, from NVIDIA's XID catalog (Resolution Bucket):
//   application: 8, 13, 31, 43, 45, 68, 69, 94, 109 (RESTART_APP; 94 is a
//                contained ECC error whose application was killed)
//   gpu-reset:   46, 48, 61, 62, 63, 74, 92, 95, 119, 120, 140, 154 and every
//                XID not listed here (a conservative default: a reset is the
//                least that brings a GPU back from an unknown fault)
//   driver-reload: 64 (row remapping failed: the row cannot be retired by a
//                reset; the node needs service or a reboot)
//   lost:        79 (fallen off the bus)
FaultClass ClassifyXid(uint64_t xid);

// ---- Tracker ----------------------------------------------------------------

// One change of a unit's health.
struct HealthChange {
  std::string unit;  // GPU or MIG UUID
  bool healthy = false;
  std::string reason;  // "XID 48 (gpu-reset)", "recovered: ..."
  bool operator==(const HealthChange&) const = default;
};

// The fault that made a unit unhealthy (its first open one).
struct OpenFault {
  FaultClass cls = FaultClass::kGpuReset;
  std::optional<uint64_t> xid;  // set for XID and double-bit ECC (48) faults
  std::string reason;
  bool operator==(const OpenFault&) const = default;
};

// Turns events and probes into health changes. Recovery evidence, read by a
// probe of the faulted GPU and kept per fault from the moment it was raised:
//   - the GPU answers NVML and the driver posts no recovery action
//     (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION is NONE, or not reported), no
//     uncorrectable volatile ECC error and no pending row remap; and
//   - for gpu-reset and lost faults, proof that a reset happened since: the
//     driver had posted an action that is now cleared, the volatile
//     uncorrectable ECC counter (cleared only by a reset) went from non-zero
//     to zero, or the GPU had stopped answering and answers again;
//   - for driver-reload faults, only OnDriverReloaded(), or a posted action
//     now cleared (the driver cleared it after the reload);
//   - application and monitor faults need nothing more, but two clean probes
//     in a row (the monitor probes once right after a fault, and that probe
//     alone must not undo it).
// Without such evidence a unit stays Unhealthy, as upstream's would.
class HealthTracker {
 public:
  // Units: every GPU's UUID and every MIG device's UUID in `gpus`.
  HealthTracker(HealthPolicy policy, const std::vector<nvml::Gpu>& gpus);

  // An NVML event. XIDs the policy ignores and single-bit ECC events change
  // nothing; a double-bit ECC event counts as XID 48 (so disabling 48 mutes
  // both). An XID with GPU/compute instance ids hits that MIG device only;
  // without them, every unit of the GPU. An event for an unknown GPU marks
  // every unit (upstream does the same on a failed UUID lookup).
  std::vector<HealthChange> OnEvent(const nvml::Event& e);

  // A probe of GPU `gpu` (NVML index). A GPU that does not answer makes all
  // its units unhealthy (lost); otherwise faults whose evidence is complete
  // are cleared.
  std::vector<HealthChange> OnProbe(unsigned gpu, const nvml::GpuHealth& h);

  // The event wait failed with something other than a timeout: every unit is
  // unhealthy until a probe shows its GPU answering with nothing pending.
  std::vector<HealthChange> OnWaitError(const std::string& error);

  // NVML was initialised again after a driver reload (which also resets every
  // GPU): every open fault has its evidence and clears at the next probe that
  // answers cleanly.
  void OnDriverReloaded();

  // GPUs with an open fault: the ones worth probing.
  std::vector<unsigned> FaultedGpus() const;
  bool Healthy(const std::string& unit) const;
  // Every unit and whether it is healthy.
  std::map<std::string, bool> Snapshot() const;
  // The unhealthy units and why.
  std::map<std::string, OpenFault> OpenFaults() const;

 private:
  struct Fault {
    FaultClass cls = FaultClass::kGpuReset;
    std::string reason;
    std::optional<uint64_t> xid;
    bool saw_action = false;  // a recovery action was posted since
    bool saw_down = false;    // the GPU stopped answering since
    bool saw_dbe = false;     // the volatile DBE counter was non-zero since
    bool reloaded = false;    // OnDriverReloaded since
    int clean_probes = 0;     // consecutive probes that found nothing pending
  };
  struct Unit {
    std::string uuid;
    unsigned gpu = 0;
    bool mig = false;
    unsigned gi = 0, ci = 0;
    std::vector<Fault> faults;
  };

  std::vector<HealthChange> Raise(const std::vector<size_t>& units, FaultClass cls,
                                  const std::string& reason,
                                  std::optional<uint64_t> xid = std::nullopt);
  std::vector<size_t> UnitsOfGpu(unsigned gpu) const;

  HealthPolicy policy_;
  std::vector<Unit> units_;  // GPUs and MIG devices, in the order given
};

}  // namespace gpuop::deviceplugin
