// The emulator's resource registry, discovery documents and server-side
// printing (sim/kube/registry.h, discovery.h, table.h): pure functions and
// tables, no HTTP.
#include "sim/kube/registry.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/kube/discovery.h"
#include "sim/kube/table.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

TEST(RegistryTest, ServesTheBuiltinResourcesGpuopTouches) {
  Registry reg;
  struct Want {
    const char* group;
    const char* plural;
    const char* kind;
    bool namespaced;
  };
  for (const Want& w : std::vector<Want>{
           {"", "namespaces", "Namespace", false},
           {"", "nodes", "Node", false},
           {"", "pods", "Pod", true},
           {"", "services", "Service", true},
           {"", "serviceaccounts", "ServiceAccount", true},
           {"", "configmaps", "ConfigMap", true},
           {"", "secrets", "Secret", true},
           {"", "events", "Event", true},
           {"apps", "daemonsets", "DaemonSet", true},
           {"apps", "deployments", "Deployment", true},
           {"apps", "controllerrevisions", "ControllerRevision", true},
           {"rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", false},
           {"rbac.authorization.k8s.io", "roles", "Role", true},
           {"coordination.k8s.io", "leases", "Lease", true},
           {"node.k8s.io", "runtimeclasses", "RuntimeClass", false},
           {"apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", false},
           {"resource.k8s.io", "resourceslices", "ResourceSlice", false},
           {"resource.k8s.io", "deviceclasses", "DeviceClass", false},
           {"resource.k8s.io", "resourceclaims", "ResourceClaim", true},
           {"events.k8s.io", "events", "Event", true},
       }) {
    ServedPtr r = reg.Find(w.group, "v1", w.plural);
    ASSERT_NE(r, nullptr) << w.group << "/" << w.plural;
    EXPECT_EQ(r->info.kind, w.kind);
    EXPECT_EQ(r->info.namespaced, w.namespaced) << w.plural;
    EXPECT_EQ(r->info.list_kind, std::string(w.kind) + "List");
    EXPECT_FALSE(r->info.custom);
  }
  EXPECT_EQ(reg.Find("", "v1", "widgets"), nullptr);
  EXPECT_EQ(reg.Find("apps", "v2", "deployments"), nullptr);

  ServedPtr pods = reg.Find("", "v1", "pods");
  EXPECT_TRUE(pods->info.subresources.status);
  EXPECT_TRUE(pods->info.subresources.eviction);
  EXPECT_EQ(pods->info.short_names, std::vector<std::string>{"po"});
  EXPECT_TRUE(pods->info.graceful_deletion);
  EXPECT_TRUE(reg.Find("", "v1", "nodes")->info.subresources.status);
  EXPECT_TRUE(reg.Find("apps", "v1", "daemonsets")->info.tracks_generation);
  EXPECT_FALSE(reg.Find("", "v1", "namespaces")->info.HasVerb("deletecollection"));
  EXPECT_EQ(reg.FindKind("apps", "v1", "DaemonSet")->info.plural, "daemonsets");
}

TEST(RegistryTest, GroupsComeInDiscoveryOrderCoreFirst) {
  Registry reg;
  auto groups = reg.Groups();
  ASSERT_GE(groups.size(), 8u);
  EXPECT_EQ(groups[0].name, "");
  EXPECT_EQ(groups[1].name, "apps");
  for (const auto& g : groups) EXPECT_EQ(g.versions, std::vector<std::string>{"v1"}) << g.name;
}

ServedResource Widget(const std::string& version, const std::string& plural = "widgets") {
  ServedResource s;
  s.info.group = "example.com";
  s.info.version = version;
  s.info.kind = "Widget";
  s.info.plural = plural;
  s.info.singular = "widget";
  s.info.list_kind = "WidgetList";
  return s;
}

TEST(RegistryTest, CustomResourcesComeAndGoWithTheirCrd) {
  Registry reg;
  uint64_t gen = reg.generation();
  ASSERT_TRUE(reg.SetCustom("widgets.example.com", {Widget("v1"), Widget("v1beta1")}).ok());
  EXPECT_GT(reg.generation(), gen);
  ServedPtr w = reg.Find("example.com", "v1", "widgets");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->info.custom);
  EXPECT_EQ(w->crd_name, "widgets.example.com");
  auto versions = reg.FindAllVersions("example.com", "widgets");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0]->info.version, "v1");  // GA before beta
  auto groups = reg.Groups();
  EXPECT_EQ(groups.back().name, "example.com");
  EXPECT_EQ(groups.back().versions, (std::vector<std::string>{"v1", "v1beta1"}));

  // Updating the CRD replaces what it serves.
  ASSERT_TRUE(reg.SetCustom("widgets.example.com", {Widget("v2")}).ok());
  EXPECT_EQ(reg.Find("example.com", "v1", "widgets"), nullptr);
  EXPECT_NE(reg.Find("example.com", "v2", "widgets"), nullptr);
  // A snapshot taken before stays valid.
  EXPECT_EQ(w->info.version, "v1");

  reg.RemoveCustom("widgets.example.com");
  EXPECT_EQ(reg.Find("example.com", "v2", "widgets"), nullptr);
  EXPECT_TRUE(reg.FindAllVersions("example.com", "widgets").empty());
}

