#include "sim/kube/apply.h"

#include <gtest/gtest.h>

#include "sim/kube/crd.h"

namespace gpuop::simkube {
namespace {

const SchemaSet& Schemas() {
  static std::shared_ptr<const SchemaSet> set = [] {
    auto r = SchemaSet::LoadDirectory(std::string(GPUOP_SOURCE_DIR) + "/api/openapi/1.35");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nullptr;
  }();
  return *set;
}

ResourceInfo Info(std::string group, std::string kind, std::string plural, bool status) {
  ResourceInfo r;
  r.group = std::move(group);
  r.version = "v1";
  r.kind = std::move(kind);
  r.plural = std::move(plural);
  r.subresources.status = status;
  return r;
}

ApplyOptions Opts(std::string manager, bool force = false) {
  ApplyOptions o;
  o.field_manager = std::move(manager);
  o.force = force;
  o.now = "2025-01-02T03:04:05Z";
  return o;
}

const Json* Entry(const Json& obj, const std::string& manager, const std::string& op) {
  for (const Json& e : obj["metadata"]["managedFields"]) {
    if (e["manager"] == manager && e["operation"] == op) return &e;
  }
  return nullptr;
}

Json ConfigMap(const char* data) {
  Json cm = Json::parse(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"gpu"}})");
  cm["data"] = Json::parse(data);
  return cm;
}

TEST(FieldSetTest, UsesListTypesFromTheSchema) {
  const Schema* ds = Schemas().ForKind({"apps", "v1", "DaemonSet"});
  Json obj = Json::parse(R"({"apiVersion":"apps/v1","kind":"DaemonSet",
    "metadata":{"name":"x","namespace":"n","labels":{"app":"a"},"finalizers":["f"]},
    "spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"spec":{
      "containers":[{"name":"c","image":"i","args":["--x"]}]}}}})");
  FieldSet set = FieldSetOf(obj, ds);
  Json v1 = FieldSetToFieldsV1(set);
  EXPECT_EQ(v1, Json::parse(R"({
    "f:metadata":{"f:labels":{"f:app":{}},"f:finalizers":{"v:\"f\"":{}}},
    "f:spec":{"f:selector":{},
      "f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:args":{},"f:image":{},"f:name":{}}}}}}})"))
      << v1.dump();
  EXPECT_EQ(FieldSetFromFieldsV1(v1), set);
  EXPECT_EQ(FieldPathString({"f:spec", "f:template", "f:spec", "f:containers", "k:{\"name\":\"c\"}",
                             "f:image"}),
            ".spec.template.spec.containers[name=\"c\"].image");
  EXPECT_EQ(FieldPathString({"f:metadata", "f:finalizers", "v:\"f\""}),
            ".metadata.finalizers[=\"f\"]");
}

TEST(ServerSideApplyTest, CreatesWhenAbsent) {
  const Schema* schema = Schemas().ForKind({"", "v1", "ConfigMap"});
  auto r = ServerSideApply(nullptr, ConfigMap(R"({"a":"1"})"), schema,
                           Info("", "ConfigMap", "configmaps", false), Opts("kubectl"));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const Json& obj = *r;
  EXPECT_EQ(obj["apiVersion"], "v1");
  EXPECT_EQ(obj["kind"], "ConfigMap");
  EXPECT_EQ(obj["metadata"]["name"], "cfg");
  EXPECT_EQ(obj["data"]["a"], "1");
  ASSERT_EQ(obj["metadata"]["managedFields"].size(), 1u);
  const Json& e = obj["metadata"]["managedFields"][0];
  EXPECT_EQ(e["manager"], "kubectl");
  EXPECT_EQ(e["operation"], "Apply");
  EXPECT_EQ(e["apiVersion"], "v1");
  EXPECT_EQ(e["fieldsType"], "FieldsV1");
  EXPECT_EQ(e["time"], "2025-01-02T03:04:05Z");
  EXPECT_EQ(e["fieldsV1"], Json::parse(R"({"f:data":{"f:a":{}}})"));
}

TEST(ServerSideApplyTest, ReapplyRemovesFieldsNoLongerApplied) {
  const Schema* schema = Schemas().ForKind({"", "v1", "ConfigMap"});
  ResourceInfo info = Info("", "ConfigMap", "configmaps", false);
  auto first =
      ServerSideApply(nullptr, ConfigMap(R"({"a":"1","b":"2"})"), schema, info, Opts("kubectl"));
  ASSERT_TRUE(first.ok());
  auto second = ServerSideApply(&*first, ConfigMap(R"({"a":"1"})"), schema, info, Opts("kubectl"));
  ASSERT_TRUE(second.ok()) << second.error().ToString();
  EXPECT_EQ((*second)["data"], Json::parse(R"({"a":"1"})"));
  // Another manager's field stays.
  Json live = *second;
  Json updated = live;
  updated["data"]["c"] = "3";
  TrackUpdate(&live, updated, schema, "kubectl-edit", "", "2025-01-02T03:04:06Z");
  const Json* edit = Entry(updated, "kubectl-edit", "Update");
  ASSERT_NE(edit, nullptr);
  EXPECT_EQ((*edit)["fieldsV1"], Json::parse(R"({"f:data":{"f:c":{}}})"));
  auto third = ServerSideApply(&updated, ConfigMap(R"({"b":"2"})"), schema, info, Opts("kubectl"));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)["data"], Json::parse(R"({"b":"2","c":"3"})"));
}

