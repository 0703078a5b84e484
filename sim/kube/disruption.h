// Disruption: the PodDisruptionBudget check of the eviction subresource
// (POST pods/<name>/eviction), as kube-apiserver's eviction handler makes it.
//
// The real server reads a budget's status (disruptionsAllowed), which the
// disruption controller in kube-controller-manager keeps up to date. The
// emulator has no such controller, so the status is computed here, at
// eviction time, from the namespace's pods the way that controller computes
// it:
//   - a budget covers the pods of its namespace its selector matches; an
//     empty or missing selector covers none, an invalid one is ignored;
//   - healthy pods are those not terminating whose Ready condition is True;
//   - an integer minAvailable counts against the number of covered pods;
//     maxUnavailable and a percent minAvailable count against the summed
//     scale (spec.replicas) of the covered pods' controllers (pods with no
//     controller are left out), percentages rounded up;
//   - disruptionsAllowed = healthy - desired, and 0 when no pod is expected.
//
// Everything here is a pure function of its inputs (the controller scales come
// through a callback); safe to call from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "base/status.h"
#include "sim/kube/api_error.h"
#include "sim/kube/store.h"

namespace gpuop::simkube {

// The scale of the controller a pod's controller ownerReference names
// (`controller_ref`, in namespace `ns`): a Deployment's spec.replicas for a
// ReplicaSet it owns, else the owner's own spec.replicas. nullopt when no
// controller with a scale answers to that reference.
using ControllerScaleFn = std::function<std::optional<int64_t>(
    const std::string& ns, const nlohmann::json& controller_ref)>;

// The status fields the disruption controller would write for one budget.
struct BudgetStatus {
  int64_t expected_pods = 0;
  int64_t desired_healthy = 0;
  int64_t current_healthy = 0;
  int64_t disruptions_allowed = 0;
};

// Whether `budget` covers `pod` (same namespace, non-empty selector that
// parses and matches the pod's labels).
bool BudgetCoversPod(const nlohmann::json& budget, const nlohmann::json& pod);

// The Ready condition of the pod is True (k8s.io/kubernetes/pkg/api/pod IsPodReady).
bool PodIsReady(const nlohmann::json& pod);

// The budget's status over `namespace_pods` (every pod of its namespace; the
// ones it does not cover are skipped). An error (a pod whose controller has no
// scale, a malformed minAvailable/maxUnavailable) is what makes the real
// controller fall back to disruptionsAllowed 0.
Result<BudgetStatus> ComputeBudgetStatus(const nlohmann::json& budget,
                                         const std::vector<Object>& namespace_pods,
                                         const ControllerScaleFn& scale_of);

// Whether evicting `pod` is allowed, given every pod and every
// PodDisruptionBudget of its namespace. OK: delete it. Otherwise the real
// server's refusal: 429 TooManyRequests with a DisruptionBudget cause when the
// budget allows no disruption, 500 when more than one budget covers the pod.
// Pods that are Pending, Succeeded, Failed or terminating skip the check.
ApiStatus CheckEviction(const nlohmann::json& pod, const std::vector<Object>& namespace_pods,
                        const std::vector<Object>& namespace_budgets,
                        const ControllerScaleFn& scale_of);

}  // namespace gpuop::simkube
