// Rendering: the Kubernetes objects each component of a ClusterPolicy needs,
// as a pure function of the parsed Policy, the operator's environment, the
// owning ClusterPolicy and the OSes of the GPU nodes. No I/O, no clock: the
// same input always gives byte-identical objects, so the reconciler can
// compare hashes and write nothing when nothing changed.
//
// Every object carries the labels app.kubernetes.io/managed-by=gpuop,
// app.kubernetes.io/part-of=gpuop and app.kubernetes.io/component=<component>
// (the reconciler finds and deletes a component's objects by them), a
// controller owner reference to the ClusterPolicy, and the annotation
// nvidia.com/last-applied-hash (ObjectHash of the object without it).
//
// A disabled component renders nothing: the reconciler deletes what it finds
// with that component's label. Order within a component is creation order:
// ServiceAccount, ClusterRole, ClusterRoleBinding, Role, RoleBinding,
// ConfigMaps, Service, DaemonSet(s).
//
// Pods of gpuop's own components run OperatorEnv::gpuop_image with
//   command: ["gpuop", "--host-root", "/host", <subcommand>]  + spec args
// and are configured through the upstream environment names (the ones NVIDIA's
// images read), the component's defaults first, then spec env (a spec entry
// replaces a default of the same name). NODE_NAME and OPERATOR_NAMESPACE come
// from the downward API in every gpuop container.
//
// Host-path scheme. gpuop joins every host path to --host-root, so a host
// directory H is always mounted at /host<H>, and a component sees exactly the
// host directories it was given:
//   host-root      hostPaths.rootFS -> /host, read-only, HostToContainer
//                  (toolkit, validator, mig-manager, driver-manager: they read
//                  driver files and see the driver container's root appear)
//   run-nvidia     /run/nvidia -> /host/run/nvidia, read-write (driver root,
//                  validations, toolkit trigger/status; HostToContainer)
//   validations    /run/nvidia/validations -> same under /host, read-only
//                  (node-status-exporter)
//   cdi            /var/run/cdi -> /host/var/run/cdi (toolkit, mig-manager
//                  write; device-plugin reads)
//   toolkit-install <toolkit.installDir> -> /host<installDir> (toolkit)
//   runtime-config /etc/containerd | /etc/crio | /etc/docker (toolkit's
//                  runtime-config init container, per operator.defaultRuntime)
//   device-plugins <kubeletRootDir>/device-plugins (device-plugin, rw)
//   pod-resources  <kubeletRootDir>/pod-resources (dcgm-exporter, read-only)
//   plugins, plugins-registry  <kubeletRootDir>/plugins and /plugins_registry
//                  (dra-driver, rw: its DRA and registration sockets)
//                  The kubelet directories are mounted at the default
//                  /host/var/lib/kubelet/..., whatever kubeletRootDir is, so
//                  no component needs to be told it.
//   host-sys       /sys -> /host/sys, read-only (device-plugin: NUMA nodes;
//                  gfd: DMI machine type)
//   nfd-features   /etc/kubernetes/node-feature-discovery/features.d (gfd, rw;
//                  not with node_discovery: gfd then labels its node itself)
//   mig-manager-state /etc/nvidia-mig-manager (mig-manager, rw: the wanted
//                  layout kept across reboots)
//   host-dev-char  /dev/char (validator, rw: /dev/char symlinks)
// The driver container runs NVIDIA's driver image, so it gets the paths that
// image expects: /run/nvidia (Bidirectional: it mounts the driver root
// there), /etc/os-release at /host-etc/os-release, /var/log, /dev/log and the
// firmware search path.
//
// Privileges (docs/security.md has the table a test holds this to):
// privileged only for driver (and its driver-manager init container),
// toolkit (opens the GPUs through NVML to write the CDI spec), mig-manager
// (changes MIG modes and creates device nodes), dra-driver (MIG placements
// need the MIG config capability) and validator (loads the driver's
// libraries and devices before any runtime injection exists, and writes
// /dev/char links). hostPID only for the driver (and dcgm-exporter when
// dcgmExporter.hostPID asks). Every other container drops all capabilities
// and privilege escalation, has a read-only root filesystem and the
// runtime's seccomp profile; it stays uid 0 only where it writes root-owned
// host paths or connects to the kubelet's root-only sockets (device-plugin,
// dcgm-exporter, gfd, the toolkit's runtime-config), else runs as uid 65532
// (node-discovery, node-status-exporter). The GPU consumers (device-plugin,
// dcgm-exporter, gfd, mig-manager, validator, node-status-exporter) get
// runtimeClassName=<operator.runtimeClass> and NVIDIA_VISIBLE_DEVICES=all
// (upstream's way of asking the runtime for every GPU); driver and toolkit
// set the runtime up and run without it.
//
// Not rendered yet: the init containers that make device-plugin, gfd and
// dcgm-exporter wait for toolkit-ready (the validator issue adds them), MPS
// daemons, ServiceMonitors, the driver's liveness/readiness probes.
//
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kube/gpu_pods.h"
#include "kube/resource.h"
#include "operator/policy.h"

