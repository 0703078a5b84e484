#include "operator/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/yaml_json.h"
#include "operator/node_labels.h"
#include "sim/kube/schema.h"

namespace gpuop::op {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr const char* kGpuopImage = "ghcr.io/gpuop/gpuop:1.2.3";
constexpr const char* kOwnerUid = "5f1c2a3e-0d7b-4c8e-9a61-2b3c4d5e6f70";

// ---------------------------------------------------------------------------
// Inputs.

Json LoadSample(const std::string& name) {
  Json policy =
      YamlToJson(YAML::LoadFile(std::string(GPUOP_SOURCE_DIR) + "/deploy/samples/" + name));
  // As the API server returns it.
  policy["metadata"]["uid"] = kOwnerUid;
  return policy;
}

OperatorEnv Env() {
  OperatorEnv env;
  env.gpuop_image = kGpuopImage;
  return env;
}

const std::vector<OsRelease> kTwoOses = {{"ubuntu", "22.04"}, {"rhel", "9.4"}};

// A parsed policy and everything rendered from it.
struct Rendering {
  Json owner;
  OperatorEnv env = Env();
  Policy policy;
  std::vector<OsRelease> oses = kTwoOses;
  bool node_discovery = false;

  RenderInput Input() const { return RenderInput{policy, env, owner, oses, node_discovery}; }
  std::vector<RenderedObject> Of(Component c) const { return RenderComponent(c, Input()); }
  std::vector<RenderedObject> Prerequisites() const { return RenderPrerequisites(Input()); }
  std::vector<RenderedObject> NodeDiscovery() const { return RenderNodeDiscovery(Input()); }
  std::vector<RenderedObject> All() const {
    std::vector<RenderedObject> all = Prerequisites();
    for (RenderedObject& r : NodeDiscovery()) all.push_back(std::move(r));
    for (Component c : kAllComponents) {
      for (RenderedObject& r : Of(c)) all.push_back(std::move(r));
    }
    return all;
  }
};

Rendering Render(Json cluster_policy) {
  Rendering r;
  r.owner = std::move(cluster_policy);
  auto p = ParsePolicy(r.owner, r.env);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) r.policy = *p;
  return r;
}

Rendering Helm() { return Render(LoadSample("clusterpolicy.yaml")); }
Rendering Minimal() { return Render(LoadSample("clusterpolicy-minimal.yaml")); }

// ---------------------------------------------------------------------------
// Looking into rendered objects.

std::string Describe(const RenderedObject& r) {
  return r.object.value("kind", "?") + "/" + r.object["metadata"].value("name", "?");
}

std::vector<std::string> Describe(const std::vector<RenderedObject>& objects) {
  std::vector<std::string> out;
  for (const RenderedObject& r : objects) out.push_back(Describe(r));
  return out;
}

// A copy: callers pass temporaries.
Json Find(const std::vector<RenderedObject>& objects, const std::string& kind_name) {
  for (const RenderedObject& r : objects) {
    if (Describe(r) == kind_name) return r.object;
  }
  ADD_FAILURE() << "no " << kind_name << " among " << ::testing::PrintToString(Describe(objects));
  return Json();
}

std::vector<Json> DaemonSets(const std::vector<RenderedObject>& objects) {
  std::vector<Json> out;
  for (const RenderedObject& r : objects) {
    if (r.object["kind"] == "DaemonSet") out.push_back(r.object);
  }
  return out;
}

const Json& PodSpec(const Json& ds) { return ds["spec"]["template"]["spec"]; }

std::vector<Json> AllContainers(const Json& ds) {
  std::vector<Json> out;
  for (const char* list : {"initContainers", "containers"}) {
    if (!PodSpec(ds).contains(list)) continue;
    for (const Json& c : PodSpec(ds)[list]) out.push_back(c);
  }
  return out;
}

const Json& Container(const Json& ds, const std::string& name) {
  for (const char* list : {"initContainers", "containers"}) {
    if (!PodSpec(ds).contains(list)) continue;
    for (const Json& c : PodSpec(ds)[list]) {
      if (c["name"] == name) return c;
    }
  }
  ADD_FAILURE() << "no container " << name;
  static const Json kNull;
  return kNull;
}

// The env var's value (or "<valueFrom>"), "" when absent.
std::string EnvOf(const Json& container, const std::string& name) {
  for (const Json& e : container.value("env", Json::array())) {
    if (e["name"] != name) continue;
    if (e.contains("valueFrom")) return "<valueFrom>";
    return e.value("value", "");
  }
  return "";
}

int EnvCount(const Json& container, const std::string& name) {
  int n = 0;
  for (const Json& e : container.value("env", Json::array())) n += e["name"] == name ? 1 : 0;
  return n;
}

std::vector<std::string> Strings(const Json& array) {
  std::vector<std::string> out;
  for (const Json& s : array) out.push_back(s.get<std::string>());
  return out;
}

// hostPath → "mountPath (ro|rw)" over every container of a DaemonSet.
std::map<std::string, std::set<std::string>> HostMounts(const Json& ds) {
  std::map<std::string, std::string> volume_path;
  for (const Json& v : PodSpec(ds).value("volumes", Json::array())) {
    if (v.contains("hostPath")) volume_path[v["name"]] = v["hostPath"]["path"];
  }
  std::map<std::string, std::set<std::string>> out;
  for (const Json& c : AllContainers(ds)) {
    for (const Json& m : c.value("volumeMounts", Json::array())) {
      auto it = volume_path.find(m["name"]);
      if (it == volume_path.end()) continue;
      out[it->second].insert(m["mountPath"].get<std::string>() +
                             (m.value("readOnly", false) ? " (ro)" : " (rw)"));
    }
  }
  return out;
}

