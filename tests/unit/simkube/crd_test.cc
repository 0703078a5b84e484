#include "sim/kube/crd.h"

#include <gtest/gtest.h>

namespace gpuop::simkube {
namespace {

// A ClusterPolicy-like CRD: nested objects, defaults, enums, required fields,
// int-or-string, a preserve-unknown-fields subtree, a map list, printer columns.
Json ClusterPolicyCrd() {
  return Json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusterpolicies.nvidia.com"},
    "spec": {
      "group": "nvidia.com", "scope": "Cluster",
      "names": {"plural": "clusterpolicies", "kind": "ClusterPolicy", "shortNames": ["cp"], "categories": ["gpu"]},
      "versions": [{
        "name": "v1", "served": true, "storage": true,
        "subresources": {"status": {}},
        "additionalPrinterColumns": [{"name": "Status", "type": "string", "jsonPath": ".status.state"},
                                     {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
        "schema": {"openAPIV3Schema": {
          "type": "object",
          "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {
              "type": "object", "required": ["operator"],
              "properties": {
                "operator": {"type": "object", "properties": {
                  "defaultRuntime": {"type": "string", "enum": ["docker", "crio", "containerd"], "default": "containerd"},
                  "runtimeClass": {"type": "string", "default": "nvidia"}}},
                "devicePlugin": {"type": "object", "default": {}, "properties": {
                  "enabled": {"type": "boolean", "default": true},
                  "replicas": {"type": "integer", "minimum": 0, "maximum": 3},
                  "maxUnavailable": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                  "env": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"}, "value": {"type": "string"}}}},
                  "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                  "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                  "version": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^v[0-9]+$"},
                  "note": {"type": "string", "nullable": true}}}}},
            "status": {"type": "object", "properties": {"state": {"type": "string"}}}}}}}]}})");
}

std::shared_ptr<const CompiledCrd> Compile(Json crd) {
  DefaultCrd(crd);
  auto errs = ValidateCrd(crd);
  for (const auto& e : errs) ADD_FAILURE() << e.ToString();
  auto c = CompiledCrd::Compile(crd);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

Json Policy(const char* spec) {
  Json p = Json::parse(
      R"({"apiVersion":"nvidia.com/v1","kind":"ClusterPolicy","metadata":{"name":"cluster-policy"}})");
  p["spec"] = Json::parse(spec);
  return p;
}

std::vector<std::string> Strings(const std::vector<FieldError>& errs) {
  std::vector<std::string> out;
  for (const FieldError& e : errs) out.push_back(e.ToString());
  return out;
}

TEST(CrdTest, DefaultsAndServedResources) {
  Json crd = ClusterPolicyCrd();
  DefaultCrd(crd);
  EXPECT_EQ(crd["spec"]["names"]["singular"], "clusterpolicy");
  EXPECT_EQ(crd["spec"]["names"]["listKind"], "ClusterPolicyList");
  EXPECT_EQ(crd["spec"]["conversion"]["strategy"], "None");
  auto c = Compile(ClusterPolicyCrd());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name(), "clusterpolicies.nvidia.com");
  EXPECT_FALSE(c->namespaced());
  const CrdVersion* v = c->Version("v1");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(c->StorageVersion(), v);
  EXPECT_EQ(c->Version("v2"), nullptr);
  const ResourceInfo& info = v->info;
  EXPECT_EQ(info.group, "nvidia.com");
  EXPECT_EQ(info.kind, "ClusterPolicy");
  EXPECT_EQ(info.plural, "clusterpolicies");
  EXPECT_EQ(info.singular, "clusterpolicy");
  EXPECT_EQ(info.list_kind, "ClusterPolicyList");
  EXPECT_FALSE(info.namespaced);
  EXPECT_EQ(info.short_names, std::vector<std::string>{"cp"});
  EXPECT_EQ(info.categories, std::vector<std::string>{"gpu"});
  EXPECT_TRUE(info.subresources.status);
  EXPECT_TRUE(info.custom);
  EXPECT_EQ(v->printer_columns.size(), 2u);
  auto crd_obj = std::make_shared<const Json>(crd);
  auto served = ServedResources(*c, crd_obj);
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0].crd_name, "clusterpolicies.nvidia.com");
  EXPECT_EQ(served[0].info.plural, "clusterpolicies");
  EXPECT_EQ(served[0].crd, crd_obj);
}

TEST(CrdTest, AcceptSetsEstablishedConditions) {
  Json crd = ClusterPolicyCrd();
  DefaultCrd(crd);
  AcceptCrd(crd, "2025-01-02T03:04:05Z");
  const Json& st = crd["status"];
  EXPECT_EQ(st["acceptedNames"]["kind"], "ClusterPolicy");
  EXPECT_EQ(st["acceptedNames"]["plural"], "clusterpolicies");
  EXPECT_EQ(st["storedVersions"], Json::parse(R"(["v1"])"));
  ASSERT_EQ(st["conditions"].size(), 2u);
  EXPECT_EQ(st["conditions"][0]["type"], "NamesAccepted");
  EXPECT_EQ(st["conditions"][0]["reason"], "NoConflicts");
  EXPECT_EQ(st["conditions"][1]["type"], "Established");
  EXPECT_EQ(st["conditions"][1]["status"], "True");
  EXPECT_EQ(st["conditions"][1]["lastTransitionTime"], "2025-01-02T03:04:05Z");
  // Accepting again keeps the transition time.
  AcceptCrd(crd, "2030-01-01T00:00:00Z");
  EXPECT_EQ(crd["status"]["conditions"][1]["lastTransitionTime"], "2025-01-02T03:04:05Z");
  EXPECT_EQ(crd["status"]["conditions"].size(), 2u);
}

