// Driver upgrade: the pure core of the upgrade controller. Given what the
// cluster looks like (nodes, the driver DaemonSets' current revisions, the
// driver, validator and workload pods of each node), the upgrade policy and
// the time, it decides what to do to each node: set its state label, set or
// remove annotations, cordon or uncordon it, evict pods, delete its driver
// pod, record Events, and when to look again. NVIDIA's state machine and
// throttle (k8s-operator-libs), with gpuop's changes:
//   - every piece of state lives in the node's labels and annotations, so an
//     operator restart in any state resumes where it was;
//   - a node an admin cordoned before its upgrade stays cordoned after it;
//   - nvidia.com/gpu-driver-upgrade.skip=true keeps a node in upgrade-required;
//   - upgrade-failed counts as in progress: one failure halts a rollout of
//     maxParallelUpgrades=1, and nothing retries it by itself;
//   - already-cordoned nodes start without using maxUnavailable, but never
//     beyond maxParallelUpgrades; NotReady nodes do not start;
//   - waits are deadlines (requeue-after), not a 2-minute polling loop;
//   - a node moves one state per pass, so each state is seen on the label;
//   - the GPU operands leave before the old driver pod is deleted, so that it
//     unloads the driver on SIGTERM (kOperandsTimeout).
//
// Thread-safety: pure functions over values.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::op::upgrade {

using Json = nlohmann::json;
using TimePoint = std::chrono::system_clock::time_point;

// Node keys (NVIDIA's, driver name "gpu").
inline constexpr const char* kStateLabel = "nvidia.com/gpu-driver-upgrade-state";
inline constexpr const char* kSkipLabel = "nvidia.com/gpu-driver-upgrade.skip";
inline constexpr const char* kDrainSkipLabel = "nvidia.com/gpu-driver-upgrade-drain.skip";
inline constexpr const char* kRequestedAnnotation = "nvidia.com/gpu-driver-upgrade-requested";
inline constexpr const char* kInitialStateAnnotation =
    "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable";
inline constexpr const char* kWaitForJobsStartAnnotation =
    "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time";
inline constexpr const char* kValidationStartAnnotation =
    "nvidia.com/gpu-driver-upgrade-validation-start-time";
// gpuop's: the pod-deletion and drain deadlines survive a restart.
inline constexpr const char* kPodDeletionStartAnnotation =
    "nvidia.com/gpu-driver-upgrade-pod-deletion-start-time";
inline constexpr const char* kDrainStartAnnotation =
    "nvidia.com/gpu-driver-upgrade-drain-start-time";
// gpuop's: when pod-restart-required paused the GPU operands (below).
inline constexpr const char* kOperandsPausedAnnotation =
    "nvidia.com/gpu-driver-upgrade-operands-paused-time";
// Tells the driver manager that this controller owns eviction and drain.
inline constexpr const char* kEnabledAnnotation = "nvidia.com/gpu-driver-upgrade-enabled";
inline constexpr const char* kEventReason = "GPUDriverUpgrade";
inline constexpr const char* kConfigDigestEnv = "DRIVER_CONFIG_DIGEST";
inline constexpr const char* kRevisionHashLabel = "controller-revision-hash";

// How long a node may wait in validation-required (NVIDIA's figure).
inline constexpr std::chrono::seconds kValidationTimeout{600};
// A driver container not Ready after this many restarts fails the upgrade.
inline constexpr int kMaxDriverRestarts = 10;
// Before it deletes a driver pod whose replacement reloads the modules,
// pod-restart-required pauses the GPU operands (kube/operand_pause.h) and
// waits this long for them to leave, so that the old driver container can
// unload on SIGTERM; NVIDIA's deletes it at once, and a container that cannot
// unload waits out its grace period for SIGKILL. Past this wait the pod is
// deleted anyway: the new pod's driver manager evicts what is left.
inline constexpr std::chrono::seconds kOperandsTimeout{120};
// Workload pods are not watched (they are listed per node on demand): while a
// node waits for some to finish or go, it is looked at again this often.
inline constexpr std::chrono::seconds kPodPollInterval{2};

enum class State {
  kUnknown,  // no label
  kUpgradeDone,
  kUpgradeRequired,
  kCordonRequired,
  kWaitForJobsRequired,
  kPodDeletionRequired,
  kDrainRequired,
  kPodRestartRequired,
  kValidationRequired,
  kUncordonRequired,
  kUpgradeFailed,
};
// The label value ("" for kUnknown).
std::string_view StateName(State s);
// kUnknown for "" and for values this controller does not know.
State ParseState(std::string_view s);

// spec.driver.upgradePolicy.
struct UpgradePolicy {
  bool auto_upgrade = false;
  int64_t max_parallel = 1;  // 0: unlimited
  // Integer or "N%" of the nodes, rounded up; unset: every node.
  std::optional<Json> max_unavailable = Json("25%");
  struct {
    bool force = false;
    int64_t timeout_seconds = 300;  // 0: no limit
    bool delete_empty_dir = false;
  } pod_deletion;
  struct {
    std::string pod_selector;
    int64_t timeout_seconds = 0;  // 0: no limit
  } wait_for_completion;
  struct {
    bool enable = false;
    bool force = false;
    std::string pod_selector;
    int64_t timeout_seconds = 300;  // 0: no limit
    bool delete_empty_dir = false;
  } drain;
};
// Reads spec.driver.upgradePolicy (null: the defaults). Errors name the field.
Result<UpgradePolicy> ParseUpgradePolicy(const Json& upgrade_policy);
// maxUnavailable resolved against `total` nodes.
int64_t MaxUnavailable(const UpgradePolicy& policy, int64_t total);

