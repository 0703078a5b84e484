// `gpuop doctor` end to end against the API emulator: the exit code and the
// JSON a script reads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/cli.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "operator/operator.h"
#include "sim/kube/kubeconfig.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::doctor {
namespace {

using Json = nlohmann::json;
namespace res = kube::resources;

struct Outcome {
  int code = 0;
  std::string out;
  std::string err;
};

Outcome Doctor(const std::string& kubeconfig, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"gpuop", "doctor", "--kubeconfig", kubeconfig};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Outcome r;
  r.code = cli::RunCommandLine(static_cast<int>(argv.size()), argv.data(), "test",
                               [](CLI::App& app, const cli::GlobalOptions& g, cli::Action* a) {
                                 cli::RegisterDoctorCommand(app, g, a);
                               });
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

class DoctorCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().message();
    api_ = std::move(api).value();
    kubeconfig_ = dir_.path() + "/kubeconfig";
    ASSERT_TRUE(simkube::WriteKubeconfig(kubeconfig_, api_.server->kubeconfig()).ok());
    ASSERT_TRUE(op::EnsureClusterPolicyCrd(client(), "test", std::chrono::seconds(30)).ok());
    ASSERT_TRUE(client()
                    .Create(res::kNamespaces, "",
                            {{"apiVersion", "v1"},
                             {"kind", "Namespace"},
                             {"metadata", {{"name", "gpu-operator"}}}})
                    .ok());
    auto cp = client().Create(res::kClusterPolicies, "",
                              {{"apiVersion", "nvidia.com/v1"},
                               {"kind", "ClusterPolicy"},
                               {"metadata", {{"name", "cluster-policy"}}},
                               {"spec", Json::object()}});
    ASSERT_TRUE(cp.ok()) << cp.status().message();
    (*cp)["status"] = {
        {"state", "ready"},
        {"conditions", Json::array({{{"type", "Ready"},
                                     {"status", "True"},
                                     {"reason", "Reconciled"},
                                     {"message", "every component is ready"},
                                     {"lastTransitionTime", "2026-12-05T00:00:00Z"}}})}};
    auto st = client().UpdateStatus(res::kClusterPolicies, *cp);
    ASSERT_TRUE(st.ok()) << st.status().message();
    auto node = client().Create(res::kNodes, "",
                                {{"apiVersion", "v1"},
                                 {"kind", "Node"},
                                 {"metadata",
                                  {{"name", "h100-1"},
                                   {"labels",
                                    {{"feature.node.kubernetes.io/pci-10de.present", "true"},
                                     {"nvidia.com/gpu.present", "true"},
                                     {"nvidia.com/gpu.count", "8"}}}}}});
    ASSERT_TRUE(node.ok()) << node.status().message();
    SetAllocatable("7");
  }

  void SetAllocatable(const std::string& gpus) {
    auto node = client().Get(res::kNodes, "", "h100-1");
    ASSERT_TRUE(node.ok()) << node.status().message();
    (*node)["status"]["capacity"] = {{"nvidia.com/gpu", "8"}};
    (*node)["status"]["allocatable"] = {{"nvidia.com/gpu", gpus}};
    auto st = client().UpdateStatus(res::kNodes, *node);
    ASSERT_TRUE(st.ok()) << st.status().message();
  }

  kube::Client& client() { return *api_.client; }
  testing::TempDir dir_{"doctor"};
  testing::ApiEmulator api_;
  std::string kubeconfig_;
};

TEST_F(DoctorCliTest, FindingsExitOneWithJsonForScripts) {
  // The node's device plugin pod, whose log names the GPU it took out.
  auto pod = client().Create(
      res::kPods, "gpu-operator",
      {{"apiVersion", "v1"},
       {"kind", "Pod"},
       {"metadata",
        {{"name", "nvidia-device-plugin-daemonset-x1"},
         {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                           {"kind", "DaemonSet"},
                                           {"name", "nvidia-device-plugin-daemonset"},
                                           {"uid", "ds-uid"},
                                           {"controller", true}}})}}},
       {"spec",
        {{"nodeName", "h100-1"},
         {"containers", Json::array({{{"name", "nvidia-device-plugin"}, {"image", "gpuop"}}})}}}});
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  auto st = kube::UpdateWithRetry(
      client(), res::kPods, "gpu-operator", kube::Name(*pod),
      [](Json& p) {
        p["status"] = {{"phase", "Running"},
                       {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}};
        return true;
      },
      /*status_subresource=*/true);
  ASSERT_TRUE(st.ok()) << st.status().message();
  api_.server->SetLogProvider([](const std::string&, const std::string& name, const std::string&,
                                 const std::string&, bool) -> Result<std::string> {
    if (name != "nvidia-device-plugin-daemonset-x1") return NotFound(name);
    return std::string(
        "ts=2026-12-05T00:03:00.000Z level=warn msg=\"device unhealthy\" unit=GPU-5 "
        "reason=\"XID 79 (lost)\"\n");
  });

  Outcome r = Doctor(kubeconfig_, {"--output", "json"});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  Json j = Json::parse(r.out);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 1u) << r.out;
  EXPECT_EQ(j[0]["severity"], "degraded");
  EXPECT_EQ(j[0]["object"], "node/h100-1");
  EXPECT_EQ(j[0]["problem"],
            "1 of 8 GPUs not allocatable (allocatable nvidia.com/gpu 7, nvidia.com/gpu.count 8)");
  EXPECT_EQ(j[0]["cause"], "the device plugin marked 1 GPU unhealthy: GPU-5: XID 79 (lost)");
  EXPECT_NE(j[0]["fix"].get<std::string>().find("reboot the node"), std::string::npos);

  r = Doctor(kubeconfig_);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("degraded  node/h100-1: 1 of 8 GPUs not allocatable"), std::string::npos)
      << r.out;
}

