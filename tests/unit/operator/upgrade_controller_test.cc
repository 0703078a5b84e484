// The driver upgrade controller against the API emulator. The test plays the
// DaemonSet controller and the kubelet: it replaces deleted driver pods with
// pods of the DaemonSet's current revision, marks them Ready, and finishes
// the deletion of evicted pods.
#include "operator/upgrade_controller.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include "kube/event_recorder.h"
#include "kube/object.h"
#include "kube/operand_pause.h"
#include "kube/resource.h"
#include "operator/node_labels.h"
#include "tests/testing/api_emulator.h"

namespace gpuop::op {
namespace {

using Json = nlohmann::json;
namespace res = kube::resources;
namespace up = upgrade;

constexpr const char* kNs = "gpu-operator";
constexpr const char* kDs = "nvidia-driver-daemonset";
const kube::Resource kRevisions{"apps", "v1", "controllerrevisions", "ControllerRevision", true};
const kube::Resource kReplicaSets{"apps", "v1", "replicasets", "ReplicaSet", true};
const std::vector<std::string> kNodes = {"gpu-1", "gpu-2", "gpu-3"};
constexpr const char* kValidatorDeployLabel = "nvidia.com/gpu.deploy.operator-validator";

bool InProgress(const std::string& state) {
  return state != "" && state != "upgrade-done" && state != "upgrade-required";
}

class UpgradeControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().message();
    api_ = std::move(api).value();
    for (const char* ns : {kNs, "ml"}) {
      ASSERT_TRUE(
          client()
              .Create(res::kNamespaces, "",
                      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
              .ok());
    }
    for (const std::string& node : kNodes) CreateNode(node);
    Json ds = {
        {"apiVersion", "apps/v1"},
        {"kind", "DaemonSet"},
        {"metadata",
         {{"name", kDs},
          {"namespace", kNs},
          {"labels", {{"app.kubernetes.io/component", "driver"}}}}},
        {"spec",
         {{"selector", {{"matchLabels", {{"app", kDs}}}}},
          {"updateStrategy", {{"type", "OnDelete"}}},
          {"template",
           {{"metadata", {{"labels", {{"app", kDs}, {"app.kubernetes.io/component", "driver"}}}}},
            {"spec", {{"containers", Json::array({DriverContainer("535.129.03")})}}}}}}}};
    auto created = client().Create(res::kDaemonSets, kNs, ds);
    ASSERT_TRUE(created.ok()) << created.status().message();
    ds_uid_ = kube::Uid(*created);
    // Real owners for the other pods (the garbage collector removes orphans).
    validator_owner_ = CreateOwner(res::kDaemonSets, kNs, "nvidia-operator-validator");
    workload_owner_ = CreateOwner(kReplicaSets, "ml", "train");
    NewRevision("535.129.03");
    for (const std::string& node : kNodes) {
      CreateDriverPod(node);
      CreatePod(kNs, "validator-" + node, node, {{"app", "nvidia-operator-validator"}}, false);
      CreatePod("ml", "train-" + node, node, {{"app", "train"}}, true);
    }
    policy_.auto_upgrade = true;
    policy_.max_unavailable.reset();
  }

  void TearDown() override {
    StopController();
    if (watch_) watch_->Stop();
  }

  kube::Client& client() { return *api_.client; }

