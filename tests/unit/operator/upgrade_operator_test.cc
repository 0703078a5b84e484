// The driver upgrade through the whole operator (its node cache, its
// rendered driver DaemonSet, its metrics), against the API emulator: a
// driver.version change upgrades an admin-cordoned node, which stays
// cordoned. The test plays the DaemonSet controller and the kubelet.
#include <gtest/gtest.h>

#include <thread>

#include "kube/object.h"
#include "kube/resource.h"
#include "operator/operator.h"
#include "operator/upgrade.h"
#include "tests/testing/api_emulator.h"

namespace gpuop::op {
namespace {

using Json = nlohmann::json;
namespace res = kube::resources;
namespace up = upgrade;

constexpr const char* kNs = "gpu-operator";
constexpr const char* kDs = "nvidia-driver-daemonset";
constexpr const char* kNode = "gpu-1";
const kube::Resource kRevisions{"apps", "v1", "controllerrevisions", "ControllerRevision", true};

class UpgradeOperatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().message();
    api_ = std::move(api).value();
    ASSERT_TRUE(
        client()
            .Create(res::kNamespaces, "",
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}})
            .ok());
    Json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata",
         {{"name", kNode}, {"labels", {{"feature.node.kubernetes.io/pci-10de.present", "true"}}}}}};
    ASSERT_TRUE(client().Create(res::kNodes, "", node).ok());
    ASSERT_TRUE(
        PatchStatus(res::kNodes, "", kNode,
                    {{"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}));

    ASSERT_TRUE(EnsureClusterPolicyCrd(client(), "test", std::chrono::seconds(30)).ok());
    OperatorOptions options;
    options.env.namespace_ = kNs;
    options.env.gpuop_image = "ghcr.io/gpuop/gpuop:test";
    operator_ = std::make_unique<Operator>(client(), options, nullptr);
    ASSERT_TRUE(operator_->Setup().ok());
    thread_ = std::jthread([this](std::stop_token s) { (void)operator_->Run(s); });

    auto cp = client().Create(res::kClusterPolicies, "",
                              {{"apiVersion", "nvidia.com/v1"},
                               {"kind", "ClusterPolicy"},
                               {"metadata", {{"name", "cluster-policy"}}},
                               {"spec", {{"driver", Driver("535.129.03")}}}});
    ASSERT_TRUE(cp.ok()) << cp.status().message();
  }

  void TearDown() override {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
    operator_.reset();
  }

  kube::Client& client() { return *api_.client; }

  static Json Driver(const std::string& version) {
    return {{"repository", "nvcr.io/nvidia"},
            {"image", "driver"},
            {"version", version},
            {"upgradePolicy", {{"autoUpgrade", true}}}};
  }

  bool PatchStatus(const kube::Resource& r, const std::string& ns, const std::string& name,
                   Json status) {
    kube::PatchOptions o;
    o.subresource = "status";
    auto p =
        client().Patch(r, ns, name, kube::PatchType::kMerge, {{"status", std::move(status)}}, o);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok();
  }

  // Waits (a generous deadline) until `cond` holds, playing the kubelet meanwhile.
  bool Eventually(const std::function<bool()>& cond) {
    for (int i = 0; i < 3000; ++i) {
      if (cond()) return true;
      KubeletStep();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // The DaemonSet controller's part: a ControllerRevision for the rendered
  // template, when it changed.
  void Revise(const Json& ds) {
    const std::string tmpl = ds["spec"]["template"].dump();
    if (tmpl == template_) return;
    template_ = tmpl;
    ++revision_;
    hash_ = "h" + std::to_string(revision_);
    Json rev = {{"apiVersion", "apps/v1"},
                {"kind", "ControllerRevision"},
                {"metadata",
                 {{"name", std::string(kDs) + "-" + hash_},
                  {"namespace", kNs},
                  {"labels", {{"app.kubernetes.io/component", "driver"}}},
                  {"ownerReferences", Json::array({kube::ControllerReference(ds)})}}},
                {"data", Json::object()},
                {"revision", revision_}};
    auto created = client().Create(kRevisions, kNs, rev);
    ASSERT_TRUE(created.ok()) << created.status().message();
  }

  void KubeletStep() {
    auto ds = client().Get(res::kDaemonSets, kNs, kDs);
    if (!ds.ok()) return;
    Revise(*ds);
    auto pods = client().List(res::kPods, kNs);
    ASSERT_TRUE(pods.ok());
    bool has_driver = false;
    for (const Json& p : pods->items) {
      if (kube::IsBeingDeleted(p)) {
        kube::DeleteOptions now;
        now.grace_period_seconds = 0;
        (void)client().Delete(res::kPods, kNs, kube::Name(p), now);
      } else if (kube::Label(p, "app") == kDs) {
        has_driver = true;
      }
    }
    if (has_driver) return;
    Json spec = (*ds)["spec"]["template"]["spec"];
    spec["nodeName"] = kNode;
    Json labels = (*ds)["spec"]["template"]["metadata"]["labels"];
    labels["controller-revision-hash"] = hash_;
    const std::string name = std::string(kDs) + "-" + hash_;
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", kNs},
                  {"labels", labels},
                  {"ownerReferences", Json::array({kube::ControllerReference(*ds)})}}},
                {"spec", spec}};
    auto created = client().Create(res::kPods, kNs, pod);
    ASSERT_TRUE(created.ok()) << created.status().message();
    PatchStatus(
        res::kPods, kNs, name,
        {{"phase", "Running"},
         {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})},
         {"containerStatuses", Json::array({{{"name", "nvidia-driver-ctr"}, {"ready", true}}})}});
  }

  Json Node() {
    auto n = client().Get(res::kNodes, "", kNode);
    EXPECT_TRUE(n.ok());
    return n.ok() ? *n : Json::object();
  }
  std::string State() { return kube::Label(Node(), up::kStateLabel).value_or(""); }

  testing::ApiEmulator api_;
  std::unique_ptr<Operator> operator_;
  std::jthread thread_;
  std::string template_;
  int revision_ = 0;
  std::string hash_;
};

