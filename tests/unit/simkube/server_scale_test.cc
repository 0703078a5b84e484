// The scale subresource through the API emulator's HTTP front end: the
// autoscaling/v1 Scale of Deployments, ReplicaSets and custom resources, its
// writes by PUT and by each patch type, the real server's refusals, and
// discovery listing it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/unit/simkube/server_testing.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

class ServerScaleTest : public testing::ServerTest {
 protected:
  std::string Apps() const { return "/apis/apps/v1/namespaces/" + ns_; }

  Json MakeDeployment(const std::string& name, int replicas) {
    auto created =
        Send("POST", Apps() + "/deployments",
             {{"metadata", {{"name", name}}},
              {"spec",
               {{"replicas", replicas},
                {"selector",
                 {{"matchLabels", {{"app", name}}},
                  {"matchExpressions",
                   {{{"key", "tier"}, {"operator", "In"}, {"values", {"web", "api"}}}}}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", name}, {"tier", "web"}}}}},
                  {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}}}}});
    EXPECT_EQ(created.first, 201) << created.second.dump();
    return created.second;
  }
};

TEST_F(ServerScaleTest, GetShowsTheDeploymentsReplicasAsAScale) {
  Json deploy = MakeDeployment("web", 3);
  ASSERT_EQ(Send("PATCH", Apps() + "/deployments/web/status", {{"status", {{"replicas", 2}}}},
                 "application/merge-patch+json")
                .first,
            200);
  auto [code, scale] = Get(Apps() + "/deployments/web/scale");
  ASSERT_EQ(code, 200) << scale.dump();
  EXPECT_EQ(scale["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["metadata"]["name"], "web");
  EXPECT_EQ(scale["metadata"]["namespace"], ns_);
  EXPECT_EQ(scale["metadata"]["uid"], deploy["metadata"]["uid"]);
  EXPECT_FALSE(scale["metadata"].value("resourceVersion", "").empty());
  EXPECT_EQ(scale["spec"]["replicas"], 3);
  EXPECT_EQ(scale["status"]["replicas"], 2);
  EXPECT_EQ(scale["status"]["selector"], "app=web,tier in (api,web)");
}

TEST_F(ServerScaleTest, MergePatchAsKubectlScaleSendsSetsTheReplicas) {
  Json deploy = MakeDeployment("web", 1);
  auto [code, scale] = Send("PATCH", Apps() + "/deployments/web/scale",
                            {{"spec", {{"replicas", 5}}}}, "application/merge-patch+json");
  ASSERT_EQ(code, 200) << scale.dump();
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["spec"]["replicas"], 5);
  auto got = Get(Apps() + "/deployments/web");
  EXPECT_EQ(got.second["spec"]["replicas"], 5);
  // A spec change: the Deployment's generation moves for its controller.
  EXPECT_EQ(got.second["metadata"]["generation"],
            deploy["metadata"]["generation"].get<int64_t>() + 1);
  EXPECT_EQ(got.second["spec"]["template"], deploy["spec"]["template"]);
}

TEST_F(ServerScaleTest, JsonPatchAndPutToZero) {
  MakeDeployment("web", 2);
  auto patched = Send("PATCH", Apps() + "/deployments/web/scale",
                      Json::parse(R"([{"op":"replace","path":"/spec/replicas","value":4}])"),
                      "application/json-patch+json");
  ASSERT_EQ(patched.first, 200) << patched.second.dump();
  EXPECT_EQ(patched.second["spec"]["replicas"], 4);

  Json scale = patched.second;
  scale["spec"]["replicas"] = 0;
  auto put = Send("PUT", Apps() + "/deployments/web/scale", scale);
  ASSERT_EQ(put.first, 200) << put.second.dump();
  // ScaleSpec.replicas is omitempty: zero replicas is an empty spec.
  EXPECT_EQ(put.second["spec"], Json::object());
  EXPECT_EQ(Get(Apps() + "/deployments/web").second["spec"]["replicas"], 0);
}

TEST_F(ServerScaleTest, AStaleResourceVersionConflicts) {
  MakeDeployment("web", 1);
  Json scale = Get(Apps() + "/deployments/web/scale").second;
  ASSERT_EQ(Send("PATCH", Apps() + "/deployments/web", {{"metadata", {{"labels", {{"a", "b"}}}}}},
                 "application/merge-patch+json")
                .first,
            200);
  scale["spec"]["replicas"] = 7;
  auto [code, body] = Send("PUT", Apps() + "/deployments/web/scale", scale);
  ASSERT_EQ(code, 409) << body.dump();
  EXPECT_EQ(body["reason"], "Conflict");
  EXPECT_EQ(body["message"],
            "Operation cannot be fulfilled on deployments.apps \"web\": the object has been "
            "modified; please apply your changes to the latest version and try again");
  EXPECT_EQ(Get(Apps() + "/deployments/web").second["spec"]["replicas"], 1);
}

TEST_F(ServerScaleTest, NegativeReplicasAreInvalid) {
  MakeDeployment("web", 1);
  auto [code, body] = Send("PATCH", Apps() + "/deployments/web/scale",
                           {{"spec", {{"replicas", -1}}}}, "application/merge-patch+json");
  ASSERT_EQ(code, 422) << body.dump();
  EXPECT_EQ(body["message"],
            "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be "
            "greater than or equal to 0");
  EXPECT_EQ(Get(Apps() + "/deployments/web").second["spec"]["replicas"], 1);
}

TEST_F(ServerScaleTest, AScaleOfTheWrongShapeIsABadRequest) {
  MakeDeployment("web", 1);
  for (const char* body : {R"({"apiVersion": 5, "kind": "Scale", "spec": {"replicas": 2}})",
                           R"({"kind": "Deployment", "spec": {"replicas": 2}})",
                           R"({"metadata": 7, "spec": {"replicas": "two"}})", R"([1, 2])"}) {
    auto [code, answer] = Send("PUT", Apps() + "/deployments/web/scale", Json::parse(body));
    EXPECT_TRUE(code == 400 || code == 422) << body << " -> " << code << " " << answer.dump();
  }
  EXPECT_EQ(Get(Apps() + "/deployments/web").second["spec"]["replicas"], 1);
}

TEST_F(ServerScaleTest, ReplicaSetsScaleAndOtherResourcesDoNot) {
  auto rs = Send("POST", Apps() + "/replicasets",
                 {{"metadata", {{"name", "rs"}}},
                  {"spec",
                   {{"replicas", 1},
                    {"selector", {{"matchLabels", {{"app", "rs"}}}}},
                    {"template",
                     {{"metadata", {{"labels", {{"app", "rs"}}}}},
                      {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}}}}});
  ASSERT_EQ(rs.first, 201) << rs.second.dump();
  auto scaled = Send("PATCH", Apps() + "/replicasets/rs/scale", {{"spec", {{"replicas", 3}}}},
                     "application/merge-patch+json");
  ASSERT_EQ(scaled.first, 200) << scaled.second.dump();
  EXPECT_EQ(Get(Apps() + "/replicasets/rs").second["spec"]["replicas"], 3);

  // DaemonSets have no scale subresource, as in Kubernetes.
  EXPECT_EQ(Get(Apps() + "/daemonsets/x/scale").first, 404);
  // A missing Deployment is the Deployment's 404.
  auto missing = Get(Apps() + "/deployments/nope/scale");
  EXPECT_EQ(missing.first, 404);
  EXPECT_EQ(missing.second["message"], "deployments.apps \"nope\" not found");
}

TEST_F(ServerScaleTest, ServerSideApplyIsRefusedByName) {
  MakeDeployment("web", 1);
  auto [code, body] =
      Send("PATCH", Apps() + "/deployments/web/scale?fieldManager=me",
           {{"apiVersion", "autoscaling/v1"}, {"kind", "Scale"}, {"spec", {{"replicas", 2}}}},
           "application/apply-patch+yaml");
  EXPECT_EQ(code, 415) << body.dump();
  EXPECT_NE(body.value("message", "").find("server-side apply"), std::string::npos) << body.dump();
}

TEST_F(ServerScaleTest, CustomResourcesScaleByTheirCrdPaths) {
  Json crd = Json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "workers.scale.example.com"},
    "spec": {"group": "scale.example.com", "scope": "Namespaced",
      "names": {"plural": "workers", "singular": "worker", "kind": "Worker", "listKind": "WorkerList"},
      "versions": [{"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
          "statusReplicasPath": ".status.ready", "labelSelectorPath": ".status.selector"}}}]}})");
  ASSERT_EQ(Send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd).first,
            201);
  std::string base = "/apis/scale.example.com/v1/namespaces/" + ns_ + "/workers";
  // The CRD's resources are served once the registry has it. The body names
  // no namespace: it takes the URL's before its metadata is validated.
  std::pair<int, Json> created;
  for (int i = 0; i < 100 && created.first != 201; ++i) {
    created = Send("POST", base,
                   {{"apiVersion", "scale.example.com/v1"},
                    {"kind", "Worker"},
                    {"metadata", {{"name", "w"}}},
                    {"spec", {{"size", 2}}}});
  }
  ASSERT_EQ(created.first, 201) << created.second.dump();
  ASSERT_EQ(Send("PATCH", base + "/w/status", {{"status", {{"ready", 1}, {"selector", "app=w"}}}},
                 "application/merge-patch+json")
                .first,
            200);
  auto scale = Get(base + "/w/scale");
  ASSERT_EQ(scale.first, 200) << scale.second.dump();
  EXPECT_EQ(scale.second["spec"]["replicas"], 2);
  EXPECT_EQ(scale.second["status"], Json::parse(R"({"replicas":1,"selector":"app=w"})"));
  auto scaled = Send("PATCH", base + "/w/scale", {{"spec", {{"replicas", 6}}}},
                     "application/merge-patch+json");
  ASSERT_EQ(scaled.first, 200) << scaled.second.dump();
  EXPECT_EQ(Get(base + "/w").second["spec"]["size"], 6);
}

