#include "operator/operator.h"

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/yaml_json.h"
#include "kube/object.h"
#include "operator/crd_yaml.h"
#include "operator/node_labels.h"
#include "operator/operand_pods.h"
#include "operator/render.h"
#include "operator/status.h"

namespace gpuop::op {
namespace {

using kube::Json;
namespace res = kube::resources;

constexpr const char* kPolicyKey = "clusterpolicy";
constexpr const char* kManagedSelector = "app.kubernetes.io/managed-by=gpuop";
// The validator pods' index of those that block validation (BlocksValidation).
constexpr std::string_view kBlockingIndex = "blocksValidation";

// NFD's master and workers annotate the nodes they label with keys under
// this prefix (feature-labels, worker.version, ...); gpuop's node-discovery
// never does, so they tell whether NFD runs in the cluster.
constexpr std::string_view kNfdAnnotationPrefix = "nfd.node.kubernetes.io/";
// The driver upgrade's annotations (upgrade.h).
constexpr std::string_view kUpgradeAnnotationPrefix = "nvidia.com/gpu-driver-upgrade";

// What the operator reads of a Node: its name, labels (flattened: read them
// with NodeLabels), NFD's and the driver upgrade's annotations, taints,
// unschedulable and whether it is Ready. Dropping the rest (status.images
// alone is often kilobytes) keeps 5,000 nodes in about 10 MiB.
void KeepNodeMetadata(Json& node) {
  Json meta = Json::object();
  if (node.contains("metadata") && node["metadata"].is_object()) {
    Json& m = node["metadata"];
    for (const char* key : {"name", "uid", "resourceVersion", "labels"}) {
      if (m.contains(key)) meta[key] = std::move(m[key]);
    }
    if (m.contains("annotations") && m["annotations"].is_object()) {
      Json kept = Json::object();
      for (auto& [key, value] : m["annotations"].items()) {
        if (key.rfind(kNfdAnnotationPrefix, 0) == 0 ||
            key.rfind(kUpgradeAnnotationPrefix, 0) == 0) {
          kept[key] = std::move(value);
        }
      }
      if (!kept.empty()) meta["annotations"] = std::move(kept);
    }
  }
  Json out{{"metadata", std::move(meta)}};
  // Taints: the validation taint is decided against them (node_labels.h).
  // Unschedulable: the driver upgrade cordons.
  if (node.contains("spec") && node["spec"].is_object()) {
    for (const char* key : {"taints", "unschedulable"}) {
      if (node["spec"].contains(key)) out["spec"][key] = std::move(node["spec"][key]);
    }
  }
  // The Ready condition's status (not its heartbeat times): the upgrade's throttle.
  if (node.contains("status") && node["status"].is_object()) {
    for (const Json& c : node["status"].value("conditions", Json::array())) {
      if (c.value("type", "") == "Ready") {
        out["status"]["conditions"] =
            Json::array({{{"type", "Ready"}, {"status", c.value("status", "Unknown")}}});
      }
    }
  }
  FlattenNodeLabels(out);
  node = std::move(out);
}

bool HasNfdAnnotations(const Json& node) {
  const Json* meta = node.contains("metadata") ? &node["metadata"] : nullptr;
  if (meta == nullptr || !meta->contains("annotations")) return false;
  for (const auto& [key, value] : (*meta)["annotations"].items()) {
    if (key.rfind(kNfdAnnotationPrefix, 0) == 0) return true;
  }
  return false;
}

bool HasNfdLabels(const Labels& labels) {
  for (const auto& [key, value] : labels) {
    if (key.rfind("feature.node.kubernetes.io/pci-", 0) == 0) return true;
  }
  return false;
}

bool NeedsOperands(const Labels& labels) {
  auto it = labels.find(kDeployOperandsLabel);
  return IsGpuNode(labels) && (it == labels.end() || it->second != "false");
}

// What about a node the ClusterPolicy controller cares for: whether it needs
// the stack and on which OS, whether it has PCI labels, whether NFD runs on it.
std::string PolicyRelevantNodeState(const Json& node) {
  Labels labels = NodeLabels(node);
  std::string state = HasNfdAnnotations(node) ? "nfd-annotated;" : "";
  if (!NeedsOperands(labels)) return state + (HasNfdLabels(labels) ? "nfd" : "");
  auto get = [&](const char* key) {
    auto it = labels.find(key);
    return it == labels.end() ? std::string() : it->second;
  };
  return state + "gpu:" + get(kOsIdLabel) + ":" + get(kOsVersionLabel);
}

std::string ResourceKey(const kube::Resource& r) { return r.QualifiedName(); }

std::string Hash(const Json& obj) {
  auto v = kube::Annotation(obj, kLastAppliedHashAnnotation);
  return v.value_or("");
}

}  // namespace

std::string OperatorMetrics::Exposition() const {
  std::ostringstream out;
  auto gauge = [&](const char* name, const char* type, const char* help, int64_t value) {
    out << "# HELP gpu_operator_" << name << " " << help << "\n"
        << "# TYPE gpu_operator_" << name << " " << type << "\n"
        << "gpu_operator_" << name << " " << value << "\n";
  };
  gauge("gpu_nodes_total", "gauge", "Number of nodes with GPUs", gpu_nodes_total.load());
  gauge("reconciliation_status", "gauge",
        "1 ready, 0 not ready, -1 reconcile failed, -2 no ClusterPolicy",
        reconciliation_status.load());
  gauge("reconciliation_total", "counter", "ClusterPolicy reconciliations",
        reconciliation_total.load());
  gauge("reconciliation_failed_total", "counter", "Failed ClusterPolicy reconciliations",
        reconciliation_failed_total.load());
  gauge("reconciliation_last_success_ts_seconds", "gauge",
        "Unix time of the last successful reconciliation",
        reconciliation_last_success_ts_seconds.load());
  gauge("reconciliation_has_nfd_labels", "gauge", "1 when some node has PCI feature labels",
        reconciliation_has_nfd_labels.load());
  gauge("node_label_patches_total", "counter", "Node label patches written",
        node_label_patches_total.load());
  gauge("object_writes_total", "counter", "Owned objects created, updated or deleted",
        object_writes_total.load());
  gauge("driver_auto_upgrade_enabled", "gauge", "1 when driver.upgradePolicy.autoUpgrade is on",
        upgrade.auto_upgrade_enabled.load());
  gauge("nodes_upgrades_in_progress", "gauge", "Nodes in a driver upgrade (failed ones excluded)",
        upgrade.in_progress.load());
  gauge("nodes_upgrades_done", "gauge", "Nodes in state upgrade-done", upgrade.done.load());
  gauge("nodes_upgrades_failed", "gauge", "Nodes in state upgrade-failed", upgrade.failed.load());
  gauge("nodes_upgrades_available", "gauge", "Nodes that may start a driver upgrade now",
        upgrade.available.load());
  gauge("nodes_upgrades_pending", "gauge", "Nodes in state upgrade-required",
        upgrade.pending.load());
  return out.str();
}

Operator::Operator(kube::Client& client, OperatorOptions options, kube::EventRecorder* events)
    : client_(client), options_(std::move(options)), events_(events) {}

Operator::~Operator() = default;

namespace {

bool Established(const Json& crd) {
  for (const Json& c : crd.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == "Established" && c.value("status", "") == "True") return true;
  }
  return false;
}

}  // namespace

