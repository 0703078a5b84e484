#include "doctor/doctor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuop::doctor {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

Json ClusterPolicy(const std::string& state, const std::string& reason, const std::string& msg) {
  return {{"apiVersion", "nvidia.com/v1"},
          {"kind", "ClusterPolicy"},
          {"metadata", {{"name", "cluster-policy"}}},
          {"status",
           {{"state", state},
            {"conditions", Json::array({{{"type", "Ready"},
                                         {"status", state == "ready" ? "True" : "False"},
                                         {"reason", reason},
                                         {"message", msg}}})}}}};
}

Json GpuNode(const std::string& name, int gpus) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"feature.node.kubernetes.io/pci-10de.present", "true"},
              {"nvidia.com/gpu.present", "true"},
              {"nvidia.com/gpu.deploy.device-plugin", "true"},
              {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
              {"nvidia.com/mig.capable", "true"},
              {"nvidia.com/gpu.count", std::to_string(gpus)}}}}},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}};
}

Json ReadyStatus(const std::string& container) {
  return {
      {"phase", "Running"},
      {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})},
      {"containerStatuses",
       Json::array(
           {{{"name", container}, {"ready", true}, {"state", {{"running", Json::object()}}}}})}};
}

Json OperandPod(const std::string& ds, const std::string& node, const std::string& container) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", ds + "-" + node},
            {"namespace", "gpu-operator"},
            {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                              {"kind", "DaemonSet"},
                                              {"name", ds},
                                              {"uid", "u-" + ds},
                                              {"controller", true}}})}}},
          {"spec", {{"nodeName", node}}},
          {"status", ReadyStatus(container)}};
}

Json DaemonSet(const std::string& ns, const std::string& name, const std::string& image,
               Json args = Json::array()) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "DaemonSet"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"template",
             {{"spec",
               {{"containers",
                 Json::array({{{"name", "plugin"}, {"image", image}, {"args", args}}})}}}}}}},
          {"status", {{"desiredNumberScheduled", 1}}}};
}

// One H100 node with eight healthy GPUs and the operator's pods Ready on it.
Snapshot Healthy() {
  Snapshot s;
  s.cluster_policies.push_back(ClusterPolicy("ready", "Reconciled", "every component is ready"));
  s.nodes.push_back(GpuNode("h100-1", 8));
  s.nodes.push_back({{"metadata", {{"name", "cpu-1"}, {"labels", {{"kind", "cpu"}}}}}});
  s.operator_pods.push_back(
      OperandPod("nvidia-device-plugin-daemonset", "h100-1", "nvidia-device-plugin"));
  s.operator_pods.push_back(
      OperandPod("nvidia-operator-validator", "h100-1", "nvidia-operator-validator"));
  s.daemonsets.push_back(DaemonSet("gpu-operator", "nvidia-device-plugin-daemonset",
                                   "ghcr.io/gpuop/gpuop:0.1.0", {"device-plugin"}));
  s.daemonsets.push_back(DaemonSet("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy"));
  return s;
}

Json& Labels(Snapshot& s, size_t node = 0) { return s.nodes[node]["metadata"]["labels"]; }

TEST(DoctorTest, HealthyClusterHasNoFindings) {
  Snapshot s = Healthy();
  EXPECT_THAT(Diagnose(s), IsEmpty());
  EXPECT_THAT(DevicePluginPodsToRead(s), IsEmpty());
  EXPECT_EQ(FindingsText({}, s),
            "healthy: the ClusterPolicy is ready; 1 GPU node, 8 nvidia.com/gpu allocatable\n");
  EXPECT_EQ(FindingsJson({}).dump(), "[]");
}

TEST(DoctorTest, NoClusterPolicyOrNoCrdBlocks) {
  Snapshot s = Healthy();
  s.cluster_policies.clear();
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[0].object, "clusterpolicy");
  EXPECT_EQ(f[0].problem, "no ClusterPolicy");
  EXPECT_THAT(f[0].fix, HasSubstr("helm install"));

  s.crd_installed = false;
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].object, "customresourcedefinition/clusterpolicies.nvidia.com");
}