  // A controller owner reference to a new DaemonSet or ReplicaSet.
  Json CreateOwner(const kube::Resource& r, const std::string& ns, const std::string& name) {
    Json labels = {{"app", name}};
    Json obj = {
        {"apiVersion", "apps/v1"},
        {"kind", r.kind},
        {"metadata", {{"name", name}, {"namespace", ns}}},
        {"spec",
         {{"selector", {{"matchLabels", labels}}},
          {"template",
           {{"metadata", {{"labels", labels}}},
            {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "img"}}})}}}}}}}};
    auto created = client().Create(r, ns, obj);
    EXPECT_TRUE(created.ok()) << created.status().message();
    return {{"apiVersion", "apps/v1"},
            {"kind", r.kind},
            {"name", name},
            {"uid", created.ok() ? kube::Uid(*created) : ""},
            {"controller", true}};
  }

  static Json DriverContainer(const std::string& version) {
    return {{"name", "nvidia-driver"},
            {"image", "nvcr.io/nvidia/driver:" + version},
            {"env", Json::array({{{"name", "DRIVER_CONFIG_DIGEST"}, {"value", version}}})}};
  }

  void CreateNode(const std::string& name) {
    Json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", name},
          {"labels", {{"nvidia.com/gpu.present", "true"}, {kValidatorDeployLabel, "true"}}}}}};
    ASSERT_TRUE(client().Create(res::kNodes, "", node).ok());
    kube::PatchOptions status;
    status.subresource = "status";
    auto r = client().Patch(
        res::kNodes, "", name, kube::PatchType::kMerge,
        {{"status", {{"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}},
        status);
    ASSERT_TRUE(r.ok()) << r.status().message();
  }

  // The DaemonSet controller's part of a template change: a new revision.
  void NewRevision(const std::string& version) {
    ++revision_;
    hash_ = "h" + std::to_string(revision_);
    if (revision_ > 1) {
      auto r = client().Patch(
          res::kDaemonSets, kNs, kDs, kube::PatchType::kMerge,
          {{"spec",
            {{"template",
              {{"spec", {{"containers", Json::array({DriverContainer(version)})}}}}}}}});
      ASSERT_TRUE(r.ok()) << r.status().message();
    }
    version_ = version;
    Json rev = {{"apiVersion", "apps/v1"},
                {"kind", "ControllerRevision"},
                {"metadata",
                 {{"name", std::string(kDs) + "-" + hash_},
                  {"namespace", kNs},
                  {"labels", {{"app.kubernetes.io/component", "driver"}}},
                  {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                                    {"kind", "DaemonSet"},
                                                    {"name", kDs},
                                                    {"uid", ds_uid_},
                                                    {"controller", true}}})}}},
                {"data", Json::object()},
                {"revision", revision_}};
    auto created = client().Create(kRevisions, kNs, rev);
    ASSERT_TRUE(created.ok()) << created.status().message();
  }

  void CreatePod(const std::string& ns, const std::string& name, const std::string& node,
                 Json labels, bool gpu, Json owner = nullptr, Json container = nullptr,
                 bool ready = true, int restarts = 0) {
    if (owner.is_null()) owner = gpu ? workload_owner_ : validator_owner_;
    if (container.is_null()) container = {{"name", "c"}, {"image", "img"}};
    if (gpu) container["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", ns},
                  {"labels", labels},
                  {"ownerReferences", Json::array({owner})}}},
                {"spec", {{"nodeName", node}, {"containers", Json::array({container})}}}};
    auto created = client().Create(res::kPods, ns, pod);
    ASSERT_TRUE(created.ok()) << created.status().message();
    SetPodStatus(ns, name, ready, restarts);
  }

  // ResourceClaim ml/`name`, allocated by `driver` as the scheduler does.
  void CreateClaim(const std::string& name, const std::string& driver) {
    const Json request{{"name", "gpu"}, {"exactly", {{"deviceClassName", driver}}}};
    Json claim{{"apiVersion", "resource.k8s.io/v1"},
               {"kind", "ResourceClaim"},
               {"metadata", {{"name", name}, {"namespace", "ml"}}},
               {"spec", {{"devices", {{"requests", Json::array({request})}}}}}};
    auto made = client().Create(res::kResourceClaims, "ml", claim);
    ASSERT_TRUE(made.ok()) << made.status().message();
    Json allocated = *made;
    allocated["status"]["allocation"]["devices"]["results"] = Json::array(
        {{{"request", "gpu"}, {"driver", driver}, {"pool", "gpu-1"}, {"device", "gpu-0"}}});
    auto updated = client().UpdateStatus(res::kResourceClaims, allocated);
    ASSERT_TRUE(updated.ok()) << updated.status().message();
  }

  // A Running workload pod on gpu-1 using claim ml/`claim`: by name, or made
  // from a template and named in its status (the resource claim controller's).
  void CreateClaimPod(const std::string& name, const std::string& claim, bool from_template) {
    Json ref{{"name", "gpu"}};
    if (from_template) {
      ref["resourceClaimTemplateName"] = "one-gpu";
    } else {
      ref["resourceClaimName"] = claim;
    }
    Json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", name},
          {"namespace", "ml"},
          {"labels", {{"app", "train"}}},
          {"ownerReferences", Json::array({workload_owner_})}}},
        {"spec",
         {{"nodeName", "gpu-1"},
          {"resourceClaims", Json::array({ref})},
          {"containers", Json::array({{{"name", "c"},
                                       {"image", "img"},
                                       {"resources", {{"claims", {{{"name", "gpu"}}}}}}}})}}}};
    auto created = client().Create(res::kPods, "ml", pod);
    ASSERT_TRUE(created.ok()) << created.status().message();
    SetPodStatus("ml", name, true, 0);
    if (!from_template) return;
    kube::PatchOptions status;
    status.subresource = "status";
    auto p = client().Patch(res::kPods, "ml", name, kube::PatchType::kMerge,
                            {{"status",
                              {{"resourceClaimStatuses",
                                Json::array({{{"name", "gpu"}, {"resourceClaimName", claim}}})}}}},
                            status);
    ASSERT_TRUE(p.ok()) << p.status().message();
  }

  // A new driver revision, and every node upgraded to it.
  bool UpgradeAll() {
    NewRevision("550.54.15");
    return RunUntil([&](const auto& nodes) {
      for (const auto& [name, n] : nodes) {
        if (StateOf(n) != "upgrade-done") return false;
      }
      auto pods = client().List(res::kPods, kNs, {.label_selector = "app=nvidia-driver-daemonset"});
      for (const Json& p : pods->items) {
        if (kube::Label(p, "controller-revision-hash") != hash_) return false;
      }
      return true;
    });
  }

  bool PodExists(const std::string& ns, const std::string& name) {
    return client().Get(res::kPods, ns, name).ok();
  }

  void SetPodStatus(const std::string& ns, const std::string& name, bool ready, int restarts) {
    const char* r = ready ? "True" : "False";
    kube::PatchOptions status;
    status.subresource = "status";
    auto p = client().Patch(
        res::kPods, ns, name, kube::PatchType::kMerge,
        {{"status",
          {{"phase", "Running"},
           {"conditions", Json::array({{{"type", "Ready"}, {"status", r}}})},
           {"containerStatuses",
            Json::array({{{"name", "c"}, {"ready", ready}, {"restartCount", restarts}}})}}}},
        status);
    ASSERT_TRUE(p.ok()) << p.status().message();
  }

  void CreateDriverPod(const std::string& node) {
    Json owner = {{"apiVersion", "apps/v1"},
                  {"kind", "DaemonSet"},
                  {"name", kDs},
                  {"uid", ds_uid_},
                  {"controller", true}};
    Json container = DriverContainer(version_);
    container["name"] = "c";
    CreatePod(kNs, std::string(kDs) + "-" + node + "-" + hash_, node,
              {{"app", kDs},
               {"app.kubernetes.io/component", "driver"},
               {"controller-revision-hash", hash_}},
              false, owner, container, /*ready=*/crashing_version_ != version_,
              /*restarts=*/crashing_version_ == version_ ? 11 : 0);
  }

  // One round of the DaemonSet controllers, the kubelets and the new driver
  // pods' driver managers (which restore the operands' deploy labels).
  void KubeletStep() {
    auto pods = client().List(res::kPods, "");
    ASSERT_TRUE(pods.ok());
    std::set<std::string> with_driver;
    std::set<std::string> with_validator;
    std::set<std::string> deleting_driver;
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    for (const Json& p : pods->items) {
      bool driver = kube::Label(p, "app") == kDs;
      if (kube::IsBeingDeleted(p)) {
        if (driver) deleting_driver.insert(kube::PodNodeName(p));
        (void)client().Delete(res::kPods, kube::Namespace(p), kube::Name(p), now);
      } else if (driver) {
        with_driver.insert(kube::PodNodeName(p));
      } else if (kube::Label(p, "app") == "nvidia-operator-validator") {
        with_validator.insert(kube::PodNodeName(p));
      }
    }
    auto nodes = Nodes();
    for (const std::string& node : kNodes) {
      if (deleting_driver.count(node) && with_validator.count(node)) {
        std::lock_guard lock(mu_);
        ++driver_deleted_under_operands_;
      }
      const bool validator_selected = kube::Label(nodes[node], kValidatorDeployLabel) == "true";
      if (validator_selected && !with_validator.count(node)) {
        CreatePod(kNs, "validator-" + node, node, {{"app", "nvidia-operator-validator"}}, false);
      } else if (!validator_selected && with_validator.count(node)) {
        (void)client().Delete(res::kPods, kNs, "validator-" + node, now);
      }
      if (with_driver.count(node)) continue;
      auto restore = kube::RestoreChanges(NodeLabels(nodes[node]), kube::PausableLabelsAndDra(""));
      if (!restore.empty()) {
        ASSERT_TRUE(client()
                        .Patch(res::kNodes, "", node, kube::PatchType::kStrategic,
                               kube::LabelPatch(restore))
                        .ok());
      }
      CreateDriverPod(node);
    }
  }

  std::map<std::string, Json> Nodes() {
    std::map<std::string, Json> out;
    auto nodes = client().List(res::kNodes, "");
    EXPECT_TRUE(nodes.ok());
    for (Json& n : nodes->items) {
      std::string name = kube::Name(n);
      out[name] = std::move(n);
    }
    return out;
  }

  std::string StateOf(const Json& node) { return kube::Label(node, up::kStateLabel).value_or(""); }

  // Steps the kubelets until `done` holds (a generous deadline).
  bool RunUntil(const std::function<bool(const std::map<std::string, Json>&)>& done) {
    for (int i = 0; i < 3000; ++i) {
      if (done(Nodes())) return true;
      KubeletStep();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (const auto& [name, n] : Nodes()) {
      ADD_FAILURE() << name << ": state " << StateOf(n) << ", unschedulable "
                    << kube::IsUnschedulable(n) << ", annotations "
                    << n["metadata"].value("annotations", Json::object()).dump();
    }
    auto pods = client().List(res::kPods, "");
    for (const Json& p : pods->items) {
      ADD_FAILURE() << kube::Namespace(p) << "/" << kube::Name(p) << " on " << kube::PodNodeName(p)
                    << ": " << p.value("status", Json()).dump();
    }
    return false;
  }
  bool AllIn(const std::string& state) {
    return RunUntil([&](const auto& nodes) {
      for (const auto& [name, n] : nodes) {
        if (StateOf(n) != state) return false;
      }
      return true;
    });
  }

  void StartController() {
    factory_ = std::make_unique<kube::SharedInformerFactory>(&client());
    kube::InformerOptions nodes;
    nodes.resource = res::kNodes;
    nodes_ = std::make_unique<kube::Informer>(&client(), nodes);
    UpgradeControllerOptions o;
    o.namespace_ = kNs;
    o.config = [this] {
      std::lock_guard lock(mu_);
      return UpgradeConfig{mode_, policy_};
    };
    recorder_ = std::make_unique<kube::EventRecorder>(client(), kube::EventRecorderOptions{});
    controller_ = std::make_unique<UpgradeController>(client(), o, recorder_.get(), &metrics_);
    controller_->Setup(*factory_, *nodes_);
    factory_->Start();
    nodes_->Start();
    thread_ = std::jthread([this](std::stop_token s) { (void)controller_->Run(s); });
  }

  void StopController() {
    if (!controller_) return;
    thread_.request_stop();
    thread_.join();
    controller_.reset();
    recorder_.reset();
    nodes_.reset();
    factory_.reset();
  }

  // The messages of the GPUDriverUpgrade Events about `node`.
  std::vector<std::string> EventsAbout(const std::string& node) {
    EXPECT_TRUE(recorder_->Flush(std::chrono::seconds(30)));
    std::vector<std::string> out;
    auto events = client().List(res::kEvents, "");
    EXPECT_TRUE(events.ok());
    for (const Json& e : events->items) {
      if (e.value("reason", "") == up::kEventReason &&
          e["involvedObject"].value("name", "") == node) {
        out.push_back(e.value("message", ""));
      }
    }
    return out;
  }

  // Counts, on every node change a watch sees, the nodes in progress.
  void WatchStates() {
    kube::InformerOptions o;
    o.resource = res::kNodes;
    watch_ = std::make_unique<kube::Informer>(&client(), o);
    kube::EventHandler h;
    h.on_update = [this](const kube::ObjectPtr&, const kube::ObjectPtr&) {
      int in_progress = 0;
      for (const kube::ObjectPtr& n : watch_->List()) {
        if (InProgress(StateOf(*n))) ++in_progress;
      }
      std::lock_guard lock(mu_);
      max_in_progress_ = std::max(max_in_progress_, in_progress);
    };
    watch_->AddEventHandler(h);
    watch_->Start();
    ASSERT_TRUE(watch_->WaitForSync(std::chrono::seconds(30)));
  }

  void Cordon(const std::string& node) {
    ASSERT_TRUE(client()
                    .Patch(res::kNodes, "", node, kube::PatchType::kMerge,
                           {{"spec", {{"unschedulable", true}}}})
                    .ok());
  }

  testing::ApiEmulator api_;
  std::string ds_uid_;
  Json validator_owner_;
  Json workload_owner_;
  int revision_ = 0;
  std::string hash_;
  std::string version_;
  std::string crashing_version_;

  std::mutex mu_;
  UpgradeConfig::Mode mode_ = UpgradeConfig::Mode::kOn;  // GUARDED_BY(mu_)
  up::UpgradePolicy policy_;                             // GUARDED_BY(mu_)
  int max_in_progress_ = 0;                              // GUARDED_BY(mu_)
  int driver_deleted_under_operands_ = 0;                // GUARDED_BY(mu_)

  UpgradeMetrics metrics_;
  std::unique_ptr<kube::SharedInformerFactory> factory_;
  std::unique_ptr<kube::Informer> nodes_;
  std::unique_ptr<kube::EventRecorder> recorder_;
  std::unique_ptr<UpgradeController> controller_;
  std::jthread thread_;
  std::unique_ptr<kube::Informer> watch_;
};

