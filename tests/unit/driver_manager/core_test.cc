#include "driver_manager/core.h"

#include <gtest/gtest.h>

#include <set>

#include "driver_manager/options.h"
#include "kube/gpu_pods.h"
#include "tests/testing/pod_object.h"

namespace gpuop::driver_manager {
namespace {

using testing::PodObject;

Json WithResources(Json resources) {
  return Json{{"containers", Json::array({{{"name", "c"}, {"resources", std::move(resources)}}})}};
}

// A pod whose claim `claim` is named directly, or made from a template and
// named in its status, as the resource claim controller records it.
Json ClaimPod(const std::string& name, const std::string& claim, bool from_template) {
  Json spec = WithResources(Json::object());
  Json status = Json::object();
  if (from_template) {
    spec["resourceClaims"] = Json::array({{{"name", "gpu"}, {"resourceClaimTemplateName", "t"}}});
    status["resourceClaimStatuses"] =
        Json::array({{{"name", "other"}, {"resourceClaimName", "unrelated"}},
                     {{"name", "gpu"}, {"resourceClaimName", claim}}});
  } else {
    spec["resourceClaims"] = Json::array({{{"name", "gpu"}, {"resourceClaimName", claim}}});
  }
  Json pod = PodObject("ml", name, spec);
  pod["status"] = status;
  return pod;
}

TEST(IsGpuPodTest, APodUsingAClaimGpuNvidiaComAllocatedIsOne) {
  const std::set<std::string> gpu_claims = {"ml/gpu-claim", "ml/pod-b-gpu-x7k"};
  EXPECT_TRUE(kube::IsGpuPod(ClaimPod("a", "gpu-claim", false), gpu_claims));
  EXPECT_TRUE(kube::IsGpuPod(ClaimPod("b", "pod-b-gpu-x7k", true), gpu_claims));
  // Another driver's claim, a claim of the same name in another namespace,
  // a template whose claim is not made yet, a cluster without DRA: not GPU pods.
  EXPECT_FALSE(kube::IsGpuPod(ClaimPod("c", "nic-claim", false), gpu_claims));
  Json elsewhere = ClaimPod("d", "gpu-claim", false);
  elsewhere["metadata"]["namespace"] = "web";
  EXPECT_FALSE(kube::IsGpuPod(elsewhere, gpu_claims));
  Json unmade = ClaimPod("e", "x", true);
  unmade["status"] = Json::object();
  EXPECT_FALSE(kube::IsGpuPod(unmade, gpu_claims));
  EXPECT_FALSE(kube::IsGpuPod(ClaimPod("a", "gpu-claim", false), {}));

  std::vector<Json> pods = {ClaimPod("a", "gpu-claim", false), ClaimPod("c", "nic-claim", false),
                            PodObject("ml", "cpu", WithResources(Json::object()))};
  EvictionPlan plan = PlanEviction(pods, {}, /*only_gpu_pods=*/true, gpu_claims);
  EXPECT_TRUE(plan.refused.empty());
  EXPECT_EQ(PodList(plan.evict), "ml/a");
  EXPECT_TRUE(PlanEviction(pods, {}, /*only_gpu_pods=*/true).evict.empty());
}

TEST(LivePodsWithClaimsTest, UnfinishedPodsUsingAGpuClaim) {
  const std::set<std::string> gpu_claims = {"ml/gpu-claim"};
  Json done = ClaimPod("done", "gpu-claim", false);
  done["status"]["phase"] = "Succeeded";
  Json running = ClaimPod("running", "gpu-claim", false);
  running["status"]["phase"] = "Running";
  std::vector<Json> pods = {done, running, ClaimPod("nic", "nic-claim", false)};
  EXPECT_EQ(PodList(LivePodsWithClaims(pods, gpu_claims)), "ml/running");
  EXPECT_TRUE(LivePodsWithClaims(pods, {}).empty());
}

TEST(PlanEvictionTest, AllOrNothingWithTheReasonAndTheFlagThatAllowsIt) {
  Json gpu = WithResources({{"limits", {{"nvidia.com/gpu", "1"}}}});
  Json cpu = WithResources(Json::object());
  Json gpu_scratch = gpu;
  gpu_scratch["volumes"] = Json::array({{{"name", "scratch"}, {"emptyDir", Json::object()}}});
  std::vector<Json> pods = {PodObject("ml", "train", gpu), PodObject("ml", "bare", gpu, {}, ""),
                            PodObject("ml", "scratch", gpu_scratch), PodObject("web", "nginx", cpu),
                            PodObject("ml", "ds-gpu", gpu, {}, "DaemonSet")};

  EvictionPlan strict = PlanEviction(pods, {}, /*only_gpu_pods=*/true);
  ASSERT_EQ(strict.refused.size(), 3u);
  EXPECT_NE(strict.refused[0].find("ml/bare: no controller"), std::string::npos);
  EXPECT_NE(strict.refused[0].find("DRAIN_USE_FORCE=true"), std::string::npos);
  EXPECT_NE(strict.refused[1].find("ml/scratch"), std::string::npos);
  EXPECT_NE(strict.refused[1].find("DRAIN_DELETE_EMPTYDIR_DATA=true"), std::string::npos);
  EXPECT_NE(strict.refused[2].find("ml/ds-gpu: owned by a DaemonSet"), std::string::npos);

  pods.pop_back();
  EvictionPlan allowed =
      PlanEviction(pods, {.force = true, .delete_emptydir_data = true}, /*only_gpu_pods=*/true);
  EXPECT_TRUE(allowed.refused.empty());
  EXPECT_EQ(PodList(allowed.evict), "ml/train, ml/bare, ml/scratch");

  // A drain takes every pod but skips DaemonSet and mirror pods.
  Json mirror = PodObject("kube-system", "etcd", cpu, {}, "");
  mirror["metadata"]["annotations"] = {{"kubernetes.io/config.mirror", "x"}};
  pods.push_back(mirror);
  pods.push_back(PodObject("gpu-operator", "dp", cpu, {}, "DaemonSet"));
  EvictionPlan drain =
      PlanEviction(pods, {.force = true, .delete_emptydir_data = true}, /*only_gpu_pods=*/false);
  EXPECT_TRUE(drain.refused.empty());
  EXPECT_EQ(PodList(drain.evict), "ml/train, ml/bare, ml/scratch, web/nginx");
  EXPECT_EQ(PodList(drain.evict, 2), "ml/train, ml/bare and 2 more");

  // A finished pod goes whatever the flags.
  Json done = PodObject("ml", "done", gpu, {}, "");
  done["status"] = {{"phase", "Succeeded"}};
  EXPECT_EQ(PlanEviction({done}, {}, true).evict.size(), 1u);
}

TEST(DecideTest, HostDriverThenNothingLoadedThenSameDigestThenReload) {
  NodeState host{.host_driver = true, .nvidia_loaded = true, .loaded_digest = "abc"};
  EXPECT_EQ(Decide(host, "abc", false), Decision::kHostDriver);
  NodeState empty{};
  EXPECT_EQ(Decide(empty, "abc", false), Decision::kNoDriver);
  NodeState current{.nvidia_loaded = true, .loaded_digest = "abc"};
  EXPECT_EQ(Decide(current, "abc", false), Decision::kDriverCurrent);
  EXPECT_EQ(Decide(current, "abc", /*force_reinstall=*/true), Decision::kReload);
  EXPECT_EQ(Decide(current, "def", false), Decision::kReload);
  EXPECT_EQ(Decide(current, "", false), Decision::kReload);  // no digest: never "same"
  NodeState unknown{.nvidia_loaded = true};                  // no state file
  EXPECT_EQ(Decide(unknown, "abc", false), Decision::kReload);
  EXPECT_EQ(DecisionName(Decision::kDriverCurrent), "driver-current");
}

TEST(PolicyForTest, TheUpgradeControllersAnnotationTurnsEvictionAndDrainOff) {
  EvictionPolicy p = PolicyFor(true, true, std::nullopt);
  EXPECT_TRUE(p.evict);
  EXPECT_TRUE(p.drain);
  EXPECT_FALSE(p.upgrade_controller_owns);
  p = PolicyFor(true, true, "true");
  EXPECT_FALSE(p.evict);
  EXPECT_FALSE(p.drain);
  EXPECT_TRUE(p.upgrade_controller_owns);
  p = PolicyFor(true, false, "false");
  EXPECT_TRUE(p.evict);
  EXPECT_FALSE(p.drain);
}

Json Node(bool unschedulable, Json annotations = Json::object()) {
  Json n{{"metadata",
          {{"name", "gpu-1"}, {"resourceVersion", "42"}, {"annotations", std::move(annotations)}}},
         {"spec", Json::object()}};
  if (unschedulable) n["spec"]["unschedulable"] = true;
  return n;
}

TEST(CordonTest, OnlyOurOwnCordonIsUndone) {
  Json schedulable = Node(false);
  EXPECT_EQ(CordonStateOf(schedulable), CordonState::kSchedulable);
  auto cordon = CordonPatch(schedulable);
  ASSERT_TRUE(cordon.has_value());
  EXPECT_EQ((*cordon)["spec"]["unschedulable"], true);
  EXPECT_EQ((*cordon)["metadata"]["annotations"][std::string(kCordonAnnotation)], "true");
  EXPECT_EQ((*cordon)["metadata"]["resourceVersion"], "42");  // conditional
  EXPECT_FALSE(UncordonPatch(schedulable).has_value());

  Json admin = Node(true);
  EXPECT_EQ(CordonStateOf(admin), CordonState::kCordonedByOther);
  EXPECT_FALSE(CordonPatch(admin).has_value());
  EXPECT_FALSE(UncordonPatch(admin).has_value());

  Json ours = Node(true, {{std::string(kCordonAnnotation), "true"}});
  EXPECT_EQ(CordonStateOf(ours), CordonState::kCordonedByUs);
  EXPECT_FALSE(CordonPatch(ours).has_value());
  auto uncordon = UncordonPatch(ours);
  ASSERT_TRUE(uncordon.has_value());
  EXPECT_TRUE((*uncordon)["spec"]["unschedulable"].is_null());
  EXPECT_TRUE((*uncordon)["metadata"]["annotations"][std::string(kCordonAnnotation)].is_null());
  EXPECT_EQ((*uncordon)["metadata"]["resourceVersion"], "42");
}

TEST(OptionsTest, UpstreamNamesAndDefaults) {
  auto o = OptionsFromEnv({{"NODE_NAME", "gpu-1"},
                           {"OPERATOR_NAMESPACE", "nvidia"},
                           {"ENABLE_GPU_POD_EVICTION", "false"},
                           {"ENABLE_AUTO_DRAIN", "True"},
                           {"DRAIN_USE_FORCE", "1"},
                           {"DRAIN_TIMEOUT_SECONDS", "1m30s"},
                           {"DRAIN_POD_SELECTOR_LABEL", "team=ml"},
                           {"DRIVER_CONFIG_DIGEST", "d1"},
                           {"NODE_LABEL_FOR_GPU_POD_EVICTION", "example.com/gpu"},
                           {"HOSTNAME", "nvidia-driver-daemonset-abcde"},
                           {"GPUOP_OPERAND_WAIT_TIMEOUT", "20"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_name, "gpu-1");
  EXPECT_EQ(o->operator_namespace, "nvidia");
  EXPECT_FALSE(o->enable_gpu_pod_eviction);
  EXPECT_TRUE(o->enable_auto_drain);
  EXPECT_TRUE(o->drain_use_force);
  EXPECT_FALSE(o->drain_delete_emptydir_data);
  EXPECT_EQ(o->drain_timeout, std::chrono::seconds(90));
  EXPECT_EQ(o->drain_pod_selector, "team=ml");
  EXPECT_EQ(o->driver_config_digest, "d1");
  EXPECT_EQ(o->custom_pause_label, "example.com/gpu");
  EXPECT_EQ(o->pod_name, "nvidia-driver-daemonset-abcde");
  EXPECT_EQ(o->operand_wait_timeout, std::chrono::seconds(20));

  auto d = OptionsFromEnv({{"NODE_NAME", "n"}});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->enable_gpu_pod_eviction);
  EXPECT_TRUE(d->enable_auto_drain);  // upstream's binary default
  EXPECT_EQ(d->operator_namespace, "gpu-operator");
  EXPECT_EQ(d->operand_wait_timeout, std::chrono::seconds(300));
  // "0s" is upstream's "no limit"; every wait here is bounded.
  auto zero = OptionsFromEnv({{"NODE_NAME", "n"}, {"DRAIN_TIMEOUT_SECONDS", "0s"}});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->EffectiveDrainTimeout(), kDefaultWait);
  auto pod = OptionsFromEnv({{"NODE_NAME", "n"}, {"HOSTNAME", "h"}, {"POD_NAME", "p"}});
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ(pod->pod_name, "p");
}

TEST(OptionsTest, BadValuesNameTheVariableAndTheFix) {
  auto no_node = OptionsFromEnv({});
  ASSERT_FALSE(no_node.ok());
  EXPECT_NE(no_node.status().message().find("NODE_NAME is not set"), std::string::npos);
  EXPECT_NE(no_node.status().message().find("fieldRef"), std::string::npos);

  auto bad_bool = OptionsFromEnv({{"NODE_NAME", "n"}, {"ENABLE_AUTO_DRAIN", "yes"}});
  ASSERT_FALSE(bad_bool.ok());
  EXPECT_EQ(bad_bool.status().message(),
            "ENABLE_AUTO_DRAIN=\"yes\" is not a boolean: use true or false");

  auto bad_duration = OptionsFromEnv({{"NODE_NAME", "n"}, {"DRAIN_TIMEOUT_SECONDS", "5 minutes"}});
  ASSERT_FALSE(bad_duration.ok());
  EXPECT_NE(bad_duration.status().message().find("DRAIN_TIMEOUT_SECONDS=\"5 minutes\" is not a "
                                                 "duration"),
            std::string::npos)
      << bad_duration.status().message();
}

TEST(ParseDurationSecondsTest, GoDurationsAndPlainSeconds) {
  auto p = [](std::string_view s) { return ParseDurationSeconds("X", s); };
  EXPECT_EQ(*p("300s"), std::chrono::seconds(300));
  EXPECT_EQ(*p("5m"), std::chrono::seconds(300));
  EXPECT_EQ(*p("1h30m"), std::chrono::seconds(5400));
  EXPECT_EQ(*p("0s"), std::chrono::seconds(0));      // upstream's DaemonSet: "no limit"
  EXPECT_EQ(*p("1500ms"), std::chrono::seconds(2));  // rounded up: never shorter
  EXPECT_EQ(*p("0"), std::chrono::seconds(0));
  EXPECT_EQ(*p("45"), std::chrono::seconds(45));
  for (std::string_view bad : {"", "s", "5x", "-5s", "5m 3s", "0x10"}) {
    EXPECT_FALSE(p(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gpuop::driver_manager
