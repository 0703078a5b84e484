// The cuda and plugin checks against the API emulator: the workload pod the
// validator creates (NVIDIA's name prefix, labels, owner, tolerations,
// nodeName, one nvidia.com/gpu, `gpuop cuda vector-add`), its outcome made
// through the status subresource, and the node capacity the plugin check
// waits for. The node-status exporter is scraped over HTTP.
#include "validator/workload.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <stop_token>

#include "base/files.h"
#include "kube/object.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"
#include "validator/checks.h"
#include "validator/metrics.h"
#include "validator/validator.h"

namespace gpuop::validator {
namespace {

using Json = nlohmann::json;
namespace res = kube::resources;

constexpr const char* kNs = "gpu-operator";
constexpr const char* kNode = "h100-2";

class ValidatorApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = gpuop::testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
    ASSERT_TRUE(
        client()
            .Create(
                res::kNamespaces, "",
                Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}})
            .ok());
    ASSERT_TRUE(
        client()
            .Create(res::kNodes, "",
                    Json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}})
            .ok());
    o_.node_name = kNode;
    o_.namespace_ = kNs;
    o_.output_dir = dir_.path() + "/validations";
    o_.sleep_interval_seconds = 1;
    o_.validator_image = "registry.example/gpuop:1.2";
    o_.validator_runtime_class = "nvidia";
  }

  kube::Client& client() { return *api_.client; }

  // The DaemonSet with an owner that exists (the emulator's garbage collector
  // deletes objects whose owners are gone): a ConfigMap stands in for the
  // ClusterPolicy.
  void CreateValidatorDaemonSet() {
    auto owner = client().Create(res::kConfigMaps, kNs,
                                 Json{{"apiVersion", "v1"},
                                      {"kind", "ConfigMap"},
                                      {"metadata", {{"name", "cluster-policy"}}}});
    ASSERT_TRUE(owner.ok()) << owner.status().ToString();
    owner_uid_ = kube::Uid(*owner);
    Json ds{{"apiVersion", "apps/v1"},
            {"kind", "DaemonSet"},
            {"metadata",
             {{"name", kValidatorDaemonSet},
              {"namespace", kNs},
              {"ownerReferences", Json::array({Json{{"apiVersion", "v1"},
                                                    {"kind", "ConfigMap"},
                                                    {"name", "cluster-policy"},
                                                    {"uid", owner_uid_},
                                                    {"controller", true}}})}}},
            {"spec",
             {{"selector", {{"matchLabels", {{"app", kValidatorDaemonSet}}}}},
              {"template",
               {{"metadata", {{"labels", {{"app", kValidatorDaemonSet}}}}},
                {"spec",
                 {{"tolerations", Json::array({Json{{"key", "nvidia.com/gpu"},
                                                    {"operator", "Exists"},
                                                    {"effect", "NoSchedule"}}})},
                  {"containers", Json::array({Json{{"name", "v"}, {"image", "x"}}})}}}}}}}};
    auto r = client().Create(res::kDaemonSets, kNs, ds);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  Json WaitForPod(const std::string& app) {
    Json found;
    EXPECT_TRUE(gpuop::testing::WaitFor([&] {
      kube::ListOptions lo;
      lo.label_selector = "app=" + app;
      auto l = client().List(res::kPods, kNs, lo);
      if (!l.ok() || l->items.empty()) return false;
      found = l->items.front();
      return true;
    })) << "no "
        << app << " pod";
    return found;
  }

  void SetPodStatus(const std::string& name, const Json& status) {
    auto r = kube::UpdateWithRetry(
        client(), res::kPods, kNs, name,
        [&](Json& pod) {
          pod["status"] = status;
          return true;
        },
        /*status_subresource=*/true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  void SetCapacity(const Json& capacity) {
    auto r = kube::UpdateWithRetry(
        client(), res::kNodes, "", kNode,
        [&](Json& node) {
          node["status"]["capacity"] = capacity;
          node["status"]["allocatable"] = capacity;
          return true;
        },
        /*status_subresource=*/true);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  // Runs a check on a thread; the destructor stops it (a failed assertion
  // must not wait out the check's deadline).
  struct Background {
    std::stop_source stop;
    std::future<Status> done;
    Background(const Options& o, kube::Client* c) {
      done = std::async(std::launch::async,
                        [o, c, t = stop.get_token()] { return RunCheck(o, c, t); });
    }
    ~Background() { stop.request_stop(); }
    Status Get() {
      if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
        return DeadlineExceeded("the check did not finish");
      }
      return done.get();
    }
  };

  std::string owner_uid_;
  gpuop::testing::TempDir dir_{"validator"};
  gpuop::testing::ApiEmulator api_;
  Options o_;
};

TEST_F(ValidatorApiTest, CudaPodIsNvidiasShapeOnARealGpuAndSuccessWritesCudaReady) {
  CreateValidatorDaemonSet();
  o_.component = Component::kCuda;
  Background bg(o_, &client());
  Json pod = WaitForPod(kCudaPodApp);
  const std::string name = kube::Name(pod);
  EXPECT_EQ(name.rfind(kCudaPodPrefix, 0), 0u) << name;
  EXPECT_EQ(kube::Label(pod, "app"), kCudaPodApp);
  EXPECT_EQ(pod["spec"]["nodeName"], kNode);
  EXPECT_EQ(pod["spec"]["restartPolicy"], "OnFailure");
  EXPECT_EQ(pod["spec"]["serviceAccountName"], "nvidia-operator-validator");
  EXPECT_EQ(pod["spec"]["runtimeClassName"], "nvidia");
  auto owners = kube::OwnerReferences(pod);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0].name, "cluster-policy");
  EXPECT_EQ(owners[0].uid, owner_uid_);
  ASSERT_EQ(pod["spec"]["tolerations"].size(), 1u);
  EXPECT_EQ(pod["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
  const Json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["image"], "registry.example/gpuop:1.2");
  EXPECT_EQ(c["command"], Json::array({"gpuop", "cuda", "vector-add"}));
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_FALSE(PathExists(o_.output_dir + "/cuda-ready"));

  SetPodStatus(name, Json{{"phase", "Succeeded"}});
  Status s = bg.Get();
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto content = ReadFile(o_.output_dir + "/cuda-ready");
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(*content, "");
}

// No device plugin on the node (DRA allocates its GPUs): the CUDA pod asks
// the runtime for every GPU, as NVIDIA's does, instead of an nvidia.com/gpu
// nothing advertises.
TEST_F(ValidatorApiTest, CudaPodWithoutADevicePluginAsksTheRuntimeForEveryGpu) {
  CreateValidatorDaemonSet();
  auto o = OptionsFromEnv({{"GPUOP_DEVICE_PLUGIN", "false"}}, o_);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  o->component = Component::kCuda;
  Background bg(*o, &client());
  Json pod = WaitForPod(kCudaPodApp);
  const Json& c = pod["spec"]["containers"][0];
  EXPECT_FALSE(c.contains("resources")) << c.dump();
  EXPECT_EQ(c["env"], Json::array({Json{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}}));
  EXPECT_EQ(pod["spec"]["runtimeClassName"], "nvidia");
  SetPodStatus(kube::Name(pod), Json{{"phase", "Succeeded"}});
  Status s = bg.Get();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(ValidatorApiTest, CudaFailureSurfacesTheTerminationMessage) {
  CreateValidatorDaemonSet();
  o_.component = Component::kCuda;
  Background bg(o_, &client());
  Json pod = WaitForPod(kCudaPodApp);
  // restartPolicy OnFailure: the pod stays Running while its container
  // restarts; the last termination says why.
  SetPodStatus(
      kube::Name(pod),
      Json{
          {"phase", "Running"},
          {"containerStatuses",
           Json::array({Json{{"name", "cuda-validation"},
                             {"ready", false},
                             {"restartCount", 1},
                             {"image", "x"},
                             {"imageID", ""},
                             {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
                             {"lastState",
                              {{"terminated",
                                {{"exitCode", 1},
                                 {"reason", "Error"},
                                 {"message",
                                  "driver 535.129.03 supports CUDA 12.2; this workload needs 12.4: "
                                  "raise driver.version\n"}}}}}}})}});
  Status s = bg.Get();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cuda validation failed"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("supports CUDA 12.2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(kNode), std::string::npos) << s.message();
  EXPECT_FALSE(PathExists(o_.output_dir + "/cuda-ready"));
}

TEST_F(ValidatorApiTest, LeftoverCudaPodIsDeletedFirst) {
  CreateValidatorDaemonSet();
  WorkloadPodSpec old;
  old.name_prefix = kCudaPodPrefix;
  old.app = kCudaPodApp;
  old.check = "cuda";
  old.node_name = kNode;
  old.namespace_ = kNs;
  old.image = "old";
  auto leftover = client().Create(res::kPods, kNs, BuildWorkloadPod(old));
  ASSERT_TRUE(leftover.ok()) << leftover.status().ToString();
  o_.component = Component::kCuda;
  Background bg(o_, &client());
  Json pod;
  ASSERT_TRUE(gpuop::testing::WaitFor([&] {
    pod = WaitForPod(kCudaPodApp);
    return kube::Name(pod) != kube::Name(*leftover);
  }));
  EXPECT_FALSE(client().Get(res::kPods, kNs, kube::Name(*leftover)).ok());
  SetPodStatus(kube::Name(pod), Json{{"phase", "Failed"}, {"message", "evicted"}});
  Status s = bg.Get();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("evicted"), std::string::npos) << s.message();
}

TEST_F(ValidatorApiTest, CudaWithoutWorkloadOnlyWritesTheFile) {
  o_.component = Component::kCuda;
  o_.with_workload = false;
  ASSERT_TRUE(RunCheck(o_, &client(), {}).ok());
  EXPECT_TRUE(PathExists(o_.output_dir + "/cuda-ready"));
  kube::ListOptions lo;
  lo.label_selector = std::string("app=") + kCudaPodApp;
  auto l = client().List(res::kPods, kNs, lo);
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->items.empty());
}

