// The MIG manager against the API emulator and the simulated DGX H100: the
// label-driven flow (states, paused clients, layout, CDI spec, kept config),
// and every way it can fail leaving the previous layout and the labels.
#include "mig/manager.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/files.h"
#include "kube/client.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "mig/apply.h"
#include "mig/config.h"
#include "nvml/client.h"
#include "sim/host/host_root.h"
#include "sim/kube/server.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/wait.h"

namespace gpuop::mig {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
namespace res = kube::resources;

constexpr auto kWait = 30s;
constexpr char kNode[] = "node-1";
constexpr char kNs[] = "gpu-operator";

constexpr char kConfig[] = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  mixed:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - devices: [2, 3, 4, 5, 6, 7]
      mig-enabled: false
)";

bool InCi() {
  const char* ci = getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// Pure parts.
TEST(MigManagerPureTest, ClientLabelsToPause) {
  Labels node = {{"nvidia.com/gpu.deploy.device-plugin", "true"},
                 {"nvidia.com/gpu.deploy.gpu-feature-discovery", "false"},
                 {"nvidia.com/gpu.deploy.dcgm-exporter", kPausedForMigChange},
                 {"nvidia.com/gpu.deploy.driver", "true"},
                 {"team", "ml"}};
  EXPECT_EQ(ClientLabelsToPause(node), (Labels{{"nvidia.com/gpu.deploy.device-plugin", "true"},
                                               {"nvidia.com/gpu.deploy.dcgm-exporter", "true"}}));
  EXPECT_EQ(NodeMetadataPatch({{"a", "1"}, {"b", std::nullopt}}, {{"c", std::nullopt}}),
            Json::parse(R"({"metadata":{"labels":{"a":"1","b":null},"annotations":{"c":null}}})"));
  EXPECT_EQ(GpuClientPodSelector(),
            "app in (nvidia-device-plugin-daemonset,gpu-feature-discovery,nvidia-dcgm-exporter,"
            "nvidia-dcgm)");
}

TEST(MigManagerPureTest, ValidateNamesTheMissingPiece) {
  ManagerOptions o;
  EXPECT_NE(ValidateManagerOptions(o).message().find("NODE_NAME"), std::string::npos);
  o.node_name = "n";
  EXPECT_NE(ValidateManagerOptions(o).message().find("API server"), std::string::npos);
}

class MigManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(sim_.booted());
    dir_ = sim_.dir();
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/config.yaml", kConfig).ok());
    auto api = testing::StartApiEmulator(16);
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
    client_ = api_.client.get();

    Json node{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata",
               {{"name", kNode},
                {"labels",
                 {{"nvidia.com/gpu.deploy.device-plugin", "true"},
                  {"nvidia.com/gpu.deploy.gpu-feature-discovery", "true"},
                  {"nvidia.com/gpu.deploy.dcgm-exporter", "true"},
                  {"nvidia.com/gpu.deploy.dcgm", "false"},
                  {"team", "ml"}}}}}};
    ASSERT_TRUE(client_->Create(res::kNodes, "", node).ok());
    Json ns{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}};
    ASSERT_TRUE(client_->Create(res::kNamespaces, "", ns).ok());
  }

  void TearDown() override {
    StopManager();
    StopDaemonSets();
  }

  ManagerOptions Options() {
    ManagerOptions o;
    o.node_name = kNode;
    o.client = client_;
    o.open_nvml = [] { return nvml::Client::Open(testing::kSimNvml); };
    o.config_file = dir_ + "/config.yaml";
    o.host_root = dir_ + "/host";
    o.clients_namespace = kNs;
    o.clients_timeout = 20s;
    o.poll_interval = 20ms;
    o.config_check_interval = 100ms;
    o.node_sync_timeout = 5s;
    o.gpu_reset = [this](unsigned gpu, const std::string&) {
      return sim::ResetGpu(sim_.store(), gpu);
    };
    return o;
  }

  // Plays the DaemonSet controller for the three GPU clients: a pod per
  // client on the node while its deploy label is "true", none otherwise.
  void StartDaemonSets() {
    ds_thread_ = std::jthread([this](std::stop_token stop) {
      const std::map<std::string, std::string> apps = {
          {"nvidia.com/gpu.deploy.device-plugin", "nvidia-device-plugin-daemonset"},
          {"nvidia.com/gpu.deploy.gpu-feature-discovery", "gpu-feature-discovery"},
          {"nvidia.com/gpu.deploy.dcgm-exporter", "nvidia-dcgm-exporter"}};
      while (!stop.stop_requested()) {
        auto node = client_->Get(res::kNodes, "", kNode);
        if (node.ok()) {
          for (const auto& [label, app] : apps) {
            const bool want = kube::Label(*node, label).value_or("") == "true";
            const std::string pod = app + "-x";
            auto have = client_->Get(res::kPods, kNs, pod);
            if (want && !have.ok()) {
              Json p{{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", pod}, {"labels", {{"app", app}}}}},
                     {"spec",
                      {{"nodeName", kNode},
                       {"containers", Json::array({{{"name", "c"}, {"image", "gpuop"}}})}}}};
              if (client_->Create(res::kPods, kNs, p).ok()) ++pods_created_;
            } else if (!want && have.ok()) {
              kube::DeleteOptions d;
              d.grace_period_seconds = 0;
              if (client_->Delete(res::kPods, kNs, pod, d).ok()) ++pods_deleted_;
            }
          }
        }
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  void StopDaemonSets() {
    if (ds_thread_.joinable()) {
      ds_thread_.request_stop();
      ds_thread_.join();
    }
  }

  // Records every distinct value of the state label and of the device
  // plugin's deploy label, in order, from a watch on the Node: every change
  // is seen, however briefly it lasted.
  void StartRecorder() {
    auto node = client_->Get(res::kNodes, "", kNode);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    Record(*node);
    kube::WatchOptions wo;
    wo.field_selector = std::string("metadata.name=") + kNode;
    wo.resource_version = kube::ResourceVersion(*node);
    rec_thread_ = std::jthread([this, wo](std::stop_token stop) {
      Status s = client_->Watch(
          res::kNodes, "", wo,
          [this](kube::WatchEvent&& e) {
            if (e.type == kube::WatchEvent::Type::kModified) Record(e.object);
            return true;
          },
          stop);
      if (!stop.stop_requested()) ADD_FAILURE() << "the node watch ended: " << s.ToString();
    });
  }
  void Record(const Json& node) {
    std::lock_guard lock(rec_mu_);
    auto push = [](std::vector<std::string>& seq, std::string v) {
      if (seq.empty() || seq.back() != v) seq.push_back(std::move(v));
    };
    push(states_, kube::Label(node, kStateLabel).value_or(""));
    push(plugin_label_, kube::Label(node, "nvidia.com/gpu.deploy.device-plugin").value_or(""));
  }

  void StartManager(ManagerOptions o) {
    manager_ = std::make_unique<Manager>(std::move(o));
    manager_thread_ = std::jthread([this](std::stop_token stop) {
      Status s = manager_->Run(stop);
      EXPECT_TRUE(s.ok()) << s.ToString();
    });
  }
  void StopManager() {
    if (manager_thread_.joinable()) {
      manager_thread_.request_stop();
      manager_thread_.join();
    }
    if (rec_thread_.joinable()) {
      rec_thread_.request_stop();
      rec_thread_.join();
    }
  }

  void SetConfigLabel(const std::string& name) {
    ASSERT_TRUE(client_
                    ->Patch(res::kNodes, "", kNode, kube::PatchType::kMerge,
                            NodeMetadataPatch({{kConfigLabel, name}}))
                    .ok());
  }
  std::string NodeLabel(const std::string& key) {
    auto node = client_->Get(res::kNodes, "", kNode);
    return node.ok() ? kube::Label(*node, key).value_or("") : "<error>";
  }
  std::string NodeAnnotation(const std::string& key) {
    auto node = client_->Get(res::kNodes, "", kNode);
    return node.ok() ? kube::Annotation(*node, key).value_or("") : "<error>";
  }
  bool WaitForState(const std::string& want) {
    return testing::WaitFor([&] { return NodeLabel(kStateLabel) == want; }, kWait);
  }
  Status Assert(const std::string& name) {
    auto nvml = nvml::Client::Open(testing::kSimNvml);
    if (!nvml.ok()) return nvml.status();
    auto text = ReadFile(dir_ + "/config.yaml");
    auto file = ParseConfig(*text, "config.yaml");
    if (!file.ok()) return file.status();
    return AssertConfig(**nvml, *file, name, false);
  }
  std::vector<std::string> States() {
    std::lock_guard lock(rec_mu_);
    return states_;
  }
  std::vector<std::string> PluginLabels() {
    std::lock_guard lock(rec_mu_);
    return plugin_label_;
  }

  testing::SimNode sim_{"dgx-h100", "mig-manager-test"};
  testing::ApiEmulator api_;
  std::string dir_;
  kube::Client* client_ = nullptr;
  std::unique_ptr<Manager> manager_;
  std::jthread manager_thread_, ds_thread_, rec_thread_;
  std::atomic<int> pods_created_{0}, pods_deleted_{0};
  std::mutex rec_mu_;
  std::vector<std::string> states_, plugin_label_;
};

// The day/night switch as a user makes it: pending → success, the clients
// paused while their pods leave and back afterwards, the layout and the CDI
// spec follow, the name is kept for the next boot.
TEST_F(MigManagerTest, LabelChangeAppliesWithClientsPausedAndRestored) {
  auto machine = sim::LoadMachine("dgx-h100", dir_);
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  auto plan = sim::PlanHostRoot(*machine, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto written = sim::WriteHostRoot(dir_ + "/host", *plan);
  if (!written.ok() && !InCi()) GTEST_SKIP() << written.status().message();
  ASSERT_TRUE(written.ok()) << written.status().ToString();

  StartDaemonSets();
  StartRecorder();
  ManagerOptions o = Options();
  o.cdi_output = "/var/run/cdi/nvidia.yaml";
  o.cdi.host_root = o.host_root;
  o.cdi.hook_path = "/usr/local/nvidia/toolkit/gpuop";
  StartManager(o);

  // all-1g.10gb is not in the file: generated for the H100s.
  SetConfigLabel("all-1g.10gb");
  ASSERT_TRUE(WaitForState("success")) << NodeAnnotation(kFailureAnnotation);
  {  // the file lacks all-1g.10gb: the GPUs themselves
    auto nvml = nvml::Client::Open(testing::kSimNvml);
    ASSERT_TRUE(nvml.ok());
    auto gpus = (*nvml)->Gpus();
    ASSERT_TRUE(gpus.ok());
    for (const auto& g : *gpus) {
      EXPECT_TRUE(g.mig_enabled) << g.index;
      ASSERT_EQ(g.mig_devices.size(), 7u) << g.index;
      for (const auto& m : g.mig_devices) EXPECT_EQ(m.profile, "1g.10gb");
    }
  }
  auto states = States();
  ASSERT_GE(states.size(), 2u);
  EXPECT_EQ(states[states.size() - 2], "pending");
  EXPECT_EQ(states.back(), "success");
  EXPECT_EQ(PluginLabels(), (std::vector<std::string>{"true", kPausedForMigChange, "true"}));
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.gpu-feature-discovery"), "true");
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.dcgm-exporter"), "true");
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.dcgm"), "false");  // "false" is never touched
  EXPECT_EQ(NodeLabel("team"), "ml");
  EXPECT_GE(pods_deleted_.load(), 3);
  EXPECT_EQ(NodeAnnotation(kFailureAnnotation), "");

  // The CDI spec names the new MIG devices; the name is kept for a reboot.
  auto spec = ReadFile(dir_ + "/host/var/run/cdi/nvidia.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_NE(spec->find("MIG-"), std::string::npos);
  EXPECT_NE(spec->find("name: \"7:6\""), std::string::npos) << spec->substr(0, 2000);
  auto kept = ReadFile(dir_ + "/host/etc/nvidia-mig-manager/selected-config");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "all-1g.10gb\n");

  // Night: whole GPUs again (pending, then success once more).
  const int deleted = pods_deleted_.load();
  const size_t seen = States().size();
  SetConfigLabel("all-disabled");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return States().size() >= seen + 2 && States().back() == "success"; }, kWait))
      << NodeAnnotation(kFailureAnnotation);
  ASSERT_EQ(States().back(), "success") << NodeAnnotation(kFailureAnnotation);
  EXPECT_EQ(States()[seen], "pending");
  EXPECT_TRUE(Assert("all-disabled").ok()) << Assert("all-disabled").ToString();
  EXPECT_GT(pods_deleted_.load(), deleted);
  spec = ReadFile(dir_ + "/host/var/run/cdi/nvidia.yaml");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->find("MIG-"), std::string::npos);
}

// A config already in force: success at once, no client disturbed.
TEST_F(MigManagerTest, AlreadyAppliedTouchesNothing) {
  StartDaemonSets();
  StartRecorder();
  SetConfigLabel("all-disabled");
  StartManager(Options());
  ASSERT_TRUE(WaitForState("success"));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(PluginLabels(), (std::vector<std::string>{"true"}));
  EXPECT_EQ(pods_deleted_.load(), 0);
}

// A name no config has: failed with the reason; nothing paused or changed.
TEST_F(MigManagerTest, UnknownConfigFailsWithoutTouchingAnything) {
  StartDaemonSets();
  StartRecorder();
  StartManager(Options());
  SetConfigLabel("all-2g.99gb");
  ASSERT_TRUE(WaitForState("failed"));
  EXPECT_NE(NodeAnnotation(kFailureAnnotation).find("all-2g.99gb"), std::string::npos)
      << NodeAnnotation(kFailureAnnotation);
  EXPECT_EQ(PluginLabels(), (std::vector<std::string>{"true"}));
  EXPECT_EQ(pods_deleted_.load(), 0);
  EXPECT_TRUE(Assert("all-disabled").ok());

  // Fixing the label clears the failure.
  SetConfigLabel("mixed");
  ASSERT_TRUE(WaitForState("success")) << NodeAnnotation(kFailureAnnotation);
  EXPECT_TRUE(Assert("mixed").ok()) << Assert("mixed").ToString();
  EXPECT_EQ(NodeAnnotation(kFailureAnnotation), "");
}

// The GPU reset the new mode needs fails mid-apply: failed, the previous
// layout (MIG off, nothing pending) back, the clients' labels restored.
TEST_F(MigManagerTest, FailureMidApplyRollsBackAndRestoresLabels) {
  StartDaemonSets();
  StartRecorder();
  ManagerOptions o = Options();
  std::atomic<int> resets{0};
  o.gpu_reset = [&resets](unsigned gpu, const std::string&) {
    ++resets;
    return Internal("nvidia-smi: GPU " + std::to_string(gpu) + " is in use");
  };
  StartManager(o);
  SetConfigLabel("mixed");
  ASSERT_TRUE(WaitForState("failed"));
  EXPECT_GE(resets.load(), 1);
  const std::string reason = NodeAnnotation(kFailureAnnotation);
  EXPECT_NE(reason.find("in use"), std::string::npos) << reason;
  EXPECT_NE(reason.find("previous layout is back"), std::string::npos) << reason;
  EXPECT_TRUE(Assert("all-disabled").ok()) << Assert("all-disabled").ToString();
  auto nvml = nvml::Client::Open(testing::kSimNvml);
  ASSERT_TRUE(nvml.ok());
  auto gpus = (*nvml)->Gpus();  // kept: a range-for over *Gpus() would outlive it
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  for (const auto& g : *gpus) EXPECT_FALSE(g.mig_pending) << g.index;
  EXPECT_EQ(PluginLabels(), (std::vector<std::string>{"true", kPausedForMigChange, "true"}));
  auto states = States();
  EXPECT_EQ(states.back(), "failed");
  EXPECT_NE(std::find(states.begin(), states.end(), "pending"), states.end());
}

// An NVML create fails in the middle of the apply (GPU 1, after GPU 0 was
// done): failed, and both GPUs are back to the previous layout.
TEST_F(MigManagerTest, NvmlFaultMidApplyRestoresThePreviousLayout) {
  StartDaemonSets();
  StartRecorder();
  StartManager(Options());
  SetConfigLabel("all-enabled");
  ASSERT_TRUE(WaitForState("success"));
  ASSERT_TRUE(sim::InjectMigCreateFailure(sim_.store(), 1, 1).ok());
  SetConfigLabel("mixed");
  ASSERT_TRUE(WaitForState("failed"));
  const std::string reason = NodeAnnotation(kFailureAnnotation);
  EXPECT_NE(reason.find("GPU 1"), std::string::npos) << reason;
  EXPECT_NE(reason.find("previous layout is back"), std::string::npos) << reason;
  EXPECT_TRUE(Assert("all-enabled").ok()) << Assert("all-enabled").ToString();
  auto nvml = nvml::Client::Open(testing::kSimNvml);
  ASSERT_TRUE(nvml.ok());
  auto gpus = (*nvml)->Gpus();
  ASSERT_TRUE(gpus.ok());
  for (const auto& g : *gpus) EXPECT_TRUE(g.mig_devices.empty()) << g.index;
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.device-plugin"), "true");
  EXPECT_EQ(PluginLabels().back(), "true");
}

// Clients that never leave: failed after the timeout, never stuck pending.
TEST_F(MigManagerTest, ClientsThatDoNotLeaveTimeOut) {
  Json pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "stuck"}, {"labels", {{"app", "nvidia-dcgm-exporter"}}}}},
      {"spec",
       {{"nodeName", kNode}, {"containers", Json::array({{{"name", "c"}, {"image", "gpuop"}}})}}}};
  ASSERT_TRUE(client_->Create(res::kPods, kNs, pod).ok());
  ManagerOptions o = Options();
  o.clients_timeout = 500ms;
  StartManager(o);
  SetConfigLabel("mixed");
  ASSERT_TRUE(WaitForState("failed"));
  EXPECT_NE(NodeAnnotation(kFailureAnnotation).find("stuck"), std::string::npos)
      << NodeAnnotation(kFailureAnnotation);
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.dcgm-exporter"), "true");
  EXPECT_TRUE(Assert("all-disabled").ok());
}

