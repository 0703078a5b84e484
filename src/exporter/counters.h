// The counters file: which DCGM fields the exporter publishes, in
// dcgm-exporter's CSV format (etc/default-counters.csv upstream):
//
//   # comment
//   DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
//   DCGM_FI_DRIVER_VERSION, label, Driver Version
//
// One `FIELD, type, help` per line; the help may itself hold commas. Types:
// gauge, counter, histogram, summary (exposed as untyped: one reading is not a
// distribution) and label (the field becomes a label on every series).
// Parsing is strict: an unknown field, a bad type or a duplicate is an error
// naming the file and line and the fix. Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "exporter/fields.h"

namespace gpuop::exporter {

enum class MetricType { kGauge, kCounter, kHistogram, kSummary, kLabel };

// "gauge", "counter", ... as written in the file.
std::string_view MetricTypeName(MetricType t);
// The `# TYPE` of the exposition: histogram and summary are "untyped".
std::string_view ExpositionTypeName(MetricType t);

struct Counter {
  const FieldSpec* field = nullptr;  // never null once parsed
  MetricType type = MetricType::kGauge;
  std::string help;
};

// Parses counters CSV text; `origin` names it in errors ("counters.csv").
Result<std::vector<Counter>> ParseCounters(std::string_view csv, const std::string& origin);
// Reads and parses the file at `path`.
Result<std::vector<Counter>> LoadCounters(const std::string& path);

// The built-in list: dcgm-exporter's default counters plus the fields gpuop
// adds (power limit, FB total, PCIe throughput, ECC totals, clock events...).
std::string_view DefaultCountersCsv();
std::vector<Counter> DefaultCounters();

}  // namespace gpuop::exporter
