// The MIG engine: which GPU and compute instances fit on a GPU, where they go
// and which IDs they get, following the rules of the real driver (as
// `nvidia-smi mig -lgip` and NVML report them). Pure functions of the model and
// the current layout: no I/O, no clock, no shared state; safe to call from any
// thread.
//
// Layout: a GPU has M memory slices (8, or 4 on A30) and C compute slices (7,
// or 4 on A30). A GI takes `placement_size` memory slices at a start listed by
// its profile, and `slices` compute slices. A CI takes c of its GI's compute
// slices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/nvml/gpm.h"
#include "sim/nvml/machine.h"

namespace gpuop::sim {

struct CiRecord {
  unsigned id = 0;
  unsigned profile = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_* (also the CI profile info id)
  unsigned slices = 0;   // compute slices
  unsigned start = 0;    // compute-slice offset inside the GI
  uint64_t serial = 0;   // creation serial: makes MIG UUIDs and handles unique
  bool operator==(const CiRecord&) const = default;
};

struct GiRecord {
  unsigned id = 0;
  unsigned profile_id = 0;  // driver profile id (GiProfile::id)
  unsigned start = 0;       // memory-slice placement
  unsigned size = 0;
  uint64_t serial = 0;
  std::vector<CiRecord> cis;  // sorted by id
  BusyTime busy;              // its work (`gpuop sim gpu load --gi`), what GPM reads
  bool operator==(const GiRecord&) const = default;
};

// Why a MIG operation cannot be done; the NVML adapter maps each to a return code.
enum class MigVerdict {
  kOk,
  kNotSupported,  // the model has no such profile, or no MIG at all
  kInvalid,       // a placement the profile does not allow
  kNoRoom,        // valid, but the current layout leaves no space
  kNotFound,
};

// The GI ID the driver gives a placement: (M/size - 1) + start/size.
unsigned GiIdFor(const GpuModel& model, unsigned start, unsigned size);

// Plans a new GI of `profile` at `start` (or the first valid start when none).
// On kOk fills `out` (id, profile_id, start, size); `out.serial` is left 0.
MigVerdict PlanGpuInstance(const GpuModel& model, const std::vector<GiRecord>& existing,
                           const GiProfile& profile, std::optional<unsigned> start, GiRecord* out);

// How many more GIs of `profile` could be created, one after another.
unsigned GpuInstanceRemainingCapacity(const GpuModel& model, const std::vector<GiRecord>& existing,
                                      const GiProfile& profile);

// True when the whole layout is one the driver accepts (used by tests and to
// check a state file).
bool LayoutValid(const GpuModel& model, const std::vector<GiRecord>& gis);

// A compute instance profile of a GI (nvmlComputeInstanceProfileInfo_t).
struct CiProfile {
  unsigned nvml_index = 0;  // also the profile info id
  unsigned slices = 0;
  unsigned instance_count = 0;
  unsigned multiprocessors = 0;
};

// The CI profile `nvml_index` of a GI with `gi_profile`, or nullopt when the GI
// cannot hold it (more slices than the GI, or an index without a size).
std::optional<CiProfile> CiProfileFor(const GiProfile& gi_profile, unsigned nvml_index);

// Plans a CI: lowest free id, first free compute-slice offset.
MigVerdict PlanComputeInstance(const GiProfile& gi_profile, const GiRecord& gi,
                               unsigned ci_nvml_index, CiRecord* out);
unsigned ComputeInstanceRemainingCapacity(const GiProfile& gi_profile, const GiRecord& gi,
                                          unsigned ci_nvml_index);

// The name of a MIG device for its GI and CI: "1g.10gb", "1c.2g.20gb".
std::string MigDeviceProfileName(const GpuModel& model, const GiProfile& gi_profile,
                                 unsigned ci_slices);

}  // namespace gpuop::sim
