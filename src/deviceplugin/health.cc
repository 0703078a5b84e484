#include "deviceplugin/health.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"

namespace gpuop::deviceplugin {
namespace {

// Splits on commas and white space; drops empty entries.
std::vector<std::string> Tokens(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// Reads one variable: "all"/"xids" sets *all, numbers go to *xids.
Status ParseList(std::string_view name, std::string_view value, bool* all,
                 std::set<uint64_t>* xids) {
  for (const std::string& t : Tokens(value)) {
    if (t == "all" || t == "xids") {
      *all = true;
      continue;
    }
    auto n = ParseUint(t);
    if (!n) {
      return InvalidArgument(std::string(name) + "=\"" + std::string(value) + "\": \"" + t +
                             "\" is not an XID number, \"all\" or \"xids\"; use e.g. " +
                             std::string(name) + "=48,79");
    }
    xids->insert(*n);
  }
  return Status::Ok();
}

}  // namespace

bool HealthPolicy::Counts(uint64_t xid) const {
  if (all_enabled || enabled.count(xid)) return true;
  if (all_disabled) return false;
  return !disabled.count(xid);
}

Result<HealthPolicy> ParseHealthPolicy(std::string_view disable, std::string_view enable) {
  HealthPolicy p;
  p.disabled.insert(std::begin(kAlwaysIgnoredXids), std::end(kAlwaysIgnoredXids));
  GPUOP_RETURN_IF_ERROR(
      ParseList("DP_DISABLE_HEALTHCHECKS", disable, &p.all_disabled, &p.disabled));
  GPUOP_RETURN_IF_ERROR(ParseList("DP_ENABLE_HEALTHCHECKS", enable, &p.all_enabled, &p.enabled));
  return p;
}

const char* FaultClassName(FaultClass c) {
  switch (c) {
    case FaultClass::kApplication:
      return "application";
    case FaultClass::kGpuReset:
      return "gpu-reset";
    case FaultClass::kDriverReload:
      return "driver-reload";
    case FaultClass::kLost:
      return "lost";
    case FaultClass::kMonitor:
      return "monitor";
  }
  return "gpu-reset";
}

FaultClass ClassifyXid(uint64_t xid) {
  switch (xid) {
    case 8:    // GPU stopped processing (the channel timed out)
    case 13:   // graphics engine exception
    case 31:   // GPU memory page fault
    case 43:   // GPU stopped processing
    case 45:   // preemptive cleanup
    case 68:   // video decoder exception
    case 69:   // graphics engine class error
    case 94:   // contained ECC error: the application was stopped, the GPU is fine
    case 109:  // context switch timeout
      return FaultClass::kApplication;
    case 64:  // row remapping failure
      return FaultClass::kDriverReload;
    case 79:  // fallen off the bus
      return FaultClass::kLost;
    default:
      return FaultClass::kGpuReset;
  }
}

HealthTracker::HealthTracker(HealthPolicy policy, const std::vector<nvml::Gpu>& gpus)
    : policy_(std::move(policy)) {
  for (const nvml::Gpu& g : gpus) {
    units_.push_back({g.uuid, g.index, false, 0, 0, {}});
    for (const nvml::MigDevice& m : g.mig_devices) {
      units_.push_back({m.uuid, g.index, true, m.gi_id, m.ci_id, {}});
    }
  }
}

std::vector<size_t> HealthTracker::UnitsOfGpu(unsigned gpu) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < units_.size(); ++i) {
    if (units_[i].gpu == gpu) out.push_back(i);
  }
  return out;
}

std::vector<HealthChange> HealthTracker::Raise(const std::vector<size_t>& units, FaultClass cls,
                                               const std::string& reason,
                                               std::optional<uint64_t> xid) {
  std::vector<HealthChange> changes;
  for (size_t i : units) {
    Unit& u = units_[i];
    if (u.faults.empty()) changes.push_back({u.uuid, false, reason});
    u.faults.push_back({cls, reason, xid});
  }
  return changes;
}

