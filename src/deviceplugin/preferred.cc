#include "deviceplugin/preferred.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace gpuop::deviceplugin {
namespace {

// Above this many candidate sets, whole GPUs are chosen greedily.
constexpr uint64_t kMaxExhaustiveSets = 20000;

// "GPU-x::10" after "GPU-x::9": replicas in their numeric order.
std::tuple<std::string, uint64_t, std::string> NaturalKey(const std::string& id) {
  size_t sep = id.rfind("::");
  if (sep != std::string::npos && sep + 2 < id.size() &&
      std::all_of(id.begin() + static_cast<long>(sep) + 2, id.end(),
                  [](char c) { return c >= '0' && c <= '9'; }) &&
      id.size() - sep - 2 <= 18) {
    return {id.substr(0, sep), std::stoull(id.substr(sep + 2)), id};
  }
  return {id, 0, id};
}

bool DeviceLess(const DeviceRef* a, const DeviceRef* b) {
  if (a->gpu != b->gpu) return a->gpu < b->gpu;
  return NaturalKey(a->id) < NaturalKey(b->id);
}

std::vector<std::string> Ids(std::vector<const DeviceRef*> devs) {
  std::sort(devs.begin(), devs.end(), DeviceLess);
  std::vector<std::string> out;
  for (const DeviceRef* d : devs) out.push_back(d->id);
  return out;
}

uint64_t Choose(uint64_t n, uint64_t k, uint64_t cap) {
  if (k > n) return 0;
  k = std::min(k, n - k);
  uint64_t r = 1;
  for (uint64_t i = 1; i <= k; ++i) {
    r = r * (n - k + i) / i;
    if (r > cap) return cap + 1;
  }
  return r;
}

// Whole GPUs: the `need` candidates that, with `chosen`, give the highest
// total pairwise score (every set when there are few, else greedily). Ties go to the set that takes
// least from the GPUs it leaves behind (keeps well-linked groups whole), then to the earliest set.
class GpuPicker {
 public:
  GpuPicker(const Topology& topo, std::vector<const DeviceRef*> chosen,
            std::vector<const DeviceRef*> candidates)
      : topo_(topo), chosen_(std::move(chosen)), cand_(std::move(candidates)) {}

  std::vector<const DeviceRef*> Pick(size_t need) {
    if (Choose(cand_.size(), need, kMaxExhaustiveSets) <= kMaxExhaustiveSets) {
      std::vector<size_t> set;
      Search(0, need, &set);
    } else {
      Greedy(need);
    }
    std::vector<const DeviceRef*> out = chosen_;
    for (size_t i : best_) out.push_back(cand_[i]);
    return out;
  }

 private:
  int Score(const DeviceRef* a, const DeviceRef* b) const { return topo_.Score(a->gpu, b->gpu); }

  // Total score of chosen_ plus `set`, and the score between `set` and the
  // candidates left out.
  std::pair<int, int> Evaluate(const std::vector<size_t>& set) const {
    std::vector<bool> in(cand_.size(), false);
    for (size_t i : set) in[i] = true;
    int total = 0, damage = 0;
    for (size_t x = 0; x < chosen_.size(); ++x) {
      for (size_t y = x + 1; y < chosen_.size(); ++y) total += Score(chosen_[x], chosen_[y]);
    }
    for (size_t k = 0; k < set.size(); ++k) {
      const DeviceRef* d = cand_[set[k]];
      for (const DeviceRef* c : chosen_) total += Score(d, c);
      for (size_t m = k + 1; m < set.size(); ++m) total += Score(d, cand_[set[m]]);
      for (size_t o = 0; o < cand_.size(); ++o) {
        if (!in[o]) damage += Score(d, cand_[o]);
      }
    }
    return {total, damage};
  }

  void Consider(const std::vector<size_t>& set) {
    auto [total, damage] = Evaluate(set);
    if (!have_ || total > best_total_ || (total == best_total_ && damage < best_damage_)) {
      have_ = true;
      best_total_ = total;
      best_damage_ = damage;
      best_ = set;
    }
  }

  // Every `need`-subset of cand_[from...], in lexicographic order.
  void Search(size_t from, size_t need, std::vector<size_t>* set) {
    if (need == 0) {
      Consider(*set);
      return;
    }
    for (size_t i = from; i + need <= cand_.size(); ++i) {
      set->push_back(i);
      Search(i + 1, need - 1, set);
      set->pop_back();
    }
  }

  // Adds the best pair of candidates at a time (a single one last), so that
  // NVLink partners are taken together.
  void Greedy(size_t need) {
    std::vector<size_t> set;
    while (set.size() < need) {
      have_ = false;
      const std::vector<size_t> base = set;
      auto taken = [&](size_t i) { return std::find(base.begin(), base.end(), i) != base.end(); };
      for (size_t i = 0; i < cand_.size(); ++i) {
        if (taken(i)) continue;
        if (need - base.size() == 1) {
          std::vector<size_t> next = base;
          next.push_back(i);
          Consider(next);
          continue;
        }
        for (size_t j = i + 1; j < cand_.size(); ++j) {
          if (taken(j)) continue;
          std::vector<size_t> next = base;
          next.push_back(i);
          next.push_back(j);
          Consider(next);
        }
      }
      set = best_;
    }
  }

