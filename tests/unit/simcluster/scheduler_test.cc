#include "sim/cluster/scheduler.h"

#include <gtest/gtest.h>

#include "tests/unit/simcluster/controllers_testing.h"

namespace gpuop::simcluster {
namespace {

using testing::CreateNode;
using testing::NodeSpec;
using ::gpuop::testing::WaitFor;
namespace res = kube::resources;

Json GpuPod(const std::string& name, int gpus, Json extra_spec = Json::object()) {
  Json container = {{"name", "main"}, {"image", "cuda"}};
  if (gpus > 0) {
    container["resources"] = {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}};
  }
  Json spec = {{"containers", Json::array({container})}};
  spec.update(extra_spec);
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", spec}};
}

// --- The pure core ---

Json NodeObj(const std::string& name, Json allocatable, Json labels = Json::object()) {
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"status",
           {{"allocatable", allocatable},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

TEST(PodRequestsTest, InitContainersCountByTheirMaximumAndLimitsStandForRequests) {
  Json pod = Json::parse(R"({"spec": {
    "initContainers": [
      {"name": "i1", "resources": {"requests": {"cpu": "2"}}},
      {"name": "i2", "resources": {"requests": {"cpu": "500m"}}}],
    "containers": [
      {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"},
                                  "limits": {"nvidia.com/gpu": "2", "cpu": "4"}}},
      {"name": "b", "resources": {"requests": {"cpu": "250m"}}}],
    "overhead": {"memory": "64Mi"}}})");
  ResourceList r = PodRequests(pod);
  EXPECT_EQ(r["cpu"], 2000);  // max(init 2, 250m + 250m)
  EXPECT_EQ(r["memory"], (1024LL + 64) * 1024 * 1024 * 1000);
  EXPECT_EQ(r["nvidia.com/gpu"], 2000);  // from the limit
}

TEST(QuantityTest, Parses) {
  EXPECT_EQ(ParseQuantityMilli(Json("100m")), 100);
  EXPECT_EQ(ParseQuantityMilli(Json("1.5")), 1500);
  EXPECT_EQ(ParseQuantityMilli(Json("2Ki")), 2048000);
  EXPECT_EQ(ParseQuantityMilli(Json("1e3")), 1000000);
  EXPECT_EQ(ParseQuantityMilli(Json(8)), 8000);
  EXPECT_FALSE(ParseQuantityMilli(Json("eight")).has_value());
  EXPECT_FALSE(ParseQuantityMilli(Json("1Qi")).has_value());
}

TEST(ScheduleOneTest, LeastAllocatedWinsAndTiesGoByName) {
  Json a = NodeObj("b-node", {{"cpu", "4"}, {"memory", "8Gi"}, {"pods", "10"}});
  Json b = NodeObj("a-node", {{"cpu", "4"}, {"memory", "8Gi"}, {"pods", "10"}});
  Json pod = GpuPod("p", 0);
  std::vector<NodeUsage> nodes = {{&a, {}, 0}, {&b, {}, 0}};
  EXPECT_EQ(ScheduleOne(pod, nodes).node, "a-node");
  nodes[1].requested["cpu"] = 3000;  // a-node busier now
  EXPECT_EQ(ScheduleOne(pod, nodes).node, "b-node");
}

