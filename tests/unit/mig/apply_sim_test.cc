// The MIG tool on the GPU simulator, through the real NVML binding: every
// default config applies and asserts on H100, H200, A100 (40 and 80 GB) and
// A30; the day/night switch works; a change on one GPU leaves the other
// GPUs' instances alone (checked on the simulator's own state: an instance
// that was destroyed and created again gets a new creation serial); GPUs
// without MIG give clear errors.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/files.h"
#include "mig/apply.h"
#include "mig/config.h"
#include "mig/plan.h"
#include "nvml/client.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"

namespace gpuop::mig {
namespace {

const std::string kFixtures = std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/mig/";

class MigSimTest : public ::testing::Test {
 protected:
  // A fresh node per SetUp: the loops below start over with TearDown + SetUp.
  void SetUp() override { sim_.emplace(); }
  void TearDown() override {
    client_.reset();
    sim_.reset();
  }

  void Machine(const std::string& machine) {
    ASSERT_TRUE(sim_->Boot(machine, "mig-test"));
    client_ = sim_->OpenNvmlOrFail();
    ASSERT_NE(client_, nullptr);
  }

  // Apply options whose GPU reset is the simulator's (what nvidia-smi -r does).
  ApplyOptions WithReset() {
    ApplyOptions o;
    o.reset_gpu = [this](unsigned gpu) { return sim::ResetGpu(sim_->store(), gpu); };
    return o;
  }

  Result<ApplyReport> Apply(const ConfigFile& f, const std::string& name) {
    return ApplyConfig(*client_, f, name, WithReset());
  }

  // Creation serials of every GI and CI of each GPU, from the simulator.
  std::vector<std::set<uint64_t>> Serials() {
    auto s = sim_->store().Read();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    std::vector<std::set<uint64_t>> out;
    if (!s.ok()) return out;
    for (const auto& g : (*s)->gpus) {
      std::set<uint64_t> serials;
      for (const auto& gi : g.gis) {
        serials.insert(gi.serial);
        for (const auto& ci : gi.cis) serials.insert(ci.serial);
      }
      out.push_back(serials);
    }
    return out;
  }