TEST_F(UpgradeControllerTest, UpgradesThreeNodesOneAtATimeAndKeepsTheAdminCordon) {
  Cordon("gpu-2");
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));  // a fresh install: nothing to replace
  for (const auto& [name, n] : Nodes()) {
    EXPECT_EQ(kube::Annotation(n, up::kEnabledAnnotation), "true") << name;
  }
  WatchStates();

  NewRevision("550.54.15");
  ASSERT_TRUE(RunUntil([&](const auto& nodes) {
    for (const auto& [name, n] : nodes) {
      if (StateOf(n) != "upgrade-done" || !kube::Label(n, up::kStateLabel)) return false;
    }
    auto pods = client().List(res::kPods, kNs, {.label_selector = "app=nvidia-driver-daemonset"});
    for (const Json& p : pods->items) {
      if (kube::Label(p, "controller-revision-hash") != hash_) return false;
    }
    return true;
  }));
  {
    std::lock_guard lock(mu_);
    EXPECT_EQ(max_in_progress_, 1);
    // The operands had left each node before its old driver pod was deleted.
    EXPECT_EQ(driver_deleted_under_operands_, 0);
  }
  auto nodes = Nodes();
  for (const auto& [name, n] : nodes) {
    EXPECT_EQ(kube::Label(n, kValidatorDeployLabel), "true") << name;
    EXPECT_FALSE(kube::Annotation(n, up::kOperandsPausedAnnotation).has_value()) << name;
  }
  bool paused = false;
  for (const std::string& m : EventsAbout("gpu-1")) {
    paused = paused || m.find("paused the GPU operands") != std::string::npos;
  }
  EXPECT_TRUE(paused);
  EXPECT_TRUE(kube::IsUnschedulable(nodes["gpu-2"]));  // the admin's cordon stays
  EXPECT_FALSE(kube::IsUnschedulable(nodes["gpu-1"]));
  EXPECT_FALSE(kube::IsUnschedulable(nodes["gpu-3"]));
  for (const auto& [name, n] : nodes) {
    EXPECT_FALSE(kube::Annotation(n, up::kInitialStateAnnotation).has_value()) << name;
    EXPECT_FALSE(kube::Annotation(n, up::kValidationStartAnnotation).has_value()) << name;
  }
  // The GPU pods were evicted.
  auto gpu_pods = client().List(res::kPods, "ml");
  ASSERT_TRUE(gpu_pods.ok());
  EXPECT_TRUE(gpu_pods->items.empty());
  EXPECT_EQ(metrics_.done.load(), 3);
  EXPECT_EQ(metrics_.auto_upgrade_enabled.load(), 1);
}

