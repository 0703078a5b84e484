// The field registry: every DCGM field name the exporter knows, and how its
// value comes out of one NVML reading (nvml::Telemetry, the GPM profiling
// metrics and the last XID) in DCGM's units (power W, energy mJ, frame buffer
// MiB, clocks MHz, PCIe throughput KB/s, profiling activity as a ratio 0-1,
// profiling traffic in bytes per second). Label fields (DCGM_FI_DRIVER_VERSION,
// ...) come from the system and the GPU's identity instead. Fields NVML cannot
// give at all (vGPU licensing) are known, accepted in a counters file and
// reported as unavailable, never faked; DCGM_FI_PROF_* exist where GPM does
// (Hopper and newer) and are missing, like any unsupported field, elsewhere.
//
// The registry is a constant table: every function is pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "nvml/device.h"

namespace gpuop::exporter {

// What one device (a GPU, or one MIG GPU instance) gave in one collection.
struct Reading {
  nvml::Telemetry telemetry;
  std::optional<uint64_t> last_xid;  // GPUs only: 0 before any XID
  // Since the previous collection; nullopt without GPM, or on the first
  // collection of a device (GPM compares two samples).
  std::optional<nvml::GpmMetrics> gpm;
};

// What label fields are read from.
struct LabelSource {
  const nvml::SystemInfo* system = nullptr;
  const nvml::Gpu* gpu = nullptr;
};

enum class FieldKind {
  kNumeric,      // a number from a Reading; may also be used as a label
  kText,         // a string (driver version, ...): only as type `label`
  kUnavailable,  // NVML has no equivalent: accepted, never exported
};

struct FieldSpec {
  std::string_view name;  // "DCGM_FI_DEV_GPU_TEMP"
  FieldKind kind = FieldKind::kNumeric;
  std::string_view default_type;  // the type in the default counters ("gauge", "counter", "label")
  std::string_view unit;          // for docs: "C", "W", "MiB", ...
  std::string_view help;          // the default help text
  // kNumeric: the value, nullopt where the device did not report it.
  std::optional<double> (*value)(const Reading&) = nullptr;
  // kText: the label value.
  std::string (*text)(const LabelSource&) = nullptr;
  std::string_view why_unavailable;  // kUnavailable: what NVML lacks
};

// Every known field, in a stable order (the docs' table).
std::span<const FieldSpec> AllFields();
// The spec of `name`, nullptr when unknown. Deprecated DCGM aliases
// (DCGM_FI_DEV_CLOCK_THROTTLE_REASONS) resolve to their own entries.
const FieldSpec* FindField(std::string_view name);

}  // namespace gpuop::exporter