// After a reboot the API server is not there yet: the kept config is tried
// again until it is, then applied and reported.
TEST_F(MigManagerTest, KeptConfigAppliedOnceTheApiServerIsBack) {
  const std::string state_dir = dir_ + "/host/etc/nvidia-mig-manager";
  ASSERT_TRUE(MakeDirs(state_dir).ok());
  ASSERT_TRUE(WriteFileAtomic(state_dir + "/selected-config", "mixed\n").ok());
  const int port = api_.server->port();
  api_.server.reset();  // the API server is down

  ManagerOptions o = Options();
  o.node_sync_timeout = 200ms;
  StartManager(o);
  std::this_thread::sleep_for(500ms);  // a few failed tries, nothing applied
  EXPECT_TRUE(Assert("all-disabled").ok());

  simkube::ServerOptions so;
  so.listen = "127.0.0.1:" + std::to_string(port);
  so.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  auto server = simkube::ApiServer::Start(std::move(so));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  api_.server = std::move(server).value();
  Json node{{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", kNode}, {"labels", {{kConfigLabel, "mixed"}}}}}};
  ASSERT_TRUE(client_->Create(res::kNodes, "", node).ok());
  ASSERT_TRUE(WaitForState("success"))
      << NodeAnnotation(kFailureAnnotation) << " "
      << client_->Get(res::kNodes, "", kNode).value_or(Json()).dump();
  EXPECT_TRUE(Assert("mixed").ok()) << Assert("mixed").ToString();
}

// WITH_REBOOT when no reset can be done: state rebooting, the reboot runs;
// the manager that starts after it (the label unchanged) applies the kept
// config and ends in success.
TEST_F(MigManagerTest, RebootWhenNoResetThenApplyAtStart) {
  StartDaemonSets();
  ManagerOptions o = Options();
  o.gpu_reset = nullptr;
  o.with_reboot = true;
  std::atomic<int> reboots{0};
  o.reboot = [this, &reboots] {
    ++reboots;
    for (unsigned g = 0; g < 8; ++g) {  // what a reboot does to the GPUs
      if (Status s = sim::ResetGpu(sim_.store(), g); !s.ok()) return s;
    }
    return Status::Ok();
  };
  StartManager(o);
  SetConfigLabel("mixed");
  ASSERT_TRUE(WaitForState("rebooting"));
  // The state is announced before the reboot is asked for.
  ASSERT_TRUE(testing::WaitFor([&] { return reboots.load() > 0; }, kWait));
  StopManager();
  EXPECT_EQ(reboots.load(), 1);
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.device-plugin"), kPausedForMigChange);

  // After the reboot: a new manager.
  StartManager(Options());
  ASSERT_TRUE(WaitForState("success")) << NodeAnnotation(kFailureAnnotation);
  EXPECT_TRUE(Assert("mixed").ok()) << Assert("mixed").ToString();
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.device-plugin"), "true");
}

// Issue 21: a GPU still used by a process after the clients left keeps its
// mode and is never reset; the failure names the GPU and the pid, and the
// config is tried again later, succeeding once the process is gone.
TEST_F(MigManagerTest, BusyGpuIsNotResetAndTheConfigIsRetried) {
  StartDaemonSets();
  ManagerOptions o = Options();
  o.busy_retry_interval = 300ms;
  std::mutex mu;
  std::vector<unsigned> resets;
  o.gpu_reset = [this, &mu, &resets](unsigned gpu, const std::string&) {
    {
      std::lock_guard lock(mu);
      resets.push_back(gpu);
    }
    return sim::ResetGpu(sim_.store(), gpu);
  };
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  ASSERT_TRUE(sim_.store()
                  .Update([&](sim::SimState& s) {
                    s.gpus[1].processes.push_back({pid, uint64_t{1} << 30});
                    return Status::Ok();
                  })
                  .ok());
  StartManager(o);
  SetConfigLabel("mixed");
  ASSERT_TRUE(WaitForState("failed"));
  const std::string reason = NodeAnnotation(kFailureAnnotation);
  EXPECT_NE(reason.find("GPU 1 ("), std::string::npos) << reason;
  EXPECT_NE(reason.find("in use by process(es) " + std::to_string(pid)), std::string::npos)
      << reason;
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(std::find(resets.begin(), resets.end(), 1u), resets.end());
  }
  EXPECT_EQ(NodeLabel("nvidia.com/gpu.deploy.device-plugin"), "true");  // clients are back

  // The process ends: the next retry applies the config, no label change needed.
  ASSERT_TRUE(sim_.store()
                  .Update([](sim::SimState& s) {
                    s.gpus[1].processes.clear();
                    return Status::Ok();
                  })
                  .ok());
  ASSERT_TRUE(WaitForState("success")) << NodeAnnotation(kFailureAnnotation);
  EXPECT_TRUE(Assert("mixed").ok()) << Assert("mixed").ToString();
}

// No driver (a driver container loading, a driver upgrade under way) is no
// failed config: the manager waits and applies it once NVML opens.
TEST_F(MigManagerTest, NoDriverWaitsInsteadOfFailing) {
  StartDaemonSets();
  ManagerOptions o = Options();
  auto driver = std::make_shared<std::atomic<bool>>(false);
  o.open_nvml = [driver]() -> Result<std::unique_ptr<nvml::Client>> {
    if (!*driver) return Unavailable("NVIDIA driver is not loaded (nvmlInit: Driver Not Loaded)");
    return nvml::Client::Open(testing::kSimNvml);
  };
  StartManager(o);
  SetConfigLabel("mixed");
  const uint64_t before = manager_->reconciles();
  ASSERT_TRUE(testing::WaitFor([&] { return manager_->reconciles() >= before + 3; }, kWait));
  EXPECT_NE(NodeLabel(kStateLabel), "failed");
  EXPECT_EQ(NodeAnnotation(kFailureAnnotation), "");
  *driver = true;
  ASSERT_TRUE(WaitForState("success")) << NodeAnnotation(kFailureAnnotation);
  EXPECT_TRUE(Assert("mixed").ok()) << Assert("mixed").ToString();
}

}  // namespace
}  // namespace gpuop::mig
