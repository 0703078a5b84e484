// The simulator's work account and its GPM metric model (sim/nvml/gpm.h),
// and the account surviving the shared state file.
#include "sim/nvml/gpm.h"

#include <gtest/gtest.h>

#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"

namespace gpuop::sim {
namespace {

TEST(BusyTime, OverlappingIntervalsCountOnce) {
  BusyTime b;
  AddBusy(b, 1000, 2000);
  AddBusy(b, 1500, 2500);  // overlaps: only 2000-2500 is new
  AddBusy(b, 1200, 1800);  // inside what is counted
  EXPECT_EQ(b.accounted_ms, 1500u);
  AddBusy(b, 4000, 4100);  // after a gap
  EXPECT_EQ(b.accounted_ms, 1600u);
  AddBusy(b, 5000, 5000);  // empty
  EXPECT_EQ(b.accounted_ms, 1600u);
}

TEST(BusyTime, TheFutureDoesNotCountYet) {
  BusyTime b;
  AddBusy(b, 1000, 61000);  // a minute's load from t=1 s
  EXPECT_EQ(BusyMsAt(b, 500), 0u);
  EXPECT_EQ(BusyMsAt(b, 1000), 0u);
  EXPECT_EQ(BusyMsAt(b, 11000), 10000u);
  EXPECT_EQ(BusyMsAt(b, 61000), 60000u);
  EXPECT_EQ(BusyMsAt(b, 99000), 60000u);
}

TEST(GpmModel, HopperAndNewerOnly) {
  auto support = [](const char* machine) {
    auto m = LoadMachine(machine, "");
    EXPECT_TRUE(m.ok()) << machine;
    return m.ok() && GpmSupported(m->gpus[0].model);
  };
  EXPECT_TRUE(support("dgx-h100"));
  EXPECT_TRUE(support("dgx-b200"));
  EXPECT_FALSE(support("dgx-a100"));
  EXPECT_FALSE(support("l40s-4"));  // Ada
  EXPECT_FALSE(support("t4-1"));    // Turing
}

TEST(GpmModel, ActivityFollowsTheBusyShareAndTrafficIsTheGpus) {
  auto m = LoadMachine("dgx-h100", "");
  ASSERT_TRUE(m.ok());
  const GpuModel& h100 = m->gpus[0].model;
  constexpr unsigned kSmUtil = 2, kAnyTensor = 5, kPcieTx = 20, kNvLinkTx = 61, kUnknown = 30;
  EXPECT_EQ(*GpmMetricValue(kSmUtil, 0.0, h100, false), 0);
  EXPECT_GT(*GpmMetricValue(kSmUtil, 1.0, h100, false), 90);
  EXPECT_DOUBLE_EQ(*GpmMetricValue(kAnyTensor, 0.5, h100, false),
                   *GpmMetricValue(kAnyTensor, 1.0, h100, false) / 2);
  EXPECT_EQ(*GpmMetricValue(kSmUtil, 7.0, h100, false), *GpmMetricValue(kSmUtil, 1.0, h100, false))
      << "a share is clamped to 1";
  EXPECT_TRUE(GpmMetricValue(kSmUtil, 1.0, h100, true).has_value()) << "MIG instances have SMs";
  EXPECT_FALSE(GpmMetricValue(kPcieTx, 1.0, h100, true).has_value()) << "not per MIG instance";
  EXPECT_GT(*GpmMetricValue(kPcieTx, 1.0, h100, false), *GpmMetricValue(kPcieTx, 0, h100, false));
  EXPECT_GT(*GpmMetricValue(kNvLinkTx, 1.0, h100, false), 0);
  EXPECT_FALSE(GpmMetricValue(kUnknown, 1.0, h100, false).has_value());
  auto l40s = LoadMachine("l40s-4", "");
  ASSERT_TRUE(l40s.ok());
  EXPECT_FALSE(GpmMetricValue(kNvLinkTx, 1.0, l40s->gpus[0].model, false).has_value())
      << "no NVLink";
}

TEST(GpmState, LoadOnAGpuAndAGpuInstanceSurvivesTheStateFile) {
  auto m = LoadMachine("dgx-h100", "");
  ASSERT_TRUE(m.ok());
  SimState s = InitialState(*m, 1000);
  ASSERT_TRUE(ApplyMigLayout(*m, s, 1, true, {"1g.10gb"}).ok());
  const unsigned gi = s.gpus[1].gis.at(0).id;
  ASSERT_TRUE(ApplyLoad(*m, s, 0, std::nullopt, 2000, 30000).ok());
  ASSERT_TRUE(ApplyLoad(*m, s, 1, gi, 2000, 5000).ok());
  auto missing = ApplyLoad(*m, s, 1, gi + 5, 2000, 5000);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("no GPU instance"), std::string::npos) << missing.ToString();
  EXPECT_EQ(ApplyLoad(*m, s, 2, std::nullopt, 2000, 0).code(), StatusCode::kInvalidArgument);

  auto back = ParseState(SerializeState(s), "state.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(BusyMsAt(back->gpus[0].busy, 12000), 10000u);
  EXPECT_EQ(BusyMsAt(back->gpus[1].gis.at(0).busy, 12000), 5000u);
}

}  // namespace
}  // namespace gpuop::sim
