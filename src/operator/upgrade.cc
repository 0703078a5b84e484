#include "operator/upgrade.h"

#include <algorithm>
#include <limits>

#include "base/json_field.h"
#include "base/strings.h"
#include "kube/gpu_pods.h"
#include "kube/object.h"
#include "kube/operand_pause.h"

namespace gpuop::op::upgrade {
namespace {

constexpr std::pair<State, std::string_view> kStateNames[] = {
    {State::kUnknown, ""},
    {State::kUpgradeDone, "upgrade-done"},
    {State::kUpgradeRequired, "upgrade-required"},
    {State::kCordonRequired, "cordon-required"},
    {State::kWaitForJobsRequired, "wait-for-jobs-required"},
    {State::kPodDeletionRequired, "pod-deletion-required"},
    {State::kDrainRequired, "drain-required"},
    {State::kPodRestartRequired, "pod-restart-required"},
    {State::kValidationRequired, "validation-required"},
    {State::kUncordonRequired, "uncordon-required"},
    {State::kUpgradeFailed, "upgrade-failed"},
};

// The percentage of "25%", or nullopt when `s` is not one.
std::optional<int64_t> Percent(std::string_view s) {
  if (!EndsWith(s, "%")) return std::nullopt;
  auto n = ParseUint(s.substr(0, s.size() - 1));
  if (!n || *n > 100) return std::nullopt;
  return static_cast<int64_t>(*n);
}

std::optional<TimePoint> ParseUnixSeconds(const std::map<std::string, std::string>& annotations,
                                          const char* key) {
  auto it = annotations.find(key);
  if (it == annotations.end()) return std::nullopt;
  auto n = ParseUint(it->second);
  if (!n) return std::nullopt;
  return TimePoint(std::chrono::seconds(*n));
}

bool Has(const std::map<std::string, std::string>& m, const char* key, std::string_view value) {
  auto it = m.find(key);
  return it != m.end() && it->second == value;
}

std::vector<const PodInfo*> ToPointers(const std::vector<PodInfo>& pods) {
  std::vector<const PodInfo*> out;
  for (const PodInfo& p : pods) out.push_back(&p);
  return out;
}

std::string Names(const std::vector<const PodInfo*>& pods) {
  std::vector<std::string> names;
  for (const PodInfo* p : pods) names.push_back(p->ns + "/" + p->name);
  if (names.size() > 5) {
    size_t more = names.size() - 5;
    names.resize(5);
    names.push_back("and " + std::to_string(more) + " more");
  }
  return Join(names, ", ");
}

// Why a pod cannot be evicted under these options ("": it can).
std::string NotEvictable(const PodInfo& p, bool force, bool delete_empty_dir, const char* field) {
  if (p.controller_kind == "DaemonSet") return "it belongs to DaemonSet " + p.controller_name;
  if (p.controller_kind.empty() && !force) {
    return std::string("no controller would recreate it (set ") + field +
           ".force=true to delete it)";
  }
  if (p.empty_dir && !delete_empty_dir) {
    return std::string("its emptyDir data would be lost (set ") + field +
           ".deleteEmptyDir=true to allow that)";
  }
  return "";
}

// Nodes that may start an upgrade in this pass.
struct Budget {
  int64_t parallel = 0;     // maxParallelUpgrades left
  int64_t unavailable = 0;  // maxUnavailable left
};

class NodeStepper {
 public:
  NodeStepper(const ClusterInput& in, const NodeInput& node, Budget& budget, NodeAction& action,
              std::optional<TimePoint>& requeue_at)
      : in_(in), node_(node), budget_(budget), a_(action), requeue_at_(requeue_at) {
    for (const PodInfo& p : node.driver_pods) {
      if (pod_ == nullptr || (pod_->terminating && !p.terminating)) pod_ = &p;
    }
    if (pod_ != nullptr) {
      orphan_ = pod_->controller_kind != "DaemonSet";
      auto ds = in.daemonsets.find(pod_->controller_name);
      if (!orphan_ && ds != in.daemonsets.end()) ds_ = &ds->second;
    }
  }

