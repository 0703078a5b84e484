#include "sim/cluster/deployment_controller.h"

#include <gtest/gtest.h>

#include "sim/cluster/scheduler.h"
#include "tests/unit/simcluster/controllers_testing.h"

namespace gpuop::simcluster {
namespace {

using testing::CreateNode;
using ::gpuop::testing::WaitFor;
namespace res = kube::resources;

Json Deployment(const std::string& name, int replicas, const std::string& strategy = "RollingUpdate") {
  Json d = Json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"namespace": "default"},
    "spec": {
      "selector": {"matchLabels": {}},
      "template": {
        "metadata": {"labels": {}},
        "spec": {"containers": [{"name": "main", "image": "gpuop:dev",
                                 "env": [{"name": "V", "value": "1"}]}]}
      }
    }})");
  d["metadata"]["name"] = name;
  d["spec"]["replicas"] = replicas;
  d["spec"]["selector"]["matchLabels"]["app"] = name;
  d["spec"]["template"]["metadata"]["labels"]["app"] = name;
  d["spec"]["strategy"]["type"] = strategy;
  return d;
}

// --- RolloutStep (kube's rolling arithmetic) ---

TEST(RolloutStepTest, SurgeFirstThenOldScaledDownWithinMaxUnavailable) {
  Json d = Deployment("d", 4);
  d["spec"]["strategy"]["rollingUpdate"] = {{"maxSurge", 1}, {"maxUnavailable", 1}};
  // Start of a rollout: old has 4 available, new 0.
  auto step = RolloutStep(d, {"new", 0, 0, 0}, {{"old", 4, 4, 4}});
  EXPECT_EQ(step, (std::map<std::string, int64_t>{{"new", 1}}));  // 4 + 1 surge
  // New at 1 (not yet available): old may drop to 3 (4 - 1 unavailable).
  step = RolloutStep(d, {"new", 1, 0, 1}, {{"old", 4, 4, 4}});
  EXPECT_EQ(step, (std::map<std::string, int64_t>{{"old", 3}}));
  // Unavailable old pods go first, beyond the availability budget.
  step = RolloutStep(d, {"new", 1, 1, 1}, {{"old", 4, 2, 4}});
  EXPECT_EQ(step.at("old"), 2);
  // Done.
  EXPECT_TRUE(RolloutStep(d, {"new", 4, 4, 4}, {{"old", 0, 0, 0}}).empty());
  // Scale down of the new one.
  EXPECT_EQ(RolloutStep(d, {"new", 6, 6, 6}, {}), (std::map<std::string, int64_t>{{"new", 4}}));
}

TEST(RolloutStepTest, DefaultsAreQuarterSurgeAndUnavailableAndZeroZeroMeansOne) {
  Json d = Deployment("d", 10);
  // 25% of 10: surge 3 (rounded up), unavailable 2 (rounded down).
  EXPECT_EQ(RolloutStep(d, {"new", 0, 0, 0}, {{"old", 10, 10, 10}}).at("new"), 3);
  EXPECT_EQ(RolloutStep(d, {"new", 3, 0, 3}, {{"old", 10, 10, 10}}).at("old"), 8);
  d["spec"]["strategy"]["rollingUpdate"] = {{"maxSurge", 0}, {"maxUnavailable", 0}};
  EXPECT_EQ(RolloutStep(d, {"new", 0, 0, 0}, {{"old", 10, 10, 10}}).at("old"), 9);
}

TEST(RolloutStepTest, RecreateEmptiesOldBeforeNew) {
  Json d = Deployment("d", 2, "Recreate");
  EXPECT_EQ(RolloutStep(d, {"new", 0, 0, 0}, {{"old", 2, 2, 2}}),
            (std::map<std::string, int64_t>{{"old", 0}}));
  EXPECT_TRUE(RolloutStep(d, {"new", 0, 0, 0}, {{"old", 0, 0, 1}}).empty());  // a pod remains
  EXPECT_EQ(RolloutStep(d, {"new", 0, 0, 0}, {{"old", 0, 0, 0}}),
            (std::map<std::string, int64_t>{{"new", 2}}));
}

