#include "operator/status.h"

#include <gtest/gtest.h>

namespace gpuop::op {
namespace {

using Json = nlohmann::json;

Json Ds(const char* name, int64_t generation, Json status) {
  return {{"metadata", {{"name", name}, {"generation", generation}}}, {"status", status}};
}

Json Rolled(int64_t n, int64_t gen) {
  return {{"desiredNumberScheduled", n},
          {"numberAvailable", n},
          {"updatedNumberScheduled", n},
          {"numberUnavailable", 0},
          {"observedGeneration", gen}};
}

TEST(StatusTest, ComponentReadiness) {
  EXPECT_EQ(EvaluateComponent(Component::kDevicePlugin, false, {}).state, "disabled");
  auto missing = EvaluateComponent(Component::kDevicePlugin, true, {});
  EXPECT_EQ(missing.state, "notReady");
  EXPECT_NE(missing.message.find("nvidia-device-plugin-daemonset"), std::string::npos);
  // Not yet seen by the DaemonSet controller: not ready, even with no pods wanted.
  EXPECT_EQ(EvaluateComponent(Component::kDevicePlugin, true, {Ds("dp", 1, Json::object())}).state,
            "notReady");
  EXPECT_EQ(EvaluateComponent(Component::kDevicePlugin, true, {Ds("dp", 1, Rolled(0, 1))}).state,
            "ready");
  EXPECT_EQ(EvaluateComponent(Component::kDevicePlugin, true, {Ds("dp", 2, Rolled(3, 2))}).state,
            "ready");
  Json half = Rolled(4, 2);
  half["numberAvailable"] = 2;
  half["numberUnavailable"] = 2;
  auto s = EvaluateComponent(Component::kDevicePlugin, true, {Ds("dp", 2, half)});
  EXPECT_EQ(s.state, "notReady");
  EXPECT_EQ(s.message, "dp: 2 of 4 pods available");
  Json old_template = Rolled(4, 2);
  old_template["updatedNumberScheduled"] = 1;
  EXPECT_EQ(EvaluateComponent(Component::kDevicePlugin, true, {Ds("dp", 2, old_template)}).state,
            "notReady");
  // One driver DaemonSet per OS: all must be ready, counts add up.
  auto d = EvaluateComponent(Component::kDriver, true,
                             {Ds("drv-a", 1, Rolled(2, 1)), Ds("drv-b", 1, Rolled(3, 1))});
  EXPECT_EQ(d.state, "ready");
  EXPECT_EQ(d.desired, 5);
  EXPECT_EQ(d.daemonset, "drv-a,drv-b");
  // Listed in another order (a restarted informer): the same status.
  auto reversed = EvaluateComponent(Component::kDriver, true,
                                    {Ds("drv-b", 1, Rolled(3, 1)), Ds("drv-a", 1, Rolled(2, 1))});
  EXPECT_EQ(reversed.daemonset, "drv-a,drv-b");
}

StatusInput Input() {
  StatusInput in;
  in.gpu_nodes = 2;
  in.nfd_labels_seen = true;
  in.generation = 3;
  in.namespace_ = "gpu-operator";
  ComponentState ready;
  ready.component = Component::kDevicePlugin;
  ready.state = "ready";
  in.components.push_back(ready);
  return in;
}

std::string ConditionField(const Json& status, const char* type, const char* field) {
  for (const Json& c : status["conditions"]) {
    if (c["type"] == type) return c.value(field, "");
  }
  return "";
}

TEST(StatusTest, OverallStateAndReasons) {
  Json s = BuildStatus(Input(), Json::object(), "2026-01-01T00:00:00Z");
  EXPECT_EQ(s["state"], "ready");
  EXPECT_EQ(s["observedGeneration"], 3);
  EXPECT_EQ(s["gpuNodes"], 2);
  EXPECT_EQ(ConditionField(s, "Ready", "reason"), "Reconciled");
  EXPECT_EQ(ConditionField(s, "Error", "status"), "False");
  EXPECT_FALSE(ConditionField(s, "Error", "message").empty());  // required by the CRD

  StatusInput in = Input();
  in.components[0].state = "notReady";
  Json nr = BuildStatus(in, s, "2026-01-01T00:01:00Z");
  EXPECT_EQ(nr["state"], "notReady");
  EXPECT_EQ(ConditionField(nr, "Ready", "reason"), "OperandNotReady");
  EXPECT_EQ(ConditionField(nr, "Ready", "lastTransitionTime"), "2026-01-01T00:01:00Z");
  // The Error condition did not change status: its transition time stays.
  EXPECT_EQ(ConditionField(nr, "Error", "lastTransitionTime"), "2026-01-01T00:00:00Z");

  in = Input();
  in.reconcile_error = InvalidArgument("spec.mig.strategy \"x\": must be none, single or mixed");
  Json err = BuildStatus(in, s, "2026-01-01T00:02:00Z");
  EXPECT_EQ(err["state"], "notReady");
  EXPECT_EQ(ConditionField(err, "Error", "status"), "True");
  EXPECT_EQ(ConditionField(err, "Error", "reason"), "ReconcileFailed");
  EXPECT_NE(ConditionField(err, "Error", "message").find("spec.mig.strategy"), std::string::npos);

  in = Input();
  in.gpu_nodes = 0;
  EXPECT_EQ(ConditionField(BuildStatus(in, {}, "t"), "Ready", "reason"), "NoGPUNodes");
  in.nfd_labels_seen = false;
  EXPECT_EQ(ConditionField(BuildStatus(in, {}, "t"), "Ready", "reason"), "NFDLabelsMissing");
}

Json ValidatorPod(const char* node, Json inits, bool ready = false) {
  return {{"metadata", {{"name", std::string("nvidia-operator-validator-") + node}}},
          {"spec", {{"nodeName", node}}},
          {"status",
           {{"phase", ready ? "Running" : "Pending"},
            {"conditions",
             Json::array({Json{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})},
            {"initContainerStatuses", inits}}}};
}

Json Init(const char* name, Json state, Json last = Json::object()) {
  return {{"name", name}, {"state", state}, {"lastState", last}};
}

TEST(StatusTest, ValidationBlockersNameTheNodeAndTheCheck) {
  Json ok = {{"terminated", {{"exitCode", 0}}}};
  std::vector<Json> pods = {
      ValidatorPod("h100-1", Json::array({Init("driver-validation", ok)}), /*ready=*/true),
      ValidatorPod(
          "h100-2",
          Json::array({Init("driver-validation", ok), Init("toolkit-validation", ok),
                       Init("cuda-validation", {{"waiting", {{"reason", "CrashLoopBackOff"}}}},
                            {{"terminated",
                              {{"exitCode", 1},
                               {"message",
                                "ts=... level=info msg=x\ngpuop validator: cuda validation failed: "
                                "driver 535.129.03 supports CUDA 12.2\n"}}}})})),
      ValidatorPod("h100-3", Json::array({Init("driver-validation", {{"running", Json::object()}}),
                                          Init("toolkit-validation",
                                               {{"waiting", {{"reason", "PodInitializing"}}}})}))};
  // Validated once, then its readiness probe (the driver check) fails.
  Json later = ValidatorPod("h100-4", Json::array({Init("driver-validation", ok)}));
  later["metadata"]["namespace"] = "gpu-operator";
  later["status"]["containerStatuses"] =
      Json::array({{{"name", "nvidia-operator-validator"},
                    {"ready", false},
                    {"started", true},
                    {"state", {{"running", {{"startedAt", "2026-12-03T00:00:00Z"}}}}}}});
  pods.push_back(later);
  std::vector<kube::ObjectPtr> ptrs;
  for (const Json& p : pods) ptrs.push_back(std::make_shared<const Json>(p));
  auto b = ValidationBlockers(ptrs);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], "node h100-2: cuda validation failed: driver 535.129.03 supports CUDA 12.2");
  EXPECT_EQ(b[1], "node h100-3: waiting on driver validation");
  EXPECT_EQ(b[2],
            "node h100-4: driver validation failing (the validator's readiness probe: kubectl "
            "describe pod nvidia-operator-validator-h100-4 -n gpu-operator)");

