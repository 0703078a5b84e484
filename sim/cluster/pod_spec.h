// Pod spec → what a container runtime runs: the simulated kubelet's
// translation of a Pod (volumes, env, mounts, security context, probes) into
// plans that sim/cluster/podman.h executes. Pure functions of their inputs,
// except PrepareVolumes, which writes the pod's volume files under
// <pods_dir>/<uid>/volumes (as the kubelet's volume plugins do) and checks or
// creates hostPath sources under the node's root.
//
// Errors carry the kubelet's own wording so that Events and container states
// read as on a real node:
//   PrepareVolumes → the FailedMount Event's message, verbatim:
//     MountVolume.SetUp failed for volume "drivers" : hostPath type check failed: /run/nvidia/driver is not a directory
//   PlanContainer  → the CreateContainerConfigError message:
//     couldn't find key FOO in ConfigMap gpu-operator/my-config
//     configmap "my-config" not found
//
// Thread-safety: no shared state; NodeContext's callbacks are called from the
// calling thread. Two PrepareVolumes for the same pod must not run at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gpuop::simcluster {

using Json = nlohmann::json;

// What the kubelet knows of its node and the cluster.
struct NodeContext {
  std::string node_name;
  std::string node_ip;    // the pod IP too: every pod shares the node's network namespace here
  std::string host_root;  // the node's root on this machine: hostPath P is host_root + P
  std::string pods_dir;   // <host_root>/var/lib/kubelet/pods: volumes in <pods_dir>/<uid>/volumes/...
  std::string api_host;   // KUBERNETES_SERVICE_HOST/PORT; empty: no service env
  int api_port = 0;
  std::string ca_file;    // copied as ca.crt into the service account volume ("" : none)
  // The node's allocatable ({"cpu":"16","memory":"64Gi"}): what a
  // resourceFieldRef to an unset limit reads, as on a real node.
  Json node_allocatable = Json::object();
  // NotFound Status when the object does not exist; any other error is passed on.
  std::function<Result<Json>(const std::string& ns, const std::string& name)> get_configmap;
  std::function<Result<Json>(const std::string& ns, const std::string& name)> get_secret;
  // A token for the pod's service account (TokenRequest bound to the pod).
  std::function<Result<std::string>(const Json& pod, const std::string& audience,
                                    int64_t expiration_seconds)>
      service_account_token;
};

// ---- volumes ---------------------------------------------------------------

// The name PrepareVolumes gives the service account volume it adds when
// automountServiceAccountToken is not false and no container mounts
// kServiceAccountMountPath itself (what the ServiceAccount admission plugin's
// kube-api-access-xxxxx volume is on a real cluster): token, ca.crt, namespace.
inline constexpr const char* kServiceAccountVolume = "kube-api-access-sim";
inline constexpr const char* kServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount";

// Sets up every volume of the pod and returns volume name → source path on
// this machine:
//   hostPath      host_root + path, symlinks resolved inside the node root;
//                 type checks and DirectoryOrCreate/FileOrCreate exactly like
//                 the kubelet's hostPath plugin (no type: created as a
//                 directory when missing, as containerd does)
//   configMap, secret   items, defaultMode/mode, optional
//   projected     serviceAccountToken, configMap, secret, downwardAPI
//   downwardAPI   fieldRef and resourceFieldRef items
//   emptyDir      a directory (medium Memory too: no tmpfs here)
// Idempotent: calling it again refreshes configMap/secret/token contents (the
// kubelet's resync). Error: the FailedMount Event message (see above).
Result<std::map<std::string, std::string>> PrepareVolumes(const Json& pod, const NodeContext& ctx);

// ---- containers ------------------------------------------------------------

struct Mount {
  std::string source, target;
  bool read_only = false;
  std::string propagation;  // "" (private), "rslave" (HostToContainer), "rshared" (Bidirectional)
};

struct ContainerPlan {
  std::string name, image, image_pull_policy, working_dir;
  std::vector<std::string> command, args;  // $(VAR) expanded; empty command: the image's entrypoint
  // Resolved, unique names, in order: service env, envFrom, env (a later
  // source overrides an earlier one in place).
  std::vector<std::pair<std::string, std::string>> env;
  // volumeMounts (subPath/subPathExpr resolved) + the service account volume.
  std::vector<Mount> mounts;
  std::string hostname;  // the node's name for hostNetwork pods, else spec.hostname or the pod's name
  bool privileged = false, read_only_root = false, host_pid = false, host_network = false,
       host_ipc = false, no_new_privileges = false;
  // seccompProfile Unconfined. RuntimeDefault (and no profile: the kubelet's
  // SeccompDefault) is the runtime's own profile; Localhost is refused.
  bool seccomp_unconfined = false;
  std::vector<std::string> cap_add, cap_drop;
  std::optional<int64_t> run_as_user, run_as_group;
  std::vector<int64_t> supplemental_groups;
  std::vector<std::string> devices;      // "host_path:container_path:rwm" (device plugins; the kubelet adds them)
  std::vector<std::string> cdi_devices;  // "nvidia.com/gpu=GPU-..." (the kubelet adds them)
  std::map<std::string, std::string> annotations;  // OCI annotations (the kubelet adds them)
};

// Builds the plan of one container (or init container) of the pod.
// `volumes` is PrepareVolumes' answer. Error: the CreateContainerConfigError
// message (see above), or a plain one naming the field for what the kubelet
// would refuse (a mount of an unknown volume, Bidirectional propagation in an
// unprivileged container, a subPath leaving its volume, runAsNonRoot with
// runAsUser 0).
Result<ContainerPlan> PlanContainer(const Json& pod, const Json& container, const NodeContext& ctx,
                                    const std::map<std::string, std::string>& volumes);

// ---- probes ----------------------------------------------------------------

struct Probe {
  enum Kind { kExec, kHttpGet, kTcpSocket, kGrpc } kind = kExec;
  std::vector<std::string> command;  // exec
  std::string host;                  // httpGet/tcpSocket; "" : the pod's IP
  std::string path;                  // httpGet; "/" when unset
  std::string scheme = "HTTP";       // httpGet: HTTP or HTTPS
  std::string service;               // grpc
  int port = 0;                      // named ports resolved
  std::vector<std::pair<std::string, std::string>> headers;
  int initial_delay_s = 0, period_s = 10, timeout_s = 1, success_threshold = 1, failure_threshold = 3;
  int64_t termination_grace_s = -1;  // probe-level terminationGracePeriodSeconds; -1: the pod's
};

// The container's `which` probe ("startupProbe", "readinessProbe",
// "livenessProbe"); nullopt when it has none. Defaults as Kubernetes' API
// defaulting. Error: a named port the container does not declare, or a probe
// with no handler.
Result<std::optional<Probe>> ParseProbe(const Json& container, const char* which);

// ---- helpers shared with the kubelet -----------------------------------------

// 128-bit integer: a quantity in nano-units up to exabytes.
__extension__ typedef __int128 Int128;

// A resource.Quantity ("100m", "1.5Gi", "2e3") in nano-units (value × 1e9);
// nullopt when it does not parse.
std::optional<Int128> ParseQuantityNano(const std::string& quantity);

// Kubernetes' $(VAR) expansion: $(NAME) → its value when defined, else left
// as is; $$ → $.
std::string ExpandVars(const std::string& in,
                       const std::vector<std::pair<std::string, std::string>>& env);

}  // namespace gpuop::simcluster