// Defaults kube-apiserver writes on a new workload, which kubectl rollout
// status reads (a DaemonSet without updateStrategy.type is refused by it).
TEST_F(ServerScaleTest, AppsWorkloadsGetKubesDefaults) {
  Json deploy = MakeDeployment("web", 2);
  EXPECT_EQ(deploy["spec"]["strategy"], Json::parse(R"({"type":"RollingUpdate",
              "rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}})"));
  EXPECT_EQ(deploy["spec"]["revisionHistoryLimit"], 10);
  EXPECT_EQ(deploy["spec"]["progressDeadlineSeconds"], 600);
  EXPECT_EQ(deploy["spec"]["replicas"], 2);  // given: kept
  Json pod_template = {{"metadata", {{"labels", {{"app", "agent"}}}}},
                       {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  auto ds =
      Post(Apps() + "/daemonsets",
           {{"metadata", {{"name", "agent"}}},
            {"spec",
             {{"selector", {{"matchLabels", {{"app", "agent"}}}}}, {"template", pod_template}}}});
  ASSERT_EQ(ds.first, 201) << ds.second.dump();
  EXPECT_EQ(ds.second["spec"]["updateStrategy"], Json::parse(R"({"type":"RollingUpdate",
              "rollingUpdate":{"maxUnavailable":1,"maxSurge":0}})"));
  EXPECT_EQ(ds.second["spec"]["revisionHistoryLimit"], 10);
  auto on_delete =
      Post(Apps() + "/daemonsets", {{"metadata", {{"name", "manual"}}},
                                    {"spec",
                                     {{"selector", {{"matchLabels", {{"app", "agent"}}}}},
                                      {"updateStrategy", {{"type", "OnDelete"}}},
                                      {"template", pod_template}}}});
  ASSERT_EQ(on_delete.first, 201) << on_delete.second.dump();
  EXPECT_EQ(on_delete.second["spec"]["updateStrategy"], Json::parse(R"({"type":"OnDelete"})"));

  // An update is defaulted too: a PUT of a manifest without the strategy
  // (kubectl replace of the file the user has) stores kube's defaults again,
  // and a stored object equal but for them is no spec change.
  Json put = ds.second;
  put["spec"].erase("updateStrategy");
  put["spec"].erase("revisionHistoryLimit");
  auto replaced = Send("PUT", Apps() + "/daemonsets/agent", put, "application/json");
  ASSERT_EQ(replaced.first, 200) << replaced.second.dump();
  EXPECT_EQ(replaced.second["spec"]["updateStrategy"], ds.second["spec"]["updateStrategy"]);
  EXPECT_EQ(replaced.second["spec"]["revisionHistoryLimit"], 10);
  EXPECT_EQ(replaced.second["metadata"]["generation"], ds.second["metadata"]["generation"]);
}

TEST_F(ServerScaleTest, DiscoveryListsTheScaleSubresource) {
  auto [code, list] = Get("/apis/apps/v1");
  ASSERT_EQ(code, 200);
  bool deployments = false, daemonsets = false;
  for (const Json& r : list["resources"]) {
    if (r["name"] == "deployments/scale") {
      deployments = true;
      EXPECT_EQ(r["group"], "autoscaling");
      EXPECT_EQ(r["version"], "v1");
      EXPECT_EQ(r["kind"], "Scale");
      EXPECT_EQ(r["verbs"], Json::parse(R"(["get","patch","update"])"));
    }
    if (r["name"] == "daemonsets/scale") daemonsets = true;
  }
  EXPECT_TRUE(deployments);
  EXPECT_FALSE(daemonsets);
}

}  // namespace
}  // namespace gpuop::simkube
