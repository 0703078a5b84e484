#include "operator/upgrade.h"

#include <gtest/gtest.h>

#include <set>

namespace gpuop::op::upgrade {
namespace {

constexpr const char* kDs = "nvidia-driver-daemonset";
const TimePoint kNow = TimePoint(std::chrono::seconds(1'800'000'000));

PodInfo DriverPod(const std::string& node, const std::string& hash, bool ready = true) {
  PodInfo p;
  p.ns = "gpu-operator";
  p.name = "driver-" + node;
  p.node = node;
  p.phase = "Running";
  p.ready = ready;
  p.controller_kind = "DaemonSet";
  p.controller_name = kDs;
  p.revision_hash = hash;
  p.config_digest = "digest-" + hash;
  return p;
}

PodInfo GpuPod(const std::string& name, const std::string& owner_kind = "ReplicaSet") {
  PodInfo p;
  p.ns = "ml";
  p.name = name;
  p.phase = "Running";
  p.ready = true;
  p.controller_kind = owner_kind;
  p.controller_name = owner_kind.empty() ? "" : "owner";
  p.gpu = true;
  return p;
}

PodInfo Validator(bool ready) {
  PodInfo p;
  p.ns = "gpu-operator";
  p.name = "validator";
  p.phase = "Running";
  p.ready = ready;
  p.controller_kind = "DaemonSet";
  return p;
}

NodeInput Node(const std::string& name, State state, const std::string& pod_hash = "new") {
  NodeInput n;
  n.name = name;
  if (state != State::kUnknown) n.labels[kStateLabel] = std::string(StateName(state));
  n.driver_pods.push_back(DriverPod(name, pod_hash));
  return n;
}

ClusterInput Cluster(std::vector<NodeInput> nodes) {
  ClusterInput in;
  in.daemonsets[kDs] = {kDs, "new", "digest-new"};
  in.nodes = std::move(nodes);
  in.now = kNow;
  return in;
}

// The action for `node`, or an empty one.
NodeAction For(const UpgradePlan& plan, const std::string& node) {
  for (const NodeAction& a : plan.actions) {
    if (a.node == node) return a;
  }
  return NodeAction{node};
}

std::optional<State> NextState(const ClusterInput& in, const std::string& node) {
  return For(PlanUpgrade(in), node).state;
}

TEST(UpgradeStateTest, NamesRoundTrip) {
  for (State s : {State::kUpgradeDone, State::kUpgradeRequired, State::kCordonRequired,
                  State::kWaitForJobsRequired, State::kPodDeletionRequired, State::kDrainRequired,
                  State::kPodRestartRequired, State::kValidationRequired, State::kUncordonRequired,
                  State::kUpgradeFailed}) {
    EXPECT_EQ(ParseState(StateName(s)), s) << StateName(s);
  }
  EXPECT_EQ(ParseState("node-maintenance-required"), State::kUnknown);
}

TEST(UpgradeIdleTest, StalePodRequiresAnUpgradeAndInSyncOneIsDone) {
  auto in =
      Cluster({Node("stale", State::kUnknown, "old"), Node("fresh", State::kUnknown),
               Node("done-stale", State::kUpgradeDone, "old"), Node("done", State::kUpgradeDone)});
  UpgradePlan plan = PlanUpgrade(in);
  EXPECT_EQ(For(plan, "stale").state, State::kUpgradeRequired);
  EXPECT_EQ(For(plan, "fresh").state, State::kUpgradeDone);
  EXPECT_EQ(For(plan, "done-stale").state, State::kUpgradeRequired);
  EXPECT_TRUE(For(plan, "done").empty());
  // Not cordoned: nothing to remember.
  EXPECT_TRUE(For(plan, "stale").annotations.empty());
  EXPECT_FALSE(For(plan, "stale").unschedulable.has_value());
}

TEST(UpgradeIdleTest, AnAdminCordonIsRecordedBeforeTheUpgradeStarts) {
  NodeInput n = Node("gpu-1", State::kUpgradeDone, "old");
  n.unschedulable = true;
  NodeAction a = For(PlanUpgrade(Cluster({n})), "gpu-1");
  EXPECT_EQ(a.state, State::kUpgradeRequired);
  EXPECT_EQ(a.annotations[kInitialStateAnnotation], "true");
}

TEST(UpgradeIdleTest, RequestedAnnotationForcesAFullUpgrade) {
  NodeInput n = Node("gpu-1", State::kUpgradeDone);
  n.annotations[kRequestedAnnotation] = "true";
  EXPECT_EQ(NextState(Cluster({n}), "gpu-1"), State::kUpgradeRequired);

  // In upgrade-required it is consumed, and the restart-only shortcut is off.
  n.labels[kStateLabel] = "upgrade-required";
  NodeAction a = For(PlanUpgrade(Cluster({n})), "gpu-1");
  EXPECT_EQ(a.state, State::kCordonRequired);
  ASSERT_TRUE(a.annotations.count(kRequestedAnnotation));
  EXPECT_FALSE(a.annotations[kRequestedAnnotation].has_value());
}

TEST(UpgradeRequiredTest, SkipLabelKeepsTheNodeWaiting) {
  NodeInput n = Node("gpu-1", State::kUpgradeRequired, "old");
  n.labels[kSkipLabel] = "true";
  EXPECT_TRUE(For(PlanUpgrade(Cluster({n})), "gpu-1").empty());
  n.labels[kSkipLabel] = "false";
  EXPECT_EQ(NextState(Cluster({n}), "gpu-1"), State::kCordonRequired);
}

TEST(UpgradeRequiredTest, UnchangedConfigOnlyRestartsTheDriverPod) {
  NodeInput n = Node("gpu-1", State::kUpgradeRequired, "old");
  n.driver_pods[0].config_digest = "digest-new";  // what the template carries
  NodeAction a = For(PlanUpgrade(Cluster({n})), "gpu-1");
  EXPECT_EQ(a.state, State::kPodRestartRequired);
  EXPECT_EQ(a.unschedulable, true);
  EXPECT_TRUE(a.evict.empty());
}

TEST(UpgradeThrottleTest, MaxParallelOneStartsOneNodeAtATime) {
  auto in =
      Cluster({Node("a", State::kUpgradeRequired, "old"), Node("b", State::kUpgradeRequired, "old"),
               Node("c", State::kUpgradeRequired, "old")});
  in.policy.max_unavailable.reset();
  UpgradePlan plan = PlanUpgrade(in);
  EXPECT_EQ(For(plan, "a").state, State::kCordonRequired);
  EXPECT_FALSE(For(plan, "b").state.has_value());
  EXPECT_FALSE(For(plan, "c").state.has_value());
  EXPECT_EQ(plan.counts.pending, 3);
  EXPECT_EQ(plan.counts.available, 1);

  // While one is in progress, none other starts.
  in.nodes[0].labels[kStateLabel] = "validation-required";
  in.nodes[0].unschedulable = true;
  plan = PlanUpgrade(in);
  EXPECT_FALSE(For(plan, "b").state.has_value());
  EXPECT_EQ(plan.counts.in_progress, 1);
  EXPECT_EQ(plan.counts.available, 0);

  // Done: the next one starts.
  in.nodes[0].labels[kStateLabel] = "upgrade-done";
  in.nodes[0].unschedulable = false;
  EXPECT_EQ(NextState(in, "b"), State::kCordonRequired);
}

TEST(UpgradeThrottleTest, AFailedNodeHaltsTheRollout) {
  auto in = Cluster({Node("a", State::kUpgradeFailed), Node("b", State::kUpgradeRequired, "old")});
  in.nodes[0].driver_pods[0].ready = false;
  in.nodes[0].unschedulable = true;
  in.policy.max_unavailable.reset();
  UpgradePlan plan = PlanUpgrade(in);
  EXPECT_TRUE(plan.actions.empty());
  EXPECT_EQ(plan.counts.failed, 1);
  EXPECT_EQ(plan.counts.in_progress, 0);
  // With room for two, the other goes on.
  in.policy.max_parallel = 2;
  EXPECT_EQ(NextState(in, "b"), State::kCordonRequired);
}

TEST(UpgradeThrottleTest, MaxUnavailableCountsCordonedAndNotReadyNodes) {
  std::vector<NodeInput> nodes;
  for (const char* name : {"a", "b", "c", "d"}) {
    nodes.push_back(Node(name, State::kUpgradeRequired, "old"));
  }
  nodes[3].ready = false;  // "d": NotReady, uses one of the two
  auto in = Cluster(nodes);
  in.policy.max_parallel = 0;  // unlimited
  in.policy.max_unavailable = Json("50%");
  UpgradePlan plan = PlanUpgrade(in);
  EXPECT_EQ(For(plan, "a").state, State::kCordonRequired);
  EXPECT_FALSE(For(plan, "b").state.has_value());
  EXPECT_FALSE(For(plan, "d").state.has_value());  // NotReady nodes never start

  // An already-cordoned node costs no availability: it starts too.
  in.nodes[2].unschedulable = true;
  in.nodes[3].ready = true;
  plan = PlanUpgrade(in);
  EXPECT_EQ(For(plan, "a").state, State::kCordonRequired);
  EXPECT_FALSE(For(plan, "b").state.has_value());
  EXPECT_EQ(For(plan, "c").state, State::kCordonRequired);
  EXPECT_EQ(For(plan, "c").annotations[kInitialStateAnnotation], "true");
}

TEST(UpgradeThrottleTest, ACordonedNodeStillWaitsForMaxParallel) {
  auto in =
      Cluster({Node("a", State::kWaitForJobsRequired), Node("b", State::kUpgradeRequired, "old")});
  in.nodes[0].unschedulable = true;
  in.nodes[1].unschedulable = true;
  EXPECT_FALSE(NextState(in, "b").has_value());
}

TEST(UpgradeStepTest, CordonThenWaitForJobs) {
  NodeAction a = For(PlanUpgrade(Cluster({Node("n", State::kCordonRequired, "old")})), "n");
  EXPECT_EQ(a.state, State::kWaitForJobsRequired);
  EXPECT_EQ(a.unschedulable, true);
  EXPECT_EQ(NextState(Cluster({Node("n", State::kWaitForJobsRequired, "old")}), "n"),
            State::kPodDeletionRequired);
}

TEST(UpgradeStepTest, WaitForJobsWaitsUntilTheJobsEndOrTheTimeout) {
  NodeInput n = Node("n", State::kWaitForJobsRequired, "old");
  n.pods.push_back(GpuPod("training", "Job"));
  auto in = Cluster({n});
  in.policy.wait_for_completion.pod_selector = "app=training";
  in.policy.wait_for_completion.timeout_seconds = 60;
  EXPECT_EQ(PodsToList(State::kWaitForJobsRequired, in.policy), PodListing::kWaitForJobs);
  UpgradePlan plan = PlanUpgrade(in);
  NodeAction a = For(plan, "n");
  EXPECT_FALSE(a.state.has_value());
  EXPECT_EQ(a.annotations[kWaitForJobsStartAnnotation], UnixSeconds(kNow));
  ASSERT_TRUE(plan.requeue_at.has_value());
  EXPECT_LE(*plan.requeue_at, kNow + std::chrono::seconds(60));

  in.nodes[0].annotations[kWaitForJobsStartAnnotation] =
      UnixSeconds(kNow - std::chrono::seconds(61));
  a = For(PlanUpgrade(in), "n");
  EXPECT_EQ(a.state, State::kPodDeletionRequired);
  EXPECT_FALSE(a.annotations[kWaitForJobsStartAnnotation].has_value());

  in.nodes[0].annotations.clear();
  in.nodes[0].pods[0].phase = "Succeeded";
  EXPECT_EQ(NextState(in, "n"), State::kPodDeletionRequired);
}

TEST(UpgradeStepTest, PodDeletionEvictsGpuPodsAndMovesOnWhenTheyAreGone) {
  NodeInput n = Node("n", State::kPodDeletionRequired, "old");
  n.pods.push_back(GpuPod("train-1"));
  PodInfo cpu = GpuPod("web");
  cpu.gpu = false;
  n.pods.push_back(cpu);
  auto in = Cluster({n});
  UpgradePlan plan = PlanUpgrade(in);
  NodeAction a = For(plan, "n");
  EXPECT_FALSE(a.state.has_value());
  EXPECT_EQ(a.evict, (std::vector<PodRef>{{"ml", "train-1"}}));
  EXPECT_EQ(a.on_evict_error, State::kUpgradeFailed);
  EXPECT_TRUE(plan.requeue_at.has_value());

  // Evicted and terminating: wait, without evicting again.
  in.nodes[0].pods[0].terminating = true;
  in.nodes[0].annotations[kPodDeletionStartAnnotation] = UnixSeconds(kNow);
  a = For(PlanUpgrade(in), "n");
  EXPECT_FALSE(a.state.has_value());
  EXPECT_TRUE(a.evict.empty());

  in.nodes[0].pods.erase(in.nodes[0].pods.begin());
  a = For(PlanUpgrade(in), "n");
  EXPECT_EQ(a.state, State::kPodRestartRequired);
  EXPECT_FALSE(a.annotations[kPodDeletionStartAnnotation].has_value());
}

TEST(UpgradeStepTest, PodDeletionFailsOrDrainsWhenAPodCannotGo) {
  NodeInput n = Node("n", State::kPodDeletionRequired, "old");
  n.pods.push_back(GpuPod("bare", ""));  // no controller
  auto in = Cluster({n});
  NodeAction a = For(PlanUpgrade(in), "n");
  EXPECT_EQ(a.state, State::kUpgradeFailed);
  EXPECT_TRUE(a.evict.empty());
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_TRUE(a.events[0].warning);
  EXPECT_NE(a.events[0].message.find("podDeletion.force=true"), std::string::npos);

  in.policy.drain.enable = true;
  EXPECT_EQ(NextState(in, "n"), State::kDrainRequired);
  in.policy.pod_deletion.force = true;
  EXPECT_FALSE(NextState(in, "n").has_value());  // now evictable
}

TEST(UpgradeStepTest, PodDeletionTimesOutOnAPodDisruptionBudget) {
  NodeInput n = Node("n", State::kPodDeletionRequired, "old");
  n.pods.push_back(GpuPod("guarded"));
  n.annotations[kPodDeletionStartAnnotation] = UnixSeconds(kNow - std::chrono::seconds(301));
  NodeAction a = For(PlanUpgrade(Cluster({n})), "n");
  EXPECT_EQ(a.state, State::kUpgradeFailed);
  EXPECT_NE(a.events.at(0).message.find("PodDisruptionBudget"), std::string::npos);
}

TEST(UpgradeStepTest, DrainEvictsAllButDaemonSetPods) {
  NodeInput n = Node("n", State::kDrainRequired, "old");
  n.pods.push_back(GpuPod("web"));
  n.pods.push_back(GpuPod("agent", "DaemonSet"));
  auto in = Cluster({n});
  EXPECT_EQ(NextState(in, "n"), State::kPodRestartRequired);  // drain off
  in.policy.drain.enable = true;
  in.policy.drain.pod_selector = "team=ml";
  EXPECT_EQ(PodListSelector(PodsToList(State::kDrainRequired, in.policy), in.policy),
            "team=ml,nvidia.com/gpu-driver-upgrade-drain.skip!=true");
  NodeAction a = For(PlanUpgrade(in), "n");
  EXPECT_EQ(a.evict, (std::vector<PodRef>{{"ml", "web"}}));
  in.nodes[0].pods.erase(in.nodes[0].pods.begin());
  EXPECT_EQ(NextState(in, "n"), State::kPodRestartRequired);
}

TEST(UpgradeStepTest, PodRestartDeletesTheStalePodAndWaitsForTheNewOne) {
  auto in = Cluster({Node("n", State::kPodRestartRequired, "old")});
  NodeAction a = For(PlanUpgrade(in), "n");
  ASSERT_TRUE(a.delete_driver_pod.has_value());
  EXPECT_EQ(a.delete_driver_pod->name, "driver-n");
  EXPECT_FALSE(a.state.has_value());

  in.nodes[0].driver_pods[0].terminating = true;
  EXPECT_TRUE(For(PlanUpgrade(in), "n").empty());

  in.nodes[0].driver_pods = {DriverPod("n", "new", /*ready=*/false)};
  EXPECT_TRUE(For(PlanUpgrade(in), "n").empty());
  in.nodes[0].driver_pods[0].ready = true;
  EXPECT_EQ(NextState(in, "n"), State::kValidationRequired);
}

// The old driver container unloads on SIGTERM only once nothing holds the
// driver: the operands leave before its pod is deleted.
TEST(UpgradeStepTest, PodRestartPausesTheOperandsAndDeletesTheDriverPodOnceTheyLeft) {
  EXPECT_EQ(PodsToList(State::kPodRestartRequired, UpgradePolicy{}), PodListing::kOperands);
  NodeInput n = Node("n", State::kPodRestartRequired, "old");
  n.labels["nvidia.com/gpu.deploy.device-plugin"] = "true";
  n.labels["nvidia.com/gpu.deploy.dra-driver"] = "true";
  n.labels["nvidia.com/gpu.deploy.driver"] = "true";
  n.labels["nvidia.com/gpu.deploy.dcgm-exporter"] = "false";
  PodInfo plugin = Validator(true);
  plugin.name = "device-plugin";
  n.pods = {plugin};
  auto in = Cluster({n});

  UpgradePlan plan = PlanUpgrade(in);
  NodeAction a = For(plan, "n");
  EXPECT_EQ(a.labels, (std::map<std::string, std::string>{
                          {"nvidia.com/gpu.deploy.device-plugin", "paused-for-driver-upgrade"},
                          {"nvidia.com/gpu.deploy.dra-driver", "paused-for-driver-upgrade"}}));
  EXPECT_EQ(a.annotations.at(kOperandsPausedAnnotation), UnixSeconds(kNow));
  EXPECT_FALSE(a.delete_driver_pod.has_value());
  EXPECT_FALSE(a.state.has_value());
  ASSERT_TRUE(plan.requeue_at.has_value());
  EXPECT_EQ(*plan.requeue_at, kNow + kPodPollInterval);

  // Paused, and the plugin still terminating: nothing to do yet.
  for (const auto& [k, v] : a.labels) in.nodes[0].labels[k] = v;
  in.nodes[0].annotations[kOperandsPausedAnnotation] = UnixSeconds(kNow);
  in.now = kNow + std::chrono::seconds(5);
  EXPECT_TRUE(For(PlanUpgrade(in), "n").empty());

  // Gone: the driver pod goes, and the operator's claim on the pause with it
  // (the new pod's driver manager restores the labels).
  in.nodes[0].pods.clear();
  a = For(PlanUpgrade(in), "n");
  ASSERT_TRUE(a.delete_driver_pod.has_value());
  EXPECT_TRUE(a.labels.empty());
  EXPECT_EQ(a.annotations.at(kOperandsPausedAnnotation), std::nullopt);

  // An operand that does not leave holds the driver pod for kOperandsTimeout
  // at most; then it goes anyway, with a warning that names the pod.
  in.nodes[0].pods = {plugin};
  in.now = kNow + kOperandsTimeout - std::chrono::seconds(1);
  EXPECT_FALSE(For(PlanUpgrade(in), "n").delete_driver_pod.has_value());
  in.now = kNow + kOperandsTimeout;
  a = For(PlanUpgrade(in), "n");
  ASSERT_TRUE(a.delete_driver_pod.has_value());
  ASSERT_FALSE(a.events.empty());
  EXPECT_TRUE(a.events[0].warning);
  EXPECT_NE(a.events[0].message.find("gpu-operator/device-plugin"), std::string::npos);
}

// A restart with the same configuration keeps the modules loaded (the driver
// container's fast path): nothing needs the operands to go.
TEST(UpgradeStepTest, ARestartWithTheSameConfigurationLeavesTheOperandsAlone) {
  NodeInput n = Node("n", State::kPodRestartRequired, "old");
  n.driver_pods[0].config_digest = "digest-new";
  n.labels["nvidia.com/gpu.deploy.device-plugin"] = "true";
  PodInfo plugin = Validator(true);
  n.pods = {plugin};
  NodeAction a = For(PlanUpgrade(Cluster({n})), "n");
  EXPECT_TRUE(a.labels.empty());
  EXPECT_TRUE(a.delete_driver_pod.has_value());
}

TEST(UpgradeStepTest, AnOrphanDriverPodIsReplaced) {
  NodeInput n = Node("n", State::kPodRestartRequired);
  n.driver_pods[0].controller_kind = "";
  EXPECT_TRUE(For(PlanUpgrade(Cluster({n})), "n").delete_driver_pod.has_value());
}

TEST(UpgradeStepTest, ACrashLoopingDriverFailsTheUpgrade) {
  NodeInput n = Node("n", State::kPodRestartRequired);
  n.driver_pods[0].ready = false;
  n.driver_pods[0].restarts_not_ready = 11;
  NodeAction a = For(PlanUpgrade(Cluster({n})), "n");
  EXPECT_EQ(a.state, State::kUpgradeFailed);
  EXPECT_NE(a.events.at(0).message.find("11 restarts"), std::string::npos);
}

TEST(UpgradeStepTest, ValidationGatesTheUncordon) {
  NodeInput n = Node("n", State::kValidationRequired);
  n.unschedulable = true;
  n.validator_pods.push_back(Validator(false));
  auto in = Cluster({n});
  UpgradePlan plan = PlanUpgrade(in);
  NodeAction a = For(plan, "n");
  EXPECT_FALSE(a.state.has_value());
  EXPECT_EQ(a.annotations[kValidationStartAnnotation], UnixSeconds(kNow));
  EXPECT_EQ(plan.requeue_at, kNow + kValidationTimeout);

  in.nodes[0].annotations[kValidationStartAnnotation] = UnixSeconds(kNow - kValidationTimeout);
  a = For(PlanUpgrade(in), "n");
  EXPECT_EQ(a.state, State::kUpgradeFailed);
  EXPECT_NE(a.events.at(0).message.find("validator pod(s) gpu-operator/validator not Ready"),
            std::string::npos);

  in.nodes[0].validator_pods[0].ready = true;
  a = For(PlanUpgrade(in), "n");
  EXPECT_EQ(a.state, State::kUncordonRequired);
  EXPECT_FALSE(a.annotations[kValidationStartAnnotation].has_value());
}

TEST(UpgradeStepTest, NoValidatorPodIsNoValidation) {
  EXPECT_FALSE(NextState(Cluster({Node("n", State::kValidationRequired)}), "n").has_value());
}

TEST(UpgradeStepTest, AnAdminCordonOutlivesTheUpgrade) {
  NodeInput n = Node("n", State::kValidationRequired);
  n.unschedulable = true;
  n.annotations[kInitialStateAnnotation] = "true";
  n.validator_pods.push_back(Validator(true));
  NodeAction a = For(PlanUpgrade(Cluster({n})), "n");
  EXPECT_EQ(a.state, State::kUpgradeDone);
  EXPECT_FALSE(a.unschedulable.has_value());
  EXPECT_FALSE(a.annotations[kInitialStateAnnotation].has_value());

  n.labels[kStateLabel] = "uncordon-required";
  a = For(PlanUpgrade(Cluster({n})), "n");
  EXPECT_EQ(a.state, State::kUpgradeDone);
  EXPECT_FALSE(a.unschedulable.has_value());

  n.annotations.clear();
  a = For(PlanUpgrade(Cluster({n})), "n");
  EXPECT_EQ(a.state, State::kUpgradeDone);
  EXPECT_EQ(a.unschedulable, false);
}

TEST(UpgradeStepTest, FailedStaysUntilTheDriverRecovers) {
  NodeInput n = Node("n", State::kUpgradeFailed);
  n.unschedulable = true;
  n.driver_pods[0].ready = false;
  EXPECT_TRUE(For(PlanUpgrade(Cluster({n})), "n").empty());
  n.driver_pods[0].ready = true;
  EXPECT_EQ(NextState(Cluster({n}), "n"), State::kUncordonRequired);
}

TEST(UpgradePolicyTest, ParsesNvidiasFieldsAndNamesTheBadOne) {
  auto p = ParseUpgradePolicy(Json::parse(R"({
    "autoUpgrade": true, "maxParallelUpgrades": 2, "maxUnavailable": "10%",
    "podDeletion": {"force": true, "timeoutSeconds": 30},
    "waitForCompletion": {"podSelector": "app=train", "timeoutSeconds": 600},
    "drain": {"enable": true, "podSelector": "team=ml"}})"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->auto_upgrade);
  EXPECT_EQ(p->max_parallel, 2);
  EXPECT_TRUE(p->pod_deletion.force);
  EXPECT_EQ(p->pod_deletion.timeout_seconds, 30);
  EXPECT_EQ(p->wait_for_completion.pod_selector, "app=train");
  EXPECT_EQ(p->drain.timeout_seconds, 300);
  EXPECT_EQ(MaxUnavailable(*p, 15), 2);  // rounded up

  auto defaults = ParseUpgradePolicy(nullptr);
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->auto_upgrade);
  EXPECT_EQ(defaults->max_parallel, 1);
  EXPECT_EQ(MaxUnavailable(*defaults, 4), 1);
  auto unset = ParseUpgradePolicy(Json::parse(R"({"maxUnavailable": null})"));
  EXPECT_EQ(MaxUnavailable(*unset, 7), 7);
  EXPECT_EQ(MaxUnavailable(*ParseUpgradePolicy(Json::parse(R"({"maxUnavailable": 3})")), 7), 3);

  auto bad = ParseUpgradePolicy(Json::parse(R"({"maxUnavailable": "many"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spec.driver.upgradePolicy.maxUnavailable"),
            std::string::npos);
  bad = ParseUpgradePolicy(Json::parse(R"({"podDeletion": {"timeoutSeconds": -1}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("podDeletion.timeoutSeconds"), std::string::npos);
}

TEST(UpgradeReadTest, RevisionHashDigestAndPodView) {
  Json ds = {{"metadata", {{"name", kDs}, {"uid", "u1"}}}};
  auto rev = [](const std::string& name, int64_t n, const std::string& owner) {
    return Json{{"metadata",
                 {{"name", name},
                  {"ownerReferences", Json::array({{{"uid", owner}, {"controller", true}}})}}},
                {"revision", n}};
  };
  EXPECT_EQ(CurrentRevisionHash(ds, {rev("nvidia-driver-daemonset-aaa", 1, "u1"),
                                     rev("nvidia-driver-daemonset-bbb", 3, "u1"),
                                     rev("nvidia-driver-daemonset-ccc", 9, "other"),
                                     rev("nvidia-driver-daemonset-ubuntu22.04-ddd", 5, "u2")}),
            "bbb");

  Json pod = Json::parse(R"({
    "metadata": {"name": "train", "namespace": "ml",
                 "ownerReferences": [{"kind": "Job", "name": "t", "controller": true}],
                 "labels": {"controller-revision-hash": "h1"}},
    "spec": {"nodeName": "gpu-1",
             "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
             "containers": [{"name": "c", "env": [{"name": "DRIVER_CONFIG_DIGEST", "value": "d"}],
                             "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}],
             "volumes": [{"name": "scratch", "emptyDir": {}}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
               "containerStatuses": [{"name": "c", "ready": false, "restartCount": 4}]}})");
  PodInfo p = ReadPod(pod);
  EXPECT_EQ(p.node, "gpu-1");
  EXPECT_EQ(p.controller_kind, "Job");
  EXPECT_TRUE(p.gpu);
  EXPECT_TRUE(p.empty_dir);
  EXPECT_FALSE(p.ready);
  EXPECT_EQ(p.restarts_not_ready, 4);
  EXPECT_EQ(p.revision_hash, "h1");
  EXPECT_EQ(p.config_digest, "d");
  // An init container's GPU request alone does not make a GPU pod.
  pod["spec"]["containers"][0]["resources"] = Json::object();
  EXPECT_FALSE(ReadPod(pod).gpu);
}

TEST(ReadPodTest, APodUsingAClaimGpuNvidiaComAllocatedIsAGpuPod) {
  Json named = Json::parse(R"({
    "metadata": {"name": "named", "namespace": "ml"},
    "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
             "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}})");
  Json from_template = Json::parse(R"({
    "metadata": {"name": "tmpl", "namespace": "ml"},
    "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
             "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]},
    "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "tmpl-gpu-7xk"}]}})");
  // "ns/name" of the claims gpu.nvidia.com allocated; ml/nic is another driver's.
  const std::set<std::string> gpu_claims = {"ml/shared-gpu", "ml/tmpl-gpu-7xk"};
  EXPECT_TRUE(ReadPod(named, gpu_claims).gpu);
  EXPECT_TRUE(ReadPod(from_template, gpu_claims).gpu);
  named["spec"]["resourceClaims"][0]["resourceClaimName"] = "nic";
  EXPECT_FALSE(ReadPod(named, gpu_claims).gpu);
  // Without resource.k8s.io (no claims), as before.
  EXPECT_FALSE(ReadPod(from_template, {}).gpu);
  EXPECT_FALSE(ReadPod(from_template).gpu);
}

}  // namespace
}  // namespace gpuop::op::upgrade
