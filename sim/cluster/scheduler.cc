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

constexpr std::string_view kPodClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name";
// Claim keys share the work queue with pod keys; ':' never occurs in a namespace.
constexpr std::string_view kClaimKeyPrefix = "claim:";

const Json& Array(const Json& v) {
  static const Json kEmpty = Json::array();
  return v.is_array() ? v : kEmpty;
}

const Json& PodClaimEntries(const Json& pod) {
  return Array(Member(Member(pod, "spec"), "resourceClaims"));
}

std::string StrOf(const Json& obj, const char* key) {
  const Json& v = Member(obj, key);
  return v.is_string() ? v.get<std::string>() : "";
}

const Json& Allocation(const Json& claim) { return Member(Member(claim, "status"), "allocation"); }

const Json& ReservedFor(const Json& claim) {
  return Array(Member(Member(claim, "status"), "reservedFor"));
}

uint64_t VersionNumber(const Json& obj) {
  return ParseUint(kube::ResourceVersion(obj)).value_or(0);
}

// kube's "pod is done": finished, or deleted before it ever ran.
bool PodDone(const Json& pod) {
  return kube::IsPodTerminal(pod) || (kube::IsBeingDeleted(pod) && kube::PodNodeName(pod).empty());
}

// The pod named `name` with `uid`, still using what it reserved.
bool PodHolds(const kube::Informer& pods, const std::string& ns, const std::string& name,
              const std::string& uid) {
  kube::ObjectPtr pod = pods.Get(kube::MakeKey(ns, name));
  return pod && kube::Uid(*pod) == uid && !PodDone(*pod);
}

// The pod that owns a claim made from a template (null when none).
const kube::OwnerReference* PodOwner(const std::vector<kube::OwnerReference>& refs) {
  for (const auto& r : refs) {
    if (r.controller && r.kind == "Pod" && r.api_version == "v1") return &r;
  }
  return nullptr;
}

bool NodeSelectorMatches(const Json& selector, const Json& node) {
  for (const auto& term : Array(Member(selector, "nodeSelectorTerms"))) {
    if (NodeSelectorTermMatches(term, node)) return true;
  }
  return false;
}

// kube-scheduler's FitError: "0/<n> nodes are available: <why>." and what
// preemption could do. `why` is a PreFilter message, or else the histogram of
// the nodes' reasons ("<count> <reason>" strings, sorted as strings).
std::string FitErrorMessage(const Json& pod, size_t total_nodes, const std::string& prefilter,
                            const std::map<std::string, int>& reasons,
                            const std::map<std::string, int>& preemption) {
  auto histogram = [](const std::map<std::string, int>& counts) {
    std::vector<std::string> parts;
    for (const auto& [reason, count] : counts)
      parts.push_back(std::to_string(count) + " " + reason);
    std::sort(parts.begin(), parts.end());
    return Join(parts, ", ");
  };
  const std::string total = std::to_string(total_nodes);
  std::string message = "0/" + total + " nodes are available: " +
                        (prefilter.empty() ? histogram(reasons) : prefilter) + ".";
  const Json& policy = Member(Member(pod, "spec"), "preemptionPolicy");
  if (policy.is_string() && policy.get<std::string>() == "Never") {
    message += " preemption: not eligible due to preemptionPolicy=Never.";
  } else {
    message += " preemption: 0/" + total + " nodes are available: " + histogram(preemption) + ".";
  }
  return message;
}

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

