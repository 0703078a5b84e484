#include "sim/cluster/daemonset_controller.h"

#include <algorithm>
#include <set>
#include <utility>

#include "base/log.h"
#include "base/strings.h"
#include "kube/object.h"

namespace gpuop::simcluster {
namespace {

namespace res = kube::resources;

constexpr const char* kTemplateGenerationAnnotation = "deprecated.daemonset.template.generation";

// The key of the DaemonSet that controls `obj`, if one does.
std::vector<std::string> OwnerDaemonSet(const Json& obj) {
  for (const auto& ref : kube::OwnerReferences(obj)) {
    if (ref.controller && ref.kind == "DaemonSet") {
      return {kube::MakeKey(kube::Namespace(obj), ref.name)};
    }
  }
  return {};
}

bool IsPodUpdated(const Json& pod, const std::string& hash, int64_t generation) {
  auto labels = kube::Labels(pod);
  auto h = labels.find(std::string(kControllerRevisionHashLabel));
  auto g = labels.find(std::string(kPodTemplateGenerationLabel));
  return (!hash.empty() && h != labels.end() && h->second == hash) ||
         (g != labels.end() && g->second == std::to_string(generation));
}

// kube's podByCreationTimestampAndPhase: bound pods first, then oldest, then name.
void SortPods(std::vector<const Json*>& pods) {
  std::sort(pods.begin(), pods.end(), [](const Json* a, const Json* b) {
    const bool ab = !kube::PodNodeName(*a).empty(), bb = !kube::PodNodeName(*b).empty();
    if (ab != bb) return ab;
    auto ta = CreationTime(*a), tb = CreationTime(*b);
    if (ta != tb) return ta < tb;
    return kube::Name(*a) < kube::Name(*b);
  });
}

bool IsRollingUpdate(const Json& ds) {
  const Json& type = Member(Member(Member(ds, "spec"), "updateStrategy"), "type");
  return !type.is_string() || type.get<std::string>() != "OnDelete";
}

int64_t MinReadySeconds(const Json& ds) {
  const Json& v = Member(Member(ds, "spec"), "minReadySeconds");
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

}  // namespace

Json DaemonPodTolerations(const Json& pod_spec) {
  Json out = Member(pod_spec, "tolerations");
  if (!out.is_array()) out = Json::array();
  auto add = [&](const char* key, const char* effect) {
    for (const auto& t : out) {
      if (t.is_object() && t.value("key", "") == key && t.value("effect", "") == effect &&
          t.value("operator", "") == "Exists") {
        return;
      }
    }
    out.push_back({{"key", key}, {"operator", "Exists"}, {"effect", effect}});
  };
  add("node.kubernetes.io/not-ready", "NoExecute");
  add("node.kubernetes.io/unreachable", "NoExecute");
  add("node.kubernetes.io/disk-pressure", "NoSchedule");
  add("node.kubernetes.io/memory-pressure", "NoSchedule");
  add("node.kubernetes.io/pid-pressure", "NoSchedule");
  add("node.kubernetes.io/unschedulable", "NoSchedule");
  const Json& host_network = Member(pod_spec, "hostNetwork");
  if (host_network.is_boolean() && host_network.get<bool>()) {
    add("node.kubernetes.io/network-unavailable", "NoSchedule");
  }
  return out;
}

ShouldRun NodeShouldRun(const Json& ds, const Json& node) {
  const Json& spec = Member(Member(Member(ds, "spec"), "template"), "spec");
  const Json& node_name = Member(spec, "nodeName");
  if (node_name.is_string() && !node_name.get<std::string>().empty() &&
      node_name.get<std::string>() != kube::Name(node)) {
    return {};
  }
  if (!PodMatchesNodeSelectorAndAffinity(spec, node)) return {};
  const Json tolerations = DaemonPodTolerations(spec);
  const auto taints = kube::Taints(node);
  if (FirstUntoleratedTaint(tolerations, taints, {"NoSchedule", "NoExecute"})) {
    return {false, !FirstUntoleratedTaint(tolerations, taints, {"NoExecute"}).has_value()};
  }
  return {true, true};
}

int64_t TemplateGeneration(const Json& ds) {
  if (auto a = kube::Annotation(ds, kTemplateGenerationAnnotation)) {
    if (auto v = ParseUint(*a)) return static_cast<int64_t>(*v);
  }
  return kube::Generation(ds);
}

Json DaemonPodFor(const Json& ds, const std::string& node, const std::string& hash) {
  const Json& tmpl = Member(Member(ds, "spec"), "template");
  Json labels = Member(Member(tmpl, "metadata"), "labels");
  if (!labels.is_object()) labels = Json::object();
  labels[std::string(kControllerRevisionHashLabel)] = hash;
  labels[std::string(kPodTemplateGenerationLabel)] = std::to_string(TemplateGeneration(ds));
  Json meta = {{"generateName", kube::Name(ds) + "-"},
               {"namespace", kube::Namespace(ds)},
               {"labels", std::move(labels)},
               {"ownerReferences", Json::array({ControllerRef(ds, "apps/v1", "DaemonSet")})}};
  const Json& annotations = Member(Member(tmpl, "metadata"), "annotations");
  if (annotations.is_object() && !annotations.empty()) meta["annotations"] = annotations;
  Json spec = Member(tmpl, "spec");
  if (!spec.is_object()) spec = Json::object();
  spec["tolerations"] = DaemonPodTolerations(spec);
  // kube's ReplaceDaemonSetPodNodeNameNodeAffinity: the scheduler binds the
  // pod to exactly this node.
  spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
      {"nodeSelectorTerms",
       Json::array({{{"matchFields", Json::array({{{"key", "metadata.name"},
                                                   {"operator", "In"},
                                                   {"values", Json::array({node})}}})}}})}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", std::move(meta)},
          {"spec", std::move(spec)}};
}

std::string DaemonPodTargetNode(const Json& pod) {
  std::string bound = kube::PodNodeName(pod);
  if (!bound.empty()) return bound;
  const Json& terms = Member(Member(Member(Member(Member(pod, "spec"), "affinity"), "nodeAffinity"),
                                    "requiredDuringSchedulingIgnoredDuringExecution"),
                             "nodeSelectorTerms");
  if (!terms.is_array()) return "";
  for (const auto& term : terms) {
    const Json& fields = Member(term, "matchFields");
    if (!fields.is_array()) continue;
    for (const auto& f : fields) {
      const Json& values = Member(f, "values");
      if (f.value("key", "") == "metadata.name" && f.value("operator", "") == "In" &&
          values.is_array() && values.size() == 1 && values[0].is_string()) {
        return values[0].get<std::string>();
      }
    }
  }
  return "";
}

Json ComputeDaemonSetStatus(const Json& ds, const std::vector<const Json*>& nodes,
                            const NodePods& pods, const std::string& hash,
                            std::chrono::system_clock::time_point now) {
  int64_t desired = 0, current = 0, misscheduled = 0, ready = 0, available = 0, updated = 0;
  const int64_t generation = TemplateGeneration(ds);
  for (const Json* node : nodes) {
    auto it = pods.find(kube::Name(*node));
    const bool scheduled = it != pods.end() && !it->second.empty();
    if (NodeShouldRun(ds, *node).should_run) {
      ++desired;
      if (!scheduled) continue;
      ++current;
      std::vector<const Json*> sorted = it->second;
      SortPods(sorted);
      const Json& pod = *sorted.front();
      if (kube::IsPodReady(pod)) {
        ++ready;
        if (IsPodAvailable(pod, MinReadySeconds(ds), now)) ++available;
      }
      if (IsPodUpdated(pod, hash, generation)) ++updated;
    } else if (scheduled) {
      ++misscheduled;
    }
  }
  return {{"desiredNumberScheduled", desired},  {"currentNumberScheduled", current},
          {"numberMisscheduled", misscheduled}, {"numberReady", ready},
          {"numberAvailable", available},       {"numberUnavailable", desired - available},
          {"updatedNumberScheduled", updated}};
}

std::vector<const Json*> RollingUpdateDeletions(const Json& ds,
                                                const std::vector<const Json*>& nodes,
                                                const NodePods& pods, const std::string& hash,
                                                std::chrono::system_clock::time_point now) {
  int64_t desired = 0;
  for (const Json* node : nodes) {
    if (NodeShouldRun(ds, *node).should_run) ++desired;
  }
  const Json& ru = Member(Member(Member(ds, "spec"), "updateStrategy"), "rollingUpdate");
  int64_t max_unavailable = ResolveIntOrPercent(Member(ru, "maxUnavailable"), desired, true, 1);
  if (max_unavailable <= 0) max_unavailable = 1;  // maxSurge is 0: one at a time at least
  const int64_t generation = TemplateGeneration(ds);
  const int64_t min_ready = MinReadySeconds(ds);
  int64_t unavailable = 0;
  std::vector<const Json*> replace, candidates;
  for (const auto& [node, node_pods] : pods) {  // by node name: deterministic
    const Json* fresh = nullptr;
    const Json* old = nullptr;
    bool ok = true;
    for (const Json* p : node_pods) {
      if (kube::IsBeingDeleted(*p)) continue;
      const Json*& slot = IsPodUpdated(*p, hash, generation) ? fresh : old;
      if (slot != nullptr) ok = false;
      slot = p;
    }
    if (!ok || (fresh == nullptr) == (old == nullptr)) {
      ++unavailable;  // the manage step sorts this node out
    } else if (fresh != nullptr) {
      if (!IsPodAvailable(*fresh, min_ready, now)) ++unavailable;
    } else if (!IsPodAvailable(*old, min_ready, now)) {
      replace.push_back(old);
    } else if (unavailable < max_unavailable) {
      candidates.push_back(old);
    }
  }
  int64_t remaining = std::max<int64_t>(0, max_unavailable - unavailable);
  remaining = std::min<int64_t>(remaining, static_cast<int64_t>(candidates.size()));
  replace.insert(replace.end(), candidates.begin(), candidates.begin() + remaining);
  return replace;
}

// --- DaemonSetController ---

DaemonSetController::DaemonSetController(kube::Client& client, DaemonSetControllerOptions options)
    : client_(client), options_(options) {}

DaemonSetController::~DaemonSetController() { Stop(); }

Result<std::unique_ptr<DaemonSetController>> DaemonSetController::Start(
    kube::Client& client, DaemonSetControllerOptions options) {
  std::unique_ptr<DaemonSetController> c(new DaemonSetController(client, options));
  c->factory_ = std::make_unique<kube::SharedInformerFactory>(&client);
  c->daemonsets_ = &c->factory_->For(res::kDaemonSets);
  c->pods_ = &c->factory_->For(res::kPods);
  c->nodes_ = &c->factory_->For(res::kNodes);
  c->revisions_ = &c->factory_->For(kControllerRevisions);
  GPUOP_RETURN_IF_ERROR(c->pods_->AddIndex(kControllerUidIndex, IndexByControllerUid));
  GPUOP_RETURN_IF_ERROR(c->revisions_->AddIndex(kControllerUidIndex, IndexByControllerUid));
  DaemonSetController* self = c.get();
  c->controller_ = std::make_unique<kube::Controller>(
      "daemonset", kube::WorkQueueOptions{"daemonset", {}}, std::max(1, options.workers),
      [self](const std::string& key) { return self->Reconcile(key); });
  c->controller_->Watch(*c->daemonsets_);
  c->controller_->Watch(*c->pods_, OwnerDaemonSet);
  c->controller_->Watch(*c->revisions_, OwnerDaemonSet);
  c->controller_->RequireSynced(*c->nodes_);
  // Nodes: labels and taints decide where daemon pods go; heartbeats do not.
  kube::EventHandler nodes;
  auto all = [self] {
    for (const auto& key : self->daemonsets_->ListKeys()) self->controller_->Enqueue(key);
  };
  nodes.on_add = [all](const kube::ObjectPtr&) { all(); };
  nodes.on_delete = [all](const kube::ObjectPtr&) { all(); };
  nodes.on_update = [all](const kube::ObjectPtr& old, const kube::ObjectPtr& n) {
    if (kube::Labels(*old) != kube::Labels(*n) || kube::Taints(*old) != kube::Taints(*n)) all();
  };
  c->node_handler_ = c->nodes_->AddEventHandler(std::move(nodes));
  c->thread_ = std::jthread([self](std::stop_token stop) {
    self->factory_->Start(stop);
    Status st = self->controller_->Run(stop);
    if (!st.ok() && !stop.stop_requested())
      LogError("daemonset controller stopped", {{"error", st}});
    self->factory_->Stop();
  });
  LogInfo("daemonset controller started");
  return c;
}

void DaemonSetController::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (nodes_ != nullptr && node_handler_ != 0) nodes_->RemoveEventHandler(node_handler_);
  node_handler_ = 0;
}