TEST(ScheduleOneTest, AffinityOperatorsAndMatchFields) {
  Json n1 = NodeObj("n1", {{"pods", "10"}}, {{"gpu-count", "8"}, {"zone", "a"}});
  Json n2 = NodeObj("n2", {{"pods", "10"}}, {{"gpu-count", "4"}, {"zone", "b"}});
  Json n3 = NodeObj("n3", {{"pods", "10"}}, {{"zone", "c"}});
  std::vector<NodeUsage> nodes = {{&n1, {}, 0}, {&n2, {}, 0}, {&n3, {}, 0}};
  auto with_terms = [](const char* terms) {
    Json pod = GpuPod("p", 0);
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
       ["nodeSelectorTerms"] = Json::parse(terms);
    return pod;
  };
  EXPECT_EQ(ScheduleOne(with_terms(R"([{"matchExpressions": [
                {"key": "gpu-count", "operator": "Gt", "values": ["5"]}]}])"), nodes).node, "n1");
  EXPECT_EQ(ScheduleOne(with_terms(R"([{"matchExpressions": [
                {"key": "gpu-count", "operator": "Lt", "values": ["5"]}]}])"), nodes).node, "n2");
  EXPECT_EQ(ScheduleOne(with_terms(R"([{"matchExpressions": [
                {"key": "gpu-count", "operator": "DoesNotExist"}]}])"), nodes).node, "n3");
  EXPECT_EQ(ScheduleOne(with_terms(R"([{"matchExpressions": [
                {"key": "gpu-count", "operator": "Exists"},
                {"key": "zone", "operator": "NotIn", "values": ["a"]}]}])"), nodes).node, "n2");
  EXPECT_EQ(ScheduleOne(with_terms(R"([{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n3"]}]}])"), nodes).node,
            "n3");
  // Terms are ORed; an empty term matches nothing.
  EXPECT_EQ(ScheduleOne(with_terms(R"([{}, {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["b"]}]}])"), nodes).node, "n2");
  ScheduleResult none = ScheduleOne(with_terms(R"([{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["x"]}]}])"), nodes);
  EXPECT_EQ(none.node, "");
  EXPECT_EQ(none.message,
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.");
}

TEST(ScheduleOneTest, MessagesNameEveryReasonLikeKubeScheduler) {
  Json full = NodeObj("full", {{"pods", "1"}, {"cpu", "1"}});
  Json cordoned = NodeObj("cordoned", {{"pods", "10"}});
  cordoned["spec"]["unschedulable"] = true;
  Json notready = NodeObj("notready", {{"pods", "10"}});
  notready["status"]["conditions"][0]["status"] = "False";
  Json pod = GpuPod("p", 0);
  pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2";
  std::vector<NodeUsage> nodes = {{&full, {}, 1}, {&cordoned, {}, 0}, {&notready, {}, 0}};
  EXPECT_EQ(ScheduleOne(pod, nodes).message,
            "0/3 nodes are available: 1 Insufficient cpu, 1 Too many pods, 1 node(s) had "
            "untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable. "
            "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming "
            "pod, 2 Preemption is not helpful for scheduling.");
  pod["spec"]["preemptionPolicy"] = "Never";
  EXPECT_NE(ScheduleOne(pod, nodes).message.find(
                ". preemption: not eligible due to preemptionPolicy=Never."),
            std::string::npos);
  EXPECT_EQ(ScheduleOne(pod, {}).message, "no nodes available to schedule pods");
}

// --- Against the API emulator ---

class SchedulerTest : public testing::EmulatorTest {
 protected:
  void StartScheduler() {
    auto s = Scheduler::Start(client());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    scheduler_ = std::move(s).value();
    ASSERT_TRUE(scheduler_->WaitForSync(std::chrono::seconds(30)));
  }
  void TearDown() override { scheduler_.reset(); }