TEST_F(UpgradeControllerTest, AFailingDriverStopsTheRolloutOnTheFirstNode) {
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));
  crashing_version_ = "999.0";
  NewRevision("999.0");
  ASSERT_TRUE(
      RunUntil([&](const auto& nodes) { return StateOf(nodes.at("gpu-1")) == "upgrade-failed"; }));
  // Give the controller every chance to start another node.
  for (int i = 0; i < 25; ++i) {
    KubeletStep();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto nodes = Nodes();
  EXPECT_TRUE(kube::IsUnschedulable(nodes["gpu-1"]));  // no retry; stays cordoned
  for (const char* other : {"gpu-2", "gpu-3"}) {
    EXPECT_EQ(StateOf(nodes[other]), "upgrade-required") << other;
    EXPECT_FALSE(kube::IsUnschedulable(nodes[other])) << other;
    auto old = client().Get(res::kPods, kNs, std::string(kDs) + "-" + other + "-h1");
    EXPECT_TRUE(old.ok()) << other << " keeps its working driver";
  }
  EXPECT_EQ(metrics_.failed.load(), 1);
  EXPECT_EQ(metrics_.pending.load(), 2);
  bool said_why = false;
  for (const std::string& m : EventsAbout("gpu-1")) {
    said_why = said_why || m.find("not Ready after 11 restarts") != std::string::npos;
  }
  EXPECT_TRUE(said_why);
}

