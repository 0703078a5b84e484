#include "nvml/format.h"

#include <gtest/gtest.h>

namespace gpuop::nvml {
namespace {

MigDevice Mig(unsigned index, const char* profile, const char* uuid) {
  MigDevice m;
  m.index = index;
  m.profile = profile;
  m.uuid = uuid;
  return m;
}

std::vector<Gpu> SampleGpus() {
  Gpu g0;
  g0.index = 0;
  g0.name = "NVIDIA H100 80GB HBM3";
  g0.uuid = "GPU-3b4e0c9a-1111-2222-3333-000000000004";
  g0.mig_capable = g0.mig_enabled = g0.mig_pending = true;
  g0.mig_devices = {
      Mig(0, "1g.10gb", "MIG-8d6a4f2e-0000-5000-8000-000000000005"),
      Mig(1, "3g.40gb", "MIG-8d6a4f2e-0000-5000-8000-000000000006"),
      Mig(2, "1c.2g.20gb", "MIG-8d6a4f2e-0000-5000-8000-000000000007"),
      Mig(12, "1g.10gb+me", "MIG-8d6a4f2e-0000-5000-8000-000000000008"),
  };
  Gpu g1;
  g1.index = 1;
  g1.name = "NVIDIA A100-SXM4-40GB";
  g1.uuid = "GPU-e86cb44c-6756-fd30-cd4a-1e6da3caf9b0";
  g1.mig_devices = {Mig(0, "1g.5gb", "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f")};
  Gpu g2;
  g2.index = 2;
  g2.name = "Tesla T4";
  g2.uuid = "GPU-00000000-0000-0000-0000-000000000002";
  return {g0, g1, g2};
}

TEST(FormatGpuListTest, MatchesNvidiaSmiL) {
  // Column layout as nvidia-smi -L prints it: the profile padded to 11
  // columns, the MIG device index right-aligned in 2.
  const char* want =
      "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-3b4e0c9a-1111-2222-3333-000000000004)\n"
      "  MIG 1g.10gb     Device  0: (UUID: MIG-8d6a4f2e-0000-5000-8000-000000000005)\n"
      "  MIG 3g.40gb     Device  1: (UUID: MIG-8d6a4f2e-0000-5000-8000-000000000006)\n"
      "  MIG 1c.2g.20gb  Device  2: (UUID: MIG-8d6a4f2e-0000-5000-8000-000000000007)\n"
      "  MIG 1g.10gb+me  Device 12: (UUID: MIG-8d6a4f2e-0000-5000-8000-000000000008)\n"
      "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-e86cb44c-6756-fd30-cd4a-1e6da3caf9b0)\n"
      "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
      "GPU 2: Tesla T4 (UUID: GPU-00000000-0000-0000-0000-000000000002)\n";
  EXPECT_EQ(FormatGpuList(SampleGpus()), want);
  EXPECT_EQ(FormatGpuList({}), "");
}

TEST(FormatJsonTest, InventoryHoldsSystemGpusMigDevicesAndProfiles) {
  SystemInfo s{"570.172.08", 12080, "12.8", "12.570.172.08"};
  auto gpus = SampleGpus();
  gpus[0].pci.bus_id = "00000000:18:00.0";
  gpus[0].pci.device_id = 0x233010DE;
  GiProfile p;
  p.index = 0;
  p.id = 19;
  p.name = "1g.10gb";
  p.slices = 1;
  p.max_count = 7;
  p.memory_mib = 9984;
  p.placements = {{0, 1}, {1, 1}};
  nlohmann::json j = InventoryJson(s, gpus, {{p}, {}, {}});

  EXPECT_EQ(j["system"]["driver_version"], "570.172.08");
  EXPECT_EQ(j["system"]["cuda_version"], "12.8");
  EXPECT_EQ(j["system"]["cuda_driver_version"], 12080);
  ASSERT_EQ(j["gpus"].size(), 3u);
  EXPECT_EQ(j["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(j["gpus"][0]["pci"]["device_id"], "0x233010DE");
  EXPECT_EQ(j["gpus"][0]["mig"]["enabled"], true);
  ASSERT_EQ(j["gpus"][0]["mig_devices"].size(), 4u);
  EXPECT_EQ(j["gpus"][0]["mig_devices"][2]["profile"], "1c.2g.20gb");
  ASSERT_EQ(j["gpus"][0]["gi_profiles"].size(), 1u);
  EXPECT_EQ(j["gpus"][0]["gi_profiles"][0]["id"], 19);
  EXPECT_EQ(j["gpus"][0]["gi_profiles"][0]["placements"][1]["start"], 1);
  EXPECT_TRUE(j["gpus"][2]["gi_profiles"].empty());
}

TEST(FormatJsonTest, TelemetryAbsentFieldsAreNull) {
  Telemetry t;
  t.gpu_temp_c = 34;
  t.power_w = 71.5;
  t.remapped_rows_pending = false;
  nlohmann::json j = ToJson(t);
  EXPECT_EQ(j["gpu_temp_c"], 34);
  EXPECT_EQ(j["power_w"], 71.5);
  EXPECT_EQ(j["remapped_rows_pending"], false);
  EXPECT_TRUE(j["memory_temp_c"].is_null());
  EXPECT_TRUE(j["nvlink_tx_kib"].is_null());
  EXPECT_TRUE(j.contains("clock_event_reasons"));
}

TEST(FormatTableTest, TelemetryTableShowsAbsentFieldsAndFailedGpus) {
  Telemetry t;
  t.gpu_temp_c = 34;
  t.power_w = 71.5;
  t.power_limit_w = 70;
  t.fb_used_mib = 100;
  t.fb_total_mib = 15360;
  t.ecc_sbe_volatile = 2;
  t.ecc_dbe_volatile = 0;
  std::vector<TelemetryRow> rows{{4, t}, {5, Unavailable("GPU 5 (GPU-x): GPU is lost")}};
  std::string table = FormatTelemetryTable(rows);
  EXPECT_EQ(table,
            "GPU   TEMP MEMTMP POWER            UTIL MEMORY                  SM CLK   MEM CLK "
            "ECC S/D REPLAY\n"
            "4      34C      - 72W / 70W           - 100 / 15360 MiB              -         -     "
            "2/0      -\n"
            "5    error: GPU 5 (GPU-x): GPU is lost\n");
}

}  // namespace
}  // namespace gpuop::nvml