TEST(DoctorTest, ClusterPolicyNotReadyGivesItsConditionMessage) {
  Snapshot s = Healthy();
  s.cluster_policies[0] =
      ClusterPolicy("notReady", "ReconcileFailed", "spec.driver.version: not a string");
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[0].object, "clusterpolicy/cluster-policy");
  EXPECT_EQ(f[0].problem, "ClusterPolicy is notReady (ReconcileFailed)");
  EXPECT_EQ(f[0].cause, "spec.driver.version: not a string");

  // An operand not ready sums up the pod findings: it does not block by itself.
  s.cluster_policies[0] = ClusterPolicy("notReady", "OperandNotReady", "not ready: dcgm-exporter");
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kDegraded);

  s.cluster_policies[0] = ClusterPolicy("ready", "NoGPUNodes", "no node has an NVIDIA GPU");
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_THAT(f[0].problem, HasSubstr("no GPU node"));
}

TEST(DoctorTest, NodeMissingGpusNamesTheUnhealthyGpuFromThePluginLog) {
  Snapshot s = Healthy();
  s.nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] = "7";
  ASSERT_EQ(DevicePluginPodsToRead(s),
            std::vector<std::string>{"nvidia-device-plugin-daemonset-h100-1"});
  s.pod_logs["nvidia-device-plugin-daemonset-h100-1"] =
      "ts=2026-12-05T00:00:00.000Z level=info msg=\"serving\" resource=nvidia.com/gpu\n"
      "ts=2026-12-05T00:01:00.000Z level=warn msg=\"device unhealthy\" unit=GPU-3 "
      "reason=\"XID 48 (gpu-reset)\"\n"
      "ts=2026-12-05T00:02:00.000Z level=info msg=\"device healthy again\" unit=GPU-3 "
      "reason=\"XID 48 (gpu-reset)\"\n"
      "ts=2026-12-05T00:03:00.000Z level=warn msg=\"device unhealthy\" unit=GPU-5 "
      "reason=\"XID 79 (lost)\"\n"
      // What plugins before 2026-12-05 logged next, without the reason.
      "ts=2026-12-05T00:03:00.000Z level=info msg=\"device unhealthy\" unit=GPU-5\n";
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kDegraded);
  EXPECT_EQ(f[0].object, "node/h100-1");
  EXPECT_EQ(f[0].problem,
            "1 of 8 GPUs not allocatable (allocatable nvidia.com/gpu 7, nvidia.com/gpu.count 8)");
  EXPECT_EQ(f[0].cause, "the device plugin marked 1 GPU unhealthy: GPU-5: XID 79 (lost)");
  EXPECT_THAT(f[0].fix, HasSubstr("reboot the node"));

  // Without the log: the capacity says the plugin holds the GPU as unhealthy.
  s.pod_logs.clear();
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_THAT(f[0].cause, HasSubstr("reports 1 GPU unhealthy"));

  // Feature discovery counted the lost GPU out; the plugin's capacity still has it.
  Labels(s)["nvidia.com/gpu.count"] = "7";
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].problem, "1 of 8 GPUs not allocatable (allocatable nvidia.com/gpu 7, capacity 8)");
}

TEST(DoctorTest, JsonLogLinesAreReadToo) {
  Snapshot s = Healthy();
  s.nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] = "6";
  s.pod_logs["nvidia-device-plugin-daemonset-h100-1"] =
      R"j({"ts":"x","level":"warn","msg":"device unhealthy","unit":"GPU-1","reason":"XID 48 (gpu-reset)"})j"
      "\n"
      R"j({"ts":"x","level":"warn","msg":"device unhealthy","unit":"GPU-2","reason":"XID 48 (gpu-reset)"})j";
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].cause,
            "the device plugin marked 2 GPUs unhealthy: GPU-1: XID 48 (gpu-reset); GPU-2: XID 48 "
            "(gpu-reset)");
  EXPECT_THAT(f[0].fix, HasSubstr("nvidia-smi -r"));
}

TEST(DoctorTest, GpuNodeWithoutAllocatableGpusBlocks) {
  Snapshot s = Healthy();
  s.nodes[0]["status"]["allocatable"].erase("nvidia.com/gpu");
  s.operator_pods.erase(s.operator_pods.begin());  // no device plugin pod on the node
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[0].object, "node/h100-1");
  EXPECT_EQ(f[0].problem, "GPU node with no allocatable nvidia.com/gpu (nvidia.com/gpu.count 8)");
  EXPECT_THAT(f[0].cause, HasSubstr("no device plugin pod runs on the node"));

  // MIG devices advertised as their own resources (mixed strategy) are fine.
  s.nodes[0]["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "56";
  EXPECT_THAT(Diagnose(s), IsEmpty());
}