TEST(CrdTest, ValidationOfTheCrdItself) {
  Json crd = ClusterPolicyCrd();
  crd["metadata"]["name"] = "policies.nvidia.com";
  crd["spec"]["group"] = "nvidia";
  crd["spec"]["scope"] = "Global";
  crd["spec"]["versions"][0]["storage"] = false;
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
     ["untyped"] = Json::object();
  DefaultCrd(crd);
  auto errs = Strings(ValidateCrd(crd));
  EXPECT_EQ(errs,
            (std::vector<std::string>{
                "metadata.name: Invalid value: \"policies.nvidia.com\": must be "
                "spec.names.plural+\".\"+spec.group",
                "spec.group: Invalid value: \"nvidia\": should be a domain with at least one dot",
                "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", "
                "\"Namespaced\"",
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[untyped].type:"
                " Required "
                "value: must not be empty for specified object fields",
                errs.size() > 4 ? errs[4] : ""}))
      << ::testing::PrintToString(errs);
  ASSERT_EQ(errs.size(), 5u);
  EXPECT_NE(errs[4].find("must have exactly one version marked as storage version"),
            std::string::npos);

  Json no_schema = ClusterPolicyCrd();
  no_schema["spec"]["versions"][0].erase("schema");
  DefaultCrd(no_schema);
  EXPECT_EQ(Strings(ValidateCrd(no_schema)),
            (std::vector<std::string>{
                "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"}));

  ApiStatus st = ValidateCrdObject(crd);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, 422);
  EXPECT_EQ(
      st.error().message.rfind(
          "CustomResourceDefinition.apiextensions.k8s.io \"policies.nvidia.com\" is invalid: [", 0),
      0u)
      << st.error().message;
}

TEST(CrdTest, DefaultsArePrunedAndApplied) {
  auto c = Compile(ClusterPolicyCrd());
  ASSERT_NE(c, nullptr);
  Json p = Policy(
      R"({"operator":{},"unknownTop":1,"devicePlugin":{"config":{"anything":{"goes":1}},"bogus":true}})");
  p["metadata"]["app"] = "x";
  CustomResourceFindings f = c->PrepareObject("v1", p);
  EXPECT_TRUE(f.errors.empty()) << ::testing::PrintToString(Strings(f.errors));
  EXPECT_EQ(f.unknown_fields, (std::vector<std::string>{"metadata.app", "spec.devicePlugin.bogus",
                                                        "spec.unknownTop"}));
  EXPECT_EQ(p["spec"]["operator"]["defaultRuntime"], "containerd");
  EXPECT_EQ(p["spec"]["operator"]["runtimeClass"], "nvidia");
  EXPECT_EQ(p["spec"]["devicePlugin"]["enabled"], true);
  EXPECT_EQ(p["spec"]["devicePlugin"]["config"]["anything"]["goes"], 1);
  EXPECT_FALSE(p["spec"].contains("unknownTop"));
  EXPECT_FALSE(p["metadata"].contains("app"));
  EXPECT_EQ(p["apiVersion"], "nvidia.com/v1");
  EXPECT_EQ(p["kind"], "ClusterPolicy");
  EXPECT_EQ(p["metadata"]["name"], "cluster-policy");

  // A default object is itself defaulted; nulls of non-nullable fields go.
  Json q = Policy(R"({"operator":{"defaultRuntime":null},"devicePlugin":null})");
  f = c->PrepareObject("v1", q);
  EXPECT_TRUE(f.errors.empty()) << ::testing::PrintToString(Strings(f.errors));
  EXPECT_EQ(q["spec"]["operator"]["defaultRuntime"], "containerd");
  EXPECT_EQ(q["spec"]["devicePlugin"], Json::parse(R"({"enabled":true})"));
  // A nullable field keeps its null.
  Json n = Policy(R"({"operator":{},"devicePlugin":{"note":null}})");
  f = c->PrepareObject("v1", n);
  EXPECT_TRUE(f.errors.empty());
  EXPECT_TRUE(n["spec"]["devicePlugin"]["note"].is_null());
}