  StatusInput in;
  in.gpu_nodes = 3;
  in.nfd_labels_seen = true;
  ComponentState v;
  v.component = Component::kOperatorValidator;
  v.state = "notReady";
  v.message = "nvidia-operator-validator: 1 of 3 pods available";
  in.components = {v};
  in.validation_blockers = {b[0]};
  Json st = BuildStatus(in, Json::object(), "2026-12-03T00:00:00Z");
  EXPECT_EQ(st["state"], "notReady");
  const std::string msg = st["conditions"][0]["message"];
  EXPECT_NE(msg.find("node h100-2: cuda validation failed"), std::string::npos) << msg;
  EXPECT_NE(st["components"][0]["message"].get<std::string>().find("node h100-2"),
            std::string::npos);
}

TEST(StatusTest, UnchangedStatusIsNotAChange) {
  Json a = BuildStatus(Input(), Json::object(), "2026-01-01T00:00:00Z");
  Json b = BuildStatus(Input(), a, "2026-01-01T05:00:00Z");
  EXPECT_FALSE(StatusChanged(a, b));  // no write on an idle cluster
  StatusInput in = Input();
  in.gpu_nodes = 3;
  EXPECT_TRUE(StatusChanged(a, BuildStatus(in, a, "2026-01-01T05:00:00Z")));
}

TEST(StatusTest, IgnoredPolicyNamesTheActiveOne) {
  Json s = IgnoredStatus("cluster-policy", 1, Json::object(), "t");
  EXPECT_EQ(s["state"], "ignored");
  EXPECT_NE(ConditionField(s, "Ready", "message").find("cluster-policy"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::op
