#include "sim/kube/strategic_merge.h"

#include <gtest/gtest.h>

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

const Schema* Pod() { return Schemas().ForKind({"", "v1", "Pod"}); }
const Schema* Node() { return Schemas().ForKind({"", "v1", "Node"}); }
const Schema* DaemonSet() { return Schemas().ForKind({"apps", "v1", "DaemonSet"}); }
const Schema* Deployment() { return Schemas().ForKind({"apps", "v1", "Deployment"}); }

Json Patch(const Json& original, const char* patch, const Schema* schema) {
  auto r = StrategicMergePatch(original, Json::parse(patch), schema);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Json();
}

Json PodObject() {
  return Json::parse(R"({
    "apiVersion":"v1","kind":"Pod",
    "metadata":{"name":"p","labels":{"app":"x","tier":"gpu"},"finalizers":["a"]},
    "spec":{
      "containers":[
        {"name":"main","image":"gpuop:1","args":["--a","--b"],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},
        {"name":"side","image":"busybox"}],
      "tolerations":[{"key":"nvidia.com/gpu","operator":"Exists"}],
      "volumes":[{"name":"host","hostPath":{"path":"/"}}]}})");
}

TEST(StrategicMergeTest, MapsMergeAndNullDeletes) {
  Json out = Patch(PodObject(), R"({"metadata":{"labels":{"tier":null,"new":"y"}}})", Pod());
  EXPECT_EQ(out["metadata"]["labels"], Json::parse(R"({"app":"x","new":"y"})"));
  EXPECT_EQ(out["spec"], PodObject()["spec"]);
}

TEST(StrategicMergeTest, ContainersMergeByName) {
  Json out = Patch(PodObject(), R"({"spec":{"containers":[{"name":"main","image":"gpuop:2"},
    {"name":"new","image":"x"}]}})",
                   Pod());
  const Json& cs = out["spec"]["containers"];
  ASSERT_EQ(cs.size(), 3u);
  EXPECT_EQ(cs[0]["image"], "gpuop:2");
  EXPECT_EQ(cs[0]["args"], Json::parse(R"(["--a","--b"])"));  // untouched fields stay
  EXPECT_EQ(cs[1]["name"], "side");
  EXPECT_EQ(cs[2]["name"], "new");
}

TEST(StrategicMergeTest, NestedMergeKeysAndReplacedPrimitiveLists) {
  Json out = Patch(PodObject(), R"({"spec":{"containers":[{"name":"main",
    "env":[{"name":"B","value":"two"},{"name":"C","value":"3"}],"args":["--c"]}]}})",
                   Pod());
  const Json& main = out["spec"]["containers"][0];
  EXPECT_EQ(
      main["env"],
      Json::parse(
          R"([{"name":"A","value":"1"},{"name":"B","value":"two"},{"name":"C","value":"3"}])"));
  // args has no patch strategy: replaced.
  EXPECT_EQ(main["args"], Json::parse(R"(["--c"])"));
  // tolerations has no merge key: replaced.
  out = Patch(PodObject(), R"({"spec":{"tolerations":[{"key":"x","operator":"Exists"}]}})", Pod());
  EXPECT_EQ(out["spec"]["tolerations"].size(), 1u);
  EXPECT_EQ(out["spec"]["tolerations"][0]["key"], "x");
}

TEST(StrategicMergeTest, DeleteDirectiveInList) {
  Json out =
      Patch(PodObject(), R"({"spec":{"containers":[{"name":"side","$patch":"delete"}]}})", Pod());
  ASSERT_EQ(out["spec"]["containers"].size(), 1u);
  EXPECT_EQ(out["spec"]["containers"][0]["name"], "main");
}

TEST(StrategicMergeTest, ReplaceDirectives) {
  // In a list: the patch list replaces the original.
  Json out =
      Patch(PodObject(),
            R"({"spec":{"containers":[{"name":"only","image":"x"},{"$patch":"replace"}]}})", Pod());
  EXPECT_EQ(out["spec"]["containers"], Json::parse(R"([{"name":"only","image":"x"}])"));
  // In a map: the map is replaced.
  out = Patch(PodObject(), R"({"metadata":{"labels":{"$patch":"replace","only":"1"}}})", Pod());
  EXPECT_EQ(out["metadata"]["labels"], Json::parse(R"({"only":"1"})"));
  // Delete a whole map.
  out = Patch(PodObject(), R"({"metadata":{"labels":{"$patch":"delete"}}})", Pod());
  EXPECT_FALSE(out["metadata"].contains("labels"));
  // Unknown directive.
  auto bad = StrategicMergePatch(PodObject(),
                                 Json::parse(R"({"metadata":{"$patch":"frobnicate"}})"), Pod());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("frobnicate"), std::string::npos);
}

TEST(StrategicMergeTest, PrimitiveMergeListsAndDeleteFromPrimitiveList) {
  Json out = Patch(PodObject(), R"({"metadata":{"finalizers":["b","a"]}})", Pod());
  EXPECT_EQ(out["metadata"]["finalizers"], Json::parse(R"(["a","b"])"));
  out = Patch(out, R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}})", Pod());
  EXPECT_EQ(out["metadata"]["finalizers"], Json::parse(R"(["b"])"));
}

TEST(StrategicMergeTest, SetElementOrder) {
  Json out = Patch(PodObject(), R"({"spec":{
    "$setElementOrder/containers":[{"name":"side"},{"name":"main"}],
    "containers":[{"name":"main","image":"gpuop:3"}]}})",
                   Pod());
  const Json& cs = out["spec"]["containers"];
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0]["name"], "side");
  EXPECT_EQ(cs[1]["name"], "main");
  EXPECT_EQ(cs[1]["image"], "gpuop:3");
  EXPECT_FALSE(out["spec"].contains("$setElementOrder/containers"));
}

