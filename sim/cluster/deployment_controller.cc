#include "sim/cluster/deployment_controller.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "base/strings.h"
#include "kube/object.h"

namespace gpuop::simcluster {
namespace {

namespace res = kube::resources;

int64_t IntOr(const Json& v, int64_t fallback) {
  return v.is_number_integer() ? v.get<int64_t>() : fallback;
}

// Enqueues the controller owner of `obj` if it is of `kind`.
kube::MapFunc OwnerOfKind(std::string kind) {
  return [kind](const Json& obj) -> std::vector<std::string> {
    for (const auto& ref : kube::OwnerReferences(obj)) {
      if (ref.controller && ref.kind == kind)
        return {kube::MakeKey(kube::Namespace(obj), ref.name)};
    }
    return {};
  };
}

int64_t Replicas(const Json& obj) { return IntOr(Member(Member(obj, "spec"), "replicas"), 1); }

int64_t Revision(const Json& rs) {
  auto a = kube::Annotation(rs, kRevisionAnnotation);
  return a ? static_cast<int64_t>(ParseUint(*a).value_or(0)) : 0;
}

bool IsRecreate(const Json& d) {
  const Json& t = Member(Member(Member(d, "spec"), "strategy"), "type");
  return t.is_string() && t.get<std::string>() == "Recreate";
}

// maxSurge (rounded up) and maxUnavailable (rounded down), kube's fenceposts.
std::pair<int64_t, int64_t> Fenceposts(const Json& d) {
  const int64_t replicas = Replicas(d);
  const Json& ru = Member(Member(Member(d, "spec"), "strategy"), "rollingUpdate");
  const Json surge_v = Member(ru, "maxSurge").is_null() ? Json("25%") : Member(ru, "maxSurge");
  const Json unavail_v =
      Member(ru, "maxUnavailable").is_null() ? Json("25%") : Member(ru, "maxUnavailable");
  int64_t surge = ResolveIntOrPercent(surge_v, replicas, true, 0);
  int64_t unavailable = ResolveIntOrPercent(unavail_v, replicas, false, 0);
  if (surge == 0 && unavailable == 0) unavailable = 1;
  return {surge, unavailable};
}

// The template without the pod-template-hash label: what a Deployment's template is.
Json TemplateWithoutHash(const Json& rs) {
  Json t = Member(Member(rs, "spec"), "template");
  if (t.is_object() && t.contains("metadata") && t["metadata"].contains("labels")) {
    t["metadata"]["labels"].erase(std::string(kPodTemplateHashLabel));
    if (t["metadata"]["labels"].empty()) t["metadata"].erase("labels");
  }
  return t;
}

Json StripEmptyLabels(Json t) {
  if (t.is_object() && t.contains("metadata") && t["metadata"].is_object() &&
      t["metadata"].contains("labels") && t["metadata"]["labels"].empty()) {
    t["metadata"].erase("labels");
  }
  return t;
}

Status PatchStatusIfChanged(kube::Client& client, const kube::Resource& r, const Json& obj,
                            const Json& status) {
  const Json& have = Member(obj, "status");
  bool differs = false;
  for (const auto& [k, v] : status.items()) {
    if (Member(have, k.c_str()) != v) differs = true;
  }
  if (!differs) return Status::Ok();
  kube::PatchOptions po;
  po.subresource = "status";
  auto patched = client.Patch(r, kube::Namespace(obj), kube::Name(obj), kube::PatchType::kMerge,
                              {{"status", status}}, po);
  if (!patched.ok() && !kube::IsNotFound(patched.status())) {
    return patched.status().Annotate("updating the status of " + r.kind + " " + kube::KeyOf(obj));
  }
  return Status::Ok();
}

}  // namespace

std::map<std::string, int64_t> RolloutStep(const Json& d, const ReplicaSetState& fresh,
                                           const std::vector<ReplicaSetState>& old) {
  std::map<std::string, int64_t> out;
  const int64_t want = Replicas(d);
  if (IsRecreate(d)) {
    bool old_active = false, old_pods = false;
    for (const auto& rs : old) {
      if (rs.replicas > 0) {
        out[rs.name] = 0;
        old_active = true;
      }
      if (rs.pods > 0) old_pods = true;
    }
    if (old_active || old_pods) return out;  // new pods only once the old are gone
    if (fresh.replicas != want) out[fresh.name] = want;
    return out;
  }
  const auto [surge, max_unavailable] = Fenceposts(d);
  int64_t all = fresh.replicas;
  int64_t old_total = 0;
  for (const auto& rs : old) old_total += rs.replicas;
  all += old_total;
  // The new ReplicaSet first (kube's reconcileNewReplicaSet).
  if (fresh.replicas > want) {
    out[fresh.name] = want;
    return out;
  }
  if (fresh.replicas < want) {
    const int64_t max_total = want + surge;
    if (all < max_total) {
      out[fresh.name] = fresh.replicas + std::min(max_total - all, want - fresh.replicas);
      return out;
    }
  }
  // Then the old ones (reconcileOldReplicaSets).
  if (old_total == 0) return out;
  const int64_t min_available = want - max_unavailable;
  const int64_t new_unavailable = fresh.replicas - fresh.available;
  int64_t max_scaled_down = all - min_available - new_unavailable;
  if (max_scaled_down <= 0) return out;
  std::vector<ReplicaSetState> rss = old;
  // Unavailable old pods go first.
  for (auto& rs : rss) {
    if (max_scaled_down <= 0) break;
    if (rs.replicas <= rs.available) continue;
    const int64_t cut = std::min(max_scaled_down, rs.replicas - rs.available);
    rs.replicas -= cut;
    max_scaled_down -= cut;
    out[rs.name] = rs.replicas;
  }
  // Then available ones, while enough stay available.
  int64_t available = fresh.available;
  for (const auto& rs : old) available += rs.available;
  int64_t total = std::min(available - min_available, max_scaled_down);
  for (auto& rs : rss) {
    if (total <= 0) break;
    if (rs.replicas == 0) continue;
    const int64_t cut = std::min(rs.replicas, total);
    rs.replicas -= cut;
    total -= cut;
    out[rs.name] = rs.replicas;
  }
  return out;
}

// --- ReplicaSetController ---

ReplicaSetController::~ReplicaSetController() { Stop(); }

Result<std::unique_ptr<ReplicaSetController>> ReplicaSetController::Start(kube::Client& client,
                                                                          int workers) {
  std::unique_ptr<ReplicaSetController> c(new ReplicaSetController(client));
  c->factory_ = std::make_unique<kube::SharedInformerFactory>(&client);
  c->replicasets_ = &c->factory_->For(kReplicaSets);
  c->pods_ = &c->factory_->For(res::kPods);
  GPUOP_RETURN_IF_ERROR(c->pods_->AddIndex(kControllerUidIndex, IndexByControllerUid));
  ReplicaSetController* self = c.get();
  c->controller_ = std::make_unique<kube::Controller>(
      "replicaset", kube::WorkQueueOptions{"replicaset", {}}, std::max(1, workers),
      [self](const std::string& key) { return self->Reconcile(key); });
  c->controller_->Watch(*c->replicasets_);
  c->controller_->Watch(*c->pods_, OwnerOfKind("ReplicaSet"));
  c->thread_ = std::jthread([self](std::stop_token stop) {
    self->factory_->Start(stop);
    Status st = self->controller_->Run(stop);
    if (!st.ok() && !stop.stop_requested())
      LogError("replicaset controller stopped", {{"error", st}});
    self->factory_->Stop();
  });
  LogInfo("replicaset controller started");
  return c;
}

void ReplicaSetController::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool ReplicaSetController::WaitForSync(std::chrono::milliseconds timeout) {
  return factory_->WaitForCacheSync(timeout);
}

kube::ReconcileResult ReplicaSetController::Reconcile(const std::string& key) {
  kube::ObjectPtr rs = replicasets_->Get(key);
  if (!rs) {
    expectations_.Forget(key);
    return kube::ReconcileResult::Ok();
  }
  if (kube::IsBeingDeleted(*rs)) return kube::ReconcileResult::Ok();
  const auto now = std::chrono::system_clock::now();
  const int64_t min_ready = IntOr(Member(Member(*rs, "spec"), "minReadySeconds"), 0);
  std::vector<kube::ObjectPtr> active;
  for (const auto& p : pods_->ByIndex(kControllerUidIndex, kube::Uid(*rs))) {
    if (IsPodActive(*p)) active.push_back(p);
  }
  const int64_t want = Replicas(*rs);
  Status failed = Status::Ok();
  if (expectations_.Satisfied(key, *pods_)) {
    const int64_t diff = static_cast<int64_t>(active.size()) - want;
    const Json& tmpl = Member(Member(*rs, "spec"), "template");
    for (int64_t i = 0; i < -diff; ++i) {
      Json pod = {
          {"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", kube::Name(*rs) + "-"},
            {"namespace", kube::Namespace(*rs)},
            {"labels", Member(Member(tmpl, "metadata"), "labels")},
            {"ownerReferences", Json::array({ControllerRef(*rs, "apps/v1", "ReplicaSet")})}}},
          {"spec", Member(tmpl, "spec")}};
      const Json& annotations = Member(Member(tmpl, "metadata"), "annotations");
      if (annotations.is_object()) pod["metadata"]["annotations"] = annotations;
      auto created = client_.Create(res::kPods, kube::Namespace(*rs), pod);
      if (!created.ok()) {
        failed = created.status().Annotate("creating a pod of ReplicaSet " + key);
        break;
      }
      expectations_.ExpectCreation(key, kube::KeyOf(*created));
      LogInfo("replicaset pod created", {{"replicaset", key}, {"pod", kube::KeyOf(*created)}});
    }
    if (diff > 0) {
      // kube's deletion order: unbound, Pending, not ready, newest first.
      auto rank = [](const Json& p) {
        int r = 0;
        if (!kube::PodNodeName(p).empty()) r += 4;
        if (kube::PodPhase(p) == "Running") r += 2;
        if (kube::IsPodReady(p)) r += 1;
        return r;
      };
      std::sort(active.begin(), active.end(),
                [&](const kube::ObjectPtr& a, const kube::ObjectPtr& b) {
                  if (rank(*a) != rank(*b)) return rank(*a) < rank(*b);
                  if (CreationTime(*a) != CreationTime(*b))
                    return CreationTime(*a) > CreationTime(*b);
                  return kube::Name(*a) > kube::Name(*b);
                });
      for (int64_t i = 0; i < diff; ++i) {
        const Json& p = *active[i];
        kube::DeleteOptions opts;
        opts.precondition_uid = kube::Uid(p);
        Status st = client_.Delete(res::kPods, kube::Namespace(p), kube::Name(p), opts);
        if (!st.ok() && !kube::IsNotFound(st)) {
          failed = st.Annotate("deleting pod " + kube::KeyOf(p) + " of ReplicaSet " + key);
          break;
        }
        expectations_.ExpectDeletion(key, kube::KeyOf(p), kube::Uid(p));
        LogInfo("replicaset pod deleted", {{"replicaset", key}, {"pod", kube::KeyOf(p)}});
      }
    }
  }
  // Status from the cache.
  int64_t labelled = 0, ready = 0, available = 0;
  const auto tmpl_labels =
      Member(Member(Member(Member(*rs, "spec"), "template"), "metadata"), "labels");
  for (const auto& p : active) {
    bool all = true;
    if (tmpl_labels.is_object()) {
      for (const auto& [k, v] : tmpl_labels.items()) {
        if (kube::Label(*p, k) != (v.is_string() ? v.get<std::string>() : "")) all = false;
      }
    }
    if (all) ++labelled;
    if (kube::IsPodReady(*p)) ++ready;
    if (IsPodAvailable(*p, min_ready, now)) ++available;
  }
  Json status = {{"replicas", static_cast<int64_t>(active.size())},
                 {"fullyLabeledReplicas", labelled},
                 {"readyReplicas", ready},
                 {"availableReplicas", available},
                 {"observedGeneration", kube::Generation(*rs)}};
  Status st = PatchStatusIfChanged(client_, kReplicaSets, *rs, status);
  if (failed.ok()) failed = st;
  if (!failed.ok()) return kube::ReconcileResult::Error(failed);
  if (min_ready > 0 && ready != available) {
    return kube::ReconcileResult::RequeueAfter(std::chrono::seconds(1));
  }
  return kube::ReconcileResult::Ok();
}