TEST(DoctorTest, PciHardwareWithoutGpuPresentLabelBlocks) {
  Snapshot s = Healthy();
  Labels(s).erase("nvidia.com/gpu.present");
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[0].object, "node/h100-1");
  EXPECT_EQ(f[0].problem, "NVIDIA PCI hardware but no nvidia.com/gpu.present=true label");

  // The admin turned the operands off on the node: nothing to report.
  Labels(s)["nvidia.com/gpu.deploy.operands"] = "false";
  EXPECT_THAT(Diagnose(s), IsEmpty());
}

TEST(DoctorTest, CrashLoopingValidatorNamesItsFailingCheck) {
  Snapshot s = Healthy();
  Json& pod = s.operator_pods[1];
  pod["status"] = {
      {"phase", "Pending"},
      {"conditions", Json::array({{{"type", "Ready"}, {"status", "False"}}})},
      {"initContainerStatuses",
       Json::array(
           {{{"name", "driver-validation"}, {"state", {{"terminated", {{"exitCode", 0}}}}}},
            {{"name", "cuda-validation"},
             {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off"}}}}},
             {"lastState",
              {{"terminated",
                {{"exitCode", 1},
                 {"message",
                  "starting\ngpuop validator: cuda: vector-add failed on GPU 2"}}}}}}})}};
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[0].object, "pod/gpu-operator/nvidia-operator-validator-h100-1");
  EXPECT_EQ(f[0].problem,
            "DaemonSet nvidia-operator-validator on node h100-1: init container cuda-validation "
            "fails: the cuda validation does not pass (CrashLoopBackOff)");
  EXPECT_EQ(f[0].cause, "exit code 1: gpuop validator: cuda: vector-add failed on GPU 2");
  EXPECT_THAT(f[0].fix, HasSubstr("-c cuda-validation --previous"));

  // Still retrying its check (the driver is not up yet): no exit, no message.
  pod["status"]["initContainerStatuses"][1] = {{"name", "cuda-validation"},
                                               {"state", {{"running", Json::object()}}}};
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_THAT(f[0].problem, HasSubstr("init container cuda-validation has not finished"));
  EXPECT_EQ(f[0].cause, "the validator retries the cuda check until it passes on the node");
}

TEST(DoctorTest, ImagePullBackOffNamesTheImageMessage) {
  Snapshot s = Healthy();
  s.operator_pods.push_back(OperandPod("nvidia-dcgm-exporter", "h100-1", "nvidia-dcgm-exporter"));
  Json& pod = s.operator_pods.back();
  pod["status"]["conditions"][0]["status"] = "False";
  pod["status"]["containerStatuses"][0] = {
      {"name", "nvidia-dcgm-exporter"},
      {"ready", false},
      {"state",
       {{"waiting",
         {{"reason", "ImagePullBackOff"},
          {"message", "Back-off pulling image \"nvcr.io/nvidia/nope:1\""}}}}}};
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kDegraded);  // metrics only: GPUs still usable
  EXPECT_EQ(f[0].problem,
            "DaemonSet nvidia-dcgm-exporter on node h100-1: container nvidia-dcgm-exporter cannot "
            "pull its image (ImagePullBackOff)");
  EXPECT_EQ(f[0].cause, "Back-off pulling image \"nvcr.io/nvidia/nope:1\"");
}

TEST(DoctorTest, FailedMigConfigGivesTheManagersReason) {
  Snapshot s = Healthy();
  Labels(s)["nvidia.com/mig.config"] = "all-3g.40gb";
  Labels(s)["nvidia.com/mig.config.state"] = "failed";
  s.nodes[0]["metadata"]["annotations"] = {
      {"gpuop.io/mig-config-failure", "GPU 0: 3 profiles do not fit"}};
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kDegraded);
  EXPECT_EQ(f[0].problem,
            "MIG config \"all-3g.40gb\" failed (nvidia.com/mig.config.state=failed); the previous "
            "layout stays");
  EXPECT_EQ(f[0].cause, "GPU 0: 3 profiles do not fit");
}