FilterResult FilterNode(const Json& pod, const NodeUsage& n, DraState* dra) {
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
  // DynamicResources; like kube, a node stops at the first filter it fails.
  if (dra == nullptr || !out.reasons.empty()) return out;
  bool allocate = false;
  for (const Json* claim : dra->claims) {
    const Json& allocation = Allocation(*claim);
    if (!allocation.is_object()) {
      allocate = true;
      continue;
    }
    const Json& selector = Member(allocation, "nodeSelector");
    if (selector.is_object() && !NodeSelectorMatches(selector, node)) {
      out.reasons.push_back("resourceclaim not available on the node");
      out.unresolvable = true;
      return out;
    }
  }
  out.allocations.resize(dra->claims.size());
  if (!allocate) return out;
  const std::string name = kube::Name(node);
  static const std::vector<const Json*> kNoSlices;
  auto slices = dra->slices.find(name);
  auto allocated = dra->allocator->Allocate(
      dra->claims, dra->classes, name, slices == dra->slices.end() ? kNoSlices : slices->second,
      dra->in_use);
  if (!allocated.ok()) {
    out.reasons.push_back("cannot allocate all claims");
    out.unresolvable = true;
    out.dra_detail = allocated.status().message();
    return out;
  }
  out.allocations = std::move(allocated).value();
  return out;
}

