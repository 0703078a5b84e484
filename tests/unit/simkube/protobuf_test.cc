// The protobuf body decoder (sim/kube/protobuf.h): messages written by a tiny
// encoder here, the way client-go's generated code writes them, decode into
// the JSON Kubernetes' JSON serializer writes for the same object; every kind
// of malformed input is an error, never a crash or a read past the input; and
// the API emulator takes protobuf bodies for writes and deletions.
#include "sim/kube/protobuf.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "sim/kube/server.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

// ---- A tiny encoder -------------------------------------------------------

std::string Varint(uint64_t v) {
  std::string out;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    out += static_cast<char>(byte);
  } while (v != 0);
  return out;
}
std::string Tag(uint32_t number, uint32_t wire) { return Varint(uint64_t{number} << 3 | wire); }
std::string Len(uint32_t number, std::string_view bytes) {
  return Tag(number, 2) + Varint(bytes.size()) + std::string(bytes);
}
std::string VarintField(uint32_t number, uint64_t v) { return Tag(number, 0) + Varint(v); }
std::string MapEntry(uint32_t number, std::string_view key, std::string_view value) {
  return Len(number, Len(1, key) + Len(2, value));
}
std::string Timestamp(int64_t seconds) { return VarintField(1, static_cast<uint64_t>(seconds)); }

// ObjectMeta as Go writes it: every value field, the empty ones too, and the
// zero creationTimestamp as an empty message.
std::string Meta(std::string_view name, std::string_view ns = "", std::string_view more = "") {
  return Len(1, name) + Len(2, "") + Len(3, ns) + Len(4, "") + Len(5, "") + Len(6, "") +
         VarintField(7, 0) + Len(8, "") + std::string(more);
}

std::string Envelope(std::string_view api_version, std::string_view kind, std::string_view raw) {
  return std::string("k8s\0", 4) + Len(1, Len(1, api_version) + Len(2, kind)) + Len(2, raw) +
         Len(3, "") + Len(4, "");
}

Json Decode(const std::string& body) {
  auto r = DecodeKubeProtobuf(body);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : Json();
}

// ---- Kinds ----------------------------------------------------------------

TEST(ProtobufTest, NamespaceAsKubectlCreatesIt) {
  // kubectl create namespace foo: spec and status are written, empty.
  std::string raw = Len(1, Meta("foo")) + Len(2, "") + Len(3, Len(1, ""));
  EXPECT_EQ(Decode(Envelope("v1", "Namespace", raw)), Json::parse(R"({
    "apiVersion": "v1", "kind": "Namespace",
    "metadata": {"name": "foo", "creationTimestamp": null}, "spec": {}, "status": {}})"));

  std::string full =
      Len(1, Meta("bar")) + Len(2, Len(1, "kubernetes")) +
      Len(3, Len(1, "Terminating") +
                 Len(2, Len(1, "NamespaceDeletionContentFailure") + Len(2, "False") +
                            Len(4, Timestamp(1796292000)) + Len(5, "") + Len(6, "")));
  EXPECT_EQ(Decode(Envelope("v1", "Namespace", full)), Json::parse(R"({
    "apiVersion": "v1", "kind": "Namespace",
    "metadata": {"name": "bar", "creationTimestamp": null},
    "spec": {"finalizers": ["kubernetes"]},
    "status": {"phase": "Terminating", "conditions": [{
      "type": "NamespaceDeletionContentFailure", "status": "False",
      "lastTransitionTime": "2026-12-03T10:00:00Z"}]}})"));
}

TEST(ProtobufTest, ObjectMetaEveryField) {
  std::string owner = Len(5, "apps/v1") + Len(1, "ReplicaSet") + Len(3, "rs") + Len(4, "u-1") +
                      VarintField(6, 1) + VarintField(7, 0);
  std::string managed = Len(1, "kubectl") + Len(2, "Update") + Len(3, "v1") +
                        Len(4, Timestamp(1796292000)) + Len(6, "FieldsV1") +
                        Len(7, Len(1, R"({"f:data":{".":{}}})")) + Len(8, "");
  std::string meta = Len(1, "m") + Len(2, "gen-") + Len(3, "ns") + Len(4, "") + Len(5, "uid-1") +
                     Len(6, "42") + VarintField(7, 3) + Len(8, Timestamp(1796292000)) +
                     Len(9, Timestamp(-14182940)) + VarintField(10, 0) + MapEntry(11, "app", "x") +
                     MapEntry(11, "tier", "") + MapEntry(12, "note", "é ✓") + Len(13, owner) +
                     Len(14, "example.com/f") + Len(14, "") + Len(17, managed);
  EXPECT_EQ(Decode(Envelope("v1", "ConfigMap", Len(1, meta))), Json::parse(R"({
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {
      "name": "m", "generateName": "gen-", "namespace": "ns", "uid": "uid-1",
      "resourceVersion": "42", "generation": 3,
      "creationTimestamp": "2026-12-03T10:00:00Z", "deletionTimestamp": "1969-07-20T20:17:40Z",
      "deletionGracePeriodSeconds": 0,
      "labels": {"app": "x", "tier": ""}, "annotations": {"note": "é ✓"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                           "uid": "u-1", "controller": true, "blockOwnerDeletion": false}],
      "finalizers": ["example.com/f", ""],
      "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                         "time": "2026-12-03T10:00:00Z", "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:data": {".": {}}}}]}})"));
}

TEST(ProtobufTest, SecretConfigMapServiceAccount) {
  // kubectl create secret generic s --from-literal=k=v, plus binary data.
  std::string secret = Len(1, Meta("s", "default")) + MapEntry(2, "k", "v") +
                       MapEntry(2, "bin", std::string("\x00\xff\x10", 3)) + Len(3, "") +
                       MapEntry(4, "plain", "text") + VarintField(5, 0);
  EXPECT_EQ(Decode(Envelope("v1", "Secret", secret)), Json::parse(R"({
    "apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "s", "namespace": "default", "creationTimestamp": null},
    "data": {"k": "dg==", "bin": "AP8Q"}, "stringData": {"plain": "text"},
    "immutable": false})"));
  EXPECT_EQ(Decode(Envelope("v1", "Secret", Len(1, Meta("t")) + Len(3, "Opaque")))["type"],
            "Opaque");

  std::string cm =
      Len(1, Meta("cm")) + MapEntry(2, "a", "b") + MapEntry(3, "blob", "hi") + VarintField(4, 1);
  EXPECT_EQ(Decode(Envelope("v1", "ConfigMap", cm)), Json::parse(R"({
    "apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "cm", "creationTimestamp": null},
    "data": {"a": "b"}, "binaryData": {"blob": "aGk="}, "immutable": true})"));

  std::string sa = Len(1, Meta("sa")) + Len(2, Len(1, "Secret") + Len(3, "tok") + Len(2, "")) +
                   Len(3, Len(1, "pull")) + VarintField(4, 0);
  EXPECT_EQ(Decode(Envelope("v1", "ServiceAccount", sa)), Json::parse(R"({
    "apiVersion": "v1", "kind": "ServiceAccount",
    "metadata": {"name": "sa", "creationTimestamp": null},
    "secrets": [{"kind": "Secret", "name": "tok"}], "imagePullSecrets": [{"name": "pull"}],
    "automountServiceAccountToken": false})"));
}

