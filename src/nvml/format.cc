#include "nvml/format.h"

#include <cstdio>

namespace gpuop::nvml {
namespace {

template <typename T>
nlohmann::json Opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

nlohmann::json ToJson(const Placement& p) { return {{"start", p.start}, {"size", p.size}}; }

nlohmann::json ToJson(const Engines& e) {
  return {{"copy", e.copy},
          {"decoders", e.decoders},
          {"encoders", e.encoders},
          {"jpegs", e.jpegs},
          {"ofas", e.ofas}};
}

}  // namespace

std::string FormatGpuList(const std::vector<Gpu>& gpus) {
  std::string out;
  char line[512];
  for (const Gpu& g : gpus) {
    std::snprintf(line, sizeof(line), "GPU %u: %s (UUID: %s)\n", g.index, g.name.c_str(),
                  g.uuid.c_str());
    out += line;
    for (const MigDevice& m : g.mig_devices) {
      // nvidia-smi pads the profile to 11 columns, then the index to 2.
      std::snprintf(line, sizeof(line), "  MIG %-11s Device %2u: (UUID: %s)\n", m.profile.c_str(),
                    m.index, m.uuid.c_str());
      out += line;
    }
  }
  return out;
}

nlohmann::json ToJson(const SystemInfo& s) {
  return {{"driver_version", s.driver_version},
          {"cuda_driver_version", s.cuda_driver_version},
          {"cuda_version", s.cuda_version},
          {"nvml_version", s.nvml_version}};
}

nlohmann::json ToJson(const PciInfo& p) {
  return {{"bus_id", p.bus_id},
          {"domain", p.domain},
          {"bus", p.bus},
          {"device", p.device},
          {"device_id", Hex32(p.device_id)},
          {"subsystem_id", Hex32(p.subsystem_id)}};
}

nlohmann::json ToJson(const GiProfile& p) {
  nlohmann::json placements = nlohmann::json::array();
  for (const auto& pl : p.placements) placements.push_back(ToJson(pl));
  return {{"index", p.index},
          {"id", p.id},
          {"name", p.name},
          {"slices", p.slices},
          {"max_count", p.max_count},
          {"multiprocessors", p.multiprocessors},
          {"engines", ToJson(p.engines)},
          {"memory_mib", p.memory_mib},
          {"p2p", p.p2p},
          {"placements", placements}};
}

nlohmann::json ToJson(const MigDevice& m) {
  return {{"index", m.index},
          {"uuid", m.uuid},
          {"name", m.name},
          {"profile", m.profile},
          {"gi_id", m.gi_id},
          {"ci_id", m.ci_id},
          {"gi_profile_id", m.gi_profile_id},
          {"ci_profile_id", m.ci_profile_id},
          {"placement", m.placement ? ToJson(*m.placement) : nlohmann::json(nullptr)},
          {"memory_mib", m.memory_mib},
          {"multiprocessors", m.multiprocessors},
          {"gi_slices", m.gi_slices},
          {"ci_slices", m.ci_slices},
          {"engines", ToJson(m.engines)}};
}

nlohmann::json ToJson(const GpuInstance& gi) {
  nlohmann::json cis = nlohmann::json::array();
  for (const auto& ci : gi.compute_instances) {
    cis.push_back({{"id", ci.id},
                   {"profile_id", ci.profile_id},
                   {"profile", ci.profile_name},
                   {"slices", ci.slices},
                   {"placement", ToJson(ci.placement)}});
  }
  return {{"id", gi.id},
          {"profile_id", gi.profile_id},
          {"profile_index", gi.profile_index},
          {"profile", gi.profile_name},
          {"placement", ToJson(gi.placement)},
          {"compute_instances", cis}};
}

nlohmann::json ToJson(const Gpu& g) {
  nlohmann::json migs = nlohmann::json::array();
  for (const auto& m : g.mig_devices) migs.push_back(ToJson(m));
  return {
      {"index", g.index},
      {"name", g.name},
      {"uuid", g.uuid},
      {"serial", g.serial},
      {"minor", g.minor},
      {"pci", ToJson(g.pci)},
      {"memory_mib", g.memory_mib},
      {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
      {"architecture", g.architecture},
      {"brand", g.brand},
      {"numa_node", g.numa_node},
      {"mig", {{"capable", g.mig_capable}, {"enabled", g.mig_enabled}, {"pending", g.mig_pending}}},
      {"mig_devices", migs}};
}

nlohmann::json ToJson(const Telemetry& t) {
  return {{"gpu_temp_c", Opt(t.gpu_temp_c)},
          {"memory_temp_c", Opt(t.memory_temp_c)},
          {"gpu_util_pct", Opt(t.gpu_util_pct)},
          {"mem_util_pct", Opt(t.mem_util_pct)},
          {"enc_util_pct", Opt(t.enc_util_pct)},
          {"dec_util_pct", Opt(t.dec_util_pct)},
          {"power_w", Opt(t.power_w)},
          {"power_limit_w", Opt(t.power_limit_w)},
          {"total_energy_mj", Opt(t.total_energy_mj)},
          {"sm_clock_mhz", Opt(t.sm_clock_mhz)},
          {"mem_clock_mhz", Opt(t.mem_clock_mhz)},
          {"fb_total_mib", Opt(t.fb_total_mib)},
          {"fb_free_mib", Opt(t.fb_free_mib)},
          {"fb_used_mib", Opt(t.fb_used_mib)},
          {"fb_reserved_mib", Opt(t.fb_reserved_mib)},
          {"ecc_sbe_volatile", Opt(t.ecc_sbe_volatile)},
          {"ecc_dbe_volatile", Opt(t.ecc_dbe_volatile)},
          {"ecc_sbe_aggregate", Opt(t.ecc_sbe_aggregate)},
          {"ecc_dbe_aggregate", Opt(t.ecc_dbe_aggregate)},
          {"remapped_rows_correctable", Opt(t.remapped_rows_correctable)},
          {"remapped_rows_uncorrectable", Opt(t.remapped_rows_uncorrectable)},
          {"remapped_rows_pending", Opt(t.remapped_rows_pending)},
          {"remapped_rows_failure", Opt(t.remapped_rows_failure)},
          {"pcie_replay", Opt(t.pcie_replay)},
          {"pcie_tx_kbps", Opt(t.pcie_tx_kbps)},
          {"pcie_rx_kbps", Opt(t.pcie_rx_kbps)},
          {"nvlink_tx_kib", Opt(t.nvlink_tx_kib)},
          {"nvlink_rx_kib", Opt(t.nvlink_rx_kib)},
          {"nvlink_active_links", Opt(t.nvlink_active_links)},
          {"clock_event_reasons", Opt(t.clock_event_reasons)}};
}

nlohmann::json InventoryJson(const SystemInfo& s, const std::vector<Gpu>& gpus,
                             const std::vector<std::vector<GiProfile>>& gi_profiles) {
  nlohmann::json arr = nlohmann::json::array();
  for (size_t i = 0; i < gpus.size(); ++i) {
    nlohmann::json g = ToJson(gpus[i]);
    nlohmann::json profiles = nlohmann::json::array();
    if (i < gi_profiles.size()) {
      for (const auto& p : gi_profiles[i]) profiles.push_back(ToJson(p));
    }
    g["gi_profiles"] = profiles;
    arr.push_back(std::move(g));
  }
  return {{"system", ToJson(s)}, {"gpus", arr}};
}

namespace {

template <typename T>
std::string Cell(const std::optional<T>& v, const char* unit = "") {
  if (!v) return "-";
  return std::to_string(*v) + unit;
}

std::string PowerCell(const Telemetry& t) {
  if (!t.power_w) return "-";
  char buf[48];
  if (t.power_limit_w) {
    std::snprintf(buf, sizeof(buf), "%.0fW / %.0fW", *t.power_w, *t.power_limit_w);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0fW", *t.power_w);
  }
  return buf;
}

std::string MemoryCell(const Telemetry& t) {
  if (!t.fb_used_mib || !t.fb_total_mib) return "-";
  return std::to_string(*t.fb_used_mib) + " / " + std::to_string(*t.fb_total_mib) + " MiB";
}

std::string EccCell(const Telemetry& t) {
  if (!t.ecc_sbe_volatile && !t.ecc_dbe_volatile) return "-";
  return Cell(t.ecc_sbe_volatile) + "/" + Cell(t.ecc_dbe_volatile);
}

}  // namespace

std::string FormatTelemetryTable(const std::vector<TelemetryRow>& rows) {
  const char* kFormat = "%-4s %5s %6s %-15s %5s %-21s %8s %9s %7s %6s\n";
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), kFormat, "GPU", "TEMP", "MEMTMP", "POWER", "UTIL", "MEMORY",
                "SM CLK", "MEM CLK", "ECC S/D", "REPLAY");
  out += line;
  for (const TelemetryRow& row : rows) {
    if (!row.reading.ok()) {
      out += std::to_string(row.gpu) + "    error: " + row.reading.status().message() + "\n";
      continue;
    }
    const Telemetry& t = *row.reading;
    std::snprintf(line, sizeof(line), kFormat, std::to_string(row.gpu).c_str(),
                  Cell(t.gpu_temp_c, "C").c_str(), Cell(t.memory_temp_c, "C").c_str(),
                  PowerCell(t).c_str(), Cell(t.gpu_util_pct, "%").c_str(), MemoryCell(t).c_str(),
                  Cell(t.sm_clock_mhz, "MHz").c_str(), Cell(t.mem_clock_mhz, "MHz").c_str(),
                  EccCell(t).c_str(), Cell(t.pcie_replay).c_str());
    out += line;
  }
  return out;
}

std::string FormatGpuSummary(const Gpu& g) {
  std::string out = "GPU " + std::to_string(g.index) + ": " + g.name + "\n";
  auto add = [&](const std::string& k, const std::string& v) { out += "  " + k + ": " + v + "\n"; };
  add("UUID", g.uuid);
  add("PCI", g.pci.bus_id + " (" + Hex32(g.pci.device_id) + ")");
  add("Memory", std::to_string(g.memory_mib) + " MiB");
  add("Compute capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor));
  add("Architecture", g.architecture);
  add("MIG", !g.mig_capable ? "not supported"
                            : std::string(g.mig_enabled ? "enabled" : "disabled") +
                                  (g.mig_pending != g.mig_enabled ? " (reset pending)" : ""));
  for (const MigDevice& m : g.mig_devices) {
    add("MIG device " + std::to_string(m.index), m.profile + " GI " + std::to_string(m.gi_id) +
                                                     " CI " + std::to_string(m.ci_id) + " " +
                                                     m.uuid);
  }
  return out;
}

}  // namespace gpuop::nvml