TEST_F(UpgradeControllerTest, AnEvictionAPodDisruptionBudgetRefusesFailsTheNodeAtTheTimeout) {
  policy_.pod_deletion.timeout_seconds = 1;
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));
  // Every eviction answered as a PodDisruptionBudget answers: 429, no Retry-After.
  ASSERT_TRUE(api_.server->faults().Set("error=429,verb=create,resource=pods,retry-after=0").ok());
  NewRevision("550.54.15");
  ASSERT_TRUE(
      RunUntil([&](const auto& nodes) { return StateOf(nodes.at("gpu-1")) == "upgrade-failed"; }));
  ASSERT_TRUE(api_.server->faults().Set("").ok());
  EXPECT_TRUE(client().Get(res::kPods, "ml", "train-gpu-1").ok()) << "the guarded pod stays";
  EXPECT_TRUE(client().Get(res::kPods, kNs, std::string(kDs) + "-gpu-1-h1").ok())
      << "the old driver stays";
  auto nodes = Nodes();
  EXPECT_FALSE(kube::Annotation(nodes["gpu-1"], up::kPodDeletionStartAnnotation).has_value());
  bool timed_out = false;
  for (const std::string& m : EventsAbout("gpu-1")) {
    timed_out = timed_out || m.find("a PodDisruptionBudget may forbid") != std::string::npos;
  }
  EXPECT_TRUE(timed_out) << "the Event says why";
  for (const char* other : {"gpu-2", "gpu-3"}) {
    EXPECT_EQ(StateOf(nodes[other]), "upgrade-required") << other;
  }
}