  void Step(State state) {
    switch (state) {
      case State::kUnknown:
      case State::kUpgradeDone:
        return Idle(state);
      case State::kUpgradeRequired:
        return Required();
      case State::kCordonRequired:
        a_.unschedulable = true;
        return MoveTo(State::kWaitForJobsRequired, "cordoned the node");
      case State::kWaitForJobsRequired:
        return WaitForJobs();
      case State::kPodDeletionRequired:
        return DeletePods();
      case State::kDrainRequired:
        return Drain();
      case State::kPodRestartRequired:
        return RestartDriver();
      case State::kValidationRequired:
        return Validate();
      case State::kUncordonRequired:
        return Uncordon();
      case State::kUpgradeFailed:
        return Failed();
    }
  }

 private:
  bool Stale() const {
    return ds_ != nullptr && !ds_->revision_hash.empty() &&
           pod_->revision_hash != ds_->revision_hash;
  }
  // The driver pod runs the DaemonSet's current revision and is not going.
  bool InSync() const {
    return pod_ != nullptr && !orphan_ && !pod_->terminating && ds_ != nullptr &&
           !ds_->revision_hash.empty() && pod_->revision_hash == ds_->revision_hash;
  }
  bool DriverReady() const { return InSync() && pod_->phase == "Running" && pod_->ready; }

  void MoveTo(State next, const std::string& why, bool warning = false) {
    a_.state = next;
    a_.events.push_back({warning, "Driver upgrade: " + std::string(StateName(next)) + ": " + why});
  }
  void Annotate(const char* key, std::optional<std::string> value) { a_.annotations[key] = value; }
  void Unannotate(const char* key) {
    if (node_.annotations.count(key)) a_.annotations[key] = std::nullopt;
  }
  void RequeueAt(TimePoint t) {
    if (!requeue_at_ || t < *requeue_at_) requeue_at_ = t;
  }
  // The start of a bounded wait: the annotation, or now (stamped).
  TimePoint StartOf(const char* key) {
    if (auto t = ParseUnixSeconds(node_.annotations, key)) return *t;
    Annotate(key, UnixSeconds(in_.now));
    return in_.now;
  }
  // False (and a requeue at the deadline) until `timeout_s` since the stamp
  // under `key` has passed; 0 never expires.
  bool Expired(const char* key, int64_t timeout_s) {
    TimePoint start = StartOf(key);
    if (timeout_s == 0) return false;
    TimePoint deadline = start + std::chrono::seconds(timeout_s);
    if (in_.now >= deadline) return true;
    RequeueAt(deadline);
    return false;
  }

  void Idle(State state) {
    const bool requested = Has(node_.annotations, kRequestedAnnotation, "true");
    if (pod_ != nullptr && (Stale() || requested)) {
      if (node_.unschedulable) Annotate(kInitialStateAnnotation, "true");
      std::string why = requested
                            ? "requested by annotation " + std::string(kRequestedAnnotation)
                            : "driver pod " + pod_->name + " runs revision " + pod_->revision_hash +
                                  ", DaemonSet " + ds_->name + " is at " + ds_->revision_hash;
      return MoveTo(State::kUpgradeRequired, why);
    }
    if (state == State::kUnknown && InSync()) {
      MoveTo(State::kUpgradeDone, "the driver pod runs the current revision");
    }
  }

  void Required() {
    const bool requested = Has(node_.annotations, kRequestedAnnotation, "true");
    Unannotate(kRequestedAnnotation);
    if (Has(node_.labels, kSkipLabel, "true")) return;
    // Its driver pod could not be replaced; it starts once Ready again.
    if (!node_.ready) return;
    if (budget_.parallel <= 0) return;
    // An already-cordoned node costs no availability.
    if (!node_.unschedulable) {
      if (budget_.unavailable <= 0) return;
      --budget_.unavailable;
    } else if (!node_.annotations.count(kInitialStateAnnotation)) {
      // Cordoned by someone else since: keep it cordoned afterwards.
      Annotate(kInitialStateAnnotation, "true");
    }
    --budget_.parallel;
    const bool restart_only = pod_ != nullptr && !orphan_ && !requested && ds_ != nullptr &&
                              !pod_->config_digest.empty() &&
                              pod_->config_digest == ds_->config_digest;
    if (restart_only) {
      a_.unschedulable = true;
      return MoveTo(State::kPodRestartRequired,
                    "the driver configuration is unchanged: cordoned, the driver pod restarts "
                    "without evicting GPU pods");
    }
    MoveTo(State::kCordonRequired, "starting the upgrade");
  }