TEST(ProtobufTest, RbacKinds) {
  // kubectl create role r --verb=get --resource=pods: apiGroups [""] stays.
  std::string role = Len(1, Meta("r")) + Len(2, Len(1, "get") + Len(2, "") + Len(3, "pods"));
  EXPECT_EQ(Decode(Envelope("rbac.authorization.k8s.io/v1", "Role", role))["rules"],
            Json::parse(R"([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}])"));

  std::string selector = MapEntry(1, "agg", "true") +
                         Len(2, Len(1, "tier") + Len(2, "In") + Len(3, "a") + Len(3, "b"));
  std::string cr =
      Len(1, Meta("cr")) + Len(2, Len(1, "get") + Len(5, "/healthz")) + Len(3, Len(1, selector));
  Json cluster_role = Decode(Envelope("rbac.authorization.k8s.io/v1", "ClusterRole", cr));
  EXPECT_EQ(cluster_role["rules"],
            Json::parse(R"([{"verbs":["get"],"nonResourceURLs":["/healthz"]}])"));
  EXPECT_EQ(cluster_role["aggregationRule"], Json::parse(R"({"clusterRoleSelectors": [{
    "matchLabels": {"agg": "true"},
    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}]})"));

  // RoleRef and Subject fields without omitempty are written even when empty.
  std::string rb = Len(1, Meta("rb")) +
                   Len(2, Len(1, "ServiceAccount") + Len(2, "") + Len(3, "sa") + Len(4, "ns")) +
                   Len(3, Len(1, "") + Len(2, "ClusterRole") + Len(3, "view"));
  EXPECT_EQ(Decode(Envelope("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", rb)),
            Json::parse(R"({
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "rb", "creationTimestamp": null},
    "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}],
    "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "view"}})"));
  EXPECT_EQ(Decode(Envelope("rbac.authorization.k8s.io/v1", "RoleBinding", Len(3, "")))["roleRef"],
            Json::parse(R"({"apiGroup": "", "kind": "", "name": ""})"));
}

TEST(ProtobufTest, EvictionAndBinding) {
  std::string opts =
      VarintField(1, 0) + Len(2, Len(1, "uid-1")) + Len(4, "Foreground") + Len(5, "All");
  std::string eviction = Len(1, Meta("p", "default")) + Len(2, opts);
  EXPECT_EQ(Decode(Envelope("policy/v1", "Eviction", eviction)), Json::parse(R"({
    "apiVersion": "policy/v1", "kind": "Eviction",
    "metadata": {"name": "p", "namespace": "default", "creationTimestamp": null},
    "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-1"},
                      "propagationPolicy": "Foreground", "dryRun": ["All"]}})"));

  // DeleteOptions come in the client's group version.
  for (const char* api_version : {"v1", "apps/v1", "meta.k8s.io/v1"}) {
    Json d = Decode(Envelope(api_version, "DeleteOptions", Len(4, "Orphan")));
    EXPECT_EQ(d, Json({{"apiVersion", api_version},
                       {"kind", "DeleteOptions"},
                       {"propagationPolicy", "Orphan"}}));
  }

  std::string binding = Len(1, Meta("p")) + Len(2, Len(1, "Node") + Len(3, "n1"));
  EXPECT_EQ(Decode(Envelope("v1", "Binding", binding))["target"],
            Json::parse(R"({"kind": "Node", "name": "n1"})"));
}

// ---- Workload kinds: the pod tree -----------------------------------------

// intstr.IntOrString and resource.Quantity as Go writes them.
std::string IntVal(int32_t v) {
  return VarintField(1, 0) + VarintField(2, static_cast<uint64_t>(int64_t{v})) + Len(3, "");
}
std::string StrVal(std::string_view s) { return VarintField(1, 1) + VarintField(2, 0) + Len(3, s); }
std::string Quantity(std::string_view s) { return Len(1, s); }
std::string QuantityEntry(uint32_t number, std::string_view key, std::string_view q) {
  return Len(number, Len(1, key) + Len(2, Quantity(q)));
}

// A container as kubectl's generators make it: Go writes every value field.
std::string GeneratedContainer(std::string_view name, std::string_view image,
                               std::string_view more = "") {
  return Len(1, name) + Len(2, image) + std::string(more) + Len(5, "") + Len(8, "") + Len(13, "") +
         Len(14, "") + VarintField(16, 0) + VarintField(17, 0) + Len(20, "") + VarintField(18, 0);
}
// A PodSpec's value fields, as Go writes them around the containers.
std::string PodSpecValues() {
  return Len(6, "") + Len(8, "") + Len(9, "") + Len(10, "") + VarintField(11, 0) +
         VarintField(12, 0) + VarintField(13, 0) + Len(16, "") + Len(17, "") + Len(19, "") +
         Len(24, "");
}

// `kubectl create deployment pb --image=busybox --replicas=2 --port=80 --
// sleep 3600`, field for field as client-go encodes it.
std::string KubectlDeployment() {
  std::string labels = MapEntry(11, "app", "pb");
  std::string port = Len(1, "") + VarintField(2, 0) + VarintField(3, 80) + Len(4, "") + Len(5, "");
  std::string container =
      GeneratedContainer("busybox", "busybox", Len(3, "sleep") + Len(3, "3600") + Len(6, port));
  std::string pod_spec = Len(2, container) + Len(3, "") + PodSpecValues();
  std::string spec = VarintField(1, 2) + Len(2, MapEntry(1, "app", "pb")) +
                     Len(3, Len(1, Meta("", "", labels)) + Len(2, pod_spec)) + Len(4, Len(1, "")) +
                     VarintField(5, 0) + VarintField(7, 0);
  std::string status = VarintField(1, 0) + VarintField(2, 0) + VarintField(3, 0) +
                       VarintField(4, 0) + VarintField(5, 0) + VarintField(7, 0);
  return Len(1, Meta("pb", "default", labels)) + Len(2, spec) + Len(3, status);
}