TEST_F(UpgradeControllerTest, PodsHoldingGpuNvidiaComClaimsAreEvicted) {
  CreateClaim("shared-gpu", "gpu.nvidia.com");
  CreateClaim("tmpl-gpu-7xk", "gpu.nvidia.com");
  CreateClaim("nic", "nic.example.com");
  CreateClaimPod("dra-named", "shared-gpu", /*from_template=*/false);
  CreateClaimPod("dra-tmpl", "tmpl-gpu-7xk", /*from_template=*/true);
  CreateClaimPod("nic-user", "nic", /*from_template=*/false);
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));
  ASSERT_TRUE(UpgradeAll());
  EXPECT_FALSE(PodExists("ml", "dra-named"));
  EXPECT_FALSE(PodExists("ml", "dra-tmpl"));
  EXPECT_FALSE(PodExists("ml", "train-gpu-1"));
  EXPECT_TRUE(PodExists("ml", "nic-user")) << "another driver's claim: not a GPU pod";
  bool said = false;
  for (const std::string& m : EventsAbout("gpu-1")) {
    said = said || (m.find("ml/dra-named") != std::string::npos &&
                    m.find("ml/dra-tmpl") != std::string::npos);
  }
  EXPECT_TRUE(said) << "the eviction Event names the DRA pods";
}

