#include "operator/node_labels.h"

#include <gtest/gtest.h>

namespace gpuop::op {
namespace {

Policy DefaultPolicy() {
  OperatorEnv env;
  env.gpuop_image = "gpuop:test";
  env.driver_image_fallback = "driver:test";
  auto p = ParsePolicy(nlohmann::json::object(), env);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

Labels Apply(Labels labels, const LabelChanges& changes) {
  for (const auto& [k, v] : changes) {
    if (v)
      labels[k] = *v;
    else
      labels.erase(k);
  }
  return labels;
}

const Labels kH100 = {{"feature.node.kubernetes.io/pci-10de.present", "true"},
                      {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                      {"kubernetes.io/hostname", "gpu-1"}};

TEST(NodeLabelsTest, ValidationTaintOnlyWhereWantedAndOnlyOurs) {
  EXPECT_TRUE(WantValidationTaint(true, true, true, false));
  EXPECT_FALSE(WantValidationTaint(false, true, true, false));  // off
  EXPECT_FALSE(WantValidationTaint(true, false, true, false));  // no policy
  EXPECT_FALSE(WantValidationTaint(true, true, false, false));  // no operands here
  EXPECT_FALSE(WantValidationTaint(true, true, true, true));    // validated

  const nlohmann::json admin = {{"key", "dedicated"}, {"value", "ml"}, {"effect", "NoSchedule"}};
  const nlohmann::json ours = {{"key", kValidationTaintKey}, {"effect", "NoSchedule"}};
  auto added = TaintsWithValidation(nlohmann::json::array({admin}), true);
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(*added, nlohmann::json::array({admin, ours}));
  EXPECT_FALSE(TaintsWithValidation(*added, true).has_value());  // already there
  auto removed = TaintsWithValidation(*added, false);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(*removed, nlohmann::json::array({admin}));  // the admin's stays
  EXPECT_FALSE(TaintsWithValidation(nlohmann::json::array({admin}), false).has_value());
  EXPECT_FALSE(TaintsWithValidation(nlohmann::json(), false).has_value());
  EXPECT_EQ(*TaintsWithValidation(nlohmann::json(), true), nlohmann::json::array({ours}));
}

TEST(NodeLabelsTest, GpuNodeGetsPresentAndDeployLabels) {
  Policy p = DefaultPolicy();
  LabelChanges c = PlanNodeLabels(kH100, &p);
  Labels after = Apply(kH100, c);
  EXPECT_EQ(after[kGpuPresentLabel], "true");
  for (Component comp : kAllComponents) {
    bool want = p.Enabled(comp);
    EXPECT_EQ(after.count(DeployLabel(comp)), want ? 1u : 0u) << ComponentName(comp);
  }
  EXPECT_EQ(after[kMigConfigLabel], "all-disabled");
  EXPECT_EQ(after["kubernetes.io/hostname"], "gpu-1");
  // Converged: a second pass changes nothing (no write on an idle cluster).
  EXPECT_TRUE(PlanNodeLabels(after, &p).empty());
}

TEST(NodeLabelsTest, CpuNodeUntouchedAndClassVariantsCount) {
  Policy p = DefaultPolicy();
  Labels cpu = {{"kubernetes.io/hostname", "cpu-1"}};
  EXPECT_TRUE(PlanNodeLabels(cpu, &p).empty());
  Labels cls = {{"feature.node.kubernetes.io/pci-0302_10de.present", "true"}};
  EXPECT_TRUE(IsGpuNode(cls));
  EXPECT_FALSE(IsGpuNode({{"feature.node.kubernetes.io/pci-10de.present", "false"}}));
}

TEST(NodeLabelsTest, MigManagerOnlyOnMigCapable) {
  Policy p = DefaultPolicy();
  Labels l40s = {{"feature.node.kubernetes.io/pci-10de.present", "true"},
                 {"nvidia.com/gpu.product", "NVIDIA-L40S"}};
  Labels after = Apply(l40s, PlanNodeLabels(l40s, &p));
  EXPECT_EQ(after.count(DeployLabel(Component::kMigManager)), 0u);
  EXPECT_EQ(after.count(kMigConfigLabel), 0u);
  // GFD's explicit label wins over the product guess.
  l40s[kMigCapableLabel] = "true";
  EXPECT_TRUE(IsMigCapable(l40s));
  EXPECT_FALSE(
      IsMigCapable({{"nvidia.com/gpu.product", "NVIDIA-H100"}, {kMigCapableLabel, "false"}}));
  EXPECT_TRUE(IsMigCapable({{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"}}));
  EXPECT_FALSE(IsMigCapable({{"nvidia.com/gpu.product", "Tesla-T4"}}));
}

TEST(NodeLabelsTest, KeepsValuesOtherComponentsSet) {
  Policy p = DefaultPolicy();
  Labels l = Apply(kH100, PlanNodeLabels(kH100, &p));
  l[DeployLabel(Component::kDevicePlugin)] = "paused-for-mig-change";
  l[kMigConfigLabel] = "all-1g.10gb";
  EXPECT_TRUE(PlanNodeLabels(l, &p).empty());
}

TEST(NodeLabelsTest, DisabledComponentAndOperandsFalseRemoveLabels) {
  Policy p = DefaultPolicy();
  Labels l = Apply(kH100, PlanNodeLabels(kH100, &p));
  for (ComponentSpec& cs : p.components) {
    if (cs.component == Component::kDcgmExporter) cs.enabled = false;
  }
  LabelChanges c = PlanNodeLabels(l, &p);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.begin()->first, DeployLabel(Component::kDcgmExporter));
  EXPECT_FALSE(c.begin()->second.has_value());

  l[kDeployOperandsLabel] = "false";
  Labels after = Apply(l, PlanNodeLabels(l, &p));
  for (Component comp : kAllComponents) EXPECT_EQ(after.count(DeployLabel(comp)), 0u);
  EXPECT_EQ(after[kDeployOperandsLabel], "false");  // the user's
  EXPECT_EQ(after[kGpuPresentLabel], "true");
}

TEST(NodeLabelsTest, LostPciLabelsFlipPresentToFalse) {
  Policy p = DefaultPolicy();
  Labels l = Apply(kH100, PlanNodeLabels(kH100, &p));
  l.erase("feature.node.kubernetes.io/pci-10de.present");
  Labels after = Apply(l, PlanNodeLabels(l, &p));
  EXPECT_EQ(after[kGpuPresentLabel], "false");
  for (Component comp : kAllComponents) EXPECT_EQ(after.count(DeployLabel(comp)), 0u);
}

TEST(NodeLabelsTest, NoPolicyRemovesEverythingTheOperatorAdded) {
  Policy p = DefaultPolicy();
  Labels l = Apply(kH100, PlanNodeLabels(kH100, &p));
  Labels after = Apply(l, PlanNodeLabels(l, nullptr));
  EXPECT_EQ(after, kH100);
  // A MIG layout the user chose stays.
  l[kMigConfigLabel] = "all-balanced";
  EXPECT_EQ(Apply(l, PlanNodeLabels(l, nullptr)).count(kMigConfigLabel), 1u);
}

TEST(NodeLabelsTest, PatchShape) {
  LabelChanges c = {{"a", "1"}, {"b", std::nullopt}};
  EXPECT_EQ(LabelPatch(c).dump(), R"({"metadata":{"labels":{"a":"1","b":null}}})");
}

TEST(NodeLabelsTest, TheCacheKeepsLabelsAsOneStringAndReadsThemBack) {
  nlohmann::json node = {{"metadata",
                          {{"name", "gpu-1"},
                           {"labels",
                            {{"feature.node.kubernetes.io/pci-10de.present", "true"},
                             {"nvidia.com/gpu.deploy.driver", "paused-for-mig-change"},
                             {"empty", ""}}}}}};
  const Labels before = NodeLabels(node);
  ASSERT_EQ(before.size(), 3u);
  FlattenNodeLabels(node);
  EXPECT_FALSE(node["metadata"].contains("labels"));
  EXPECT_EQ(node["metadata"][kFlatLabelsField],
            "empty=\nfeature.node.kubernetes.io/pci-10de.present=true\n"
            "nvidia.com/gpu.deploy.driver=paused-for-mig-change\n");
  EXPECT_EQ(NodeLabels(node), before);

  nlohmann::json bare = {{"metadata", {{"name", "cpu-1"}}}};
  FlattenNodeLabels(bare);
  EXPECT_TRUE(NodeLabels(bare).empty());
}

}  // namespace
}  // namespace gpuop::op