TEST(RegistryTest, RefusesAPluralServedByAnotherCrdOrABuiltin) {
  Registry reg;
  ASSERT_TRUE(reg.SetCustom("widgets.example.com", {Widget("v1")}).ok());
  Status s = reg.SetCustom("other.example.com", {Widget("v1")});
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("widgets.example.com"), std::string::npos) << s.message();
  ServedResource pods = Widget("v1", "pods");
  pods.info.group = "";
  EXPECT_FALSE(reg.SetCustom("pods.core", {pods}).ok());
  EXPECT_EQ(reg.Find("", "v1", "pods")->crd_name, "");
}

TEST(RegistryTest, VersionPriorityFollowsKubernetes) {
  std::vector<std::string> v{"v1alpha1", "v1beta2", "v2", "foo", "v1", "v1beta1", "v10"};
  std::sort(v.begin(), v.end(), VersionPriorityLess);
  EXPECT_EQ(v,
            (std::vector<std::string>{"v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"}));
}

TEST(DiscoveryTest, LegacyDocumentsListResourcesAndSubresources) {
  Registry reg;
  Json core = ApiResourceList(reg, "", "v1");
  EXPECT_EQ(core["kind"], "APIResourceList");
  EXPECT_EQ(core["groupVersion"], "v1");
  std::map<std::string, Json> by_name;
  for (const auto& r : core["resources"]) by_name[r["name"]] = r;
  ASSERT_TRUE(by_name.count("pods"));
  EXPECT_EQ(by_name["pods"]["namespaced"], true);
  EXPECT_EQ(by_name["pods"]["shortNames"], Json({"po"}));
  EXPECT_EQ(by_name["pods/status"]["verbs"], Json({"get", "patch", "update"}));
  EXPECT_EQ(by_name["pods/eviction"]["group"], "policy");
  EXPECT_EQ(by_name["pods/eviction"]["kind"], "Eviction");
  EXPECT_EQ(by_name["nodes"]["namespaced"], false);

  Json groups = ApiGroupList(reg);
  EXPECT_EQ(groups["kind"], "APIGroupList");
  bool apps = false;
  for (const auto& g : groups["groups"]) {
    EXPECT_NE(g["name"], "");
    if (g["name"] == "apps") {
      apps = true;
      EXPECT_EQ(g["preferredVersion"]["groupVersion"], "apps/v1");
    }
  }
  EXPECT_TRUE(apps);
  EXPECT_EQ(ApiGroup(reg, "resource.k8s.io")["versions"][0]["version"], "v1");
  EXPECT_TRUE(ApiGroup(reg, "nope.example.com").is_null());
  EXPECT_TRUE(ApiResourceList(reg, "apps", "v2").is_null());
  EXPECT_EQ(VersionInfo()["gitVersion"], "v1.35.0");
}