std::set<std::string> PrivilegedContainers(const Json& ds) {
  std::set<std::string> out;
  for (const Json& c : AllContainers(ds)) {
    if (c.contains("securityContext") && c["securityContext"].value("privileged", false)) {
      out.insert(c["name"]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Validation against the Kubernetes 1.35 OpenAPI schemas (the emulator's
// strict decoding and built-in validation), plus the pod-spec rules of
// kube-apiserver the emulator does not check.

// The group/versions gpuop renders (loading all of 1.35 costs seconds under ASan).
const simkube::SchemaSet& Schemas() {
  static std::shared_ptr<const simkube::SchemaSet> set = [] {
    std::vector<Json> docs;
    for (const char* file :
         {"api_v1.json", "apis_apps_v1.json", "apis_rbac.authorization.k8s.io_v1.json",
          "apis_node.k8s.io_v1.json", "apis_resource.k8s.io_v1.json"}) {
      auto text = ReadFile(std::string(GPUOP_SOURCE_DIR) + "/api/openapi/1.35/" + file);
      if (!text.ok()) {
        ADD_FAILURE() << text.status().ToString();
        return std::shared_ptr<const simkube::SchemaSet>();
      }
      docs.push_back(Json::parse(*text));
    }
    auto r = simkube::SchemaSet::FromDocuments(docs);
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      return std::shared_ptr<const simkube::SchemaSet>();
    }
    return *r;
  }();
  return *set;
}

void PodProblems(const Json& pod, std::vector<std::string>& out) {
  std::set<std::string> volumes;
  for (const Json& v : pod.value("volumes", Json::array())) {
    volumes.insert(v.value("name", ""));
    int sources = 0;
    for (const auto& [k, _] : v.items()) sources += k == "name" ? 0 : 1;
    if (sources != 1) out.push_back("volume " + v.dump() + ": exactly one source");
    if (v.contains("hostPath")) {
      static const std::set<std::string> kTypes = {
          "",       "DirectoryOrCreate", "Directory",  "FileOrCreate", "File",
          "Socket", "CharDevice",        "BlockDevice"};
      if (!kTypes.count(v["hostPath"].value("type", "")))
        out.push_back("hostPath type " + v.dump());
      if (v["hostPath"].value("path", "").empty() ||
          v["hostPath"]["path"].get<std::string>()[0] != '/') {
        out.push_back("hostPath path not absolute: " + v.dump());
      }
    }
  }
  for (const char* list : {"initContainers", "containers"}) {
    for (const Json& c : pod.value(list, Json::array())) {
      const std::string where = std::string(list) + "/" + c.value("name", "");
      bool privileged =
          c.contains("securityContext") && c["securityContext"].value("privileged", false);
      std::set<std::string> paths;
      for (const Json& m : c.value("volumeMounts", Json::array())) {
        if (!volumes.count(m.value("name", ""))) {
          out.push_back(where + ": mount of undeclared volume " + m.dump());
        }
        std::string path = m.value("mountPath", "");
        if (path.empty() || path[0] != '/') out.push_back(where + ": relative mountPath " + path);
        if (!paths.insert(path).second) out.push_back(where + ": duplicate mountPath " + path);
        std::string prop = m.value("mountPropagation", "None");
        if (prop != "None" && prop != "HostToContainer" && prop != "Bidirectional") {
          out.push_back(where + ": mountPropagation " + prop);
        }
        if (prop == "Bidirectional" && !privileged) {
          out.push_back(where + ": Bidirectional mount propagation needs a privileged container");
        }
      }
      std::set<std::string> env_names;
      for (const Json& e : c.value("env", Json::array())) {
        if (!env_names.insert(e.value("name", "")).second) {
          out.push_back(where + ": duplicate env " + e.dump());
        }
        if (e.contains("value") == e.contains("valueFrom")) {
          out.push_back(where + ": env needs exactly one of value, valueFrom: " + e.dump());
        }
      }
    }
  }
}

std::vector<std::string> SchemaProblems(const RenderedObject& r) {
  std::vector<std::string> out;
  const Json& obj = r.object;
  const std::string api_version = obj.value("apiVersion", "");
  const std::string kind = obj.value("kind", "");
  if (api_version != r.resource.ApiVersion()) out.push_back("apiVersion vs resource");
  if (kind != r.resource.kind) out.push_back("kind vs resource");
  auto gvk = simkube::GroupVersionKind::FromApiVersion(api_version, kind);
  const simkube::Schema* schema = Schemas().ForKind(gvk);
  if (schema == nullptr) {
    out.push_back("no schema for " + api_version + " " + kind);
    return out;
  }
  Json decoded = obj;
  simkube::DecodeFindings found = simkube::DecodeBuiltin(*schema, decoded);
  if (!found.decode_error.empty()) out.push_back(found.decode_error);
  for (const std::string& f : found.unknown_fields) out.push_back("unknown field " + f);
  for (const std::string& f : found.duplicate_fields) out.push_back("duplicate field " + f);
  for (const auto& e : simkube::ValidateBuiltin(gvk, obj, r.resource.namespaced)) {
    out.push_back(e.ToString());
  }
  if (kind == "DaemonSet") {
    PodProblems(obj["spec"]["template"]["spec"], out);
    const Json& strategy = obj["spec"]["updateStrategy"];
    std::string type = strategy.value("type", "");
    if (type != "RollingUpdate" && type != "OnDelete") out.push_back("updateStrategy " + type);
    if (type == "OnDelete" && strategy.contains("rollingUpdate")) {
      out.push_back("rollingUpdate with OnDelete");
    }
    if (strategy.contains("rollingUpdate")) {
      const Json& mu = strategy["rollingUpdate"]["maxUnavailable"];
      bool ok =
          (mu.is_number_integer() && mu.get<int64_t>() >= 0) ||
          (mu.is_string() && !mu.get<std::string>().empty() && mu.get<std::string>().back() == '%');
      if (!ok) out.push_back("maxUnavailable must be an int or a percentage: " + mu.dump());
    }
  }
  return out;
}

// Every object: schema-valid, labelled, owned, hashed, in its namespace.
void ExpectWellFormed(const std::vector<RenderedObject>& objects, const std::string& ns) {
  const auto& types = RenderedResourceTypes();
  for (const RenderedObject& r : objects) {
    SCOPED_TRACE(Describe(r));
    EXPECT_THAT(SchemaProblems(r), IsEmpty());
    EXPECT_TRUE(std::any_of(types.begin(), types.end(), [&](const kube::Resource& t) {
      return t.QualifiedName() == r.resource.QualifiedName();
    }));
    const Json& meta = r.object["metadata"];
    EXPECT_EQ(meta["labels"].value(kManagedByLabel, ""), "gpuop");
    EXPECT_EQ(meta["labels"].value(kPartOfLabel, ""), "gpuop");
    EXPECT_FALSE(meta["labels"].value(kComponentLabel, "").empty());
    ASSERT_TRUE(meta.contains("ownerReferences"));
    ASSERT_EQ(meta["ownerReferences"].size(), 1u);
    const Json& ref = meta["ownerReferences"][0];
    EXPECT_EQ(ref["apiVersion"], "nvidia.com/v1");
    EXPECT_EQ(ref["kind"], "ClusterPolicy");
    EXPECT_EQ(ref["name"], "cluster-policy");
    EXPECT_EQ(ref["uid"], kOwnerUid);
    EXPECT_EQ(ref["controller"], true);
    EXPECT_EQ(ref["blockOwnerDeletion"], true);
    if (r.resource.namespaced) {
      EXPECT_EQ(meta.value("namespace", ""), ns);
    } else {
      EXPECT_FALSE(meta.contains("namespace"));
    }
    ASSERT_TRUE(meta.contains("annotations"));
    EXPECT_EQ(meta["annotations"].value(kLastAppliedHashAnnotation, ""), ObjectHash(r.object));
  }
}

// ---------------------------------------------------------------------------

TEST(RenderTest, HelmSampleRendersEveryEnabledComponentInOrder) {
  Rendering h = Helm();
  EXPECT_THAT(Describe(h.Of(Component::kDriver)),
              ElementsAre("ServiceAccount/nvidia-driver-daemonset", "ClusterRole/gpuop-driver",
                          "ClusterRoleBinding/gpuop-driver",
                          "DaemonSet/nvidia-driver-daemonset-ubuntu22.04",
                          "DaemonSet/nvidia-driver-daemonset-rhel9.4"));
  EXPECT_THAT(Describe(h.Of(Component::kContainerToolkit)),
              ElementsAre("ServiceAccount/nvidia-container-toolkit-daemonset",
                          "Role/gpuop-container-toolkit", "RoleBinding/gpuop-container-toolkit",
                          "DaemonSet/nvidia-container-toolkit-daemonset"));
  EXPECT_THAT(
      Describe(h.Of(Component::kOperatorValidator)),
      ElementsAre("ServiceAccount/nvidia-operator-validator",
                  "ClusterRole/gpuop-operator-validator",
                  "ClusterRoleBinding/gpuop-operator-validator", "Role/gpuop-operator-validator",
                  "RoleBinding/gpuop-operator-validator", "DaemonSet/nvidia-operator-validator"));
  EXPECT_THAT(
      Describe(h.Of(Component::kDevicePlugin)),
      ElementsAre("ServiceAccount/nvidia-device-plugin-daemonset",
                  "ClusterRole/gpuop-device-plugin", "ClusterRoleBinding/gpuop-device-plugin",
                  "DaemonSet/nvidia-device-plugin-daemonset"));
  EXPECT_THAT(Describe(h.Of(Component::kDcgmExporter)),
              ElementsAre("ServiceAccount/nvidia-dcgm-exporter", "Service/nvidia-dcgm-exporter",
                          "DaemonSet/nvidia-dcgm-exporter"));
  EXPECT_THAT(
      Describe(h.Of(Component::kGpuFeatureDiscovery)),
      ElementsAre("ServiceAccount/gpu-feature-discovery", "ClusterRole/gpuop-gpu-feature-discovery",
                  "ClusterRoleBinding/gpuop-gpu-feature-discovery",
                  "Role/gpuop-gpu-feature-discovery", "RoleBinding/gpuop-gpu-feature-discovery",
                  "DaemonSet/gpu-feature-discovery"));
  EXPECT_THAT(Describe(h.Of(Component::kMigManager)),
              ElementsAre("ServiceAccount/nvidia-mig-manager", "ClusterRole/gpuop-mig-manager",
                          "ClusterRoleBinding/gpuop-mig-manager", "Role/gpuop-mig-manager",
                          "RoleBinding/gpuop-mig-manager", "ConfigMap/default-mig-parted-config",
                          "DaemonSet/nvidia-mig-manager"));
  // Off by default: a disabled component renders nothing.
  EXPECT_THAT(h.Of(Component::kNodeStatusExporter), IsEmpty());
  EXPECT_THAT(Describe(h.Prerequisites()), ElementsAre("RuntimeClass/nvidia"));
}

TEST(RenderTest, EveryObjectValidatesAgainstTheKubernetesSchemas) {
  for (const char* sample : {"clusterpolicy.yaml", "clusterpolicy-minimal.yaml"}) {
    SCOPED_TRACE(sample);
    Json cp = LoadSample(sample);
    cp["spec"]["nodeStatusExporter"]["enabled"] = true;  // render every component
    Rendering r = Render(cp);
    std::vector<RenderedObject> all = r.All();
    EXPECT_GE(all.size(), 30u);
    ExpectWellFormed(all, "gpu-operator");
  }
}

// draDriver.enabled: the GPUs are allocated through DRA. The plugin runs
// unprivileged with the node's GPUs, its kubelet sockets and the CDI dir;
// NVIDIA's DeviceClasses come with it; the device plugin (and the
// validator's plugin check) go, so no GPU is advertised both ways.
TEST(RenderTest, DraDriverReplacesTheDevicePlugin) {
  Json cp = LoadSample("clusterpolicy.yaml");
  cp["spec"]["draDriver"] = {{"enabled", true}};
  Rendering r = Render(cp);
  EXPECT_FALSE(r.policy.Enabled(Component::kDevicePlugin));
  EXPECT_TRUE(r.policy.dra_replaces_device_plugin);
  EXPECT_THAT(r.Of(Component::kDevicePlugin), IsEmpty());

  std::vector<RenderedObject> dra = r.Of(Component::kDraDriver);
  EXPECT_THAT(Describe(dra),
              ElementsAre("ServiceAccount/nvidia-dra-driver-kubelet-plugin",
                          "ClusterRole/gpuop-dra-driver", "ClusterRoleBinding/gpuop-dra-driver",
                          "DeviceClass/gpu.nvidia.com", "DeviceClass/mig.nvidia.com",
                          "DaemonSet/nvidia-dra-driver-kubelet-plugin"));
  ExpectWellFormed(dra, "gpu-operator");
  EXPECT_EQ(Find(dra, "DeviceClass/gpu.nvidia.com")["spec"]["selectors"][0]["cel"]["expression"],
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].type == 'gpu'");
  EXPECT_EQ(Find(dra, "DeviceClass/mig.nvidia.com")["spec"]["selectors"][0]["cel"]["expression"],
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].type == 'mig'");
  const Json rules = Find(dra, "ClusterRole/gpuop-dra-driver")["rules"];
  EXPECT_EQ(rules[0]["resources"], Json::array({"resourceclaims"}));
  EXPECT_EQ(rules[0]["verbs"], Json::array({"get"}));

  const Json ds = Find(dra, "DaemonSet/nvidia-dra-driver-kubelet-plugin");
  EXPECT_EQ(PodSpec(ds)["nodeSelector"], (Json{{"nvidia.com/gpu.deploy.dra-driver", "true"}}));
  EXPECT_EQ(PodSpec(ds)["runtimeClassName"], "nvidia");
  // As NVIDIA's: MIG placements (device names, memory slices) need privilege.
  EXPECT_EQ(PrivilegedContainers(ds), (std::set<std::string>{"gpus"}));
  const Json& ctr = PodSpec(ds)["containers"][0];
  EXPECT_EQ(ctr["command"], (Json{"gpuop", "--host-root", "/host", "dra-plugin", "--health-addr",
                                  ":51516"}));
  EXPECT_THAT(ctr["env"].dump(),
              ::testing::HasSubstr(R"({"name":"NVIDIA_MIG_CONFIG_DEVICES","value":"all"})"));
  using Mounts = std::map<std::string, std::set<std::string>>;
  EXPECT_EQ(HostMounts(ds), (Mounts{{"/", {"/host (ro)"}},
                                    {"/var/lib/kubelet/plugins", {"/host/var/lib/kubelet/plugins (rw)"}},
                                    {"/var/lib/kubelet/plugins_registry",
                                     {"/host/var/lib/kubelet/plugins_registry (rw)"}},
                                    {"/var/run/cdi", {"/host/var/run/cdi (rw)"}},
                                    {"/sys", {"/host/sys (ro)"}}}));

  // The validator no longer waits for nvidia.com/gpu in allocatable, and its
  // CUDA pod requests none.
  for (const Json& c : AllContainers(DaemonSets(r.Of(Component::kOperatorValidator))[0])) {
    EXPECT_NE(c["name"], "plugin-validation");
    if (c["name"] == "cuda-validation") {
      EXPECT_THAT(c["env"].dump(), ::testing::HasSubstr(
                                       R"({"name":"GPUOP_DEVICE_PLUGIN","value":"false"})"));
    }
  }
  // Nodes get the plugin's deploy label instead of the device plugin's.
  LabelChanges changes = PlanNodeLabels(
      {{"feature.node.kubernetes.io/pci-10de.present", "true"},
       {"nvidia.com/gpu.deploy.device-plugin", "true"}},
      &r.policy);
  EXPECT_EQ(changes["nvidia.com/gpu.deploy.dra-driver"], std::optional<std::string>("true"));
  EXPECT_EQ(changes.at("nvidia.com/gpu.deploy.device-plugin"), std::nullopt);
}

TEST(RenderTest, NodeDiscoveryWithoutNfd) {
  Rendering h = Helm();
  // NFD present: no node-discovery, gfd writes NFD's features file.
  EXPECT_THAT(h.NodeDiscovery(), IsEmpty());
  auto gfd_direct_labels = [](const Rendering& r) {
    const Json ds = DaemonSets(r.Of(Component::kGpuFeatureDiscovery))[0];
    return EnvOf(Container(ds, "gpu-feature-discovery"), "GPUOP_GFD_DIRECT_LABELS");
  };
  EXPECT_EQ(gfd_direct_labels(h), "");

  h.node_discovery = true;
  std::vector<RenderedObject> objects = h.NodeDiscovery();
  EXPECT_THAT(
      Describe(objects),
      ElementsAre("ServiceAccount/gpuop-node-discovery", "ClusterRole/gpuop-node-discovery",
                  "ClusterRoleBinding/gpuop-node-discovery", "DaemonSet/gpuop-node-discovery"));
  ExpectWellFormed(objects, "gpu-operator");
  EXPECT_EQ(Find(objects, "ClusterRole/gpuop-node-discovery")["rules"],
            Json::parse(R"([{"apiGroups":[""],"resources":["nodes"],"verbs":["get","patch"]}])"));
  EXPECT_EQ(Find(objects, "ClusterRoleBinding/gpuop-node-discovery")["subjects"],
            Json::parse(R"([{"kind":"ServiceAccount","name":"gpuop-node-discovery",
                             "namespace":"gpu-operator"}])"));
  const Json ds = Find(objects, "DaemonSet/gpuop-node-discovery");
  EXPECT_EQ(ds["metadata"]["labels"][kComponentLabel], "node-discovery");
  // Every node, whatever its taints: finding GPU nodes is its job.
  EXPECT_EQ(PodSpec(ds)["nodeSelector"], Json::parse(R"({"kubernetes.io/os":"linux"})"));
  EXPECT_EQ(PodSpec(ds)["tolerations"], Json::parse(R"([{"operator":"Exists"}])"));
  EXPECT_FALSE(PodSpec(ds).contains("runtimeClassName"));
  EXPECT_THAT(PrivilegedContainers(ds), IsEmpty());
  using Mounts = std::map<std::string, std::set<std::string>>;
  EXPECT_EQ(HostMounts(ds), (Mounts{{"/etc/os-release", {"/host/etc/os-release (ro)"}},
                                    {"/sys", {"/host/sys (ro)"}}}));
  const Json ctr = Container(ds, "node-discovery");
  EXPECT_EQ(ctr["image"], h.env.gpuop_image);
  EXPECT_EQ(ctr["command"], Json::parse(R"(["gpuop","--host-root","/host","node-discovery"])"));
  EXPECT_EQ(EnvOf(ctr, "NODE_NAME"), "<valueFrom>");

  // gfd then patches its node's labels and needs no features directory.
  EXPECT_EQ(gfd_direct_labels(h), "true");
  const Json gfd = DaemonSets(h.Of(Component::kGpuFeatureDiscovery))[0];
  EXPECT_EQ(HostMounts(gfd), (Mounts{{"/sys", {"/host/sys (ro)"}}}));
}

TEST(RenderTest, SchemaCheckCatchesUnknownAndMistypedFields) {
  // The check above can fail: a misspelt field, a wrong JSON type, a mount of
  // a volume that is not there.
  Rendering h = Helm();
  std::vector<RenderedObject> dp = h.Of(Component::kDevicePlugin);
  RenderedObject ds = dp.back();
  ASSERT_THAT(SchemaProblems(ds), IsEmpty());

  RenderedObject misspelt = ds;
  misspelt.object["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always";
  EXPECT_THAT(SchemaProblems(misspelt),
              ElementsAre("unknown field spec.template.spec.containers[0].imagePullPolicyy"));

  RenderedObject mistyped = ds;
  mistyped.object["spec"]["template"]["spec"]["hostPID"] = "yes";
  EXPECT_THAT(SchemaProblems(mistyped), Not(IsEmpty()));

  RenderedObject dangling = ds;
  dangling.object["spec"]["template"]["spec"]["volumes"] = Json::array();
  EXPECT_THAT(SchemaProblems(dangling), Not(IsEmpty()));

  RenderedObject string_int = ds;
  string_int.object["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = "1";
  EXPECT_THAT(SchemaProblems(string_int), Not(IsEmpty()));
}

TEST(RenderTest, DaemonSetsShareTheSpecsSchedulingAndSelectors) {
  Rendering h = Helm();
  for (Component c : kAllComponents) {
    for (const Json& ds : DaemonSets(h.Of(c))) {
      const std::string name = ds["metadata"]["name"];
      SCOPED_TRACE(name);
      EXPECT_EQ(ds["metadata"]["namespace"], "gpu-operator");
      EXPECT_EQ(ds["spec"]["selector"], Json({{"matchLabels", {{"app", name}}}}));
      const Json& labels = ds["spec"]["template"]["metadata"]["labels"];
      EXPECT_EQ(labels["app"], name);
      EXPECT_EQ(labels[kComponentLabel], ComponentName(c));
      // The Helm sample's daemonsets.labels names managed-by gpu-operator:
      // gpuop's own value wins (its pods are found by it).
      EXPECT_EQ(labels["app.kubernetes.io/managed-by"], "gpuop");
      EXPECT_EQ(PodSpec(ds)["nodeSelector"][DeployLabel(c)], "true");
      EXPECT_EQ(PodSpec(ds)["priorityClassName"], "system-node-critical");
      EXPECT_EQ(PodSpec(ds)["serviceAccountName"], ComponentDaemonSetName(c));
      EXPECT_EQ(
          PodSpec(ds)["tolerations"],
          Json::parse(R"([{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}])"));
      if (c == Component::kDriver) {
        EXPECT_EQ(ds["spec"]["updateStrategy"], Json({{"type", "OnDelete"}}));
      } else {
        // "1" in the chart: an int for the API.
        EXPECT_EQ(ds["spec"]["updateStrategy"],
                  Json::parse(R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}})"));
      }
    }
  }
}

TEST(RenderTest, GpuopComponentsRunGpuopsImageWithTheirSubcommand) {
  Rendering h = Helm();
  const std::map<Component, std::string> main_container = {
      {Component::kContainerToolkit, "nvidia-container-toolkit-ctr"},
      {Component::kOperatorValidator, "nvidia-operator-validator"},
      {Component::kDevicePlugin, "nvidia-device-plugin"},
      {Component::kDcgmExporter, "nvidia-dcgm-exporter"},
      {Component::kGpuFeatureDiscovery, "gpu-feature-discovery"},
      {Component::kMigManager, "nvidia-mig-manager"},
  };
  for (const auto& [c, container_name] : main_container) {
    SCOPED_TRACE(ComponentName(c));
    std::vector<Json> sets = DaemonSets(h.Of(c));
    ASSERT_EQ(sets.size(), 1u);
    const Json& ctr = Container(sets[0], container_name);
    EXPECT_EQ(ctr["image"], kGpuopImage);
    EXPECT_EQ(ctr["imagePullPolicy"], "IfNotPresent");
    // The subcommand, then its own flags (the device plugin's --health-addr).
    std::vector<std::string> command = Strings(ctr["command"]);
    ASSERT_GE(command.size(), 4u);
    EXPECT_THAT(std::vector<std::string>(command.begin(), command.begin() + 4),
                ElementsAre("gpuop", "--host-root", "/host", ComponentSubcommand(c)));
    EXPECT_EQ(EnvOf(ctr, "NODE_NAME"), "<valueFrom>");
    EXPECT_EQ(
        ctr["env"][0],
        Json::parse(
            R"({"name":"NODE_NAME","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}})"));
    EXPECT_EQ(EnvOf(ctr, "OPERATOR_NAMESPACE"), "<valueFrom>");
  }
}

TEST(RenderTest, DevicePluginGetsTheUpstreamEnvironment) {
  Rendering h = Helm();
  Json ds = DaemonSets(h.Of(Component::kDevicePlugin)).at(0);
  const Json& ctr = Container(ds, "nvidia-device-plugin");
  EXPECT_EQ(EnvOf(ctr, "MIG_STRATEGY"), "single");
  EXPECT_EQ(EnvOf(ctr, "DEVICE_LIST_STRATEGY"), "cdi-annotations,cdi-cri");
  EXPECT_EQ(EnvOf(ctr, "DEVICE_ID_STRATEGY"), "uuid");
  EXPECT_EQ(EnvOf(ctr, "PASS_DEVICE_SPECS"), "true");
  EXPECT_EQ(EnvOf(ctr, "FAIL_ON_INIT_ERROR"), "true");
  EXPECT_EQ(EnvOf(ctr, "NVIDIA_DRIVER_ROOT"), "/run/nvidia/driver");  // the driver container's
  EXPECT_EQ(EnvOf(ctr, "NVIDIA_VISIBLE_DEVICES"), "all");
  EXPECT_EQ(EnvOf(ctr, "CONFIG_FILE_SRCDIR"), "");  // no named configs in the chart
  EXPECT_EQ(PodSpec(ds)["runtimeClassName"], "nvidia");
  // The kubelet restarts a plugin whose NVML or gRPC server is wedged.
  EXPECT_THAT(Strings(ctr["command"]),
              ::testing::ElementsAre("gpuop", "--host-root", "/host", "device-plugin",
                                     "--health-addr", ":8082"));
  EXPECT_EQ(ctr["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(ctr["livenessProbe"]["httpGet"]["port"], 8082);

  Json cp = LoadSample("clusterpolicy-minimal.yaml");
  cp["spec"]["cdi"]["enabled"] = false;
  cp["spec"]["mig"]["strategy"] = "mixed";
  cp["spec"]["devicePlugin"]["config"] = {{"name", "time-slicing"}, {"default", "any"}};
  cp["spec"]["hostPaths"]["kubeletRootDir"] = "/var/lib/k0s/kubelet";
  Rendering m = Render(cp);
  std::vector<RenderedObject> objects = m.Of(Component::kDevicePlugin);
  ExpectWellFormed(objects, "gpu-operator");
  ds = DaemonSets(objects).at(0);
  const Json& c2 = Container(ds, "nvidia-device-plugin");
  EXPECT_EQ(EnvOf(c2, "MIG_STRATEGY"), "mixed");
  EXPECT_EQ(EnvOf(c2, "DEVICE_LIST_STRATEGY"), "envvar");
  EXPECT_EQ(EnvOf(c2, "NVIDIA_DRIVER_ROOT"), "/");  // a host driver
  EXPECT_EQ(EnvOf(c2, "CONFIG_FILE_SRCDIR"), "/available-configs");
  EXPECT_EQ(EnvOf(c2, "DEFAULT_CONFIG"), "any");
  EXPECT_EQ(EnvOf(c2, "NODE_LABEL"), "nvidia.com/device-plugin.config");
  bool found = false;
  for (const Json& v : PodSpec(ds)["volumes"]) {
    if (v.contains("configMap")) {
      EXPECT_EQ(v["configMap"]["name"], "time-slicing");
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // A non-default kubelet directory is mounted where gpuop looks by default.
  EXPECT_THAT(HostMounts(ds)["/var/lib/k0s/kubelet/device-plugins"],
              ElementsAre("/host/var/lib/kubelet/device-plugins (rw)"));
}

TEST(RenderTest, HostMountsAreOnlyWhatEachComponentNeeds) {
  Json cp = LoadSample("clusterpolicy.yaml");
  cp["spec"]["nodeStatusExporter"]["enabled"] = true;
  Rendering h = Render(cp);
  using Mounts = std::map<std::string, std::set<std::string>>;
  const std::map<std::string, Mounts> expected = {
      {"nvidia-driver-daemonset-ubuntu22.04",
       {{"/", {"/host (ro)"}},
        {"/run/nvidia", {"/run/nvidia (rw)"}},
        {"/etc/os-release", {"/host-etc/os-release (ro)"}},
        {"/var/log", {"/var/log (rw)"}},
        {"/dev/log", {"/dev/log (rw)"}},
        {"/sys/module/firmware_class/parameters/path",
         {"/sys/module/firmware_class/parameters/path (rw)"}}}},
      {"nvidia-container-toolkit-daemonset",
       {{"/", {"/host (ro)"}},
        {"/etc/containerd", {"/host/etc/containerd (rw)"}},
        {"/run/nvidia", {"/host/run/nvidia (rw)"}},
        {"/var/run/cdi", {"/host/var/run/cdi (rw)"}},
        {"/usr/local/nvidia", {"/host/usr/local/nvidia (rw)"}}}},
      {"nvidia-operator-validator",
       {{"/", {"/host (ro)"}},
        {"/run/nvidia", {"/host/run/nvidia (rw)"}},
        {"/dev/char", {"/host/dev/char (rw)"}}}},
      {"nvidia-device-plugin-daemonset",
       {{"/var/lib/kubelet/device-plugins", {"/host/var/lib/kubelet/device-plugins (rw)"}},
        {"/var/run/cdi", {"/host/var/run/cdi (ro)"}},
        {"/sys", {"/host/sys (ro)"}}}},
      {"nvidia-dcgm-exporter",
       {{"/var/lib/kubelet/pod-resources", {"/host/var/lib/kubelet/pod-resources (ro)"}}}},
      {"gpu-feature-discovery",
       {{"/etc/kubernetes/node-feature-discovery/features.d",
         {"/host/etc/kubernetes/node-feature-discovery/features.d (rw)"}},
        {"/sys", {"/host/sys (ro)"}}}},
      {"nvidia-mig-manager",
       {{"/", {"/host (ro)"}},
        {"/run/nvidia", {"/host/run/nvidia (rw)"}},
        {"/var/run/cdi", {"/host/var/run/cdi (rw)"}},
        {"/etc/nvidia-mig-manager", {"/host/etc/nvidia-mig-manager (rw)"}}}},
      {"nvidia-node-status-exporter",
       {{"/", {"/host (ro)"}},
        {"/run/nvidia/validations", {"/host/run/nvidia/validations (ro)"}}}},
  };
  std::set<std::string> seen;
  for (Component c : kAllComponents) {
    for (const Json& ds : DaemonSets(h.Of(c))) {
      std::string name = ds["metadata"]["name"];
      if (name == "nvidia-driver-daemonset-rhel9.4") continue;  // same as ubuntu's
      SCOPED_TRACE(name);
      seen.insert(name);
      ASSERT_TRUE(expected.count(name));
      EXPECT_EQ(HostMounts(ds), expected.at(name));
    }
  }
  EXPECT_EQ(seen.size(), expected.size());
}

TEST(RenderTest, PrivilegesAndRuntimeClassPerComponent) {
  Json cp = LoadSample("clusterpolicy.yaml");
  cp["spec"]["nodeStatusExporter"]["enabled"] = true;
  Rendering h = Render(cp);
  const std::map<Component, std::set<std::string>> privileged = {
      {Component::kDriver, {"k8s-driver-manager", "nvidia-driver-ctr"}},
      // runtime-config only edits files it is given.
      {Component::kContainerToolkit, {"nvidia-container-toolkit-ctr"}},
      // cuda and plugin only ask the API server.
      {Component::kOperatorValidator,
       {"driver-validation", "toolkit-validation", "nvidia-operator-validator"}},
      {Component::kDevicePlugin, {}},
      {Component::kDcgmExporter, {}},
      {Component::kGpuFeatureDiscovery, {}},
      {Component::kMigManager, {"nvidia-mig-manager"}},
      {Component::kNodeStatusExporter, {}},
  };
  for (Component c : kAllComponents) {
    if (c == Component::kDraDriver) continue;  // RenderTest.DraDriverReplacesTheDevicePlugin
    SCOPED_TRACE(ComponentName(c));
    std::vector<Json> sets = DaemonSets(h.Of(c));
    ASSERT_FALSE(sets.empty());
    for (const Json& ds : sets) {
      EXPECT_EQ(PrivilegedContainers(ds), privileged.at(c));
      bool setup = c == Component::kDriver || c == Component::kContainerToolkit;
      EXPECT_EQ(PodSpec(ds).contains("runtimeClassName"), !setup);
      if (!setup) {
        EXPECT_EQ(PodSpec(ds)["runtimeClassName"], "nvidia");
      }
      EXPECT_EQ(PodSpec(ds).value("hostPID", false), c == Component::kDriver);
      EXPECT_FALSE(PodSpec(ds).contains("hostNetwork"));
    }
  }
}

// DRIVER_CONFIG_DIGEST changes with what the driver's installation depends
// on (a restart with the same digest takes the driver's fast path, a new one
// reloads the module), and only with that.
TEST(RenderTest, DriverConfigDigestFollowsTheDriversConfiguration) {
  auto digest = [](const Json& cp) {
    Rendering r = Render(cp);
    const Json ds = Find(r.Of(Component::kDriver), "DaemonSet/nvidia-driver-daemonset-ubuntu22.04");
    return EnvOf(Container(ds, "nvidia-driver-ctr"), "DRIVER_CONFIG_DIGEST");
  };
  const Json base = LoadSample("clusterpolicy.yaml");
  Json newer = base;
  newer["spec"]["driver"]["version"] = "600.1.2";
  Json other_env = base;
  other_env["spec"]["driver"]["env"] = Json::parse(R"([{"name":"X","value":"1"}])");
  Json unrelated = base;
  unrelated["spec"]["devicePlugin"]["env"] = Json::parse(R"([{"name":"X","value":"1"}])");
  EXPECT_NE(digest(base), digest(newer));
  EXPECT_NE(digest(base), digest(other_env));
  EXPECT_EQ(digest(base), digest(unrelated));
  // Decimal, as NVIDIA's (FNV-32a).
  EXPECT_EQ(digest(base).find_first_not_of("0123456789"), std::string::npos);
}

TEST(RenderTest, RbacIsLeastPrivilege) {
  Rendering h = Helm();
  auto rules = [&](Component c, const std::string& kind) {
    return Find(h.Of(c), kind + "/gpuop-" + ComponentName(c))["rules"];
  };
  // Its node's label through an informer; its configs are mounted files.
  EXPECT_EQ(rules(Component::kDevicePlugin, "ClusterRole"),
            Json::parse(R"([{"apiGroups":[""],"resources":["nodes"],"verbs":["list","watch"]}])"));
  EXPECT_EQ(rules(Component::kGpuFeatureDiscovery, "ClusterRole"),
            Json::parse(R"([{"apiGroups":[""],"resources":["nodes"],"verbs":["get","patch"]}])"));
  EXPECT_EQ(rules(Component::kGpuFeatureDiscovery, "Role"),
            Json::parse(R"([{"apiGroups":["nfd.k8s-sigs.io"],"resources":["nodefeatures"],
                             "verbs":["get","list","watch","create","update","patch"]}])"));
  EXPECT_EQ(rules(Component::kDriver, "ClusterRole"), Json::parse(R"([
              {"apiGroups":[""],"resources":["nodes"],"verbs":["get","list","watch","patch"]},
              {"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch"]},
              {"apiGroups":[""],"resources":["pods/eviction"],"verbs":["create"]},
              {"apiGroups":["resource.k8s.io"],"resources":["resourceclaims"],
               "verbs":["get","list"]},
              {"apiGroups":[""],"resources":["events"],"verbs":["create","patch"]}])"));
  // The validator: its node (the plugin check watches it), the workload pods
  // in its namespace, the DaemonSet they copy owner and tolerations from.
  EXPECT_EQ(
      rules(Component::kOperatorValidator, "ClusterRole"),
      Json::parse(R"([{"apiGroups":[""],"resources":["nodes"],"verbs":["get","list","watch"]}])"));
  EXPECT_EQ(rules(Component::kOperatorValidator, "Role"), Json::parse(R"([
              {"apiGroups":[""],"resources":["pods"],
               "verbs":["get","list","watch","create","delete"]},
              {"apiGroups":["apps"],"resources":["daemonsets"],"verbs":["get"]}])"));
  // The exporter and the toolkit's daemon do not call the API.
  for (Component c : {Component::kContainerToolkit, Component::kDcgmExporter}) {
    for (const RenderedObject& o : h.Of(c)) {
      EXPECT_NE(o.object["kind"], "ClusterRole") << ComponentName(c);
    }
  }
  // The toolkit's preStop asks whether its own DaemonSet stays.
  EXPECT_EQ(rules(Component::kContainerToolkit, "Role"), Json::parse(R"([
              {"apiGroups":[""],"resources":["pods"],"verbs":["get"]},
              {"apiGroups":["apps"],"resources":["daemonsets"],"verbs":["get"]}])"));
  const Json& binding =
      Find(h.Of(Component::kDevicePlugin), "ClusterRoleBinding/gpuop-device-plugin");
  EXPECT_EQ(binding["roleRef"],
            Json::parse(R"({"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole",
                            "name":"gpuop-device-plugin"})"));
  EXPECT_EQ(binding["subjects"],
            Json::parse(R"([{"kind":"ServiceAccount","name":"nvidia-device-plugin-daemonset",
                             "namespace":"gpu-operator"}])"));
}

TEST(RenderTest, DriverDaemonSetPerOs) {
  Rendering h = Helm();
  std::vector<Json> sets = DaemonSets(h.Of(Component::kDriver));
  ASSERT_EQ(sets.size(), 2u);
  struct Want {
    std::string name, image, id, version;
  };
  const Want want[] = {
      {"nvidia-driver-daemonset-ubuntu22.04", "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04",
       "ubuntu", "22.04"},
      {"nvidia-driver-daemonset-rhel9.4", "nvcr.io/nvidia/driver:595.91.07-rhel9", "rhel", "9.4"},
  };
  for (size_t i = 0; i < 2; ++i) {
    const Json& ds = sets[i];
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(ds["metadata"]["name"], want[i].name);
    EXPECT_EQ(PodSpec(ds)["nodeSelector"], Json({{"nvidia.com/gpu.deploy.driver", "true"},
                                                 {kOsIdLabel, want[i].id},
                                                 {kOsVersionLabel, want[i].version}}));
    const Json& ctr = Container(ds, "nvidia-driver-ctr");
    EXPECT_EQ(ctr["image"], want[i].image);
    EXPECT_FALSE(ctr.contains("command"));  // the image's entrypoint
    EXPECT_EQ(EnvOf(ctr, "KERNEL_MODULE_TYPE"), "auto");
    // The Helm sample's startupProbe timing.
    EXPECT_EQ(ctr["startupProbe"]["initialDelaySeconds"], 60);
    EXPECT_EQ(ctr["startupProbe"]["failureThreshold"], 120);
    const Json& manager = Container(ds, "k8s-driver-manager");
    EXPECT_EQ(manager["image"], kGpuopImage);
    EXPECT_THAT(Strings(manager["command"]),
                ElementsAre("gpuop", "--host-root", "/host", "driver-manager", "uninstall_driver"));
    EXPECT_EQ(EnvOf(manager, "ENABLE_GPU_POD_EVICTION"), "true");
    EXPECT_EQ(EnvOf(manager, "ENABLE_AUTO_DRAIN"), "false");
    EXPECT_EQ(EnvOf(manager, "DRAIN_TIMEOUT_SECONDS"), "300s");
    EXPECT_EQ(EnvOf(manager, "NVIDIA_DRIVER_ROOT"), "/run/nvidia/driver");
    EXPECT_EQ(EnvOf(manager, "NODE_NAME"), "<valueFrom>");
    EXPECT_EQ(EnvOf(manager, "POD_NAME"), "<valueFrom>");
    // One digest of the driver's configuration, in both containers.
    EXPECT_FALSE(EnvOf(manager, "DRIVER_CONFIG_DIGEST").empty());
    EXPECT_EQ(EnvOf(manager, "DRIVER_CONFIG_DIGEST"), EnvOf(ctr, "DRIVER_CONFIG_DIGEST"));
    EXPECT_EQ(PodSpec(ds)["initContainers"].size(), 1u);
  }

  // No GPU node needs a driver yet: RBAC only. An unknown OS: the plain name.
  h.oses = {};
  EXPECT_THAT(DaemonSets(h.Of(Component::kDriver)), IsEmpty());
  h.oses = {OsRelease{}};
  sets = DaemonSets(h.Of(Component::kDriver));
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0]["metadata"]["name"], "nvidia-driver-daemonset");
  EXPECT_EQ(PodSpec(sets[0])["nodeSelector"], Json({{"nvidia.com/gpu.deploy.driver", "true"}}));
  EXPECT_EQ(Container(sets[0], "nvidia-driver-ctr")["image"], "nvcr.io/nvidia/driver:595.91.07");
}

TEST(RenderTest, DriverManagerTakesTheSpecsDrainPolicyAndEnv) {
  Json cp = LoadSample("clusterpolicy.yaml");
  cp["spec"]["driver"]["upgradePolicy"]["drain"] = {
      {"enable", true}, {"force", true}, {"timeoutSeconds", 90}, {"podSelector", "app=batch"}};
  cp["spec"]["driver"]["manager"]["env"] = Json::parse(
      R"([{"name":"ENABLE_GPU_POD_EVICTION","value":"false"},{"name":"EXTRA","value":"1"}])");
  cp["spec"]["driver"]["manager"]["imagePullSecrets"] = {"mgr-secret"};
  cp["spec"]["driver"]["imagePullSecrets"] = {"driver-secret"};
  cp["spec"]["driver"]["env"] = Json::parse(R"([{"name":"KERNEL_MODULE_TYPE","value":"open"}])");
  Rendering r = Render(cp);
  std::vector<RenderedObject> objects = r.Of(Component::kDriver);
  ExpectWellFormed(objects, "gpu-operator");
  const Json ds = DaemonSets(objects).at(0);
  const Json& manager = Container(ds, "k8s-driver-manager");
  EXPECT_EQ(EnvOf(manager, "ENABLE_AUTO_DRAIN"), "true");
  EXPECT_EQ(EnvOf(manager, "DRAIN_USE_FORCE"), "true");
  EXPECT_EQ(EnvOf(manager, "DRAIN_TIMEOUT_SECONDS"), "90s");
  EXPECT_EQ(EnvOf(manager, "DRAIN_POD_SELECTOR_LABEL"), "app=batch");
  EXPECT_EQ(EnvOf(manager, "ENABLE_GPU_POD_EVICTION"), "false");
  EXPECT_EQ(EnvOf(manager, "EXTRA"), "1");
  EXPECT_EQ(EnvOf(Container(ds, "nvidia-driver-ctr"), "KERNEL_MODULE_TYPE"), "open");
  EXPECT_EQ(PodSpec(ds)["imagePullSecrets"],
            Json::parse(R"([{"name":"driver-secret"},{"name":"mgr-secret"}])"));
}

TEST(RenderTest, DriverImageTagRule) {
  EXPECT_EQ(DriverImageForOs("nvcr.io/nvidia/driver:550.90.07", {"ubuntu", "24.04"}),
            "nvcr.io/nvidia/driver:550.90.07-ubuntu24.04");
  EXPECT_EQ(DriverImageForOs("nvcr.io/nvidia/driver:550.90.07", {"rhel", "9.4"}),
            "nvcr.io/nvidia/driver:550.90.07-rhel9");
  EXPECT_EQ(DriverImageForOs("nvcr.io/nvidia/driver:550.90.07", {"rocky", "8.10"}),
            "nvcr.io/nvidia/driver:550.90.07-rocky8");
  EXPECT_EQ(DriverImageForOs("nvcr.io/nvidia/driver:550.90.07", {"ol", "9.3"}),
            "nvcr.io/nvidia/driver:550.90.07-ol9");
  EXPECT_EQ(DriverImageForOs("nvcr.io/nvidia/driver:550.90.07", {"rhcos", "4.16"}),
            "nvcr.io/nvidia/driver:550.90.07-rhcos4.16");
  // A registry port is not a tag; no tag, a digest or an unknown OS: unchanged.
  EXPECT_EQ(DriverImageForOs("localhost:5000/driver:550", {"ubuntu", "22.04"}),
            "localhost:5000/driver:550-ubuntu22.04");
  EXPECT_EQ(DriverImageForOs("localhost:5000/driver", {"ubuntu", "22.04"}),
            "localhost:5000/driver");
  const std::string digest = "nvcr.io/nvidia/driver@sha256:" + std::string(64, 'a');
  EXPECT_EQ(DriverImageForOs(digest, {"ubuntu", "22.04"}), digest);
  EXPECT_EQ(DriverImageForOs("nvcr.io/nvidia/driver:550", OsRelease{}),
            "nvcr.io/nvidia/driver:550");

  EXPECT_EQ(DriverDaemonSetName({"ubuntu", "22.04"}), "nvidia-driver-daemonset-ubuntu22.04");
  EXPECT_EQ(DriverDaemonSetName({"SLES", "15_sp5"}), "nvidia-driver-daemonset-sles15-sp5");
  EXPECT_EQ(DriverDaemonSetName(OsRelease{}), "nvidia-driver-daemonset");
  EXPECT_EQ(NodeOsRelease({{kOsIdLabel, "ubuntu"}, {kOsVersionLabel, "22.04"}, {"x", "y"}}),
            (OsRelease{"ubuntu", "22.04"}));
  EXPECT_EQ(NodeOsRelease({}), OsRelease{});
}

TEST(RenderTest, ValidationTaintIsToleratedByEveryOperandOnlyWhenOn) {
  const Json taint = Json::parse(
      R"({"key":"gpuop.io/validation-pending","operator":"Exists","effect":"NoSchedule"})");
  Rendering off = Minimal();
  Rendering on = Minimal();
  on.env.validation_taint = true;
  size_t daemonsets = 0;
  for (Component c : kAllComponents) {
    for (const RenderedObject& r : on.Of(c)) {
      if (r.object.value("kind", "") != "DaemonSet") continue;
      ++daemonsets;
      const Json& tolerations = PodSpec(r.object)["tolerations"];
      EXPECT_NE(std::find(tolerations.begin(), tolerations.end(), taint), tolerations.end())
          << r.object["metadata"]["name"];
    }
    for (const RenderedObject& r : off.Of(c)) {
      if (r.object.value("kind", "") != "DaemonSet") continue;
      const Json& tolerations = PodSpec(r.object)["tolerations"];
      EXPECT_EQ(std::find(tolerations.begin(), tolerations.end(), taint), tolerations.end());
    }
  }
  EXPECT_GE(daemonsets, 5u);
}

TEST(RenderTest, MinimalSampleUsesTheHostDriverAndDefaults) {
  Rendering m = Minimal();
  EXPECT_THAT(m.Of(Component::kDriver), IsEmpty());
  Json toolkit = DaemonSets(m.Of(Component::kContainerToolkit)).at(0);
  const Json& ctr = Container(toolkit, "nvidia-container-toolkit-ctr");
  EXPECT_EQ(EnvOf(ctr, "NVIDIA_DRIVER_ROOT"), "/");
  EXPECT_EQ(EnvOf(ctr, "GPUOP_TOOLKIT_INSTALL_DIR"), "/usr/local/nvidia/toolkit");
  // Leaving for good, it takes its runtime handler and files off the node.
  EXPECT_THAT(Strings(ctr["lifecycle"]["preStop"]["exec"]["command"]),
              ElementsAre("gpuop", "--host-root", "/host", "node-cleanup", "--runtime",
                          "containerd", "--runtime-name", "nvidia"));
  const Json& init = Container(toolkit, "runtime-config");
  EXPECT_THAT(Strings(init["command"]),
              ElementsAre("gpuop", "--host-root", "/host", "runtime", "configure", "--runtime",
                          "containerd", "--runtime-name", "nvidia", "--cdi-enabled"));
  // Defaults of the chart that the minimal spec leaves out.
  EXPECT_EQ(PodSpec(toolkit)["tolerations"],
            Json::parse(R"([{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}])"));
  EXPECT_EQ(PodSpec(toolkit)["priorityClassName"], "system-node-critical");
  EXPECT_EQ(toolkit["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], 1);
  // No daemonsets.labels: just gpuop's and the selector's.
  EXPECT_EQ(toolkit["spec"]["template"]["metadata"]["labels"],
            Json({{"app", "nvidia-container-toolkit-daemonset"},
                  {kManagedByLabel, "gpuop"},
                  {kPartOfLabel, "gpuop"},
                  {kComponentLabel, "container-toolkit"}}));
  EXPECT_FALSE(toolkit["spec"]["template"]["metadata"].contains("annotations"));

  // The validator's checks; the plugin check only with the device plugin.
  Json validator = DaemonSets(m.Of(Component::kOperatorValidator)).at(0);
  std::vector<std::string> inits;
  for (const Json& c : PodSpec(validator)["initContainers"]) inits.push_back(c["name"]);
  EXPECT_THAT(inits, ElementsAre("driver-validation", "toolkit-validation", "cuda-validation",
                                 "plugin-validation"));
  EXPECT_EQ(EnvOf(Container(validator, "toolkit-validation"), "COMPONENT"), "toolkit");
  // NVIDIA's: only the driver check waits; the others fail fast (and say why).
  EXPECT_EQ(EnvOf(Container(validator, "driver-validation"), "WITH_WAIT"), "true");
  EXPECT_EQ(EnvOf(Container(validator, "toolkit-validation"), "WITH_WAIT"), "false");
  EXPECT_EQ(EnvOf(Container(validator, "cuda-validation"), "WITH_WAIT"), "false");
  EXPECT_EQ(Container(validator, "cuda-validation")["terminationMessagePolicy"],
            "FallbackToLogsOnError");
  // The workload pods' image, runtime class; the plugin check runs no pod.
  EXPECT_EQ(EnvOf(Container(validator, "cuda-validation"), "VALIDATOR_IMAGE"),
            Container(validator, "cuda-validation")["image"]);
  EXPECT_EQ(EnvOf(Container(validator, "cuda-validation"), "VALIDATOR_RUNTIME_CLASS"), "nvidia");
  EXPECT_EQ(EnvOf(Container(validator, "cuda-validation"), "WITH_WORKLOAD"), "");
  EXPECT_EQ(EnvOf(Container(validator, "plugin-validation"), "WITH_WORKLOAD"), "false");
  EXPECT_EQ(EnvOf(Container(validator, "plugin-validation"), "MIG_STRATEGY"), "single");
  EXPECT_EQ(EnvOf(Container(validator, "plugin-validation"), "VALIDATOR_IMAGE"),
            Container(validator, "cuda-validation")["image"]);
  EXPECT_EQ(
      Container(validator, "nvidia-operator-validator")["lifecycle"]["preStop"]["exec"]["command"],
      Json::array({"gpuop", "--host-root", "/host", "validator", "--cleanup"}));
  // The driver is checked again while the node runs (a later loss unreadies it).
  const Json& ready = Container(validator, "nvidia-operator-validator")["readinessProbe"];
  EXPECT_EQ(ready["exec"]["command"],
            Json::array({"gpuop", "--host-root", "/host", "validator", "--probe"}));
  EXPECT_EQ(ready["failureThreshold"], 3);  // one slow probe on a busy node is not a lost driver
  EXPECT_EQ(EnvOf(Container(validator, "toolkit-validation"), "NVIDIA_VISIBLE_DEVICES"), "all");
  EXPECT_EQ(EnvOf(Container(validator, "driver-validation"), "NVIDIA_VISIBLE_DEVICES"), "void");
  Json cp = LoadSample("clusterpolicy-minimal.yaml");
  cp["spec"]["devicePlugin"]["enabled"] = false;
  cp["spec"]["validator"]["plugin"]["env"] = Json::parse(R"([{"name":"X","value":"1"}])");
  cp["spec"]["validator"]["cuda"]["env"] =
      Json::parse(R"([{"name":"WITH_WORKLOAD","value":"false"}])");
  validator = DaemonSets(Render(cp).Of(Component::kOperatorValidator)).at(0);
  inits.clear();
  for (const Json& c : PodSpec(validator)["initContainers"]) inits.push_back(c["name"]);
  EXPECT_THAT(inits, ElementsAre("driver-validation", "toolkit-validation", "cuda-validation"));
  EXPECT_EQ(EnvOf(Container(validator, "cuda-validation"), "WITH_WORKLOAD"), "false");
  EXPECT_EQ(EnvOf(Container(validator, "driver-validation"), "WITH_WORKLOAD"), "");
}

TEST(RenderTest, SpecSettingsReachTheDaemonSet) {
  Json cp = LoadSample("clusterpolicy-minimal.yaml");
  cp["spec"]["daemonsets"] = Json::parse(R"({
    "labels": {"team": "ml", "app": "not-the-selector"},
    "annotations": {"example.com/note": "x"},
    "tolerations": [{"operator": "Exists"}],
    "priorityClassName": "gpu-critical",
    "updateStrategy": "OnDelete",
    "podSecurityContext": {"runAsUser": 0}
  })");
  cp["spec"]["devicePlugin"] = Json::parse(R"({
    "imagePullPolicy": "Always",
    "imagePullSecrets": ["regcred"],
    "args": ["--fail-on-init-error=false"],
    "env": [{"name": "MIG_STRATEGY", "value": "mixed"}, {"name": "EXTRA", "value": "x"},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "10m"}},
    "hostNetwork": true
  })");
  Rendering r = Render(cp);
  std::vector<RenderedObject> objects = r.Of(Component::kDevicePlugin);
  ExpectWellFormed(objects, "gpu-operator");
  Json ds = DaemonSets(objects).at(0);
  const Json& labels = ds["spec"]["template"]["metadata"]["labels"];
  EXPECT_EQ(labels["team"], "ml");
  EXPECT_EQ(labels["app"], "nvidia-device-plugin-daemonset");
  EXPECT_EQ(ds["spec"]["template"]["metadata"]["annotations"], Json({{"example.com/note", "x"}}));
  EXPECT_EQ(PodSpec(ds)["tolerations"], Json::parse(R"([{"operator":"Exists"}])"));
  EXPECT_EQ(PodSpec(ds)["priorityClassName"], "gpu-critical");
  EXPECT_EQ(ds["spec"]["updateStrategy"], Json({{"type", "OnDelete"}}));
  EXPECT_EQ(PodSpec(ds)["securityContext"], Json({{"runAsUser", 0}}));
  EXPECT_EQ(PodSpec(ds)["imagePullSecrets"], Json::parse(R"([{"name":"regcred"}])"));
  EXPECT_EQ(PodSpec(ds)["hostNetwork"], true);
  EXPECT_EQ(PodSpec(ds)["dnsPolicy"], "ClusterFirstWithHostNet");
  const Json& ctr = Container(ds, "nvidia-device-plugin");
  EXPECT_EQ(ctr["imagePullPolicy"], "Always");
  EXPECT_THAT(Strings(ctr["args"]), ElementsAre("--fail-on-init-error=false"));
  EXPECT_EQ(ctr["resources"],
            Json::parse(R"({"limits":{"memory":"64Mi"},"requests":{"cpu":"10m"}})"));
  // Spec env after the defaults; the spec wins on a name, once.
  EXPECT_EQ(EnvCount(ctr, "MIG_STRATEGY"), 1);
  EXPECT_EQ(EnvOf(ctr, "MIG_STRATEGY"), "mixed");
  const Json& env = ctr["env"];
  EXPECT_EQ(env[env.size() - 3]["name"], "MIG_STRATEGY");
  EXPECT_EQ(env[env.size() - 2]["name"], "EXTRA");
  EXPECT_EQ(env[env.size() - 1]["name"], "POD_IP");
  EXPECT_EQ(EnvOf(ctr, "POD_IP"), "<valueFrom>");

  // A percentage stays a string.
  cp = LoadSample("clusterpolicy-minimal.yaml");
  cp["spec"]["daemonsets"]["rollingUpdate"]["maxUnavailable"] = "25%";
  ds = DaemonSets(Render(cp).Of(Component::kGpuFeatureDiscovery)).at(0);
  EXPECT_EQ(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], "25%");
}