ScheduleResult ScheduleOne(const Json& pod, const std::vector<NodeUsage>& nodes, DraState* dra) {
  ScheduleResult out;
  if (nodes.empty()) {
    out.message = "no nodes available to schedule pods";
    return out;
  }
  // DynamicResources' PreFilter: claims that cannot be used anywhere.
  if (dra != nullptr) {
    std::string unusable = dra->unusable;
    if (unusable.empty()) {
      Status checked = dra->allocator->Check(dra->claims, dra->classes);
      if (!checked.ok()) unusable = checked.message();
    }
    if (!unusable.empty()) {
      out.message = FitErrorMessage(
          pod, nodes.size(), unusable, {},
          {{"Preemption is not helpful for scheduling", static_cast<int>(nodes.size())}});
      return out;
    }
  }
  const ResourceList want = PodRequests(pod);
  std::map<std::string, int> reasons, preemption;
  const NodeUsage* best = nullptr;
  int64_t best_score = -1;
  for (const auto& n : nodes) {
    FilterResult f = FilterNode(pod, n, dra);
    if (f.reasons.empty()) {
      const int64_t score = Score(want, n);
      if (best == nullptr || score > best_score ||
          (score == best_score && kube::Name(*n.node) < kube::Name(*best->node))) {
        best = &n;
        best_score = score;
        out.allocations = std::move(f.allocations);
      }
      continue;
    }
    if (out.dra_detail.empty()) out.dra_detail = f.dra_detail;
    for (const auto& r : f.reasons) ++reasons[r];
    ++preemption[f.unresolvable ? "Preemption is not helpful for scheduling"
                                : "No preemption victims found for incoming pod"];
  }
  if (best != nullptr) {
    out.node = kube::Name(*best->node);
    out.dra_detail.clear();
    return out;
  }
  out.allocations.clear();
  out.message = FitErrorMessage(pod, nodes.size(), "", reasons, preemption);
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
  s->claims_ = &s->factory_->For(kResourceClaims);
  s->classes_ = &s->factory_->For(kDeviceClasses);
  s->slices_ = &s->factory_->For(kResourceSlices);
  kube::EventRecorderOptions eo;
  eo.component = s->options_.scheduler_name;
  s->events_ = std::make_unique<kube::EventRecorder>(client, eo);
  Scheduler* self = s.get();
  s->controller_ = std::make_unique<kube::Controller>(
      "scheduler", kube::WorkQueueOptions{"scheduler", {}}, 1,
      [self](const std::string& key) { return self->Reconcile(key); });
  s->controller_->RequireSynced(*s->pods_);
  s->controller_->RequireSynced(*s->nodes_);
  for (kube::Informer* i : {s->claims_, s->classes_, s->slices_}) s->controller_->RequireSynced(*i);

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
    if (!PodDone(*old) && PodDone(*p)) self->EnqueueClaimsOf(*p);
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
      const std::string prefix = kube::Uid(*p) + "/";
      auto& made = self->template_claims_;
      for (auto it = made.lower_bound(prefix); it != made.end() && StartsWith(it->first, prefix);) {
        it = made.erase(it);
      }
    }
    if (!kube::PodNodeName(*p).empty()) self->EnqueuePending();
    self->EnqueueClaimsOf(*p);
  };
  s->pod_handler_ = s->pods_->AddEventHandler(std::move(pods));

  kube::EventHandler nodes;
  nodes.on_add = [self](const kube::ObjectPtr&) { self->EnqueuePending(); };
  nodes.on_update = [self](const kube::ObjectPtr& old, const kube::ObjectPtr& n) {
    if (SchedulingState(*old) != SchedulingState(*n)) self->EnqueuePending();
  };
  s->node_handler_ = s->nodes_->AddEventHandler(std::move(nodes));

  // A claim the cache shows at (or past) the version written is no longer assumed.
  auto claim_seen = [self](const Json& c) {
    std::lock_guard lock(self->mu_);
    auto it = self->assumed_claims_.find(kube::KeyOf(c));
    if (it != self->assumed_claims_.end() && VersionNumber(c) >= VersionNumber(*it->second)) {
      self->assumed_claims_.erase(it);
    }
  };
  kube::EventHandler claims;
  claims.on_add = [self, claim_seen](const kube::ObjectPtr& c) {
    claim_seen(*c);
    self->controller_->Enqueue(std::string(kClaimKeyPrefix) + kube::KeyOf(*c));
    self->EnqueuePending();  // a pod may be waiting for it
  };
  claims.on_update = [self, claim_seen](const kube::ObjectPtr& old, const kube::ObjectPtr& c) {
    claim_seen(*c);
    self->controller_->Enqueue(std::string(kClaimKeyPrefix) + kube::KeyOf(*c));
    if (Allocation(*old).is_object() && !Allocation(*c).is_object()) self->EnqueuePending();
  };
  claims.on_delete = [self](const kube::ObjectPtr& c) {
    {
      std::lock_guard lock(self->mu_);
      self->assumed_claims_.erase(kube::KeyOf(*c));
    }
    if (Allocation(*c).is_object()) self->EnqueuePending();
  };
  s->claim_handler_ = s->claims_->AddEventHandler(std::move(claims));
  // New devices or classes may let a pending pod in.
  auto devices_changed = [self] {
    kube::EventHandler h;
    h.on_add = [self](const kube::ObjectPtr&) { self->EnqueuePending(); };
    h.on_update = [self](const kube::ObjectPtr&, const kube::ObjectPtr&) {
      self->EnqueuePending();
    };
    h.on_delete = [self](const kube::ObjectPtr&) { self->EnqueuePending(); };
    return h;
  };
  s->class_handler_ = s->classes_->AddEventHandler(devices_changed());
  s->slice_handler_ = s->slices_->AddEventHandler(devices_changed());

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
  for (auto [informer, handler] :
       {std::pair{pods_, &pod_handler_}, std::pair{nodes_, &node_handler_},
        std::pair{claims_, &claim_handler_}, std::pair{classes_, &class_handler_},
        std::pair{slices_, &slice_handler_}}) {
    if (informer != nullptr && *handler != 0) informer->RemoveEventHandler(*handler);
    *handler = 0;
  }
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
  if (StartsWith(key, kClaimKeyPrefix)) return ReconcileClaim(key.substr(kClaimKeyPrefix.size()));
  kube::ObjectPtr pod = pods_->Get(key);
  if (!pod || !IsPending(*pod, options_.scheduler_name)) return kube::ReconcileResult::Ok();
  {
    std::lock_guard lock(mu_);
    if (assumed_.count(key) > 0) return kube::ReconcileResult::Ok();
  }
  std::vector<kube::ObjectPtr> keep;
  DraState dra;
  const bool has_claims = !PodClaimEntries(*pod).empty();
  if (has_claims) {
    Status prepared = PrepareDra(*pod, &dra, &keep);
    if (!prepared.ok()) return kube::ReconcileResult::Error(prepared.Annotate("pod " + key));
  }
  ScheduleResult decision = ScheduleOne(*pod, Usage(&keep), has_claims ? &dra : nullptr);
  const std::string ns = kube::Namespace(*pod), name = kube::Name(*pod);
  if (decision.node.empty()) {
    ++unschedulable_;
    if (decision.dra_detail.empty()) {
      LogInfo("pod unschedulable", {{"pod", key}, {"reason", decision.message}});
    } else {
      LogInfo("pod unschedulable",
              {{"pod", key}, {"reason", decision.message}, {"claims", decision.dra_detail}});
    }
    events_->Event(kube::ReferenceTo(*pod, &res::kPods), kube::EventType::kWarning,
                   "FailedScheduling", decision.message);
    Status st = MarkUnschedulable(*pod, decision.message);
    if (!st.ok()) return kube::ReconcileResult::Error(st.Annotate("pod " + key));
    return kube::ReconcileResult::Ok();  // tried again when nodes or pods change
  }
  // The claims first: a pod bound without its allocation would never start.
  if (has_claims) {
    Status reserved = ReserveClaims(*pod, dra, decision.allocations);
    if (!reserved.ok()) return kube::ReconcileResult::Error(reserved.Annotate("pod " + key));
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

// --- DRA ---

kube::ObjectPtr Scheduler::Claim(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    if (auto it = assumed_claims_.find(key); it != assumed_claims_.end()) return it->second;
  }
  return claims_->Get(key);
}

