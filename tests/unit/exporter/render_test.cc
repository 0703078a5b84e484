// Rendering a hand-made collection: the exact exposition (golden file
// tests/fixtures/exporter/render.prom; GPUOP_UPDATE_GOLDEN=1 rewrites it), and
// the rules behind it checked one by one so a regenerated golden cannot hide
// a broken rule.
#include "exporter/render.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/files.h"

namespace gpuop::exporter {
namespace {

const std::string kGolden = std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/exporter/render.prom";

std::vector<Counter> Counters(std::string_view csv) {
  auto c = ParseCounters(csv, "test.csv");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : std::vector<Counter>{};
}

// GPU 0 healthy with a pod, GPU 1 in MIG mode with two GPU instances (one
// shared by two pods), GPU 2 lost after XID 79.
Collection Sample() {
  Collection c;
  c.system.driver_version = "570.172.08";
  for (unsigned i = 0; i < 3; ++i) {
    nvml::Gpu g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i) + "000";
    g.minor = static_cast<int>(i);
    g.pci.bus_id = "00000000:1" + std::to_string(i) + ":00.0";
    g.name = "NVIDIA H100 80GB HBM3";
    c.gpus.push_back(g);
  }
  nvml::MigDevice a;
  a.index = 0;
  a.gi_id = 7;
  a.profile = "1g.10gb";
  a.uuid = "MIG-a";
  nvml::MigDevice b;
  b.index = 1;
  b.gi_id = 2;
  b.profile = "3g.40gb";
  b.uuid = "MIG-b";
  c.gpus[1].mig_enabled = true;
  c.gpus[1].mig_devices = {a, b};
  c.healthy = {true, true, false};