constexpr const char* kKubectlDeploymentJson = R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "pb", "namespace": "default", "creationTimestamp": null,
                 "labels": {"app": "pb"}},
    "spec": {
      "replicas": 2,
      "selector": {"matchLabels": {"app": "pb"}},
      "template": {
        "metadata": {"creationTimestamp": null, "labels": {"app": "pb"}},
        "spec": {"containers": [{"name": "busybox", "image": "busybox",
                                 "command": ["sleep", "3600"],
                                 "ports": [{"containerPort": 80}], "resources": {}}]}},
      "strategy": {}},
    "status": {}})";

TEST(ProtobufWorkloadTest, DeploymentAsKubectlCreatesIt) {
  EXPECT_EQ(Decode(Envelope("apps/v1", "Deployment", KubectlDeployment())),
            Json::parse(kKubectlDeploymentJson));
}

TEST(ProtobufWorkloadTest, DeploymentStrategyIntOrString) {
  std::string strategy =
      Len(1, "RollingUpdate") + Len(2, Len(1, StrVal("25%")) + Len(2, IntVal(0)));
  std::string spec = Len(4, strategy) + VarintField(5, 10) + VarintField(6, 0) + VarintField(7, 1) +
                     VarintField(9, 600);
  Json d = Decode(Envelope("apps/v1", "Deployment", Len(1, Meta("d")) + Len(2, spec)));
  EXPECT_EQ(d["spec"], Json::parse(R"({
    "template": {"metadata": {"creationTimestamp": null}, "spec": {"containers": null}},
    "strategy": {"type": "RollingUpdate",
                 "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0}},
    "minReadySeconds": 10, "revisionHistoryLimit": 0, "paused": true,
    "progressDeadlineSeconds": 600})"));
}

// A pod with most of what a manifest sets: every volume source with a table,
// env from each source, quantities, each probe handler, lifecycle hooks,
// security contexts, affinity, tolerations and spread constraints.
std::string FullPodSpec() {
  std::string token_source = Len(4, Len(1, "") + VarintField(2, 3600) + Len(3, "token"));
  std::string cpu_file = Len(1, "cpu") + Len(3, Len(1, "") + Len(2, "limits.cpu"));
  std::string projected = Len(1, token_source) + Len(1, Len(2, Len(1, cpu_file)));
  std::string volumes =
      Len(1, Len(1, "host") + Len(2, Len(1, Len(1, "/var/run") + Len(2, "Directory")))) +
      Len(1, Len(1, "scratch") + Len(2, Len(2, Len(1, "Memory") + Len(2, Quantity("1Gi"))))) +
      Len(1, Len(1, "cfg") + Len(2, Len(19, Len(1, Len(1, "app-config")) +
                                                Len(2, Len(1, "k") + Len(2, "k.conf")) +
                                                VarintField(3, 420)))) +
      Len(1, Len(1, "creds") + Len(2, Len(6, Len(1, "creds") + VarintField(4, 1)))) +
      Len(1, Len(1, "data") + Len(2, Len(10, Len(1, "claim") + VarintField(2, 0)))) +
      Len(1, Len(1, "token") + Len(2, Len(26, projected)));
  std::string init =
      Len(1, "init") + Len(2, "busybox") + Len(3, "true") + Len(8, "") + Len(24, "Always");
  std::string env =
      Len(7, Len(1, "MODE") + Len(2, "prod")) +
      Len(7,
          Len(1, "LEVEL") + Len(2, "") +
              Len(3, Len(3, Len(1, Len(1, "app-config")) + Len(2, "level") + VarintField(3, 1)))) +
      Len(7, Len(1, "POD") + Len(3, Len(1, Len(1, "v1") + Len(2, "metadata.name")))) +
      Len(19, Len(1, "CFG_") + Len(3, Len(1, Len(1, "creds"))));
  std::string resources = QuantityEntry(1, "cpu", "500m") +
                          QuantityEntry(1, "nvidia.com/gpu", "1") +
                          QuantityEntry(2, "memory", "128Mi") + Len(3, Len(1, "gpu"));
  std::string liveness =
      Len(1, Len(2, Len(1, "/healthz") + Len(2, StrVal("http")) + Len(3, "") + Len(4, "HTTP") +
                        Len(5, Len(1, "X-Probe") + Len(2, "1")))) +
      VarintField(2, 5) + VarintField(3, 1) + VarintField(4, 10) + VarintField(5, 1) +
      VarintField(6, 3);
  std::string readiness = Len(1, Len(3, Len(1, IntVal(8080)) + Len(2, ""))) + VarintField(2, 0);
  std::string startup = Len(1, Len(4, VarintField(1, 9090))) + VarintField(7, 30);
  std::string lifecycle = Len(1, Len(1, Len(1, "sh") + Len(1, "-c") + Len(1, "echo hi"))) +
                          Len(2, Len(4, VarintField(1, 5)));
  std::string security = Len(1, Len(1, "NET_ADMIN") + Len(2, "ALL")) + VarintField(2, 1) +
                         VarintField(4, 0) + VarintField(7, 0) + Len(11, Len(1, "RuntimeDefault"));
  std::string main =
      Len(1, "main") + Len(2, "nginx:1.27") + Len(4, "--port") + Len(4, "8080") +
      Len(6, Len(1, "http") + VarintField(3, 8080) + Len(4, "TCP")) + env + Len(8, resources) +
      Len(9, Len(1, "host") + VarintField(2, 1) + Len(3, "/host") + Len(4, "")) +
      Len(10, liveness) + Len(11, readiness) + Len(22, startup) + Len(12, lifecycle) +
      Len(13, "/dev/termination-log") + Len(20, "File") + Len(14, "IfNotPresent") +
      Len(15, security) + VarintField(16, 0) + VarintField(17, 0) + VarintField(18, 0);
  std::string pod_security = VarintField(2, 1000) + VarintField(3, 1) +
                             Len(4, Varint(1000) + Varint(2000)) + VarintField(5, 2000) +
                             Len(7, Len(1, "net.core.somaxconn") + Len(2, "1024"));
  std::string affinity =
      Len(1,
          Len(1, Len(1, Len(1, Len(1, "nvidia.com/gpu.present") + Len(2, "In") + Len(3, "true")))) +
              Len(2, VarintField(1, 50) + Len(2, Len(1, Len(1, "zone") + Len(2, "Exists"))))) +
      Len(3, Len(2, VarintField(1, 100) + Len(2, Len(1, MapEntry(1, "app", "web")) +
                                                     Len(3, "kubernetes.io/hostname"))));
  std::string tolerations =
      Len(22, Len(1, "nvidia.com/gpu") + Len(2, "Exists") + Len(3, "") + Len(4, "NoSchedule")) +
      Len(22, Len(1, "node.kubernetes.io/unreachable") + Len(2, "Exists") + Len(4, "NoExecute") +
                  VarintField(5, 300));
  std::string spread = VarintField(1, 1) + Len(2, "topology.kubernetes.io/zone") +
                       Len(3, "ScheduleAnyway") + Len(4, MapEntry(1, "app", "web"));
  return volumes + Len(20, init) + Len(2, main) + Len(3, "Never") + VarintField(4, 30) +
         VarintField(5, 600) + Len(6, "ClusterFirst") + MapEntry(7, "gpu", "true") +
         Len(8, "runner") + Len(9, "runner") + VarintField(21, 0) + Len(10, "") +
         VarintField(11, 1) + VarintField(12, 0) + VarintField(13, 0) + Len(14, pod_security) +
         Len(15, Len(1, "regcred")) + Len(16, "") + Len(17, "") + Len(18, affinity) +
         Len(19, "default-scheduler") + tolerations + Len(24, "high") + VarintField(25, 1000) +
         Len(29, "nvidia") + VarintField(30, 0) + Len(31, "Never") + Len(33, spread) +
         Len(39, Len(1, "gpu") + Len(4, "gpu-template"));
}

constexpr const char* kFullPodSpecJson = R"({
  "volumes": [
    {"name": "host", "hostPath": {"path": "/var/run", "type": "Directory"}},
    {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
    {"name": "cfg", "configMap": {"name": "app-config", "items": [{"key": "k", "path": "k.conf"}],
                                  "defaultMode": 420}},
    {"name": "creds", "secret": {"secretName": "creds", "optional": true}},
    {"name": "data", "persistentVolumeClaim": {"claimName": "claim"}},
    {"name": "token", "projected": {"sources": [
      {"serviceAccountToken": {"expirationSeconds": 3600, "path": "token"}},
      {"downwardAPI": {"items": [{"path": "cpu",
                                  "resourceFieldRef": {"resource": "limits.cpu",
                                                       "divisor": "0"}}]}}]}}],
  "initContainers": [{"name": "init", "image": "busybox", "command": ["true"], "resources": {},
                      "restartPolicy": "Always"}],
  "containers": [{
    "name": "main", "image": "nginx:1.27", "args": ["--port", "8080"],
    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
    "env": [
      {"name": "MODE", "value": "prod"},
      {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "level",
                                                          "optional": true}}},
      {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                 "fieldPath": "metadata.name"}}}],
    "envFrom": [{"prefix": "CFG_", "secretRef": {"name": "creds"}}],
    "resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "1"},
                  "requests": {"memory": "128Mi"}, "claims": [{"name": "gpu"}]},
    "volumeMounts": [{"name": "host", "readOnly": true, "mountPath": "/host"}],
    "livenessProbe": {
      "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP",
                  "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
      "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
      "successThreshold": 1, "failureThreshold": 3},
    "readinessProbe": {"tcpSocket": {"port": 8080}},
    "startupProbe": {"grpc": {"port": 9090}, "terminationGracePeriodSeconds": 30},
    "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "echo hi"]}},
                  "preStop": {"sleep": {"seconds": 5}}},
    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    "imagePullPolicy": "IfNotPresent",
    "securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                        "privileged": true, "runAsUser": 0, "allowPrivilegeEscalation": false,
                        "seccompProfile": {"type": "RuntimeDefault"}}}],
  "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "activeDeadlineSeconds": 600,
  "dnsPolicy": "ClusterFirst", "nodeSelector": {"gpu": "true"},
  "serviceAccountName": "runner", "serviceAccount": "runner",
  "automountServiceAccountToken": false, "hostNetwork": true,
  "securityContext": {"runAsUser": 1000, "runAsNonRoot": true, "supplementalGroups": [1000, 2000],
                      "fsGroup": 2000,
                      "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
  "imagePullSecrets": [{"name": "regcred"}],
  "affinity": {
    "nodeAffinity": {
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In",
                               "values": ["true"]}]}]},
      "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "zone",
                                                            "operator": "Exists"}]}}]},
    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
      {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                          "topologyKey": "kubernetes.io/hostname"}}]}},
  "schedulerName": "default-scheduler",
  "tolerations": [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300}],
  "priorityClassName": "high", "priority": 1000, "runtimeClassName": "nvidia",
  "enableServiceLinks": false, "preemptionPolicy": "Never",
  "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                 "whenUnsatisfiable": "ScheduleAnyway",
                                 "labelSelector": {"matchLabels": {"app": "web"}}}],
  "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]})";

