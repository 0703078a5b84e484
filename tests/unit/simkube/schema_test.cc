#include "sim/kube/schema.h"

#include <gtest/gtest.h>

namespace gpuop::simkube {
namespace {

const SchemaSet& Schemas() {
  static std::shared_ptr<const SchemaSet> set = [] {
    auto r = SchemaSet::LoadDirectory(std::string(GPUOP_SOURCE_DIR) + "/api/openapi/1.35");
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      return std::shared_ptr<const SchemaSet>();
    }
    return *r;
  }();
  return *set;
}

const Schema& Kind(const std::string& api_version, const std::string& kind) {
  const Schema* s = Schemas().ForKind(GroupVersionKind::FromApiVersion(api_version, kind));
  EXPECT_NE(s, nullptr) << api_version << " " << kind;
  static Schema empty;
  return s ? *s : empty;
}

std::vector<std::string> Strings(const std::vector<FieldError>& errs) {
  std::vector<std::string> out;
  for (const FieldError& e : errs) out.push_back(e.ToString());
  return out;
}

ResourceInfo Info(std::string group, std::string kind, bool namespaced) {
  ResourceInfo r;
  r.group = std::move(group);
  r.version = "v1";
  r.kind = std::move(kind);
  r.namespaced = namespaced;
  return r;
}

Json Deployment() {
  return Json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
    "spec": {
      "replicas": 2,
      "selector": {"matchLabels": {"app": "web"}},
      "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
      "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                                 "ports": [{"containerPort": 80}],
                                 "resources": {"limits": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1}}}]}}}
  })");
}

TEST(SchemaSetTest, LoadsEveryKindGpuopUses) {
  for (auto [av, kind] : std::vector<std::pair<std::string, std::string>>{
           {"v1", "Namespace"},
           {"v1", "Node"},
           {"v1", "Pod"},
           {"v1", "ConfigMap"},
           {"v1", "Secret"},
           {"v1", "Service"},
           {"v1", "ServiceAccount"},
           {"v1", "Event"},
           {"apps/v1", "DaemonSet"},
           {"apps/v1", "Deployment"},
           {"apps/v1", "ControllerRevision"},
           {"rbac.authorization.k8s.io/v1", "ClusterRole"},
           {"rbac.authorization.k8s.io/v1", "RoleBinding"},
           {"coordination.k8s.io/v1", "Lease"},
           {"node.k8s.io/v1", "RuntimeClass"},
           {"apiextensions.k8s.io/v1", "CustomResourceDefinition"},
           {"resource.k8s.io/v1", "ResourceSlice"},
           {"resource.k8s.io/v1", "DeviceClass"}}) {
    const Schema& s = Kind(av, kind);
    EXPECT_EQ(s.type, SchemaType::kObject) << kind;
    EXPECT_TRUE(s.properties.count("metadata")) << kind;
  }
  EXPECT_EQ(Schemas().ForKind({"", "v1", "DeleteOptions"}), nullptr);
}

TEST(SchemaSetTest, ResolvesRefsAndKeepsPropertyExtensions) {
  const Schema& pod = Kind("v1", "Pod");
  const Schema* spec = pod.Child("spec");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->go_name, "PodSpec");
  const Schema* containers = spec->Child("containers");
  ASSERT_NE(containers, nullptr);
  EXPECT_EQ(containers->type, SchemaType::kArray);
  EXPECT_EQ(containers->patch_merge_key, "name");
  EXPECT_TRUE(containers->HasPatchStrategy("merge"));
  EXPECT_EQ(containers->list_type, "map");
  ASSERT_NE(containers->items, nullptr);
  EXPECT_EQ(containers->items->go_name, "Container");
  EXPECT_EQ(containers->items->Child("image")->type, SchemaType::kString);
  const Schema* volumes = spec->Child("volumes");
  EXPECT_TRUE(volumes->HasPatchStrategy("retainKeys"));
  // Node taints are atomic, with no merge key.
  const Schema* taints = Kind("v1", "Node").Child("spec")->Child("taints");
  EXPECT_EQ(taints->list_type, "atomic");
  EXPECT_TRUE(taints->patch_merge_key.empty());
  // Maps, int-or-string, quantities.
  const Schema* labels = pod.Child("metadata")->Child("labels");
  EXPECT_TRUE(labels->IsMap());
  const Schema* limits = containers->items->Child("resources")->Child("limits");
  EXPECT_EQ(limits->additional_properties->type, SchemaType::kQuantity);
  const Schema* max_surge = Kind("apps/v1", "Deployment")
                                .Child("spec")
                                ->Child("strategy")
                                ->Child("rollingUpdate")
                                ->Child("maxSurge");
  EXPECT_EQ(max_surge->type, SchemaType::kIntOrString);
  // LabelSelector is an atomic map type.
  EXPECT_EQ(Kind("apps/v1", "DaemonSet").Child("spec")->Child("selector")->map_type, "atomic");
}