TEST(DoctorTest, MigConfigOnANodeWithoutMig) {
  Snapshot s = Healthy();
  Labels(s)["nvidia.com/gpu.product"] = "NVIDIA-L40S";
  Labels(s)["nvidia.com/mig.capable"] = "false";
  Labels(s)["nvidia.com/mig.config"] = "all-1g.10gb";
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_EQ(f[0].problem, "MIG config \"all-1g.10gb\" on a node that is not MIG-capable");
  EXPECT_THAT(f[0].cause, HasSubstr("NVIDIA-L40S"));
  Labels(s)["nvidia.com/mig.config"] = "all-disabled";
  EXPECT_THAT(Diagnose(s), IsEmpty());
}

TEST(DoctorTest, UpgradeFailedGivesTheControllersLastEvent) {
  Snapshot s = Healthy();
  Labels(s)["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed";
  s.nodes.push_back(GpuNode("h100-2", 8));
  Labels(s, 2)["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-required";
  auto event = [](const std::string& at, const std::string& msg) {
    return Json{{"involvedObject", {{"kind", "Node"}, {"name", "h100-1"}}},
                {"reason", "GPUDriverUpgrade"},
                {"type", "Warning"},
                {"lastTimestamp", at},
                {"message", msg}};
  };
  s.node_events = {event("2026-12-05T00:02:00Z", "validation did not pass within 600 s"),
                   event("2026-12-05T00:01:00Z", "older")};
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  const Finding& up = f[0];
  EXPECT_EQ(up.severity, Severity::kBlocking);
  EXPECT_THAT(up.problem, HasSubstr("upgrade-failed"));
  EXPECT_THAT(up.problem, HasSubstr("1 node wait behind it"));
  EXPECT_EQ(up.cause, "validation did not pass within 600 s");
  EXPECT_THAT(up.fix, HasSubstr("nvidia.com/gpu-driver-upgrade-state=upgrade-required"));
}

TEST(DoctorTest, ConflictingDevicePluginOutsideTheOperatorsNamespace) {
  Snapshot s = Healthy();
  s.daemonsets.push_back(DaemonSet("kube-system", "nvidia-device-plugin-daemonset",
                                   "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"));
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[0].object, "daemonset/kube-system/nvidia-device-plugin-daemonset");
  EXPECT_EQ(f[0].problem, "a second device plugin advertises nvidia.com/gpu");
  // Scheduled nowhere: no conflict.
  s.daemonsets.back()["status"]["desiredNumberScheduled"] = 0;
  EXPECT_THAT(Diagnose(s), IsEmpty());
}

TEST(DoctorTest, PendingGpuPodSaysWhereGpusAreAllocatable) {
  Snapshot s = Healthy();
  s.pending_pods.push_back(
      {{"metadata", {{"name", "train"}, {"namespace", "ml"}}},
       {"spec",
        {{"containers", Json::array({{{"name", "c"},
                                      {"resources", {{"limits", {{"nvidia.com/gpu", "16"}}}}}}})}}},
       {"status",
        {{"phase", "Pending"},
         {"conditions",
          Json::array(
              {{{"type", "PodScheduled"},
                {"status", "False"},
                {"reason", "Unschedulable"},
                {"message", "0/2 nodes are available: 1 Insufficient nvidia.com/gpu."}}})}}}});
  // Not a GPU pod: ignored; the operator's own: reported with the operator's pods.
  s.pending_pods.push_back({{"metadata", {{"name", "web"}, {"namespace", "ml"}}}});
  s.pending_pods.push_back(s.pending_pods.front());
  s.pending_pods.back()["metadata"]["namespace"] = "gpu-operator";
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].object, "pod/ml/train");
  EXPECT_EQ(f[0].problem, "Pending: requests 16 GPUs and fits on no node");
  EXPECT_THAT(f[0].cause,
              HasSubstr("no node has 16 allocatable GPUs; allocatable nvidia.com/gpu: h100-1 8"));
}