Status EnsureClusterPolicyCrd(kube::Client& client, const std::string& field_manager,
                              std::chrono::seconds wait) {
  GPUOP_ASSIGN_OR_RETURN(std::vector<Json> docs, ParseYamlDocuments(kClusterPolicyCrdYaml));
  if (docs.size() != 1) return Internal("the embedded ClusterPolicy CRD is not one document");
  const Json& crd = docs[0];
  const std::string want = kube::Annotation(crd, kCrdVersionAnnotation).value_or("0");
  auto current = client.Get(res::kCustomResourceDefinitions, "", kCrdName);
  bool write = true;
  if (current.ok()) {
    // NVIDIA's CRD, or one without a readable version, counts as version 0.
    std::string have = kube::Annotation(*current, kCrdVersionAnnotation).value_or("0");
    if (ParseUint(have).value_or(0) >= ParseUint(want).value_or(0)) {
      write = false;
      LogInfo("the ClusterPolicy CRD is current", {{"version", have}});
    } else {
      LogInfo("upgrading the ClusterPolicy CRD", {{"from", have}, {"to", want}});
    }
  } else if (!kube::IsNotFound(current.status())) {
    return current.status().Annotate("reading the ClusterPolicy CRD");
  } else {
    LogInfo("installing the ClusterPolicy CRD", {{"version", want}});
  }
  if (write) {
    auto applied = client.Apply(res::kCustomResourceDefinitions, crd, field_manager, true);
    if (!applied.ok()) {
      return applied.status().Annotate(
          "installing the ClusterPolicy CRD (needs create/patch on customresourcedefinitions; "
          "or install deploy/helm/gpu-operator/crds/nvidia.com_clusterpolicies.yaml by hand and "
          "run the operator with --no-install-crd)");
    }
  }
  if (wait.count() == 0) return Status::Ok();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    auto got = client.Get(res::kCustomResourceDefinitions, "", kCrdName);
    if (!got.ok()) return got.status().Annotate("reading the ClusterPolicy CRD");
    if (Established(*got)) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded(
          "the ClusterPolicy CRD is not Established after " + std::to_string(wait.count()) +
          " s: see its status.conditions (kubectl describe crd " + std::string(kCrdName) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Status Operator::Setup() {
  if (options_.install_crd) {
    GPUOP_RETURN_IF_ERROR(EnsureClusterPolicyCrd(client_, options_.field_manager));
  }

  kube::InformerOptions defaults;
  factory_ = std::make_unique<kube::SharedInformerFactory>(&client_, defaults);
  // The validator's and the driver's pods, one each per GPU node: kept as the
  // fields the operator reads (operand_pods.h), not whole, and as bytes: with
  // 10,000 of them at 5,000 nodes, a third of what json trees held
  // (docs/performance.md, "Operator at scale").
  factory_->SetTransform(res::kPods, KeepOperandPodFields);
  factory_->SetStorage(res::kPods, kube::Storage::kCompact);
  policies_ = &factory_->For(res::kClusterPolicies);
  const std::string& ns = options_.env.namespace_;
  // One informer per kind the renderer produces, narrowed to gpuop's objects.
  for (const kube::Resource& r : RenderedResourceTypes()) {
    owned_.push_back(&factory_->For(r, r.namespaced ? ns : "", kManagedSelector));
  }
  daemonsets_ = &factory_->For(res::kDaemonSets, ns, kManagedSelector);
  // The validator's pods: the status names the node and the check that blocks.
  validator_pods_ = &factory_->For(res::kPods, ns, "app=nvidia-operator-validator");
  // The status reads the few that block; the cache decodes only those.
  (void)validator_pods_->AddIndex(std::string(kBlockingIndex), [](const Json& pod) {
    return BlocksValidation(pod) ? std::vector<std::string>{"true"} : std::vector<std::string>{};
  });

  kube::InformerOptions node_options;
  node_options.resource = res::kNodes;
  node_options.transform = KeepNodeMetadata;
  nodes_ = std::make_unique<kube::Informer>(&client_, node_options);

  kube::WorkQueueOptions queue;
  policy_controller_ = std::make_unique<kube::Controller>(
      "clusterpolicy", queue, 1, [this](const std::string& key) { return ReconcilePolicy(key); });
  node_controller_ = std::make_unique<kube::Controller>(
      "node-labels", queue, options_.node_workers,
      [this](const std::string& key) { return ReconcileNode(key); });

  auto policy_key = [](const Json&) { return std::vector<std::string>{kPolicyKey}; };
  policy_controller_->Watch(*policies_, policy_key);
  for (kube::Informer* inf : owned_) policy_controller_->Watch(*inf, policy_key);
  policy_controller_->Watch(*validator_pods_, policy_key);
  if (options_.env.validation_taint) {
    // A validator turning Ready (or not) decides its node's taint.
    node_controller_->Watch(*validator_pods_, [](const Json& pod) {
      std::string node = kube::PodNodeName(pod);
      return node.empty() ? std::vector<std::string>{} : std::vector<std::string>{node};
    });
  }
  policy_controller_->RequireSynced(*nodes_);

  UpgradeControllerOptions upgrade_options;
  upgrade_options.namespace_ = ns;
  upgrade_options.config = [this] { return DriverUpgradeConfig(); };
  upgrade_controller_ = std::make_unique<UpgradeController>(client_, std::move(upgrade_options),
                                                            events_, &metrics_.upgrade);
  upgrade_controller_->Setup(*factory_, *nodes_);

  // Nodes: the policy cares for the set of GPU nodes and their OSes; the node
  // controller for label changes. Heartbeats (status-only updates) do nothing.
  kube::EventHandler node_events;
  node_events.on_add = [this](const kube::ObjectPtr& n) {
    if (!PolicyRelevantNodeState(*n).empty()) policy_controller_->Enqueue(kPolicyKey);
    node_controller_->Enqueue(kube::Name(*n));
  };
  node_events.on_update = [this](const kube::ObjectPtr& old, const kube::ObjectPtr& n) {
    if (PolicyRelevantNodeState(*old) != PolicyRelevantNodeState(*n)) {
      policy_controller_->Enqueue(kPolicyKey);
    }
    if (NodeLabels(*old) != NodeLabels(*n) ||
        (options_.env.validation_taint && old->value("spec", Json()) != n->value("spec", Json()))) {
      node_controller_->Enqueue(kube::Name(*n));
    }
  };
  node_events.on_delete = [this](const kube::ObjectPtr& n) {
    if (!PolicyRelevantNodeState(*n).empty()) policy_controller_->Enqueue(kPolicyKey);
  };
  nodes_->AddEventHandler(node_events);
  node_controller_->RequireSynced(*nodes_);
  node_controller_->RequireSynced(*policies_);

  // Any ClusterPolicy change may change every node's labels.
  kube::EventHandler policy_events;
  policy_events.on_add = [this](const kube::ObjectPtr&) {
    EnqueueAllNodes();
    upgrade_controller_->Enqueue();
  };
  policy_events.on_update = [this](const kube::ObjectPtr& old, const kube::ObjectPtr& cp) {
    if (kube::Generation(*old) == kube::Generation(*cp)) return;
    EnqueueAllNodes();
    upgrade_controller_->Enqueue();
  };
  policy_events.on_delete = [this](const kube::ObjectPtr&) {
    EnqueueAllNodes();
    upgrade_controller_->Enqueue();
  };
  policies_->AddEventHandler(policy_events);
  return Status::Ok();
}

Json Operator::DescribeCaches() const {
  if (!factory_) return Json::array();
  Json out = factory_->Describe();
  out.push_back(nodes_->Describe());
  return out;
}

void Operator::EnqueueAllNodes() {
  if (!nodes_ || !node_controller_) return;
  for (const std::string& key : nodes_->ListKeys()) node_controller_->Enqueue(key);
}

Status Operator::RunCaches(std::stop_token stop) {
  if (!factory_) return FailedPrecondition("Operator::RunCaches before Setup");
  factory_->Start(stop);
  nodes_->Start(stop);
  if (factory_->WaitForCacheSync(std::chrono::hours(24), stop) &&
      nodes_->WaitForSync(std::chrono::hours(24), stop)) {
    ready_ = true;
    LogInfo("operator caches synced", {{"nodes", std::to_string(nodes_->Size())}});
  }
  WaitForStop(stop);
  nodes_->Stop();
  factory_->Stop();
  return Status::Ok();
}

Status Operator::RunControllers(std::stop_token stop) {
  if (!factory_) return FailedPrecondition("Operator::RunControllers before Setup");
  std::jthread policy_thread([this](std::stop_token s) { (void)policy_controller_->Run(s); });
  std::stop_callback forward(stop, [&] { policy_thread.request_stop(); });
  std::jthread upgrade_thread([this](std::stop_token s) { (void)upgrade_controller_->Run(s); });
  std::stop_callback forward_upgrade(stop, [&] { upgrade_thread.request_stop(); });
  Status s = node_controller_->Run(stop);
  policy_thread.join();
  upgrade_thread.join();
  return s.code() == StatusCode::kAborted ? Status::Ok() : s;
}

Status Operator::Run(std::stop_token stop) {
  std::stop_source caches_stop;
  Status caches;
  std::thread caches_thread([&] { caches = RunCaches(caches_stop.get_token()); });
  Status controllers = RunControllers(stop);
  caches_stop.request_stop();
  caches_thread.join();
  return caches.ok() ? controllers : caches;
}

std::shared_ptr<const Policy> Operator::ActivePolicy() {
  std::vector<kube::ObjectPtr> cps = policies_->List();
  std::vector<Json> objects;
  for (const auto& cp : cps) objects.push_back(*cp);
  int active = ActivePolicyIndex(objects);
  if (active < 0) return nullptr;
  const Json& cp = objects[active];
  std::string version = kube::Uid(cp) + "/" + std::to_string(kube::Generation(cp));
  MutexLock lock(policy_mu_);
  if (version == policy_version_) return policy_;
  auto parsed = ParsePolicy(cp, options_.env);
  policy_version_ = version;
  policy_ = parsed.ok() ? std::make_shared<const Policy>(std::move(parsed).value()) : nullptr;
  return policy_;
}

UpgradeConfig Operator::DriverUpgradeConfig() {
  UpgradeConfig config;
  if (policies_->List().empty()) return config;  // off
  std::shared_ptr<const Policy> policy = ActivePolicy();
  if (!policy) {
    config.mode = UpgradeConfig::Mode::kHold;  // its status says why it does not parse
    return config;
  }
  if (policy->Enabled(Component::kDriver) && policy->driver_upgrade.auto_upgrade) {
    config.mode = UpgradeConfig::Mode::kOn;
    config.policy = policy->driver_upgrade;
  }
  return config;
}

kube::ReconcileResult Operator::ReconcileNode(const std::string& name) {
  kube::ObjectPtr node = nodes_->Get(name);
  if (!node) return kube::ReconcileResult::Ok();
  std::shared_ptr<const Policy> policy = ActivePolicy();
  if (!policy && !policies_->List().empty()) {
    // A ClusterPolicy exists but does not parse: leave labels as they are
    // until it is fixed (its status says why).
    return kube::ReconcileResult::Ok();
  }
  // Also when the feature is off: a taint an earlier run set goes.
  if (Status s = SyncValidationTaint(*node, policy != nullptr); !s.ok()) {
    return kube::ReconcileResult::Error(s);
  }
  LabelChanges changes = PlanNodeLabels(NodeLabels(*node), policy.get());
  if (changes.empty()) return kube::ReconcileResult::Ok();
  auto patched = client_.Patch(res::kNodes, "", name, kube::PatchType::kMerge, LabelPatch(changes));
  if (!patched.ok()) {
    if (kube::IsNotFound(patched.status())) return kube::ReconcileResult::Ok();
    return kube::ReconcileResult::Error(patched.status().Annotate("labelling node " + name));
  }
  metrics_.node_label_patches_total++;
  return kube::ReconcileResult::Ok();
}

Status Operator::SyncValidationTaint(const Json& node, bool policy_active) {
  const std::string name = kube::Name(node);
  const Json* spec = node.contains("spec") ? &node["spec"] : nullptr;
  const Json taints = spec && spec->contains("taints") ? (*spec)["taints"] : Json::array();
  bool ready = false;
  if (options_.env.validation_taint) {
    for (const kube::ObjectPtr& pod : validator_pods_->ByIndex(kube::kNodeNameIndex, name)) {
      if (!kube::IsBeingDeleted(*pod) && kube::IsPodReady(*pod)) {
        ready = true;
        break;
      }
    }
  }
  bool want = WantValidationTaint(options_.env.validation_taint, policy_active,
                                  NeedsOperands(NodeLabels(node)), ready);
  auto updated = TaintsWithValidation(taints, want);
  if (!updated) return Status::Ok();
  // The whole list, conditional on the version read: a taint another client
  // adds meanwhile makes this a conflict (retried), never a lost write.
  Json patch{{"metadata", {{"resourceVersion", node["metadata"].value("resourceVersion", "")}}},
             {"spec", {{"taints", *updated}}}};
  auto r = client_.Patch(res::kNodes, "", name, kube::PatchType::kMerge, patch);
  if (!r.ok() && !kube::IsNotFound(r.status())) {
    return r.status().Annotate(std::string(want ? "tainting" : "untainting") + " node " + name);
  }
  if (r.ok()) {
    LogInfo(want ? "node tainted until its validations pass" : "node validated: taint removed",
            {{"node", name}, {"taint", kValidationTaintKey}});
  }
  return Status::Ok();
}

Status Operator::SyncPsaLabels(const std::map<std::string, std::string>& wanted) {
  auto ns = client_.Get(res::kNamespaces, "", options_.env.namespace_);
  if (!ns.ok()) {
    // No namespace, no labels to remove.
    if (wanted.empty() && kube::IsNotFound(ns.status())) return Status();
    return ns.status().Annotate("reading namespace " + options_.env.namespace_);
  }
  std::optional<Json> config = PsaApplyConfig(*ns, wanted);
  if (!config) return Status();
  auto r = client_.Apply(res::kNamespaces, *config, kPsaFieldManager, /*force=*/true);
  if (!r.ok()) return r.status().Annotate("setting the namespace's pod-security labels");
  metrics_.object_writes_total++;
  return Status();
}

Status Operator::Cleanup() {
  Status first = SyncPsaLabels({});
  for (kube::Informer* inf : owned_) {
    for (const kube::ObjectPtr& obj : inf->List()) {
      if (kube::IsBeingDeleted(*obj)) continue;
      kube::DeleteOptions opts;
      opts.propagation_policy = "Background";
      Status s =
          client_.Delete(inf->options().resource, kube::Namespace(*obj), kube::Name(*obj), opts);
      if (s.ok()) metrics_.object_writes_total++;
      if (!s.ok() && !kube::IsNotFound(s) && first.ok()) first = s;
    }
  }
  return first;
}

kube::ReconcileResult Operator::ReconcilePolicy(const std::string&) {
  metrics_.reconciliation_total++;
  std::vector<kube::ObjectPtr> cps = policies_->List();
  if (cps.empty()) {
    metrics_.reconciliation_status = -2;
    Status s = Cleanup();
    if (!s.ok()) return kube::ReconcileResult::Error(s.Annotate("removing what gpuop added"));
    return kube::ReconcileResult::Ok();
  }
  std::vector<Json> objects;
  for (const auto& cp : cps) objects.push_back(*cp);
  const int active_index = ActivePolicyIndex(objects);
  const Json& active = objects[active_index];
  const std::string now = kube::Rfc3339(std::chrono::system_clock::now());

  // Every other ClusterPolicy is told, in its persisted status, that it is ignored.
  for (size_t i = 0; i < objects.size(); ++i) {
    if (static_cast<int>(i) == active_index) continue;
    Json old = objects[i].value("status", Json::object());
    Json status = IgnoredStatus(kube::Name(active), kube::Generation(objects[i]), old, now);
    if (!StatusChanged(old, status)) continue;
    kube::PatchOptions opts;
    opts.subresource = "status";
    auto r = client_.Patch(res::kClusterPolicies, "", kube::Name(objects[i]),
                           kube::PatchType::kMerge, Json{{"status", status}}, opts);
    if (!r.ok() && !kube::IsNotFound(r.status())) return kube::ReconcileResult::Error(r.status());
  }

  // Nodes: how many need the stack, on which OSes, and whether NFD runs at all.
  int64_t gpu_nodes = 0;
  bool nfd = false;
  bool nfd_runs = false;
  std::set<OsRelease> oses;
  for (const kube::ObjectPtr& node : nodes_->List()) {
    Labels labels = NodeLabels(*node);
    nfd = nfd || HasNfdLabels(labels);
    nfd_runs = nfd_runs || HasNfdAnnotations(*node);
    if (!NeedsOperands(labels)) continue;
    ++gpu_nodes;
    oses.insert(NodeOsRelease(labels));
  }
  metrics_.gpu_nodes_total = gpu_nodes;
  metrics_.reconciliation_has_nfd_labels = nfd ? 1 : 0;

  StatusInput in;
  in.gpu_nodes = gpu_nodes;
  in.nfd_labels_seen = nfd;
  const NodeDiscovery mode = options_.env.node_discovery;
  const bool node_discovery =
      mode == NodeDiscovery::kAlways || (mode == NodeDiscovery::kAuto && !nfd_runs);
  in.node_discovery = node_discovery;
  in.generation = kube::Generation(active);
  in.namespace_ = options_.env.namespace_;

  auto policy = ParsePolicy(active, options_.env);
  Status write_error;
  if (!policy.ok()) {
    in.reconcile_error = policy.status();
  } else {
    in.ignored_fields = policy->ignored_fields;
    RenderInput render{*policy, options_.env, active, {}};
    render.driver_os.assign(oses.begin(), oses.end());
    render.node_discovery = node_discovery;

    std::vector<RenderedObject> wanted = RenderPrerequisites(render);
    for (RenderedObject& o : RenderNodeDiscovery(render)) wanted.push_back(std::move(o));
    for (Component c : kAllComponents) {
      if (!policy->Enabled(c)) continue;
      for (RenderedObject& o : RenderComponent(c, render)) wanted.push_back(std::move(o));
    }

    // Apply what differs from the cache, in order; remember what is wanted.
    std::map<std::string, kube::Informer*> by_resource;
    for (kube::Informer* inf : owned_) by_resource[ResourceKey(inf->options().resource)] = inf;
    std::set<std::pair<std::string, std::string>> wanted_keys;
    for (const RenderedObject& o : wanted) {
      const std::string rkey = ResourceKey(o.resource);
      const std::string key = kube::MakeKey(o.resource.namespaced ? kube::Namespace(o.object) : "",
                                            kube::Name(o.object));
      wanted_keys.insert({rkey, key});
      auto it = by_resource.find(rkey);
      kube::ObjectPtr cached = it == by_resource.end() ? nullptr : it->second->Get(key);
      if (cached && Hash(*cached) == Hash(o.object) && !kube::IsBeingDeleted(*cached)) continue;
      auto applied = client_.Apply(o.resource, o.object, options_.field_manager, true);
      if (!applied.ok()) {
        write_error = applied.status().Annotate("applying " + rkey + " " + key);
        break;
      }
      metrics_.object_writes_total++;
    }

    // Owned objects nothing wants any more: a disabled component, a driver
    // DaemonSet for an OS no GPU node runs.
    if (write_error.ok()) {
      for (kube::Informer* inf : owned_) {
        const std::string rkey = ResourceKey(inf->options().resource);
        for (const kube::ObjectPtr& obj : inf->List()) {
          if (wanted_keys.count({rkey, kube::KeyOf(*obj)}) || kube::IsBeingDeleted(*obj)) continue;
          kube::DeleteOptions opts;
          opts.propagation_policy = "Background";
          Status s = client_.Delete(inf->options().resource, kube::Namespace(*obj),
                                    kube::Name(*obj), opts);
          if (!s.ok() && !kube::IsNotFound(s)) {
            write_error = s.Annotate("deleting " + rkey + " " + kube::KeyOf(*obj));
            break;
          }
          metrics_.object_writes_total++;
        }
        if (!write_error.ok()) break;
      }
    }

    // The namespace's pod-security labels (psa.enabled).
    if (write_error.ok()) write_error = SyncPsaLabels(NamespacePsaLabels(*policy));
    in.reconcile_error = write_error;

    // Readiness from the DaemonSets as cached.
    for (Component c : kAllComponents) {
      std::vector<Json> daemonsets;
      for (const kube::ObjectPtr& ds : daemonsets_->List()) {
        if (kube::Label(*ds, kComponentLabel) == ComponentName(c)) daemonsets.push_back(*ds);
      }
      in.components.push_back(EvaluateComponent(c, policy->Enabled(c), daemonsets));
    }
    in.validation_blockers = ValidationBlockers(validator_pods_->ByIndex(kBlockingIndex, "true"));
  }

  Json old = active.value("status", Json::object());
  Json status = BuildStatus(in, old, now);
  if (StatusChanged(old, status)) {
    kube::PatchOptions opts;
    opts.subresource = "status";
    auto r = client_.Patch(res::kClusterPolicies, "", kube::Name(active), kube::PatchType::kMerge,
                           Json{{"status", status}}, opts);
    if (!r.ok() && !kube::IsNotFound(r.status()) && write_error.ok()) write_error = r.status();
  }

  const std::string state = status.value("state", "");
  auto ready = kube::FindCondition(Json{{"status", status}}, "Ready");
  // An Event and a log line for each state change, as persisted (so a
  // restart repeats none).
  if (state != old.value("state", "") && ready) {
    LogInfo("ClusterPolicy state changed", {{"name", kube::Name(active)},
                                            {"from", old.value("state", "")},
                                            {"to", state},
                                            {"reason", ready->reason},
                                            {"message", ready->message}});
    if (events_ != nullptr) {
      events_->Event(active,
                     state == "ready" ? kube::EventType::kNormal : kube::EventType::kWarning,
                     ready->reason, ready->message);
    }
  }

  if (!in.reconcile_error.ok()) {
    metrics_.reconciliation_failed_total++;
    metrics_.reconciliation_status = -1;
    // A spec that does not parse waits for the user to change it; a failed
    // write is retried with backoff, but a missing namespace of the
    // operator's (created after it started) is looked for every 2 s: the
    // backoff would reach 30 s while the user waits on it.
    if (!policy.ok()) return kube::ReconcileResult::Ok();
    if (kube::IsNotFound(in.reconcile_error)) {
      auto ns = client_.Get(res::kNamespaces, "", options_.env.namespace_);
      if (!ns.ok() && kube::IsNotFound(ns.status())) {
        if (!awaiting_namespace_.exchange(true)) {
          LogWarn("waiting for the operator's namespace; checking every 2 s",
                  {{"namespace", options_.env.namespace_},
                   {"fix", "kubectl create namespace " + options_.env.namespace_}});
        }
        return kube::ReconcileResult::RequeueAfter(std::chrono::seconds(2));
      }
    }
    return kube::ReconcileResult::Error(in.reconcile_error);
  }
  if (awaiting_namespace_.exchange(false)) {
    LogInfo("the operator's namespace exists now", {{"namespace", options_.env.namespace_}});
  }
  metrics_.reconciliation_status = state == "ready" ? 1 : 0;
  metrics_.reconciliation_last_success_ts_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  return kube::ReconcileResult::Ok();
}

}  // namespace gpuop::op