TEST(DecodeBuiltinTest, AcceptsAValidDeployment) {
  Json d = Deployment();
  Json before = d;
  DecodeFindings f = DecodeBuiltin(Kind("apps/v1", "Deployment"), d);
  EXPECT_TRUE(f.unknown_fields.empty());
  EXPECT_TRUE(f.decode_error.empty()) << f.decode_error;
  EXPECT_EQ(d, before);
}

TEST(DecodeBuiltinTest, DropsAndReportsUnknownFieldsWithIndices) {
  Json svc = Json::parse(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s","app":"x"},
    "spec":{"ports":[{"port":80,"nodeport":30000}],"foo":1}})");
  DecodeFindings f = DecodeBuiltin(Kind("v1", "Service"), svc);
  EXPECT_EQ(f.unknown_fields,
            (std::vector<std::string>{"metadata.app", "spec.foo", "spec.ports[0].nodeport"}));
  EXPECT_FALSE(svc["metadata"].contains("app"));
  EXPECT_FALSE(svc["spec"].contains("foo"));
  EXPECT_EQ(svc["spec"]["ports"][0], Json::parse(R"({"port":80})"));
  EXPECT_EQ(StrictDecodingMessage(f),
            "strict decoding error: unknown field \"metadata.app\", unknown field \"spec.foo\", "
            "unknown field \"spec.ports[0].nodeport\"");
  EXPECT_EQ(UnknownFieldWarnings(f)[1], "unknown field \"spec.foo\"");
}

TEST(DecodeBuiltinTest, TypeErrorsReadLikeGo) {
  Json d = Deployment();
  d["spec"]["replicas"] = "three";
  DecodeFindings f = DecodeBuiltin(Kind("apps/v1", "Deployment"), d);
  EXPECT_EQ(f.decode_error,
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of "
            "type int32");
  EXPECT_EQ(
      CannotHandleMessage({"apps", "v1", "Deployment"}, f.decode_error),
      "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal "
      "string into Go struct field DeploymentSpec.spec.replicas of type int32");

  Json d2 = Deployment();
  d2["spec"]["template"]["spec"]["containers"][0]["image"] = 5;
  f = DecodeBuiltin(Kind("apps/v1", "Deployment"), d2);
  EXPECT_EQ(f.decode_error,
            "json: cannot unmarshal number into Go struct field "
            "Container.spec.template.spec.containers.image "
            "of type string");

  Json d3 = Deployment();
  d3["spec"]["replicas"] = 1.5;
  f = DecodeBuiltin(Kind("apps/v1", "Deployment"), d3);
  EXPECT_NE(f.decode_error.find("cannot unmarshal number 1.5"), std::string::npos);

  Json ns = Json::parse(R"({"metadata":{"name":"x","labels":{"a":1}}})");
  f = DecodeBuiltin(Kind("v1", "Namespace"), ns);
  EXPECT_NE(f.decode_error.find("of type string"), std::string::npos) << f.decode_error;
}

