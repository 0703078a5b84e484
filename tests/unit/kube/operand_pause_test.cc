#include "kube/operand_pause.h"

#include <gtest/gtest.h>

#include "tests/testing/pod_object.h"

namespace gpuop::kube {
namespace {

using testing::PodObject;

using Json = nlohmann::json;
using Labels = std::map<std::string, std::string>;

TEST(PauseTableTest, MatchesKubernetesDriverManager) {
  // k8s-driver-manager's pause/restore table, row by row.
  EXPECT_EQ(PausedValue(std::nullopt), std::nullopt);
  EXPECT_EQ(PausedValue(""), std::nullopt);
  EXPECT_EQ(PausedValue("false"), std::nullopt);
  EXPECT_EQ(PausedValue("true"), "paused-for-driver-upgrade");
  EXPECT_EQ(PausedValue("paused-for-driver-upgrade"), std::nullopt);
  EXPECT_EQ(PausedValue("pre-installed_paused-for-driver-upgrade"), std::nullopt);
  EXPECT_EQ(PausedValue("pre-installed"), "pre-installed_paused-for-driver-upgrade");
  // Another pauser's value (the MIG manager's) is kept under ours.
  EXPECT_EQ(PausedValue("paused-for-mig-change"),
            "paused-for-mig-change_paused-for-driver-upgrade");

  EXPECT_EQ(RestoredValue(std::nullopt), std::nullopt);
  EXPECT_EQ(RestoredValue(""), std::nullopt);
  EXPECT_EQ(RestoredValue("false"), std::nullopt);
  EXPECT_EQ(RestoredValue("true"), std::nullopt);
  EXPECT_EQ(RestoredValue("paused-for-driver-upgrade"), "true");
  EXPECT_EQ(RestoredValue("pre-installed_paused-for-driver-upgrade"), "pre-installed");
  EXPECT_EQ(RestoredValue("pre-installed"), std::nullopt);
}

TEST(PauseTableTest, PauseThenRestoreIsTheIdentityAndPausingTwiceChangesNothing) {
  for (std::string v : {"true", "false", "", "pre-installed", "paused-for-mig-change"}) {
    std::string paused = PausedValue(v).value_or(v);
    EXPECT_EQ(PausedValue(paused), std::nullopt) << v;  // a re-run after a crash
    EXPECT_EQ(RestoredValue(paused).value_or(paused), v);
  }
}

TEST(PauseChangesTest, PausesTheDeployLabelsSetToTrueAndTheCustomLabel) {
  Labels node{{"nvidia.com/gpu.deploy.device-plugin", "true"},
              {"nvidia.com/gpu.deploy.gpu-feature-discovery", "true"},
              {"nvidia.com/gpu.deploy.dcgm-exporter", "false"},
              {"nvidia.com/gpu.deploy.driver", "true"},                // never paused
              {"nvidia.com/gpu.deploy.node-status-exporter", "true"},  // never paused
              {"nvidia.com/gpu.deploy.dra-driver", "true"},            // paused later, on its own
              {"nvidia.com/gpu.deploy.mig-manager", "pre-installed"},
              {"example.com/gpu-client", "true"}};
  auto changes = PauseChanges(node, PausableLabels("example.com/gpu-client"));
  EXPECT_EQ(
      changes,
      (Labels{{"nvidia.com/gpu.deploy.device-plugin", "paused-for-driver-upgrade"},
              {"nvidia.com/gpu.deploy.gpu-feature-discovery", "paused-for-driver-upgrade"},
              {"nvidia.com/gpu.deploy.mig-manager", "pre-installed_paused-for-driver-upgrade"},
              {"example.com/gpu-client", "paused-for-driver-upgrade"}}));
  // Absent labels (client, nvsm, ...) are not written: the operator's labeler
  // would read an empty value as "not set".
  for (const auto& [k, v] : changes) EXPECT_TRUE(node.contains(k)) << k;

  Labels paused = node;
  for (const auto& [k, v] : changes) paused[k] = v;
  EXPECT_TRUE(PauseChanges(paused, PausableLabels("example.com/gpu-client")).empty());
  auto restore = RestoreChanges(paused, PausableLabelsAndDra("example.com/gpu-client"));
  Labels restored = paused;
  for (const auto& [k, v] : restore) restored[k] = v;
  EXPECT_EQ(restored, node);
  EXPECT_EQ(LabelPatch({{"a", "b"}}), (Json{{"metadata", {{"labels", {{"a", "b"}}}}}}));
}

TEST(PausableLabelsTest, SixteenUpstreamLabelsLessTheDraDriverPlusTheCustomOne) {
  auto labels = PausableLabels("");
  EXPECT_EQ(labels.size(), 15u);
  EXPECT_EQ(labels.front(), "nvidia.com/gpu.deploy.operator-validator");
  for (const std::string& l : labels) {
    EXPECT_NE(l, "nvidia.com/gpu.deploy.driver");
    EXPECT_NE(l, "nvidia.com/gpu.deploy.dra-driver");
  }
  EXPECT_EQ(PausableLabels("team/gpu").back(), "team/gpu");
  // Naming a deploy label as the custom one does not pause it twice.
  EXPECT_EQ(PausableLabels("nvidia.com/gpu.deploy.client").size(), 15u);
  EXPECT_EQ(PausableLabelsAndDra("").back(), "nvidia.com/gpu.deploy.dra-driver");
}

TEST(IsOperandPodTest, OperandAppsInTheOperatorNamespaceAndClientDaemonSets) {
  Json spec{{"containers", Json::array({{{"name", "c"}}})}};
  EXPECT_TRUE(IsOperandPod(PodObject("gpu-operator", "dp", spec,
                                     {{"app", "nvidia-device-plugin-daemonset"}}, "DaemonSet"),
                           "gpu-operator"));
  EXPECT_TRUE(IsOperandPod(PodObject("gpu-operator", "mig", spec, {{"app", "nvidia-mig-manager"}}),
                           "gpu-operator"));
  // The same app elsewhere, the driver itself, the DRA plugin: not operands.
  EXPECT_FALSE(IsOperandPod(
      PodObject("other", "dp", spec, {{"app", "nvidia-device-plugin-daemonset"}}), "gpu-operator"));
  EXPECT_FALSE(IsOperandPod(
      PodObject("gpu-operator", "drv", spec, {{"app", "nvidia-driver-daemonset"}}, "DaemonSet"),
      "gpu-operator"));
  Json dra = PodObject("gpu-operator", "dra", spec, {{"app", "nvidia-dra-driver-kubelet-plugin"}});
  EXPECT_FALSE(IsOperandPod(dra, "gpu-operator"));
  EXPECT_TRUE(IsDraPluginPod(dra, "gpu-operator"));
  // A user's DaemonSet that opted in through the client deploy label.
  Json client_spec = spec;
  client_spec["nodeSelector"] = {{"nvidia.com/gpu.deploy.client", "true"}};
  EXPECT_TRUE(
      IsOperandPod(PodObject("monitoring", "agent", client_spec, {}, "DaemonSet"), "gpu-operator"));
  EXPECT_FALSE(IsOperandPod(PodObject("monitoring", "agent", client_spec, {}, "ReplicaSet"),
                            "gpu-operator"));
}

}  // namespace
}  // namespace gpuop::kube