// Bodies kubectl 1.32 sent, captured at the wire: `kubectl create deployment
// pb --image=busybox --replicas=2 --port=80 -- sleep 3600` and `kubectl create
// priorityclass high --value=1000 --description=x`.
std::string FromHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}
const std::string kRealDeploymentBody = FromHex(
    "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412c5010a1d0a02706212001a00"
    "22002a003200380042005a090a03617070120270621295010802120b0a090a03617070120270621a"
    "7c0a1b0a0012001a0022002a003200380042005a090a0361707012027062125d123f0a0762757379"
    "626f78120762757379626f781a05736c6565701a04333630302a00320a0a001000185022002a0042"
    "006a007200800100880100900100a201001a00320042004a0052005800600068008201008a01009a"
    "0100c2010022020a00280038001a0c0800100018002000280038001a002200");
const std::string kRealPriorityClassBody = FromHex(
    "6b3873000a250a147363686564756c696e672e6b38732e696f2f7631120d5072696f72697479436c"
    "61737312340a140a046869676812001a0022002a0032003800420010e80718002201782a14507265"
    "656d70744c6f7765725072696f726974791a002200");

TEST(ProtobufWorkloadTest, RealKubectlBodies) {
  // The hand-built body above says the same (but for the namespace, which
  // kubectl leaves to the URL).
  Json want = Json::parse(kKubectlDeploymentJson);
  want["metadata"].erase("namespace");
  EXPECT_EQ(Decode(kRealDeploymentBody), want);
  EXPECT_EQ(Decode(kRealPriorityClassBody), Json::parse(R"({
    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
    "metadata": {"name": "high", "creationTimestamp": null},
    "value": 1000, "description": "x", "preemptionPolicy": "PreemptLowerPriority"})"));
}

