#include "driver_manager/core.h"

#include <algorithm>

#include "base/json_field.h"
#include "base/strings.h"
#include "kube/gpu_pods.h"
#include "kube/object.h"

namespace gpuop::driver_manager {

std::vector<Json> LivePodsWithClaims(const std::vector<Json>& pods,
                                     const std::set<std::string>& gpu_claims) {
  std::vector<Json> out;
  for (const Json& pod : pods) {
    if (!kube::IsPodTerminal(pod) && kube::UsesAnyClaim(pod, gpu_claims)) out.push_back(pod);
  }
  return out;
}

bool IsMirrorPod(const Json& pod) {
  return kube::Annotation(pod, "kubernetes.io/config.mirror").has_value();
}

std::string PodKey(const Json& pod) { return kube::Namespace(pod) + "/" + kube::Name(pod); }

std::string PodList(const std::vector<Json>& pods, size_t max) {
  std::vector<std::string> names;
  for (size_t i = 0; i < pods.size() && i < max; ++i) names.push_back(PodKey(pods[i]));
  std::string out = Join(names, ", ");
  if (pods.size() > max) out += " and " + std::to_string(pods.size() - max) + " more";
  return out;
}

EvictionPlan PlanEviction(const std::vector<Json>& pods, const EvictionFlags& flags,
                          bool only_gpu_pods, const std::set<std::string>& gpu_claims) {
  EvictionPlan plan;
  for (const Json& pod : pods) {
    if (only_gpu_pods && !kube::IsGpuPod(pod, gpu_claims)) continue;
    if (IsMirrorPod(pod)) {
      if (only_gpu_pods) {
        plan.refused.push_back(PodKey(pod) +
                               ": a static pod (remove its manifest from the kubelet's "
                               "manifest directory)");
      }
      continue;
    }
    if (kube::IsDaemonSetPod(pod)) {
      if (only_gpu_pods) {
        plan.refused.push_back(PodKey(pod) +
                               ": owned by a DaemonSet, which would recreate it (stop the "
                               "DaemonSet from selecting this node)");
      }
      continue;
    }
    if (kube::IsPodTerminal(pod)) {
      plan.evict.push_back(pod);
      continue;
    }
    std::vector<std::string> why;
    bool has_controller = false;
    for (const kube::OwnerReference& o : kube::OwnerReferences(pod)) has_controller |= o.controller;
    if (!has_controller && !flags.force) {
      why.push_back("no controller would recreate it (set DRAIN_USE_FORCE=true to delete it)");
    }
    bool empty_dir = false;
    const Json& volumes = Field(Field(pod, "spec"), "volumes");
    if (volumes.is_array()) {
      for (const Json& v : volumes) empty_dir |= v.contains("emptyDir");
    }
    if (empty_dir && !flags.delete_emptydir_data) {
      why.push_back("its emptyDir data would be lost (set DRAIN_DELETE_EMPTYDIR_DATA=true)");
    }
    if (why.empty()) {
      plan.evict.push_back(pod);
    } else {
      plan.refused.push_back(PodKey(pod) + ": " + Join(why, "; "));
    }
  }
  return plan;
}

std::string_view DecisionName(Decision d) {
  switch (d) {
    case Decision::kHostDriver:
      return "host-driver";
    case Decision::kNoDriver:
      return "no-driver-loaded";
    case Decision::kDriverCurrent:
      return "driver-current";
    case Decision::kReload:
      return "reload";
  }
  return "unknown";
}

Decision Decide(const NodeState& node, const std::string& digest, bool force_reinstall) {
  if (node.host_driver) return Decision::kHostDriver;
  if (!node.nvidia_loaded) return Decision::kNoDriver;
  if (!force_reinstall && !digest.empty() && node.loaded_digest == digest) {
    return Decision::kDriverCurrent;
  }
  return Decision::kReload;
}

EvictionPolicy PolicyFor(bool enable_eviction, bool enable_drain,
                         std::optional<std::string_view> upgrade_annotation) {
  if (upgrade_annotation == "true") return {.upgrade_controller_owns = true};
  return {.evict = enable_eviction, .drain = enable_drain};
}

CordonState CordonStateOf(const Json& node) {
  if (!kube::IsUnschedulable(node)) return CordonState::kSchedulable;
  return kube::Annotation(node, kCordonAnnotation) == "true" ? CordonState::kCordonedByUs
                                                             : CordonState::kCordonedByOther;
}

std::optional<Json> CordonPatch(const Json& node) {
  if (CordonStateOf(node) != CordonState::kSchedulable) return std::nullopt;
  return Json{{"metadata",
               {{"resourceVersion", kube::ResourceVersion(node)},
                {"annotations", {{std::string(kCordonAnnotation), "true"}}}}},
              {"spec", {{"unschedulable", true}}}};
}

std::optional<Json> UncordonPatch(const Json& node) {
  const bool ours = kube::Annotation(node, kCordonAnnotation).has_value();
  if (!ours) return std::nullopt;
  Json patch{{"metadata",
              {{"resourceVersion", kube::ResourceVersion(node)},
               {"annotations", {{std::string(kCordonAnnotation), nullptr}}}}}};
  // Someone who uncordoned meanwhile already did the work; only the mark goes.
  if (kube::IsUnschedulable(node)) patch["spec"] = {{"unschedulable", nullptr}};
  return patch;
}

}  // namespace gpuop::driver_manager