bool DaemonSetController::WaitForSync(std::chrono::milliseconds timeout) {
  return factory_->WaitForCacheSync(timeout);
}

Result<std::string> DaemonSetController::SyncHistory(const Json& ds,
                                                     const std::vector<kube::ObjectPtr>& pods) {
  const std::string ns = kube::Namespace(ds), name = kube::Name(ds);
  const Json& collision = Member(Member(ds, "status"), "collisionCount");
  const int64_t collisions = collision.is_number_integer() ? collision.get<int64_t>() : 0;
  const Json& tmpl = Member(Member(ds, "spec"), "template");
  const std::string hash = ComputeHash(
      tmpl, collision.is_number_integer() ? std::optional<int64_t>(collisions) : std::nullopt);
  const std::string rev_name = name + "-" + hash;
  Json patch_template = tmpl;
  patch_template["$patch"] = "replace";
  const Json data = {{"spec", {{"template", patch_template}}}};

  std::vector<kube::ObjectPtr> revs = revisions_->ByIndex(kControllerUidIndex, kube::Uid(ds));
  int64_t max_revision = 0;
  kube::ObjectPtr current;
  for (const auto& r : revs) {
    max_revision = std::max<int64_t>(max_revision, r->value("revision", int64_t{0}));
    if (kube::Name(*r) == rev_name) current = r;
  }
  auto collide = [&]() -> Status {
    Json patch = {{"status", {{"collisionCount", collisions + 1}}}};
    kube::PatchOptions po;
    po.subresource = "status";
    auto st = client_.Patch(res::kDaemonSets, ns, name, kube::PatchType::kMerge, patch, po);
    if (!st.ok()) return st.status();
    return Aborted("ControllerRevision " + ns + "/" + rev_name +
                   " holds another template (hash collision); collisionCount raised to " +
                   std::to_string(collisions + 1));
  };
  if (current) {
    if (Member(*current, "data") != data) return collide();
    const int64_t revision = current->value("revision", int64_t{0});
    if (revision < max_revision) {  // back to an older template: it is the newest now
      Json patch = {{"revision", max_revision + 1}};
      auto st = client_.Patch(kControllerRevisions, ns, rev_name, kube::PatchType::kMerge, patch);
      if (!st.ok())
        return st.status().Annotate("renumbering ControllerRevision " + ns + "/" + rev_name);
    }
  } else {
    Json labels = Member(Member(tmpl, "metadata"), "labels");
    if (!labels.is_object()) labels = Json::object();
    labels[std::string(kControllerRevisionHashLabel)] = hash;
    Json rev = {{"apiVersion", "apps/v1"},
                {"kind", "ControllerRevision"},
                {"metadata",
                 {{"name", rev_name},
                  {"namespace", ns},
                  {"labels", labels},
                  {"ownerReferences", Json::array({ControllerRef(ds, "apps/v1", "DaemonSet")})}}},
                {"data", data},
                {"revision", max_revision + 1}};
    auto created = client_.Create(kControllerRevisions, ns, rev);
    if (!created.ok()) {
      if (!kube::IsAlreadyExists(created.status())) {
        return created.status().Annotate("creating ControllerRevision " + ns + "/" + rev_name);
      }
      auto existing = client_.Get(kControllerRevisions, ns, rev_name);
      if (!existing.ok()) return existing.status();
      if (Member(*existing, "data") != data) return collide();
    } else {
      LogInfo(
          "controller revision created",
          {{"daemonset", kube::KeyOf(ds)}, {"revision", rev_name}, {"number", max_revision + 1}});
    }
  }
  // Prune history: revisions no pod uses, oldest first, beyond the limit.
  const Json& limit_json = Member(Member(ds, "spec"), "revisionHistoryLimit");
  const int64_t limit = limit_json.is_number_integer() ? limit_json.get<int64_t>() : 10;
  std::set<std::string> live = {hash};
  for (const auto& p : pods) {
    if (auto h = kube::Label(*p, kControllerRevisionHashLabel)) live.insert(*h);
  }
  std::vector<kube::ObjectPtr> old;
  for (const auto& r : revs) {
    auto h = kube::Label(*r, kControllerRevisionHashLabel);
    if (kube::Name(*r) != rev_name && (!h || live.count(*h) == 0)) old.push_back(r);
  }
  std::sort(old.begin(), old.end(), [](const kube::ObjectPtr& a, const kube::ObjectPtr& b) {
    return a->value("revision", int64_t{0}) < b->value("revision", int64_t{0});
  });
  for (size_t i = 0; static_cast<int64_t>(old.size() - i) > limit; ++i) {
    auto st = client_.Delete(kControllerRevisions, ns, kube::Name(*old[i]));
    if (!st.ok() && !kube::IsNotFound(st)) return st;
  }
  return hash;
}