Result<std::string> Scheduler::ClaimFromTemplate(const Json& pod, const Json& entry,
                                                 std::vector<kube::ObjectPtr>* keep) {
  const std::string ns = kube::Namespace(pod), uid = kube::Uid(pod);
  const std::string entry_name = StrOf(entry, "name");
  const std::string template_name = StrOf(entry, "resourceClaimTemplateName");
  for (const auto& st : Array(Member(Member(pod, "status"), "resourceClaimStatuses"))) {
    if (StrOf(st, "name") == entry_name && !StrOf(st, "resourceClaimName").empty()) {
      return StrOf(st, "resourceClaimName");
    }
  }
  {
    std::lock_guard lock(mu_);
    if (auto it = template_claims_.find(uid + "/" + entry_name); it != template_claims_.end()) {
      return it->second;
    }
  }
  // Made before a restart, or the pod status write was lost: the claim the pod owns.
  std::string name;
  for (const auto& c : claims_->List()) {
    if (kube::Namespace(*c) == ns && kube::IsOwnedBy(*c, uid) &&
        kube::Annotation(*c, kPodClaimNameAnnotation) == entry_name) {
      name = kube::Name(*c);
    }
  }
  if (name.empty()) {
    auto tmpl = client_.Get(kResourceClaimTemplates, ns, template_name);
    if (!tmpl.ok()) {
      if (kube::IsNotFound(tmpl.status())) {
        return NotFound("resourceclaimtemplate \"" + template_name + "\" not found");
      }
      return tmpl.status();
    }
    const Json& meta = Member(Member(*tmpl, "spec"), "metadata");
    Json annotations =
        Member(meta, "annotations").is_object() ? Member(meta, "annotations") : Json::object();
    annotations[std::string(kPodClaimNameAnnotation)] = entry_name;
    Json claim = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceClaim"},
                  {"metadata",
                   {{"generateName", kube::Name(pod) + "-" + entry_name + "-"},
                    {"namespace", ns},
                    {"annotations", annotations},
                    {"ownerReferences", Json::array({{{"apiVersion", "v1"},
                                                      {"kind", "Pod"},
                                                      {"name", kube::Name(pod)},
                                                      {"uid", uid},
                                                      {"controller", true},
                                                      {"blockOwnerDeletion", true}}})}}},
                  {"spec", Member(Member(*tmpl, "spec"), "spec")}};
    if (Member(meta, "labels").is_object()) claim["metadata"]["labels"] = Member(meta, "labels");
    auto created = client_.Create(kResourceClaims, ns, claim);
    if (!created.ok()) {
      return created.status().Annotate("creating the claim of pod entry " + entry_name +
                                       " from resourceclaimtemplate " + template_name);
    }
    name = kube::Name(*created);
    auto stored = std::make_shared<const Json>(std::move(created).value());
    keep->push_back(stored);
    std::lock_guard lock(mu_);
    assumed_claims_[kube::MakeKey(ns, name)] = stored;
    LogInfo("resourceclaim created",
            {{"pod", kube::KeyOf(pod)}, {"claim", name}, {"template", template_name}});
  }
  {
    std::lock_guard lock(mu_);
    template_claims_[uid + "/" + entry_name] = name;
  }
  auto updated = kube::UpdateWithRetry(
      client_, res::kPods, ns, kube::Name(pod),
      [&](Json& p) {
        if (kube::Uid(p) != uid) return false;
        Json& statuses = p["status"]["resourceClaimStatuses"];
        if (!statuses.is_array()) statuses = Json::array();
        for (const auto& st : statuses) {
          if (StrOf(st, "name") == entry_name) return false;
        }
        statuses.push_back({{"name", entry_name}, {"resourceClaimName", name}});
        return true;
      },
      /*status_subresource=*/true);
  if (!updated.ok() && !kube::IsNotFound(updated.status())) {
    return updated.status().Annotate("recording resourceclaim " + name + " in the pod's status");
  }
  return name;
}

