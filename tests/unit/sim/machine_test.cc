#include "sim/nvml/machine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "base/strings.h"

namespace gpuop::sim {
namespace {

GpuModel Model(const std::string& key) {
  auto m = FindModel(key);
  EXPECT_TRUE(m.ok()) << key;
  return m.value_or(GpuModel{});
}

struct ModelExpect {
  std::string key, name;
  uint64_t mem;
  int ccmaj, ccmin;
  uint32_t pci;
  unsigned arch, brand, sms, watts;
  bool mig;
};

TEST(MachineTest, EveryModelHasItsHardwareValues) {
  const std::vector<ModelExpect> want = {
      {"a100-40gb", "NVIDIA A100-SXM4-40GB", 40960, 8, 0, 0x20B010DE, 7, 14, 108, 400, true},
      {"a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, 8, 0, 0x20B210DE, 7, 14, 108, 400, true},
      {"h100-80gb", "NVIDIA H100 80GB HBM3", 81559, 9, 0, 0x233010DE, 9, 14, 132, 700, true},
      {"h200-141gb", "NVIDIA H200", 143771, 9, 0, 0x233510DE, 9, 14, 132, 700, true},
      {"l40s", "NVIDIA L40S", 46068, 8, 9, 0x26B910DE, 8, 14, 142, 350, false},
      {"t4", "Tesla T4", 15360, 7, 5, 0x1EB810DE, 6, 2, 40, 70, false},
      {"a30", "NVIDIA A30", 24576, 8, 0, 0x20B710DE, 7, 14, 56, 165, true},
      {"h100-nvl", "NVIDIA H100 NVL", 95830, 9, 0, 0x232110DE, 9, 14, 132, 400, false},
      {"gb200", "NVIDIA GB200", 189471, 10, 0, 0x294110DE, 10, 14, 148, 1200, false},
      {"b200", "NVIDIA B200", 183359, 10, 0, 0x290110DE, 10, 14, 148, 1000, true},
      {"rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, 12, 0, 0x2BB510DE, 10,
       13, 188, 600, true},
  };
  ASSERT_EQ(BuiltinModels().size(), want.size());
  for (const auto& w : want) {
    SCOPED_TRACE(w.key);
    GpuModel m = Model(w.key);
    EXPECT_EQ(m.name, w.name);
    EXPECT_EQ(m.memory_mib, w.mem);
    EXPECT_EQ(m.cc_major, w.ccmaj);
    EXPECT_EQ(m.cc_minor, w.ccmin);
    EXPECT_EQ(m.pci_device_id, w.pci);
    EXPECT_EQ(m.architecture, w.arch);
    EXPECT_EQ(m.brand, w.brand);
    EXPECT_EQ(m.multiprocessors, w.sms);
    EXPECT_EQ(m.power_limit_w, w.watts);
    EXPECT_EQ(m.mig_capable(), w.mig);
    EXPECT_GT(m.max_sm_clock_mhz, 1000u);
    EXPECT_GT(m.max_mem_clock_mhz, 1000u);
    EXPECT_NE(m.pci_subsystem_id, 0u);
    // The full name finds the same model.
    EXPECT_EQ(Model(w.name).key, w.key);
  }
  EXPECT_EQ(Model("h100-80gb").nvlinks, 18u);
  EXPECT_FALSE(FindModel("v100").ok());
  EXPECT_NE(FindModel("v100").status().message().find("h100-80gb"), std::string::npos);
}

// The driver id, name, SMs, memory, max count and placements of every profile.
struct ProfileExpect {
  unsigned nvml_index, id;
  std::string name;
  unsigned slices, max, sms;
  uint64_t mem;
  unsigned psize;
  std::vector<unsigned> starts;
};

void ExpectProfiles(const std::string& key, const std::vector<ProfileExpect>& want) {
  SCOPED_TRACE(key);
  GpuModel m = Model(key);
  ASSERT_EQ(m.mig_profiles.size(), want.size());
  for (const auto& w : want) {
    SCOPED_TRACE(w.name);
    const GiProfile* p = m.ProfileByNvmlIndex(w.nvml_index);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p, m.ProfileById(w.id));
    EXPECT_EQ(p->name, w.name);
    EXPECT_EQ(p->slices, w.slices);
    EXPECT_EQ(p->max_count, w.max);
    EXPECT_EQ(p->multiprocessors, w.sms);
    EXPECT_EQ(p->memory_mib, w.mem);
    EXPECT_EQ(p->placement_size, w.psize);
    EXPECT_EQ(p->placement_starts, w.starts);
  }
}

const std::vector<unsigned> k0to6 = {0, 1, 2, 3, 4, 5, 6};

TEST(MachineTest, A100ProfileTables) {
  ExpectProfiles("a100-40gb", {{0, 19, "1g.5gb", 1, 7, 14, 4864, 1, k0to6},
                               {7, 20, "1g.5gb+me", 1, 1, 14, 4864, 1, k0to6},
                               {9, 15, "1g.10gb", 1, 4, 14, 9856, 2, {0, 2, 4, 6}},
                               {1, 14, "2g.10gb", 2, 3, 28, 9856, 2, {0, 2, 4}},
                               {2, 9, "3g.20gb", 3, 2, 42, 19968, 4, {0, 4}},
                               {3, 5, "4g.20gb", 4, 1, 56, 19968, 4, {0}},
                               {4, 0, "7g.40gb", 7, 1, 98, 40192, 8, {0}}});
  ExpectProfiles("a100-80gb", {{0, 19, "1g.10gb", 1, 7, 14, 9856, 1, k0to6},
                               {7, 20, "1g.10gb+me", 1, 1, 14, 9856, 1, k0to6},
                               {9, 15, "1g.20gb", 1, 4, 14, 19968, 2, {0, 2, 4, 6}},
                               {1, 14, "2g.20gb", 2, 3, 28, 19968, 2, {0, 2, 4}},
                               {2, 9, "3g.40gb", 3, 2, 42, 40192, 4, {0, 4}},
                               {3, 5, "4g.40gb", 4, 1, 56, 40192, 4, {0}},
                               {4, 0, "7g.80gb", 7, 1, 98, 80384, 8, {0}}});
}

TEST(MachineTest, HopperProfileTables) {
  ExpectProfiles("h100-80gb", {{0, 19, "1g.10gb", 1, 7, 16, 9984, 1, k0to6},
                               {7, 20, "1g.10gb+me", 1, 1, 16, 9984, 1, k0to6},
                               {9, 15, "1g.20gb", 1, 4, 26, 20096, 2, {0, 2, 4, 6}},
                               {1, 14, "2g.20gb", 2, 3, 32, 20096, 2, {0, 2, 4}},
                               {2, 9, "3g.40gb", 3, 2, 60, 40448, 4, {0, 4}},
                               {3, 5, "4g.40gb", 4, 1, 64, 40448, 4, {0}},
                               {4, 0, "7g.80gb", 7, 1, 132, 81152, 8, {0}}});
  ExpectProfiles("h200-141gb", {{0, 19, "1g.18gb", 1, 7, 16, 16384, 1, k0to6},
                                {7, 20, "1g.18gb+me", 1, 1, 16, 16384, 1, k0to6},
                                {9, 15, "1g.35gb", 1, 4, 26, 33024, 2, {0, 2, 4, 6}},
                                {1, 14, "2g.35gb", 2, 3, 32, 33024, 2, {0, 2, 4}},
                                {2, 9, "3g.71gb", 3, 2, 60, 71168, 4, {0, 4}},
                                {3, 5, "4g.71gb", 4, 1, 64, 71168, 4, {0}},
                                {4, 0, "7g.141gb", 7, 1, 132, 142848, 8, {0}}});
  // Hopper engines: DEC = CE = JPEG = G; 7g has CE 8 and one OFA; +me adds an OFA.
  GpuModel h = Model("h100-80gb");
  EXPECT_EQ(h.ProfileById(14)->decoders, 2u);
  EXPECT_EQ(h.ProfileById(0)->copy_engines, 8u);
  EXPECT_EQ(h.ProfileById(0)->ofas, 1u);
  EXPECT_EQ(h.ProfileById(20)->ofas, 1u);
  EXPECT_EQ(h.ProfileById(19)->ofas, 0u);
}

TEST(MachineTest, A30ProfileTable) {
  ExpectProfiles("a30", {{0, 14, "1g.6gb", 1, 4, 14, 5952, 1, {0, 1, 2, 3}},
                         {7, 21, "1g.6gb+me", 1, 1, 14, 5952, 1, {0, 1, 2, 3}},
                         {1, 5, "2g.12gb", 2, 2, 28, 12160, 2, {0, 2}},
                         {8, 6, "2g.12gb+me", 2, 1, 28, 12160, 2, {0, 2}},
                         {3, 0, "4g.24gb", 4, 1, 56, 24320, 4, {0}}});
  GpuModel a30 = Model("a30");
  EXPECT_EQ(a30.memory_slices, 4u);
  EXPECT_EQ(a30.compute_slices, 4u);
}

// NVIDIA's B200 table: the Hopper layout, no +gfx/-me/+me.all kinds; copy
// engines 2/2/2/3/6/8/16, one NVDEC and JPEG each, OFA on +me and 7g.
TEST(MachineTest, B200ProfileTable) {
  ExpectProfiles("b200", {{0, 19, "1g.23gb", 1, 7, 18, 22446, 1, k0to6},
                          {7, 20, "1g.23gb+me", 1, 1, 18, 22446, 1, k0to6},
                          {9, 15, "1g.45gb", 1, 4, 18, 45179, 2, {0, 2, 4, 6}},
                          {1, 14, "2g.45gb", 2, 3, 36, 45179, 2, {0, 2, 4}},
                          {2, 9, "3g.90gb", 3, 2, 54, 90935, 4, {0, 4}},
                          {3, 5, "4g.90gb", 4, 1, 72, 90935, 4, {0}},
                          {4, 0, "7g.180gb", 7, 1, 148, 182444, 8, {0}}});
  GpuModel b = Model("b200");
  std::vector<unsigned> ces;
  for (unsigned id : {19u, 20u, 15u, 14u, 9u, 5u, 0u})
    ces.push_back(b.ProfileById(id)->copy_engines);
  EXPECT_EQ(ces, (std::vector<unsigned>{2, 2, 2, 3, 6, 8, 16}));
  EXPECT_EQ(b.ProfileById(20)->ofas, 1u);
  EXPECT_EQ(b.ProfileById(0)->ofas, 1u);
  EXPECT_EQ(b.ProfileById(19)->ofas, 0u);
  EXPECT_EQ(b.ProfileById(19)->decoders, 1u);
}

// The RTX PRO 6000 Blackwell carries every newer kind NVIDIA publishes.
TEST(MachineTest, RtxPro6000ProfileTable) {
  const std::vector<unsigned> k0to3 = {0, 1, 2, 3};
  ExpectProfiles("rtx-pro-6000", {{0x0, 14, "1g.24gb", 1, 4, 46, 24186, 1, k0to3},
                                  {0x7, 21, "1g.24gb+me", 1, 1, 46, 24186, 1, k0to3},
                                  {0xA, 47, "1g.24gb+gfx", 1, 4, 46, 24186, 1, k0to3},
                                  {0xF, 65, "1g.24gb+me.all", 1, 1, 46, 24186, 1, k0to3},
                                  {0xD, 67, "1g.24gb-me", 1, 4, 46, 24186, 1, k0to3},
                                  {0x1, 5, "2g.48gb", 2, 2, 94, 48517, 2, {0, 2}},
                                  {0xB, 35, "2g.48gb+gfx", 2, 2, 94, 48517, 2, {0, 2}},
                                  {0x10, 64, "2g.48gb+me.all", 2, 1, 94, 48517, 2, {0, 2}},
                                  {0xE, 66, "2g.48gb-me", 2, 2, 94, 48517, 2, {0, 2}},
                                  {0x3, 0, "4g.96gb", 4, 1, 188, 97280, 4, {0}},
                                  {0xC, 32, "4g.96gb+gfx", 4, 1, 188, 97280, 4, {0}}});
  GpuModel r = Model("rtx-pro-6000");
  EXPECT_EQ(r.ProfileById(65)->encoders, 4u);
  EXPECT_EQ(r.ProfileById(67)->decoders, 0u);
  EXPECT_EQ(r.memory_slices, 4u);
  EXPECT_EQ(r.compute_slices, 4u);
}

// The Blackwell MIG presets come with a driver that knows their profile kinds.
TEST(MachineTest, BlackwellPresetsHaveA580Driver) {
  for (const char* preset : {"dgx-b200", "b200", "rtx-pro-6000"}) {
    SCOPED_TRACE(preset);
    Machine m = LoadMachine(preset, "").value();
    EXPECT_EQ(m.driver_version, "580.95.05");
    EXPECT_EQ(m.cuda_driver_version, 13000);
  }
  Machine dgx = LoadMachine("dgx-b200", "").value();
  ASSERT_EQ(dgx.gpus.size(), 8u);
  EXPECT_EQ(dgx.gpus[7].model.key, "b200");
  EXPECT_EQ(LoadMachine("dgx-h100", "").value().driver_version, Machine{}.driver_version);
}

// Every profile name follows go-nvlib's rule from its memory size.
TEST(MachineTest, ProfileNamesFollowTheNamingRule) {
  for (const auto& m : BuiltinModels()) {
    for (const auto& p : m.mig_profiles) {
      std::string base = p.name.substr(0, p.name.find_first_of("+-"));
      EXPECT_EQ(MigProfileName(p.slices, p.slices, p.memory_mib, m.memory_mib), base)
          << m.key << " " << p.name;
    }
  }
  EXPECT_EQ(MigProfileName(1, 2, 20096, 81559), "1c.2g.20gb");
}

TEST(MachineTest, PresetsHaveTheirGpusAndBuses) {
  std::vector<std::string> names = PresetNames();
  for (const char* want : {"dgx-a100", "dgx-h100", "hgx-h200", "l40s-4", "t4-1"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const auto& m : BuiltinModels()) {
    EXPECT_NE(std::find(names.begin(), names.end(), m.key), names.end()) << m.key;
  }
  struct P {
    std::string name, model;
    size_t count;
    std::vector<std::string> buses;
  };
  const std::vector<P> want = {
      {"dgx-a100", "a100-40gb", 8, {"07", "0F", "47", "4E", "87", "90", "B7", "BD"}},
      {"dgx-h100", "h100-80gb", 8, {"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"}},
      {"hgx-h200", "h200-141gb", 8, {"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"}},
      {"l40s-4", "l40s", 4, {}},
      {"t4-1", "t4", 1, {}},
  };
  for (const auto& w : want) {
    SCOPED_TRACE(w.name);
    auto m = LoadMachine(w.name, "");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->name, w.name);
    ASSERT_EQ(m->gpus.size(), w.count);
    for (size_t i = 0; i < w.count; ++i) {
      const SimGpu& g = m->gpus[i];
      EXPECT_EQ(g.model.key, w.model);
      EXPECT_EQ(g.index, i);
      EXPECT_EQ(g.minor, i);
      EXPECT_EQ(g.numa_node, 2 * i < w.count ? 0 : 1);
      if (!w.buses.empty()) {
        EXPECT_EQ(g.bus_id, "00000000:" + w.buses[i] + ":00.0");
      }
      EXPECT_EQ(g.bus_id.size(), 16u);
    }
  }
  for (const auto& model : BuiltinModels()) {
    auto m = LoadMachine(model.key, "");
    ASSERT_TRUE(m.ok());
    ASSERT_EQ(m->gpus.size(), 1u);
    EXPECT_EQ(m->gpus[0].model.key, model.key);
  }
  EXPECT_NE(DescribePresets().find("dgx-h100: 8x NVIDIA H100 80GB HBM3"), std::string::npos);
}

TEST(MachineTest, UuidsAreDistinctAndStable) {
  std::set<std::string> seen;
  for (const std::string seed : {"", "node-a", "node-b"}) {
    for (const auto& preset : PresetNames()) {
      auto m = LoadMachine(preset, seed);
      ASSERT_TRUE(m.ok());
      auto again = LoadMachine(preset, seed);
      for (size_t i = 0; i < m->gpus.size(); ++i) {
        const std::string& u = m->gpus[i].uuid;
        EXPECT_EQ(u, again->gpus[i].uuid);
        EXPECT_EQ(u.size(), 40u) << u;
        EXPECT_TRUE(StartsWith(u, "GPU-")) << u;
        for (size_t dash : {12u, 17u, 22u, 27u}) EXPECT_EQ(u[dash], '-') << u;
        EXPECT_TRUE(seen.insert(u).second) << "duplicate " << u;
      }
    }
  }
}

class MachineFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuop-machine-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string Write(const std::string& text) {
    std::string path = dir_ + "/machine.yaml";
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(MachineFileTest, HeterogeneousMachine) {
  auto m = LoadMachine(Write("name: mixed\n"
                             "driverVersion: \"550.90.07\"\n"
                             "cudaVersion: \"12.4\"\n"
                             "gpus:\n"
                             "  - model: h100-80gb\n"
                             "    count: 2\n"
                             "    migEnabled: true\n"
                             "  - model: NVIDIA L40S\n"
                             "    count: 2\n"),
                       "seed");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->name, "mixed");
  EXPECT_EQ(m->driver_version, "550.90.07");
  EXPECT_EQ(m->cuda_driver_version, 12040);
  ASSERT_EQ(m->gpus.size(), 4u);
  EXPECT_EQ(m->gpus[0].model.key, "h100-80gb");
  EXPECT_TRUE(m->gpus[1].mig_enabled_at_boot);
  EXPECT_EQ(m->gpus[2].model.key, "l40s");
  EXPECT_FALSE(m->gpus[3].mig_enabled_at_boot);
  EXPECT_EQ(m->gpus[3].numa_node, 1);
}

TEST_F(MachineFileTest, StrictParsingNamesTheLineAndChoices) {
  auto bad_key = LoadMachine(Write("gpus:\n  - model: t4\n    colour: red\n"), "");
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find("line 3"), std::string::npos)
      << bad_key.status().message();
  EXPECT_NE(bad_key.status().message().find("migEnabled"), std::string::npos);

  auto bad_top = LoadMachine(Write("gpu:\n  - model: t4\n"), "");
  ASSERT_FALSE(bad_top.ok());
  EXPECT_NE(bad_top.status().message().find("line 1"), std::string::npos);

  auto bad_model = LoadMachine(Write("gpus:\n  - model: v100\n"), "");
  ASSERT_FALSE(bad_model.ok());
  EXPECT_NE(bad_model.status().message().find("line 2"), std::string::npos);
  EXPECT_NE(bad_model.status().message().find("a100-40gb"), std::string::npos);

  auto no_mig = LoadMachine(Write("gpus:\n  - model: l40s\n    migEnabled: true\n"), "");
  ASSERT_FALSE(no_mig.ok());
  EXPECT_NE(no_mig.status().message().find("does not support MIG"), std::string::npos);

  EXPECT_FALSE(LoadMachine(Write("gpus: [\n"), "").ok());
  EXPECT_FALSE(LoadMachine(Write("gpus:\n  - model: t4\n    count: 0\n"), "").ok());
  EXPECT_FALSE(LoadMachine(Write("gpus: []\n"), "").ok());

  auto unknown = LoadMachine("no-such-preset", "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("dgx-h100"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::sim