Status DaemonSetController::DeletePod(const std::string& ds_key, const Json& pod,
                                      const std::string& why) {
  kube::DeleteOptions opts;
  opts.precondition_uid = kube::Uid(pod);
  Status st = client_.Delete(res::kPods, kube::Namespace(pod), kube::Name(pod), opts);
  if (!st.ok() && !kube::IsNotFound(st)) {
    return st.Annotate("deleting pod " + kube::KeyOf(pod) + " of DaemonSet " + ds_key);
  }
  expectations_.ExpectDeletion(ds_key, kube::KeyOf(pod), kube::Uid(pod));
  LogInfo("daemon pod deleted", {{"daemonset", ds_key},
                                 {"pod", kube::KeyOf(pod)},
                                 {"node", DaemonPodTargetNode(pod)},
                                 {"reason", why}});
  return Status::Ok();
}

kube::ReconcileResult DaemonSetController::Reconcile(const std::string& key) {
  kube::ObjectPtr ds = daemonsets_->Get(key);
  if (!ds) {
    expectations_.Forget(key);
    return kube::ReconcileResult::Ok();
  }
  if (kube::IsBeingDeleted(*ds)) return kube::ReconcileResult::Ok();  // the GC takes the pods
  const auto now = std::chrono::system_clock::now();
  std::vector<kube::ObjectPtr> owned = pods_->ByIndex(kControllerUidIndex, kube::Uid(*ds));
  auto hash = SyncHistory(*ds, owned);
  if (!hash.ok()) return kube::ReconcileResult::Error(hash.status().Annotate("DaemonSet " + key));

  std::vector<kube::ObjectPtr> node_objs = nodes_->List();
  std::sort(node_objs.begin(), node_objs.end(),
            [](const kube::ObjectPtr& a, const kube::ObjectPtr& b) {
              return kube::Name(*a) < kube::Name(*b);
            });
  std::vector<const Json*> nodes;
  std::set<std::string> node_names;
  for (const auto& n : node_objs) {
    nodes.push_back(n.get());
    node_names.insert(kube::Name(*n));
  }
  NodePods by_node;
  for (const auto& p : owned) {
    std::string target = DaemonPodTargetNode(*p);
    if (!target.empty()) by_node[target].push_back(p.get());
  }

  Status failed = Status::Ok();
  auto note = [&](Status st) {
    if (!st.ok() && failed.ok()) failed = std::move(st);
  };
  if (expectations_.Satisfied(key, *pods_)) {
    bool wrote = false;
    for (const Json* node : nodes) {
      const std::string name = kube::Name(*node);
      const ShouldRun sr = NodeShouldRun(*ds, *node);
      std::vector<const Json*> here;
      if (auto it = by_node.find(name); it != by_node.end()) here = it->second;
      if (sr.should_run && here.empty()) {
        Json pod = DaemonPodFor(*ds, name, *hash);
        auto created = client_.Create(res::kPods, kube::Namespace(*ds), pod);
        if (!created.ok()) {
          note(created.status().Annotate("creating the pod of DaemonSet " + key + " for node " +
                                         name));
          continue;
        }
        wrote = true;
        expectations_.ExpectCreation(key, kube::KeyOf(*created));
        LogInfo("daemon pod created",
                {{"daemonset", key}, {"pod", kube::KeyOf(*created)}, {"node", name}});
      } else if (sr.should_run) {
        std::vector<const Json*> running;
        for (const Json* p : here) {
          if (kube::IsBeingDeleted(*p)) continue;
          if (kube::PodPhase(*p) == "Failed") {
            note(DeletePod(key, *p, "failed"));
            wrote = true;
          } else {
            running.push_back(p);
          }
        }
        if (running.size() > 1) {
          SortPods(running);
          for (size_t i = 1; i < running.size(); ++i) {
            note(DeletePod(key, *running[i], "more than one pod on the node"));
            wrote = true;
          }
        }
      } else if (!sr.should_continue) {
        for (const Json* p : here) {
          if (kube::IsBeingDeleted(*p)) continue;
          note(DeletePod(key, *p, "node no longer matches"));
          wrote = true;
        }
      }
    }
    for (const auto& [node, here] : by_node) {
      if (node_names.count(node) > 0) continue;
      for (const Json* p : here) {
        if (kube::IsBeingDeleted(*p)) continue;
        note(DeletePod(key, *p, "node is gone"));
        wrote = true;
      }
    }
    if (!wrote && failed.ok() && IsRollingUpdate(*ds)) {
      for (const Json* p : RollingUpdateDeletions(*ds, nodes, by_node, *hash, now)) {
        note(DeletePod(key, *p, "rolling update"));
      }
    }
  }

  // Status, from the cache as it is now.
  Json status = ComputeDaemonSetStatus(*ds, nodes, by_node, *hash, now);
  status["observedGeneration"] = kube::Generation(*ds);
  const Json& have = Member(*ds, "status");
  bool differs = false;
  for (const auto& [k, v] : status.items()) {
    if (Member(have, k.c_str()) != v) differs = true;
  }
  if (differs) {
    kube::PatchOptions po;
    po.subresource = "status";
    auto patched = client_.Patch(res::kDaemonSets, kube::Namespace(*ds), kube::Name(*ds),
                                 kube::PatchType::kMerge, {{"status", status}}, po);
    if (!patched.ok() && !kube::IsNotFound(patched.status())) {
      note(patched.status().Annotate("updating the status of DaemonSet " + key));
    }
  }
  if (!failed.ok()) return kube::ReconcileResult::Error(failed);
  // minReadySeconds: come back when ready pods become available.
  if (MinReadySeconds(*ds) > 0 && status["numberReady"] != status["numberAvailable"]) {
    return kube::ReconcileResult::RequeueAfter(std::chrono::seconds(1));
  }
  return kube::ReconcileResult::Ok();
}

}  // namespace gpuop::simcluster