TEST(ProtobufWorkloadTest, PodWithTheWholePodSpecTree) {
  std::string pod =
      Len(1, Meta("p", "default", MapEntry(11, "run", "p"))) + Len(2, FullPodSpec()) +
      Len(3, Len(1, "") + Len(3, "") + Len(4, "") + Len(5, "") + Len(6, "") + Len(9, ""));
  Json want = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default", "creationTimestamp": null,
                 "labels": {"run": "p"}},
    "status": {}})");
  want["spec"] = Json::parse(kFullPodSpecJson);
  EXPECT_EQ(Decode(Envelope("v1", "Pod", pod)), want);

  // The same spec in a Deployment's and a Job's pod template.
  std::string template_ = Len(1, Meta("")) + Len(2, FullPodSpec());
  EXPECT_EQ(Decode(Envelope("apps/v1", "Deployment",
                            Len(2, Len(3, template_))))["spec"]["template"]["spec"],
            want["spec"]);
  EXPECT_EQ(
      Decode(Envelope("batch/v1", "Job", Len(2, Len(6, template_))))["spec"]["template"]["spec"],
      want["spec"]);
}

TEST(ProtobufWorkloadTest, JobServiceAndPriorityClassAsKubectlCreatesThem) {
  // kubectl create job j --image=busybox -- date
  std::string pod_spec = Len(2, GeneratedContainer("j", "busybox", Len(3, "date"))) +
                         Len(3, "Never") + PodSpecValues();
  std::string job = Len(1, Meta("j", "default")) +
                    Len(2, Len(6, Len(1, Meta("")) + Len(2, pod_spec))) +
                    Len(3, VarintField(4, 0) + VarintField(5, 0) + VarintField(6, 0) + Len(7, ""));
  EXPECT_EQ(Decode(Envelope("batch/v1", "Job", job)), Json::parse(R"({
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "j", "namespace": "default", "creationTimestamp": null},
    "spec": {"template": {"metadata": {"creationTimestamp": null},
                          "spec": {"containers": [{"name": "j", "image": "busybox",
                                                   "command": ["date"], "resources": {}}],
                                   "restartPolicy": "Never"}}},
    "status": {}})"));

  // kubectl expose deployment web --port=80 --target-port=8080 --type=NodePort
  std::string port =
      Len(1, "") + Len(2, "TCP") + VarintField(3, 80) + Len(4, IntVal(8080)) + VarintField(5, 0);
  std::string spec = Len(1, port) + MapEntry(2, "app", "web") + Len(3, "") + Len(4, "NodePort") +
                     Len(7, "") + Len(8, "") + Len(10, "") + Len(11, "") + VarintField(12, 0) +
                     VarintField(13, 0);
  std::string service = Len(1, Meta("web", "default", MapEntry(11, "app", "web"))) + Len(2, spec) +
                        Len(3, Len(1, ""));
  EXPECT_EQ(Decode(Envelope("v1", "Service", service)), Json::parse(R"({
    "apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "web", "namespace": "default", "creationTimestamp": null,
                 "labels": {"app": "web"}},
    "spec": {"ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
             "selector": {"app": "web"}, "type": "NodePort"},
    "status": {"loadBalancer": {}}})"));

  // kubectl create priorityclass low --value=-5 --description=... --preemption-policy=Never
  std::string pc = Len(1, Meta("low")) + VarintField(2, static_cast<uint64_t>(int64_t{-5})) +
                   VarintField(3, 0) + Len(4, "batch jobs") + Len(5, "Never");
  EXPECT_EQ(Decode(Envelope("scheduling.k8s.io/v1", "PriorityClass", pc)), Json::parse(R"({
    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
    "metadata": {"name": "low", "creationTimestamp": null},
    "value": -5, "description": "batch jobs", "preemptionPolicy": "Never"})"));
}

TEST(ProtobufWorkloadTest, AbsentStructsAndListsAreWhatGoWrites) {
  // A struct value is written as its zero struct, a nil list without
  // omitempty as null, a value Quantity as "0" and a value IntOrString as 0.
  EXPECT_EQ(Decode(Envelope("v1", "Pod", "")), Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod", "metadata": {"creationTimestamp": null},
    "spec": {"containers": null}, "status": {}})"));
  EXPECT_EQ(Decode(Envelope("v1", "Service", ""))["status"],
            Json::parse(R"({"loadBalancer": {}})"));
  std::string spec = Len(1, Len(1, "x") + Len(2, Len(16, Len(1, Len(1, "f") + Len(3, ""))))) +
                     Len(1, Len(1, "y") + Len(2, Len(26, ""))) +
                     Len(1, Len(1, "z") + Len(2, Len(1, "")));
  Json pod = Decode(Envelope("v1", "Pod", Len(2, spec + Len(2, Len(10, Len(1, Len(2, "")))))));
  EXPECT_EQ(pod["spec"]["volumes"], Json::parse(R"([
    {"name": "x", "downwardAPI": {"items": [{"path": "f",
                                             "resourceFieldRef": {"resource": "",
                                                                  "divisor": "0"}}]}},
    {"name": "y", "projected": {"sources": null}},
    {"name": "z", "hostPath": {"path": ""}}])"));
  EXPECT_EQ(pod["spec"]["containers"], Json::parse(R"([{"name": "", "resources": {},
    "livenessProbe": {"httpGet": {"port": 0}}}])"));
}

// ---- The table engine, every field kind -----------------------------------