Status Scheduler::PrepareDra(const Json& pod, DraState* dra, std::vector<kube::ObjectPtr>* keep) {
  dra->allocator = &allocator_;
  const std::string ns = kube::Namespace(pod);
  std::set<std::string> own;
  for (const auto& entry : PodClaimEntries(pod)) {
    std::string name = StrOf(entry, "resourceClaimName");
    if (name.empty()) {
      auto made = ClaimFromTemplate(pod, entry, keep);
      if (!made.ok()) {
        if (made.status().code() != StatusCode::kNotFound) return made.status();
        dra->unusable = made.status().message();
        return Status::Ok();
      }
      name = *made;
    }
    const std::string key = kube::MakeKey(ns, name);
    kube::ObjectPtr claim = Claim(key);
    if (!claim) {
      dra->unusable = "resourceclaim \"" + name + "\" not found";
      return Status::Ok();
    }
    if (kube::IsBeingDeleted(*claim)) {
      dra->unusable = "resourceclaim \"" + name + "\" is being deleted";
      return Status::Ok();
    }
    keep->push_back(claim);
    dra->claims.push_back(claim.get());
    own.insert(key);
  }
  for (const auto& c : classes_->List()) {
    keep->push_back(c);
    dra->classes[kube::Name(*c)] = c.get();
  }
  for (const auto& s : slices_->List()) {
    keep->push_back(s);
    const std::string node = StrOf(Member(*s, "spec"), "nodeName");
    if (!node.empty()) dra->slices[node].push_back(s.get());
  }
  // What other claims hold, the ones written but not cached yet included.
  std::map<std::string, kube::ObjectPtr> claims;
  for (const auto& c : claims_->List()) claims[kube::KeyOf(*c)] = c;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, c] : assumed_claims_) claims[key] = c;
  }
  for (const auto& [key, c] : claims) {
    if (own.count(key) > 0) continue;
    for (auto& d : AllocatedDevices(*c)) dra->in_use.insert(std::move(d));
  }
  return Status::Ok();
}

Status Scheduler::ReserveClaims(const Json& pod, const DraState& dra,
                                const std::vector<Json>& allocations) {
  const Json consumer = {{"resource", "pods"}, {"name", kube::Name(pod)}, {"uid", kube::Uid(pod)}};
  for (size_t i = 0; i < dra.claims.size(); ++i) {
    const Json& claim = *dra.claims[i];
    const Json& allocation = i < allocations.size() ? allocations[i] : Json();
    const std::string ns = kube::Namespace(claim), name = kube::Name(claim);
    bool raced = false;
    auto written = kube::UpdateWithRetry(
        client_, kResourceClaims, ns, name,
        [&](Json& c) {
          raced = kube::Uid(c) != kube::Uid(claim) ||
                  (!allocation.is_null() && Allocation(c).is_object());
          if (raced) return false;
          bool changed = false;
          if (!allocation.is_null()) {
            c["status"]["allocation"] = allocation;
            changed = true;
          }
          Json& reserved = c["status"]["reservedFor"];
          if (!reserved.is_array()) reserved = Json::array();
          for (const auto& r : reserved) {
            if (StrOf(r, "uid") == kube::Uid(pod)) return changed;
          }
          reserved.push_back(consumer);
          return true;
        },
        /*status_subresource=*/true);
    if (!written.ok()) {
      return written.status().Annotate("writing the allocation of resourceclaim " + ns + "/" +
                                       name);
    }
    if (raced) {
      return Aborted("resourceclaim " + ns + "/" + name +
                     " was replaced or allocated meanwhile; scheduling the pod again");
    }
    std::lock_guard lock(mu_);
    assumed_claims_[kube::MakeKey(ns, name)] = std::make_shared<const Json>(std::move(*written));
  }
  return Status::Ok();
}