  std::vector<GpuState> State() {
    auto s = ReadState(*client_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::vector<GpuState>{};
  }

  ConfigFile Defaults() {
    // Through our own serializer and parser, as `gpuop mig defaults` hands it on.
    auto f = ParseConfig(SerializeConfig(DefaultConfigs(State())), "defaults");
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? *f : ConfigFile{};
  }

  // "all-1g.<N>gb" for the smallest 1g profile of GPU 0.
  std::string All1g() {
    std::string best;
    uint64_t mem = ~0ull;
    const std::vector<GpuState> state = State();
    if (state.empty()) return "";
    for (const auto& p : state[0].profiles) {
      if (p.slices == 1 && p.name.find('+') == std::string::npos && p.memory_mib < mem) {
        mem = p.memory_mib;
        best = p.name;
      }
    }
    return "all-" + best;
  }

  std::optional<testing::SimNode> sim_;
  std::unique_ptr<nvml::Client> client_;
};

class MigSimModelTest : public MigSimTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(MigSimModelTest, EveryDefaultConfigAppliesAndAsserts) {
  Machine(GetParam());
  ConfigFile defaults = Defaults();
  ASSERT_GE(defaults.configs.size(), 8u);
  for (const auto& [name, _] : defaults.configs) {
    SCOPED_TRACE(GetParam() + " " + name);
    auto r = Apply(defaults, name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->ResetRequired().empty());
    Status s = AssertConfig(*client_, defaults, name, false);
    EXPECT_TRUE(s.ok()) << s.ToString();
    // Applying again changes nothing.
    auto again = Apply(defaults, name);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(again->gpus.empty()) << again->Summary();
    // The export of what is there asserts too.
    auto exported = Export(*client_, "current");
    ASSERT_TRUE(exported.ok());
    auto reparsed = ParseConfig(SerializeConfig(*exported), "export");
    ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
    EXPECT_TRUE(AssertConfig(*client_, *reparsed, "current", false).ok());
  }
}

TEST_P(MigSimModelTest, DayNightSwitch) {
  Machine(GetParam());
  ConfigFile defaults = Defaults();
  const std::string one_g = All1g();
  for (const std::string& name :
       {one_g, std::string("all-disabled"), std::string("all-balanced"), one_g}) {
    SCOPED_TRACE(GetParam() + " " + name);
    auto r = Apply(defaults, name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(AssertConfig(*client_, defaults, name, false).ok());
    // Every other config of the switch does not hold now.
    if (name != "all-disabled") {
      EXPECT_FALSE(AssertConfig(*client_, defaults, "all-disabled", false).ok());
    }
  }
  for (const auto& g : State()) {
    EXPECT_TRUE(g.mig_enabled);
    EXPECT_FALSE(DeviceNames(g).empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, MigSimModelTest,
                         ::testing::Values("dgx-h100", "hgx-h200", "dgx-a100", "a100-80gb", "a30"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

TEST_F(MigSimTest, ChangeOnOneGpuLeavesTheOthersUntouched) {
  Machine("dgx-h100");
  ConfigFile defaults = Defaults();
  ASSERT_TRUE(Apply(defaults, "all-1g.10gb").ok());
  auto before = Serials();
  ASSERT_EQ(before.size(), 8u);
  auto calls = [this] {  // the simulator's create + destroy calls per GPU
    std::vector<uint64_t> out;
    auto s = sim_->store().Read();
    EXPECT_TRUE(s.ok());
    for (const auto& g : (*s)->gpus) out.push_back(g.mig_creates + g.mig_destroys);
    return out;
  };
  const std::vector<uint64_t> calls_before = calls();

  auto f = ParseConfig(
      "version: v1\n"
      "mig-configs:\n"
      "  one-balanced:\n"
      "    - devices: all\n"
      "      mig-enabled: true\n"
      "      mig-devices: {\"1g.10gb\": 7}\n"
      "    - devices: [3]\n"
      "      mig-enabled: true\n"
      "      mig-devices: {\"1g.10gb\": 2, \"2g.20gb\": 1, \"3g.40gb\": 1}\n",
      "test.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto r = Apply(*f, "one-balanced");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->gpus.size(), 1u);
  const GpuApplyResult& g3 = r->gpus[0];
  EXPECT_EQ(g3.gpu, 3u);
  // Two 1g instances stay; five go; the 2g and 3g are made.
  EXPECT_EQ(g3.destroyed_gis, 5u);
  EXPECT_EQ(g3.destroyed_cis, 5u);
  EXPECT_EQ(g3.created_gis, 2u);
  EXPECT_EQ(g3.created_cis, 2u);

  auto after = Serials();
  for (unsigned i = 0; i < 8; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(after[i], before[i]) << "GPU " << i << " was touched";
  }
  // On GPU 3 the simulator saw exactly 4 new instances (2 GIs + 2 CIs) and
  // kept 4 of the old serials (2 GIs + their CIs).
  std::vector<uint64_t> kept, added;
  for (uint64_t s : after[3]) (before[3].contains(s) ? kept : added).push_back(s);
  EXPECT_EQ(kept.size(), 4u);
  EXPECT_EQ(added.size(), 4u);
  // NVML calls as the simulator counted them: only GPU 3's, 5 CI + 5 GI
  // destroys and 2 GI + 2 CI creates.
  const std::vector<uint64_t> calls_after = calls();
  for (unsigned i = 0; i < 8; ++i) {
    EXPECT_EQ(calls_after[i] - calls_before[i], i == 3 ? 14u : 0u) << "GPU " << i;
  }
  EXPECT_TRUE(AssertConfig(*client_, *f, "one-balanced", false).ok());
}

TEST_F(MigSimTest, PackingThatFirstFitMisses) {
  Machine("h100-80gb");
  // The simulator's first-fit (no placement given) fails on this order, as
  // the driver does: the packer must place the 3g at 4.
  Status first_fit =
      sim::SetMigLayout(sim_->store(), 0, true, {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"});
  EXPECT_FALSE(first_fit.ok());
  ASSERT_TRUE(sim::SetMigLayout(sim_->store(), 0, true, {}).ok());
  auto f = ParseConfig(
      "version: v1\nmig-configs:\n  tight:\n    - devices: all\n      mig-enabled: true\n"
      "      mig-devices: {\"3g.40gb\": 1, \"2g.20gb\": 1, \"1g.10gb\": 2}\n",
      "test.yaml");
  ASSERT_TRUE(f.ok());
  auto r = Apply(*f, "tight");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(AssertConfig(*client_, *f, "tight", false).ok());
}

TEST_F(MigSimTest, UpstreamConfigApplies) {
  Machine("dgx-h100");
  auto text = ReadFile(kFixtures + "upstream.yaml");
  ASSERT_TRUE(text.ok());
  auto f = ParseConfig(*text, "upstream.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  for (const char* name :
       {"custom-config", "all-balanced", "all-1g.10gb", "all-enabled", "all-disabled"}) {
    SCOPED_TRACE(name);
    auto r = Apply(*f, name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(AssertConfig(*client_, *f, name, false).ok());
  }
  ASSERT_TRUE(Apply(*f, "custom-config").ok());
  auto state = State();
  EXPECT_FALSE(state[0].mig_enabled);
  EXPECT_EQ(DeviceNames(state[6]),
            (std::vector<std::string>{"1c.2g.20gb", "1c.2g.20gb", "3g.40gb"}));
  EXPECT_EQ(DeviceNames(state[7]),
            (std::vector<std::string>{"1g.10gb", "1g.10gb+me", "1g.20gb", "4g.40gb"}));
}

TEST_F(MigSimTest, ResetRequiredIsReportedNotHidden) {
  Machine("h100-80gb");
  ConfigFile defaults = Defaults();
  auto r = ApplyConfig(*client_, defaults, "all-7g.80gb", ApplyOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ResetRequired(), (std::vector<unsigned>{0}));
  EXPECT_NE(r->Summary().find("reset required"), std::string::npos);
  Status s = AssertConfig(*client_, defaults, "all-7g.80gb", false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reset required"), std::string::npos) << s.message();
  // After the reset, the same apply makes the layout.
  ASSERT_TRUE(sim::ResetGpu(sim_->store(), 0).ok());
  auto again = ApplyConfig(*client_, defaults, "all-7g.80gb", ApplyOptions{});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->ResetRequired().empty());
  EXPECT_TRUE(AssertConfig(*client_, defaults, "all-7g.80gb", false).ok());
}

TEST_F(MigSimTest, ModeOnly) {
  Machine("h100-80gb");
  ConfigFile defaults = Defaults();
  ApplyOptions o = WithReset();
  o.mode_only = true;
  auto r = ApplyConfig(*client_, defaults, "all-balanced", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(AssertConfig(*client_, defaults, "all-balanced", true).ok());
  EXPECT_FALSE(AssertConfig(*client_, defaults, "all-balanced", false).ok());
  EXPECT_TRUE(State()[0].instances.empty());
}

TEST_F(MigSimTest, GpusWithoutMigGiveClearErrors) {
  for (const char* machine : {"l40s-4", "t4-1"}) {
    SCOPED_TRACE(machine);
    TearDown();
    SetUp();
    Machine(machine);
    auto f = ParseConfig(
        "version: v1\nmig-configs:\n  all-1g.10gb:\n    - devices: all\n      mig-enabled: true\n"
        "      mig-devices: {\"1g.10gb\": 7}\n  all-disabled:\n    - devices: all\n"
        "      mig-enabled: false\n",
        "test.yaml");
    ASSERT_TRUE(f.ok());
    auto r = Apply(*f, "all-1g.10gb");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    const std::string model = std::string(machine) == "t4-1" ? "Tesla T4" : "NVIDIA L40S";
    EXPECT_NE(r.status().message().find("GPU 0 (" + model + ") does not support MIG"),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("mig-config \"all-1g.10gb\""), std::string::npos);
    // Disabled is what they are: nothing to do, and it asserts.
    auto off = Apply(*f, "all-disabled");
    ASSERT_TRUE(off.ok()) << off.status().ToString();
    EXPECT_TRUE(off->gpus.empty());
    EXPECT_TRUE(AssertConfig(*client_, *f, "all-disabled", false).ok());
  }
}

TEST_F(MigSimTest, ProfileTheModelLacks) {
  Machine("dgx-a100");
  auto f = ParseConfig(
      "version: v1\nmig-configs:\n  h100-sizes:\n    - devices: [1]\n      mig-enabled: true\n"
      "      mig-devices: {\"3g.40gb\": 2}\n",
      "test.yaml");
  ASSERT_TRUE(f.ok());
  auto r = Apply(*f, "h100-sizes");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPU 1 (NVIDIA A100-SXM4-40GB) has no MIG profile 3g.40gb"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("3g.20gb"), std::string::npos);  // lists what it has
}

// Issue 21: a GPU with a running process keeps its MIG mode and is never
// reset; the error names the GPU, the pid and what to do. Once the process is
// gone the same apply works.
TEST_F(MigSimTest, BusyGpuIsNotResetAndNamesItsProcesses) {
  Machine("dgx-h100");
  ConfigFile defaults = Defaults();
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  ASSERT_TRUE(sim_->store()
                  .Update([&](sim::SimState& s) {
                    s.gpus[2].processes.push_back({pid, uint64_t{1} << 30});
                    return Status::Ok();
                  })
                  .ok());
  std::vector<unsigned> resets;
  ApplyOptions o;
  o.reset_gpu = [&](unsigned gpu) {
    resets.push_back(gpu);
    return sim::ResetGpu(sim_->store(), gpu);
  };
  auto r = ApplyConfig(*client_, defaults, "all-1g.10gb", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("GPU 2 ("), std::string::npos) << msg;
  EXPECT_NE(msg.find("in use by process(es) " + std::to_string(pid)), std::string::npos) << msg;
  EXPECT_NE(msg.find("stop them, or let the MIG manager evict the GPU clients"), std::string::npos)
      << msg;
  EXPECT_EQ(std::find(resets.begin(), resets.end(), 2u), resets.end());  // never reset
  std::vector<GpuState> state = State();
  ASSERT_EQ(state.size(), 8u);
  EXPECT_FALSE(state[2].mig_enabled);

  ASSERT_TRUE(sim_->store()
                  .Update([](sim::SimState& s) {
                    s.gpus[2].processes.clear();
                    return Status::Ok();
                  })
                  .ok());
  auto again = ApplyConfig(*client_, defaults, "all-1g.10gb", o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(AssertConfig(*client_, defaults, "all-1g.10gb", false).ok());
}

// Issue 21: the profile kinds of NVML 13 (+gfx, -me, +me.all) are listed by
// NVIDIA's names, and an apply creates them.
TEST_F(MigSimTest, NewProfileKindsApply) {
  Machine("rtx-pro-6000");
  auto f = ParseConfig(
      "version: v1\nmig-configs:\n  kinds:\n    - devices: all\n      mig-enabled: true\n"
      "      mig-devices: {\"1g.24gb+gfx\": 1, \"1g.24gb-me\": 1, \"2g.48gb+me.all\": 1}\n",
      "test.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto r = Apply(*f, "kinds");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(AssertConfig(*client_, *f, "kinds", false).ok());
  const std::vector<GpuState> state = State();
  ASSERT_EQ(state.size(), 1u);
  std::vector<std::string> names;
  for (const auto& gi : state[0].instances) names.push_back(gi.profile_name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"1g.24gb+gfx", "1g.24gb-me", "2g.48gb+me.all"}));
}

// Issue 21: without MIG privilege an apply fails saying how to get it.
TEST_F(MigSimTest, UnprivilegedApplySaysHowToGetThePrivilege) {
  ::setenv("GPUOP_SIM_MIG_PRIVILEGED", "0", 1);
  Machine("h100-80gb");
  ConfigFile defaults = Defaults();
  auto r = Apply(defaults, "all-1g.10gb");
  ::unsetenv("GPUOP_SIM_MIG_PRIVILEGED");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("lacks MIG management privilege"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("/dev/nvidia-caps/nvidia-cap1"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::mig
