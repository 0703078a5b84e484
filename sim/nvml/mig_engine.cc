#include "sim/nvml/mig_engine.h"

#include <algorithm>

#include "base/strings.h"

namespace gpuop::sim {
namespace {

// Compute slices of each NVML_COMPUTE_INSTANCE_PROFILE_* index; 0: not simulated.
unsigned CiSlicesOfIndex(unsigned nvml_index) {
  switch (nvml_index) {
    case 0:
      return 1;
    case 1:
      return 2;
    case 2:
      return 3;
    case 3:
      return 4;
    case 4:
      return 7;
    default:
      return 0;
  }
}

// "+me" and "+me.all" both take the GPU's one set of extra media engines.
bool HasMediaExtensions(const GiProfile& p) { return p.name.find("+me") != std::string::npos; }

bool Overlaps(unsigned a_start, unsigned a_size, unsigned b_start, unsigned b_size) {
  return a_start < b_start + b_size && b_start < a_start + a_size;
}

// Whether `candidate` can join `existing`: placement, memory overlap, compute
// total, per-profile count and the single media-extension engine set.
MigVerdict CheckCandidate(const GpuModel& model, const std::vector<GiRecord>& existing,
                          const GiProfile& profile, unsigned start) {
  if (std::find(profile.placement_starts.begin(), profile.placement_starts.end(), start) ==
      profile.placement_starts.end()) {
    return MigVerdict::kInvalid;
  }
  unsigned compute = profile.slices;
  unsigned same_profile = 0;
  bool media_taken = false;
  for (const auto& gi : existing) {
    if (Overlaps(start, profile.placement_size, gi.start, gi.size)) return MigVerdict::kNoRoom;
    const GiProfile* p = model.ProfileById(gi.profile_id);
    if (p == nullptr) continue;
    compute += p->slices;
    if (p->id == profile.id) ++same_profile;
    if (HasMediaExtensions(*p)) media_taken = true;
  }
  if (compute > model.compute_slices) return MigVerdict::kNoRoom;
  if (same_profile >= profile.max_count) return MigVerdict::kNoRoom;
  if (media_taken && HasMediaExtensions(profile)) return MigVerdict::kNoRoom;
  return MigVerdict::kOk;
}

}  // namespace

unsigned GiIdFor(const GpuModel& model, unsigned start, unsigned size) {
  if (size == 0) return 0;
  return (model.memory_slices / size - 1) + start / size;
}

MigVerdict PlanGpuInstance(const GpuModel& model, const std::vector<GiRecord>& existing,
                           const GiProfile& profile, std::optional<unsigned> start, GiRecord* out) {
  if (!model.mig_capable() || model.ProfileById(profile.id) == nullptr) {
    return MigVerdict::kNotSupported;
  }
  auto fill = [&](unsigned s) {
    *out = GiRecord{};
    out->id = GiIdFor(model, s, profile.placement_size);
    out->profile_id = profile.id;
    out->start = s;
    out->size = profile.placement_size;
  };
  if (start) {
    MigVerdict v = CheckCandidate(model, existing, profile, *start);
    if (v == MigVerdict::kOk) fill(*start);
    return v;
  }
  for (unsigned s : profile.placement_starts) {
    if (CheckCandidate(model, existing, profile, s) == MigVerdict::kOk) {
      fill(s);
      return MigVerdict::kOk;
    }
  }
  return MigVerdict::kNoRoom;
}

unsigned GpuInstanceRemainingCapacity(const GpuModel& model, const std::vector<GiRecord>& existing,
                                      const GiProfile& profile) {
  std::vector<GiRecord> layout = existing;
  unsigned n = 0;
  GiRecord next;
  while (PlanGpuInstance(model, layout, profile, std::nullopt, &next) == MigVerdict::kOk) {
    layout.push_back(next);
    ++n;
  }
  return n;
}

bool LayoutValid(const GpuModel& model, const std::vector<GiRecord>& gis) {
  std::vector<GiRecord> placed;
  for (const auto& gi : gis) {
    const GiProfile* p = model.ProfileById(gi.profile_id);
    if (p == nullptr || gi.size != p->placement_size) return false;
    if (CheckCandidate(model, placed, *p, gi.start) != MigVerdict::kOk) return false;
    if (gi.id != GiIdFor(model, gi.start, gi.size)) return false;
    unsigned used = 0;
    for (const auto& ci : gi.cis) used += ci.slices;
    if (used > p->slices) return false;
    placed.push_back(gi);
  }
  return true;
}

std::optional<CiProfile> CiProfileFor(const GiProfile& gi_profile, unsigned nvml_index) {
  unsigned c = CiSlicesOfIndex(nvml_index);
  if (c == 0 || c > gi_profile.slices) return std::nullopt;
  CiProfile p;
  p.nvml_index = nvml_index;
  p.slices = c;
  p.instance_count = gi_profile.slices / c;
  p.multiprocessors = gi_profile.multiprocessors * c / gi_profile.slices;
  return p;
}

MigVerdict PlanComputeInstance(const GiProfile& gi_profile, const GiRecord& gi,
                               unsigned ci_nvml_index, CiRecord* out) {
  auto profile = CiProfileFor(gi_profile, ci_nvml_index);
  if (!profile) return MigVerdict::kNotSupported;
  unsigned same = 0;
  std::vector<bool> used(gi_profile.slices, false);
  for (const auto& ci : gi.cis) {
    if (ci.profile == ci_nvml_index) ++same;
    for (unsigned i = ci.start; i < ci.start + ci.slices && i < used.size(); ++i) used[i] = true;
  }
  if (same >= profile->instance_count) return MigVerdict::kNoRoom;
  std::optional<unsigned> start;
  for (unsigned o = 0; o + profile->slices <= gi_profile.slices && !start; ++o) {
    bool free = true;
    for (unsigned i = o; i < o + profile->slices; ++i) free = free && !used[i];
    if (free) start = o;
  }
  if (!start) return MigVerdict::kNoRoom;
  unsigned id = 0;
  while (std::any_of(gi.cis.begin(), gi.cis.end(), [&](const CiRecord& c) { return c.id == id; })) {
    ++id;
  }
  *out = CiRecord{};
  out->id = id;
  out->profile = ci_nvml_index;
  out->slices = profile->slices;
  out->start = *start;
  return MigVerdict::kOk;
}

unsigned ComputeInstanceRemainingCapacity(const GiProfile& gi_profile, const GiRecord& gi,
                                          unsigned ci_nvml_index) {
  GiRecord layout = gi;
  unsigned n = 0;
  CiRecord next;
  while (PlanComputeInstance(gi_profile, layout, ci_nvml_index, &next) == MigVerdict::kOk) {
    layout.cis.push_back(next);
    ++n;
  }
  return n;
}

std::string MigDeviceProfileName(const GpuModel& model, const GiProfile& gi_profile,
                                 unsigned ci_slices) {
  if (ci_slices == gi_profile.slices) return gi_profile.name;
  // The suffix ("+me", "+gfx", "-me", ...) belongs to the GI; a partial CI
  // keeps it after the size.
  const std::string whole =
      MigProfileName(gi_profile.slices, gi_profile.slices, gi_profile.memory_mib, model.memory_mib);
  const std::string suffix =
      StartsWith(gi_profile.name, whole) ? gi_profile.name.substr(whole.size()) : "";
  return MigProfileName(ci_slices, gi_profile.slices, gi_profile.memory_mib, model.memory_mib) +
         suffix;
}

}  // namespace gpuop::sim
