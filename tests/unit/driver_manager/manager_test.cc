// The driver manager's flow against the in-process API emulator and a fake
// kernel: the test plays the DaemonSet controller (deleting paused operand
// pods) where a case needs it.
#include "driver_manager/manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <mutex>
#include <set>

#include "base/files.h"
#include "driver_manager/core.h"
#include "kube/object.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace gpuop::driver_manager {
namespace {

namespace res = kube::resources;
using Labels = std::map<std::string, std::string>;

// nvidia, nvidia_uvm and nvidia_modeset loaded; Unload refuses the modules in
// `busy`, as the kernel refuses a module in use.
class FakeKernel : public host::KernelModules {
 public:
  FakeKernel() {
    loaded_ = {{"nvidia_uvm", 0, {}},
               {"nvidia_modeset", 0, {}},
               {"nvidia", 2, {"nvidia_uvm", "nvidia_modeset"}}};
  }
  Result<std::vector<host::KernelModule>> List() override {
    std::lock_guard lock(mu_);
    return loaded_;
  }
  Status Unload(const std::string& name) override {
    std::lock_guard lock(mu_);
    if (busy_.contains(name)) {
      return FailedPrecondition("kernel module " + name + " is in use (1 user(s))");
    }
    auto it = std::find_if(loaded_.begin(), loaded_.end(),
                           [&](const host::KernelModule& m) { return m.name == name; });
    if (it == loaded_.end()) return NotFound("kernel module " + name + " is not loaded");
    loaded_.erase(it);
    unloaded_.push_back(name);
    return Status::Ok();
  }
  Result<std::optional<std::string>> NvidiaVersion() override {
    return std::optional<std::string>("535.129.03");
  }
  void SetBusy(const std::string& name) {
    std::lock_guard lock(mu_);
    busy_.insert(name);
  }
  void UnloadAll() {
    std::lock_guard lock(mu_);
    loaded_.clear();
  }
  std::vector<std::string> unloaded() {
    std::lock_guard lock(mu_);
    return unloaded_;
  }

 private:
  std::mutex mu_;
  std::vector<host::KernelModule> loaded_;
  std::set<std::string> busy_;
  std::vector<std::string> unloaded_;
};

constexpr const char* kNode = "gpu-1";
constexpr const char* kNs = "gpu-operator";

class DriverManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().message();
    api_ = std::move(api).value();
    for (const char* ns : {kNs, "ml", "monitoring"}) {
      ASSERT_TRUE(
          client()
              .Create(res::kNamespaces, "",
                      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
              .ok());
    }
    events_ = std::make_unique<kube::EventRecorder>(
        client(), kube::EventRecorderOptions{.component = "nvidia-driver-manager"});
    o_.node_name = kNode;
    o_.operator_namespace = kNs;
    o_.host_root = host_root_.path();  // no driver on the host
    o_.run_dir = run_dir_.path();
    o_.enable_auto_drain = false;  // what the operator renders by default
    o_.operand_wait_timeout = std::chrono::seconds(30);
    o_.drain_timeout = std::chrono::seconds(30);
  }
  void TearDown() override { events_.reset(); }

  kube::Client& client() { return *api_.client; }

  void CreateNode(Labels labels, bool unschedulable = false, Json annotations = Json::object()) {
    Json node{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", kNode}, {"labels", labels}, {"annotations", std::move(annotations)}}},
              {"spec", Json::object()}};
    if (unschedulable) node["spec"]["unschedulable"] = true;
    auto made = client().Create(res::kNodes, "", node);
    ASSERT_TRUE(made.ok()) << made.status().message();
  }