TEST_F(ValidatorApiTest, PluginTimesOutWithoutCapacity) {
  o_.component = Component::kPlugin;
  o_.with_workload = false;
  o_.plugin_retries = 1;
  Status s = RunCheck(o_, &client(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("plugin validation failed"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("device plugin has not registered"), std::string::npos) << s.message();
  EXPECT_FALSE(PathExists(o_.output_dir + "/plugin-ready"));
}

TEST_F(ValidatorApiTest, PluginReadyOnceTheNodeShowsGpus) {
  o_.component = Component::kPlugin;
  o_.with_workload = false;
  o_.plugin_retries = 600;
  Background bg(o_, &client());
  // The check watches the node: the capacity arriving later is seen.
  SetCapacity(Json{{"cpu", "8"}, {"nvidia.com/gpu", "8"}});
  Status s = bg.Get();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(PathExists(o_.output_dir + "/plugin-ready"));
}

TEST_F(ValidatorApiTest, PluginWorkloadAsksForTheAdvertisedMigResource) {
  CreateValidatorDaemonSet();
  SetCapacity(Json{{"nvidia.com/mig-1g.10gb", "7"}});
  o_.component = Component::kPlugin;
  o_.mig_strategy = "mixed";
  Background bg(o_, &client());
  Json pod = WaitForPod(kPluginPodApp);
  EXPECT_EQ(kube::Name(pod).rfind(kPluginPodPrefix, 0), 0u);
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.10gb"], "1");
  SetPodStatus(kube::Name(pod), Json{{"phase", "Succeeded"}});
  Status s = bg.Get();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(PathExists(o_.output_dir + "/plugin-ready"));
}

TEST(ValidatorPluginCountTest, MigStrategyRules) {
  Json gpus{{"status", {{"capacity", {{"nvidia.com/gpu", "4"}}}}}};
  Json migs{{"status",
             {{"capacity", {{"nvidia.com/mig-1g.10gb", "7"}, {"nvidia.com/mig-3g.40gb", "2"}}}}}};
  Json none{{"status", {{"capacity", {{"cpu", "8"}}}}}};
  EXPECT_EQ(PluginDeviceCount(gpus, "single"), 4);
  EXPECT_EQ(PluginDeviceCount(gpus, "mixed"), 4);
  EXPECT_EQ(PluginDeviceCount(migs, "mixed"), 9);
  // single: MIG devices are advertised as nvidia.com/gpu; mig-* does not count.
  EXPECT_EQ(PluginDeviceCount(migs, "single"), 0);
  EXPECT_EQ(PluginDeviceCount(none, "none"), 0);
  EXPECT_EQ(PluginWorkloadResource(migs, "mixed"), "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(PluginWorkloadResource(gpus, "single"), "nvidia.com/gpu");
}

TEST(ValidatorPodOutcomeTest, ReadsPhasesAndTerminations) {
  EXPECT_FALSE(EvaluateWorkloadPod(Json{{"status", {{"phase", "Pending"}}}}).done);
  auto ok = EvaluateWorkloadPod(Json{{"status", {{"phase", "Succeeded"}}}});
  EXPECT_TRUE(ok.done && ok.succeeded);
  auto failed = EvaluateWorkloadPod(
      Json{{"status",
            {{"phase", "Failed"},
             {"containerStatuses",
              Json::array(
                  {Json{{"name", "cuda-validation"},
                        {"state", {{"terminated", {{"exitCode", 2}, {"reason", "Error"}}}}}}})}}}});
  EXPECT_TRUE(failed.done);
  EXPECT_FALSE(failed.succeeded);
  EXPECT_EQ(failed.message, "container cuda-validation exit code 2: Error");
  auto waiting = EvaluateWorkloadPod(
      Json{{"status",
            {{"phase", "Pending"},
             {"containerStatuses",
              Json::array({Json{{"name", "cuda-validation"},
                                {"state", {{"waiting", {{"reason", "ImagePullBackOff"}}}}}}})}}}});
  EXPECT_FALSE(waiting.done);
  EXPECT_NE(waiting.message.find("ImagePullBackOff"), std::string::npos);
}

std::string Scrape(int port) {
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30, 0);
  auto res = http.Get("/metrics");
  EXPECT_TRUE(res) << httplib::to_string(res.error());
  return res ? res->body : "";
}

TEST_F(ValidatorApiTest, NodeStatusExporterServesNvidiasGauges) {
  SetCapacity(Json{{"nvidia.com/gpu", "2"}, {"nvidia.com/mig-1g.10gb", "7"}});
  ASSERT_TRUE(MakeDirs(o_.output_dir).ok());
  ASSERT_TRUE(WriteFileAtomic(o_.output_dir + "/driver-ready", "IS_HOST_DRIVER=true\n").ok());
  ASSERT_TRUE(WriteFileAtomic(o_.output_dir + "/toolkit-ready", "").ok());
  o_.read_root = dir_.path() + "/no-host";  // no driver: validation 0
  auto e = Exporter::Start(o_, &client(), "127.0.0.1:0", std::chrono::hours(1));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  (*e)->Probe();
  std::string body = Scrape((*e)->port());
  const std::string node = std::string("{node=\"") + kNode + "\"} ";
  EXPECT_NE(body.find("gpu_operator_node_driver_ready" + node + "1\n"), std::string::npos) << body;
  EXPECT_NE(body.find("gpu_operator_node_toolkit_ready" + node + "1\n"), std::string::npos);
  EXPECT_NE(body.find("gpu_operator_node_cuda_ready" + node + "0\n"), std::string::npos);
  EXPECT_NE(body.find("gpu_operator_node_plugin_ready" + node + "0\n"), std::string::npos);
  EXPECT_NE(body.find("gpu_operator_node_driver_validation" + node + "0\n"), std::string::npos);
  EXPECT_NE(body.find("gpu_operator_node_device_plugin_devices_total" + node + "9\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("# TYPE gpu_operator_node_metrics_ready_ts_seconds gauge"),
            std::string::npos);
  EXPECT_NE(body.find("gpu_operator_nvidia_pci_devices_total" + node + "0\n"), std::string::npos);

  // A file removed shows at the next scrape.
  ASSERT_TRUE(Cleanup(o_.output_dir).ok());
  body = Scrape((*e)->port());
  EXPECT_NE(body.find("gpu_operator_node_driver_ready" + node + "0\n"), std::string::npos) << body;
}

}  // namespace
}  // namespace gpuop::validator