TEST(RenderTest, ExporterServiceAndMetricsConfig) {
  Rendering h = Helm();
  std::vector<RenderedObject> objects = h.Of(Component::kDcgmExporter);
  const Json& svc = Find(objects, "Service/nvidia-dcgm-exporter");
  EXPECT_EQ(svc["spec"]["selector"], Json({{"app", "nvidia-dcgm-exporter"}}));
  EXPECT_EQ(
      svc["spec"]["ports"],
      Json::parse(R"([{"name":"gpu-metrics","port":9400,"targetPort":9400,"protocol":"TCP"}])"));
  EXPECT_EQ(svc["spec"]["internalTrafficPolicy"], "Cluster");  // the chart's service settings
  EXPECT_EQ(svc["metadata"]["labels"]["app"], "nvidia-dcgm-exporter");
  Json ds = DaemonSets(objects).at(0);
  const Json& ctr = Container(ds, "nvidia-dcgm-exporter");
  EXPECT_EQ(EnvOf(ctr, "DCGM_EXPORTER_LISTEN"), ":9400");
  EXPECT_EQ(EnvOf(ctr, "DCGM_EXPORTER_KUBERNETES"), "true");
  EXPECT_EQ(EnvOf(ctr, "DCGM_EXPORTER_COLLECTORS"), "");
  EXPECT_EQ(ctr["ports"], Json::parse(R"([{"name":"metrics","containerPort":9400}])"));

  Json cp = LoadSample("clusterpolicy-minimal.yaml");
  cp["spec"]["dcgmExporter"] = Json::parse(R"({
    "config": {"name": "my-metrics"},
    "hostPID": true,
    "podLabels": {"scrape": "yes"},
    "service": {"type": "NodePort"}
  })");
  objects = Render(cp).Of(Component::kDcgmExporter);
  ExpectWellFormed(objects, "gpu-operator");
  EXPECT_EQ(Find(objects, "Service/nvidia-dcgm-exporter")["spec"]["type"], "NodePort");
  ds = DaemonSets(objects).at(0);
  EXPECT_EQ(EnvOf(Container(ds, "nvidia-dcgm-exporter"), "DCGM_EXPORTER_COLLECTORS"),
            "/etc/dcgm-exporter/dcgm-metrics.csv");
  EXPECT_EQ(PodSpec(ds)["hostPID"], true);
  EXPECT_EQ(ds["spec"]["template"]["metadata"]["labels"]["scrape"], "yes");
  bool mounted = false;
  for (const Json& v : PodSpec(ds)["volumes"]) {
    mounted |= v.contains("configMap") && v["configMap"]["name"] == "my-metrics";
  }
  EXPECT_TRUE(mounted);
}

