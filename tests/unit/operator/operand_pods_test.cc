// KeepOperandPodFields must give every function the operator reads its pod
// caches with the same answer as the whole pod, for pods made (as the
// DaemonSet controller makes them) from the rendered validator and driver
// templates, in the states the upgrade and the status distinguish.
#include "operator/operand_pods.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "base/files.h"
#include "kube/gpu_pods.h"
#include "kube/object.h"
#include "operator/status.h"
#include "operator/upgrade.h"

namespace gpuop::op {
namespace {

kube::ObjectPtr Ptr(const Json& pod) { return std::make_shared<const Json>(pod); }

// The pod template of the DaemonSet in a golden manifest file.
Json Template(const std::string& component) {
  auto text = ReadFile(std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/operator/golden/" +
                       component + ".json");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  for (const Json& o : Json::parse(text.ok() ? *text : "[]")) {
    if (o.value("kind", "") == "DaemonSet") return o["spec"]["template"];
  }
  ADD_FAILURE() << component << " renders no DaemonSet";
  return Json::object();
}

Json ContainerStatus(const std::string& name, bool ready, Json state, int restarts = 0) {
  return {{"name", name},
          {"ready", ready},
          {"started", ready},
          {"restartCount", restarts},
          {"image", "ghcr.io/gpuop/gpuop:1.2.3"},
          {"imageID", "ghcr.io/gpuop/gpuop@sha256:0123456789abcdef"},
          {"containerID", "containerd://4f2a9c0e11"},
          {"state", std::move(state)},
          {"lastState", Json::object()}};
}

// A pod of `tmpl` on `node`, as the kubelet reports it when every init
// container exited with `init_exit` and the main containers are `ready`.
Json PodOf(const Json& tmpl, const std::string& node, int init_exit, bool ready) {
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = tmpl["metadata"];
  pod["metadata"]["name"] = "pod-on-" + node;
  pod["metadata"]["namespace"] = "gpu-operator";
  pod["metadata"]["uid"] = "uid-" + node;
  pod["metadata"]["resourceVersion"] = "42";
  pod["metadata"]["generateName"] = "pod-";
  pod["metadata"]["creationTimestamp"] = "2026-12-06T10:00:00Z";
  pod["metadata"]["labels"]["controller-revision-hash"] = "7d9f8c6b5";
  pod["metadata"]["ownerReferences"] = Json::array(
      {{{"apiVersion", "apps/v1"}, {"kind", "DaemonSet"}, {"name", "ds"}, {"controller", true}}});
  pod["metadata"]["managedFields"] = Json::array({{{"manager", "kubelet"}}});
  pod["spec"] = tmpl["spec"];
  pod["spec"]["nodeName"] = node;
  Json& status = pod["status"];
  status["phase"] = init_exit == 0 ? "Running" : "Pending";
  status["hostIP"] = "10.0.0.7";
  status["podIP"] = "10.0.0.7";
  status["qosClass"] = "BestEffort";
  status["startTime"] = "2026-12-06T10:00:01Z";
  status["conditions"] =
      Json::array({{{"type", "Initialized"}, {"status", init_exit == 0 ? "True" : "False"}},
                   {{"type", "Ready"}, {"status", ready ? "True" : "False"}},
                   {{"type", "PodScheduled"}, {"status", "True"}}});
  for (const Json& c : tmpl["spec"].value("initContainers", Json::array())) {
    Json terminated = {{"exitCode", init_exit}, {"reason", init_exit ? "Error" : "Completed"}};
    if (init_exit) terminated["message"] = "cuda validation failed: no device\n";
    status["initContainerStatuses"].push_back(
        ContainerStatus(c["name"], init_exit == 0, {{"terminated", terminated}}, 3));
  }
  for (const Json& c : tmpl["spec"].value("containers", Json::array())) {
    Json state = init_exit == 0 ? Json{{"running", {{"startedAt", "2026-12-06T10:00:09Z"}}}}
                                : Json{{"waiting", {{"reason", "PodInitializing"}}}};
    status["containerStatuses"].push_back(ContainerStatus(c["name"], ready, state, 1));
  }
  return pod;
}

void ExpectSameAnswers(const Json& whole, const std::set<std::string>& claims) {
  Json kept = whole;
  KeepOperandPodFields(kept);
  upgrade::PodInfo a = upgrade::ReadPod(whole, claims), b = upgrade::ReadPod(kept, claims);
  EXPECT_EQ(a.ns, b.ns);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.ready, b.ready);
  EXPECT_EQ(a.terminating, b.terminating);
  EXPECT_EQ(a.controller_kind, b.controller_kind);
  EXPECT_EQ(a.controller_name, b.controller_name);
  EXPECT_EQ(a.gpu, b.gpu);
  EXPECT_EQ(a.empty_dir, b.empty_dir);
  EXPECT_EQ(a.restarts_not_ready, b.restarts_not_ready);
  EXPECT_EQ(a.revision_hash, b.revision_hash);
  EXPECT_EQ(a.config_digest, b.config_digest);
  EXPECT_EQ(a.mirror, b.mirror);
  EXPECT_EQ(ValidationBlockers({Ptr(whole)}), ValidationBlockers({Ptr(kept)}));
  EXPECT_EQ(kube::IsPodReady(whole), kube::IsPodReady(kept));
  EXPECT_EQ(kube::PodNodeName(whole), kube::PodNodeName(kept));
  EXPECT_EQ(kube::IsBeingDeleted(whole), kube::IsBeingDeleted(kept));
  EXPECT_EQ(kube::IsGpuPod(whole, claims), kube::IsGpuPod(kept, claims));
  EXPECT_EQ(kube::Uid(whole), kube::Uid(kept));
  EXPECT_EQ(kube::ResourceVersion(whole), kube::ResourceVersion(kept));
}

TEST(OperandPodsTest, ValidatorAndDriverPodsAnswerAsWhole) {
  for (const char* component : {"operator-validator", "driver"}) {
    SCOPED_TRACE(component);
    const Json tmpl = Template(component);
    ASSERT_TRUE(tmpl.contains("spec"));
    for (int init_exit : {0, 1}) {
      for (bool ready : {true, false}) {
        SCOPED_TRACE("init exit " + std::to_string(init_exit) + (ready ? ", ready" : ""));
        Json pod = PodOf(tmpl, "gpu-7", init_exit, ready);
        ExpectSameAnswers(pod, {});
        pod["metadata"]["deletionTimestamp"] = "2026-12-06T11:00:00Z";
        pod["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "x";
        ExpectSameAnswers(pod, {});
      }
    }
  }
}

TEST(OperandPodsTest, KeepsWhatMarksAPodAsGpuPodOrAsDriverConfig) {
  Json pod = PodOf(Template("driver"), "gpu-1", 0, true);
  // The rendered driver carries its config digest among a dozen variables.
  bool digest = false;
  for (Json& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == upgrade::kConfigDigestEnv) e["value"] = "digest-3f9a", digest = true;
  }
  ASSERT_TRUE(digest);
  pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1";
  pod["spec"]["volumes"].push_back({{"name", "scratch"}, {"emptyDir", Json::object()}});
  pod["spec"]["resourceClaims"] = Json::array({{{"name", "gpu"}}});
  pod["status"]["resourceClaimStatuses"] =
      Json::array({{{"name", "gpu"}, {"resourceClaimName", "pod-gpu-x1"}}});
  Json kept = pod;
  KeepOperandPodFields(kept);
  EXPECT_EQ(upgrade::ReadPod(kept).config_digest, "digest-3f9a");
  EXPECT_TRUE(upgrade::ReadPod(kept).empty_dir);
  EXPECT_TRUE(kube::IsGpuPod(kept, {}));
  ExpectSameAnswers(pod, {"gpu-operator/pod-gpu-x1"});
  pod["spec"]["containers"][0]["resources"] = Json::object();
  ExpectSameAnswers(pod, {"gpu-operator/pod-gpu-x1"});
  ExpectSameAnswers(pod, {"gpu-operator/other"});
}

TEST(OperandPodsTest, KeepsAFractionOfThePod) {
  for (const char* component : {"operator-validator", "driver"}) {
    Json pod = PodOf(Template(component), "gpu-7", 0, true);
    const size_t whole = pod.dump().size();
    KeepOperandPodFields(pod);
    EXPECT_LT(pod.dump().size() * 3, whole) << component << ": " << pod.dump();
    EXPECT_FALSE(pod["metadata"].contains("managedFields"));
    EXPECT_FALSE(pod["status"].contains("hostIP"));
  }
}

TEST(OperandPodsTest, MalformedPodsStayReadable) {
  for (Json pod : {Json::object(), Json{{"spec", "x"}, {"status", 3}},
                   Json{{"spec", {{"containers", {1, "x", {{"env", 5}}}}, {"volumes", "v"}}},
                        {"status", {{"containerStatuses", {"y"}}}}}}) {
    Json whole = pod;
    KeepOperandPodFields(pod);
    EXPECT_EQ(upgrade::ReadPod(whole).ready, upgrade::ReadPod(pod).ready);
    EXPECT_EQ(ValidationBlockers({Ptr(whole)}), ValidationBlockers({Ptr(pod)}));
  }
}

}  // namespace
}  // namespace gpuop::op