TEST(DiscoveryTest, AggregatedDiscoveryIsChosenByTheAcceptHeader) {
  // What client-go sends.
  std::string accept =
      "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
      "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
      "application/json";
  EXPECT_EQ(AggregatedDiscoveryVersion(accept), "v2");
  EXPECT_EQ(AggregatedDiscoveryVersion("application/json"), "");
  EXPECT_EQ(AggregatedDiscoveryVersion(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
            "v2beta1");
  EXPECT_EQ(AggregatedContentType("v2"),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");

  Registry reg;
  Json core = AggregatedDiscovery(reg, /*legacy=*/true, "v2");
  EXPECT_EQ(core["apiVersion"], "apidiscovery.k8s.io/v2");
  ASSERT_EQ(core["items"].size(), 1u);
  const Json& v1 = core["items"][0]["versions"][0];
  EXPECT_EQ(v1["version"], "v1");
  EXPECT_EQ(v1["freshness"], "Current");
  bool pods = false;
  for (const auto& r : v1["resources"]) {
    if (r["resource"] != "pods") continue;
    pods = true;
    EXPECT_EQ(r["scope"], "Namespaced");
    EXPECT_EQ(r["responseKind"], Json({{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}));
    EXPECT_EQ(r["subresources"].size(), 2u);
  }
  EXPECT_TRUE(pods);
  Json apis = AggregatedDiscovery(reg, /*legacy=*/false, "v2");
  for (const auto& g : apis["items"]) EXPECT_NE(g["metadata"].value("name", ""), "");
}

TEST(TableTest, AcceptHeaderAsksForATable) {
  EXPECT_TRUE(WantsTable("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
  EXPECT_TRUE(WantsTable("application/json; as=Table; v=v1beta1; g=meta.k8s.io"));
  EXPECT_FALSE(WantsTable("application/json"));
  EXPECT_FALSE(WantsTable(""));
}

TEST(TableTest, HumanDurationMatchesApimachinery) {
  using std::chrono::seconds;
  EXPECT_EQ(HumanDuration(seconds(-5)), "<invalid>");
  EXPECT_EQ(HumanDuration(seconds(0)), "0s");
  EXPECT_EQ(HumanDuration(seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(seconds(200)), "3m20s");
  EXPECT_EQ(HumanDuration(seconds(600)), "10m");
  EXPECT_EQ(HumanDuration(seconds(3 * 3600 + 60)), "3h1m");
  EXPECT_EQ(HumanDuration(seconds(30 * 3600)), "30h");
  EXPECT_EQ(HumanDuration(seconds(3 * 86400 + 3600)), "3d1h");
  EXPECT_EQ(HumanDuration(seconds(100 * 86400)), "100d");
  EXPECT_EQ(HumanDuration(seconds(int64_t{3} * 365 * 86400 + 86400)), "3y1d");
}

TEST(TableTest, JsonPathSubsetOfPrinterColumns) {
  Json obj = Json::parse(R"({"spec":{"size":3,"ports":[{"port":80},{"port":443}]},
    "status":{"conditions":[{"type":"Ready","status":"True"},{"type":"Synced","status":"False"}]},
    "metadata":{"labels":{"a.b/c":"x"}}})");
  EXPECT_EQ(EvalJsonPath(obj, ".spec.size"), std::vector<Json>{3});
  EXPECT_EQ(EvalJsonPath(obj, ".spec.ports[1].port"), std::vector<Json>{443});
  EXPECT_EQ(EvalJsonPath(obj, ".spec.ports[*].port"), (std::vector<Json>{80, 443}));
  EXPECT_EQ(EvalJsonPath(obj, ".status.conditions[?(@.type==\"Ready\")].status"),
            std::vector<Json>{"True"});
  EXPECT_EQ(EvalJsonPath(obj, ".status.conditions[?(@.type=='Synced')].status"),
            std::vector<Json>{"False"});
  EXPECT_EQ(EvalJsonPath(obj, ".metadata.labels['a.b/c']"), std::vector<Json>{"x"});
  EXPECT_TRUE(EvalJsonPath(obj, ".spec.missing").empty());
  EXPECT_TRUE(EvalJsonPath(obj, ".spec.ports[7]").empty());
}

TEST(TableTest, NodesGetTheStandardColumns) {
  Registry reg;
  Json node = Json::parse(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n1",
    "creationTimestamp":"2026-01-01T00:00:00Z","labels":{"node-role.kubernetes.io/worker":""}},
    "spec":{"unschedulable":true},
    "status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.35.0"}}})");
  TableOptions to;
  to.now = std::chrono::system_clock::from_time_t(1767225600 + 300);  // +5m
  Json t = ToTable(*reg.Find("", "v1", "nodes"), {node}, to);
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["apiVersion"], "meta.k8s.io/v1");
  std::vector<std::string> names;
  for (const auto& c : t["columnDefinitions"]) {
    if (c["priority"] == 0) names.push_back(c["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Status", "Roles", "Age", "Version"}));
  ASSERT_EQ(t["rows"].size(), 1u);
  const Json& cells = t["rows"][0]["cells"];
  EXPECT_EQ(cells[0], "n1");
  EXPECT_EQ(cells[1], "Ready,SchedulingDisabled");
  EXPECT_EQ(cells[2], "worker");
  EXPECT_EQ(cells[3], "5m");
  EXPECT_EQ(cells[4], "v1.35.0");
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(t["rows"][0]["object"]["metadata"]["name"], "n1");

  to.include_object = "None";
  to.include_headers = false;
  Json bare = ToTable(*reg.Find("", "v1", "nodes"), {node}, to);
  EXPECT_TRUE(bare["columnDefinitions"].empty());
  EXPECT_FALSE(bare["rows"][0].contains("object"));
}

TEST(TableTest, CustomResourcesUseTheirPrinterColumns) {
  ServedResource w = Widget("v1");
  w.info.custom = true;
  w.printer_columns = Json::parse(R"([{"name":"Size","type":"integer","jsonPath":".spec.size"},
    {"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status",
     "priority":1}])");
  Json obj = Json::parse(R"({"metadata":{"name":"w1"},"spec":{"size":7},
    "status":{"conditions":[{"type":"Ready","status":"True"}]}})");
  Json t = ToTable(w, {obj}, TableOptions{});
  ASSERT_EQ(t["columnDefinitions"].size(), 3u);
  EXPECT_EQ(t["columnDefinitions"][1]["name"], "Size");
  EXPECT_EQ(t["columnDefinitions"][2]["priority"], 1);
  EXPECT_EQ(t["rows"][0]["cells"], Json({"w1", 7, "True"}));

  w.printer_columns = Json::array();  // none: Name and Age
  Json plain = ToTable(w, {obj}, TableOptions{});
  ASSERT_EQ(plain["columnDefinitions"].size(), 2u);
  EXPECT_EQ(plain["columnDefinitions"][1]["name"], "Age");
}

}  // namespace
}  // namespace gpuop::simkube