TEST(RenderTest, NodeStatusExporterWhenEnabled) {
  Json cp = LoadSample("clusterpolicy.yaml");
  cp["spec"]["nodeStatusExporter"]["enabled"] = true;
  std::vector<RenderedObject> objects = Render(cp).Of(Component::kNodeStatusExporter);
  EXPECT_THAT(Describe(objects), ElementsAre("ServiceAccount/nvidia-node-status-exporter",
                                             "ClusterRole/gpuop-node-status-exporter",
                                             "ClusterRoleBinding/gpuop-node-status-exporter",
                                             "Service/nvidia-node-status-exporter",
                                             "DaemonSet/nvidia-node-status-exporter"));
  EXPECT_EQ(Find(objects, "Service/nvidia-node-status-exporter")["spec"]["ports"][0]["port"], 8000);
  Json ds = DaemonSets(objects).at(0);
  EXPECT_THAT(Strings(Container(ds, "nvidia-node-status-exporter")["command"]),
              ElementsAre("gpuop", "--host-root", "/host", "node-status-exporter"));
  EXPECT_EQ(PodSpec(ds)["nodeSelector"],
            Json({{"nvidia.com/gpu.deploy.node-status-exporter", "true"}}));
}

TEST(RenderTest, MigManagerConfigMaps) {
  Rendering h = Helm();
  std::vector<RenderedObject> objects = h.Of(Component::kMigManager);
  const Json& cm = Find(objects, "ConfigMap/default-mig-parted-config");
  const std::string config = cm["data"]["config.yaml"];
  YAML::Node parsed = YAML::Load(config);
  EXPECT_EQ(parsed["version"].as<std::string>(), "v1");
  EXPECT_FALSE(parsed["mig-configs"]["all-disabled"][0]["mig-enabled"].as<bool>());
  EXPECT_TRUE(parsed["mig-configs"]["all-enabled"][0]["mig-enabled"].as<bool>());
  EXPECT_EQ(parsed["mig-configs"]["all-enabled"][0]["devices"].as<std::string>(), "all");
  Json ds = DaemonSets(objects).at(0);
  const Json& ctr = Container(ds, "nvidia-mig-manager");
  EXPECT_EQ(EnvOf(ctr, "CONFIG_FILE"), "/mig-parted-config/config.yaml");
  EXPECT_EQ(EnvOf(ctr, "CDI_ENABLED"), "true");
  EXPECT_EQ(EnvOf(ctr, "WITH_REBOOT"), "false");
  EXPECT_EQ(EnvOf(ctr, "GPU_CLIENTS_FILE"), "");
  EXPECT_EQ(EnvOf(ctr, "DEFAULT_GPU_CLIENTS_NAMESPACE"), "gpu-operator");
  EXPECT_EQ(EnvOf(ctr, "GPUOP_TOOLKIT_INSTALL_DIR"), "/usr/local/nvidia/toolkit");

  // A user-named config is the user's: mounted, never created.
  Json cp = LoadSample("clusterpolicy.yaml");
  cp["spec"]["migManager"]["config"] = {{"name", "my-layouts"}, {"default", "all-1g.10gb"}};
  cp["spec"]["migManager"]["gpuClientsConfig"] = {{"name", "my-clients"}};
  objects = Render(cp).Of(Component::kMigManager);
  ExpectWellFormed(objects, "gpu-operator");
  for (const RenderedObject& r : objects) EXPECT_NE(r.object["kind"], "ConfigMap");
  ds = DaemonSets(objects).at(0);
  std::set<std::string> config_maps;
  for (const Json& v : PodSpec(ds)["volumes"]) {
    if (v.contains("configMap")) config_maps.insert(v["configMap"]["name"]);
  }
  EXPECT_EQ(config_maps, (std::set<std::string>{"my-layouts", "my-clients"}));
  EXPECT_EQ(EnvOf(Container(ds, "nvidia-mig-manager"), "GPU_CLIENTS_FILE"),
            "/gpu-clients/clients.yaml");
}