// A pod of `ns` bound to `node` whose one container has `env`.
Json WorkloadPod(const std::string& name, const std::string& node, Json env) {
  return {
      {"metadata", {{"name", name}, {"namespace", "ml"}}},
      {"spec",
       {{"nodeName", node},
        {"containers", Json::array({{{"name", "main"},
                                     {"env", std::move(env)},
                                     {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}},
      {"status", {{"phase", "Running"}}}};
}

Json Env(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

TEST(DoctorTest, CudaNewerThanTheDriverNamesTheDriverBranchThatRunsIt) {
  Snapshot s = Healthy();
  Labels(s)["nvidia.com/cuda.driver-version.full"] = "535.129.03";
  Labels(s)["nvidia.com/cuda.runtime-version.major"] = "12";
  Labels(s)["nvidia.com/cuda.runtime-version.minor"] = "2";
  s.gpu_pods.push_back(WorkloadPod(
      "train", "h100-1",
      Json::array(
          {Env("CUDA_VERSION", "12.4.1"),
           Env("NVIDIA_REQUIRE_CUDA",
               "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470")})));
  EXPECT_TRUE(IsGpuWorkload(s.gpu_pods[0]));
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kDegraded);
  EXPECT_EQ(f[0].object, "pod/ml/train");
  EXPECT_EQ(f[0].problem,
            "container main needs CUDA 12.4 (NVIDIA_REQUIRE_CUDA) but node h100-1's driver "
            "535.129.03 supports CUDA 12.2");
  EXPECT_THAT(f[0].cause, HasSubstr("unsatisfied condition: cuda>=12.4"));
  EXPECT_THAT(f[0].fix, HasSubstr("driver to the 550 branch or later"));
  EXPECT_THAT(f[0].fix, HasSubstr("--set driver.version=<a 550.x release>"));
  EXPECT_THAT(f[0].fix, HasSubstr("forward compatibility"));

  // The older labels of feature discovery say the same.
  Labels(s).erase("nvidia.com/cuda.runtime-version.major");
  Labels(s).erase("nvidia.com/cuda.runtime-version.minor");
  Labels(s)["nvidia.com/cuda.runtime.major"] = "12";
  Labels(s)["nvidia.com/cuda.runtime.minor"] = "2";
  EXPECT_THAT(Diagnose(s), SizeIs(1));

  // The container toolkit's check turned off: only CUDA_VERSION counts, and a
  // newer minor runs under minor version compatibility.
  s.gpu_pods[0]["spec"]["containers"][0]["env"].push_back(Env("NVIDIA_DISABLE_REQUIRE", "true"));
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_THAT(f[0].cause, HasSubstr("minor version compatibility"));

  // A newer major does not run at all; CUDA 13 needs the 580 branch.
  s.gpu_pods[0]["spec"]["containers"][0]["env"] = Json::array({Env("CUDA_VERSION", "13.0.1")});
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kDegraded);
  EXPECT_THAT(f[0].fix, HasSubstr("580 branch"));

  // What the driver supports, or a node without the labels: nothing to say.
  s.gpu_pods[0]["spec"]["containers"][0]["env"] = Json::array({Env("CUDA_VERSION", "12.2.0")});
  EXPECT_THAT(Diagnose(s), IsEmpty());
  s.gpu_pods[0]["spec"]["containers"][0]["env"] = Json::array({Env("CUDA_VERSION", "12.8.0")});
  EXPECT_THAT(Diagnose(s), SizeIs(1));
  Labels(s).erase("nvidia.com/cuda.runtime.major");
  EXPECT_THAT(Diagnose(s), IsEmpty());
}

TEST(DoctorTest, RuntimeWithoutNvidiaOrStaleCdiSpecNamesTheNodeAndItsToolkitPod) {
  Snapshot s = Healthy();
  s.operator_pods.push_back(
      OperandPod("nvidia-container-toolkit-daemonset", "h100-1", "nvidia-container-toolkit"));
  // Stuck in ContainerCreating: the runtime's error is in the pod's Events only.
  Json stuck = WorkloadPod("train", "h100-1", Json::array());
  stuck["status"]["phase"] = "Pending";
  s.pending_pods.push_back(stuck);
  auto sandbox_event = [](const std::string& pod) {
    return Json{{"type", "Warning"},
                {"reason", "FailedCreatePodSandBox"},
                {"involvedObject", {{"kind", "Pod"}, {"namespace", "ml"}, {"name", pod}}},
                {"message",
                 "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get "
                 "sandbox runtime: no runtime for \"nvidia\" is configured"}};
  };
  s.sandbox_events.push_back(sandbox_event("train"));
  s.sandbox_events.push_back(sandbox_event("gone"));  // its pod was deleted: an old Event
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[0].object, "node/h100-1");
  EXPECT_EQ(f[0].problem,
            "the container runtime has no \"nvidia\" runtime configured: 1 pod cannot start "
            "(pod/ml/train)");
  EXPECT_THAT(f[0].cause, HasSubstr("no runtime for \"nvidia\" is configured"));
  EXPECT_THAT(f[0].fix, HasSubstr("kubectl delete pod -n gpu-operator "
                                  "nvidia-container-toolkit-daemonset-h100-1"));

  // The sandbox made since: the Event is history.
  s.pending_pods[0]["status"]["conditions"] =
      Json::array({{{"type", "PodReadyToStartContainers"}, {"status", "True"}}});
  EXPECT_THAT(Diagnose(s), IsEmpty());

  // A device the CDI spec does not have, in a running pod's container status.
  s.sandbox_events.clear();
  Json cdi = WorkloadPod("infer", "h100-1", Json::array());
  cdi["status"]["containerStatuses"] =
      Json::array({{{"name", "main"},
                    {"state",
                     {{"waiting",
                       {{"reason", "CreateContainerError"},
                        {"message",
                         "failed to create containerd container: CDI device injection failed: "
                         "unresolvable CDI devices nvidia.com/gpu=GPU-5"}}}}}}});
  s.gpu_pods.push_back(cdi);
  f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].object, "node/h100-1");
  EXPECT_THAT(f[0].problem, HasSubstr("the CDI spec lacks a device"));
  EXPECT_THAT(f[0].problem, HasSubstr("(pod/ml/infer)"));
}

TEST(DoctorTest, PrometheusOperatorWithoutAServiceMonitorForTheExporter) {
  Snapshot s = Healthy();
  s.service_monitors.emplace();  // served, none there
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(1));
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_EQ(f[0].object, "clusterpolicy/cluster-policy");
  EXPECT_THAT(f[0].fix, HasSubstr("deploy/monitoring/servicemonitor.yaml"));

  s.service_monitors->push_back(
      {{"metadata", {{"name", "nvidia-dcgm-exporter"}, {"namespace", "gpu-operator"}}},
       {"spec", {{"selector", {{"matchLabels", {{"app", "nvidia-dcgm-exporter"}}}}}}}});
  EXPECT_THAT(Diagnose(s), IsEmpty());

  // The exporter turned off, or no Prometheus Operator: nothing to scrape, or nobody to.
  s.service_monitors->clear();
  s.cluster_policies[0]["spec"]["dcgmExporter"]["enabled"] = false;
  EXPECT_THAT(Diagnose(s), IsEmpty());
  s.cluster_policies[0]["spec"]["dcgmExporter"]["enabled"] = true;
  s.service_monitors.reset();
  EXPECT_THAT(Diagnose(s), IsEmpty());
}