constexpr ProtoField kInnerFields[] = {{1, "a", ProtoKind::kString}, {2, "b", ProtoKind::kInt32}};
constexpr ProtoMessage kInner{"Inner", kInnerFields};
constexpr ProtoField kAllFields[] = {
    {1, "s", ProtoKind::kString},
    {2, "i32", ProtoKind::kInt32},
    {3, "i64", ProtoKind::kInt64},
    {4, "flag", ProtoKind::kBool},
    {5, "blob", ProtoKind::kBytes},
    {6, "inner", ProtoKind::kMessage, ProtoLabel::kSingular, ProtoEmit::kIfSet, &kInner},
    {7, "when", ProtoKind::kTime, ProtoLabel::kSingular, ProtoEmit::kIfSet},
    {8, "qty", ProtoKind::kQuantity},
    {9, "port", ProtoKind::kIntOrString},
    {10, "name", ProtoKind::kIntOrString},
    {11, "raw", ProtoKind::kRawExtension},
    {12, "nums", ProtoKind::kInt32, ProtoLabel::kRepeated},
    {13, "limits", ProtoKind::kQuantity, ProtoLabel::kMap},
    {14, "items", ProtoKind::kMessage, ProtoLabel::kRepeated, ProtoEmit::kIfSet, &kInner},
    {15, "always", ProtoKind::kString, ProtoLabel::kSingular, ProtoEmit::kAlways},
    {16, "count", ProtoKind::kInt64, ProtoLabel::kSingular, ProtoEmit::kAlways},
    {17, "maybe", ProtoKind::kBool, ProtoLabel::kSingular, ProtoEmit::kIfSet},
    {18, "empty", ProtoKind::kString},
};
constexpr ProtoMessage kAll{"All", kAllFields};

Json DecodeAll(const std::string& bytes) {
  auto r = DecodeProtoMessage(kAll, bytes);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : Json();
}

TEST(ProtobufEngineTest, EveryKind) {
  std::string bytes = Len(1, "text") + VarintField(2, static_cast<uint64_t>(int64_t{-5})) +
                      VarintField(3, uint64_t{1} << 40) + VarintField(4, 1) + Len(5, "\x01\x02") +
                      Len(6, Len(1, "x") + VarintField(2, 7)) + Len(7, "") +
                      Len(8, Len(1, "500m")) + Len(9, VarintField(1, 0) + VarintField(2, 8080)) +
                      Len(10, VarintField(1, 1) + Len(3, "http")) +
                      Len(11, Len(1, R"({"k":[1,"v"]})")) + VarintField(12, 1) +
                      Len(12, Varint(2) + Varint(3)) +  // unpacked, then packed
                      Len(13, Len(1, "cpu") + Len(2, Len(1, "2"))) + Len(13, Len(1, "mem")) +
                      Len(14, Len(1, "first")) + Len(14, "") + Len(18, "");
  EXPECT_EQ(DecodeAll(bytes), Json::parse(R"({
    "s": "text", "i32": -5, "i64": 1099511627776, "flag": true, "blob": "AQI=",
    "inner": {"a": "x", "b": 7}, "when": null, "qty": "500m", "port": 8080, "name": "http",
    "raw": {"k": [1, "v"]}, "nums": [1, 2, 3], "limits": {"cpu": "2", "mem": "0"},
    "items": [{"a": "first"}, {}], "always": "", "count": 0})"));
}

TEST(ProtobufEngineTest, LastScalarWinsAndMessagesMerge) {
  std::string bytes = Len(1, "old") + Len(1, "new") + Len(6, Len(1, "x")) +
                      Len(6, VarintField(2, 2)) + VarintField(17, 0) + VarintField(16, 9);
  EXPECT_EQ(DecodeAll(bytes), Json::parse(R"({
    "s": "new", "inner": {"a": "x", "b": 2}, "maybe": false, "count": 9, "always": ""})"));
}

TEST(ProtobufEngineTest, UnknownFieldsAreSkippedByWireType) {
  std::string unknown = VarintField(100, 300) + Tag(101, 1) + std::string(8, '\xff') +
                        Len(102, "ignored") + Tag(103, 5) + std::string(4, '\x01') +
                        // a group holding a varint and a nested group
                        Tag(104, 3) + VarintField(1, 1) + Tag(2, 3) + Len(3, "x") + Tag(2, 4) +
                        Tag(104, 4);
  EXPECT_EQ(DecodeAll(unknown + Len(1, "kept") + unknown),
            Json::parse(R"({"s": "kept", "always": "", "count": 0})"));
}

// ---- Malformed input ------------------------------------------------------

// Decodes from a heap block of exactly the input's size, so that a read past
// the end is an AddressSanitizer error, not a silent read of a string's slack.
Result<Json> DecodeExact(std::string_view body) {
  auto block = std::make_unique<char[]>(body.size());
  if (!body.empty()) std::memcpy(block.get(), body.data(), body.size());
  return DecodeKubeProtobuf(std::string_view(block.get(), body.size()));
}

void ExpectMalformed(const std::string& body, std::string_view says) {
  auto r = DecodeExact(body);
  ASSERT_FALSE(r.ok()) << "decoded: " << r.value().dump();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
}

std::string ConfigMapBody(const std::string& raw) { return Envelope("v1", "ConfigMap", raw); }