  void WaitForJobs() {
    const auto& selector = in_.policy.wait_for_completion.pod_selector;
    if (selector.empty()) return MoveTo(State::kPodDeletionRequired, "no jobs to wait for");
    std::vector<const PodInfo*> running;
    for (const PodInfo& p : node_.pods) {
      if (p.phase == "Running" || p.phase == "Pending") running.push_back(&p);
    }
    if (running.empty()) {
      Unannotate(kWaitForJobsStartAnnotation);
      return MoveTo(State::kPodDeletionRequired, "no pod matching " + selector + " runs");
    }
    if (Expired(kWaitForJobsStartAnnotation, in_.policy.wait_for_completion.timeout_seconds)) {
      a_.annotations[kWaitForJobsStartAnnotation] = std::nullopt;
      return MoveTo(
          State::kPodDeletionRequired,
          "waitForCompletion.timeoutSeconds passed with " + Names(running) + " still running",
          true);
    }
    RequeueAt(in_.now + kPodPollInterval);
  }

  void DeletePods() {
    const auto& opts = in_.policy.pod_deletion;
    const State fail_to = in_.policy.drain.enable ? State::kDrainRequired : State::kUpgradeFailed;
    const std::string fallback = in_.policy.drain.enable ? "; the node will be drained" : "";
    std::vector<const PodInfo*> gpu;
    for (const PodInfo& p : node_.pods) {
      if (p.gpu && (p.phase == "Running" || p.phase == "Pending")) gpu.push_back(&p);
    }
    if (gpu.empty()) {
      Unannotate(kPodDeletionStartAnnotation);
      return MoveTo(State::kPodRestartRequired, "no GPU pods left on the node");
    }
    // All or nothing, as NVIDIA's: no pod goes unless every one can.
    for (const PodInfo* p : gpu) {
      std::string why = NotEvictable(*p, opts.force, opts.delete_empty_dir, "podDeletion");
      if (!why.empty()) {
        Unannotate(kPodDeletionStartAnnotation);
        return MoveTo(
            fail_to, "cannot evict GPU pod " + p->ns + "/" + p->name + ": " + why + fallback, true);
      }
    }
    if (Expired(kPodDeletionStartAnnotation, opts.timeout_seconds)) {
      a_.annotations[kPodDeletionStartAnnotation] = std::nullopt;
      return MoveTo(fail_to,
                    "GPU pods " + Names(gpu) +
                        " still on the node after podDeletion.timeoutSeconds=" +
                        std::to_string(opts.timeout_seconds) +
                        " (a PodDisruptionBudget may forbid their eviction)" + fallback,
                    true);
    }
    for (const PodInfo* p : gpu) {
      if (!p->terminating) a_.evict.push_back({p->ns, p->name});
    }
    a_.on_evict_error = fail_to;
    RequeueAt(in_.now + kPodPollInterval);
  }