TEST_F(UpgradeOperatorTest, AVersionChangeUpgradesTheNodeAndKeepsTheAdminCordon) {
  ASSERT_TRUE(Eventually([&] { return State() == "upgrade-done"; }));
  EXPECT_EQ(kube::Annotation(Node(), up::kEnabledAnnotation), "true");
  EXPECT_NE(operator_->metrics().Exposition().find("gpu_operator_driver_auto_upgrade_enabled 1"),
            std::string::npos);

  ASSERT_TRUE(client()
                  .Patch(res::kNodes, "", kNode, kube::PatchType::kMerge,
                         {{"spec", {{"unschedulable", true}}}})
                  .ok());
  ASSERT_TRUE(client()
                  .Patch(res::kClusterPolicies, "", "cluster-policy", kube::PatchType::kMerge,
                         {{"spec", {{"driver", Driver("550.54.15")}}}})
                  .ok());
  // The operator's node cache shows the cordon (remembered), the node is
  // Ready (it starts), and the new driver pod comes up: validation is next.
  ASSERT_TRUE(Eventually([&] { return State() == "validation-required"; })) << "state " << State();
  EXPECT_EQ(kube::Annotation(Node(), up::kInitialStateAnnotation), "true");
  auto driver = client().Get(res::kPods, kNs, std::string(kDs) + "-" + hash_);
  ASSERT_TRUE(driver.ok()) << "the driver pod of the new revision";

  Json validator = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "validator"},
        {"namespace", kNs},
        {"labels", {{"app", "nvidia-operator-validator"}}}}},
      {"spec",
       {{"nodeName", kNode}, {"containers", Json::array({{{"name", "c"}, {"image", "img"}}})}}}};
  ASSERT_TRUE(client().Create(res::kPods, kNs, validator).ok());
  PatchStatus(res::kPods, kNs, "validator",
              {{"phase", "Running"},
               {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})},
               {"containerStatuses", Json::array({{{"name", "c"}, {"ready", true}}})}});
  ASSERT_TRUE(Eventually([&] { return State() == "upgrade-done"; })) << "state " << State();
  Json node = Node();
  EXPECT_TRUE(kube::IsUnschedulable(node));
  EXPECT_FALSE(kube::Annotation(node, up::kInitialStateAnnotation).has_value());
  ASSERT_TRUE(Eventually([&] {
    return operator_->metrics().Exposition().find("gpu_operator_nodes_upgrades_done 1") !=
           std::string::npos;
  }));
}

}  // namespace
}  // namespace gpuop::op
