#include "sim/cluster/scheduler.h"

#include <algorithm>
#include <set>
#include <utility>

#include "base/log.h"
#include "base/strings.h"
#include "kube/object.h"

namespace gpuop::simcluster {
namespace {

namespace res = kube::resources;

constexpr std::string_view kUnschedulableTaint = "node.kubernetes.io/unschedulable";
constexpr std::string_view kNotReadyTaint = "node.kubernetes.io/not-ready";

bool IsScalarResource(const std::string& name) {
  return name.find('/') != std::string::npos || StartsWith(name, "hugepages-");
}

int64_t Get(const ResourceList& list, const std::string& name) {
  auto it = list.find(name);
  return it == list.end() ? 0 : it->second;
}

ResourceList Allocatable(const Json& node) {
  ResourceList out;
  const Json& alloc = Member(Member(node, "status"), "allocatable");
  if (!alloc.is_object()) return out;
  for (const auto& [name, q] : alloc.items()) {
    if (auto v = ParseQuantityMilli(q)) out[name] = *v;
  }
  return out;
}

// Least allocated cpu and memory after placing the pod, 0..100.
int64_t Score(const ResourceList& pod, const NodeUsage& n) {
  const ResourceList alloc = Allocatable(*n.node);
  int64_t total = 0;
  for (const char* r : {"cpu", "memory"}) {
    const int64_t a = Get(alloc, r);
    const int64_t used = Get(n.requested, r) + Get(pod, r);
    if (a > 0 && used <= a) total += (a - used) * 100 / a;
  }
  return total / 2;
}

bool IsPending(const Json& pod, const std::string& scheduler_name) {
  if (!kube::PodNodeName(pod).empty() || !IsPodActive(pod)) return false;
  const Json& name = Member(Member(pod, "spec"), "schedulerName");
  const std::string want = name.is_string() ? name.get<std::string>() : "";
  return want.empty() || want == scheduler_name;
}

// What about a node can change where pods fit; heartbeats change none of it.
std::string SchedulingState(const Json& node) {
  Json state = {{"labels", Member(Member(node, "metadata"), "labels")},
                {"taints", Member(Member(node, "spec"), "taints")},
                {"unschedulable", kube::IsUnschedulable(node)},
                {"allocatable", Member(Member(node, "status"), "allocatable")},
                {"ready", kube::IsNodeReady(node)}};
  return state.dump();
}

}  // namespace

FilterResult FilterNode(const Json& pod, const NodeUsage& n) {
  FilterResult out;
  const Json& node = *n.node;
  const Json& spec = Member(pod, "spec");
  const Json& tolerations = Member(spec, "tolerations");
  // NodeUnschedulable
  if (kube::IsUnschedulable(node) &&
      !ToleratesTaint(tolerations, {std::string(kUnschedulableTaint), "", "NoSchedule"})) {
    out.reasons.push_back("node(s) were unschedulable");
    out.unresolvable = true;
    return out;
  }
  // TaintToleration (a NotReady node carries the not-ready taint on a real cluster)
  std::vector<kube::Taint> taints = kube::Taints(node);
  if (!kube::IsNodeReady(node) && !kube::HasTaint(node, kNotReadyTaint)) {
    taints.push_back({std::string(kNotReadyTaint), "", "NoSchedule"});
  }
  if (auto t = FirstUntoleratedTaint(tolerations, taints, {"NoSchedule", "NoExecute"})) {
    out.reasons.push_back("node(s) had untolerated taint {" + t->key + ": " + t->value + "}");
    out.unresolvable = true;
    return out;
  }
  // NodeAffinity
  if (!PodMatchesNodeSelectorAndAffinity(spec, node)) {
    out.reasons.push_back("node(s) didn't match Pod's node affinity/selector");
    out.unresolvable = true;
    return out;
  }
  // NodeResourcesFit
  const ResourceList alloc = Allocatable(node);
  if (n.pods + 1 > Get(alloc, "pods") / 1000) out.reasons.push_back("Too many pods");
  const ResourceList want = PodRequests(pod);
  for (const char* r : {"cpu", "memory", "ephemeral-storage"}) {
    const int64_t w = Get(want, r);
    if (w > 0 && w > Get(alloc, r) - Get(n.requested, r)) {
      out.reasons.push_back(std::string("Insufficient ") + r);
    }
  }
  for (const auto& [name, w] : want) {
    if (!IsScalarResource(name)) continue;
    if (w > 0 && w > Get(alloc, name) - Get(n.requested, name)) {
      out.reasons.push_back("Insufficient " + name);
    }
  }
  return out;
}

ScheduleResult ScheduleOne(const Json& pod, const std::vector<NodeUsage>& nodes) {
  ScheduleResult out;
  if (nodes.empty()) {
    out.message = "no nodes available to schedule pods";
    return out;
  }
  const ResourceList want = PodRequests(pod);
  std::map<std::string, int> reasons, preemption;
  const NodeUsage* best = nullptr;
  int64_t best_score = -1;
  for (const auto& n : nodes) {
    FilterResult f = FilterNode(pod, n);
    if (f.reasons.empty()) {
      const int64_t score = Score(want, n);
      if (best == nullptr || score > best_score ||
          (score == best_score && kube::Name(*n.node) < kube::Name(*best->node))) {
        best = &n;
        best_score = score;
      }
      continue;
    }
    for (const auto& r : f.reasons) ++reasons[r];
    ++preemption[f.unresolvable ? "Preemption is not helpful for scheduling"
                                : "No preemption victims found for incoming pod"];
  }
  if (best != nullptr) {
    out.node = kube::Name(*best->node);
    return out;
  }
  // kube-scheduler's FitError: "<count> <reason>" strings, sorted as strings.
  auto histogram = [](const std::map<std::string, int>& counts) {
    std::vector<std::string> parts;
    for (const auto& [reason, count] : counts)
      parts.push_back(std::to_string(count) + " " + reason);
    std::sort(parts.begin(), parts.end());
    return Join(parts, ", ");
  };
  const std::string total = std::to_string(nodes.size());
  out.message = "0/" + total + " nodes are available: " + histogram(reasons) + ".";
  const Json& policy = Member(Member(pod, "spec"), "preemptionPolicy");
  if (policy.is_string() && policy.get<std::string>() == "Never") {
    out.message += " preemption: not eligible due to preemptionPolicy=Never.";
  } else {
    out.message +=
        " preemption: 0/" + total + " nodes are available: " + histogram(preemption) + ".";
  }
  return out;
}

// --- Scheduler ---

Scheduler::Scheduler(kube::Client& client, SchedulerOptions options)
    : client_(client), options_(std::move(options)) {}

Scheduler::~Scheduler() { Stop(); }

Result<std::unique_ptr<Scheduler>> Scheduler::Start(kube::Client& client,
                                                    SchedulerOptions options) {
  std::unique_ptr<Scheduler> s(new Scheduler(client, std::move(options)));
  s->factory_ = std::make_unique<kube::SharedInformerFactory>(&client);
  s->pods_ = &s->factory_->For(res::kPods);
  s->nodes_ = &s->factory_->For(res::kNodes);
  kube::EventRecorderOptions eo;
  eo.component = s->options_.scheduler_name;
  s->events_ = std::make_unique<kube::EventRecorder>(client, eo);
  Scheduler* self = s.get();
  s->controller_ = std::make_unique<kube::Controller>(
      "scheduler", kube::WorkQueueOptions{"scheduler", {}}, 1,
      [self](const std::string& key) { return self->Reconcile(key); });
  s->controller_->RequireSynced(*s->pods_);
  s->controller_->RequireSynced(*s->nodes_);

  kube::EventHandler pods;
  pods.on_add = [self](const kube::ObjectPtr& p) {
    if (IsPending(*p, self->options_.scheduler_name)) self->controller_->Enqueue(kube::KeyOf(*p));
  };
  pods.on_update = [self](const kube::ObjectPtr& old, const kube::ObjectPtr& p) {
    const std::string key = kube::KeyOf(*p);
    if (!kube::PodNodeName(*p).empty()) {
      std::lock_guard lock(self->mu_);
      self->assumed_.erase(key);
    }
    // A pod leaving a node (finished) frees what it held there.
    if (!kube::PodNodeName(*old).empty() && !kube::IsPodTerminal(*old) && kube::IsPodTerminal(*p)) {
      self->EnqueuePending();
    }
    // Status writes (our own PodScheduled=False included) change nothing.
    if (IsPending(*p, self->options_.scheduler_name) &&
        Member(*old, "spec") != Member(*p, "spec")) {
      self->controller_->Enqueue(key);
    }
  };
  pods.on_delete = [self](const kube::ObjectPtr& p) {
    {
      std::lock_guard lock(self->mu_);
      self->assumed_.erase(kube::KeyOf(*p));
    }
    if (!kube::PodNodeName(*p).empty()) self->EnqueuePending();
  };
  s->pod_handler_ = s->pods_->AddEventHandler(std::move(pods));

  kube::EventHandler nodes;
  nodes.on_add = [self](const kube::ObjectPtr&) { self->EnqueuePending(); };
  nodes.on_update = [self](const kube::ObjectPtr& old, const kube::ObjectPtr& n) {
    if (SchedulingState(*old) != SchedulingState(*n)) self->EnqueuePending();
  };
  s->node_handler_ = s->nodes_->AddEventHandler(std::move(nodes));

  s->thread_ = std::jthread([self](std::stop_token stop) {
    self->factory_->Start(stop);
    Status st = self->controller_->Run(stop);
    if (!st.ok() && !stop.stop_requested()) LogError("scheduler stopped", {{"error", st}});
    self->factory_->Stop();
  });
  LogInfo("scheduler started", {{"scheduler", s->options_.scheduler_name}});
  return s;
}

void Scheduler::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (pods_ != nullptr && pod_handler_ != 0) pods_->RemoveEventHandler(pod_handler_);
  if (nodes_ != nullptr && node_handler_ != 0) nodes_->RemoveEventHandler(node_handler_);
  pod_handler_ = node_handler_ = 0;
}