// --- DeploymentController ---

DeploymentController::~DeploymentController() { Stop(); }

Result<std::unique_ptr<DeploymentController>> DeploymentController::Start(kube::Client& client,
                                                                          int workers) {
  std::unique_ptr<DeploymentController> c(new DeploymentController(client));
  c->factory_ = std::make_unique<kube::SharedInformerFactory>(&client);
  c->deployments_ = &c->factory_->For(res::kDeployments);
  c->replicasets_ = &c->factory_->For(kReplicaSets);
  GPUOP_RETURN_IF_ERROR(c->replicasets_->AddIndex(kControllerUidIndex, IndexByControllerUid));
  DeploymentController* self = c.get();
  c->controller_ = std::make_unique<kube::Controller>(
      "deployment", kube::WorkQueueOptions{"deployment", {}}, std::max(1, workers),
      [self](const std::string& key) { return self->Reconcile(key); });
  c->controller_->Watch(*c->deployments_);
  c->controller_->Watch(*c->replicasets_, OwnerOfKind("Deployment"));
  c->thread_ = std::jthread([self](std::stop_token stop) {
    self->factory_->Start(stop);
    Status st = self->controller_->Run(stop);
    if (!st.ok() && !stop.stop_requested())
      LogError("deployment controller stopped", {{"error", st}});
    self->factory_->Stop();
  });
  LogInfo("deployment controller started");
  return c;
}

