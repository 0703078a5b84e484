// Text and JSON renderings of the NVML model for `gpuop nvml` and for tests.
//
// Pure functions of the model values: no NVML calls, safe from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "nvml/device.h"

namespace gpuop::nvml {

// Exactly what `nvidia-smi -L` prints: one line per GPU, MIG devices indented
// under their GPU.
std::string FormatGpuList(const std::vector<Gpu>& gpus);

nlohmann::json ToJson(const SystemInfo& s);
nlohmann::json ToJson(const PciInfo& p);
nlohmann::json ToJson(const GiProfile& p);
nlohmann::json ToJson(const MigDevice& m);
nlohmann::json ToJson(const GpuInstance& gi);
nlohmann::json ToJson(const Gpu& g);
// Absent fields are null, so every reading has the same keys.
nlohmann::json ToJson(const Telemetry& t);

// The whole inventory: {"system": ..., "gpus": [... each with "gi_profiles"]}.
// `gi_profiles[i]` belongs to gpus[i] (empty when MIG is off or unsupported).
nlohmann::json InventoryJson(const SystemInfo& s, const std::vector<Gpu>& gpus,
                             const std::vector<std::vector<GiProfile>>& gi_profiles);

// One GPU's reading for the telemetry table: the reading, or why it failed
// (a lost GPU gets its own row; the other GPUs are still shown).
struct TelemetryRow {
  unsigned gpu = 0;
  Result<Telemetry> reading = Telemetry{};
};

// A table like nvidia-smi's: temperature, power, utilisation, memory, clocks,
// ECC and PCIe replays per GPU. Fields NVML does not support show "-".
std::string FormatTelemetryTable(const std::vector<TelemetryRow>& rows);

// A short human summary of one GPU for `gpuop nvml info`.
std::string FormatGpuSummary(const Gpu& g);

}  // namespace gpuop::nvml
