// The PodDisruptionBudget check of the eviction subresource (disruption.h):
// budget status as the disruption controller computes it, and the refusals
// the real eviction handler answers with.
#include "sim/kube/disruption.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

Object Ptr(Json j) { return std::make_shared<const Json>(std::move(j)); }

Json Pod(const std::string& name, const std::string& phase, bool ready,
         const Json& labels = {{"app", "web"}}) {
  return {{"metadata", {{"name", name}, {"namespace", "ns"}, {"labels", labels}}},
          {"status",
           {{"phase", phase},
            {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

Json OwnedBy(Json pod, const std::string& kind, const std::string& uid) {
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                         {"kind", kind},
                                         {"name", "owner-" + uid},
                                         {"uid", uid},
                                         {"controller", true}}};
  return pod;
}

Json Budget(const std::string& name, const Json& spec) {
  Json b = {{"metadata", {{"name", name}, {"namespace", "ns"}}}, {"spec", spec}};
  if (!b["spec"].contains("selector")) b["spec"]["selector"] = {{"matchLabels", {{"app", "web"}}}};
  return b;
}

ControllerScaleFn Scales(std::map<std::string, int64_t> by_uid) {
  return [by_uid](const std::string&, const Json& ref) -> std::optional<int64_t> {
    auto it = by_uid.find(ref.value("uid", ""));
    if (it == by_uid.end()) return std::nullopt;
    return it->second;
  };
}

// Three running pods, `ready` of them Ready.
std::vector<Object> Web(int ready, int total = 3) {
  std::vector<Object> pods;
  for (int i = 0; i < total; ++i)
    pods.push_back(Ptr(Pod("web-" + std::to_string(i), "Running", i < ready)));
  return pods;
}

TEST(DisruptionTest, MinAvailableIntegerCountsReadyPodsAgainstTheCoveredOnes) {
  auto pods = Web(2);
  auto s = ComputeBudgetStatus(Budget("b", {{"minAvailable", 2}}), pods, nullptr);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->expected_pods, 3);
  EXPECT_EQ(s->desired_healthy, 2);
  EXPECT_EQ(s->current_healthy, 2);
  EXPECT_EQ(s->disruptions_allowed, 0);

  auto all_ready = Web(3);
  EXPECT_EQ(ComputeBudgetStatus(Budget("b", {{"minAvailable", 2}}), all_ready, nullptr)
                ->disruptions_allowed,
            1);
}

TEST(DisruptionTest, TerminatingAndUncoveredPodsAreNotHealthy) {
  auto pods = Web(3);
  Json going = Pod("web-going", "Running", true);
  going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  pods.push_back(Ptr(going));
  pods.push_back(Ptr(Pod("db-0", "Running", true, {{"app", "db"}})));
  Json elsewhere = Pod("web-other-ns", "Running", true);
  elsewhere["metadata"]["namespace"] = "other";
  pods.push_back(Ptr(elsewhere));
  auto s = ComputeBudgetStatus(Budget("b", {{"minAvailable", 1}}), pods, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->expected_pods, 4);  // the terminating one is still covered
  EXPECT_EQ(s->current_healthy, 3);
  EXPECT_EQ(s->disruptions_allowed, 2);
}

TEST(DisruptionTest, PercentagesCountAgainstControllerScaleRoundedUp) {
  // Two ReplicaSets (scales 3 and 2) behind five pods, one more pod unmanaged.
  std::vector<Object> pods;
  for (int i = 0; i < 3; ++i) {
    pods.push_back(Ptr(OwnedBy(Pod("a-" + std::to_string(i), "Running", true), "ReplicaSet", "a")));
  }
  for (int i = 0; i < 2; ++i) {
    pods.push_back(Ptr(OwnedBy(Pod("b-" + std::to_string(i), "Running", true), "ReplicaSet", "b")));
  }
  pods.push_back(Ptr(Pod("loose", "Running", true)));
  auto scales = Scales({{"a", 3}, {"b", 2}});

  // maxUnavailable 30% of 5 = 1.5 → 2 unavailable allowed: 3 desired of 6 healthy.
  auto max_unavailable =
      ComputeBudgetStatus(Budget("b", {{"maxUnavailable", "30%"}}), pods, scales);
  ASSERT_TRUE(max_unavailable.ok()) << max_unavailable.status().ToString();
  EXPECT_EQ(max_unavailable->expected_pods, 5);
  EXPECT_EQ(max_unavailable->desired_healthy, 3);
  EXPECT_EQ(max_unavailable->current_healthy, 6);
  EXPECT_EQ(max_unavailable->disruptions_allowed, 3);

  // minAvailable 50% of 5 = 2.5 → 3.
  auto min_available = ComputeBudgetStatus(Budget("b", {{"minAvailable", "50%"}}), pods, scales);
  ASSERT_TRUE(min_available.ok());
  EXPECT_EQ(min_available->desired_healthy, 3);

  // maxUnavailable as an integer also counts against the scale.
  auto integer = ComputeBudgetStatus(Budget("b", {{"maxUnavailable", 1}}), pods, scales);
  ASSERT_TRUE(integer.ok());
  EXPECT_EQ(integer->desired_healthy, 4);
}

TEST(DisruptionTest, ScaleBasedBudgetsFailWithoutAControllerOrWithABadValue) {
  std::vector<Object> pods = {Ptr(OwnedBy(Pod("x", "Running", true), "DaemonSet", "ds"))};
  auto no_scale = ComputeBudgetStatus(Budget("b", {{"maxUnavailable", 1}}), pods, Scales({}));
  ASSERT_FALSE(no_scale.ok());
  EXPECT_EQ(no_scale.status().message(), "found no controllers for pod \"x\"");

  auto bad =
      ComputeBudgetStatus(Budget("b", {{"minAvailable", "half"}}), pods, Scales({{"ds", 1}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spec.minAvailable \"half\""), std::string::npos)
      << bad.status().message();

  // Only unmanaged pods: nothing is expected, so nothing may be disrupted.
  auto unmanaged = Web(3);
  auto none = ComputeBudgetStatus(Budget("b", {{"maxUnavailable", "50%"}}), unmanaged, Scales({}));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->expected_pods, 0);
  EXPECT_EQ(none->disruptions_allowed, 0);
}

TEST(DisruptionTest, EmptyOrMissingSelectorCoversNoPod) {
  Json pod = Pod("p", "Running", true);
  EXPECT_TRUE(BudgetCoversPod(Budget("b", {}), pod));
  EXPECT_FALSE(BudgetCoversPod(Budget("b", {{"selector", Json::object()}}), pod));
  Json no_selector = Budget("b", {});
  no_selector["spec"].erase("selector");
  EXPECT_FALSE(BudgetCoversPod(no_selector, pod));
  EXPECT_FALSE(BudgetCoversPod(
      Budget("b",
             {{"selector", {{"matchExpressions", {{{"key", "app"}, {"operator", "Bogus"}}}}}}}),
      pod));
}

TEST(DisruptionTest, EvictionBlockedWhenNoDisruptionIsAllowed) {
  auto pods = Web(2);
  std::vector<Object> budgets = {Ptr(Budget("web-pdb", {{"minAvailable", 2}}))};
  ApiStatus s = CheckEviction(*pods[0], pods, budgets, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, 429);
  EXPECT_EQ(s.error().reason, "TooManyRequests");
  EXPECT_EQ(s.error().message, "Cannot evict pod as it would violate the pod's disruption budget.");
  ASSERT_TRUE(s.error().details.has_value());
  ASSERT_EQ(s.error().details->causes.size(), 1u);
  EXPECT_EQ(s.error().details->causes[0].type, "DisruptionBudget");
  EXPECT_EQ(s.error().details->causes[0].message,
            "The disruption budget web-pdb needs 2 healthy pods and has 2 currently");

  auto all_ready = Web(3);
  EXPECT_TRUE(CheckEviction(*all_ready[0], all_ready, budgets, nullptr).ok());
}

TEST(DisruptionTest, PodsThatAreNotRunningOrAlreadyGoingSkipTheCheck) {
  auto pods = Web(0);
  std::vector<Object> budgets = {Ptr(Budget("b", {{"minAvailable", 3}}))};
  for (const char* phase : {"Pending", "Succeeded", "Failed"}) {
    EXPECT_TRUE(CheckEviction(Pod("p", phase, false), pods, budgets, nullptr).ok()) << phase;
  }
  Json going = Pod("p", "Running", true);
  going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(CheckEviction(going, pods, budgets, nullptr).ok());
  EXPECT_FALSE(CheckEviction(Pod("p", "Running", true), pods, budgets, nullptr).ok());
}

TEST(DisruptionTest, MoreThanOneBudgetIsAnInternalError) {
  auto pods = Web(3);
  std::vector<Object> budgets = {Ptr(Budget("one", {{"minAvailable", 0}})),
                                 Ptr(Budget("two", {{"minAvailable", 0}}))};
  ApiStatus s = CheckEviction(*pods[0], pods, budgets, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, 500);
  EXPECT_EQ(s.error().message,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
            "not support.");
  // A budget of another app does not count.
  std::vector<Object> other = {
      Ptr(Budget("one", {{"minAvailable", 0}})),
      Ptr(Budget("db", {{"minAvailable", 5}, {"selector", {{"matchLabels", {{"app", "db"}}}}}}))};
  EXPECT_TRUE(CheckEviction(*pods[0], pods, other, nullptr).ok());
}

TEST(DisruptionTest, UnreadyPodGoesWhenTheBudgetIsMetOrThePolicySaysAlways) {
  // Three ready of four: minAvailable 3 is met, so the unready one may go.
  auto pods = Web(3, 4);
  std::vector<Object> met = {Ptr(Budget("b", {{"minAvailable", 3}}))};
  EXPECT_TRUE(CheckEviction(*pods[3], pods, met, nullptr).ok());
  EXPECT_FALSE(CheckEviction(*pods[0], pods, met, nullptr).ok());

  // Not met: IfHealthyBudget (the default) keeps it, AlwaysAllow lets it go.
  std::vector<Object> unmet = {Ptr(Budget("b", {{"minAvailable", 4}}))};
  EXPECT_FALSE(CheckEviction(*pods[3], pods, unmet, nullptr).ok());
  std::vector<Object> always = {
      Ptr(Budget("b", {{"minAvailable", 4}, {"unhealthyPodEvictionPolicy", "AlwaysAllow"}}))};
  EXPECT_TRUE(CheckEviction(*pods[3], pods, always, nullptr).ok());
}

TEST(DisruptionTest, FailedStatusComputationBlocksLikeAnUnsyncedBudget) {
  std::vector<Object> pods = {Ptr(OwnedBy(Pod("x", "Running", true), "DaemonSet", "ds"))};
  std::vector<Object> budgets = {Ptr(Budget("b", {{"maxUnavailable", 1}}))};
  ApiStatus s = CheckEviction(*pods[0], pods, budgets, Scales({}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, 429);
  EXPECT_EQ(s.error().details->causes[0].message,
            "The disruption budget b needs 0 healthy pods and has 0 currently");
}

}  // namespace
}  // namespace gpuop::simkube