// --- Against the API emulator ---

class DeploymentTest : public testing::EmulatorTest {
 protected:
  void SetUp() override {
    EmulatorTest::SetUp();
    if (HasFatalFailure()) return;
    kubelet_ = std::make_unique<testing::FakeKubelet>(client(), /*auto_ready=*/true);
    CreateNode(client(), {"node-a", {}});
    CreateNode(client(), {"node-b", {}});
    auto s = Scheduler::Start(client());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    scheduler_ = std::move(s).value();
    auto rs = ReplicaSetController::Start(client());
    ASSERT_TRUE(rs.ok()) << rs.status().ToString();
    rs_ = std::move(rs).value();
    auto d = DeploymentController::Start(client());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    deployments_ = std::move(d).value();
    ASSERT_TRUE(rs_->WaitForSync(std::chrono::seconds(30)));
    ASSERT_TRUE(deployments_->WaitForSync(std::chrono::seconds(30)));
  }
  void TearDown() override {
    deployments_.reset();
    rs_.reset();
    scheduler_.reset();
    kubelet_.reset();
  }
  Json Get(const std::string& name) {
    auto d = client().Get(res::kDeployments, "default", name);
    return d.ok() ? *d : Json();
  }
  std::vector<Json> ReplicaSets() {
    auto list = client().List(kReplicaSets, "default");
    return list.ok() ? list->items : std::vector<Json>{};
  }
  std::vector<Json> LivePods(const std::string& app) {
    return testing::LivePods(client(), "default", "app=" + app);
  }
  bool StatusIs(const std::string& name, const Json& want) {
    return testing::StatusHas(Get(name), want);
  }
  bool Settled(const std::string& name, int replicas) {
    Json d = Get(name);
    auto progressing = kube::FindCondition(d, "Progressing");
    return StatusIs(name, {{"replicas", replicas}, {"updatedReplicas", replicas},
                           {"readyReplicas", replicas}, {"availableReplicas", replicas},
                           {"unavailableReplicas", 0},
                           {"observedGeneration", kube::Generation(d)}}) &&
           progressing && progressing->reason == "NewReplicaSetAvailable" &&
           static_cast<int>(LivePods(name).size()) == replicas;
  }
  void Update(const std::string& name, const std::function<void(Json&)>& change) {
    auto updated = kube::UpdateWithRetry(client(), res::kDeployments, "default", name, [&](Json& d) {
      change(d);
      return true;
    });
    ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  }

  std::unique_ptr<testing::FakeKubelet> kubelet_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ReplicaSetController> rs_;
  std::unique_ptr<DeploymentController> deployments_;
};

TEST_F(DeploymentTest, CreatesAReplicaSetAndItsPods) {
  ASSERT_TRUE(client().Create(res::kDeployments, "default", Deployment("op", 3)).ok());
  ASSERT_TRUE(WaitFor([&] { return Settled("op", 3); })) << Get("op").dump(2);
  Json d = Get("op");
  auto available = kube::FindCondition(d, "Available");
  ASSERT_TRUE(available.has_value());
  EXPECT_EQ(available->status, "True");
  EXPECT_EQ(available->reason, "MinimumReplicasAvailable");
  EXPECT_EQ(kube::Annotation(d, kRevisionAnnotation), "1");
  auto rss = ReplicaSets();
  ASSERT_EQ(rss.size(), 1u);
  const std::string hash = kube::Label(rss[0], kPodTemplateHashLabel).value_or("");
  ASSERT_FALSE(hash.empty());
  EXPECT_EQ(kube::Name(rss[0]), "op-" + hash);
  EXPECT_TRUE(kube::IsOwnedBy(rss[0], kube::Uid(d)));
  EXPECT_EQ(rss[0]["spec"]["selector"]["matchLabels"][std::string(kPodTemplateHashLabel)], hash);
  EXPECT_EQ(rss[0]["status"]["readyReplicas"], 3);
  for (const auto& p : LivePods("op")) {
    EXPECT_EQ(kube::Label(p, kPodTemplateHashLabel), hash);
    EXPECT_TRUE(kube::IsOwnedBy(p, kube::Uid(rss[0])));
    EXPECT_FALSE(kube::PodNodeName(p).empty());
  }
}