TEST(StrategicMergeTest, RetainKeysClearsOtherFields) {
  // volumes are merge,retainKeys: switching a volume source drops the old one.
  Json out = Patch(
      PodObject(),
      R"({"spec":{"volumes":[{"name":"host","$retainKeys":["name","emptyDir"],"emptyDir":{}}]}})",
      Pod());
  EXPECT_EQ(out["spec"]["volumes"], Json::parse(R"([{"name":"host","emptyDir":{}}])"));
  // Deployment strategy is retainKeys.
  Json d = Json::parse(
      R"({"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}}}})");
  out =
      Patch(d, R"({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}})", Deployment());
  EXPECT_EQ(out["spec"]["strategy"], Json::parse(R"({"type":"Recreate"})"));
}

TEST(StrategicMergeTest, NodeTaintsAreReplacedAndConditionsMergeByType) {
  Json node = Json::parse(R"({"metadata":{"name":"n","labels":{"a":"1"}},
    "spec":{"taints":[{"key":"a","effect":"NoSchedule"},{"key":"b","effect":"NoExecute"}]},
    "status":{"conditions":[{"type":"Ready","status":"True"},{"type":"DiskPressure","status":"False"}]}})");
  Json out = Patch(node, R"({"spec":{"taints":[{"key":"c","effect":"NoSchedule"}]},
    "status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletDown"}]},
    "metadata":{"labels":{"nvidia.com/gpu.present":"true"}}})",
                   Node());
  EXPECT_EQ(out["spec"]["taints"], Json::parse(R"([{"key":"c","effect":"NoSchedule"}])"));
  ASSERT_EQ(out["status"]["conditions"].size(), 2u);
  EXPECT_EQ(out["status"]["conditions"][0],
            Json::parse(R"({"type":"Ready","status":"False","reason":"KubeletDown"})"));
  EXPECT_EQ(out["metadata"]["labels"]["a"], "1");
  EXPECT_EQ(out["metadata"]["labels"]["nvidia.com/gpu.present"], "true");
}

TEST(StrategicMergeTest, DaemonSetTemplate) {
  Json ds = Json::parse(R"({"spec":{"template":{"metadata":{"annotations":{"a":"1"}},"spec":{
    "containers":[{"name":"dp","image":"gpuop:1","env":[{"name":"MIG_STRATEGY","value":"single"}]}],
    "nodeSelector":{"nvidia.com/gpu.present":"true"}}}}})");
  // kubectl rollout restart's patch.
  Json out = Patch(
      ds,
      R"({"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2025-01-01T00:00:00Z"}}}}})",
      DaemonSet());
  EXPECT_EQ(out["spec"]["template"]["metadata"]["annotations"].size(), 2u);
  out = Patch(ds, R"({"spec":{"template":{"spec":{"containers":[{"name":"dp",
    "env":[{"name":"MIG_STRATEGY","value":"mixed"}]}]}}}})",
              DaemonSet());
  EXPECT_EQ(out["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"], "mixed");
  EXPECT_EQ(out["spec"]["template"]["spec"]["containers"][0]["image"], "gpuop:1");
}

TEST(StrategicMergeTest, MissingMergeKeyIsAnError) {
  auto r = StrategicMergePatch(PodObject(),
                               Json::parse(R"({"spec":{"containers":[{"image":"x"}]}})"), Pod());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "map: map[image:x] does not contain declared merge key: name");
  EXPECT_FALSE(StrategicMergePatch(PodObject(), Json::array(), Pod()).ok());
}

TEST(StrategicMergeTest, WithoutSchemaBehavesLikeMergePatch) {
  Json out = Patch(Json::parse(R"({"a":{"b":1,"c":2},"l":[1,2]})"),
                   R"({"a":{"b":null,"d":3},"l":[3]})", nullptr);
  EXPECT_EQ(out, Json::parse(R"({"a":{"c":2,"d":3},"l":[3]})"));
  // New maps land without their directives.
  out = Patch(Json::object(), R"({"m":{"$patch":"merge","x":1}})", nullptr);
  EXPECT_EQ(out, Json::parse(R"({"m":{"x":1}})"));
}

TEST(StrategicMergeTest, CustomResourcesAre415) {
  EXPECT_EQ(
      UnsupportedMediaTypeMessage(CustomResourcePatchTypes()),
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
}

TEST(StrategicMergeForResourceTest, BuiltinsPatchAndCustomResourcesRefuse) {
  ResourceInfo node;
  node.version = "v1";
  node.kind = "Node";
  node.plural = "nodes";
  auto r = StrategicMergeForResource(Schemas(), Json::parse(R"({"metadata":{"name":"n"}})"),
                                     Json::parse(R"({"metadata":{"labels":{"a":"b"}}})"), node);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["metadata"]["labels"]["a"], "b");
  auto bad = StrategicMergeForResource(
      Schemas(), PodObject(), Json::parse(R"({"spec":{"containers":[{"image":"x"}]}})"),
      ResourceInfo{.version = "v1", .kind = "Pod", .plural = "pods"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 400);
  ResourceInfo cr;
  cr.group = "nvidia.com";
  cr.version = "v1";
  cr.kind = "ClusterPolicy";
  cr.plural = "clusterpolicies";
  cr.custom = true;
  auto refused = StrategicMergeForResource(Schemas(), Json::object(), Json::object(), cr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, 415);
  EXPECT_EQ(refused.error().reason, "UnsupportedMediaType");
}

}  // namespace
}  // namespace gpuop::simkube