TEST(DecodeBuiltinTest, QuantitiesIntOrStringAndBase64) {
  Json d = Deployment();
  d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "lots";
  DecodeFindings f = DecodeBuiltin(Kind("apps/v1", "Deployment"), d);
  EXPECT_NE(f.decode_error.find("quantities must match the regular expression"), std::string::npos);

  Json d2 = Deployment();
  d2["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = true;
  f = DecodeBuiltin(Kind("apps/v1", "Deployment"), d2);
  EXPECT_NE(f.decode_error.find("intstr.IntOrString"), std::string::npos) << f.decode_error;

  Json secret = Json::parse(R"({"metadata":{"name":"s"},"data":{"ok":"aGVsbG8=","bad":"!!!!"}})");
  f = DecodeBuiltin(Kind("v1", "Secret"), secret);
  EXPECT_EQ(f.decode_error, "illegal base64 data at input byte 0");
}

TEST(DecodeBuiltinTest, NullsAndFreeFormFieldsPass) {
  Json cr = Json::parse(R"({"metadata":{"name":"c","labels":null},
    "data":{"raw":"x"},"revision":1})");
  DecodeFindings f = DecodeBuiltin(Kind("apps/v1", "ControllerRevision"), cr);
  EXPECT_TRUE(f.decode_error.empty()) << f.decode_error;
  EXPECT_TRUE(f.unknown_fields.empty());
  // CRD schemas (JSONSchemaProps) are recursive and free-form where JSON.
  Json crd = Json::parse(R"({"metadata":{"name":"a.b.c"},"spec":{"group":"b.c","scope":"Cluster",
    "names":{"plural":"a","kind":"A"},"versions":[{"name":"v1","served":true,"storage":true,
    "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
    "properties":{"x":{"type":"integer","default":3}}}}}}}]}})");
  f = DecodeBuiltin(Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd);
  EXPECT_TRUE(f.decode_error.empty()) << f.decode_error;
  EXPECT_TRUE(f.unknown_fields.empty()) << f.unknown_fields[0];
}

TEST(FieldValidationTest, Parses) {
  EXPECT_EQ(*ParseFieldValidation(""), FieldValidation::kWarn);
  EXPECT_EQ(*ParseFieldValidation("Strict"), FieldValidation::kStrict);
  EXPECT_EQ(*ParseFieldValidation("Ignore"), FieldValidation::kIgnore);
  EXPECT_FALSE(ParseFieldValidation("strict").ok());
}

TEST(DecodeBuiltinBodyTest, ModesMatchTheServer) {
  ResourceInfo r = Info("apps", "Deployment", true);
  std::vector<std::string> warnings;
  Json d = Deployment();
  d["spec"]["foo"] = 1;
  ApiStatus st = DecodeBuiltinBody(Schemas(), r, d, FieldValidation::kStrict, &warnings);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, 400);
  EXPECT_EQ(st.error().reason, "BadRequest");
  EXPECT_EQ(
      st.error().message,
      "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: "
      "unknown field \"spec.foo\"");

  d = Deployment();
  d["spec"]["foo"] = 1;
  st = DecodeBuiltinBody(Schemas(), r, d, FieldValidation::kWarn, &warnings);
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(warnings, (std::vector<std::string>{"unknown field \"spec.foo\""}));
  EXPECT_FALSE(d["spec"].contains("foo"));

  warnings.clear();
  d = Deployment();
  d["spec"]["foo"] = 1;
  st = DecodeBuiltinBody(Schemas(), r, d, FieldValidation::kIgnore, &warnings);
  EXPECT_TRUE(st.ok());
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(d["spec"].contains("foo"));

  d = Deployment();
  d["spec"]["replicas"] = "x";
  st = DecodeBuiltinBody(Schemas(), r, d, FieldValidation::kIgnore, &warnings);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, 400);
}

TEST(NamesTest, NameRuleByKind) {
  EXPECT_EQ(NameRuleForKind({"", "v1", "Namespace"}), NameRule::kDns1123Label);
  EXPECT_EQ(NameRuleForKind({"", "v1", "Service"}), NameRule::kDns1035Label);
  EXPECT_EQ(NameRuleForKind({"rbac.authorization.k8s.io", "v1", "ClusterRole"}),
            NameRule::kPathSegment);
  EXPECT_EQ(NameRuleForKind({"", "v1", "Node"}), NameRule::kDns1123Subdomain);
}

