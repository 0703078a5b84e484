// The counters CSV parser and the field registry: the built-in list, the
// dcgm-exporter format details (comments, blank lines, commas in the help,
// label fields) and one test per error, each naming file and line.
#include "exporter/counters.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/files.h"
#include "exporter/fields.h"

namespace gpuop::exporter {
namespace {

const std::string kFixtures = std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/exporter/";

std::string ErrorOf(std::string_view csv) {
  auto r = ParseCounters(csv, "c.csv");
  EXPECT_FALSE(r.ok()) << "parsed: " << csv;
  return r.ok() ? "" : r.status().message();
}

TEST(Counters, DefaultListHasDcgmExporterDefaultsAndTheExtras) {
  auto counters = DefaultCounters();
  ASSERT_FALSE(counters.empty());
  std::set<std::string_view> names;
  for (const Counter& c : counters) names.insert(c.field->name);
  // dcgm-exporter's default-counters.csv.
  for (const char* f :
       {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        // gpuop's additions (issue 9; issue 27: the dashboard and alert use SM activity)
        "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}) {
    EXPECT_TRUE(names.contains(f)) << f;
  }
  for (const Counter& c : counters) {
    if (c.field->name == "DCGM_FI_DRIVER_VERSION") {
      EXPECT_EQ(c.type, MetricType::kLabel);
    }
    if (c.field->name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") {
      EXPECT_EQ(c.type, MetricType::kCounter);
    }
    if (c.field->name == "DCGM_FI_DEV_GPU_TEMP") {
      EXPECT_EQ(c.type, MetricType::kGauge);
      EXPECT_EQ(c.help, "GPU temperature (in C).");
    }
    if (c.field->name.starts_with("DCGM_FI_PROF_")) {
      EXPECT_EQ(c.field->kind, FieldKind::kNumeric) << c.field->name << ": GPM gives it";
    }
  }
}

TEST(Counters, ShippedFileEqualsTheBuiltInList) {
  auto file = ReadFile(kFixtures + "default-counters.csv");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*file, DefaultCountersCsv())
      << "tests/fixtures/exporter/default-counters.csv must equal the built-in list; "
         "regenerate it with `gpuop exporter --print-default-counters`";
}

TEST(Counters, ParsesCommentsBlankLinesAndCommasInHelp) {
  auto r = ParseCounters(
      "# a comment\n"
      "\n"
      "   \n"
      "  DCGM_FI_DEV_GPU_TEMP ,  gauge , GPU temp, in degrees C, of the die  \r\n"
      "DCGM_FI_DEV_POWER_USAGE, counter\n"
      "DCGM_FI_DEV_FB_USED, histogram, x\n"
      "DCGM_FI_DEV_FB_FREE, summary, y\n"
      "DCGM_FI_DRIVER_VERSION, label, Driver Version\n"
      "DCGM_FI_DEV_GPU_UTIL, label, util as a label\n",
      "c.csv");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 6u);
  EXPECT_EQ((*r)[0].field->name, "DCGM_FI_DEV_GPU_TEMP");
  EXPECT_EQ((*r)[0].help, "GPU temp, in degrees C, of the die");
  EXPECT_EQ((*r)[1].type, MetricType::kCounter);
  EXPECT_EQ((*r)[1].help, "Power draw (in W).");  // no help: the registry's
  EXPECT_EQ(ExpositionTypeName((*r)[2].type), "untyped");
  EXPECT_EQ(ExpositionTypeName((*r)[3].type), "untyped");
  EXPECT_EQ((*r)[4].type, MetricType::kLabel);
  EXPECT_EQ((*r)[5].type, MetricType::kLabel);
}

TEST(Counters, UnknownFieldNamesFileAndLine) {
  std::string e =
      ErrorOf("# x\n\nDCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_GPU_TMEP, gauge, t\n");
  EXPECT_NE(e.find("c.csv:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown field \"DCGM_FI_DEV_GPU_TMEP\""), std::string::npos) << e;
  EXPECT_NE(e.find("docs/exporter.md"), std::string::npos) << e;
}

TEST(Counters, BadTypeNamesFileAndLine) {
  std::string e = ErrorOf("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_FB_USED, gage, t\n");
  EXPECT_NE(e.find("c.csv:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("type \"gage\""), std::string::npos) << e;
  EXPECT_NE(e.find("gauge, counter, histogram, summary or label"), std::string::npos) << e;
}

TEST(Counters, MissingColumnsTextAsGaugeAndDuplicatesAreErrors) {
  std::string e = ErrorOf("\nDCGM_FI_DEV_GPU_TEMP\n");
  EXPECT_NE(e.find("c.csv:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("DCGM_FIELD, type, help"), std::string::npos) << e;

  e = ErrorOf("DCGM_FI_DRIVER_VERSION, gauge, v\n");
  EXPECT_NE(e.find("c.csv:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("can only be a label"), std::string::npos) << e;

  e = ErrorOf("DCGM_FI_DEV_GPU_TEMP, gauge, t\n#\nDCGM_FI_DEV_GPU_TEMP, gauge, t\n");
  EXPECT_NE(e.find("c.csv:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("listed twice"), std::string::npos) << e;

  e = ErrorOf("DCGM_FI_DEV_GPU_TEMP, , t\n");
  EXPECT_NE(e.find("type \"\""), std::string::npos) << e;
}

TEST(Counters, LoadCountersNamesAMissingFile) {
  auto r = LoadCounters("/nonexistent/counters.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/counters.csv"), std::string::npos)
      << r.status().message();
}

TEST(Fields, RegistryNamesAreUniqueAndConsistent) {
  std::set<std::string_view> names;
  for (const FieldSpec& f : AllFields()) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate " << f.name;
    EXPECT_TRUE(f.name.starts_with("DCGM_FI_")) << f.name;
    switch (f.kind) {
      case FieldKind::kNumeric:
        EXPECT_NE(f.value, nullptr) << f.name;
        break;
      case FieldKind::kText:
        EXPECT_NE(f.text, nullptr) << f.name;
        break;
      case FieldKind::kUnavailable:
        EXPECT_FALSE(f.why_unavailable.empty()) << f.name;
        break;
    }
  }
  EXPECT_EQ(FindField("DCGM_FI_NOPE"), nullptr);
}

TEST(Fields, ValuesComeInDcgmUnits) {
  Reading r;
  r.telemetry.power_w = 312.5;
  r.telemetry.fb_used_mib = 1024;
  r.telemetry.nvlink_tx_kib = 100;
  r.telemetry.nvlink_rx_kib = 23;
  r.telemetry.remapped_rows_pending = true;
  r.telemetry.clock_event_reasons = 0x4;
  r.last_xid = 48;
  EXPECT_EQ(FindField("DCGM_FI_DEV_POWER_USAGE")->value(r), 312.5);
  EXPECT_EQ(FindField("DCGM_FI_DEV_FB_USED")->value(r), 1024);
  EXPECT_EQ(FindField("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")->value(r), 123);
  EXPECT_EQ(FindField("DCGM_FI_DEV_ROW_REMAP_PENDING")->value(r), 1);
  EXPECT_EQ(FindField("DCGM_FI_DEV_CLOCKS_EVENT_REASONS")->value(r), 4);
  EXPECT_EQ(FindField("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")->value(r), 4);
  EXPECT_EQ(FindField("DCGM_FI_DEV_XID_ERRORS")->value(r), 48);
  EXPECT_EQ(FindField("DCGM_FI_DEV_GPU_TEMP")->value(r), std::nullopt);
  EXPECT_EQ(FindField("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")->value(Reading{}), std::nullopt);

  nvml::SystemInfo sys;
  sys.driver_version = "570.172.08";
  nvml::Gpu g;
  g.serial = "1650123456789";
  EXPECT_EQ(FindField("DCGM_FI_DRIVER_VERSION")->text({&sys, &g}), "570.172.08");
  EXPECT_EQ(FindField("DCGM_FI_DEV_SERIAL")->text({&sys, &g}), "1650123456789");
}

}  // namespace
}  // namespace gpuop::exporter