namespace gpuop::op {

inline constexpr const char* kLastAppliedHashAnnotation = "nvidia.com/last-applied-hash";
inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kPartOfLabel = "app.kubernetes.io/part-of";
inline constexpr const char* kComponentLabel = "app.kubernetes.io/component";
inline constexpr const char* kManagedByValue = "gpuop";
// The component label value of RenderPrerequisites' objects.
inline constexpr const char* kPrerequisitesComponent = "pre-requisites";
inline constexpr const char* kOsIdLabel = "feature.node.kubernetes.io/system-os_release.ID";
inline constexpr const char* kOsVersionLabel =
    "feature.node.kubernetes.io/system-os_release.VERSION_ID";
// Where gpuop's containers see the host (--host-root).
inline constexpr const char* kContainerHostRoot = "/host";
// The DRA driver name the DeviceClasses select.
inline constexpr const char* kDraDriverName = kube::kGpuDraDriver;
// The ConfigMap of MIG layouts the operator owns when migManager.config.name
// is left at its default.
inline constexpr const char* kDefaultMigConfigMap = "default-mig-parted-config";

struct RenderedObject {
  kube::Resource resource;
  Json object;
};

// A node's OS, from feature.node.kubernetes.io/system-os_release.{ID,VERSION_ID}.
// Empty id: unknown (nodes without NFD's OS labels).
struct OsRelease {
  std::string id;          // "ubuntu", "rhel"
  std::string version_id;  // "22.04", "9.4"
  auto operator<=>(const OsRelease&) const = default;
};

// The OS labels of a node; empty fields when absent.
OsRelease NodeOsRelease(const std::map<std::string, std::string>& labels);

struct RenderInput {
  const Policy& policy;
  const OperatorEnv& env;
  // The ClusterPolicy object (apiVersion, kind, metadata.name/uid): the
  // controller owner of everything rendered.
  const Json& owner;
  // Distinct OSes of the GPU nodes that get a driver; one driver DaemonSet
  // each. An entry with an empty id renders the plain nvidia-driver-daemonset
  // (image tag unchanged, no OS nodeSelector). Empty: no driver DaemonSet.
  std::vector<OsRelease> driver_os;
  // No NFD in the cluster: gpuop's node-discovery DaemonSet labels GPU nodes
  // (RenderNodeDiscovery) and gfd patches its node's labels itself instead
  // of writing NFD's features file.
  bool node_discovery = false;
};

// node.k8s.io/v1 runtimeclasses (cluster-scoped); kube::resources lacks it.
const kube::Resource& RuntimeClassResource();
// Every resource type RenderComponent and RenderPrerequisites produce, for
// listing and deleting owned objects.
const std::vector<kube::Resource>& RenderedResourceTypes();

// Everything component `c` needs, in creation order; empty when the policy
// disables it. The driver renders one DaemonSet per in.driver_os entry.
std::vector<RenderedObject> RenderComponent(Component c, const RenderInput& in);

// Cluster pre-requisites: the RuntimeClass <operator.runtimeClass> with the
// handler of the same name, which `gpuop runtime configure --runtime-name`
// adds. Only that one: gpuop's runtime handler injects GPUs through CDI, so
// NVIDIA's extra nvidia-cdi and nvidia-legacy classes would name handlers no
// node has.
std::vector<RenderedObject> RenderPrerequisites(const RenderInput& in);

// The node-discovery DaemonSet (gpuop-node-discovery, component label
// "node-discovery") with its ServiceAccount and node get/patch RBAC, when
// in.node_discovery; empty otherwise. It runs on every Linux node, tolerating
// every taint (finding GPU nodes is its job), reads /sys read-only and sets
// NFD's own pci-10de labels (discovery/node_discovery.h).
std::vector<RenderedObject> RenderNodeDiscovery(const RenderInput& in);
inline constexpr const char* kNodeDiscoveryComponent = "node-discovery";
inline constexpr const char* kNodeDiscoveryName = "gpuop-node-discovery";

// The pod-security labels gpuop wants on its namespace: enforce, audit and
// warn = privileged when psa.enabled; empty otherwise. The caller applies
// them with its own field manager (kPsaFieldManager), so once psa is off an
// empty apply removes exactly the labels gpuop set and none a user set.
std::map<std::string, std::string> NamespacePsaLabels(const Policy& policy);
inline constexpr const char* kPsaFieldManager = "gpuop-operator-psa";

// What the namespace needs for `wanted` (NamespacePsaLabels): nullopt when
// nothing; else the server-side-apply configuration to send as
// kPsaFieldManager — the labels when one is missing or differs, or no labels
// when psa is off but that manager still owns some.
std::optional<Json> PsaApplyConfig(const Json& ns,
                                   const std::map<std::string, std::string>& wanted);
inline constexpr const char* kPsaLabelKeys[] = {"pod-security.kubernetes.io/enforce",
                                                "pod-security.kubernetes.io/audit",
                                                "pod-security.kubernetes.io/warn"};

// FNV-32a (8 lowercase hex digits) of the object's canonical JSON (keys
// sorted), with metadata.annotations[nvidia.com/last-applied-hash] left out
// (and an annotations map left empty by that dropped).
std::string ObjectHash(const Json& object);

// The driver image for nodes of `os`: the tag gets "-<id><version_id>"
// appended ("595.91.07-ubuntu22.04"); rhel, rocky and ol use the major
// version only ("-rhel9"). A digest reference, an image without a tag, or an
// unknown OS is returned unchanged.
std::string DriverImageForOs(const std::string& image, const OsRelease& os);

// "nvidia-driver-daemonset-ubuntu22.04" (dots kept), or the plain
// "nvidia-driver-daemonset" for an unknown OS.
std::string DriverDaemonSetName(const OsRelease& os);

}  // namespace gpuop::op