TEST(ValidateBuiltinTest, ObjectMeta) {
  Json ns = Json::parse(R"({"metadata":{"name":"Bad.Name"}})");
  auto errs = Strings(ValidateBuiltin({"", "v1", "Namespace"}, ns, false));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].substr(0, 45), "metadata.name: Invalid value: \"Bad.Name\": a l");

  Json none = Json::parse(R"({"metadata":{}})");
  errs = Strings(ValidateBuiltin({"", "v1", "ConfigMap"}, none, false));
  EXPECT_EQ(errs, (std::vector<std::string>{
                      "metadata.name: Required value: name or generateName is required"}));

  Json gen = Json::parse(R"({"metadata":{"generateName":"gpu-"}})");
  EXPECT_TRUE(ValidateBuiltin({"", "v1", "ConfigMap"}, gen, false).empty());

  Json ns_missing = Json::parse(R"({"metadata":{"name":"x"}})");
  errs = Strings(ValidateBuiltin({"", "v1", "ConfigMap"}, ns_missing, true));
  EXPECT_EQ(errs, (std::vector<std::string>{"metadata.namespace: Required value"}));

  Json labels = Json::parse(
      R"({"metadata":{"name":"n","labels":{"nvidia.com/gpu.count":"8","bad key":"v","k":"bad value"}}})");
  errs = Strings(ValidateBuiltin({"", "v1", "Node"}, labels, false));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].substr(0, 41), "metadata.labels: Invalid value: \"bad key\"");
  EXPECT_EQ(errs[1].substr(0, 43), "metadata.labels: Invalid value: \"bad value\"");

  Json role = Json::parse(R"({"metadata":{"name":"gpuop:operator"},"rules":[{"verbs":["get"]}]})");
  EXPECT_TRUE(
      ValidateBuiltin({"rbac.authorization.k8s.io", "v1", "ClusterRole"}, role, false).empty());
}

TEST(ValidateBuiltinTest, PodContainers) {
  Json pod = Json::parse(R"({"metadata":{"name":"p","namespace":"default"},
    "spec":{"containers":[{"name":"a","image":"x"},{"name":"a","image":"y"},{"name":"B"},{"image":"z",
      "ports":[{"containerPort":0}]}],"restartPolicy":"Sometimes"}})");
  auto errs = Strings(ValidateBuiltin({"", "v1", "Pod"}, pod, true));
  ASSERT_EQ(errs.size(), 6u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0], "spec.containers[1].name: Duplicate value: \"a\"");
  EXPECT_EQ(errs[1].substr(0, 43), "spec.containers[2].name: Invalid value: \"B\"");
  EXPECT_EQ(errs[2], "spec.containers[2].image: Required value");
  EXPECT_EQ(errs[3], "spec.containers[3].name: Required value");
  EXPECT_EQ(errs[4],
            "spec.containers[3].ports[0].containerPort: Invalid value: 0: must be between 1 and "
            "65535, inclusive");
  EXPECT_EQ(errs[5],
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", "
            "\"OnFailure\", \"Never\"");

  Json empty = Json::parse(R"({"metadata":{"name":"p","namespace":"default"},"spec":{}})");
  EXPECT_EQ(Strings(ValidateBuiltin({"", "v1", "Pod"}, empty, true)),
            (std::vector<std::string>{"spec.containers: Required value"}));
}

