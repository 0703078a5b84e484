#include "exporter/fields.h"

#include <array>

namespace gpuop::exporter {
namespace {

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

// One accessor per telemetry member, as a plain function pointer.
#define GPUOP_TELEMETRY_FIELD(member) [](const Reading& r) { return AsDouble(r.telemetry.member); }

std::optional<double> NvLinkTotal(const Reading& r) {
  const auto& t = r.telemetry;
  if (!t.nvlink_tx_kib && !t.nvlink_rx_kib) return std::nullopt;
  return static_cast<double>(t.nvlink_tx_kib.value_or(0) + t.nvlink_rx_kib.value_or(0));
}

std::optional<double> LastXid(const Reading& r) { return AsDouble(r.last_xid); }

// GPM gives activity in percent, DCGM's profiling fields a ratio; GPM gives
// traffic in MiB/s, DCGM in bytes per second.
std::optional<double> Scaled(const std::optional<nvml::GpmMetrics>& gpm,
                             std::optional<double> nvml::GpmMetrics::*member, double factor) {
  if (!gpm || !(*gpm.*member)) return std::nullopt;
  return *(*gpm.*member) * factor;
}
#define GPUOP_GPM_RATIO(member) \
  [](const Reading& r) { return Scaled(r.gpm, &nvml::GpmMetrics::member, 0.01); }
#define GPUOP_GPM_BYTES(member) \
  [](const Reading& r) { return Scaled(r.gpm, &nvml::GpmMetrics::member, 1024.0 * 1024.0); }

std::string DriverVersion(const LabelSource& s) { return s.system ? s.system->driver_version : ""; }
std::string NvmlVersion(const LabelSource& s) { return s.system ? s.system->nvml_version : ""; }
std::string CudaDriverVersion(const LabelSource& s) {
  return s.system ? std::to_string(s.system->cuda_driver_version) : "";
}
std::string DeviceName(const LabelSource& s) { return s.gpu ? s.gpu->name : ""; }
std::string DeviceSerial(const LabelSource& s) { return s.gpu ? s.gpu->serial : ""; }
std::string DeviceBrand(const LabelSource& s) { return s.gpu ? s.gpu->brand : ""; }

FieldSpec Numeric(std::string_view name, std::string_view type, std::string_view unit,
                  std::string_view help, std::optional<double> (*value)(const Reading&)) {
  return {name, FieldKind::kNumeric, type, unit, help, value, nullptr, {}};
}
FieldSpec Text(std::string_view name, std::string_view help,
               std::string (*text)(const LabelSource&)) {
  return {name, FieldKind::kText, "label", "", help, nullptr, text, {}};
}
FieldSpec Unavailable(std::string_view name, std::string_view type, std::string_view help,
                      std::string_view why) {
  return {name, FieldKind::kUnavailable, type, "", help, nullptr, nullptr, why};
}

const std::array kFields = {
    // Clocks
    Numeric("DCGM_FI_DEV_SM_CLOCK", "gauge", "MHz", "SM clock frequency (in MHz).",
            GPUOP_TELEMETRY_FIELD(sm_clock_mhz)),
    Numeric("DCGM_FI_DEV_MEM_CLOCK", "gauge", "MHz", "Memory clock frequency (in MHz).",
            GPUOP_TELEMETRY_FIELD(mem_clock_mhz)),
    Numeric("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "bitmask",
            "Current clock event reasons (bitmask of nvmlClocksEventReason*).",
            GPUOP_TELEMETRY_FIELD(clock_event_reasons)),
    Numeric("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "bitmask",
            "Deprecated name of DCGM_FI_DEV_CLOCKS_EVENT_REASONS.",
            GPUOP_TELEMETRY_FIELD(clock_event_reasons)),
    // Temperature
    Numeric("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "C", "Memory temperature (in C).",
            GPUOP_TELEMETRY_FIELD(memory_temp_c)),
    Numeric("DCGM_FI_DEV_GPU_TEMP", "gauge", "C", "GPU temperature (in C).",
            GPUOP_TELEMETRY_FIELD(gpu_temp_c)),
    // Power
    Numeric("DCGM_FI_DEV_POWER_USAGE", "gauge", "W", "Power draw (in W).",
            GPUOP_TELEMETRY_FIELD(power_w)),
    Numeric("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "W", "Power management limit (in W).",
            GPUOP_TELEMETRY_FIELD(power_limit_w)),
    Numeric("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "mJ",
            "Total energy consumption since boot (in mJ).", GPUOP_TELEMETRY_FIELD(total_energy_mj)),
    // PCIe
    Numeric("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "", "Total number of PCIe retries.",
            GPUOP_TELEMETRY_FIELD(pcie_replay)),
    Numeric("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "gauge", "KB/s",
            "PCIe transmit throughput (in KB/s), sampled by NVML over 20 ms.",
            GPUOP_TELEMETRY_FIELD(pcie_tx_kbps)),
    Numeric("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "gauge", "KB/s",
            "PCIe receive throughput (in KB/s), sampled by NVML over 20 ms.",
            GPUOP_TELEMETRY_FIELD(pcie_rx_kbps)),
    // Utilisation
    Numeric("DCGM_FI_DEV_GPU_UTIL", "gauge", "%", "GPU utilization (in %).",
            GPUOP_TELEMETRY_FIELD(gpu_util_pct)),
    Numeric("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "%", "Memory utilization (in %).",
            GPUOP_TELEMETRY_FIELD(mem_util_pct)),
    Numeric("DCGM_FI_DEV_ENC_UTIL", "gauge", "%", "Encoder utilization (in %).",
            GPUOP_TELEMETRY_FIELD(enc_util_pct)),
    Numeric("DCGM_FI_DEV_DEC_UTIL", "gauge", "%", "Decoder utilization (in %).",
            GPUOP_TELEMETRY_FIELD(dec_util_pct)),
    // Errors and violations
    Numeric("DCGM_FI_DEV_XID_ERRORS", "gauge", "",
            "Value of the last XID error encountered (0 before any).", LastXid),
    // Memory usage
    Numeric("DCGM_FI_DEV_FB_TOTAL", "gauge", "MiB", "Framebuffer memory total (in MiB).",
            GPUOP_TELEMETRY_FIELD(fb_total_mib)),
    Numeric("DCGM_FI_DEV_FB_FREE", "gauge", "MiB", "Framebuffer memory free (in MiB).",
            GPUOP_TELEMETRY_FIELD(fb_free_mib)),
    Numeric("DCGM_FI_DEV_FB_USED", "gauge", "MiB", "Framebuffer memory used (in MiB).",
            GPUOP_TELEMETRY_FIELD(fb_used_mib)),
    Numeric("DCGM_FI_DEV_FB_RESERVED", "gauge", "MiB", "Framebuffer memory reserved (in MiB).",
            GPUOP_TELEMETRY_FIELD(fb_reserved_mib)),
    // ECC
    Numeric("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "",
            "Total number of single-bit volatile ECC errors.",
            GPUOP_TELEMETRY_FIELD(ecc_sbe_volatile)),
    Numeric("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "",
            "Total number of double-bit volatile ECC errors.",
            GPUOP_TELEMETRY_FIELD(ecc_dbe_volatile)),
    Numeric("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "",
            "Total number of single-bit persistent ECC errors.",
            GPUOP_TELEMETRY_FIELD(ecc_sbe_aggregate)),
    Numeric("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "",
            "Total number of double-bit persistent ECC errors.",
            GPUOP_TELEMETRY_FIELD(ecc_dbe_aggregate)),
    // Remapped rows
    Numeric("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "",
            "Number of remapped rows for uncorrectable errors",
            GPUOP_TELEMETRY_FIELD(remapped_rows_uncorrectable)),
    Numeric("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "",
            "Number of remapped rows for correctable errors",
            GPUOP_TELEMETRY_FIELD(remapped_rows_correctable)),
    Numeric("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "", "Whether remapping of rows has failed",
            GPUOP_TELEMETRY_FIELD(remapped_rows_failure)),
    Numeric("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "",
            "Whether remapping of rows is pending (a GPU reset applies it)",
            GPUOP_TELEMETRY_FIELD(remapped_rows_pending)),
    // NVLink
    Numeric("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "KiB",
            "Total number of NVLink bandwidth counters for all lanes (KiB sent and received "
            "over all links).",
            NvLinkTotal),
    // Labels
    Text("DCGM_FI_DRIVER_VERSION", "Driver Version", DriverVersion),
    Text("DCGM_FI_NVML_VERSION", "NVML Version", NvmlVersion),
    Text("DCGM_FI_CUDA_DRIVER_VERSION", "CUDA Driver Version (12080 for 12.8)", CudaDriverVersion),
    Text("DCGM_FI_DEV_NAME", "Device name", DeviceName),
    Text("DCGM_FI_DEV_SERIAL", "Device serial number", DeviceSerial),
    Text("DCGM_FI_DEV_BRAND", "Device brand", DeviceBrand),
    // Known, but nothing in NVML provides them.
    Unavailable("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status",
                "vGPU licensing is reported by the vGPU guest driver, not by bare-metal NVML"),
    // Profiling (DCGM's DCP fields), from NVML's GPM on Hopper and newer:
    // the share of the time since the previous collection.
    Numeric("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "ratio",
            "Ratio of time the graphics engine is active.", GPUOP_GPM_RATIO(graphics_util)),
    Numeric("DCGM_FI_PROF_SM_ACTIVE", "gauge", "ratio",
            "The ratio of cycles an SM has at least 1 warp assigned.", GPUOP_GPM_RATIO(sm_util)),
    Numeric("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "ratio",
            "The ratio of number of warps resident on an SM.", GPUOP_GPM_RATIO(sm_occupancy)),
    Numeric("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "ratio",
            "Ratio of cycles any tensor pipe is active.", GPUOP_GPM_RATIO(any_tensor_util)),
    Numeric("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the HMMA tensor pipe is active.", GPUOP_GPM_RATIO(hmma_tensor_util)),
    Numeric("DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the IMMA tensor pipe is active.", GPUOP_GPM_RATIO(imma_tensor_util)),
    Numeric("DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the DFMA tensor pipe is active.", GPUOP_GPM_RATIO(dfma_tensor_util)),
    Numeric("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the fp64 pipes are active.", GPUOP_GPM_RATIO(fp64_util)),
    Numeric("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the fp32 pipes are active.", GPUOP_GPM_RATIO(fp32_util)),
    Numeric("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the fp16 pipes are active.", GPUOP_GPM_RATIO(fp16_util)),
    Numeric("DCGM_FI_PROF_PIPE_INT_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the integer pipe is active.", GPUOP_GPM_RATIO(integer_util)),
    Numeric("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "ratio",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
            GPUOP_GPM_RATIO(dram_bw_util)),
    Numeric("DCGM_FI_PROF_PCIE_TX_BYTES", "counter", "B/s",
            "The rate of data transmitted over the PCIe bus - including both protocol headers "
            "and data payloads - in bytes per second.",
            GPUOP_GPM_BYTES(pcie_tx_mib_s)),
    Numeric("DCGM_FI_PROF_PCIE_RX_BYTES", "counter", "B/s",
            "The rate of data received over the PCIe bus - including both protocol headers and "
            "data payloads - in bytes per second.",
            GPUOP_GPM_BYTES(pcie_rx_mib_s)),
    Numeric("DCGM_FI_PROF_NVLINK_TX_BYTES", "counter", "B/s",
            "The rate of data transmitted over NVLink, not including protocol headers, in bytes "
            "per second.",
            GPUOP_GPM_BYTES(nvlink_tx_mib_s)),
    Numeric("DCGM_FI_PROF_NVLINK_RX_BYTES", "counter", "B/s",
            "The rate of data received over NVLink, not including protocol headers, in bytes "
            "per second.",
            GPUOP_GPM_BYTES(nvlink_rx_mib_s)),
};

#undef GPUOP_TELEMETRY_FIELD
#undef GPUOP_GPM_RATIO
#undef GPUOP_GPM_BYTES

}  // namespace

std::span<const FieldSpec> AllFields() { return kFields; }

const FieldSpec* FindField(std::string_view name) {
  for (const FieldSpec& f : kFields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace gpuop::exporter