bool Scheduler::WaitForSync(std::chrono::milliseconds timeout) {
  return factory_->WaitForCacheSync(timeout);
}

SchedulerStats Scheduler::stats() const {
  return {bound_.load(), unschedulable_.load(), bind_errors_.load()};
}

void Scheduler::EnqueuePending() {
  for (const auto& p : pods_->List()) {
    if (IsPending(*p, options_.scheduler_name)) controller_->Enqueue(kube::KeyOf(*p));
  }
}

std::vector<NodeUsage> Scheduler::Usage(std::vector<kube::ObjectPtr>* keep) {
  std::vector<NodeUsage> out;
  std::map<std::string, Assumed> assumed;
  {
    std::lock_guard lock(mu_);
    assumed = assumed_;
  }
  for (const auto& node : nodes_->List()) {
    keep->push_back(node);
    NodeUsage u;
    u.node = node.get();
    const std::string name = kube::Name(*node);
    std::set<std::string> counted;
    for (const auto& p : pods_->ByIndex(kube::kNodeNameIndex, name)) {
      counted.insert(kube::KeyOf(*p));
      if (kube::IsPodTerminal(*p)) continue;
      ++u.pods;
      for (const auto& [r, v] : PodRequests(*p)) u.requested[r] += v;
    }
    // An assumed pod counts unless the index read above already held it. Asking
    // the cache again instead would race the informer: a binding that lands
    // between the two reads would be in neither, and the node overbooked.
    for (const auto& [key, a] : assumed) {
      if (a.node != name || counted.count(key) > 0) continue;
      ++u.pods;
      for (const auto& [r, v] : a.requests) u.requested[r] += v;
    }
    out.push_back(std::move(u));
  }
  return out;
}