  void Drain() {
    const auto& opts = in_.policy.drain;
    if (!opts.enable) return MoveTo(State::kPodRestartRequired, "drain is off");
    std::vector<const PodInfo*> pods;
    for (const PodInfo& p : node_.pods) {
      if (p.controller_kind == "DaemonSet" || p.mirror || p.phase == "Succeeded" ||
          p.phase == "Failed") {
        continue;
      }
      pods.push_back(&p);
    }
    if (pods.empty()) {
      Unannotate(kDrainStartAnnotation);
      return MoveTo(State::kPodRestartRequired, "drained the node");
    }
    for (const PodInfo* p : pods) {
      std::string why = NotEvictable(*p, opts.force, opts.delete_empty_dir, "drain");
      if (!why.empty()) {
        Unannotate(kDrainStartAnnotation);
        return MoveTo(
            State::kUpgradeFailed,
            "failed to drain the node: cannot evict " + p->ns + "/" + p->name + ": " + why, true);
      }
    }
    if (Expired(kDrainStartAnnotation, opts.timeout_seconds)) {
      a_.annotations[kDrainStartAnnotation] = std::nullopt;
      return MoveTo(
          State::kUpgradeFailed,
          "failed to drain the node: " + Names(pods) +
              " still on it after drain.timeoutSeconds=" + std::to_string(opts.timeout_seconds),
          true);
    }
    for (const PodInfo* p : pods) {
      if (!p->terminating) a_.evict.push_back({p->ns, p->name});
    }
    a_.on_evict_error = State::kUpgradeFailed;
    RequeueAt(in_.now + kPodPollInterval);
  }

  // The new driver pod loads other modules than the old one holds (the fast
  // path of a same-digest restart keeps them loaded).
  bool Reloads() const {
    return orphan_ || ds_ == nullptr || pod_->config_digest.empty() ||
           pod_->config_digest != ds_->config_digest;
  }

  // Pauses the operands' deploy labels and waits, up to kOperandsTimeout,
  // for their pods (node_.pods) to leave. True once the driver pod may go.
  bool OperandsGone() {
    // The DRA driver's too: no GPU pod is left to need its claims.
    auto pause = kube::PauseChanges(node_.labels, kube::PausableLabelsAndDra(""));
    if (!pause.empty()) {
      a_.labels = pause;
      a_.events.push_back({false,
                           "Driver upgrade: paused the GPU operands so that the old "
                           "driver unloads when its pod is deleted"});
    }
    // Stamped with the pause, in the same patch: while it is there, the
    // operator owns the pause (Disable undoes it).
    TimePoint start = StartOf(kOperandsPausedAnnotation);
    // The driver pod goes in a later pass than the pause is written: the
    // new pod's driver manager must find the labels paused to restore them.
    if (pause.empty() && node_.pods.empty()) return true;
    if (in_.now >= start + kOperandsTimeout) {
      a_.events.push_back({true, "Driver upgrade: operand pods " + Names(ToPointers(node_.pods)) +
                                     " still on the node after " +
                                     std::to_string(kOperandsTimeout.count()) +
                                     " s; deleting the driver pod anyway (its successor's driver "
                                     "manager evicts them)"});
      return true;
    }
    RequeueAt(std::min(in_.now + kPodPollInterval, start + kOperandsTimeout));
    return false;
  }

  void RestartDriver() {
    if (pod_ == nullptr || pod_->terminating) return;  // the DaemonSet controller acts next
    if (orphan_ || Stale()) {
      if (Reloads()) {
        if (!OperandsGone()) return;
        // The new pod's driver manager restores the labels.
        a_.annotations[kOperandsPausedAnnotation] = std::nullopt;
      }
      a_.delete_driver_pod = PodRef{pod_->ns, pod_->name};
      a_.events.push_back({false, "Driver upgrade: deleted driver pod " + pod_->name +
                                      " so that the new driver loads"});
      return;
    }
    if (DriverReady()) {
      Unannotate(kOperandsPausedAnnotation);  // the old pod went by another hand
      return MoveTo(State::kValidationRequired, "driver pod " + pod_->name + " is Ready");
    }
    if (InSync() && pod_->restarts_not_ready > kMaxDriverRestarts) {
      MoveTo(State::kUpgradeFailed,
             "driver pod " + pod_->name + " is not Ready after " +
                 std::to_string(pod_->restarts_not_ready) +
                 " restarts; see its logs (kubectl logs -n " + pod_->ns + " " + pod_->name +
                 " --all-containers)",
             true);
    }
  }