TEST_F(DoctorCliTest, WorkloadsOnTheNodeAreReadForCudaAndRuntimeFaults) {
  SetAllocatable("8");
  auto node = client().Get(res::kNodes, "", "h100-1");
  ASSERT_TRUE(node.ok()) << node.status().message();
  (*node)["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = "535.129.03";
  (*node)["metadata"]["labels"]["nvidia.com/cuda.runtime-version.major"] = "12";
  (*node)["metadata"]["labels"]["nvidia.com/cuda.runtime-version.minor"] = "2";
  ASSERT_TRUE(client().Update(res::kNodes, *node).ok());
  ASSERT_TRUE(
      client()
          .Create(res::kNamespaces, "",
                  {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ml"}}}})
          .ok());
  auto pod = [&](const std::string& name, Json env) {
    auto created = client().Create(
        res::kPods, "ml",
        {{"apiVersion", "v1"},
         {"kind", "Pod"},
         {"metadata", {{"name", name}}},
         {"spec",
          {{"nodeName", "h100-1"},
           {"containers", Json::array({{{"name", "main"},
                                        {"image", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"},
                                        {"env", std::move(env)}}})}}}});
    ASSERT_TRUE(created.ok()) << created.status().message();
  };
  pod("train", Json::array({{{"name", "NVIDIA_REQUIRE_CUDA"}, {"value", "cuda>=12.4"}}}));
  pod("infer", Json::array());
  auto event = client().Create(
      res::kEvents, "ml",
      {{"apiVersion", "v1"},
       {"kind", "Event"},
       {"metadata", {{"name", "infer.1"}}},
       {"type", "Warning"},
       {"reason", "FailedCreatePodSandBox"},
       {"involvedObject", {{"kind", "Pod"}, {"namespace", "ml"}, {"name", "infer"}}},
       {"message", "failed to get sandbox runtime: no runtime for \"nvidia\" is configured"}});
  ASSERT_TRUE(event.ok()) << event.status().message();

  Outcome r = Doctor(kubeconfig_, {"-o", "json"});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  Json j = Json::parse(r.out);
  ASSERT_EQ(j.size(), 2u) << r.out;
  EXPECT_EQ(j[0]["object"], "node/h100-1");
  EXPECT_EQ(j[0]["problem"],
            "the container runtime has no \"nvidia\" runtime configured: 1 pod cannot start "
            "(pod/ml/infer)");
  EXPECT_EQ(j[1]["object"], "pod/ml/train");
  EXPECT_EQ(j[1]["problem"],
            "container main needs CUDA 12.4 (NVIDIA_REQUIRE_CUDA) but node h100-1's driver "
            "535.129.03 supports CUDA 12.2");
}

TEST_F(DoctorCliTest, HealthyClusterExitsZero) {
  SetAllocatable("8");
  Outcome r = Doctor(kubeconfig_, {"-o", "json"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(Json::parse(r.out), Json::array());
  r = Doctor(kubeconfig_);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out,
            "healthy: the ClusterPolicy is ready; 1 GPU node, 8 nvidia.com/gpu allocatable\n");
}

TEST_F(DoctorCliTest, UnreachableClusterExitsTwoAndSaysWhy) {
  const std::string bad = dir_.path() + "/unreachable";
  simkube::KubeconfigParams p;
  p.server = "http://127.0.0.1:1";  // nothing listens there
  ASSERT_TRUE(simkube::WriteKubeconfig(bad, p).ok());
  Outcome r = Doctor(bad);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("cannot read the cluster (list nodes)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--kubeconfig"), std::string::npos) << r.err;

  r = Doctor(dir_.path() + "/missing");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot read the cluster"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpuop::doctor