Status Scheduler::MarkUnschedulable(const Json& pod, const std::string& message) {
  kube::Condition c{"PodScheduled", "False", "Unschedulable", message, "", 0};
  auto updated = kube::UpdateWithRetry(
      client_, res::kPods, kube::Namespace(pod), kube::Name(pod),
      [&](Json& obj) {
        if (!kube::PodNodeName(obj).empty()) return false;
        return kube::SetCondition(obj, c, kube::Rfc3339(std::chrono::system_clock::now()));
      },
      /*status_subresource=*/true);
  if (!updated.ok() && !kube::IsNotFound(updated.status())) return updated.status();
  return Status::Ok();
}

kube::ReconcileResult Scheduler::Reconcile(const std::string& key) {
  kube::ObjectPtr pod = pods_->Get(key);
  if (!pod || !IsPending(*pod, options_.scheduler_name)) return kube::ReconcileResult::Ok();
  {
    std::lock_guard lock(mu_);
    if (assumed_.count(key) > 0) return kube::ReconcileResult::Ok();
  }
  std::vector<kube::ObjectPtr> keep;
  ScheduleResult decision = ScheduleOne(*pod, Usage(&keep));
  const std::string ns = kube::Namespace(*pod), name = kube::Name(*pod);
  if (decision.node.empty()) {
    ++unschedulable_;
    LogInfo("pod unschedulable", {{"pod", key}, {"reason", decision.message}});
    events_->Event(kube::ReferenceTo(*pod, &res::kPods), kube::EventType::kWarning,
                   "FailedScheduling", decision.message);
    Status st = MarkUnschedulable(*pod, decision.message);
    if (!st.ok()) return kube::ReconcileResult::Error(st.Annotate("pod " + key));
    return kube::ReconcileResult::Ok();  // tried again when nodes or pods change
  }
  Json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", name}, {"namespace", ns}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", decision.node}}}};
  auto posted =
      client_.Raw("POST", res::kPods.Path(ns, name, "binding"), binding.dump(), "application/json");
  if (!posted.ok()) {
    if (kube::IsConflict(posted.status()) || kube::IsAlreadyExists(posted.status()) ||
        kube::IsNotFound(posted.status())) {
      return kube::ReconcileResult::Ok();  // bound by someone else meanwhile, or gone
    }
    ++bind_errors_;
    return kube::ReconcileResult::Error(
        posted.status().Annotate("binding pod " + key + " to node " + decision.node));
  }
  {
    std::lock_guard lock(mu_);
    assumed_[key] = Assumed{decision.node, PodRequests(*pod)};
  }
  ++bound_;
  LogInfo("pod bound", {{"pod", key}, {"node", decision.node}});
  events_->Event(kube::ReferenceTo(*pod, &res::kPods), kube::EventType::kNormal, "Scheduled",
                 "Successfully assigned " + key + " to " + decision.node);
  return kube::ReconcileResult::Ok();
}

}  // namespace gpuop::simcluster