  Json Pod(const std::string& name) {
    auto p = client().Get(res::kPods, "default", name);
    return p.ok() ? *p : Json();
  }
  void CreatePod(const Json& pod) {
    auto created = client().Create(res::kPods, "default", pod);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  std::string NodeOf(const std::string& pod) { return kube::PodNodeName(Pod(pod)); }
  bool WaitBound(const std::string& pod) {
    return WaitFor([&] { return !NodeOf(pod).empty(); });
  }
  std::string UnschedulableMessage(const std::string& pod) {
    auto c = kube::FindCondition(Pod(pod), "PodScheduled");
    if (!c || c->status != "False" || c->reason != "Unschedulable") return "";
    return c->message;
  }
  // The FailedScheduling Events about `pod`.
  std::vector<Json> FailedSchedulingEvents(const std::string& pod) {
    std::vector<Json> out;
    auto list = client().List(res::kEvents, "default");
    if (!list.ok()) return out;
    for (const auto& e : list->items) {
      if (e.value("reason", "") == "FailedScheduling" &&
          e["involvedObject"].value("name", "") == pod) {
        out.push_back(e);
      }
    }
    return out;
  }

  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, BindsByNodeSelectorThroughTheBindingSubresource) {
  CreateNode(client(), {"cpu-1", {}});
  CreateNode(client(), {"gpu-1", {{"nvidia.com/gpu.present", "true"}},
                        {{"cpu", "16"}, {"memory", "64Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}}});
  StartScheduler();
  CreatePod(GpuPod("train", 2, {{"nodeSelector", {{"nvidia.com/gpu.present", "true"}}}}));
  CreatePod(GpuPod("web", 0, {{"nodeSelector", {{"kubernetes.io/hostname", "cpu-1"}}}}));
  ASSERT_TRUE(WaitBound("train"));
  ASSERT_TRUE(WaitBound("web"));
  EXPECT_EQ(NodeOf("train"), "gpu-1");
  EXPECT_EQ(NodeOf("web"), "cpu-1");
  auto scheduled = kube::FindCondition(Pod("train"), "PodScheduled");
  ASSERT_TRUE(scheduled.has_value());
  EXPECT_EQ(scheduled->status, "True");
  // Another scheduler's pods are left alone.
  CreatePod(GpuPod("other", 0, {{"schedulerName", "my-scheduler"}}));
  CreatePod(GpuPod("after", 0));
  ASSERT_TRUE(WaitBound("after"));
  EXPECT_EQ(NodeOf("other"), "");
}

TEST_F(SchedulerTest, BindingTwiceIsAConflict) {
  CreateNode(client(), {"n1", {}});
  CreatePod(GpuPod("p", 0));
  Json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", "p"}}},
                  {"target", {{"kind", "Node"}, {"name", "n1"}}}};
  auto path = res::kPods.Path("default", "p", "binding");
  ASSERT_TRUE(client().Raw("POST", path, binding.dump(), "application/json").ok());
  EXPECT_EQ(NodeOf("p"), "n1");
  auto again = client().Raw("POST", path, binding.dump(), "application/json");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().http_status(), 409);
  EXPECT_TRUE(kube::IsConflict(again.status())) << again.status().ToString();
}

TEST_F(SchedulerTest, InsufficientGpusGetKubeSchedulersMessageAndAnEvent) {
  const std::map<std::string, std::string> h100 = {
      {"cpu", "224"}, {"memory", "2Ti"}, {"pods", "110"}, {"nvidia.com/gpu", "8"}};
  const std::map<std::string, std::string> l40s = {
      {"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}};
  CreateNode(client(), {"dgx-h100", {{"nvidia.com/gpu.present", "true"}}, h100});
  CreateNode(client(), {"l40s-4", {{"nvidia.com/gpu.present", "true"}}, l40s});
  CreateNode(client(), {"cpu", {}});
  StartScheduler();
  CreatePod(GpuPod("big", 9, {{"nodeSelector", {{"kubernetes.io/hostname", "dgx-h100"}}}}));
  const std::string want =
      "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's "
      "node affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims "
      "found for incoming pod, 2 Preemption is not helpful for scheduling.";
  ASSERT_TRUE(WaitFor([&] { return UnschedulableMessage("big") == want; }))
      << Pod("big").dump(2);
  ASSERT_TRUE(WaitFor([&] { return !FailedSchedulingEvents("big").empty(); }));
  Json event = FailedSchedulingEvents("big").front();
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(event["message"], want);
  EXPECT_EQ(event["source"].value("component", ""), "default-scheduler");

  // Anywhere: all three lack GPUs for it.
  CreatePod(GpuPod("anywhere", 9));
  ASSERT_TRUE(WaitFor([&] {
    return UnschedulableMessage("anywhere") ==
           "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
           "available: 3 No preemption victims found for incoming pod.";
  })) << Pod("anywhere").dump(2);
  EXPECT_EQ(NodeOf("big"), "");
}

TEST_F(SchedulerTest, CountsWhatIsAlreadyBoundAndRetriesWhenAPodLeaves) {
  CreateNode(client(), {"gpu", {}, {{"cpu", "8"}, {"memory", "8Gi"}, {"pods", "110"},
                                    {"nvidia.com/gpu", "4"}}});
  StartScheduler();
  CreatePod(GpuPod("first", 3));
  ASSERT_TRUE(WaitBound("first"));
  CreatePod(GpuPod("second", 3));
  ASSERT_TRUE(WaitFor([&] {
    return UnschedulableMessage("second").find("1 Insufficient nvidia.com/gpu") !=
           std::string::npos;
  }));
  EXPECT_EQ(NodeOf("second"), "");
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client().Delete(res::kPods, "default", "first", now).ok());
  ASSERT_TRUE(WaitBound("second"));
  EXPECT_EQ(NodeOf("second"), "gpu");
}

TEST_F(SchedulerTest, ManyPodsNeverOverbookANode) {
  CreateNode(client(), {"a", {}, {{"cpu", "8"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}}});
  CreateNode(client(), {"b", {}, {{"cpu", "8"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}}});
  StartScheduler();
  for (int i = 0; i < 10; ++i) CreatePod(GpuPod("p" + std::to_string(i), 1));
  // 8 GPUs: 8 pods bound, 2 pending.
  ASSERT_TRUE(WaitFor([&] {
    int bound = 0, pending = 0;
    for (int i = 0; i < 10; ++i) {
      std::string p = "p" + std::to_string(i);
      if (!NodeOf(p).empty()) ++bound;
      if (!UnschedulableMessage(p).empty()) ++pending;
    }
    return bound == 8 && pending == 2;
  }));
  std::map<std::string, int> per_node;
  for (const auto& p : testing::ListPods(client(), "default")) ++per_node[kube::PodNodeName(p)];
  EXPECT_EQ(per_node["a"], 4);
  EXPECT_EQ(per_node["b"], 4);
}

TEST_F(SchedulerTest, TaintsTolerationsAndCordon) {
  CreateNode(client(), {"tainted", {}, {{"cpu", "8"}, {"pods", "110"}},
                        {{"nvidia.com/gpu", "present", "NoSchedule"}}});
  CreateNode(client(), {"cordoned", {}, {{"cpu", "8"}, {"pods", "110"}}, {}, true, true});
  StartScheduler();
  CreatePod(GpuPod("plain", 0));
  ASSERT_TRUE(WaitFor([&] {
    return UnschedulableMessage("plain") ==
           "0/2 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
           "1 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is "
           "not helpful for scheduling.";
  })) << Pod("plain").dump(2);
  CreatePod(GpuPod("tolerant", 0,
                   {{"tolerations", Json::array({{{"key", "nvidia.com/gpu"},
                                                  {"operator", "Exists"},
                                                  {"effect", "NoSchedule"}}})}}));
  ASSERT_TRUE(WaitBound("tolerant"));
  EXPECT_EQ(NodeOf("tolerant"), "tainted");
  // Uncordoning the node lets the plain pod in.
  auto uncordoned = kube::UpdateWithRetry(client(), res::kNodes, "", "cordoned", [](Json& n) {
    n["spec"]["unschedulable"] = false;
    return true;
  });
  ASSERT_TRUE(uncordoned.ok()) << uncordoned.status().ToString();
  ASSERT_TRUE(WaitBound("plain"));
  EXPECT_EQ(NodeOf("plain"), "cordoned");
}

TEST_F(SchedulerTest, PendingUntilAllocatableGrows) {
  CreateNode(client(), {"gpu-node", {{"nvidia.com/gpu.present", "true"}}});
  StartScheduler();
  CreatePod(GpuPod("waits", 1));
  ASSERT_TRUE(WaitFor([&] { return !UnschedulableMessage("waits").empty(); }));
  EXPECT_EQ(UnschedulableMessage("waits"),
            "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are "
            "available: 1 No preemption victims found for incoming pod.");
  // The device plugin registers: allocatable nvidia.com/gpu appears.
  testing::SetAllocatable(client(), "gpu-node", "nvidia.com/gpu", "8");
  ASSERT_TRUE(WaitBound("waits"));
  EXPECT_EQ(NodeOf("waits"), "gpu-node");
  EXPECT_EQ(kube::FindCondition(Pod("waits"), "PodScheduled")->status, "True");
}

}  // namespace
}  // namespace gpuop::simcluster
