#include "dra/health.h"

namespace gpuop::dra {

std::map<std::string, GpuHealthState> GpuHealthTracker::Update(
    const std::vector<nvml::Gpu>& gpus, const std::map<std::string, UnitFault>& faults,
    const std::string& now) {
  std::map<std::string, std::string> parent;
  for (const nvml::Gpu& g : gpus) {
    parent[g.uuid] = g.uuid;
    for (const nvml::MigDevice& m : g.mig_devices) parent[m.uuid] = g.uuid;
  }
  std::map<std::string, GpuHealthState> out;
  for (const auto& [unit, fault] : faults) {
    auto p = parent.find(unit);
    if (p == parent.end()) continue;
    GpuHealthState& s = out[p->second];
    if (fault.xid && !s.xid) s.xid = fault.xid;
    if (fault.lost && !fault.xid) s.lost = true;
  }
  std::map<std::string, std::string> since;
  for (auto& [uuid, s] : out) {
    auto it = since_.find(uuid);
    s.since = it != since_.end() ? it->second : now;
    since[uuid] = s.since;
  }
  since_ = std::move(since);
  return out;
}

}  // namespace gpuop::dra
