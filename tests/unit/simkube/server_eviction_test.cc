// pods/eviction through the API emulator's HTTP front end, with
// PodDisruptionBudgets: the status codes and Status bodies kube-apiserver
// answers (201, 429 with a DisruptionBudget cause, 500 for two budgets),
// pods that skip the check, and dry runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/unit/simkube/server_testing.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

// One namespace per test (the fixture's), so budgets of one test never
// cover another's pods.
class ServerEvictionTest : public testing::ServerTest {
 protected:
  std::string Ns() const { return "/api/v1/namespaces/" + ns_; }

  // A pod of app `app` in `phase`, Ready when `ready`, optionally controlled
  // by `owner` (an object as the server returned it).
  void MakePod(const std::string& name, const std::string& phase, bool ready,
               const Json& owner = nullptr, const std::string& app = "web") {
    Json pod = {{"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
                {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
    if (!owner.is_null()) {
      pod["metadata"]["ownerReferences"] = {{{"apiVersion", owner["apiVersion"]},
                                             {"kind", owner["kind"]},
                                             {"name", owner["metadata"]["name"]},
                                             {"uid", owner["metadata"]["uid"]},
                                             {"controller", true}}};
    }
    auto created = Post(Ns() + "/pods", pod);
    ASSERT_EQ(created.first, 201) << created.second.dump();
    Json status = {{"status",
                    {{"phase", phase},
                     {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
    auto patched = client_->Patch((Ns() + "/pods/" + name + "/status").c_str(), status.dump(),
                                  "application/merge-patch+json");
    ASSERT_TRUE(patched);
    ASSERT_EQ(patched->status, 200) << patched->body;
  }

  void MakeBudget(const std::string& name, Json spec) {
    spec["selector"] = {{"matchLabels", {{"app", "web"}}}};
    auto created = Post("/apis/policy/v1/namespaces/" + ns_ + "/poddisruptionbudgets",
                        {{"apiVersion", "policy/v1"},
                         {"kind", "PodDisruptionBudget"},
                         {"metadata", {{"name", name}}},
                         {"spec", spec}});
    ASSERT_EQ(created.first, 201) << created.second.dump();
  }

  std::pair<int, Json> Evict(const std::string& pod, const std::string& query = "") {
    return Post(Ns() + "/pods/" + pod + "/eviction" + query,
                {{"apiVersion", "policy/v1"},
                 {"kind", "Eviction"},
                 {"metadata", {{"name", pod}, {"namespace", ns_}}}});
  }

  // Gone, or terminating (a graceful deletion).
  bool Evicted(const std::string& pod) {
    auto r = client_->Get((Ns() + "/pods/" + pod).c_str());
    if (r->status == 404) return true;
    return Json::parse(r->body)["metadata"].contains("deletionTimestamp");
  }
};

TEST_F(ServerEvictionTest, MinAvailableBlocksWithTooManyRequests) {
  MakePod("web-0", "Running", true);
  MakePod("web-1", "Running", true);
  MakeBudget("web-pdb", {{"minAvailable", 2}});

  auto [code, body] = Evict("web-0");
  ASSERT_EQ(code, 429) << body.dump();
  EXPECT_EQ(body["kind"], "Status");
  EXPECT_EQ(body["status"], "Failure");
  EXPECT_EQ(body["reason"], "TooManyRequests");
  EXPECT_EQ(body["code"], 429);
  EXPECT_EQ(body["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
  EXPECT_EQ(body["details"]["causes"], Json::parse(R"([{"reason":"DisruptionBudget",
              "message":"The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}])"));
  EXPECT_FALSE(Evicted("web-0"));

  // A third healthy pod makes room for one disruption, and only one.
  MakePod("web-2", "Running", true);
  auto first = Evict("web-0");
  ASSERT_EQ(first.first, 201) << first.second.dump();
  EXPECT_EQ(first.second["status"], "Success");
  EXPECT_TRUE(Evicted("web-0"));
  EXPECT_EQ(Evict("web-1").first, 429);
}

TEST_F(ServerEvictionTest, MaxUnavailablePercentCountsTheDeploymentScale) {
  auto deploy = Post("/apis/apps/v1/namespaces/" + ns_ + "/deployments",
                     {{"metadata", {{"name", "web"}}},
                      {"spec",
                       {{"replicas", 4},
                        {"selector", {{"matchLabels", {{"app", "web"}}}}},
                        {"template",
                         {{"metadata", {{"labels", {{"app", "web"}}}}},
                          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}}}}});
  ASSERT_EQ(deploy.first, 201) << deploy.second.dump();
  // The ReplicaSet's own replicas (1) would allow every eviction: the
  // Deployment's (4) is the one that counts.
  Json rs = {{"metadata",
              {{"name", "web-abc"},
               {"ownerReferences",
                {{{"apiVersion", "apps/v1"},
                  {"kind", "Deployment"},
                  {"name", "web"},
                  {"uid", deploy.second["metadata"]["uid"]},
                  {"controller", true}}}}}},
             {"spec",
              {{"replicas", 1},
               {"selector", {{"matchLabels", {{"app", "web"}}}}},
               {"template",
                {{"metadata", {{"labels", {{"app", "web"}}}}},
                 {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}}}}};
  auto replica_set = Post("/apis/apps/v1/namespaces/" + ns_ + "/replicasets", rs);
  ASSERT_EQ(replica_set.first, 201) << replica_set.second.dump();
  for (int i = 0; i < 4; ++i)
    MakePod("web-" + std::to_string(i), "Running", true, replica_set.second);
  // 25% of 4 may be unavailable: 3 of 4 must stay healthy.
  MakeBudget("web-pdb", {{"maxUnavailable", "25%"}});

  ASSERT_EQ(Evict("web-0").first, 201);
  auto [code, body] = Evict("web-1");
  ASSERT_EQ(code, 429) << body.dump();
  EXPECT_EQ(body["details"]["causes"][0]["message"],
            "The disruption budget web-pdb needs 3 healthy pods and has 3 currently");
}

TEST_F(ServerEvictionTest, TwoBudgetsForOnePodAreRefused) {
  MakePod("web-0", "Running", true);
  MakeBudget("one", {{"minAvailable", 0}});
  MakeBudget("two", {{"minAvailable", 0}});
  auto [code, body] = Evict("web-0");
  ASSERT_EQ(code, 500) << body.dump();
  EXPECT_EQ(body["status"], "Failure");
  EXPECT_EQ(body["code"], 500);
  EXPECT_EQ(body["message"],
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
            "not support.");
  EXPECT_FALSE(Evicted("web-0"));
}

TEST_F(ServerEvictionTest, PodsNotRunningAreEvictedWithoutTheCheck) {
  MakePod("web-pending", "Pending", false);
  MakePod("web-done", "Succeeded", false);
  MakeBudget("web-pdb", {{"minAvailable", 5}});
  EXPECT_EQ(Evict("web-pending").first, 201);
  EXPECT_EQ(Evict("web-done").first, 201);
  EXPECT_TRUE(Evicted("web-pending"));
  EXPECT_TRUE(Evicted("web-done"));
}

TEST_F(ServerEvictionTest, DryRunChecksTheBudgetButKeepsThePod) {
  MakePod("web-0", "Running", true);
  MakePod("web-1", "Running", true);
  MakeBudget("web-pdb", {{"minAvailable", 2}});
  EXPECT_EQ(Evict("web-0", "?dryRun=All").first, 429);

  MakePod("web-2", "Running", true);
  auto [code, body] = Evict("web-0", "?dryRun=All");
  ASSERT_EQ(code, 201) << body.dump();
  EXPECT_FALSE(Evicted("web-0"));
  // Nothing was used up: the real eviction still has its disruption.
  EXPECT_EQ(Evict("web-0").first, 201);
}

}  // namespace
}  // namespace gpuop::simkube