  void Validate() {
    std::vector<const PodInfo*> waiting;
    int live = 0;
    for (const PodInfo& p : node_.validator_pods) {
      if (p.terminating) continue;
      ++live;
      if (p.phase != "Running" || !p.ready) waiting.push_back(&p);
    }
    if (live > 0 && waiting.empty()) {
      Unannotate(kValidationStartAnnotation);
      if (node_.annotations.count(kInitialStateAnnotation)) {
        a_.annotations[kInitialStateAnnotation] = std::nullopt;
        return MoveTo(State::kUpgradeDone,
                      "validations passed; the node stays cordoned, as it was before the upgrade");
      }
      return MoveTo(State::kUncordonRequired, "validations passed");
    }
    if (Expired(kValidationStartAnnotation, kValidationTimeout.count())) {
      a_.annotations[kValidationStartAnnotation] = std::nullopt;
      std::string who = live == 0 ? "no validator pod runs on the node"
                                  : "validator pod(s) " + Names(waiting) + " not Ready";
      MoveTo(State::kUpgradeFailed,
             "validation did not pass within " + std::to_string(kValidationTimeout.count()) +
                 " s: " + who,
             true);
    }
  }

  void Uncordon() {
    if (node_.annotations.count(kInitialStateAnnotation)) {
      a_.annotations[kInitialStateAnnotation] = std::nullopt;
      return MoveTo(State::kUpgradeDone, "left cordoned, as it was before the upgrade");
    }
    a_.unschedulable = false;
    MoveTo(State::kUpgradeDone, "uncordoned the node");
  }

  void Failed() {
    // No retry: a human relabels upgrade-required, or the driver recovers.
    if (DriverReady()) {
      MoveTo(State::kUncordonRequired, "driver pod " + pod_->name + " is Ready again");
    }
  }

