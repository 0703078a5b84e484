#include "sim/kube/disruption.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <string>
#include <string_view>

#include "sim/kube/selector.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

std::string NamespaceOf(const Json& obj) {
  const Json& meta = obj.value("metadata", Json::object());
  return meta.is_object() ? meta.value("namespace", "") : "";
}

std::string NameOf(const Json& obj) {
  const Json& meta = obj.value("metadata", Json::object());
  return meta.is_object() ? meta.value("name", "") : "";
}

bool Terminating(const Json& pod) {
  const Json& meta = pod.value("metadata", Json::object());
  return meta.is_object() && meta.contains("deletionTimestamp") &&
         !meta["deletionTimestamp"].is_null();
}

std::string PhaseOf(const Json& pod) {
  const Json& status = pod.value("status", Json::object());
  return status.is_object() ? status.value("phase", "") : "";
}

// The ownerReference with controller: true (metav1.GetControllerOf), or null.
Json ControllerOf(const Json& pod) {
  const Json& meta = pod.value("metadata", Json::object());
  if (!meta.is_object() || !meta.contains("ownerReferences")) return nullptr;
  const Json& refs = meta["ownerReferences"];
  if (!refs.is_array()) return nullptr;
  for (const Json& ref : refs) {
    if (ref.is_object() && ref.value("controller", false)) return ref;
  }
  return nullptr;
}

// intstr.GetScaledValueFromIntOrPercent with rounding up, as the disruption
// controller calls it. `field` names the spec field in errors.
Result<int64_t> ScaledValue(const Json& value, int64_t total, std::string_view field) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_string()) {
    std::string text = value.get<std::string>();
    int64_t percent = -1;
    if (!text.empty() && text.back() == '%') {
      const char* end = text.data() + text.size() - 1;
      auto [ptr, ec] = std::from_chars(text.data(), end, percent);
      if (ec != std::errc() || ptr != end) percent = -1;
    }
    if (percent >= 0) return (percent * total + 99) / 100;
  }
  return InvalidArgument("spec." + std::string(field) + " " + value.dump() +
                         " is neither an integer nor a percentage like \"50%\"; set it to one");
}

// getExpectedScale: the summed scale of the controllers of the covered pods,
// each controller counted once; pods without a controller are left out.
Result<int64_t> ExpectedScale(const std::vector<const Json*>& covered,
                              const ControllerScaleFn& scale_of) {
  std::set<std::string> seen;
  int64_t total = 0;
  for (const Json* pod : covered) {
    Json ref = ControllerOf(*pod);
    if (ref.is_null()) continue;
    std::string uid = ref.value("uid", "");
    if (!seen.insert(uid).second) continue;
    std::optional<int64_t> scale = scale_of ? scale_of(NamespaceOf(*pod), ref) : std::nullopt;
    if (!scale) {
      return NotFound("found no controllers for pod \"" + NameOf(*pod) + "\"");
    }
    total += *scale;
  }
  return total;
}

ApiError BudgetViolation(std::string_view budget_name, int64_t desired, int64_t current) {
  ApiError e =
      TooManyRequestsError("Cannot evict pod as it would violate the pod's disruption budget.", 0);
  e.details->causes.push_back({"DisruptionBudget",
                               "The disruption budget " + std::string(budget_name) + " needs " +
                                   std::to_string(desired) + " healthy pods and has " +
                                   std::to_string(current) + " currently",
                               ""});
  return e;
}

}  // namespace

bool BudgetCoversPod(const Json& budget, const Json& pod) {
  if (NamespaceOf(budget) != NamespaceOf(pod)) return false;
  const Json& spec = budget.value("spec", Json::object());
  if (!spec.is_object() || !spec.contains("selector")) return false;
  auto selector = LabelSelector::FromJson(spec["selector"]);
  // policy/v1: an empty selector covers no pod, not every pod.
  if (!selector.ok() || selector->Empty()) return false;
  return selector->MatchesObject(pod);
}