TEST_F(UpgradeControllerTest, WithoutTheResourceApiGpuPodsAreEvictedAsBefore) {
  CreateClaim("shared-gpu", "gpu.nvidia.com");
  CreateClaimPod("dra-named", "shared-gpu", /*from_template=*/false);
  // A cluster that does not serve resource.k8s.io/v1: no claim is seen and
  // the 404 fails nothing.
  ASSERT_TRUE(api_.server->faults().Set("error=404,verb=list,resource=resourceclaims").ok());
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));
  ASSERT_TRUE(UpgradeAll());
  EXPECT_FALSE(PodExists("ml", "train-gpu-1"));
  EXPECT_TRUE(PodExists("ml", "dra-named"));
}

TEST_F(UpgradeControllerTest, TurningAutoUpgradeOffRemovesTheLabels) {
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));
  // gpu-1 as the controller leaves it between pausing its operands and
  // deleting its driver pod: turned off then, its operands come back.
  ASSERT_TRUE(client()
                  .Patch(res::kNodes, "", "gpu-1", kube::PatchType::kMerge,
                         {{"metadata",
                           {{"labels", {{kValidatorDeployLabel, "paused-for-driver-upgrade"}}},
                            {"annotations", {{up::kOperandsPausedAnnotation, "1800000000"}}}}}})
                  .ok());
  {
    std::lock_guard lock(mu_);
    mode_ = UpgradeConfig::Mode::kOff;
  }
  controller_->Enqueue();
  ASSERT_TRUE(RunUntil([&](const auto& nodes) {
    for (const auto& [name, n] : nodes) {
      if (kube::Label(n, up::kStateLabel) || kube::Annotation(n, up::kEnabledAnnotation) ||
          kube::Annotation(n, up::kOperandsPausedAnnotation)) {
        return false;
      }
    }
    return true;
  }));
  EXPECT_EQ(kube::Label(Nodes()["gpu-1"], kValidatorDeployLabel), "true");
  EXPECT_EQ(metrics_.auto_upgrade_enabled.load(), 0);
}

