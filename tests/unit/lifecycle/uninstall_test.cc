#include "lifecycle/uninstall.h"

#include <gtest/gtest.h>

#include "kube/object.h"
#include "kube/resource.h"
#include "operator/operator.h"
#include "tests/testing/api_emulator.h"

namespace gpuop::lifecycle {
namespace {

using Json = nlohmann::json;
namespace res = kube::resources;

Json Node(Json labels, Json annotations = Json::object(), Json taints = Json::array()) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", "gpu-1"},
            {"resourceVersion", "7"},
            {"labels", std::move(labels)},
            {"annotations", std::move(annotations)}}},
          {"spec", {{"taints", std::move(taints)}}}};
}

TEST(NodeCleanupPatchTest, StripsWhatTheComponentsWroteAndKeepsTheUsersChoices) {
  Json node =
      Node({{"kubernetes.io/hostname", "gpu-1"},
            {"feature.node.kubernetes.io/pci-10de.present", "true"},
            {"nvidia.com/gpu.present", "true"},
            {"nvidia.com/gpu.deploy.device-plugin", "true"},
            {"nvidia.com/gpu.deploy.dcgm-exporter", "false"},  // meaningless without gpuop
            {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
            {"nvidia.com/gpu.count", "8"},
            {"nvidia.com/device-plugin.config", "time-sliced"},  // a user's choice
            {"nvidia.com/mig.config.state", "success"},
            {"team", "ml"}},
           {{"gpuop.io/gfd-labels", "nvidia.com/gpu.count,nvidia.com/gpu.product"},
            {"gpuop.io/mig-config-failure", "NVML: NVIDIA driver is not loaded"},
            {"owner", "team-ml"}},
           Json::array({{{"key", "gpuop.io/validation-pending"}, {"effect", "NoSchedule"}},
                        {{"key", "dedicated"}, {"value", "ml"}, {"effect", "NoSchedule"}}}));
  auto patch = NodeCleanupPatch(node, /*node_discovery_ran=*/true);
  ASSERT_TRUE(patch.has_value());
  const Json& labels = (*patch)["metadata"]["labels"];
  for (const char* gone :
       {"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present",
        "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.dcgm-exporter",
        "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/mig.config.state"}) {
    ASSERT_TRUE(labels.contains(gone)) << gone << " in " << patch->dump();
    EXPECT_TRUE(labels[gone].is_null()) << gone;
  }
  for (const char* kept : {"kubernetes.io/hostname", "nvidia.com/device-plugin.config", "team"}) {
    EXPECT_FALSE(labels.contains(kept)) << kept;
  }
  EXPECT_TRUE((*patch)["metadata"]["annotations"]["gpuop.io/gfd-labels"].is_null());
  EXPECT_TRUE((*patch)["metadata"]["annotations"]["gpuop.io/mig-config-failure"].is_null());
  EXPECT_FALSE((*patch)["metadata"]["annotations"].contains("owner"));
  // Only the validation taint goes, conditional on the version read.
  EXPECT_EQ((*patch)["spec"]["taints"],
            Json::array({{{"key", "dedicated"}, {"value", "ml"}, {"effect", "NoSchedule"}}}));
  EXPECT_EQ((*patch)["metadata"]["resourceVersion"], "7");
}

TEST(NodeCleanupPatchTest, LeavesNfdsLabelsAndCleanNodesAlone) {
  // Node Feature Discovery labelled this node, not gpuop's node discovery.
  Json nfd = Node({{"feature.node.kubernetes.io/pci-10de.present", "true"}},
                  {{"nfd.node.kubernetes.io/feature-labels", "pci-10de.present"}});
  EXPECT_FALSE(NodeCleanupPatch(nfd, /*node_discovery_ran=*/true).has_value());
  Json plain = Node({{"feature.node.kubernetes.io/pci-10de.present", "true"}});
  EXPECT_FALSE(NodeCleanupPatch(plain, /*node_discovery_ran=*/false).has_value());
  EXPECT_FALSE(NodeCleanupPatch(Node({{"team", "ml"}}), true).has_value());
}

class UninstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().message();
    api_ = std::move(api).value();
    ASSERT_TRUE(op::EnsureClusterPolicyCrd(client(), "test", std::chrono::seconds(30)).ok());
    ASSERT_TRUE(client()
                    .Create(res::kNamespaces, "",
                            {{"apiVersion", "v1"},
                             {"kind", "Namespace"},
                             {"metadata", {{"name", "gpu-operator"}}}})
                    .ok());
  }
  kube::Client& client() { return *api_.client; }
  testing::ApiEmulator api_;
};

