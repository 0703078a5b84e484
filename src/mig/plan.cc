#include "mig/plan.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "base/strings.h"

namespace gpuop::mig {
namespace {

// A wanted MIG device resolved against a GPU's profiles.
struct Device {
  const nvml::GiProfile* gi = nullptr;
  unsigned ci_slices = 0;
  std::string name;  // canonical
};

bool IsMediaExtension(const nvml::GiProfile& p) { return EndsWith(p.name, "+me"); }

unsigned PlacementSize(const nvml::GiProfile& p) {
  return p.placements.empty() ? p.slices : p.placements.front().size;
}

// Compute slices of the whole GPU: the largest profile spans them all.
unsigned ComputeSlices(const GpuState& gpu) {
  unsigned n = 0;
  for (const auto& p : gpu.profiles) n = std::max(n, p.slices);
  return n;
}

const nvml::GiProfile* ProfileById(const GpuState& gpu, unsigned id) {
  for (const auto& p : gpu.profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

std::string ProfileList(const GpuState& gpu) {
  std::vector<std::string> names;
  for (const auto& p : gpu.profiles) names.push_back(p.name);
  return Join(names, ", ");
}

Result<Device> Resolve(const GpuState& gpu, const std::string& device) {
  GPUOP_ASSIGN_OR_RETURN(ProfileName pn, ParseProfileName(device));
  const std::string gi_name = pn.GiName();
  for (const auto& p : gpu.profiles) {
    if (p.name != gi_name) continue;
    if (!nvml::CiProfileIndexForSlices(pn.ci_slices) || pn.ci_slices > p.slices) {
      return InvalidArgument(gpu.Describe() + " has no compute instance profile of " +
                             std::to_string(pn.ci_slices) + " slices in " + gi_name + " (\"" +
                             device + "\")");
    }
    return Device{&p, pn.ci_slices, pn.ToString()};
  }
  return InvalidArgument(gpu.Describe() + " has no MIG profile " + gi_name + " (\"" + device +
                         "\"); its profiles are " + ProfileList(gpu));
}

std::vector<std::string> Expand(const std::map<std::string, unsigned>& devices) {
  std::vector<std::string> out;
  for (const auto& [name, n] : devices) out.insert(out.end(), n, name);
  std::sort(out.begin(), out.end());
  return out;
}

// The device name of a GI holding exactly one compute instance; nullopt for
// a GI with none or several (those are never kept).
std::optional<std::string> CleanDeviceName(const nvml::GpuInstance& gi) {
  if (gi.compute_instances.size() != 1) return std::nullopt;
  const auto& ci = gi.compute_instances.front();
  auto pn = ParseProfileName(ci.profile_name);
  if (!pn.ok()) return std::nullopt;
  return pn->ToString();
}

struct Occupied {
  unsigned start, size, profile_id, slices;
  bool media;
};

class Packer {
 public:
  Packer(const GpuState& gpu, std::vector<Device> items, std::vector<Occupied> used)
      : gpu_(gpu), items_(std::move(items)), used_(std::move(used)), total_(ComputeSlices(gpu)) {
    // Largest first: big instances have the fewest placements.
    std::stable_sort(items_.begin(), items_.end(), [](const Device& a, const Device& b) {
      return std::make_tuple(PlacementSize(*a.gi), a.gi->slices, a.gi->id, a.ci_slices) >
             std::make_tuple(PlacementSize(*b.gi), b.gi->slices, b.gi->id, b.ci_slices);
    });
    chosen_.resize(items_.size());
  }

  bool Solve() { return Place(0); }

  std::vector<CreateOp> Ops() const {
    std::vector<CreateOp> ops;
    for (size_t i = 0; i < items_.size(); ++i) {
      ops.push_back(
          {items_[i].gi->id, items_[i].gi->name, chosen_[i], items_[i].ci_slices, items_[i].name});
    }
    return ops;
  }

 private:
  bool Fits(const nvml::GiProfile& p, const nvml::Placement& pl) const {
    unsigned compute = p.slices, same = 0;
    for (const auto& o : used_) {
      if (pl.start < o.start + o.size && o.start < pl.start + pl.size) return false;
      compute += o.slices;
      if (o.profile_id == p.id) ++same;
      if (o.media && IsMediaExtension(p)) return false;
    }
    return compute <= total_ && (p.max_count == 0 || same < p.max_count);
  }

  bool Place(size_t i) {
    if (i == items_.size()) return true;
    const Device& d = items_[i];
    std::vector<nvml::Placement> placements = d.gi->placements;
    if (placements.empty()) placements.push_back({0, PlacementSize(*d.gi)});
    std::sort(placements.begin(), placements.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    // Identical items are placed in increasing order: no symmetric retries.
    const bool same_as_prev =
        i > 0 && items_[i - 1].gi->id == d.gi->id && items_[i - 1].ci_slices == d.ci_slices;
    for (const auto& pl : placements) {
      if (same_as_prev && pl.start <= chosen_[i - 1].start) continue;
      if (!Fits(*d.gi, pl)) continue;
      used_.push_back({pl.start, pl.size, d.gi->id, d.gi->slices, IsMediaExtension(*d.gi)});
      chosen_[i] = pl;
      if (Place(i + 1)) return true;
      used_.pop_back();
    }
    return false;
  }

  const GpuState& gpu_;
  std::vector<Device> items_;
  std::vector<Occupied> used_;
  std::vector<nvml::Placement> chosen_;
  unsigned total_;
};

std::string CountList(const std::vector<std::string>& names) {
  std::map<std::string, unsigned> counts;
  for (const auto& n : names) ++counts[n];
  std::vector<std::string> parts;
  for (const auto& [n, c] : counts) parts.push_back(std::to_string(c) + "x " + n);
  return parts.empty() ? std::string("no MIG devices") : Join(parts, ", ");
}

}  // namespace

std::string GpuState::Describe() const {
  return "GPU " + std::to_string(index) + " (" +
         (name.empty() ? std::string("unknown model") : name) + ")";
}

std::vector<std::string> DeviceNames(const GpuState& gpu) {
  std::vector<std::string> out;
  for (const auto& gi : gpu.instances) {
    if (gi.compute_instances.empty()) {
      out.push_back(gi.profile_name + " (GPU instance " + std::to_string(gi.id) +
                    " without a compute instance)");
    }
    for (const auto& ci : gi.compute_instances) {
      auto pn = ParseProfileName(ci.profile_name);
      out.push_back(pn.ok() ? pn->ToString() : ci.profile_name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<GpuWant>> SelectWants(const std::vector<ConfigEntry>& entries,
                                         const std::vector<GpuState>& gpus,
                                         const std::string& config_name) {
  std::vector<GpuWant> wants;
  for (const auto& gpu : gpus) {
    const ConfigEntry* chosen = nullptr;
    for (const auto& e : entries) {
      if (e.Covers(gpu.index, gpu.pci_device_id, gpu.pci_subsystem_id)) chosen = &e;
    }
    if (chosen == nullptr) continue;
    const std::string config_ref =
        "mig-config \"" + config_name + "\"" +
        (chosen->line > 0 ? " (line " + std::to_string(chosen->line) + ")" : std::string());
    const std::string where = " in " + config_ref;
    if (!gpu.mig_capable) {
      if (!chosen->mig_enabled) continue;  // nothing to disable
      return InvalidArgument(gpu.Describe() + " does not support MIG; remove it from " +
                             config_ref + " or add a device-filter");
    }
    for (const auto& [profile, _] : chosen->mig_devices) {
      auto d = Resolve(gpu, profile);
      if (!d.ok()) return InvalidArgument(d.status().message() + where);
    }
    GpuWant w;
    w.gpu = gpu.index;
    w.mig_enabled = chosen->mig_enabled;
    w.devices = chosen->mig_devices;
    // A layout that cannot fit an empty GPU is a config error, found before
    // anything is touched.
    if (w.mig_enabled && !gpu.profiles.empty()) {
      auto packed = Pack(gpu, Expand(w.devices), {});
      if (!packed.ok()) return InvalidArgument(packed.status().message() + where);
    }
    wants.push_back(std::move(w));
  }
  return wants;
}

Result<std::vector<CreateOp>> Pack(const GpuState& gpu, const std::vector<std::string>& devices,
                                   const std::vector<nvml::GpuInstance>& kept) {
  std::vector<Device> items;
  std::map<unsigned, unsigned> per_profile;
  for (const auto& name : devices) {
    GPUOP_ASSIGN_OR_RETURN(Device d, Resolve(gpu, name));
    items.push_back(d);
  }
  std::vector<Occupied> used;
  std::vector<std::string> kept_names;
  for (const auto& gi : kept) {
    const nvml::GiProfile* p = ProfileById(gpu, gi.profile_id);
    unsigned slices = p ? p->slices : 0;
    used.push_back({gi.placement.start, gi.placement.size, gi.profile_id, slices,
                    p != nullptr && IsMediaExtension(*p)});
    ++per_profile[gi.profile_id];
    kept_names.push_back(gi.profile_name);
  }
  for (const auto& d : items) {
    if (d.gi->max_count > 0 && ++per_profile[d.gi->id] > d.gi->max_count) {
      return InvalidArgument(gpu.Describe() + ": MIG profile " + d.gi->name + " fits at most " +
                             std::to_string(d.gi->max_count) + " times, the layout (" +
                             CountList(devices) + ") needs more");
    }
  }
  Packer packer(gpu, items, used);
  if (!packer.Solve()) {
    return InvalidArgument(
        gpu.Describe() + ": the MIG devices " + CountList(devices) +
        (kept.empty() ? std::string() : " (beside the kept " + CountList(kept_names) + ")") +
        " do not fit: no placement of them exists on its " + std::to_string(ComputeSlices(gpu)) +
        " compute slices");
  }
  return packer.Ops();
}

Result<GpuPlan> PlanGpu(const GpuState& gpu, const GpuWant& want, bool mode_only) {
  GpuPlan plan;
  plan.gpu = gpu.index;
  plan.gpu_desc = gpu.Describe();
  if (!gpu.mig_capable) {
    if (want.mig_enabled) return InvalidArgument(gpu.Describe() + " does not support MIG");
    return plan;
  }
  auto destroy_all_except = [&](const std::set<unsigned>& keep) {
    for (const auto& gi : gpu.instances) {
      if (keep.contains(gi.id)) {
        plan.kept_gis.push_back(gi.id);
        continue;
      }
      for (const auto& ci : gi.compute_instances) plan.destroy_cis.push_back({gi.id, ci.id});
      plan.destroy_gis.push_back(gi.id);
    }
  };

  if (!want.mig_enabled) {
    if (gpu.mig_enabled) destroy_all_except({});  // MIG cannot turn off while instances exist
    if (gpu.mig_enabled || gpu.mig_pending) plan.set_mode = false;
    return plan;
  }
  if (!gpu.mig_enabled) {
    plan.set_mode = true;
    if (!mode_only) plan.after_reset = want;
    return plan;
  }
  if (!gpu.mig_pending) plan.set_mode = true;  // cancels a pending disable
  if (mode_only) return plan;

  // Keep every instance the wanted layout still has, if the rest then fits.
  std::vector<std::string> wanted = Expand(want.devices);
  std::multiset<std::string> remaining(wanted.begin(), wanted.end());
  std::vector<nvml::GpuInstance> kept;
  std::set<unsigned> kept_ids;
  for (const auto& gi : gpu.instances) {
    auto name = CleanDeviceName(gi);
    if (!name) continue;
    auto it = remaining.find(*name);
    if (it == remaining.end()) continue;
    remaining.erase(it);
    kept.push_back(gi);
    kept_ids.insert(gi.id);
  }
  auto packed = Pack(gpu, std::vector<std::string>(remaining.begin(), remaining.end()), kept);
  if (!packed.ok()) {
    // The kept instances block the packing: start from an empty GPU.
    kept_ids.clear();
    packed = Pack(gpu, wanted, {});
    if (!packed.ok()) return packed.status();
  }
  destroy_all_except(kept_ids);
  plan.creates = std::move(packed).value();
  return plan;
}

Result<Plan> PlanAll(const std::vector<GpuState>& gpus, const std::vector<GpuWant>& wants,
                     bool mode_only) {
  Plan plan;
  for (const auto& w : wants) {
    auto it =
        std::find_if(gpus.begin(), gpus.end(), [&](const GpuState& g) { return g.index == w.gpu; });
    if (it == gpus.end()) return NotFound("GPU " + std::to_string(w.gpu) + " does not exist");
    GPUOP_ASSIGN_OR_RETURN(GpuPlan p, PlanGpu(*it, w, mode_only));
    if (!p.empty()) plan.gpus.push_back(std::move(p));
  }
  return plan;
}

std::string Plan::Describe() const {
  std::string out;
  for (const auto& g : gpus) {
    for (const auto& c : g.destroy_cis) {
      out += g.gpu_desc + ": destroy compute instance " + std::to_string(c.ci_id) +
             " of GPU instance " + std::to_string(c.gi_id) + "\n";
    }
    for (unsigned id : g.destroy_gis) {
      out += g.gpu_desc + ": destroy GPU instance " + std::to_string(id) + "\n";
    }
    if (g.set_mode) out += g.gpu_desc + ": set MIG mode " + (*g.set_mode ? "on" : "off") + "\n";
    if (g.after_reset) out += g.gpu_desc + ": create the layout after the GPU reset\n";
    for (const auto& c : g.creates) {
      out += g.gpu_desc + ": create " + c.device + " at placement " +
             std::to_string(c.placement.start) + ":" + std::to_string(c.placement.size) + "\n";
    }
  }
  return out;
}

Status CheckWants(const std::vector<GpuState>& gpus, const std::vector<GpuWant>& wants,
                  bool mode_only) {
  std::vector<std::string> diffs;
  for (const auto& w : wants) {
    auto it =
        std::find_if(gpus.begin(), gpus.end(), [&](const GpuState& g) { return g.index == w.gpu; });
    if (it == gpus.end()) {
      diffs.push_back("GPU " + std::to_string(w.gpu) + " does not exist");
      continue;
    }
    const GpuState& g = *it;
    if (!g.mig_capable) {
      if (w.mig_enabled) diffs.push_back(g.Describe() + " does not support MIG");
      continue;
    }
    auto mode = [](bool b) { return std::string(b ? "enabled" : "disabled"); };
    if (g.mig_enabled != w.mig_enabled) {
      diffs.push_back(g.Describe() + ": MIG mode is " + mode(g.mig_enabled) + ", want " +
                      mode(w.mig_enabled) +
                      (g.mig_pending == w.mig_enabled ? " (pending: reset required)" : ""));
      continue;
    }
    if (g.mig_pending != w.mig_enabled) {
      diffs.push_back(g.Describe() + ": MIG mode " + mode(g.mig_pending) +
                      " is pending a reset, want " + mode(w.mig_enabled));
      continue;
    }
    if (mode_only || !w.mig_enabled) continue;
    std::vector<std::string> have = DeviceNames(g), want = Expand(w.devices);
    if (have != want) {
      diffs.push_back(g.Describe() + ": has " + CountList(have) + ", want " + CountList(want));
    }
  }
  if (diffs.empty()) return Status::Ok();
  return FailedPrecondition("the MIG layout does not match:\n  " + Join(diffs, "\n  "));
}

ConfigFile ExportConfig(const std::vector<GpuState>& gpus, const std::string& config_name) {
  // (enabled, devices) -> GPU indexes, in first-seen order.
  std::vector<std::pair<ConfigEntry, std::vector<unsigned>>> groups;
  bool every_gpu_mig = true;
  for (const auto& g : gpus) {
    if (!g.mig_capable) {
      every_gpu_mig = false;
      continue;
    }
    ConfigEntry e;
    e.mig_enabled = g.mig_enabled;
    if (g.mig_enabled) {
      for (const auto& gi : g.instances) {
        for (const auto& ci : gi.compute_instances) {
          auto pn = ParseProfileName(ci.profile_name);
          if (pn.ok()) ++e.mig_devices[pn->ToString()];
        }
      }
    }
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& grp) { return grp.first == e; });
    if (it == groups.end()) {
      groups.push_back({e, {g.index}});
    } else {
      it->second.push_back(g.index);
    }
  }
  ConfigFile file;
  auto& entries = file.configs[config_name];
  for (auto& [e, indexes] : groups) {
    if (groups.size() == 1 && every_gpu_mig) {
      e.all_devices = true;
    } else {
      e.devices = indexes;
    }
    entries.push_back(e);
  }
  if (entries.empty()) {  // no MIG GPU: a config that changes nothing
    ConfigEntry e;
    e.all_devices = true;
    entries.push_back(e);
  }
  return file;
}

ConfigFile DefaultConfigs(const std::vector<GpuState>& gpus) {
  ConfigFile file;
  ConfigEntry disabled;
  disabled.all_devices = true;
  file.configs["all-disabled"].push_back(disabled);
  // all-enabled covers every GPU unless some lack MIG: then one entry per
  // MIG model, so the config still applies on the node.
  const bool every_gpu_mig =
      std::all_of(gpus.begin(), gpus.end(), [](const GpuState& g) { return g.mig_capable; });
  if (every_gpu_mig) {
    ConfigEntry enabled = disabled;
    enabled.mig_enabled = true;
    file.configs["all-enabled"].push_back(enabled);
  }

  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const auto& g : gpus) {
    if (!g.mig_capable || g.profiles.empty()) continue;
    if (!seen.insert({g.pci_device_id, 0}).second) continue;
    auto entry_for = [&](std::map<std::string, unsigned> devices) {
      ConfigEntry e;
      e.all_devices = true;
      e.filters.push_back({g.pci_device_id, std::nullopt});
      e.mig_enabled = true;
      e.mig_devices = std::move(devices);
      return e;
    };
    if (!every_gpu_mig) file.configs["all-enabled"].push_back(entry_for({}));
    for (const auto& p : g.profiles) {
      if (!p.name.empty() && p.name.find_first_of("+-") != std::string::npos &&
          !IsMediaExtension(p)) {
        continue;  // +gfx, -me: not in the operator's defaults
      }
      // As many as fit an empty GPU.
      unsigned n = 0;
      while (n < std::max(p.max_count, 1u) &&
             Pack(g, std::vector<std::string>(n + 1, p.name), {}).ok()) {
        ++n;
      }
      if (n == 0) continue;
      std::string config = "all-" + p.name;
      if (IsMediaExtension(p)) config = "all-" + p.name.substr(0, p.name.size() - 3) + ".me";
      file.configs[config].push_back(entry_for({{p.name, n}}));
    }
    // Balanced: two of the smallest 1g, one 2g, one 3g (two 1g and one 2g on
    // four-slice GPUs such as the A30), as NVIDIA's defaults.
    auto smallest = [&](unsigned slices) -> const nvml::GiProfile* {
      const nvml::GiProfile* best = nullptr;
      for (const auto& p : g.profiles) {
        if (p.slices != slices || p.name.find_first_of("+-") != std::string::npos) continue;
        if (best == nullptr || p.memory_mib < best->memory_mib) best = &p;
      }
      return best;
    };
    std::map<std::string, unsigned> balanced;
    const unsigned total = ComputeSlices(g);
    if (auto* p1 = smallest(1)) balanced[p1->name] = 2;
    if (auto* p2 = smallest(2)) balanced[p2->name] = 1;
    if (total >= 7) {
      if (auto* p3 = smallest(3)) balanced[p3->name] = 1;
    }
    if (balanced.size() >= 2 && Pack(g, Expand(balanced), {}).ok()) {
      file.configs["all-balanced"].push_back(entry_for(balanced));
    }
  }
  return file;
}

}  // namespace gpuop::mig