// The operator stopped in each state, as a crash right after it wrote the
// state label leaves the cluster, and started again: it finishes.
class UpgradeResumeTest : public UpgradeControllerTest,
                          public ::testing::WithParamInterface<std::string> {};

TEST_P(UpgradeResumeTest, ResumesAndFinishes) {
  const std::string state = GetParam();
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));
  StopController();

  NewRevision("550.54.15");
  // gpu-1 got as far as `state`; what the controller had done by then is done.
  const up::State s = up::ParseState(state);
  Json annotations = Json::object();
  const bool cordoned = s != up::State::kUpgradeRequired && s != up::State::kCordonRequired;
  const bool pods_gone = s == up::State::kPodRestartRequired ||
                         s == up::State::kValidationRequired || s == up::State::kUncordonRequired ||
                         s == up::State::kUpgradeFailed;
  const bool driver_replaced = s == up::State::kValidationRequired ||
                               s == up::State::kUncordonRequired || s == up::State::kUpgradeFailed;
  if (s == up::State::kPodDeletionRequired) {
    annotations[up::kPodDeletionStartAnnotation] =
        up::UnixSeconds(std::chrono::system_clock::now());
  }
  if (s == up::State::kValidationRequired) {
    annotations[up::kValidationStartAnnotation] = up::UnixSeconds(std::chrono::system_clock::now());
  }
  Json patch = {{"metadata", {{"labels", {{up::kStateLabel, state}}}}}};
  if (!annotations.empty()) patch["metadata"]["annotations"] = annotations;
  if (cordoned) patch["spec"]["unschedulable"] = true;
  ASSERT_TRUE(client().Patch(res::kNodes, "", "gpu-1", kube::PatchType::kMerge, patch).ok());
  for (const char* other : {"gpu-2", "gpu-3"}) {
    ASSERT_TRUE(client()
                    .Patch(res::kNodes, "", other, kube::PatchType::kMerge,
                           {{"metadata", {{"labels", {{up::kStateLabel, "upgrade-required"}}}}}})
                    .ok());
  }
  if (pods_gone) {
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    ASSERT_TRUE(client().Delete(res::kPods, "ml", "train-gpu-1", now).ok());
  }
  if (driver_replaced) {
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    ASSERT_TRUE(client().Delete(res::kPods, kNs, std::string(kDs) + "-gpu-1-h1", now).ok());
    CreateDriverPod("gpu-1");
  }

  WatchStates();
  StartController();
  ASSERT_TRUE(AllIn("upgrade-done"));
  auto nodes = Nodes();
  for (const auto& [name, n] : nodes) {
    EXPECT_FALSE(kube::IsUnschedulable(n)) << name;
    EXPECT_TRUE(client().Get(res::kPods, kNs, std::string(kDs) + "-" + name + "-h2").ok()) << name;
  }
  std::lock_guard lock(mu_);
  EXPECT_EQ(max_in_progress_, 1);
}

INSTANTIATE_TEST_SUITE_P(EveryState, UpgradeResumeTest,
                         ::testing::Values("upgrade-required", "cordon-required",
                                           "wait-for-jobs-required", "pod-deletion-required",
                                           "drain-required", "pod-restart-required",
                                           "validation-required", "uncordon-required",
                                           "upgrade-failed"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::erase(name, '-');
                           return name;
                         });

}  // namespace
}  // namespace gpuop::op