  const ClusterInput& in_;
  const NodeInput& node_;
  Budget& budget_;
  NodeAction& a_;
  std::optional<TimePoint>& requeue_at_;
  const PodInfo* pod_ = nullptr;
  const DriverDaemonSet* ds_ = nullptr;
  bool orphan_ = false;
};

}  // namespace

std::string_view StateName(State s) {
  for (const auto& [state, name] : kStateNames) {
    if (state == s) return name;
  }
  return "";
}

State ParseState(std::string_view s) {
  for (const auto& [state, name] : kStateNames) {
    if (name == s) return state;
  }
  return State::kUnknown;
}

Result<UpgradePolicy> ParseUpgradePolicy(const Json& upgrade_policy) {
  UpgradePolicy p;
  if (upgrade_policy.is_null()) return p;
  const std::string path = "spec.driver.upgradePolicy";
  if (!upgrade_policy.is_object()) return InvalidArgument(path + ": want an object");
  GPUOP_RETURN_IF_ERROR(ReadBool(upgrade_policy, "autoUpgrade", path, &p.auto_upgrade));
  GPUOP_RETURN_IF_ERROR(
      ReadWholeNumber(upgrade_policy, "maxParallelUpgrades", path, &p.max_parallel));
  if (upgrade_policy.contains("maxUnavailable")) {
    const Json& v = upgrade_policy["maxUnavailable"];
    if (v.is_null()) {
      p.max_unavailable.reset();
    } else if ((v.is_number_integer() && v.get<int64_t>() >= 0) ||
               (v.is_string() &&
                (Percent(v.get<std::string>()) || ParseUint(v.get<std::string>())))) {
      p.max_unavailable = v;
    } else {
      return InvalidArgument(path +
                             ".maxUnavailable: want a number of nodes or a percentage "
                             "such as \"25%\", got " +
                             v.dump());
    }
  }
  // (NVIDIA's chart writes its gpuPodDeletion value here.)
  const Json& deletion = Field(upgrade_policy, "podDeletion");
  const std::string dpath = path + ".podDeletion";
  GPUOP_RETURN_IF_ERROR(ReadBool(deletion, "force", dpath, &p.pod_deletion.force));
  GPUOP_RETURN_IF_ERROR(ReadWholeNumber(deletion, "timeoutSeconds", dpath,
                                        &p.pod_deletion.timeout_seconds, "seconds"));
  GPUOP_RETURN_IF_ERROR(
      ReadBool(deletion, "deleteEmptyDir", dpath, &p.pod_deletion.delete_empty_dir));
  const Json& wait = Field(upgrade_policy, "waitForCompletion");
  const std::string wpath = path + ".waitForCompletion";
  GPUOP_RETURN_IF_ERROR(
      ReadString(wait, "podSelector", wpath, &p.wait_for_completion.pod_selector));
  GPUOP_RETURN_IF_ERROR(ReadWholeNumber(wait, "timeoutSeconds", wpath,
                                        &p.wait_for_completion.timeout_seconds, "seconds"));
  const Json& drain = Field(upgrade_policy, "drain");
  const std::string rpath = path + ".drain";
  GPUOP_RETURN_IF_ERROR(ReadBool(drain, "enable", rpath, &p.drain.enable));
  GPUOP_RETURN_IF_ERROR(ReadBool(drain, "force", rpath, &p.drain.force));
  GPUOP_RETURN_IF_ERROR(ReadString(drain, "podSelector", rpath, &p.drain.pod_selector));
  GPUOP_RETURN_IF_ERROR(
      ReadWholeNumber(drain, "timeoutSeconds", rpath, &p.drain.timeout_seconds, "seconds"));
  GPUOP_RETURN_IF_ERROR(ReadBool(drain, "deleteEmptyDir", rpath, &p.drain.delete_empty_dir));
  return p;
}

int64_t MaxUnavailable(const UpgradePolicy& policy, int64_t total) {
  if (!policy.max_unavailable) return total;
  const Json& v = *policy.max_unavailable;
  if (v.is_number_integer()) return v.get<int64_t>();
  const std::string s = v.get<std::string>();
  if (auto pct = Percent(s)) return (total * *pct + 99) / 100;  // rounded up
  return static_cast<int64_t>(ParseUint(s).value_or(0));
}

PodInfo ReadPod(const Json& pod, const std::set<std::string>& gpu_claims) {
  PodInfo p;
  p.ns = kube::Namespace(pod);
  p.name = kube::Name(pod);
  p.node = kube::PodNodeName(pod);
  p.phase = kube::PodPhase(pod);
  p.terminating = kube::IsBeingDeleted(pod);
  p.revision_hash = kube::Label(pod, kRevisionHashLabel).value_or("");
  p.mirror = kube::Annotation(pod, "kubernetes.io/config.mirror").has_value();
  for (const kube::OwnerReference& o : kube::OwnerReferences(pod)) {
    if (o.controller) {
      p.controller_kind = o.kind;
      p.controller_name = o.name;
    }
  }
  const Json& spec = Field(pod, "spec");
  p.gpu = kube::IsGpuPod(pod, gpu_claims);
  for (const Json& v : Field(spec, "volumes").is_array() ? Field(spec, "volumes") : Json::array()) {
    if (v.contains("emptyDir")) p.empty_dir = true;
  }
  p.config_digest = ConfigDigest(spec);
  const Json& statuses = Field(Field(pod, "status"), "containerStatuses");
  bool all_ready = statuses.is_array() && !statuses.empty();
  for (const Json& s : statuses.is_array() ? statuses : Json::array()) {
    bool ready = Field(s, "ready").is_boolean() && Field(s, "ready").get<bool>();
    if (!ready) {
      all_ready = false;
      int64_t restarts = Field(s, "restartCount").is_number_integer()
                             ? Field(s, "restartCount").get<int64_t>()
                             : 0;
      p.restarts_not_ready = std::max(p.restarts_not_ready, restarts);
    }
  }
  p.ready = all_ready && kube::IsPodReady(pod);
  return p;
}

std::string CurrentRevisionHash(const Json& daemonset, const std::vector<Json>& revisions) {
  const std::string prefix = kube::Name(daemonset) + "-";
  const std::string uid = kube::Uid(daemonset);
  std::string hash;
  int64_t best = -1;
  for (const Json& r : revisions) {
    const std::string name = kube::Name(r);
    if (!StartsWith(name, prefix) || (!uid.empty() && !kube::IsOwnedBy(r, uid))) continue;
    int64_t revision =
        Field(r, "revision").is_number_integer() ? Field(r, "revision").get<int64_t>() : 0;
    if (revision > best) {
      best = revision;
      hash = name.substr(prefix.size());
    }
  }
  return hash;
}

std::string ConfigDigest(const Json& pod_spec) {
  const Json& containers = Field(pod_spec, "containers");
  for (const Json& c : containers.is_array() ? containers : Json::array()) {
    const Json& env = Field(c, "env");
    for (const Json& e : env.is_array() ? env : Json::array()) {
      if (Field(e, "name") == kConfigDigestEnv && Field(e, "value").is_string()) {
        return Field(e, "value").get<std::string>();
      }
    }
  }
  return "";
}

PodListing PodsToList(State s, const UpgradePolicy& policy) {
  switch (s) {
    case State::kWaitForJobsRequired:
      return policy.wait_for_completion.pod_selector.empty() ? PodListing::kNone
                                                             : PodListing::kWaitForJobs;
    case State::kPodDeletionRequired:
      return PodListing::kAllOnNode;
    case State::kDrainRequired:
      return policy.drain.enable ? PodListing::kDrain : PodListing::kNone;
    case State::kPodRestartRequired:
      return PodListing::kOperands;
    default:
      return PodListing::kNone;
  }
}

std::string PodListSelector(PodListing listing, const UpgradePolicy& policy) {
  switch (listing) {
    case PodListing::kWaitForJobs:
      return policy.wait_for_completion.pod_selector;
    case PodListing::kDrain: {
      // The operator's own pod carries the skip label.
      std::string skip = std::string(kDrainSkipLabel) + "!=true";
      const std::string& s = policy.drain.pod_selector;
      return s.empty() ? skip : s + "," + skip;
    }
    default:
      return "";
  }
}

UpgradePlan PlanUpgrade(const ClusterInput& in) {
  UpgradePlan plan;
  std::vector<const NodeInput*> nodes;
  for (const NodeInput& n : in.nodes) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeInput* a, const NodeInput* b) { return a->name < b->name; });

  // The throttle (k8s-operator-libs' common_manager), on the states as labelled.
  const int64_t total = static_cast<int64_t>(nodes.size());
  int64_t idle = 0;  // no state, upgrade-done or upgrade-required
  int64_t unavailable = 0;
  for (const NodeInput* n : nodes) {
    auto it = n->labels.find(kStateLabel);
    State s = ParseState(it == n->labels.end() ? "" : it->second);
    switch (s) {
      case State::kUnknown:
      case State::kUpgradeDone:
      case State::kUpgradeRequired:
        ++idle;
        break;
      default:
        break;
    }
    if (s == State::kUpgradeDone) ++plan.counts.done;
    if (s == State::kUpgradeFailed) ++plan.counts.failed;
    if (s == State::kUpgradeRequired) ++plan.counts.pending;
    if (n->unschedulable || !n->ready || s == State::kCordonRequired) ++unavailable;
  }
  const int64_t in_progress = total - idle;  // upgrade-failed included
  plan.counts.in_progress = in_progress - plan.counts.failed;
  Budget budget;
  budget.parallel = in.policy.max_parallel == 0 ? std::numeric_limits<int64_t>::max()
                                                : in.policy.max_parallel - in_progress;
  budget.unavailable = std::max<int64_t>(0, MaxUnavailable(in.policy, total) - unavailable);
  plan.counts.available =
      std::max<int64_t>(0, std::min({budget.parallel, budget.unavailable, plan.counts.pending}));

  for (const NodeInput* n : nodes) {
    NodeAction action;
    action.node = n->name;
    auto it = n->labels.find(kStateLabel);
    NodeStepper(in, *n, budget, action, plan.requeue_at)
        .Step(ParseState(it == n->labels.end() ? "" : it->second));
    if (!action.empty()) plan.actions.push_back(std::move(action));
  }
  return plan;
}

std::string UnixSeconds(TimePoint t) {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
}

}  // namespace gpuop::op::upgrade
