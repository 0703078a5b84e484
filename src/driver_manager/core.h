// The driver manager's pure core: inputs in, decisions out. No I/O, no clock.
//
//   - the pause/restore table of NVIDIA's k8s-driver-manager over the node's
//     nvidia.com/gpu.deploy.* labels;
//   - which pods are GPU pods, which are paused operands that must leave the
//     node before the driver unloads, which pods an eviction or a drain may
//     remove and, all or nothing, why not;
//   - what a run does given the node's state and the policy (eviction, drain,
//     or the upgrade controller's override);
//   - the node patches that cordon and uncordon, remembering that gpuop made
//     the cordon so an admin's cordon is never undone.
//
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kube/operand_pause.h"

namespace gpuop::driver_manager {

using Json = nlohmann::json;

// ---- Labels ---------------------------------------------------------------

// nvidia.com/gpu.deploy.driver's value on a node whose host has its own driver.
inline constexpr std::string_view kPreInstalled = "pre-installed";
// Set by the operator while driver.upgradePolicy.autoUpgrade is on: the
// upgrade controller owns eviction and drain, the driver manager does neither.
inline constexpr std::string_view kUpgradeEnabledAnnotation =
    "nvidia.com/gpu-driver-upgrade-enabled";
// Marks a cordon the driver manager made, so only that one is undone.
inline constexpr std::string_view kCordonAnnotation = "gpuop.io/driver-manager-cordon";

// ---- Pods -----------------------------------------------------------------

// The pods that are not finished and still use one of `gpu_claims`; the driver
// must not be unloaded under them.
std::vector<Json> LivePodsWithClaims(const std::vector<Json>& pods,
                                     const std::set<std::string>& gpu_claims);

bool IsMirrorPod(const Json& pod);  // a static pod's API mirror

struct EvictionFlags {
  bool force = false;                 // evict pods without a controller
  bool delete_emptydir_data = false;  // evict pods with emptyDir volumes
};

struct EvictionPlan {
  std::vector<Json> evict;           // what to evict when `refused` is empty
  std::vector<std::string> refused;  // "ns/name: why, and the flag that allows it"
};

// kubectl drain's filters over `pods`: DaemonSet pods and mirror pods are
// skipped; finished pods are always removable; a pod without a controller
// needs `force`, one with emptyDir needs `delete_emptydir_data`.
// `only_gpu_pods`: GPU pods only (kube::IsGpuPod with `gpu_claims`), and then a
// DaemonSet-owned GPU pod is refused (it cannot leave: its controller
// recreates it), as NVIDIA's all-or-nothing GPU eviction refuses it.
EvictionPlan PlanEviction(const std::vector<Json>& pods, const EvictionFlags& flags,
                          bool only_gpu_pods, const std::set<std::string>& gpu_claims = {});

// "ns/name".
std::string PodKey(const Json& pod);
// "ns/a, ns/b" (at most `max` names, then "and N more").
std::string PodList(const std::vector<Json>& pods, size_t max = 10);

// ---- The run --------------------------------------------------------------

struct NodeState {
  bool host_driver = false;    // NVML under the host root initialises
  bool nvidia_loaded = false;  // the nvidia module is in the kernel
  // /run/nvidia/nvidia-driver.state: the digest of the loaded driver's config.
  std::optional<std::string> loaded_digest;
};

enum class Decision {
  kHostDriver,     // label gpu.deploy.driver=pre-installed, exit 1
  kNoDriver,       // nothing loaded: restore labels, exit 0
  kDriverCurrent,  // the same config is loaded: restore labels, exit 0
  kReload,         // pause, evict, unload
};
std::string_view DecisionName(Decision d);

// `digest`: DRIVER_CONFIG_DIGEST; empty never matches.
Decision Decide(const NodeState& node, const std::string& digest, bool force_reinstall);

struct EvictionPolicy {
  bool evict = false;                    // evict GPU pods
  bool drain = false;                    // drain the node when eviction fails or is off
  bool upgrade_controller_owns = false;  // kUpgradeEnabledAnnotation="true"
};
// The env switches, overridden by the upgrade controller's annotation.
EvictionPolicy PolicyFor(bool enable_eviction, bool enable_drain,
                         std::optional<std::string_view> upgrade_annotation);

// ---- Cordon ---------------------------------------------------------------

enum class CordonState {
  kSchedulable,
  kCordonedByUs,     // unschedulable with kCordonAnnotation (a run crashed, or this run)
  kCordonedByOther,  // an admin's (or another controller's) cordon: never undone
};
CordonState CordonStateOf(const Json& node);

// Merge patches, conditional on the node's resourceVersion; nullopt when
// there is nothing to do (already cordoned; not our cordon).
std::optional<Json> CordonPatch(const Json& node);
std::optional<Json> UncordonPatch(const Json& node);

}  // namespace gpuop::driver_manager