TEST_F(UninstallTest, RemovesThePolicyItsComponentsAndWhatTheyLeftOnNodes) {
  auto cp = client().Create(res::kClusterPolicies, "",
                            {{"apiVersion", "nvidia.com/v1"},
                             {"kind", "ClusterPolicy"},
                             {"metadata", {{"name", "cluster-policy"}}},
                             {"spec", Json::object()}});
  ASSERT_TRUE(cp.ok()) << cp.status().message();
  Json owner = {{"apiVersion", "nvidia.com/v1"},
                {"kind", "ClusterPolicy"},
                {"name", "cluster-policy"},
                {"uid", (*cp)["metadata"]["uid"]},
                {"controller", true}};
  Json ds = {
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata",
       {{"name", "gpuop-node-discovery"},
        {"namespace", "gpu-operator"},
        {"labels", {{"app.kubernetes.io/managed-by", "gpuop"}}},
        {"ownerReferences", Json::array({owner})}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", "nd"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "nd"}, {"app.kubernetes.io/managed-by", "gpuop"}}}}},
          {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "gpuop"}}})}}}}}}}};
  auto created = client().Create(res::kDaemonSets, "gpu-operator", ds);
  ASSERT_TRUE(created.ok()) << created.status().message();
  Json node = Node({{"feature.node.kubernetes.io/pci-10de.present", "true"},
                    {"nvidia.com/gpu.present", "true"},
                    {"nvidia.com/gpu.product", "NVIDIA-L40S"},
                    {"team", "ml"}},
                   {{"gpuop.io/gfd-labels", "nvidia.com/gpu.product"}});
  node["metadata"].erase("resourceVersion");
  auto made = client().Create(res::kNodes, "", node);
  ASSERT_TRUE(made.ok()) << made.status().message();

  UninstallOptions o;
  o.timeout = std::chrono::seconds(30);
  o.poll = std::chrono::milliseconds(20);
  o.delete_crd = true;
  Status st = Uninstall(client(), o);
  ASSERT_TRUE(st.ok()) << st.message();

  EXPECT_TRUE(kube::IsNotFound(
      client().Get(res::kDaemonSets, "gpu-operator", "gpuop-node-discovery").status()));
  auto after = client().Get(res::kNodes, "", "gpu-1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(kube::Labels(*after), (std::map<std::string, std::string>{{"team", "ml"}}));
  EXPECT_FALSE(kube::Annotation(*after, "gpuop.io/gfd-labels").has_value());
  EXPECT_TRUE(
      kube::IsNotFound(client().Get(res::kCustomResourceDefinitions, "", op::kCrdName).status()));
}

TEST_F(UninstallTest, AClusterWithoutGpuopIsAlreadyClean) {
  UninstallOptions o;
  o.timeout = std::chrono::seconds(10);
  Status st = Uninstall(client(), o);
  EXPECT_TRUE(st.ok()) << st.message();
  // The CRD stays unless asked.
  EXPECT_TRUE(client().Get(res::kCustomResourceDefinitions, "", op::kCrdName).ok());
}

TEST_F(UninstallTest, CrdApplyUpgradesAnOlderCrdAndLeavesANewerOne) {
  auto crd = client().Get(res::kCustomResourceDefinitions, "", op::kCrdName);
  ASSERT_TRUE(crd.ok());
  const std::string built = *kube::Annotation(*crd, op::kCrdVersionAnnotation);
  // An older one (as after `helm install` of an older chart) is upgraded.
  Json older = *crd;
  older["metadata"]["annotations"][op::kCrdVersionAnnotation] = "0";
  older["spec"]["versions"][0]["additionalPrinterColumns"] = Json::array();
  ASSERT_TRUE(client().Update(res::kCustomResourceDefinitions, older).ok());
  ASSERT_TRUE(op::EnsureClusterPolicyCrd(client(), "test", std::chrono::seconds(10)).ok());
  auto upgraded = client().Get(res::kCustomResourceDefinitions, "", op::kCrdName);
  ASSERT_TRUE(upgraded.ok());
  EXPECT_EQ(*kube::Annotation(*upgraded, op::kCrdVersionAnnotation), built);
  EXPECT_FALSE(upgraded->at("spec").at("versions").at(0).at("additionalPrinterColumns").empty());
  // A newer one (a later gpuop's) is left alone.
  Json newer = *upgraded;
  newer["metadata"]["annotations"][op::kCrdVersionAnnotation] = "999999";
  ASSERT_TRUE(client().Update(res::kCustomResourceDefinitions, newer).ok());
  ASSERT_TRUE(op::EnsureClusterPolicyCrd(client(), "test").ok());
  auto kept = client().Get(res::kCustomResourceDefinitions, "", op::kCrdName);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kube::Annotation(*kept, op::kCrdVersionAnnotation), "999999");
}

}  // namespace
}  // namespace gpuop::lifecycle
