#include "sim/cluster/daemonset_controller.h"

#include <gtest/gtest.h>

#include "sim/cluster/scheduler.h"
#include "tests/unit/simcluster/controllers_testing.h"

namespace gpuop::simcluster {
namespace {

using testing::CreateNode;
using testing::NodeSpec;
using ::gpuop::testing::WaitFor;
namespace res = kube::resources;

constexpr const char* kGpuLabel = "nvidia.com/gpu.present";

Json DaemonSet(const std::string& name, const std::string& strategy = "RollingUpdate",
               Json max_unavailable = 1) {
  Json ds = Json::parse(R"({
    "apiVersion": "apps/v1", "kind": "DaemonSet",
    "metadata": {"name": "", "namespace": "default"},
    "spec": {
      "selector": {"matchLabels": {"app": ""}},
      "template": {
        "metadata": {"labels": {"app": ""}},
        "spec": {
          "nodeSelector": {"nvidia.com/gpu.present": "true"},
          "containers": [{"name": "main", "image": "gpuop:dev", "env": [{"name": "V", "value": "1"}]}]
        }
      }
    }})");
  ds["metadata"]["name"] = name;
  ds["spec"]["selector"]["matchLabels"]["app"] = name;
  ds["spec"]["template"]["metadata"]["labels"]["app"] = name;
  ds["spec"]["updateStrategy"]["type"] = strategy;
  if (strategy == "RollingUpdate") {
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = max_unavailable;
  }
  return ds;
}

// --- Pure decisions ---

TEST(DaemonSetCoreTest, ShouldRunFollowsSelectorAndTaintsWithDaemonTolerations) {
  Json ds = DaemonSet("d");
  Json node = {{"metadata", {{"name", "n"}, {"labels", {{kGpuLabel, "true"}}}}}};
  EXPECT_TRUE(NodeShouldRun(ds, node).should_run);
  node["spec"]["unschedulable"] = true;  // cordoned: daemon pods still go there
  node["spec"]["taints"] = Json::array({{{"key", "node.kubernetes.io/unschedulable"},
                                         {"effect", "NoSchedule"}}});
  EXPECT_TRUE(NodeShouldRun(ds, node).should_run);
  node["spec"]["taints"] = Json::array({{{"key", "dedicated"}, {"value", "x"},
                                         {"effect", "NoSchedule"}}});
  ShouldRun sr = NodeShouldRun(ds, node);
  EXPECT_FALSE(sr.should_run);
  EXPECT_TRUE(sr.should_continue);  // NoSchedule does not evict
  node["spec"]["taints"][0]["effect"] = "NoExecute";
  sr = NodeShouldRun(ds, node);
  EXPECT_FALSE(sr.should_run);
  EXPECT_FALSE(sr.should_continue);
  node["metadata"]["labels"] = Json::object();
  node["spec"].erase("taints");
  EXPECT_FALSE(NodeShouldRun(ds, node).should_continue);
}

TEST(DaemonSetCoreTest, PodForNodeCarriesAffinityTolerationsLabelsAndOwner) {
  Json ds = DaemonSet("d");
  ds["metadata"]["uid"] = "uid-1";
  ds["metadata"]["generation"] = 3;
  ds["spec"]["template"]["spec"]["hostNetwork"] = true;
  Json pod = DaemonPodFor(ds, "node-7", "abc");
  EXPECT_EQ(pod["metadata"]["generateName"], "d-");
  EXPECT_EQ(pod["metadata"]["labels"]["controller-revision-hash"], "abc");
  EXPECT_EQ(pod["metadata"]["labels"]["pod-template-generation"], "3");
  EXPECT_EQ(pod["metadata"]["labels"]["app"], "d");
  const Json& ref = pod["metadata"]["ownerReferences"][0];
  EXPECT_EQ(ref["kind"], "DaemonSet");
  EXPECT_EQ(ref["uid"], "uid-1");
  EXPECT_EQ(ref["controller"], true);
  EXPECT_EQ(pod["spec"].value("nodeName", ""), "");
  EXPECT_EQ(DaemonPodTargetNode(pod), "node-7");
  std::set<std::string> keys;
  for (const auto& t : pod["spec"]["tolerations"]) keys.insert(t["key"].get<std::string>() + ":" + t["effect"].get<std::string>());
  EXPECT_EQ(keys, (std::set<std::string>{
                      "node.kubernetes.io/not-ready:NoExecute",
                      "node.kubernetes.io/unreachable:NoExecute",
                      "node.kubernetes.io/disk-pressure:NoSchedule",
                      "node.kubernetes.io/memory-pressure:NoSchedule",
                      "node.kubernetes.io/pid-pressure:NoSchedule",
                      "node.kubernetes.io/unschedulable:NoSchedule",
                      "node.kubernetes.io/network-unavailable:NoSchedule"}));
}

// --- Against the API emulator, with the scheduler binding the pods ---

class DaemonSetTest : public testing::EmulatorTest {
 protected:
  void SetUp() override {
    EmulatorTest::SetUp();
    if (HasFatalFailure()) return;
    kubelet_ = std::make_unique<testing::FakeKubelet>(client(), /*auto_ready=*/true);
  }
  void Start() {
    auto s = Scheduler::Start(client());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    scheduler_ = std::move(s).value();
    auto c = DaemonSetController::Start(client());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(c).value();
    ASSERT_TRUE(controller_->WaitForSync(std::chrono::seconds(30)));
  }
  void TearDown() override {
    controller_.reset();
    scheduler_.reset();
    kubelet_.reset();
  }
  void CreateDs(const Json& ds) {
    auto created = client().Create(res::kDaemonSets, "default", ds);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  Json Ds(const std::string& name) {
    auto d = client().Get(res::kDaemonSets, "default", name);
    return d.ok() ? *d : Json();
  }
  // Live pods of the DaemonSet (not being deleted), by node.
  std::map<std::string, Json> PodsByNode(const std::string& ds) {
    std::map<std::string, Json> out;
    for (auto& p : testing::LivePods(client(), "default", "app=" + ds)) {
      out[DaemonPodTargetNode(p)] = p;
    }
    return out;
  }
  int PodCount(const std::string& ds) { return testing::ListPods(client(), "default", "app=" + ds).size(); }
  bool StatusIs(const std::string& ds, const Json& want) {
    return testing::StatusHas(Ds(ds), want);
  }
  void ChangeTemplate(const std::string& ds, const std::string& value) {
    auto updated = kube::UpdateWithRetry(client(), res::kDaemonSets, "default", ds, [&](Json& d) {
      d["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = value;
      return true;
    });
    ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  }
  std::string Env(const Json& pod) {
    return pod["spec"]["containers"][0]["env"][0].value("value", "");
  }

  std::unique_ptr<testing::FakeKubelet> kubelet_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<DaemonSetController> controller_;
};

TEST_F(DaemonSetTest, OnePodPerMatchingNodeWithRevisionLabelsAndStatus) {
  CreateNode(client(), {"gpu-a", {{kGpuLabel, "true"}}});
  CreateNode(client(), {"gpu-b", {{kGpuLabel, "true"}}});
  CreateNode(client(), {"cpu", {}});
  Start();
  CreateDs(DaemonSet("plugin"));
  ASSERT_TRUE(WaitFor([&] {
    return StatusIs("plugin", {{"desiredNumberScheduled", 2}, {"currentNumberScheduled", 2},
                               {"numberReady", 2}, {"numberAvailable", 2},
                               {"numberUnavailable", 0}, {"updatedNumberScheduled", 2},
                               {"numberMisscheduled", 0}, {"observedGeneration", 1}});
  })) << Ds("plugin").dump(2);
  auto pods = PodsByNode("plugin");
  ASSERT_EQ(pods.size(), 2u);
  ASSERT_EQ(pods.count("cpu"), 0u);
  Json ds = Ds("plugin");
  auto revs = client().List(kControllerRevisions, "default");
  ASSERT_TRUE(revs.ok());
  ASSERT_EQ(revs->items.size(), 1u);
  const Json& rev = revs->items[0];
  const std::string hash = rev["metadata"]["labels"]["controller-revision-hash"];
  EXPECT_EQ(kube::Name(rev), "plugin-" + hash);
  EXPECT_EQ(rev["revision"], 1);
  EXPECT_TRUE(kube::IsOwnedBy(rev, kube::Uid(ds)));
  EXPECT_EQ(rev["data"]["spec"]["template"]["spec"]["containers"][0]["image"], "gpuop:dev");
  for (const auto& node : {"gpu-a", "gpu-b"}) {
    const Json& pod = pods[node];
    EXPECT_EQ(kube::PodNodeName(pod), node);  // bound by the scheduler
    EXPECT_EQ(kube::Label(pod, "controller-revision-hash"), hash);
    EXPECT_EQ(kube::Label(pod, "pod-template-generation"), "1");
    auto refs = kube::OwnerReferences(pod);
    ASSERT_EQ(refs.size(), 1u);
    EXPECT_TRUE(refs[0].controller);
    EXPECT_EQ(refs[0].uid, kube::Uid(ds));
  }
}

TEST_F(DaemonSetTest, NodeLabelRemovedDeletesThePodAndNewNodeGetsOne) {
  CreateNode(client(), {"gpu-a", {{kGpuLabel, "true"}}});
  CreateNode(client(), {"gpu-b", {{kGpuLabel, "true"}}});
  Start();
  CreateDs(DaemonSet("plugin"));
  ASSERT_TRUE(WaitFor([&] { return StatusIs("plugin", {{"numberReady", 2}}); }));
  testing::SetNodeLabel(client(), "gpu-b", kGpuLabel, std::nullopt);
  ASSERT_TRUE(WaitFor([&] {
    return PodCount("plugin") == 1 &&
           StatusIs("plugin", {{"desiredNumberScheduled", 1}, {"currentNumberScheduled", 1},
                               {"numberMisscheduled", 0}, {"numberReady", 1}});
  })) << Ds("plugin").dump(2);
  EXPECT_EQ(PodsByNode("plugin").count("gpu-a"), 1u);
  CreateNode(client(), {"gpu-c", {{kGpuLabel, "true"}}});
  ASSERT_TRUE(WaitFor([&] { return StatusIs("plugin", {{"numberReady", 2}}); }));
  EXPECT_EQ(PodsByNode("plugin").count("gpu-c"), 1u);
}

TEST_F(DaemonSetTest, FailedPodIsReplaced) {
  CreateNode(client(), {"gpu-a", {{kGpuLabel, "true"}}});
  Start();
  CreateDs(DaemonSet("plugin"));
  ASSERT_TRUE(WaitFor([&] { return StatusIs("plugin", {{"numberReady", 1}}); }));
  Json first = PodsByNode("plugin")["gpu-a"];
  ASSERT_TRUE(testing::SetPodPhase(client(), first, "Failed").ok());
  ASSERT_TRUE(WaitFor([&] {
    auto pods = PodsByNode("plugin");
    return pods.size() == 1 && kube::Uid(pods.begin()->second) != kube::Uid(first) &&
           kube::IsPodReady(pods.begin()->second);
  }));
}

TEST_F(DaemonSetTest, RollingUpdateReplacesOnePodAtATime) {
  kubelet_->set_auto_ready(false);  // the test decides when pods are ready
  for (const char* n : {"gpu-a", "gpu-b", "gpu-c"}) CreateNode(client(), {n, {{kGpuLabel, "true"}}});
  Start();
  CreateDs(DaemonSet("plugin"));
  auto ready_all = [&] {
    for (const auto& [node, pod] : PodsByNode("plugin")) {
      if (!kube::PodNodeName(pod).empty() && !kube::IsPodReady(pod)) {
        ASSERT_TRUE(testing::MarkPodReady(client(), pod).ok());
      }
    }
  };
  ASSERT_TRUE(WaitFor([&] {
    ready_all();
    return StatusIs("plugin", {{"numberAvailable", 3}});
  }));
  ChangeTemplate("plugin", "2");
  for (int step = 1; step <= 3; ++step) {
    // One new pod appears (bound, not ready); the others stay old and untouched.
    ASSERT_TRUE(WaitFor([&] {
      int fresh = 0;
      for (const auto& [node, pod] : PodsByNode("plugin")) {
        if (Env(pod) == "2" && !kube::PodNodeName(pod).empty()) ++fresh;
      }
      return fresh == step;
    })) << "step " << step;
    int not_ready = 0, old = 0;
    for (const auto& p : testing::ListPods(client(), "default", "app=plugin")) {
      if (kube::IsBeingDeleted(p) || !kube::IsPodReady(p)) ++not_ready;
      if (Env(p) == "1" && !kube::IsBeingDeleted(p)) ++old;
    }
    EXPECT_EQ(not_ready, 1) << "step " << step;
    EXPECT_EQ(old, 3 - step) << "step " << step;
    ASSERT_TRUE(WaitFor([&] {
      return StatusIs("plugin", {{"updatedNumberScheduled", step}, {"observedGeneration", 2}});
    }));
    ready_all();
  }
  ASSERT_TRUE(WaitFor([&] {
    return StatusIs("plugin", {{"updatedNumberScheduled", 3}, {"numberAvailable", 3},
                               {"numberUnavailable", 0}, {"desiredNumberScheduled", 3}});
  })) << Ds("plugin").dump(2);
  for (const auto& [node, pod] : PodsByNode("plugin")) {
    EXPECT_EQ(kube::Label(pod, "pod-template-generation"), "2");
  }
  auto revs = client().List(kControllerRevisions, "default");
  ASSERT_TRUE(revs.ok());
  ASSERT_EQ(revs->items.size(), 2u);
  std::set<int64_t> numbers;
  for (const auto& r : revs->items) numbers.insert(r["revision"].get<int64_t>());
  EXPECT_EQ(numbers, (std::set<int64_t>{1, 2}));
}

TEST_F(DaemonSetTest, OnDeleteReplacesOnlyDeletedPods) {
  CreateNode(client(), {"gpu-a", {{kGpuLabel, "true"}}});
  CreateNode(client(), {"gpu-b", {{kGpuLabel, "true"}}});
  Start();
  CreateDs(DaemonSet("plugin", "OnDelete"));
  ASSERT_TRUE(WaitFor([&] { return StatusIs("plugin", {{"numberReady", 2}}); }));
  ChangeTemplate("plugin", "2");
  ASSERT_TRUE(WaitFor([&] {
    return StatusIs("plugin", {{"observedGeneration", 2}, {"updatedNumberScheduled", 0},
                               {"numberReady", 2}});
  })) << Ds("plugin").dump(2);
  auto pods = PodsByNode("plugin");
  for (const auto& [node, pod] : pods) EXPECT_EQ(Env(pod), "1");
  ASSERT_TRUE(client().Delete(res::kPods, "default", kube::Name(pods["gpu-a"])).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto now = PodsByNode("plugin");
    return now.size() == 2 && Env(now["gpu-a"]) == "2" && kube::IsPodReady(now["gpu-a"]);
  }));
  EXPECT_EQ(Env(PodsByNode("plugin")["gpu-b"]), "1");
  EXPECT_TRUE(WaitFor([&] { return StatusIs("plugin", {{"updatedNumberScheduled", 1}}); }));
}

TEST_F(DaemonSetTest, DeletedDaemonSetTakesItsPods) {
  CreateNode(client(), {"gpu-a", {{kGpuLabel, "true"}}});
  Start();
  CreateDs(DaemonSet("plugin"));
  ASSERT_TRUE(WaitFor([&] { return StatusIs("plugin", {{"numberReady", 1}}); }));
  ASSERT_TRUE(client().Delete(res::kDaemonSets, "default", "plugin").ok());
  ASSERT_TRUE(WaitFor([&] { return PodCount("plugin") == 0; }));
}

}  // namespace
}  // namespace gpuop::simcluster