TEST(CrdTest, ValidationErrorsReadLikeTheServer) {
  auto c = Compile(ClusterPolicyCrd());
  ASSERT_NE(c, nullptr);
  Json p = Policy(R"({"operator":{"defaultRuntime":"podman"},"devicePlugin":{"replicas":"three",
    "env":[{"name":"A"},{"name":"A"},{"value":"x"}],"labels":{"a":1},"version":"1.0.0-long",
    "maxUnavailable":"10%"}})");
  auto errs = Strings(c->PrepareObject("v1", p).errors);
  EXPECT_EQ(errs, (std::vector<std::string>{
                      "spec.devicePlugin.env[1]: Duplicate value: {\"name\":\"A\"}",
                      "spec.devicePlugin.env[2].name: Required value",
                      "spec.devicePlugin.labels.a: Invalid value: \"integer\": "
                      "spec.devicePlugin.labels.a in body "
                      "must be of type string: \"integer\"",
                      "spec.devicePlugin.replicas: Invalid value: \"string\": "
                      "spec.devicePlugin.replicas in body "
                      "must be of type integer: \"string\"",
                      "spec.devicePlugin.version: Too long: may not be more than 8 bytes",
                      "spec.devicePlugin.version: Invalid value: \"1.0.0-long\": "
                      "spec.devicePlugin.version in body "
                      "should match '^v[0-9]+$'",
                      "spec.operator.defaultRuntime: Unsupported value: \"podman\": supported "
                      "values: \"docker\", "
                      "\"crio\", \"containerd\""}))
      << ::testing::PrintToString(errs);

  Json bounds = Policy(R"({"operator":{},"devicePlugin":{"replicas":4,"maxUnavailable":true}})");
  errs = Strings(c->PrepareObject("v1", bounds).errors);
  EXPECT_EQ(errs, (std::vector<std::string>{"spec.devicePlugin.maxUnavailable: Invalid value: "
                                            "\"boolean\": spec.devicePlugin.maxUnavailable "
                                            "in body must be of type integer,string: \"boolean\"",
                                            "spec.devicePlugin.replicas: Invalid value: 4: "
                                            "spec.devicePlugin.replicas in body should be "
                                            "less than or equal to 3"}));

  Json missing = Policy(R"({})");
  missing["metadata"]["name"] = "Bad_Name";
  errs = Strings(c->PrepareObject("v1", missing).errors);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0], "spec.operator: Required value");
  EXPECT_EQ(errs[1].rfind(
                "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain", 0),
            0u);
}

TEST(CrdTest, FieldValidationModes) {
  auto c = Compile(ClusterPolicyCrd());
  ASSERT_NE(c, nullptr);
  std::vector<std::string> warnings;
  Json p = Policy(R"({"operator":{},"favoriteColor":"blue"})");
  ApiStatus st = PrepareCustomResource(*c, "v1", p, FieldValidation::kStrict, &warnings);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, 400);
  EXPECT_EQ(st.error().message,
            "ClusterPolicy in version \"v1\" cannot be handled as a ClusterPolicy: strict decoding "
            "error: "
            "unknown field \"spec.favoriteColor\"");

  p = Policy(R"({"operator":{},"favoriteColor":"blue"})");
  st = PrepareCustomResource(*c, "v1", p, FieldValidation::kWarn, &warnings);
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(warnings, std::vector<std::string>{"unknown field \"spec.favoriteColor\""});
  EXPECT_FALSE(p["spec"].contains("favoriteColor"));

  Json bad = Policy(R"({"operator":{"defaultRuntime":"podman"}})");
  st = PrepareCustomResource(*c, "v1", bad, FieldValidation::kIgnore, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, 422);
  EXPECT_EQ(st.error().message,
            "ClusterPolicy.nvidia.com \"cluster-policy\" is invalid: spec.operator.defaultRuntime: "
            "Unsupported "
            "value: \"podman\": supported values: \"docker\", \"crio\", \"containerd\"");
  ASSERT_TRUE(st.error().details.has_value());
  EXPECT_EQ(st.error().details->causes[0].field, "spec.operator.defaultRuntime");
}

TEST(CrdTest, NamespacedPreserveUnknownRoot) {
  Json crd =
      Json::parse(R"({"metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com",
    "scope":"Namespaced","names":{"plural":"widgets","kind":"Widget"},
    "versions":[{"name":"v1beta1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object"}}},
                {"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
                  "x-kubernetes-preserve-unknown-fields":true}}}]}})");
  auto c = Compile(crd);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->namespaced());
  EXPECT_EQ(c->versions().size(), 2u);
  Json w = Json::parse(
      R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"d"},
    "spec":{"anything":[1,2]}})");
  CustomResourceFindings f = c->PrepareObject("v1", w);
  EXPECT_TRUE(f.errors.empty());
  EXPECT_TRUE(f.unknown_fields.empty());
  EXPECT_EQ(w["spec"]["anything"], Json::parse("[1,2]"));
  // v1beta1 has no properties: everything but apiVersion/kind/metadata is pruned.
  Json w2 = w;
  w2["apiVersion"] = "example.com/v1beta1";
  f = c->PrepareObject("v1beta1", w2);
  EXPECT_EQ(f.unknown_fields, std::vector<std::string>{"spec"});
  EXPECT_FALSE(w2.contains("spec"));
  EXPECT_EQ(w2["metadata"]["namespace"], "d");
}

}  // namespace
}  // namespace gpuop::simkube