TEST(ServerSideApplyTest, ConflictsAndForce) {
  const Schema* schema = Schemas().ForKind({"", "v1", "ConfigMap"});
  ResourceInfo info = Info("", "ConfigMap", "configmaps", false);
  auto mine = ServerSideApply(nullptr, ConfigMap(R"({"a":"1"})"), schema, info, Opts("alice"));
  ASSERT_TRUE(mine.ok());
  // Same value from another manager: shared ownership, no conflict.
  auto shared = ServerSideApply(&*mine, ConfigMap(R"({"a":"1"})"), schema, info, Opts("bob"));
  ASSERT_TRUE(shared.ok()) << shared.error().ToString();
  EXPECT_NE(Entry(*shared, "alice", "Apply"), nullptr);
  EXPECT_NE(Entry(*shared, "bob", "Apply"), nullptr);
  // A different value: 409.
  auto clash = ServerSideApply(&*mine, ConfigMap(R"({"a":"2"})"), schema, info, Opts("bob"));
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().code, 409);
  EXPECT_EQ(clash.error().reason, "Conflict");
  EXPECT_EQ(clash.error().message,
            "Apply failed with 1 conflict: conflict with \"alice\" using v1: .data.a");
  ASSERT_TRUE(clash.error().details.has_value());
  ASSERT_EQ(clash.error().details->causes.size(), 1u);
  EXPECT_EQ(clash.error().details->causes[0].type, "FieldManagerConflict");
  EXPECT_EQ(clash.error().details->causes[0].message, "conflict with \"alice\" using v1");
  EXPECT_EQ(clash.error().details->causes[0].field, ".data.a");
  // Force takes the field over.
  auto forced = ServerSideApply(&*mine, ConfigMap(R"({"a":"2"})"), schema, info, Opts("bob", true));
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ((*forced)["data"]["a"], "2");
  EXPECT_EQ(Entry(*forced, "alice", "Apply"), nullptr);  // no fields left
  EXPECT_EQ((*Entry(*forced, "bob", "Apply"))["fieldsV1"], Json::parse(R"({"f:data":{"f:a":{}}})"));
}

TEST(ServerSideApplyTest, SeveralConflictsListedPerManager) {
  const Schema* schema = Schemas().ForKind({"", "v1", "ConfigMap"});
  ResourceInfo info = Info("", "ConfigMap", "configmaps", false);
  // A live object with no managedFields belongs to "before-first-apply".
  Json live = ConfigMap(R"({"a":"1","b":"2"})");
  auto clash =
      ServerSideApply(&live, ConfigMap(R"({"a":"x","b":"y"})"), schema, info, Opts("kubectl"));
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().message,
            "Apply failed with 2 conflicts: conflicts with \"before-first-apply\" using v1:\n- "
            ".data.a\n- .data.b");
}

TEST(ServerSideApplyTest, NodeLabelsOwnedByLabelCommand) {
  const Schema* schema = Schemas().ForKind({"", "v1", "Node"});
  ResourceInfo info = Info("", "Node", "nodes", true);
  Json node = Json::parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1"},
    "status":{"capacity":{"nvidia.com/gpu":"8"}}})");
  Json labelled = node;
  labelled["metadata"]["labels"] = {{"nvidia.com/gpu.present", "true"}};
  TrackUpdate(&node, labelled, schema, "kubectl-label", "", "t1");
  Json applied = Json::parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-1",
    "labels":{"nvidia.com/gpu.present":"false","team":"ml"}}})");
  auto clash = ServerSideApply(&labelled, applied, schema, info, Opts("gpuop"));
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().message,
            "Apply failed with 1 conflict: conflict with \"kubectl-label\" using v1: "
            ".metadata.labels.nvidia.com/gpu.present");
  auto ok = ServerSideApply(&labelled, applied, schema, info, Opts("gpuop", true));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["metadata"]["labels"],
            Json::parse(R"({"nvidia.com/gpu.present":"false","team":"ml"})"));
  // Status is not applied through the main resource.
  EXPECT_EQ((*ok)["status"], node["status"]);
}