TEST(ValidateBuiltinTest, DaemonSetSelectorAndTemplate) {
  Json ds = Json::parse(R"({"metadata":{"name":"gpuop-device-plugin","namespace":"gpu-operator"},
    "spec":{"selector":{"matchLabels":{"app":"dp"}},
      "template":{"metadata":{"labels":{"app":"other"}},
        "spec":{"containers":[{"name":"dp","image":"gpuop"}],"restartPolicy":"Never"}}}})");
  auto errs = Strings(ValidateBuiltin({"apps", "v1", "DaemonSet"}, ds, true));
  ASSERT_EQ(errs.size(), 2u) << ::testing::PrintToString(errs);
  EXPECT_EQ(errs[0],
            "spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does "
            "not match "
            "template `labels`");
  EXPECT_EQ(errs[1],
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: "
            "\"Always\"");

  ds["spec"]["template"]["metadata"]["labels"]["app"] = "dp";
  ds["spec"]["template"]["spec"].erase("restartPolicy");
  EXPECT_TRUE(ValidateBuiltin({"apps", "v1", "DaemonSet"}, ds, true).empty());

  ds["spec"].erase("selector");
  EXPECT_EQ(Strings(ValidateBuiltin({"apps", "v1", "DaemonSet"}, ds, true))[0],
            "spec.selector: Required value");

  Json d = Deployment();
  d["spec"]["replicas"] = -1;
  d["spec"]["selector"] = {
      {"matchExpressions", {{{"key", "app"}, {"operator", "In"}, {"values", {"web"}}}}}};
  EXPECT_EQ(Strings(ValidateBuiltin({"apps", "v1", "Deployment"}, d, true)),
            (std::vector<std::string>{
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0"}));
}

TEST(ValidateBuiltinTest, ServiceConfigMapNodeRbacLeaseRuntimeClass) {
  Json svc = Json::parse(R"({"metadata":{"name":"1svc","namespace":"d"},"spec":{}})");
  auto errs = Strings(ValidateBuiltin({"", "v1", "Service"}, svc, true));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].substr(0, 37), "metadata.name: Invalid value: \"1svc\":");
  EXPECT_EQ(errs[1], "spec.ports: Required value");
  svc = Json::parse(
      R"({"metadata":{"name":"headless","namespace":"d"},"spec":{"clusterIP":"None"}})");
  EXPECT_TRUE(ValidateBuiltin({"", "v1", "Service"}, svc, true).empty());

  Json cm = Json::parse(
      R"({"metadata":{"name":"c","namespace":"d"},"data":{"config.yaml":"x","bad key":"y"}})");
  errs = Strings(ValidateBuiltin({"", "v1", "ConfigMap"}, cm, true));
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].substr(0, 44), "data[bad key]: Invalid value: \"bad key\": a v");

  Json node = Json::parse(R"({"metadata":{"name":"worker-1"},"spec":{"taints":[
    {"key":"nvidia.com/gpu","effect":"NoSchedule"},{"key":"x","effect":"Sometimes"}]}})");
  EXPECT_EQ(Strings(ValidateBuiltin({"", "v1", "Node"}, node, false)),
            (std::vector<std::string>{
                "spec.taints[1].effect: Unsupported value: \"Sometimes\": supported "
                "values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""}));

  Json rb =
      Json::parse(R"({"metadata":{"name":"b","namespace":"d"},"roleRef":{"kind":"Thing","name":""},
    "subjects":[{"kind":"ServiceAccount","name":"gpuop"}]})");
  errs = Strings(ValidateBuiltin({"rbac.authorization.k8s.io", "v1", "RoleBinding"}, rb, true));
  EXPECT_EQ(
      errs,
      (std::vector<std::string>{
          "roleRef.kind: Unsupported value: \"Thing\": supported values: \"Role\", \"ClusterRole\"",
          "roleRef.name: Required value"}));

  Json lease =
      Json::parse(R"({"metadata":{"name":"l","namespace":"d"},"spec":{"leaseDurationSeconds":0}})");
  EXPECT_EQ(Strings(ValidateBuiltin({"coordination.k8s.io", "v1", "Lease"}, lease, true)),
            (std::vector<std::string>{
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"}));

  Json rc = Json::parse(R"({"metadata":{"name":"nvidia"},"handler":"nvidia"})");
  EXPECT_TRUE(ValidateBuiltin({"node.k8s.io", "v1", "RuntimeClass"}, rc, false).empty());
  rc["handler"] = "";
  EXPECT_EQ(ValidateBuiltin({"node.k8s.io", "v1", "RuntimeClass"}, rc, false).size(), 1u);
}

TEST(ValidateBuiltinObjectTest, IsA422WithCauses) {
  ApiStatus st = ValidateBuiltinObject(Info("", "Namespace", false),
                                       Json::parse(R"({"metadata":{"name":"A"}})"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, 422);
  EXPECT_EQ(st.error().reason, "Invalid");
  EXPECT_EQ(st.error().message.rfind(
                "Namespace \"A\" is invalid: metadata.name: Invalid value: \"A\": ", 0),
            0u)
      << st.error().message;
  ASSERT_TRUE(st.error().details.has_value());
  ASSERT_EQ(st.error().details->causes.size(), 1u);
  EXPECT_EQ(st.error().details->causes[0].field, "metadata.name");
  EXPECT_EQ(st.error().details->causes[0].type, "FieldValueInvalid");
}

}  // namespace
}  // namespace gpuop::simkube
