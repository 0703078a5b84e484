#include "lifecycle/uninstall.h"

#include <thread>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "discovery/pci.h"
#include "gfd/daemon.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "mig/manager.h"
#include "operator/node_labels.h"
#include "operator/operator.h"
#include "operator/render.h"

namespace gpuop::lifecycle {

using Json = nlohmann::json;
namespace res = kube::resources;

namespace {

constexpr std::string_view kNfdAnnotationPrefix = "nfd.node.kubernetes.io/";

bool HasNfdAnnotations(const Json& node) {
  const Json annotations =
      node.value("metadata", Json::object()).value("annotations", Json::object());
  for (const auto& [key, value] : annotations.items()) {
    if (key.starts_with(kNfdAnnotationPrefix)) return true;
  }
  return false;
}

std::string ManagedSelector() {
  return std::string(op::kManagedByLabel) + "=" + op::kManagedByValue;
}

// Polls `done` until it returns true, an error, or the timeout.
Status WaitUntil(const UninstallOptions& options, const std::string& what,
                 const std::function<Result<bool>()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (true) {
    auto r = done();
    if (!r.ok()) return r.status().Annotate("waiting for " + what);
    if (*r) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("gave up after " + std::to_string(options.timeout.count()) +
                              " s waiting for " + what +
                              "; run `gpuop uninstall` again once it is unblocked");
    }
    std::this_thread::sleep_for(options.poll);
  }
}

Result<bool> NoneLeft(kube::Client& client, const kube::Resource& r, const std::string& ns,
                      const std::string& selector) {
  kube::ListOptions list;
  list.label_selector = selector;
  GPUOP_ASSIGN_OR_RETURN(kube::ObjectList objects, client.List(r, ns, list));
  return objects.items.empty();
}

}  // namespace

std::optional<Json> NodeCleanupPatch(const Json& node, bool node_discovery_ran) {
  const std::map<std::string, std::string> labels = kube::Labels(node);
  Json set = Json::object();
  // What the operator removes when its ClusterPolicy goes (its own labels;
  // a user's overrides stay).
  for (const auto& [key, value] : op::PlanNodeLabels(labels, nullptr)) {
    set[key] = value ? Json(*value) : Json(nullptr);
  }
  // gpu-feature-discovery's labels: exactly those its annotation records.
  const auto owned = kube::Annotation(node, gfd::kOwnedLabelsAnnotation);
  if (owned) {
    for (const std::string& key : Split(*owned, ',')) {
      if (key.starts_with(gfd::kLabelPrefix) && labels.contains(key)) set[key] = nullptr;
    }
  }
  if (labels.contains(mig::kStateLabel)) set[mig::kStateLabel] = nullptr;
  if (node_discovery_ran && !HasNfdAnnotations(node)) {
    for (const auto& [key, value] : labels) {
      if (discovery::IsManagedLabel(key)) set[key] = nullptr;
    }
  }
  Json patch = Json::object();
  if (!set.empty()) patch["metadata"]["labels"] = std::move(set);
  if (owned) patch["metadata"]["annotations"][gfd::kOwnedLabelsAnnotation] = nullptr;
  // A MIG config that failed (a driver upgrade under an old MIG manager, say)
  // must not outlive the stack that reported it.
  if (kube::Annotation(node, mig::kFailureAnnotation)) {
    patch["metadata"]["annotations"][mig::kFailureAnnotation] = nullptr;
  }
  const Json taints_now = node.value("spec", Json::object()).value("taints", Json::array());
  if (auto taints = op::TaintsWithValidation(taints_now, false)) {
    patch["spec"]["taints"] = std::move(*taints);
    // The whole list replaces the old one: only if nobody changed it meanwhile.
    patch["metadata"]["resourceVersion"] =
        node.value("metadata", Json::object()).value("resourceVersion", "");
  }
  if (patch.empty()) return std::nullopt;
  return patch;
}

