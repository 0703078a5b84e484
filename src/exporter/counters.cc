#include "exporter/counters.h"

#include <set>

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::exporter {
namespace {

// Kept equal to tests/fixtures/exporter/default-counters.csv (a test checks).
constexpr std::string_view kDefaultCounters =
    R"(# gpuop exporter: default counters (dcgm-exporter's CSV format).
# If line starts with a '#' it is considered a comment.
# DCGM FIELD, Prometheus metric type, help message
# Types: gauge, counter, histogram, summary, label (the field becomes a label on every series).

# Clocks
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, Current clock event reasons (bitmask of nvmlClocksEventReason*).

# Temperature
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP,    gauge, GPU temperature (in C).

# Power
DCGM_FI_DEV_POWER_USAGE,              gauge, Power draw (in W).
DCGM_FI_DEV_POWER_MGMT_LIMIT,         gauge, Power management limit (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).

# PCIE
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.
DCGM_FI_DEV_PCIE_TX_THROUGHPUT,  gauge, PCIe transmit throughput (in KB/s).
DCGM_FI_DEV_PCIE_RX_THROUGHPUT,  gauge, PCIe receive throughput (in KB/s).

# Utilization (the sample period varies depending on the product)
DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_ENC_UTIL,      gauge, Encoder utilization (in %).
DCGM_FI_DEV_DEC_UTIL,      gauge, Decoder utilization (in %).

# Errors and violations
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.

# Memory usage
DCGM_FI_DEV_FB_FREE,     gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED,     gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).

# ECC
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, Total number of single-bit volatile ECC errors.
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.
DCGM_FI_DEV_ECC_SBE_AGG_TOTAL, counter, Total number of single-bit persistent ECC errors.
DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, counter, Total number of double-bit persistent ECC errors.

# NVLink
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, Total number of NVLink bandwidth counters for all lanes.

# VGPU License status (NVML cannot give it: accepted, never exported)
DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status

# Remapped rows
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS,   counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE,           gauge,   Whether remapping of rows has failed

# Static configuration information: these appear as labels on the other metrics
DCGM_FI_DRIVER_VERSION, label, Driver Version

# DCP metrics: NVML's GPM on Hopper and newer; missing (counted in
# gpuop_exporter_field_unsupported) on older GPUs. SM activity and occupancy
# are commented out in dcgm-exporter's defaults; gpuop's dashboard and idle
# alert use them.
DCGM_FI_PROF_GR_ENGINE_ACTIVE,   gauge, Ratio of time the graphics engine is active.
DCGM_FI_PROF_SM_ACTIVE,          gauge, The ratio of cycles an SM has at least 1 warp assigned.
DCGM_FI_PROF_SM_OCCUPANCY,       gauge, The ratio of number of warps resident on an SM.
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
DCGM_FI_PROF_DRAM_ACTIVE,        gauge, Ratio of cycles the device memory interface is active sending or receiving data.
DCGM_FI_PROF_PCIE_TX_BYTES,      counter, The number of bytes of active pcie tx data including both header and payload.
DCGM_FI_PROF_PCIE_RX_BYTES,      counter, The number of bytes of active pcie rx data including both header and payload.
)";

}  // namespace

std::string_view MetricTypeName(MetricType t) {
  switch (t) {
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
    case MetricType::kLabel:
      return "label";
  }
  return "gauge";
}

std::string_view ExpositionTypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kHistogram:
    case MetricType::kSummary:
      return "untyped";
    default:
      return "gauge";
  }
}

Result<std::vector<Counter>> ParseCounters(std::string_view csv, const std::string& origin) {
  std::vector<Counter> out;
  std::set<std::string_view> seen;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= csv.size()) {
    size_t end = csv.find('\n', pos);
    if (end == std::string_view::npos) end = csv.size();
    std::string_view line = Trim(csv.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const std::string where = origin + ":" + std::to_string(line_no) + ": ";

    size_t c1 = line.find(',');
    if (c1 == std::string_view::npos) {
      return InvalidArgument(where + "\"" + std::string(line) +
                             "\" is not `DCGM_FIELD, type, help`; add the type and help "
                             "columns, e.g. \"DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature\"");
    }
    size_t c2 = line.find(',', c1 + 1);
    std::string_view name = Trim(line.substr(0, c1));
    std::string_view type = Trim(
        line.substr(c1 + 1, c2 == std::string_view::npos ? std::string_view::npos : c2 - c1 - 1));
    std::string_view help =
        c2 == std::string_view::npos ? std::string_view() : Trim(line.substr(c2 + 1));

    const FieldSpec* field = FindField(name);
    if (field == nullptr) {
      return InvalidArgument(where + "unknown field \"" + std::string(name) +
                             "\"; use a DCGM field name the exporter knows (the list is in "
                             "docs/exporter.md, e.g. DCGM_FI_DEV_GPU_TEMP) or remove the line");
    }
    Counter c;
    c.field = field;
    if (type == "gauge") {
      c.type = MetricType::kGauge;
    } else if (type == "counter") {
      c.type = MetricType::kCounter;
    } else if (type == "histogram") {
      c.type = MetricType::kHistogram;
    } else if (type == "summary") {
      c.type = MetricType::kSummary;
    } else if (type == "label") {
      c.type = MetricType::kLabel;
    } else {
      return InvalidArgument(where + "type \"" + std::string(type) + "\" of " + std::string(name) +
                             " is not gauge, counter, histogram, summary or label; fix the "
                             "second column");
    }
    if (field->kind == FieldKind::kText && c.type != MetricType::kLabel) {
      return InvalidArgument(where + std::string(name) +
                             " is a text field and can only be a label; write \"" +
                             std::string(name) + ", label, ...\"");
    }
    if (!seen.insert(field->name).second) {
      return InvalidArgument(where + std::string(name) +
                             " is listed twice; remove one of the lines");
    }
    c.help = help.empty() ? std::string(field->help) : std::string(help);
    out.push_back(std::move(c));
  }
  return out;
}

Result<std::vector<Counter>> LoadCounters(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return text.status().Annotate(
        "reading the collectors file (--collectors, "
        "DCGM_EXPORTER_COLLECTORS)");
  }
  return ParseCounters(*text, path);
}

std::string_view DefaultCountersCsv() { return kDefaultCounters; }

std::vector<Counter> DefaultCounters() {
  auto parsed = ParseCounters(kDefaultCounters, "built-in default counters");
  // The built-in list is checked by the unit tests; a failure here is a bug.
  if (!parsed.ok()) return {};
  return std::move(parsed).value();
}

}  // namespace gpuop::exporter