std::vector<HealthChange> HealthTracker::OnEvent(const nvml::Event& e) {
  uint64_t xid = 0;
  std::string what;
  if (e.type & nvml::kEventXid) {
    xid = e.xid;
    what = "XID " + std::to_string(xid);
  } else if (e.type & nvml::kEventDoubleBitEcc) {
    xid = 48;  // the XID the driver logs for the same fault
    what = "double-bit ECC error";
  } else {
    return {};  // single-bit ECC (corrected), P-state, clock: not faults
  }
  if (!policy_.Counts(xid)) return {};
  FaultClass cls = ClassifyXid(xid);
  const std::string reason = what + " (" + FaultClassName(cls) + ")";

  // The GPU: by UUID, else by index.
  std::optional<unsigned> gpu;
  for (const Unit& u : units_) {
    if (!u.mig && !e.uuid.empty() && u.uuid == e.uuid) gpu = u.gpu;
  }
  if (!gpu && e.uuid.empty()) {
    for (const Unit& u : units_) {
      if (!u.mig && u.gpu == e.gpu) gpu = u.gpu;
    }
  }
  if (!gpu) {
    std::vector<size_t> all(units_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return Raise(all, cls, reason + " on unknown device " + e.uuid, xid);
  }
  std::vector<size_t> hit;
  if (e.gi_id && e.ci_id && cls != FaultClass::kLost) {
    for (size_t i : UnitsOfGpu(*gpu)) {
      const Unit& u = units_[i];
      if (u.mig && u.gi == *e.gi_id && u.ci == *e.ci_id) hit.push_back(i);
    }
  }
  if (hit.empty()) hit = UnitsOfGpu(*gpu);  // no MIG device matches: the whole GPU
  return Raise(hit, cls, reason, xid);
}

std::vector<HealthChange> HealthTracker::OnProbe(unsigned gpu, const nvml::GpuHealth& h) {
  std::vector<size_t> units = UnitsOfGpu(gpu);
  if (!h.responds) {
    // Open faults learn the GPU went down (evidence for their recovery);
    // healthy units of the GPU become lost.
    std::vector<size_t> fresh;
    for (size_t i : units) {
      for (Fault& f : units_[i].faults) f.saw_down = true;
      if (units_[i].faults.empty()) fresh.push_back(i);
    }
    std::vector<HealthChange> changes =
        Raise(fresh, FaultClass::kLost, "GPU does not answer NVML: " + h.error);
    for (size_t i : fresh) units_[i].faults.back().saw_down = true;
    return changes;
  }

  const bool action_pending =
      h.recovery_action && *h.recovery_action != nvml::RecoveryAction::kNone;
  const bool dbe = h.ecc_dbe_volatile && *h.ecc_dbe_volatile > 0;
  const bool remap = h.remapped_rows_pending.value_or(false);
  const bool clean = !action_pending && !dbe && !remap;

  std::vector<HealthChange> changes;
  for (size_t i : units) {
    Unit& u = units_[i];
    if (u.faults.empty()) continue;
    for (Fault& f : u.faults) {
      f.saw_action = f.saw_action || action_pending;
      f.saw_dbe = f.saw_dbe || dbe;
      f.clean_probes = clean ? f.clean_probes + 1 : 0;
    }
    if (!clean) continue;
    auto recovered = [](const Fault& f) {
      switch (f.cls) {
        case FaultClass::kApplication:
        case FaultClass::kMonitor:
          // Two clean probes, so the probe right after the fault (which
          // would find nothing wrong with the GPU) does not undo it at once.
          return f.clean_probes >= 2;
        case FaultClass::kGpuReset:
        case FaultClass::kLost:
          return f.saw_action || f.saw_dbe || f.saw_down || f.reloaded;
        case FaultClass::kDriverReload:
          return f.saw_action || f.reloaded;
      }
      return false;
    };
    std::string cleared;
    for (const Fault& f : u.faults) {
      if (recovered(f)) cleared = f.reason;
    }
    u.faults.erase(std::remove_if(u.faults.begin(), u.faults.end(), recovered), u.faults.end());
    if (u.faults.empty()) changes.push_back({u.uuid, true, "recovered from " + cleared});
  }
  return changes;
}

std::vector<HealthChange> HealthTracker::OnWaitError(const std::string& error) {
  std::vector<size_t> all(units_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return Raise(all, FaultClass::kMonitor, "NVML event wait failed: " + error);
}

void HealthTracker::OnDriverReloaded() {
  for (Unit& u : units_) {
    for (Fault& f : u.faults) f.reloaded = true;
  }
}

std::vector<unsigned> HealthTracker::FaultedGpus() const {
  std::vector<unsigned> out;
  for (const Unit& u : units_) {
    if (!u.faults.empty() && std::find(out.begin(), out.end(), u.gpu) == out.end()) {
      out.push_back(u.gpu);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool HealthTracker::Healthy(const std::string& unit) const {
  for (const Unit& u : units_) {
    if (u.uuid == unit) return u.faults.empty();
  }
  return false;
}

std::map<std::string, bool> HealthTracker::Snapshot() const {
  std::map<std::string, bool> out;
  for (const Unit& u : units_) out[u.uuid] = u.faults.empty();
  return out;
}

std::map<std::string, OpenFault> HealthTracker::OpenFaults() const {
  std::map<std::string, OpenFault> out;
  for (const Unit& u : units_) {
    if (u.faults.empty()) continue;
    const Fault& f = u.faults.front();
    out[u.uuid] = {f.cls, f.xid, f.reason};
  }
  return out;
}

}  // namespace gpuop::deviceplugin
