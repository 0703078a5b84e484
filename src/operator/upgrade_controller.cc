#include "operator/upgrade_controller.h"

#include <map>
#include <optional>
#include <set>

#include "base/log.h"
#include "base/strings.h"
#include "kube/gpu_pods.h"
#include "kube/object.h"
#include "kube/operand_pause.h"
#include "operator/node_labels.h"

namespace gpuop::op {
namespace {

using kube::Json;
namespace res = kube::resources;
namespace up = upgrade;

const kube::Resource kControllerRevisions{"apps", "v1", "controllerrevisions", "ControllerRevision",
                                          true};
constexpr const char* kDriverSelector = "app.kubernetes.io/component=driver";
constexpr const char* kValidatorSelector = "app=nvidia-operator-validator";

// Every annotation the controller writes (the enabled one aside).
constexpr const char* kOwnAnnotations[] = {
    up::kRequestedAnnotation,        up::kInitialStateAnnotation,
    up::kWaitForJobsStartAnnotation, up::kValidationStartAnnotation,
    up::kPodDeletionStartAnnotation, up::kDrainStartAnnotation,
    up::kOperandsPausedAnnotation,
};

// What of a node a pass depends on; heartbeats change none of it.
std::string UpgradeRelevantNodeState(const Json& node) {
  std::string s = kube::IsUnschedulable(node) ? "cordoned;" : "";
  s += kube::IsNodeReady(node) ? "ready;" : "notready;";
  for (const auto& [k, v] : NodeLabels(node)) {
    if (StartsWith(k, "nvidia.com/gpu-driver-upgrade") || k == kGpuPresentLabel) {
      s += k + "=" + v + ";";
    }
  }
  for (const auto& [k, v] : kube::Annotations(node)) {
    if (StartsWith(k, "nvidia.com/gpu-driver-upgrade")) s += k + "=" + v + ";";
  }
  return s;
}

std::vector<up::PodInfo> PodsOn(const kube::Informer& pods, const std::string& node) {
  std::vector<up::PodInfo> out;
  for (const kube::ObjectPtr& p : pods.ByIndex(kube::kNodeNameIndex, node)) {
    out.push_back(up::ReadPod(*p));
  }
  return out;
}

bool IsHttp(const Status& s, int code) { return s.http_status() == code; }

}  // namespace

UpgradeController::UpgradeController(kube::Client& client, UpgradeControllerOptions options,
                                     kube::EventRecorder* events, UpgradeMetrics* metrics)
    : client_(client), options_(std::move(options)), events_(events), metrics_(metrics) {}

UpgradeController::~UpgradeController() {
  if (nodes_ != nullptr && node_handler_ != 0) nodes_->RemoveEventHandler(node_handler_);
}

void UpgradeController::Setup(kube::SharedInformerFactory& factory, kube::Informer& nodes) {
  const std::string& ns = options_.namespace_;
  nodes_ = &nodes;
  driver_pods_ = &factory.For(res::kPods, ns, kDriverSelector);
  daemonsets_ = &factory.For(res::kDaemonSets, ns, kDriverSelector);
  revisions_ = &factory.For(kControllerRevisions, ns, kDriverSelector);
  validator_pods_ = &factory.For(res::kPods, ns, kValidatorSelector);

  controller_ =
      std::make_unique<kube::Controller>("driver-upgrade", kube::WorkQueueOptions{}, 1,
                                         [this](const std::string&) { return Reconcile(); });
  auto key = [](const Json&) { return std::vector<std::string>{kKey}; };
  for (kube::Informer* inf : {driver_pods_, daemonsets_, revisions_, validator_pods_}) {
    controller_->Watch(*inf, key);
  }
  controller_->RequireSynced(nodes);
  kube::EventHandler node_events;
  node_events.on_add = [this](const kube::ObjectPtr&) { Enqueue(); };
  node_events.on_update = [this](const kube::ObjectPtr& old, const kube::ObjectPtr& n) {
    if (UpgradeRelevantNodeState(*old) != UpgradeRelevantNodeState(*n)) Enqueue();
  };
  node_events.on_delete = [this](const kube::ObjectPtr&) { Enqueue(); };
  node_handler_ = nodes.AddEventHandler(node_events);
}

void UpgradeController::Enqueue() {
  if (controller_) controller_->Enqueue(kKey);
}

Status UpgradeController::Run(std::stop_token stop) {
  if (!controller_) return FailedPrecondition("UpgradeController::Run before Setup");
  Status s = controller_->Run(stop);
  return s.code() == StatusCode::kAborted ? Status::Ok() : s;
}

kube::ReconcileResult UpgradeController::Disable() {
  metrics_->auto_upgrade_enabled = 0;
  metrics_->in_progress = metrics_->done = metrics_->failed = 0;
  metrics_->available = metrics_->pending = 0;
  for (const kube::ObjectPtr& node : nodes_->List()) {
    Json labels = Json::object();
    Json annotations = Json::object();
    if (NodeLabels(*node).count(up::kStateLabel)) labels[up::kStateLabel] = nullptr;
    // Stopped between pausing the operands and deleting the old driver pod:
    // that pod stays, and so must its operands.
    if (kube::Annotation(*node, up::kOperandsPausedAnnotation)) {
      for (const auto& [k, v] :
           kube::RestoreChanges(NodeLabels(*node), kube::PausableLabelsAndDra(""))) {
        labels[k] = v;
      }
    }
    for (const char* key : kOwnAnnotations) {
      // The requested annotation is a user's: it waits for autoUpgrade.
      if (key != up::kRequestedAnnotation && kube::Annotation(*node, key)) {
        annotations[key] = nullptr;
      }
    }
    if (kube::Annotation(*node, up::kEnabledAnnotation))
      annotations[up::kEnabledAnnotation] = nullptr;
    if (labels.empty() && annotations.empty()) continue;
    Json patch{{"metadata", {{"labels", labels}, {"annotations", annotations}}}};
    auto r = client_.Patch(res::kNodes, "", kube::Name(*node), kube::PatchType::kMerge, patch);
    if (!r.ok() && !kube::IsNotFound(r.status())) {
      return kube::ReconcileResult::Error(
          r.status().Annotate("removing the driver upgrade labels of node " + kube::Name(*node)));
    }
  }
  return kube::ReconcileResult::Ok();
}

kube::ReconcileResult UpgradeController::Reconcile() {
  const UpgradeConfig config = options_.config();
  if (config.mode == UpgradeConfig::Mode::kHold) return kube::ReconcileResult::Ok();
  if (config.mode == UpgradeConfig::Mode::kOff) return Disable();
  metrics_->auto_upgrade_enabled = 1;

  const std::string& ns = options_.namespace_;
  up::ClusterInput in;
  in.policy = config.policy;
  in.now = ClockOrReal(options_.clock).Now();
  std::vector<Json> revisions;
  for (const kube::ObjectPtr& r : revisions_->List()) revisions.push_back(*r);
  for (const kube::ObjectPtr& ds : daemonsets_->List()) {
    up::DriverDaemonSet d;
    d.name = kube::Name(*ds);
    d.revision_hash = up::CurrentRevisionHash(*ds, revisions);
    d.config_digest = up::ConfigDigest(
        ds->value("spec", Json::object()).value("template", Json::object()).value("spec", Json()));
    in.daemonsets[d.name] = d;
  }

  // Read only when a node evicts GPU pods: a pod holding a gpu.nvidia.com
  // claim is one (listed once per pass, cluster-wide).
  std::optional<std::set<std::string>> gpu_claims;
  std::map<std::string, kube::ObjectPtr> node_objects;
  for (const kube::ObjectPtr& node : nodes_->List()) {
    const std::string name = kube::Name(*node);
    up::NodeInput n;
    n.name = name;
    n.driver_pods = PodsOn(*driver_pods_, name);
    n.labels = NodeLabels(*node);
    if (n.driver_pods.empty() && !n.labels.count(up::kStateLabel)) continue;
    n.annotations = kube::Annotations(*node);
    n.unschedulable = kube::IsUnschedulable(*node);
    n.ready = kube::IsNodeReady(*node);
    n.validator_pods = PodsOn(*validator_pods_, name);
    up::State state =
        up::ParseState(n.labels.count(up::kStateLabel) ? n.labels[up::kStateLabel] : "");
    up::PodListing listing = up::PodsToList(state, in.policy);
    if (listing != up::PodListing::kNone) {
      kube::ListOptions lo;
      lo.field_selector = "spec.nodeName=" + name;
      lo.label_selector = up::PodListSelector(listing, in.policy);
      auto pods = client_.ListAll(res::kPods, "", lo);
      if (!pods.ok()) {
        return kube::ReconcileResult::Error(
            pods.status().Annotate("listing the pods of node " + name + " (needs list on pods)"));
      }
      if (listing == up::PodListing::kAllOnNode && !gpu_claims) {
        auto claims = kube::ListClaimsAllocatedBy(client_, kube::kGpuDraDriver);
        if (!claims.ok()) return kube::ReconcileResult::Error(claims.status());
        gpu_claims = std::move(claims).value();
      }
      static const std::set<std::string> kNoClaims;
      const std::set<std::string>& claims = gpu_claims ? *gpu_claims : kNoClaims;
      for (const Json& p : pods->items) {
        if (listing == up::PodListing::kOperands && !kube::IsOperandPod(p, ns) &&
            !kube::IsDraPluginPod(p, ns)) {
          continue;
        }
        n.pods.push_back(up::ReadPod(p, claims));
      }
    }
    node_objects[name] = node;
    in.nodes.push_back(std::move(n));
  }

  up::UpgradePlan plan = up::PlanUpgrade(in);
  std::map<std::string, const up::NodeAction*> by_node;
  for (const up::NodeAction& a : plan.actions) by_node[a.node] = &a;

  Status first;
  for (const auto& [name, node] : node_objects) {
    // The driver manager leaves eviction and drain to this controller.
    const bool has_enabled = kube::Annotation(*node, up::kEnabledAnnotation) == "true";
    auto it = by_node.find(name);
    if (it == by_node.end() && has_enabled) continue;
    up::NodeAction none;
    none.node = name;
    Status s = Apply(it == by_node.end() ? none : *it->second, *node,
                     has_enabled ? std::nullopt : std::optional<bool>(true));
    if (!s.ok() && first.ok()) first = s;
  }

  metrics_->in_progress = plan.counts.in_progress;
  metrics_->done = plan.counts.done;
  metrics_->failed = plan.counts.failed;
  metrics_->available = plan.counts.available;
  metrics_->pending = plan.counts.pending;
  if (!first.ok()) return kube::ReconcileResult::Error(first);
  if (plan.requeue_at) {
    auto after = std::chrono::duration_cast<std::chrono::milliseconds>(*plan.requeue_at - in.now);
    return kube::ReconcileResult::RequeueAfter(std::max(after, std::chrono::milliseconds(1)));
  }
  return kube::ReconcileResult::Ok();
}

Status UpgradeController::Apply(const up::NodeAction& action, const Json& node,
                                std::optional<bool> enabled_annotation) {
  const std::string& name = action.node;
  const std::string& ns = options_.namespace_;
  std::vector<up::NodeEvent> events = action.events;
  std::optional<up::State> state = action.state;
  std::map<std::string, std::optional<std::string>> annotations = action.annotations;

  if (action.delete_driver_pod) {
    Status s =
        client_.Delete(res::kPods, action.delete_driver_pod->ns, action.delete_driver_pod->name);
    if (!s.ok() && !kube::IsNotFound(s)) {
      return s.Annotate("deleting driver pod " + ns + "/" + action.delete_driver_pod->name +
                        " on node " + name);
    }
  }
  std::vector<std::string> evicted;
  for (const up::PodRef& pod : action.evict) {
    Status s = client_.Evict(pod.ns, pod.name);
    if (s.ok()) evicted.push_back(pod.ns + "/" + pod.name);
    if (s.ok() || kube::IsNotFound(s)) continue;
    if (IsHttp(s, 429)) {
      // A PodDisruptionBudget says not now: the next pass asks again.
      LogInfo("eviction refused by a PodDisruptionBudget; retrying",
              {{"node", name}, {"pod", pod.ns + "/" + pod.name}});
      continue;
    }
    if (!action.on_evict_error) return s.Annotate("evicting " + pod.ns + "/" + pod.name);
    state = action.on_evict_error;
    for (const char* key : {up::kPodDeletionStartAnnotation, up::kDrainStartAnnotation}) {
      if (kube::Annotation(node, key) || annotations.count(key)) annotations[key] = std::nullopt;
    }
    events = {{true, "Driver upgrade: " + std::string(up::StateName(*state)) + ": evicting " +
                         pod.ns + "/" + pod.name + " failed: " + s.message()}};
    break;
  }
  if (!evicted.empty()) {
    events.push_back({false, "Driver upgrade: evicted GPU pod(s) " + Join(evicted, ", ") +
                                 " for the driver upgrade"});
  }

  Json labels = Json::object();
  Json ann = Json::object();
  for (const auto& [k, v] : action.labels) labels[k] = v;
  if (state) labels[up::kStateLabel] = std::string(up::StateName(*state));
  for (const auto& [k, v] : annotations) ann[k] = v ? Json(*v) : Json(nullptr);
  if (enabled_annotation) ann[up::kEnabledAnnotation] = "true";
  Json patch = Json::object();
  if (!labels.empty()) patch["metadata"]["labels"] = labels;
  if (!ann.empty()) patch["metadata"]["annotations"] = ann;
  // Uncordon removes the field, as kubectl uncordon leaves it.
  if (action.unschedulable) {
    patch["spec"]["unschedulable"] = *action.unschedulable ? Json(true) : Json(nullptr);
  }
  if (!patch.empty()) {
    auto r = client_.Patch(res::kNodes, "", name, kube::PatchType::kMerge, patch);
    if (!r.ok()) {
      if (kube::IsNotFound(r.status())) return Status::Ok();
      return r.status().Annotate("updating the driver upgrade state of node " + name);
    }
  }
  if (state) {
    LogInfo("driver upgrade state",
            {{"node", name}, {"state", std::string(up::StateName(*state))}});
  }
  if (events_ != nullptr) {
    for (const up::NodeEvent& e : events) {
      events_->Event(kube::ReferenceTo(node, &res::kNodes),
                     e.warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                     up::kEventReason, e.message);
    }
  }
  return Status::Ok();
}

}  // namespace gpuop::op