bool PodIsReady(const Json& pod) {
  const Json& status = pod.value("status", Json::object());
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return false;
  }
  for (const Json& c : status["conditions"]) {
    if (c.is_object() && c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

Result<BudgetStatus> ComputeBudgetStatus(const Json& budget,
                                         const std::vector<Object>& namespace_pods,
                                         const ControllerScaleFn& scale_of) {
  std::vector<const Json*> covered;
  for (const Object& pod : namespace_pods) {
    if (BudgetCoversPod(budget, *pod)) covered.push_back(pod.get());
  }
  const Json& spec = budget.value("spec", Json::object());
  BudgetStatus s;
  if (spec.contains("maxUnavailable") && !spec["maxUnavailable"].is_null()) {
    GPUOP_ASSIGN_OR_RETURN(s.expected_pods, ExpectedScale(covered, scale_of));
    GPUOP_ASSIGN_OR_RETURN(int64_t max_unavailable,
                           ScaledValue(spec["maxUnavailable"], s.expected_pods, "maxUnavailable"));
    s.desired_healthy = std::max<int64_t>(0, s.expected_pods - max_unavailable);
  } else if (spec.contains("minAvailable") && !spec["minAvailable"].is_null()) {
    const Json& min_available = spec["minAvailable"];
    if (min_available.is_number_integer()) {
      s.desired_healthy = min_available.get<int64_t>();
      s.expected_pods = static_cast<int64_t>(covered.size());
    } else {
      GPUOP_ASSIGN_OR_RETURN(s.expected_pods, ExpectedScale(covered, scale_of));
      GPUOP_ASSIGN_OR_RETURN(s.desired_healthy,
                             ScaledValue(min_available, s.expected_pods, "minAvailable"));
    }
  }
  for (const Json* pod : covered) {
    if (!Terminating(*pod) && PodIsReady(*pod)) ++s.current_healthy;
  }
  // No expected pod: the budget is kept safe until pods appear.
  s.disruptions_allowed = s.current_healthy - s.desired_healthy;
  if (s.expected_pods <= 0 || s.disruptions_allowed < 0) s.disruptions_allowed = 0;
  return s;
}

ApiStatus CheckEviction(const Json& pod, const std::vector<Object>& namespace_pods,
                        const std::vector<Object>& namespace_budgets,
                        const ControllerScaleFn& scale_of) {
  // canIgnorePDB: such a pod is no disruption (not started, finished, or
  // already going).
  std::string phase = PhaseOf(pod);
  if (phase == "Pending" || phase == "Succeeded" || phase == "Failed" || Terminating(pod)) {
    return ApiStatus::Ok();
  }
  const Json* budget = nullptr;
  for (const Object& b : namespace_budgets) {
    if (!BudgetCoversPod(*b, pod)) continue;
    if (budget != nullptr) {
      ApiError e;
      e.code = 500;
      e.message =
          "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
          "not support.";
      return e;
    }
    budget = b.get();
  }
  if (budget == nullptr) return ApiStatus::Ok();

  auto status = ComputeBudgetStatus(*budget, namespace_pods, scale_of);
  // The real controller's fail-safe leaves disruptionsAllowed at 0 and the
  // other fields as last written: for a budget never synced, all 0.
  BudgetStatus s = status.ok() ? *status : BudgetStatus{};
  bool policy_always_allow =
      budget->value("spec", Json::object()).value("unhealthyPodEvictionPolicy", "") ==
      "AlwaysAllow";
  // An unready pod does not count as healthy, so removing it disrupts nothing
  // when the budget is met (IfHealthyBudget) or always (AlwaysAllow).
  if (!PodIsReady(pod) &&
      (policy_always_allow || (s.current_healthy >= s.desired_healthy && s.desired_healthy > 0))) {
    return ApiStatus::Ok();
  }
  if (s.disruptions_allowed == 0) {
    return BudgetViolation(NameOf(*budget), s.desired_healthy, s.current_healthy);
  }
  return ApiStatus::Ok();
}

}  // namespace gpuop::simkube