TEST(DoctorTest, BlockingFindingsComeFirst) {
  Snapshot s = Healthy();
  Labels(s)["nvidia.com/mig.config"] = "all-1g.10gb";
  Labels(s)["nvidia.com/mig.capable"] = "false";                // warning
  s.nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] = "7";  // degraded
  s.daemonsets.push_back(DaemonSet("kube-system", "nvidia-device-plugin-daemonset",
                                   "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"));  // blocking
  auto f = Diagnose(s);
  ASSERT_THAT(f, SizeIs(3));
  EXPECT_EQ(f[0].severity, Severity::kBlocking);
  EXPECT_EQ(f[1].severity, Severity::kDegraded);
  EXPECT_EQ(f[2].severity, Severity::kWarning);
  auto j = FindingsJson(f);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["severity"], "blocking");
  EXPECT_EQ(j[0].begin().key(), "severity");  // in the documented order
  EXPECT_EQ(j[1]["object"], "node/h100-1");
  for (const char* key : {"severity", "object", "problem", "cause", "fix"}) {
    EXPECT_TRUE(j[2].contains(key)) << key;
  }
  EXPECT_THAT(FindingsText(f, s), HasSubstr("3 findings: 1 blocking, 1 degraded, 1 warning\n"));
}

}  // namespace
}  // namespace gpuop::doctor