// A pod, as the upgrade reads it.
struct PodInfo {
  std::string ns;
  std::string name;
  std::string node;
  std::string phase;
  bool ready = false;  // every container Ready
  bool terminating = false;
  std::string controller_kind;  // of the controller owner reference; "": none
  std::string controller_name;
  // A regular container asks for nvidia.com/gpu* or nvidia.com/mig-*, or the
  // pod uses a claim gpu.nvidia.com allocated.
  bool gpu = false;
  bool empty_dir = false;          // mounts an emptyDir volume
  int64_t restarts_not_ready = 0;  // most restarts of a container not Ready
  std::string revision_hash;       // controller-revision-hash label
  std::string config_digest;       // DRIVER_CONFIG_DIGEST of its containers
  bool mirror = false;             // a static pod's mirror
};
// `gpu_claims`: "ns/name" of the ResourceClaims gpu.nvidia.com allocated
// (kube::ListClaimsAllocatedBy); a pod using one is a GPU pod.
PodInfo ReadPod(const Json& pod, const std::set<std::string>& gpu_claims = {});

// A driver DaemonSet: its current revision and its template's config digest.
struct DriverDaemonSet {
  std::string name;
  std::string revision_hash;  // "": not known yet
  std::string config_digest;
};
// The DaemonSet's current revision hash: of the ControllerRevisions named
// "<ds>-<hash>" that it owns, the one with the highest .revision.
std::string CurrentRevisionHash(const Json& daemonset, const std::vector<Json>& revisions);
// DRIVER_CONFIG_DIGEST of a pod spec's containers ("" when none sets it).
std::string ConfigDigest(const Json& pod_spec);

// Which of a node's pods the controller must list for the node's state
// (pods are read on demand, by field selector spec.nodeName=<node>).
// kOperands: every pod on the node, of which the controller keeps the GPU
// operands (kube::IsOperandPod, kube::IsDraPluginPod).
enum class PodListing { kNone, kWaitForJobs, kAllOnNode, kDrain, kOperands };
PodListing PodsToList(State s, const UpgradePolicy& policy);
// The label selector of that listing ("" for every pod on the node).
std::string PodListSelector(PodListing listing, const UpgradePolicy& policy);

struct NodeInput {
  std::string name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  bool unschedulable = false;
  bool ready = true;
  std::vector<PodInfo> driver_pods;     // pods of the driver DaemonSets, and orphans
  std::vector<PodInfo> validator_pods;  // app=nvidia-operator-validator
  std::vector<PodInfo> pods;            // as PodsToList asked for
};

struct ClusterInput {
  UpgradePolicy policy;
  std::map<std::string, DriverDaemonSet> daemonsets;  // by name
  std::vector<NodeInput> nodes;  // the nodes with a driver pod or a state label
  TimePoint now;
};

struct PodRef {
  std::string ns;
  std::string name;
  bool operator==(const PodRef&) const = default;
};

struct NodeEvent {
  bool warning = false;
  std::string message;
};

// What to do to one node. The controller applies it in this order: delete
// the driver pod, evict pods, then one merge patch of the node (labels,
// annotations, spec.unschedulable), so a crash anywhere repeats only
// idempotent steps.
struct NodeAction {
  std::string node;
  std::optional<State> state;  // the new state label
  // Set (value) or remove (nullopt).
  std::map<std::string, std::optional<std::string>> annotations;
  std::optional<bool> unschedulable;
  std::map<std::string, std::string> labels;  // label writes besides the state
  std::optional<PodRef> delete_driver_pod;
  std::vector<PodRef> evict;  // policy/v1 Eviction; a 429 (PDB) is retried next pass
  // An eviction failing otherwise moves the node here (with its deadline
  // annotation removed) instead of `state`.
  std::optional<State> on_evict_error;
  std::vector<NodeEvent> events;

  bool empty() const {
    return !state && annotations.empty() && !unschedulable && labels.empty() &&
           !delete_driver_pod && evict.empty() && events.empty();
  }
};

// The gpu_operator_nodes_upgrades_* gauges.
struct UpgradeCounts {
  int64_t in_progress = 0;  // between upgrade-required and upgrade-done, failed excluded
  int64_t done = 0;
  int64_t failed = 0;
  int64_t available = 0;  // nodes that may start now
  int64_t pending = 0;    // upgrade-required
};

struct UpgradePlan {
  std::vector<NodeAction> actions;  // only nodes with something to do
  std::optional<TimePoint> requeue_at;
  UpgradeCounts counts;
};

// One pass over every node (nodes in name order).
UpgradePlan PlanUpgrade(const ClusterInput& in);

// Unix seconds, as the start-time annotations hold them.
std::string UnixSeconds(TimePoint t);

}  // namespace gpuop::op::upgrade