TEST_F(DeploymentTest, ScalesUpAndDown) {
  ASSERT_TRUE(client().Create(res::kDeployments, "default", Deployment("op", 2)).ok());
  ASSERT_TRUE(WaitFor([&] { return Settled("op", 2); }));
  Update("op", [](Json& d) { d["spec"]["replicas"] = 5; });
  ASSERT_TRUE(WaitFor([&] { return Settled("op", 5); })) << Get("op").dump(2);
  Update("op", [](Json& d) { d["spec"]["replicas"] = 1; });
  ASSERT_TRUE(WaitFor([&] { return Settled("op", 1); })) << Get("op").dump(2);
  EXPECT_EQ(ReplicaSets().size(), 1u);
}

TEST_F(DeploymentTest, TemplateChangeRollsWithoutLosingAvailability) {
  Json d = Deployment("op", 3);
  d["spec"]["strategy"]["rollingUpdate"] = {{"maxSurge", 1}, {"maxUnavailable", 0}};
  ASSERT_TRUE(client().Create(res::kDeployments, "default", d).ok());
  ASSERT_TRUE(WaitFor([&] { return Settled("op", 3); }));
  Update("op", [](Json& d) {
    d["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "2";
  });
  int64_t min_available = 3;
  size_t max_pods = 0;
  ASSERT_TRUE(WaitFor([&] {
    Json status = Get("op").value("status", Json::object());
    min_available = std::min<int64_t>(min_available, status.value("availableReplicas", 0));
    max_pods = std::max(max_pods, LivePods("op").size());
    if (!Settled("op", 3)) return false;
    for (const auto& p : LivePods("op")) {
      if (p["spec"]["containers"][0]["env"][0]["value"] != "2") return false;
    }
    return true;
  })) << Get("op").dump(2);
  EXPECT_EQ(min_available, 3);  // maxUnavailable 0
  EXPECT_LE(max_pods, 4u);      // maxSurge 1
  EXPECT_EQ(kube::Annotation(Get("op"), kRevisionAnnotation), "2");
  auto rss = ReplicaSets();
  ASSERT_EQ(rss.size(), 2u);
  for (const auto& rs : rss) {
    const bool is_new = kube::Annotation(rs, kRevisionAnnotation) == "2";
    EXPECT_EQ(rs["spec"]["replicas"], is_new ? 3 : 0) << rs.dump(2);
  }
}

TEST_F(DeploymentTest, RecreateStopsOldPodsBeforeStartingNew) {
  ASSERT_TRUE(client().Create(res::kDeployments, "default", Deployment("op", 2, "Recreate")).ok());
  ASSERT_TRUE(WaitFor([&] { return Settled("op", 2); }));
  Update("op", [](Json& d) {
    d["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "2";
  });
  bool mixed = false;
  ASSERT_TRUE(WaitFor([&] {
    std::set<std::string> versions;
    for (const auto& p : testing::ListPods(client(), "default", "app=op")) {
      versions.insert(p["spec"]["containers"][0]["env"][0].value("value", ""));
    }
    if (versions.size() > 1) mixed = true;
    if (!Settled("op", 2)) return false;
    return versions == std::set<std::string>{"2"};
  })) << Get("op").dump(2);
  EXPECT_FALSE(mixed);  // never old and new pods at once
}

}  // namespace
}  // namespace gpuop::simcluster