TEST(RenderTest, HashIsStableAndFollowsTheSpec) {
  Rendering h = Helm();
  std::vector<RenderedObject> a = h.All();
  std::vector<RenderedObject> b = h.All();
  ASSERT_EQ(a.size(), b.size());
  std::set<std::string> hashes;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].object, b[i].object);
    const std::string hash = a[i].object["metadata"]["annotations"][kLastAppliedHashAnnotation];
    EXPECT_THAT(hash, ::testing::MatchesRegex("[0-9a-f]{8}"));
    hashes.insert(hash);
  }
  EXPECT_EQ(hashes.size(), a.size());  // distinct objects, distinct hashes

  // The annotation does not feed the hash; anything else does.
  Json obj = a.back().object;
  const std::string hash = obj["metadata"]["annotations"][kLastAppliedHashAnnotation];
  obj["metadata"]["annotations"].erase(kLastAppliedHashAnnotation);
  EXPECT_EQ(ObjectHash(obj), hash);
  obj["metadata"]["annotations"][kLastAppliedHashAnnotation] = "00000000";
  EXPECT_EQ(ObjectHash(obj), hash);
  obj["metadata"]["labels"]["x"] = "y";
  EXPECT_NE(ObjectHash(obj), hash);

  // A spec change moves the hash of exactly what it touches.
  Json cp = LoadSample("clusterpolicy.yaml");
  cp["spec"]["devicePlugin"]["env"] = Json::parse(R"([{"name":"EXTRA","value":"1"}])");
  Rendering changed = Render(cp);
  auto before = h.Of(Component::kDevicePlugin);
  auto after = changed.Of(Component::kDevicePlugin);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    SCOPED_TRACE(Describe(before[i]));
    bool is_ds = before[i].object["kind"] == "DaemonSet";
    EXPECT_EQ(
        before[i].object["metadata"]["annotations"] == after[i].object["metadata"]["annotations"],
        !is_ds);
  }
  // FNV-1a (32 bits) of the two bytes "{}", computed by hand.
  EXPECT_EQ(ObjectHash(Json::object()), "5465b825");
}