  Reading r0;
  r0.telemetry.gpu_temp_c = 41;
  r0.telemetry.power_w = 312.25;
  r0.telemetry.fb_used_mib = 1024;
  r0.last_xid = 0;
  Reading r1;
  r1.telemetry.gpu_temp_c = 38;
  r1.telemetry.power_w = 99;
  r1.last_xid = 13;  // fb_used not reported: skipped for GPU 1 only
  Reading mig_a;
  mig_a.telemetry.fb_used_mib = 10;
  Reading mig_b;
  mig_b.telemetry.fb_used_mib = 4000;
  Reading lost;
  lost.last_xid = 79;
  c.devices = {{0, std::nullopt, r0},
               {1, std::nullopt, r1},
               {1, 0, mig_a},
               {1, 1, mig_b},
               {2, std::nullopt, lost}};
  c.pods[DeviceKey{0, std::nullopt}] = {{"train-0", "ml", "main"}};
  c.pods[DeviceKey{1, 2u}] = {{"infer-a", "default", "srv"}, {"infer-b", "default", "srv"}};
  return c;
}

constexpr std::string_view kCsv =
    "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
    "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n"
    "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
    "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.\n"
    "DCGM_FI_PROF_DRAM_ACTIVE, gauge, DRAM active.\n"
    "DCGM_FI_DRIVER_VERSION, label, Driver Version\n";

std::string Render() {
  std::string out;
  SelfStats self;
  self.collections = 3;
  self.collection_errors = 1;
  self.last_collection_seconds = 0.25;
  RenderMetrics(Counters(kCsv), "node-1", Sample(), self, &out);
  return out;
}

TEST(Render, MatchesGolden) {
  std::string got = Render();
  const char* update = std::getenv("GPUOP_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    ASSERT_TRUE(WriteFileAtomic(kGolden, got).ok());
    return;
  }
  auto want = ReadFile(kGolden);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_EQ(got, *want) << "rerun with GPUOP_UPDATE_GOLDEN=1 after checking the diff by hand";
}

TEST(Render, LabelSetAndOrderAreDcgmExporters) {
  std::string out = Render();
  EXPECT_NE(out.find("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0000\",pci_bus_id=\"00000000:10:"
                     "00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",hostname=\""
                     "node-1\",DCGM_FI_DRIVER_VERSION=\"570.172.08\",container=\"main\","
                     "namespace=\"ml\",pod=\"train-0\"} 41\n"),
            std::string::npos)
      << out;
  // MIG: GPU_I_PROFILE and GPU_I_ID before hostname; one series per pod.
  const std::string mig_b =
      "DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-1000\",pci_bus_id=\"00000000:11:00.0\","
      "device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"3g.40gb\","
      "GPU_I_ID=\"2\",hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"570.172.08\",";
  EXPECT_NE(out.find(mig_b + "container=\"srv\",namespace=\"default\",pod=\"infer-a\"} 4000\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(mig_b + "container=\"srv\",namespace=\"default\",pod=\"infer-b\"} 4000\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"7\",hostname=\"node-1\","
                     "DCGM_FI_DRIVER_VERSION=\"570.172.08\"} 10\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\""), std::string::npos);
  EXPECT_NE(out.find("} 312.25\n"), std::string::npos);
}

TEST(Render, HelpAndTypeOncePerFamilyAndOnlyWithSamples) {
  std::string out = Render();
  for (const char* family :
       {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS"}) {
    const std::string help = std::string("# HELP ") + family + " ";
    const std::string type = std::string("# TYPE ") + family + " gauge\n";
    size_t at = out.find(help);
    ASSERT_NE(at, std::string::npos) << family;
    EXPECT_EQ(out.find(help, at + 1), std::string::npos) << family;
    EXPECT_NE(out.find(type), std::string::npos) << family;
  }
  EXPECT_EQ(out.find("DCGM_FI_PROF_DRAM_ACTIVE{"), std::string::npos);
  EXPECT_EQ(out.find("# HELP DCGM_FI_PROF_DRAM_ACTIVE"), std::string::npos);
}

TEST(Render, UnsupportedFieldsAreSkippedPerDeviceAndCounted) {
  std::string out = Render();
  // FB_USED: GPU 1 and the lost GPU 2 lack it; GPU 0 and both GIs have it.
  EXPECT_NE(out.find("gpuop_exporter_field_unsupported{field=\"DCGM_FI_DEV_FB_USED\"} 2\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-1000\",pci_bus_id=\"00000000:11:"
                     "00.0\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",hostname="),
            std::string::npos);
  // Never available from NVML: every device.
  EXPECT_NE(out.find("gpuop_exporter_field_unsupported{field=\"DCGM_FI_PROF_DRAM_ACTIVE\"} 5\n"),
            std::string::npos);
}

TEST(Render, LostGpuKeepsItsLabelsWithHealthAndXid) {
  std::string out = Render();
  const std::string labels =
      "{gpu=\"2\",UUID=\"GPU-2000\",pci_bus_id=\"00000000:12:00.0\",device=\"nvidia2\","
      "modelName=\"NVIDIA H100 80GB HBM3\",hostname=\"node-1\","
      "DCGM_FI_DRIVER_VERSION=\"570.172.08\"}";
  EXPECT_NE(out.find("gpuop_exporter_gpu_healthy" + labels + " 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("DCGM_FI_DEV_XID_ERRORS" + labels + " 79\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("DCGM_FI_DEV_GPU_TEMP" + labels), std::string::npos);
  EXPECT_NE(out.find("gpuop_exporter_gpu_healthy{gpu=\"0\""), std::string::npos);
  EXPECT_EQ(out.find("gpuop_exporter_gpu_healthy{gpu=\"1\",UUID=\"GPU-1000\",pci_bus_id=\"00000000:"
                     "11:00.0\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",GPU_I"),
            std::string::npos)
      << "health is per GPU, not per GPU instance";
}

TEST(Render, EscapesLabelValuesAndKeepsBufferCapacity) {
  Collection c = Sample();
  c.gpus[0].name = "odd \"name\"\\\n";
  std::string out;
  out.reserve(1 << 16);
  const size_t cap = out.capacity();
  RenderMetrics(Counters(kCsv), "node-1", c, {}, &out);
  EXPECT_NE(out.find("modelName=\"odd \\\"name\\\"\\\\\\n\""), std::string::npos) << out;
  EXPECT_EQ(out.capacity(), cap) << "rendering reuses the buffer it is given";
  std::string n;
  AppendNumber(1e21, &n);
  AppendNumber(0.1, &n);
  AppendNumber(42, &n);
  EXPECT_EQ(n, "1e+210.142");
}

}  // namespace
}  // namespace gpuop::exporter