  // A pod bound to `node`; a GPU pod asks for nvidia.com/gpu. Grace 0: the
  // emulator has no kubelet, so an eviction removes it at once.
  void CreatePod(const std::string& ns, const std::string& name, Labels labels, bool gpu,
                 const std::string& owner_kind = "ReplicaSet", const std::string& node = kNode) {
    Json container{{"name", "c"}, {"image", "busybox"}};
    if (gpu) container["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
    Json meta{{"name", name}, {"namespace", ns}, {"labels", labels}};
    if (!owner_kind.empty()) {
      meta["ownerReferences"] = Json::array({CreateOwner(owner_kind, ns, name + "-owner")});
    }
    Json pod{{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"metadata", meta},
             {"spec",
              {{"nodeName", node},
               {"terminationGracePeriodSeconds", 0},
               {"containers", Json::array({container})}}}};
    auto made = client().Create(res::kPods, ns, pod);
    ASSERT_TRUE(made.ok()) << made.status().message();
  }

  // ResourceClaim ns/`name`, allocated by `driver` as the scheduler does
  // (status.allocation through the status subresource).
  void CreateClaim(const std::string& ns, const std::string& name, const std::string& driver) {
    const Json request{{"name", "gpu"}, {"exactly", {{"deviceClassName", driver}}}};
    Json claim{{"apiVersion", "resource.k8s.io/v1"},
               {"kind", "ResourceClaim"},
               {"metadata", {{"name", name}, {"namespace", ns}}},
               {"spec", {{"devices", {{"requests", Json::array({request})}}}}}};
    auto made = client().Create(res::kResourceClaims, ns, claim);
    ASSERT_TRUE(made.ok()) << made.status().message();
    Json allocated = *made;
    allocated["status"]["allocation"]["devices"]["results"] = Json::array(
        {{{"request", "gpu"}, {"driver", driver}, {"pool", kNode}, {"device", "gpu-0"}}});
    auto updated = client().UpdateStatus(res::kResourceClaims, allocated);
    ASSERT_TRUE(updated.ok()) << updated.status().message();
  }

  // A pod on the node using claim `claim`: by name, or made from a template
  // and named in the pod's status as the resource claim controller does.
  void CreateClaimPod(const std::string& ns, const std::string& name, const std::string& claim,
                      bool from_template) {
    Json ref{{"name", "gpu"}};
    if (from_template) {
      ref["resourceClaimTemplateName"] = "gpu-template";
    } else {
      ref["resourceClaimName"] = claim;
    }
    Json pod{{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"metadata",
              {{"name", name},
               {"namespace", ns},
               {"ownerReferences", Json::array({CreateOwner("ReplicaSet", ns, name + "-owner")})}}},
             {"spec",
              {{"nodeName", kNode},
               {"terminationGracePeriodSeconds", 0},
               {"resourceClaims", Json::array({ref})},
               {"containers", Json::array({{{"name", "c"},
                                            {"image", "busybox"},
                                            {"resources", {{"claims", {{{"name", "gpu"}}}}}}}})}}}};
    auto made = client().Create(res::kPods, ns, pod);
    ASSERT_TRUE(made.ok()) << made.status().message();
    if (!from_template) return;
    Json with_status = *made;
    with_status["status"]["resourceClaimStatuses"] =
        Json::array({{{"name", "gpu"}, {"resourceClaimName", claim}}});
    auto updated = client().UpdateStatus(res::kPods, with_status);
    ASSERT_TRUE(updated.ok()) << updated.status().message();
  }

  // A controller that exists (made once), so the emulator's garbage
  // collector keeps its pods; nothing runs it.
  Json CreateOwner(const std::string& kind, const std::string& ns, const std::string& name) {
    const kube::Resource rs{"apps", "v1", "replicasets", "ReplicaSet", true};
    const kube::Resource& r = kind == "DaemonSet" ? res::kDaemonSets : rs;
    Json owner{
        {"apiVersion", "apps/v1"},
        {"kind", kind},
        {"metadata", {{"name", name}, {"namespace", ns}}},
        {"spec",
         {{"selector", {{"matchLabels", {{"owner", name}}}}},
          {"template",
           {{"metadata", {{"labels", {{"owner", name}}}}},
            {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}}}}}};
    auto made = client().Create(r, ns, owner);
    if (kube::IsAlreadyExists(made.status())) made = client().Get(r, ns, name);
    EXPECT_TRUE(made.ok()) << made.status().message();
    return {{"apiVersion", "apps/v1"},
            {"kind", kind},
            {"name", name},
            {"uid", made.ok() ? kube::Uid(*made) : ""},
            {"controller", true}};
  }

  // The operand pods on the node, as the operator's DaemonSets run them.
  void CreateOperands() {
    CreatePod(kNs, "nvidia-device-plugin-daemonset-x1", {{"app", "nvidia-device-plugin-daemonset"}},
              false, "DaemonSet");
    CreatePod(kNs, "gpu-feature-discovery-x2", {{"app", "gpu-feature-discovery"}}, false,
              "DaemonSet");
  }

  Labels NodeLabels() {
    auto node = client().Get(res::kNodes, "", kNode);
    EXPECT_TRUE(node.ok());
    return node.ok() ? kube::Labels(*node) : Labels{};
  }
  Json GetNode() {
    auto node = client().Get(res::kNodes, "", kNode);
    EXPECT_TRUE(node.ok());
    return node.ok() ? *node : Json{};
  }
  bool PodExists(const std::string& ns, const std::string& name) {
    return client().Get(res::kPods, ns, name).ok();
  }

  // Plays the DaemonSet controller: once the device plugin's label is paused,
  // deletes the operand pods the paused labels no longer select.
  std::future<void> DeleteOperandsWhenPaused() {
    return std::async(std::launch::async, [this] {
      bool paused = testing::WaitFor([&] {
        return NodeLabels()["nvidia.com/gpu.deploy.device-plugin"] == "paused-for-driver-upgrade";
      });
      EXPECT_TRUE(paused);
      for (const char* name : {"nvidia-device-plugin-daemonset-x1", "gpu-feature-discovery-x2"}) {
        kube::DeleteOptions d;
        d.grace_period_seconds = 0;
        EXPECT_TRUE(client().Delete(res::kPods, kNs, name, d).ok());
      }
    });
  }

  Status RunManager(std::stop_token stop = {}) {
    Status s = UninstallDriver(
        o_, {.client = client(), .kernel = kernel_, .events = *events_, .clock = clock_}, stop);
    EXPECT_TRUE(events_->Flush(std::chrono::seconds(10)));
    return s;
  }

  // reason → messages of the Events recorded about the node.
  std::multimap<std::string, std::string> NodeEvents() {
    std::multimap<std::string, std::string> out;
    auto list = client().List(res::kEvents, "default");
    EXPECT_TRUE(list.ok());
    if (!list.ok()) return out;
    for (const Json& e : list->items) {
      if (e["involvedObject"].value("name", "") != kNode) continue;
      out.emplace(e.value("reason", ""), e.value("message", ""));
    }
    return out;
  }

  testing::ApiEmulator api_;
  std::unique_ptr<kube::EventRecorder> events_;
  FakeKernel kernel_;
  const Clock* clock_ = nullptr;  // a test's FakeClock; null: the real one
  testing::TempDir host_root_{"dm-host"};
  testing::TempDir run_dir_{"dm-run"};
  Options o_;
};

const Labels kDeployed = {{"nvidia.com/gpu.deploy.device-plugin", "true"},
                          {"nvidia.com/gpu.deploy.gpu-feature-discovery", "true"},
                          {"nvidia.com/gpu.deploy.dcgm-exporter", "false"},
                          {"nvidia.com/gpu.deploy.driver", "true"},
                          {"nvidia.com/gpu.present", "true"}};

TEST_F(DriverManagerTest, PausesEvictsUnloadsAndRestores) {
  CreateNode(kDeployed);
  CreateOperands();
  CreatePod("ml", "train-0", {}, /*gpu=*/true);
  CreatePod("ml", "web-0", {}, /*gpu=*/false);
  CreatePod("ml", "train-elsewhere", {}, /*gpu=*/true, "ReplicaSet", "gpu-2");
  ASSERT_TRUE(WriteFileAtomic(run_dir_.path() + "/nvidia-driver.pid", "4242\n").ok());
  ASSERT_TRUE(WriteFileAtomic(run_dir_.path() + "/nvidia-driver.state", "old-digest\n").ok());
  o_.driver_config_digest = "new-digest";

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_TRUE(s.ok()) << s.message();

  EXPECT_EQ(kernel_.unloaded(),
            (std::vector<std::string>{"nvidia_modeset", "nvidia_uvm", "nvidia"}));
  EXPECT_FALSE(PodExists("ml", "train-0"));  // evicted
  EXPECT_TRUE(PodExists("ml", "web-0"));     // not a GPU pod: stays
  EXPECT_TRUE(PodExists("ml", "train-elsewhere"));
  EXPECT_FALSE(PathExists(run_dir_.path() + "/nvidia-driver.pid"));
  Labels labels = NodeLabels();
  for (const auto& [k, v] : kDeployed) EXPECT_EQ(labels[k], v) << k;
  EXPECT_EQ(labels.count("nvidia.com/gpu.deploy.client"), 0u);  // absent stays absent
  Json node = GetNode();
  EXPECT_FALSE(kube::IsUnschedulable(node));
  EXPECT_FALSE(kube::Annotation(node, kCordonAnnotation).has_value());

  auto events = NodeEvents();
  for (const char* reason : {"GPUDriverManagerOperandsPaused", "GPUDriverManagerOperandsGone",
                             "GPUDriverManagerCordoned", "GPUDriverManagerGPUPodsEvicted",
                             "GPUDriverManagerDriverUnloaded"}) {
    EXPECT_EQ(events.count(reason), 1u) << reason;
  }
  auto evicted = events.find("GPUDriverManagerGPUPodsEvicted");
  ASSERT_NE(evicted, events.end());
  EXPECT_NE(evicted->second.find("ml/train-0"), std::string::npos) << evicted->second;
}

TEST_F(DriverManagerTest, OperandsThatNeverLeaveEndTheWaitWithAnEventAndRestoredLabels) {
  CreateNode(kDeployed);
  CreateOperands();  // nobody deletes them
  CreatePod("ml", "train-0", {}, /*gpu=*/true);
  // Ten minutes on a fake clock: the test moves it once the manager waits.
  FakeClock clock;
  clock_ = &clock;
  o_.operand_wait_timeout = std::chrono::minutes(10);
  auto advance = std::async(std::launch::async, [&] {
    EXPECT_TRUE(testing::WaitFor([&] { return clock.waiters() > 0; }));
    clock.Advance(std::chrono::minutes(10));
  });

  Status s = RunManager();
  advance.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("did not leave node gpu-1 within 600s"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("gpu-operator/nvidia-device-plugin-daemonset-x1"), std::string::npos);
  EXPECT_NE(s.message().find("GPUOP_OPERAND_WAIT_TIMEOUT"), std::string::npos);

  EXPECT_TRUE(kernel_.unloaded().empty());
  EXPECT_TRUE(PodExists("ml", "train-0"));  // nothing evicted
  Labels labels = NodeLabels();
  for (const auto& [k, v] : kDeployed) EXPECT_EQ(labels[k], v) << k;
  EXPECT_FALSE(kube::IsUnschedulable(GetNode()));
  auto events = NodeEvents();
  auto timeout = events.find("GPUDriverManagerOperandsTimeout");
  ASSERT_NE(timeout, events.end());
  EXPECT_NE(timeout->second.find("gpu-operator/gpu-feature-discovery-x2"), std::string::npos);
  EXPECT_NE(timeout->second.find("labels restored"), std::string::npos) << timeout->second;
}

TEST_F(DriverManagerTest, AnAdminsCordonStaysAfterTheReload) {
  CreateNode(kDeployed, /*unschedulable=*/true);
  CreateOperands();
  CreatePod("ml", "train-0", {}, /*gpu=*/true);

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(PodExists("ml", "train-0"));
  Json node = GetNode();
  EXPECT_TRUE(kube::IsUnschedulable(node));
  EXPECT_FALSE(kube::Annotation(node, kCordonAnnotation).has_value());
  EXPECT_EQ(NodeEvents().count("GPUDriverManagerCordoned"), 0u);
}

TEST_F(DriverManagerTest, ARerunAfterACrashRestoresItsPausedLabelsAndItsOwnCordon) {
  // A run crashed after pausing and cordoning; this node's driver was then
  // unloaded (a reboot): nothing to do but undo what the crashed run left.
  Labels paused = kDeployed;
  paused["nvidia.com/gpu.deploy.device-plugin"] = "paused-for-driver-upgrade";
  paused["nvidia.com/gpu.deploy.gpu-feature-discovery"] = "paused-for-driver-upgrade";
  CreateNode(paused, /*unschedulable=*/true, {{std::string(kCordonAnnotation), "true"}});
  kernel_.UnloadAll();

  Status s = RunManager();
  ASSERT_TRUE(s.ok()) << s.message();
  Labels labels = NodeLabels();
  for (const auto& [k, v] : kDeployed) EXPECT_EQ(labels[k], v) << k;
  Json node = GetNode();
  EXPECT_FALSE(kube::IsUnschedulable(node));
  EXPECT_FALSE(kube::Annotation(node, kCordonAnnotation).has_value());
  EXPECT_EQ(NodeEvents().count("GPUDriverManagerNoDriverLoaded"), 1u);
}

TEST_F(DriverManagerTest, TheSameConfigLoadedChangesNothing) {
  CreateNode(kDeployed);
  CreateOperands();
  CreatePod("ml", "train-0", {}, /*gpu=*/true);
  ASSERT_TRUE(WriteFileAtomic(run_dir_.path() + "/nvidia-driver.state", "d1\n").ok());
  o_.driver_config_digest = "d1";

  Status s = RunManager();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(kernel_.unloaded().empty());
  EXPECT_TRUE(PodExists("ml", "train-0"));
  EXPECT_TRUE(PodExists(kNs, "nvidia-device-plugin-daemonset-x1"));
  EXPECT_EQ(NodeLabels(), kDeployed);
  EXPECT_EQ(NodeEvents().count("GPUDriverManagerDriverCurrent"), 1u);
  EXPECT_EQ(NodeEvents().count("GPUDriverManagerOperandsPaused"), 0u);
}

TEST_F(DriverManagerTest, GpuPodsAreEvictedAllOrNothing) {
  CreateNode(kDeployed);
  CreateOperands();
  CreatePod("ml", "train-0", {}, /*gpu=*/true);
  CreatePod("ml", "bare-gpu", {}, /*gpu=*/true, /*owner_kind=*/"");  // no controller

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("cannot evict all GPU pods from node gpu-1, so none was evicted: "
                             "ml/bare-gpu: no controller"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("DRAIN_USE_FORCE=true"), std::string::npos);
  EXPECT_TRUE(PodExists("ml", "train-0"));
  EXPECT_TRUE(kernel_.unloaded().empty());
  Labels labels = NodeLabels();
  for (const auto& [k, v] : kDeployed) EXPECT_EQ(labels[k], v) << k;
  Json node = GetNode();  // our cordon undone
  EXPECT_FALSE(kube::IsUnschedulable(node));
  EXPECT_FALSE(kube::Annotation(node, kCordonAnnotation).has_value());
  EXPECT_EQ(NodeEvents().count("GPUDriverManagerEvictionFailed"), 1u);

  // With force, the same node goes through.
  o_.drain_use_force = true;
  CreateOperands();
  auto again = DeleteOperandsWhenPaused();
  Status forced = RunManager();
  again.get();
  ASSERT_TRUE(forced.ok()) << forced.message();
  EXPECT_FALSE(PodExists("ml", "train-0"));
  EXPECT_FALSE(PodExists("ml", "bare-gpu"));
}

TEST_F(DriverManagerTest, PodsHoldingGpuNvidiaComClaimsAreEvictedLikeGpuPods) {
  CreateNode(kDeployed);
  CreateOperands();
  CreateClaim("ml", "gpu-claim", "gpu.nvidia.com");
  CreateClaim("ml", "dra-tmpl-gpu-x7k", "gpu.nvidia.com");
  CreateClaim("ml", "nic-claim", "nic.example.com");
  CreateClaimPod("ml", "dra-named", "gpu-claim", /*from_template=*/false);
  CreateClaimPod("ml", "dra-tmpl", "dra-tmpl-gpu-x7k", /*from_template=*/true);
  CreateClaimPod("ml", "nic-user", "nic-claim", /*from_template=*/false);

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(PodExists("ml", "dra-named"));
  EXPECT_FALSE(PodExists("ml", "dra-tmpl"));
  EXPECT_TRUE(PodExists("ml", "nic-user"));  // another driver's claim: not a GPU pod
  EXPECT_EQ(kernel_.unloaded().size(), 3u);
  auto events = NodeEvents();
  auto evicted = events.find("GPUDriverManagerGPUPodsEvicted");
  ASSERT_NE(evicted, events.end());
  EXPECT_NE(evicted->second.find("evicted 2 GPU pod(s) from node gpu-1: ml/dra-named, ml/dra-tmpl"),
            std::string::npos)
      << evicted->second;
}

TEST_F(DriverManagerTest, WithoutTheResourceApiGpuPodsAreEvictedAsBefore) {
  CreateNode(kDeployed);
  CreateOperands();
  CreatePod("ml", "train-0", {}, /*gpu=*/true);
  CreatePod("ml", "web-0", {}, /*gpu=*/false);
  CreateClaim("ml", "gpu-claim", "gpu.nvidia.com");
  CreateClaimPod("ml", "dra-named", "gpu-claim", /*from_template=*/false);
  // A cluster that does not serve resource.k8s.io/v1: no claim is seen, so
  // no pod counts as a DRA GPU pod and the run is not failed by the 404.
  ASSERT_TRUE(api_.server->faults().Set("error=404,verb=list,resource=resourceclaims").ok());

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(PodExists("ml", "train-0"));
  EXPECT_TRUE(PodExists("ml", "web-0"));
  EXPECT_TRUE(PodExists("ml", "dra-named"));
  EXPECT_EQ(kernel_.unloaded().size(), 3u);
}

TEST_F(DriverManagerTest, APodStillHoldingAGpuClaimStopsTheReload) {
  CreateNode(kDeployed);
  CreateOperands();
  CreateClaim("ml", "gpu-claim", "gpu.nvidia.com");
  CreateClaimPod("ml", "dra-named", "gpu-claim", /*from_template=*/false);
  o_.enable_gpu_pod_eviction = false;  // nothing evicts it

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("pods on node gpu-1 still hold GPUs through gpu.nvidia.com "
                             "ResourceClaims: ml/dra-named"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("ENABLE_GPU_POD_EVICTION=true"), std::string::npos);
  EXPECT_TRUE(PodExists("ml", "dra-named"));
  EXPECT_TRUE(kernel_.unloaded().empty());
  Labels labels = NodeLabels();
  for (const auto& [k, v] : kDeployed) EXPECT_EQ(labels[k], v) << k;
  EXPECT_EQ(NodeEvents().count("GPUDriverManagerDRAClaimsHeld"), 1u);
}

TEST_F(DriverManagerTest, APodDisruptionBudgetRefusalIsRetriedWithinTheDrainTimeout) {
  CreateNode(kDeployed);
  CreatePod("ml", "train-0", {{"app", "train"}}, /*gpu=*/true);
  // Running and Ready: the budget counts it (a pending pod is evicted at once).
  Json status{{"status",
               {{"phase", "Running"},
                {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  ASSERT_TRUE(client()
                  .Patch(res::kPods, "ml", "train-0", kube::PatchType::kMerge, status,
                         {.subresource = "status"})
                  .ok());
  const kube::Resource pdbs{"policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true};
  auto pdb = client().Create(
      pdbs, "ml",
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "train"}}},
       {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "train"}}}}}}}});
  ASSERT_TRUE(pdb.ok()) << pdb.status().message();

  o_.drain_timeout = std::chrono::seconds(1);
  Status refused = RunManager();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(refused.message().find("evicting GPU pod ml/train-0: still refused after 1s"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("PodDisruptionBudget"), std::string::npos);
  EXPECT_TRUE(PodExists("ml", "train-0"));
  EXPECT_FALSE(kube::IsUnschedulable(GetNode()));
  EXPECT_EQ(NodeLabels(), kDeployed);

  // The budget goes while the eviction is being retried: the run finishes.
  o_.drain_timeout = std::chrono::seconds(60);
  auto lift = std::async(std::launch::async, [&] {
    EXPECT_TRUE(testing::WaitFor(
        [&] { return kube::Annotation(GetNode(), kCordonAnnotation).has_value(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a refusal or two first
    EXPECT_TRUE(client().Delete(pdbs, "ml", "train").ok());
  });
  Status retried = RunManager();
  lift.get();
  ASSERT_TRUE(retried.ok()) << retried.message();
  EXPECT_FALSE(PodExists("ml", "train-0"));
}

TEST_F(DriverManagerTest, AStopMidWaitRestoresTheLabels) {
  CreateNode(kDeployed);
  CreateOperands();  // they never leave
  std::stop_source stop;
  auto sigterm = std::async(std::launch::async, [&] {
    EXPECT_TRUE(testing::WaitFor([&] {
      return NodeLabels()["nvidia.com/gpu.deploy.device-plugin"] == "paused-for-driver-upgrade";
    }));
    stop.request_stop();
  });
  Status s = RunManager(stop.get_token());
  sigterm.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.message();
  EXPECT_EQ(NodeLabels(), kDeployed);
  EXPECT_TRUE(kernel_.unloaded().empty());
}

TEST_F(DriverManagerTest, AFailedEvictionFallsBackToADrainWhenAutoDrainIsOn) {
  CreateNode(kDeployed);
  CreateOperands();
  // A GPU pod of a DaemonSet: the GPU eviction refuses it (all or nothing);
  // a drain leaves DaemonSet pods and evicts the rest of the node.
  CreatePod("monitoring", "gpu-agent-x", {}, /*gpu=*/true, "DaemonSet");
  CreatePod("ml", "train-0", {}, /*gpu=*/true);
  CreatePod("ml", "web-0", {}, /*gpu=*/false);
  o_.enable_auto_drain = true;

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(PodExists("ml", "train-0"));
  EXPECT_FALSE(PodExists("ml", "web-0"));
  EXPECT_TRUE(PodExists("monitoring", "gpu-agent-x"));
  auto events = NodeEvents();
  auto refused = events.find("GPUDriverManagerEvictionFailed");
  ASSERT_NE(refused, events.end());
  EXPECT_NE(refused->second.find("monitoring/gpu-agent-x: owned by a DaemonSet"), std::string::npos)
      << refused->second;
  EXPECT_NE(refused->second.find("draining the node instead"), std::string::npos);
  EXPECT_EQ(events.count("GPUDriverManagerDrained"), 1u);
  EXPECT_EQ(NodeLabels(), kDeployed);
  EXPECT_FALSE(kube::IsUnschedulable(GetNode()));
}

TEST_F(DriverManagerTest, AnUnloadRefusalNamesTheGpuPodsAndTheWayToRetry) {
  // The upgrade controller owns eviction: the driver manager evicts nothing.
  CreateNode(kDeployed, false, {{std::string(kUpgradeEnabledAnnotation), "true"}});
  CreateOperands();
  CreatePod("ml", "train-0", {}, /*gpu=*/true);
  kernel_.SetBusy("nvidia_uvm");

  auto controller = DeleteOperandsWhenPaused();
  Status s = RunManager();
  controller.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("kernel module nvidia_uvm is in use"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("GPU pods still on the node: ml/train-0"), std::string::npos);
  EXPECT_NE(s.message().find("nvidia.com/gpu-driver-upgrade-state=upgrade-required"),
            std::string::npos);
  EXPECT_TRUE(PodExists("ml", "train-0"));
  EXPECT_FALSE(kube::IsUnschedulable(GetNode()));  // never cordoned
  EXPECT_EQ(NodeLabels(), kDeployed);
  auto events = NodeEvents();
  auto refused = events.find("GPUDriverManagerUnloadFailed");
  ASSERT_NE(refused, events.end());
  EXPECT_NE(refused->second.find("ml/train-0"), std::string::npos);
}

TEST_F(DriverManagerTest, AHostDriverLabelsTheNodePreInstalled) {
  // The host has its own driver: NVML (the simulator's) under the host root.
  testing::SimNode sim("l40s-4", "dm-host");
  ASSERT_TRUE(sim.booted());
  const std::string lib_dir = host_root_.path() + "/usr/lib64";
  ASSERT_TRUE(MakeDirs(lib_dir).ok());
  std::filesystem::create_symlink(testing::kSimNvml, lib_dir + "/libnvidia-ml.so.1");
  ASSERT_TRUE(HostDriverInstalled(host_root_.path()));
  CreateNode(kDeployed);
  o_.pod_name = "nvidia-driver-daemonset-abcde";  // already gone
  o_.host_driver_wait = std::chrono::seconds(5);

  Status s = RunManager();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("an NVIDIA driver is installed on the host of node gpu-1"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(NodeLabels()["nvidia.com/gpu.deploy.driver"], "pre-installed");
  EXPECT_TRUE(kernel_.unloaded().empty());
  EXPECT_EQ(NodeEvents().count("GPUDriverManagerHostDriver"), 1u);

  // Without it, the same root is no host driver.
  std::filesystem::remove(lib_dir + "/libnvidia-ml.so.1");
  EXPECT_FALSE(HostDriverInstalled(host_root_.path()));
}

}  // namespace
}  // namespace gpuop::driver_manager