void Scheduler::EnqueueClaimsOf(const Json& pod) {
  const std::string uid = kube::Uid(pod);
  for (const auto& c : claims_->List()) {
    bool related = kube::IsOwnedBy(*c, uid);
    for (const auto& r : ReservedFor(*c)) related |= StrOf(r, "uid") == uid;
    if (related) controller_->Enqueue(std::string(kClaimKeyPrefix) + kube::KeyOf(*c));
  }
}

// What kube's resourceclaim controller does for a claim: reservations of pods
// that are gone or done are dropped, a claim left unreserved is deallocated,
// and a claim made for a pod that is gone or done is deleted.
kube::ReconcileResult Scheduler::ReconcileClaim(const std::string& key) {
  kube::ObjectPtr claim = Claim(key);
  if (!claim) return kube::ReconcileResult::Ok();
  const auto [ns, name] = kube::SplitKey(key);
  auto holds = [&](const Json& r) {
    return StrOf(r, "resource") != "pods" || !StrOf(r, "apiGroup").empty() ||
           PodHolds(*pods_, ns, StrOf(r, "name"), StrOf(r, "uid"));
  };
  const Json& reserved = ReservedFor(*claim);
  if (!std::all_of(reserved.begin(), reserved.end(), holds)) {
    auto updated = kube::UpdateWithRetry(
        client_, kResourceClaims, ns, name,
        [&](Json& c) {
          Json kept = Json::array();
          for (const auto& r : ReservedFor(c)) {
            if (holds(r)) kept.push_back(r);
          }
          if (kept.size() == ReservedFor(c).size()) return false;
          if (kept.empty()) {
            c["status"].erase("reservedFor");
            c["status"].erase("allocation");  // nobody uses it: deallocated
          } else {
            c["status"]["reservedFor"] = kept;
          }
          return true;
        },
        /*status_subresource=*/true);
    if (!updated.ok()) {
      if (kube::IsNotFound(updated.status())) return kube::ReconcileResult::Ok();
      return kube::ReconcileResult::Error(updated.status().Annotate("resourceclaim " + key));
    }
    claim = std::make_shared<const Json>(std::move(updated).value());
    {
      std::lock_guard lock(mu_);
      assumed_claims_[key] = claim;
    }
    LogInfo("resourceclaim released",
            {{"claim", key}, {"allocated", Allocation(*claim).is_object()}});
  }
  if (!ReservedFor(*claim).empty()) return kube::ReconcileResult::Ok();
  const std::vector<kube::OwnerReference> owners = kube::OwnerReferences(*claim);
  const kube::OwnerReference* owner = PodOwner(owners);
  if (owner == nullptr || PodHolds(*pods_, ns, owner->name, owner->uid)) {
    return kube::ReconcileResult::Ok();
  }
  kube::DeleteOptions d;
  d.precondition_uid = kube::Uid(*claim);
  Status deleted = client_.Delete(kResourceClaims, ns, name, d);
  if (!deleted.ok() && !kube::IsNotFound(deleted) && !kube::IsConflict(deleted)) {
    return kube::ReconcileResult::Error(deleted.Annotate("deleting resourceclaim " + key));
  }
  LogInfo("resourceclaim deleted", {{"claim", key}, {"pod", owner->name}});
  return kube::ReconcileResult::Ok();
}

}  // namespace gpuop::simcluster