void DeploymentController::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool DeploymentController::WaitForSync(std::chrono::milliseconds timeout) {
  return factory_->WaitForCacheSync(timeout);
}

kube::ReconcileResult DeploymentController::Reconcile(const std::string& key) {
  kube::ObjectPtr d = deployments_->Get(key);
  if (!d) {
    expectations_.Forget(key);
    return kube::ReconcileResult::Ok();
  }
  if (kube::IsBeingDeleted(*d)) return kube::ReconcileResult::Ok();
  if (!expectations_.Satisfied(key, *replicasets_)) return kube::ReconcileResult::Ok();
  const std::string ns = kube::Namespace(*d), name = kube::Name(*d);
  const Json tmpl = StripEmptyLabels(Member(Member(*d, "spec"), "template"));
  const Json& collision = Member(Member(*d, "status"), "collisionCount");
  const std::optional<int64_t> collisions = collision.is_number_integer()
                                                ? std::optional<int64_t>(collision.get<int64_t>())
                                                : std::nullopt;
  const std::string hash = ComputeHash(tmpl, collisions);

  std::vector<kube::ObjectPtr> rss = replicasets_->ByIndex(kControllerUidIndex, kube::Uid(*d));
  std::sort(rss.begin(), rss.end(), [](const kube::ObjectPtr& a, const kube::ObjectPtr& b) {
    if (CreationTime(*a) != CreationTime(*b)) return CreationTime(*a) < CreationTime(*b);
    return kube::Name(*a) < kube::Name(*b);
  });
  kube::ObjectPtr fresh;
  std::vector<kube::ObjectPtr> old;
  int64_t max_old_revision = 0;
  for (const auto& rs : rss) {
    if (!fresh && StripEmptyLabels(TemplateWithoutHash(*rs)) == tmpl) {
      fresh = rs;
    } else {
      old.push_back(rs);
      max_old_revision = std::max(max_old_revision, Revision(*rs));
    }
  }
  const std::string revision = std::to_string(max_old_revision + 1);
  if (!fresh) {
    const std::string rs_name = name + "-" + hash;
    Json labels = Member(Member(tmpl, "metadata"), "labels");
    if (!labels.is_object()) labels = Json::object();
    labels[std::string(kPodTemplateHashLabel)] = hash;
    Json rs_tmpl = tmpl;
    rs_tmpl["metadata"]["labels"] = labels;
    Json selector = Member(Member(*d, "spec"), "selector");
    if (!selector.is_object()) selector = Json::object();
    selector["matchLabels"][std::string(kPodTemplateHashLabel)] = hash;
    const auto [surge, unused] = Fenceposts(*d);
    Json rs = {{"apiVersion", "apps/v1"},
               {"kind", "ReplicaSet"},
               {"metadata",
                {{"name", rs_name},
                 {"namespace", ns},
                 {"labels", labels},
                 {"annotations",
                  {{std::string(kRevisionAnnotation), revision},
                   {"deployment.kubernetes.io/desired-replicas", std::to_string(Replicas(*d))},
                   {"deployment.kubernetes.io/max-replicas",
                    std::to_string(Replicas(*d) + (IsRecreate(*d) ? 0 : surge))}}},
                 {"ownerReferences", Json::array({ControllerRef(*d, "apps/v1", "Deployment")})}}},
               {"spec",
                {{"replicas", 0},
                 {"minReadySeconds", IntOr(Member(Member(*d, "spec"), "minReadySeconds"), 0)},
                 {"selector", selector},
                 {"template", rs_tmpl}}}};
    auto created = client_.Create(kReplicaSets, ns, rs);
    if (!created.ok()) {
      if (kube::IsAlreadyExists(created.status())) {
        // A ReplicaSet of that name with another template: a hash collision.
        kube::PatchOptions po;
        po.subresource = "status";
        (void)client_.Patch(res::kDeployments, ns, name, kube::PatchType::kMerge,
                            {{"status", {{"collisionCount", collisions.value_or(0) + 1}}}}, po);
      }
      return kube::ReconcileResult::Error(
          created.status().Annotate("creating ReplicaSet " + ns + "/" + rs_name));
    }
    expectations_.ExpectCreation(key, kube::KeyOf(*created));
    LogInfo("replicaset created",
            {{"deployment", key}, {"replicaset", rs_name}, {"revision", revision}});
    return kube::ReconcileResult::Ok();  // its event brings us back
  }
  Status failed = Status::Ok();
  // The new ReplicaSet carries the newest revision (a rollback renumbers it).
  if (Revision(*fresh) <= max_old_revision) {
    auto st = client_.Patch(
        kReplicaSets, ns, kube::Name(*fresh), kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{std::string(kRevisionAnnotation), revision}}}}}});
    if (!st.ok()) failed = st.status();
  }
  const std::string fresh_revision =
      std::to_string(std::max(Revision(*fresh), max_old_revision + 1));
  if (kube::Annotation(*d, kRevisionAnnotation) != fresh_revision) {
    auto st = client_.Patch(
        res::kDeployments, ns, name, kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{std::string(kRevisionAnnotation), fresh_revision}}}}}});
    if (!st.ok() && failed.ok()) failed = st.status();
  }

  auto state = [](const Json& rs) {
    const Json& s = Member(rs, "status");
    return ReplicaSetState{kube::Name(rs), Replicas(rs), IntOr(Member(s, "availableReplicas"), 0),
                           IntOr(Member(s, "replicas"), 0)};
  };
  std::vector<ReplicaSetState> old_states;
  for (const auto& rs : old) old_states.push_back(state(*rs));
  const ReplicaSetState fresh_state = state(*fresh);
  for (const auto& [rs_name, replicas] : RolloutStep(*d, fresh_state, old_states)) {
    Json patch = {
        {"spec", {{"replicas", replicas}}},
        {"metadata",
         {{"annotations",
           {{"deployment.kubernetes.io/desired-replicas", std::to_string(Replicas(*d))}}}}}};
    auto st = client_.Patch(kReplicaSets, ns, rs_name, kube::PatchType::kMerge, patch);
    if (!st.ok()) {
      if (failed.ok()) failed = st.status().Annotate("scaling ReplicaSet " + ns + "/" + rs_name);
      continue;
    }
    LogInfo("replicaset scaled",
            {{"deployment", key}, {"replicaset", rs_name}, {"replicas", replicas}});
  }

  // History: old ReplicaSets without pods beyond revisionHistoryLimit.
  const int64_t limit = IntOr(Member(Member(*d, "spec"), "revisionHistoryLimit"), 10);
  std::vector<kube::ObjectPtr> idle;
  for (const auto& rs : old) {
    if (Replicas(*rs) == 0 && IntOr(Member(Member(*rs, "status"), "replicas"), 0) == 0)
      idle.push_back(rs);
  }
  std::sort(idle.begin(), idle.end(), [](const kube::ObjectPtr& a, const kube::ObjectPtr& b) {
    return Revision(*a) < Revision(*b);
  });
  for (size_t i = 0; static_cast<int64_t>(idle.size() - i) > limit; ++i) {
    Status st = client_.Delete(kReplicaSets, ns, kube::Name(*idle[i]));
    if (!st.ok() && !kube::IsNotFound(st) && failed.ok()) failed = st;
  }

  // Status.
  int64_t pods = fresh_state.pods, spec_total = fresh_state.replicas,
          available = fresh_state.available;
  int64_t ready = IntOr(Member(Member(*fresh, "status"), "readyReplicas"), 0);
  for (const auto& rs : old) {
    const Json& s = Member(*rs, "status");
    pods += IntOr(Member(s, "replicas"), 0);
    spec_total += Replicas(*rs);
    available += IntOr(Member(s, "availableReplicas"), 0);
    ready += IntOr(Member(s, "readyReplicas"), 0);
  }
  const int64_t want = Replicas(*d);
  const int64_t max_unavailable = IsRecreate(*d) ? 0 : Fenceposts(*d).second;
  Json status = {{"observedGeneration", kube::Generation(*d)},
                 {"replicas", pods},
                 {"updatedReplicas", fresh_state.pods},
                 {"readyReplicas", ready},
                 {"availableReplicas", available},
                 {"unavailableReplicas", std::max<int64_t>(0, spec_total - available)}};
  Json with_conditions = {{"status", {{"conditions", Member(Member(*d, "status"), "conditions")}}}};
  if (!with_conditions["status"]["conditions"].is_array()) {
    with_conditions["status"]["conditions"] = Json::array();
  }
  const std::string now = kube::Rfc3339(std::chrono::system_clock::now());
  if (available >= want - max_unavailable) {
    kube::SetCondition(with_conditions,
                       {"Available", "True", "MinimumReplicasAvailable",
                        "Deployment has minimum availability.", "", 0},
                       now);
  } else {
    kube::SetCondition(with_conditions,
                       {"Available", "False", "MinimumReplicasUnavailable",
                        "Deployment does not have minimum availability.", "", 0},
                       now);
  }
  const std::string rs_name = kube::Name(*fresh);
  const bool complete =
      fresh_state.pods == want && pods == want && available == want && fresh_state.replicas == want;
  if (complete) {
    kube::SetCondition(with_conditions,
                       {"Progressing", "True", "NewReplicaSetAvailable",
                        "ReplicaSet \"" + rs_name + "\" has successfully progressed.", "", 0},
                       now);
  } else {
    kube::SetCondition(with_conditions,
                       {"Progressing", "True", "ReplicaSetUpdated",
                        "ReplicaSet \"" + rs_name + "\" is progressing.", "", 0},
                       now);
  }
  status["conditions"] = with_conditions["status"]["conditions"];
  Status st = PatchStatusIfChanged(client_, res::kDeployments, *d, status);
  if (failed.ok()) failed = st;
  if (!failed.ok()) return kube::ReconcileResult::Error(failed.Annotate("Deployment " + key));
  return kube::ReconcileResult::Ok();
}

}  // namespace gpuop::simcluster