  const Topology& topo_;
  std::vector<const DeviceRef*> chosen_;
  std::vector<const DeviceRef*> cand_;
  bool have_ = false;
  int best_total_ = 0, best_damage_ = 0;
  std::vector<size_t> best_;
};

std::string UnitOf(const DeviceRef& d) { return d.unit.empty() ? d.id : d.unit; }

// Shared devices: one at a time from the unit the policy prefers.
std::vector<const DeviceRef*> PickShared(const std::vector<const DeviceRef*>& available,
                                         std::vector<const DeviceRef*> chosen, size_t need,
                                         SharedPolicy policy) {
  struct Unit {
    unsigned gpu = 0;
    unsigned replicas = 1;
    int taken = 0;
    std::vector<const DeviceRef*> free;  // in natural order
  };
  std::map<std::string, Unit> units;
  std::set<const DeviceRef*> in_chosen(chosen.begin(), chosen.end());
  for (const DeviceRef* d : available) {
    Unit& u = units[UnitOf(*d)];
    u.gpu = d->gpu;
    u.replicas = std::max(u.replicas, d->replicas);
    if (!in_chosen.count(d)) u.free.push_back(d);
  }
  // What others hold: the replicas this unit is not offering now.
  std::map<std::string, size_t> offered;
  for (const DeviceRef* d : available) ++offered[UnitOf(*d)];
  for (auto& [name, u] : units) {
    u.taken = std::max(0, static_cast<int>(u.replicas) - static_cast<int>(offered[name]));
    std::sort(u.free.begin(), u.free.end(), DeviceLess);
  }
  for (const DeviceRef* d : chosen) ++units[UnitOf(*d)].taken;

  for (size_t n = 0; n < need; ++n) {
    Unit* best = nullptr;
    const std::string* best_name = nullptr;
    for (auto& [name, u] : units) {
      if (u.free.empty()) continue;
      bool better = best == nullptr;
      if (!better) {
        int a = u.taken, b = best->taken;
        if (a != b) {
          better = policy == SharedPolicy::kDistributed ? a < b : a > b;
        } else {
          better = std::tie(u.gpu, name) < std::tie(best->gpu, *best_name);
        }
      }
      if (better) {
        best = &u;
        best_name = &name;
      }
    }
    if (best == nullptr) break;  // cannot happen: the caller checked the count
    chosen.push_back(best->free.front());
    best->free.erase(best->free.begin());
    ++best->taken;
  }
  return chosen;
}

}  // namespace

Result<SharedPolicy> ParseSharedPolicy(const std::string& s) {
  if (s == "distributed" || s.empty()) return SharedPolicy::kDistributed;
  if (s == "packed") return SharedPolicy::kPacked;
  return InvalidArgument("sharedDevicesAllocationPolicy \"" + s +
                         "\" is not valid: use \"distributed\" (the default) or \"packed\"");
}

Result<std::vector<std::string>> PreferredAllocation(const Topology& topo,
                                                     const std::vector<DeviceRef>& available,
                                                     const std::vector<std::string>& must_include,
                                                     int size, SharedPolicy policy) {
  if (size < 1) {
    return InvalidArgument("allocation size must be at least 1, got " + std::to_string(size));
  }
  std::map<std::string, const DeviceRef*> by_id;
  for (const DeviceRef& d : available) by_id.emplace(d.id, &d);
  std::vector<const DeviceRef*> avail;
  for (const auto& [id, d] : by_id) avail.push_back(d);

  std::vector<const DeviceRef*> chosen;
  std::set<std::string> must_seen;
  for (const std::string& id : must_include) {
    if (!must_seen.insert(id).second) continue;
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      return InvalidArgument("must-include device \"" + id + "\" is not among the " +
                             std::to_string(by_id.size()) + " available devices");
    }
    chosen.push_back(it->second);
  }
  const auto want = static_cast<size_t>(size);
  if (want < chosen.size()) {
    return InvalidArgument("allocation size " + std::to_string(size) + " is smaller than the " +
                           std::to_string(chosen.size()) + " must-include devices");
  }
  if (want > avail.size()) {
    return InvalidArgument(std::to_string(size) + " devices requested but only " +
                           std::to_string(avail.size()) + " are available");
  }
  const size_t need = want - chosen.size();
  if (need == 0) return Ids(chosen);

  bool shared =
      std::any_of(avail.begin(), avail.end(), [](const DeviceRef* d) { return d->shared; });
  if (shared) return Ids(PickShared(avail, std::move(chosen), need, policy));

  std::vector<const DeviceRef*> candidates;
  for (const DeviceRef* d : avail) {
    if (!must_seen.count(d->id)) candidates.push_back(d);
  }
  std::sort(candidates.begin(), candidates.end(), DeviceLess);
  GpuPicker picker(topo, std::move(chosen), std::move(candidates));
  return Ids(picker.Pick(need));
}

}  // namespace gpuop::deviceplugin