TEST(RenderTest, PrerequisitesAndPodSecurity) {
  Rendering h = Helm();
  std::vector<RenderedObject> pre = h.Prerequisites();
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].resource.QualifiedName(), "runtimeclasses.node.k8s.io");
  EXPECT_EQ(pre[0].object["handler"], "nvidia");
  EXPECT_EQ(pre[0].object["metadata"]["labels"][kComponentLabel], kPrerequisitesComponent);
  ExpectWellFormed(pre, "gpu-operator");
  EXPECT_THAT(NamespacePsaLabels(h.policy), IsEmpty());

  Json cp = LoadSample("clusterpolicy-minimal.yaml");
  cp["spec"]["operator"]["runtimeClass"] = "nvidia-gpu";
  cp["spec"]["psa"]["enabled"] = true;
  Rendering r = Render(cp);
  pre = r.Prerequisites();
  EXPECT_THAT(Describe(pre), ElementsAre("RuntimeClass/nvidia-gpu"));
  EXPECT_EQ(pre[0].object["handler"], "nvidia-gpu");
  Json ds = DaemonSets(r.Of(Component::kDevicePlugin)).at(0);
  EXPECT_EQ(PodSpec(ds)["runtimeClassName"], "nvidia-gpu");
  ds = DaemonSets(r.Of(Component::kContainerToolkit)).at(0);
  EXPECT_THAT(Strings(Container(ds, "runtime-config")["command"]),
              ::testing::Contains("nvidia-gpu"));
  EXPECT_EQ(NamespacePsaLabels(r.policy), (std::map<std::string, std::string>{
                                              {"pod-security.kubernetes.io/audit", "privileged"},
                                              {"pod-security.kubernetes.io/enforce", "privileged"},
                                              {"pod-security.kubernetes.io/warn", "privileged"}}));
}