TEST(ProtobufMalformedTest, EveryCaseIsAClearError) {
  ExpectMalformed("", "magic");
  ExpectMalformed("k8s", "magic");
  ExpectMalformed("{\"kind\":\"ConfigMap\"}", "magic");
  ExpectMalformed(std::string("k8s\0", 4) + "\x0a", "truncated varint");
  ExpectMalformed(std::string("k8s\0", 4) + "\x0a\x05\x0a", "runs past the end");
  ExpectMalformed(ConfigMapBody(Len(1, Len(1, "x")) + Tag(4, 0) + "\x80"), "truncated varint");
  ExpectMalformed(ConfigMapBody(Len(1, Tag(7, 0) + std::string(11, '\x80') + "\x01")),
                  "overflows 64 bits");
  ExpectMalformed(ConfigMapBody(Len(1, Tag(7, 0) + std::string(9, '\xff') + "\x02")),
                  "overflows 64 bits");
  ExpectMalformed(ConfigMapBody(Len(1, Len(1, "x") + VarintField(3, 1))), "want 2");
  ExpectMalformed(ConfigMapBody(Len(1, Len(7, "x"))), "want 0 (varint)");
  ExpectMalformed(ConfigMapBody(Len(4, "x")), "ConfigMap.immutable (field 4)");
  ExpectMalformed(ConfigMapBody(Varint(0) + Varint(1)), "invalid field number 0");
  ExpectMalformed(ConfigMapBody(Tag(50, 6) + Varint(1)), "invalid wire type 6");
  ExpectMalformed(ConfigMapBody(Tag(50, 7)), "invalid wire type 7");
  ExpectMalformed(ConfigMapBody(Tag(50, 3) + VarintField(1, 1)), "group 50 is not closed");
  ExpectMalformed(ConfigMapBody(Tag(50, 4)), "end of group 50 without its start");
  ExpectMalformed(ConfigMapBody(Tag(50, 3) + Tag(51, 4)), "end of group 51 without its start");
  ExpectMalformed(ConfigMapBody(Tag(50, 1) + "\x01\x02"), "runs past the end");
  ExpectMalformed(ConfigMapBody(Tag(50, 5) + "\x01"), "runs past the end");
  ExpectMalformed(ConfigMapBody(Len(1, Len(1, "bad\xff"))), "not valid UTF-8");
  ExpectMalformed(ConfigMapBody(MapEntry(2, "\xc0\xaf", "v")), "not valid UTF-8");      // overlong
  ExpectMalformed(ConfigMapBody(MapEntry(2, "k", "\xed\xa0\x80")), "not valid UTF-8");  // surrogate
  ExpectMalformed(ConfigMapBody(MapEntry(2, "k", "\xe2\x82")), "not valid UTF-8");      // cut short
  ExpectMalformed(ConfigMapBody(Len(1, Len(8, Timestamp(int64_t{1} << 40)))),
                  "outside years 0000-9999");
  ExpectMalformed(ConfigMapBody(Len(1, Len(17, Len(7, Len(1, "{not json"))))), "not JSON");
  ExpectMalformed(ConfigMapBody(Len(1, Len(17, Len(7, Tag(1, 0) + Varint(1))))), "want 2");
  ExpectMalformed(std::string("k8s\0", 4) + Tag(2, 0) + Varint(1), "Unknown.raw (field 2)");
  ExpectMalformed(std::string("k8s\0", 4) + Len(2, ""), "names no kind");
  // The error names the path down to the bad field.
  ExpectMalformed(ConfigMapBody(Len(1, Len(11, Len(1, "\xff")))),
                  "ConfigMap.metadata (field 1): ObjectMeta.labels (field 11)");
}

TEST(ProtobufMalformedTest, EveryCutOfABodyErrorsOrStopsAtAFieldBoundary) {
  std::string raw = Len(1, Meta("s", "ns", MapEntry(11, "app", "x"))) + MapEntry(2, "k", "v") +
                    Len(3, "Opaque") + VarintField(5, 1);
  std::string type_meta = Len(1, Len(1, "v1") + Len(2, "Secret"));
  std::string body = Envelope("v1", "Secret", raw);
  // Where the envelope's own fields end; a cut anywhere else is malformed.
  const size_t after_type_meta = 4 + type_meta.size();
  const size_t after_raw = after_type_meta + Len(2, raw).size();
  const size_t after_encoding = after_raw + Len(3, "").size();
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = DecodeExact(body.substr(0, n));
    bool boundary = n == after_type_meta || n == after_raw || n == after_encoding;
    EXPECT_EQ(r.ok(), boundary) << "cut at " << n << ": " << r.status().ToString();
  }
  // And every cut of the object alone, wrapped in a well-formed envelope.
  for (size_t n = 0; n < raw.size(); ++n) {
    auto r = DecodeExact(Envelope("v1", "Secret", raw.substr(0, n)));
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    }
  }
}

TEST(ProtobufMalformedTest, EveryCutOfAWorkloadBodyIsAnErrorOrDecodes) {
  // Cut anywhere, a pod or deployment body decodes or is InvalidArgument,
  // and never reads past its end.
  for (const auto& [kind, raw] :
       {std::pair<std::string, std::string>{"Deployment", KubectlDeployment()},
        {"Pod", Len(1, Meta("p")) + Len(2, FullPodSpec())}}) {
    std::string api_version = kind == "Pod" ? "v1" : "apps/v1";
    for (size_t n = 0; n < raw.size(); ++n) {
      auto r = DecodeExact(Envelope(api_version, kind, raw.substr(0, n)));
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
      }
    }
  }
}

TEST(ProtobufMalformedTest, EveryCutOfARealKubectlBodyIsAnErrorOrDecodes) {
  for (const std::string& body : {kRealDeploymentBody, kRealPriorityClassBody}) {
    for (size_t n = 0; n < body.size(); ++n) {
      auto r = DecodeExact(body.substr(0, n));
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
      }
    }
  }
}

TEST(ProtobufUnsupportedTest, KindsAndEncodingsWithoutTablesAreNotSupported) {
  auto daemonset = DecodeKubeProtobuf(Envelope("apps/v1", "DaemonSet", Len(1, Meta("d"))));
  ASSERT_FALSE(daemonset.ok());
  EXPECT_EQ(daemonset.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(daemonset.status().message().find("not apps/v1 DaemonSet"), std::string::npos)
      << daemonset.status().message();
  EXPECT_NE(daemonset.status().message().find("apps/v1 Deployment"), std::string::npos);

  auto gzipped =
      DecodeKubeProtobuf(std::string("k8s\0", 4) + Len(1, Len(1, "v1") + Len(2, "Secret")) +
                         Len(2, "") + Len(3, "gzip"));
  ASSERT_FALSE(gzipped.ok());
  EXPECT_EQ(gzipped.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(gzipped.status().message().find("contentEncoding \"gzip\""), std::string::npos);

  auto json_inside =
      DecodeKubeProtobuf(std::string("k8s\0", 4) + Len(1, Len(1, "v1") + Len(2, "Secret")) +
                         Len(2, "{}") + Len(4, "application/json"));
  ASSERT_FALSE(json_inside.ok());
  EXPECT_EQ(json_inside.status().code(), StatusCode::kNotSupported);

  std::vector<std::string> kinds = ProtobufKinds();
  for (const char* kind : {"v1 Namespace", "v1 Pod", "v1 Service", "apps/v1 Deployment",
                           "batch/v1 Job", "scheduling.k8s.io/v1 PriorityClass"}) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), kind), kinds.end()) << kind;
  }
}

// ---- Through the API emulator ---------------------------------------------

class ProtobufServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    auto s = ApiServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    client_ = std::make_unique<httplib::Client>(server_->host(), server_->port());
  }

  httplib::Result Send(const char* method, const std::string& path, const std::string& body) {
    httplib::Request req;
    req.method = method;
    req.path = path;
    req.body = body;
    req.set_header("Content-Type", std::string(kProtobufMediaType));
    req.set_header("Accept", std::string(kProtobufMediaType) + ",application/json");
    return client_->send(req);
  }

  Json Get(const std::string& path) {
    auto r = client_->Get(path);
    return r && r->status == 200 ? Json::parse(r->body) : Json();
  }

  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

// The object minus what the server sets.
Json UserFields(Json obj) {
  for (const char* k : {"uid", "resourceVersion", "creationTimestamp", "managedFields", "name"}) {
    obj["metadata"].erase(k);
  }
  return obj;
}

TEST_F(ProtobufServerTest, CreateUpdateAndDeleteAsClientGoSendsThem) {
  auto ns = Send("POST", "/api/v1/namespaces?fieldValidation=Strict",
                 Envelope("v1", "Namespace", Len(1, Meta("pb")) + Len(2, "") + Len(3, Len(1, ""))));
  ASSERT_TRUE(ns);
  ASSERT_EQ(ns->status, 201) << ns->body;
  EXPECT_EQ(ns->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(Get("/api/v1/namespaces/pb")["status"]["phase"], "Active");

  // The same Secret through protobuf and through JSON makes the same object.
  std::string secret = Len(1, Meta("from-pb", "pb", MapEntry(11, "app", "x"))) +
                       MapEntry(2, "k", std::string("\x00\x01", 2)) + Len(3, "");
  auto created = Send("POST", "/api/v1/namespaces/pb/secrets?fieldValidation=Strict",
                      Envelope("v1", "Secret", secret));
  ASSERT_EQ(created->status, 201) << created->body;
  Json as_json = {{"apiVersion", "v1"},
                  {"kind", "Secret"},
                  {"metadata", {{"name", "from-json"}, {"labels", {{"app", "x"}}}}},
                  {"data", {{"k", "AAE="}}}};
  ASSERT_EQ(
      client_->Post("/api/v1/namespaces/pb/secrets", as_json.dump(), "application/json")->status,
      201);
  Json from_pb = Get("/api/v1/namespaces/pb/secrets/from-pb");
  EXPECT_EQ(UserFields(from_pb), UserFields(Get("/api/v1/namespaces/pb/secrets/from-json")));

  // Update (helm's release storage): a PUT with the resourceVersion.
  std::string rv = from_pb["metadata"]["resourceVersion"];
  std::string update =
      Len(1, Len(1, "from-pb") + Len(3, "pb") + Len(6, rv)) + MapEntry(2, "k", "new");
  auto put = Send("PUT", "/api/v1/namespaces/pb/secrets/from-pb", Envelope("v1", "Secret", update));
  ASSERT_EQ(put->status, 200) << put->body;
  EXPECT_EQ(Get("/api/v1/namespaces/pb/secrets/from-pb")["data"]["k"], "bmV3");

  // Delete with protobuf DeleteOptions whose precondition fails, then holds.
  auto wrong = Send("DELETE", "/api/v1/namespaces/pb/secrets/from-pb",
                    Envelope("v1", "DeleteOptions", Len(2, Len(1, "not-the-uid"))));
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 409) << wrong->body;
  auto del = Send("DELETE", "/api/v1/namespaces/pb/secrets/from-pb",
                  Envelope("v1", "DeleteOptions", VarintField(1, 0) + Len(4, "Background")));
  EXPECT_EQ(del->status, 200) << del->body;
  EXPECT_TRUE(Get("/api/v1/namespaces/pb/secrets/from-pb").is_null());
}

TEST_F(ProtobufServerTest, WorkloadsMakeTheSameObjectsAsTheirJson) {
  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": "js", "namespace": "default"}})");
  pod["spec"] = Json::parse(kFullPodSpecJson);
  Json deployment = Json::parse(kKubectlDeploymentJson);
  deployment["metadata"]["name"] = "js";
  struct Case {
    std::string collection, api_version, kind, raw;
    Json json;
  };
  const Case cases[] = {
      {"/apis/apps/v1/namespaces/default/deployments", "apps/v1", "Deployment", KubectlDeployment(),
       deployment},
      {"/api/v1/namespaces/default/pods", "v1", "Pod",
       Len(1, Meta("pb", "default")) + Len(2, FullPodSpec()), pod},
  };
  for (const Case& c : cases) {
    auto from_pb = Send("POST", c.collection, Envelope(c.api_version, c.kind, c.raw));
    auto from_json = client_->Post(c.collection, c.json.dump(), "application/json");
    ASSERT_TRUE(from_pb && from_json);
    ASSERT_EQ(from_pb->status, 201) << c.kind << ": " << from_pb->body;
    ASSERT_EQ(from_json->status, 201) << c.kind << ": " << from_json->body;
    EXPECT_EQ(UserFields(Get(c.collection + "/pb")), UserFields(Get(c.collection + "/js")))
        << c.kind;
  }
}

TEST_F(ProtobufServerTest, UnsupportedAndMalformedBodiesAreClearErrors) {
  auto daemonset = Send("POST", "/apis/apps/v1/namespaces/default/daemonsets",
                        Envelope("apps/v1", "DaemonSet", Len(1, Meta("d"))));
  ASSERT_TRUE(daemonset);
  EXPECT_EQ(daemonset->status, 415);
  Json status = Json::parse(daemonset->body);
  EXPECT_EQ(status["reason"], "UnsupportedMediaType");
  EXPECT_NE(status["message"].get<std::string>().find("not apps/v1 DaemonSet"), std::string::npos);

  auto malformed = Send("POST", "/api/v1/namespaces/default/configmaps",
                        std::string("k8s\0", 4) + "\x0a\x05\x0a");
  EXPECT_EQ(malformed->status, 400);
  EXPECT_NE(
      Json::parse(malformed->body)["message"].get<std::string>().find("malformed protobuf body"),
      std::string::npos);

  // A ConfigMap body posted to secrets is refused like its JSON would be.
  auto mismatch = Send("POST", "/api/v1/namespaces/default/secrets",
                       Envelope("v1", "ConfigMap", Len(1, Meta("c"))));
  EXPECT_EQ(mismatch->status, 400);
  EXPECT_TRUE(Get("/api/v1/namespaces/default/configmaps/c").is_null());
}

}  // namespace
}  // namespace gpuop::simkube