Status Uninstall(kube::Client& client, const UninstallOptions& options) {
  const std::string& ns = options.namespace_;
  // Whether gpuop's node discovery labelled the nodes: read before its
  // DaemonSet goes with the ClusterPolicy.
  auto nd = client.Get(res::kDaemonSets, ns, op::kNodeDiscoveryName);
  if (!nd.ok() && !kube::IsNotFound(nd.status())) {
    return nd.status().Annotate("reading DaemonSet " + ns + "/" + op::kNodeDiscoveryName);
  }
  const bool node_discovery_ran = nd.ok();

  // 1. The ClusterPolicies.
  auto policies = client.List(res::kClusterPolicies, "");
  if (!policies.ok() && !kube::IsNotFound(policies.status())) {
    return policies.status().Annotate("listing ClusterPolicies");
  }
  if (policies.ok()) {
    kube::DeleteOptions background;
    background.propagation_policy = "Background";
    for (const Json& p : policies->items) {
      const std::string name = kube::Name(p);
      Status st = client.Delete(res::kClusterPolicies, "", name, background);
      if (!st.ok() && !kube::IsNotFound(st)) {
        return st.Annotate("deleting ClusterPolicy " + name);
      }
      LogInfo("ClusterPolicy deleted", {{"name", name}});
    }
    GPUOP_RETURN_IF_ERROR(WaitUntil(options, "the ClusterPolicies to go", [&]() -> Result<bool> {
      auto left = client.List(res::kClusterPolicies, "");
      if (!left.ok()) return left.status();
      return left->items.empty();
    }));
  }

  // 2. The components: their DaemonSets and pods (the toolkit's preStop
  // reverts its node's runtime configuration on the way out).
  GPUOP_RETURN_IF_ERROR(WaitUntil(options, "gpuop's DaemonSets in " + ns + " to go", [&] {
    return NoneLeft(client, res::kDaemonSets, ns, ManagedSelector());
  }));
  GPUOP_RETURN_IF_ERROR(WaitUntil(options, "gpuop's pods in " + ns + " to finish", [&] {
    return NoneLeft(client, res::kPods, ns, ManagedSelector());
  }));
  LogInfo("components gone", {{"namespace", ns}});

  // 3. What the components left on the nodes.
  GPUOP_ASSIGN_OR_RETURN(kube::ObjectList nodes, client.ListAll(res::kNodes, ""));
  for (const Json& node : nodes.items) {
    const std::string name = kube::Name(node);
    auto patch = NodeCleanupPatch(node, node_discovery_ran);
    if (!patch) continue;
    auto patched = client.Patch(res::kNodes, "", name, kube::PatchType::kMerge, *patch);
    if (kube::IsConflict(patched.status())) {
      // Someone changed the node (its taints) meanwhile: plan again once.
      auto fresh = client.Get(res::kNodes, "", name);
      if (!fresh.ok()) return fresh.status().Annotate("reading node " + name);
      patch = NodeCleanupPatch(*fresh, node_discovery_ran);
      if (!patch) continue;
      patched = client.Patch(res::kNodes, "", name, kube::PatchType::kMerge, *patch);
    }
    if (!patched.ok() && !kube::IsNotFound(patched.status())) {
      return patched.status().Annotate("removing gpuop's labels from node " + name);
    }
    LogInfo("node cleaned", {{"node", name}});
  }

  // 4. The CRD (and so any ClusterPolicy created meanwhile).
  if (options.delete_crd) {
    Status st = client.Delete(res::kCustomResourceDefinitions, "", op::kCrdName);
    if (!st.ok() && !kube::IsNotFound(st)) {
      return st.Annotate("deleting CustomResourceDefinition " + std::string(op::kCrdName));
    }
    LogInfo("CRD deleted", {{"name", op::kCrdName}});
  }
  return Status::Ok();
}

}  // namespace gpuop::lifecycle