TEST(ServerSideApplyTest, DeploymentContainersMergeByKey) {
  const Schema* schema = Schemas().ForKind({"apps", "v1", "Deployment"});
  ResourceInfo info = Info("apps", "Deployment", "deployments", true);
  Json d = Json::parse(
      R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"op","namespace":"gpu"},
    "spec":{"replicas":1,"selector":{"matchLabels":{"app":"op"}},"template":{"metadata":{"labels":{"app":"op"}},
      "spec":{"containers":[{"name":"op","image":"gpuop:1"}]}}}})");
  auto first = ServerSideApply(nullptr, d, schema, info, Opts("kubectl"));
  ASSERT_TRUE(first.ok());
  // A sidecar added by someone else survives the next apply.
  Json live = *first;
  Json edited = live;
  edited["spec"]["template"]["spec"]["containers"].push_back(
      {{"name", "side"}, {"image", "busybox"}});
  TrackUpdate(&live, edited, schema, "injector", "", "t");
  Json d2 = d;
  d2["spec"]["template"]["spec"]["containers"][0]["image"] = "gpuop:2";
  auto second = ServerSideApply(&edited, d2, schema, info, Opts("kubectl"));
  ASSERT_TRUE(second.ok()) << second.error().ToString();
  const Json& cs = (*second)["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0]["image"], "gpuop:2");
  EXPECT_EQ(cs[1]["name"], "side");
  // Replicas changed by another manager: conflict names the full path.
  Json scaled = *second;
  scaled["spec"]["replicas"] = 3;
  TrackUpdate(&*second, scaled, schema, "kube-controller-manager", "", "t");
  auto clash = ServerSideApply(&scaled, d2, schema, info, Opts("kubectl"));
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().message,
            "Apply failed with 1 conflict: conflict with \"kube-controller-manager\" using "
            "apps/v1: .spec.replicas");
}

TEST(ServerSideApplyTest, CustomResourceWithCrdSchema) {
  Json crd =
      Json::parse(R"({"metadata":{"name":"clusterpolicies.nvidia.com"},"spec":{"group":"nvidia.com",
    "scope":"Cluster","names":{"plural":"clusterpolicies","kind":"ClusterPolicy"},
    "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
      "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{
        "toolkit":{"type":"object","properties":{"env":{"type":"array","x-kubernetes-list-type":"map",
          "x-kubernetes-list-map-keys":["name"],"items":{"type":"object","properties":{
            "name":{"type":"string"},"value":{"type":"string"}}}}}}}}}}}}]}})");
  DefaultCrd(crd);
  auto c = CompiledCrd::Compile(crd);
  ASSERT_TRUE(c.ok());
  const CrdVersion* v = (*c)->Version("v1");
  Json cp = Json::parse(
      R"({"apiVersion":"nvidia.com/v1","kind":"ClusterPolicy","metadata":{"name":"cluster-policy"},
    "spec":{"toolkit":{"env":[{"name":"A","value":"1"}]}},"status":{"state":"ignored"}})");
  auto first = ServerSideApply(nullptr, cp, v->schema, v->info, Opts("helm"));
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE((*first).contains("status"));
  EXPECT_EQ(
      (*Entry(*first, "helm", "Apply"))["fieldsV1"],
      Json::parse(
          R"({"f:spec":{"f:toolkit":{"f:env":{"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}}}}}})"));
  Json cp2 = cp;
  cp2["spec"]["toolkit"]["env"] = Json::parse(R"([{"name":"B","value":"2"}])");
  auto second = ServerSideApply(&*first, cp2, v->schema, v->info, Opts("gpuop"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)["spec"]["toolkit"]["env"].size(), 2u);
}

TEST(ServerSideApplyTest, StatusSubresource) {
  const Schema* schema = Schemas().ForKind({"", "v1", "Node"});
  ResourceInfo info = Info("", "Node", "nodes", true);
  Json node = Json::parse(
      R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"a":"1"}}})");
  ApplyOptions o = Opts("kubelet");
  o.subresource = "status";
  Json applied =
      Json::parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"a":"2"}},
    "status":{"conditions":[{"type":"Ready","status":"True"}]}})");
  auto r = ServerSideApply(&node, applied, schema, info, o);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ((*r)["metadata"]["labels"]["a"], "1");
  EXPECT_EQ((*r)["status"]["conditions"][0]["type"], "Ready");
  const Json* e = Entry(*r, "kubelet", "Apply");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ((*e)["subresource"], "status");
}

TEST(ServerSideApplyTest, BadRequests) {
  ResourceInfo info = Info("", "ConfigMap", "configmaps", false);
  auto r = ServerSideApply(nullptr, Json::array(), nullptr, info, Opts("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 400);
  r = ServerSideApply(nullptr, ConfigMap("{}"), nullptr, info, Opts(""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 400);
}

}  // namespace
}  // namespace gpuop::simkube