// The pod-security labels go through server-side apply as their own field
// manager: applied when missing or different, removed (an apply without
// labels) only while that manager owns some, so a user's labels survive.
TEST(RenderTest, PodSecurityLabelsApplyAndRemoveOnlyWhatGpuopOwns) {
  const std::map<std::string, std::string> want = {
      {"pod-security.kubernetes.io/audit", "privileged"},
      {"pod-security.kubernetes.io/enforce", "privileged"},
      {"pod-security.kubernetes.io/warn", "privileged"}};
  Json bare = Json::parse(R"({"metadata": {"name": "gpu-operator"}})");
  EXPECT_FALSE(PsaApplyConfig(bare, {}).has_value());
  auto add = PsaApplyConfig(bare, want);
  ASSERT_TRUE(add.has_value());
  EXPECT_EQ((*add)["kind"], "Namespace");
  EXPECT_EQ((*add)["metadata"]["name"], "gpu-operator");
  EXPECT_EQ((*add)["metadata"]["labels"], Json(want));

  Json owned = bare;
  owned["metadata"]["labels"] = want;
  owned["metadata"]["managedFields"] = Json::parse(R"([
    {"manager": "kubectl", "operation": "Update",
     "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}},
    {"manager": "gpuop-operator-psa", "operation": "Apply",
     "fieldsV1": {"f:metadata": {"f:labels": {"f:pod-security.kubernetes.io/audit": {},
       "f:pod-security.kubernetes.io/enforce": {}, "f:pod-security.kubernetes.io/warn": {}}}}}])");
  EXPECT_FALSE(PsaApplyConfig(owned, want).has_value());  // converged: no write
  auto remove = PsaApplyConfig(owned, {});
  ASSERT_TRUE(remove.has_value());
  EXPECT_FALSE(remove->at("metadata").contains("labels"));

  // Same labels, set by the user: psa on takes them over (one apply), psa off
  // leaves them alone.
  Json users = owned;
  users["metadata"]["managedFields"].erase(1);
  EXPECT_TRUE(PsaApplyConfig(users, want).has_value());
  EXPECT_FALSE(PsaApplyConfig(users, {}).has_value());
  // A label changed by hand is set back while psa is on.
  owned["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "baseline";
  EXPECT_TRUE(PsaApplyConfig(owned, want).has_value());
}

TEST(RenderTest, OtherNamespaceAndRuntime) {
  Json cp = LoadSample("clusterpolicy-minimal.yaml");
  cp["spec"]["operator"]["defaultRuntime"] = "crio";
  Rendering r = Render(cp);
  r.env.namespace_ = "gpuop-system";
  std::vector<RenderedObject> objects = r.Of(Component::kContainerToolkit);
  ExpectWellFormed(objects, "gpuop-system");
  const Json& binding = Find(objects, "RoleBinding/gpuop-container-toolkit");
  EXPECT_EQ(binding["subjects"][0]["namespace"], "gpuop-system");
  Json ds = DaemonSets(objects).at(0);
  EXPECT_THAT(Strings(Container(ds, "runtime-config")["command"]), ::testing::Contains("crio"));
  EXPECT_EQ(HostMounts(ds)["/etc/crio"], (std::set<std::string>{"/host/etc/crio (rw)"}));
  EXPECT_EQ(HostMounts(ds).count("/etc/containerd"), 0u);
}

}  // namespace
}  // namespace gpuop::op
