// What the ClusterPolicy's status says, as a pure function of what the
// operator observed: per-component readiness from DaemonSet status, the
// overall state and the Ready/Error condition pair (NVIDIA's reasons), so
// `kubectl get clusterpolicy` tells the truth.
//
// Component readiness (NVIDIA's isDaemonSetReady): no pods wanted (no GPU
// node selected) is ready; otherwise the controller has seen the current
// generation and every wanted pod is updated and available.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/informer.h"
#include "operator/policy.h"

namespace gpuop::op {

struct ComponentState {
  Component component = Component::kDriver;
  std::string state;      // ready | notReady | disabled
  std::string daemonset;  // the DaemonSet name(s), comma-separated
  int64_t desired = 0;
  int64_t available = 0;
  int64_t updated = 0;
  std::string message;
};

// `daemonsets`: the component's DaemonSets as cached (none: not created yet).
ComponentState EvaluateComponent(Component c, bool enabled,
                                 const std::vector<nlohmann::json>& daemonsets);

// Why the validator's pods are not ready, one line per node, sorted:
// "node h100-2: cuda validation failed: <its last termination message>",
// "node h100-3: waiting on driver validation". Reads each pod's init
// container statuses in order (the checks run one after another): the first
// that has not exited 0 blocks. Ready pods give nothing.
std::vector<std::string> ValidationBlockers(const std::vector<kube::ObjectPtr>& validator_pods);
// Whether ValidationBlockers names this pod: neither Ready nor terminating.
bool BlocksValidation(const nlohmann::json& validator_pod);

struct StatusInput {
  Status reconcile_error;  // OK, or why this pass failed
  std::vector<ComponentState> components;
  // ValidationBlockers of the validator's pods: named in the messages while
  // the operator-validator component is not ready.
  std::vector<std::string> validation_blockers;
  int64_t gpu_nodes = 0;
  bool nfd_labels_seen = false;  // any node has a feature.node.kubernetes.io/pci label
  bool node_discovery = false;   // gpuop's node-discovery DaemonSet finds the GPU nodes
  int64_t generation = 0;
  std::string namespace_;
  std::vector<std::string> ignored_fields;
};

// The new .status, keeping each condition's lastTransitionTime from `old`
// while its status stays. `now` is RFC 3339.
nlohmann::json BuildStatus(const StatusInput& in, const nlohmann::json& old_status,
                           std::string_view now);

// The status of a ClusterPolicy that is not the active one.
nlohmann::json IgnoredStatus(const std::string& active_name, int64_t generation,
                             const nlohmann::json& old_status, std::string_view now);

// True when two statuses differ in anything but condition timestamps.
bool StatusChanged(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace gpuop::op
