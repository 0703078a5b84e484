// The scheduler allocating ResourceClaims against the API emulator: NVIDIA's
// DeviceClasses, ResourceSlices as the DRA plugin publishes them, claims by
// name and from templates.
#include <gtest/gtest.h>

#include "base/strings.h"
#include "sim/cluster/scheduler.h"
#include "tests/unit/simcluster/controllers_testing.h"
#include "tests/unit/simcluster/dra_fixtures.h"

namespace gpuop::simcluster {
namespace {

using testing::DeviceClass;

using ::gpuop::testing::WaitFor;
using testing::CreateNode;
namespace res = kube::resources;

constexpr const char* kDriver = "gpu.nvidia.com";


Json Gpu(int minor, const std::string& product) {
  return {{"name", "gpu-" + std::to_string(minor)},
          {"attributes",
           {{"type", {{"string", "gpu"}}},
            {"productName", {{"string", product}}},
            {"driverVersion", {{"version", "550.127.5"}}}}},
          {"capacity", {{"memory", {{"value", "80Gi"}}}}}};
}

Json Mig(int parent, int start) {
  return {{"name", "gpu-" + std::to_string(parent) + "-mig-1g10gb-19-" + std::to_string(start)},
          {"attributes",
           {{"type", {{"string", "mig"}}},
            {"profile", {{"string", "1g.10gb"}}},
            {"productName", {{"string", "NVIDIA A100-SXM4-80GB"}}}}},
          {"capacity", {{"memory", {{"value", "10Gi"}}}}}};
}

Json Slice(const std::string& node, Json devices) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.nvidia.com"}}},
          {"spec",
           {{"driver", kDriver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

// spec of a claim with one request of `cls`, with an optional CEL selector.
Json ClaimSpec(const std::string& cls, const std::string& selector = "", int count = 1) {
  Json exactly = {{"deviceClassName", cls}, {"allocationMode", "ExactCount"}, {"count", count}};
  if (!selector.empty()) {
    exactly["selectors"] = Json::array({{{"cel", {{"expression", selector}}}}});
  }
  return {{"devices", {{"requests", Json::array({{{"name", "gpu"}, {"exactly", exactly}}})}}}};
}

Json PodWithClaims(const std::string& name, Json resource_claims) {
  Json container = {{"name", "main"}, {"image", "cuda"}};
  Json claims_used = Json::array();
  for (const auto& c : resource_claims) claims_used.push_back({{"name", c["name"]}});
  container["resources"] = {{"claims", claims_used}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec", {{"containers", Json::array({container})}, {"resourceClaims", resource_claims}}}};
}

Json ByName(const std::string& entry, const std::string& claim) {
  return Json::array({{{"name", entry}, {"resourceClaimName", claim}}});
}

Json ByTemplate(const std::string& entry, const std::string& tmpl) {
  return Json::array({{{"name", entry}, {"resourceClaimTemplateName", tmpl}}});
}

const std::string kH100 = "NVIDIA H100 80GB HBM3";

class SchedulerDraTest : public testing::EmulatorTest {
 protected:
  void SetUp() override {
    EmulatorTest::SetUp();
    if (HasFatalFailure()) return;
    for (const char* n : {"dgx-h100", "dgx-a100", "l40s-4"}) CreateNode(client(), {n, {}});
    Create(kDeviceClasses, "", DeviceClass("gpu.nvidia.com", "gpu"));
    Create(kDeviceClasses, "", DeviceClass("mig.nvidia.com", "mig"));
    Create(kResourceSlices, "", Slice("dgx-h100", Json::array({Gpu(0, kH100), Gpu(1, kH100)})));
    Create(kResourceSlices, "",
           Slice("dgx-a100", Json::array({Mig(0, 0), Mig(0, 1), Gpu(1, "NVIDIA A100-SXM4-80GB")})));
    Json l40s = Json::array();
    for (int i = 0; i < 4; ++i) l40s.push_back(Gpu(i, "NVIDIA L40S"));
    Create(kResourceSlices, "", Slice("l40s-4", l40s));
  }
  void TearDown() override { scheduler_.reset(); }

  void StartScheduler() {
    auto s = Scheduler::Start(client());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    scheduler_ = std::move(s).value();
    ASSERT_TRUE(scheduler_->WaitForSync(std::chrono::seconds(30)));
  }

  void Create(const kube::Resource& r, const std::string& ns, const Json& obj) {
    auto created = client().Create(r, ns, obj);
    ASSERT_TRUE(created.ok()) << r.resource << ": " << created.status().ToString();
  }
  void CreateClaim(const std::string& name, const Json& spec) {
    Create(kResourceClaims, "default",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}}},
            {"spec", spec}});
  }
  void CreateTemplate(const std::string& name, const Json& spec) {
    Create(kResourceClaimTemplates, "default",
           {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaimTemplate"},
            {"metadata", {{"name", name}}},
            {"spec", {{"metadata", {{"labels", {{"app", "train"}}}}}, {"spec", spec}}}});
  }

  Json Get(const kube::Resource& r, const std::string& name) {
    auto o = client().Get(r, "default", name);
    return o.ok() ? *o : Json();
  }
  Json Pod(const std::string& name) { return Get(res::kPods, name); }
  Json ClaimObj(const std::string& name) { return Get(kResourceClaims, name); }
  bool ClaimExists(const std::string& name) {
    return client().Get(kResourceClaims, "default", name).ok();
  }
  std::string NodeOf(const std::string& pod) { return kube::PodNodeName(Pod(pod)); }
  bool WaitBound(const std::string& pod) {
    return WaitFor([&] { return !NodeOf(pod).empty(); });
  }
  std::string UnschedulableMessage(const std::string& pod) {
    auto c = kube::FindCondition(Pod(pod), "PodScheduled");
    if (!c || c->status != "False" || c->reason != "Unschedulable") return "";
    return c->message;
  }
  // "pool/device" of each allocated device.
  static std::vector<std::string> Devices(const Json& claim) {
    std::vector<std::string> out;
    for (const auto& d : AllocatedDevices(claim)) out.push_back(d.pool + "/" + d.device);
    return out;
  }
  static std::vector<std::string> ReservedNames(const Json& claim) {
    std::vector<std::string> out;
    for (const auto& r : claim["status"].value("reservedFor", Json::array())) {
      EXPECT_EQ(r["resource"], "pods");
      out.push_back(r["name"]);
    }
    return out;
  }
  // The claim made for `pod`'s entry, from its status.
  std::string ClaimOf(const std::string& pod, const std::string& entry) {
    for (const auto& s : Pod(pod)["status"].value("resourceClaimStatuses", Json::array())) {
      if (s["name"] == entry) return s.value("resourceClaimName", "");
    }
    return "";
  }
  void DeletePod(const std::string& name) {
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    ASSERT_TRUE(client().Delete(res::kPods, "default", name, now).ok());
  }
  static uint64_t Rv(const Json& obj) { return ParseUint(kube::ResourceVersion(obj)).value_or(0); }

  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerDraTest, ClaimForAnH100LandsOnTheH100NodeAndIsWrittenBeforeTheBinding) {
  CreateClaim("h100", ClaimSpec("gpu.nvidia.com",
                                "device.attributes['gpu.nvidia.com'].productName"
                                " == '" +
                                    kH100 + "'"));
  StartScheduler();
  Create(res::kPods, "default", PodWithClaims("train", ByName("gpu", "h100")));
  ASSERT_TRUE(WaitBound("train"));
  EXPECT_EQ(NodeOf("train"), "dgx-h100");
  Json claim = ClaimObj("h100");
  EXPECT_EQ(Devices(claim), std::vector<std::string>{"dgx-h100/gpu-0"});
  EXPECT_EQ(claim["status"]["allocation"]["devices"]["results"][0]["request"], "gpu");
  EXPECT_EQ(claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
                 ["values"],
            Json::array({"dgx-h100"}));
  ASSERT_EQ(ReservedNames(claim), std::vector<std::string>{"train"});
  EXPECT_EQ(claim["status"]["reservedFor"][0]["uid"], kube::Uid(Pod("train")));
  // Resource versions are global: the claim's status was stored before the binding.
  EXPECT_LT(Rv(claim), Rv(Pod("train")));
}

TEST_F(SchedulerDraTest, MigClaimFromATemplateIsCreatedAllocatedAndDeletedWhenThePodIsDone) {
  CreateTemplate("one-mig", ClaimSpec("mig.nvidia.com",
                                      "device.attributes['gpu.nvidia.com'].profile == "
                                      "'1g.10gb'"));
  StartScheduler();
  Create(res::kPods, "default", PodWithClaims("infer", ByTemplate("mig", "one-mig")));
  ASSERT_TRUE(WaitBound("infer"));
  EXPECT_EQ(NodeOf("infer"), "dgx-a100");
  const std::string name = ClaimOf("infer", "mig");
  ASSERT_TRUE(StartsWith(name, "infer-mig-")) << Pod("infer").dump(2);
  EXPECT_EQ(name.size(), std::string("infer-mig-").size() + 5);
  Json claim = ClaimObj(name);
  EXPECT_EQ(Devices(claim), std::vector<std::string>{"dgx-a100/gpu-0-mig-1g10gb-19-0"});
  EXPECT_EQ(ReservedNames(claim), std::vector<std::string>{"infer"});
  EXPECT_EQ(kube::Annotation(claim, "resource.kubernetes.io/pod-claim-name"), "mig");
  EXPECT_EQ(kube::Label(claim, "app"), "train");  // the template's metadata
  auto owners = kube::OwnerReferences(claim);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0].kind, "Pod");
  EXPECT_EQ(owners[0].uid, kube::Uid(Pod("infer")));
  EXPECT_TRUE(owners[0].controller);

  // A second pod gets the other MIG device.
  Create(res::kPods, "default", PodWithClaims("infer-2", ByTemplate("mig", "one-mig")));
  ASSERT_TRUE(WaitBound("infer-2"));
  EXPECT_EQ(Devices(ClaimObj(ClaimOf("infer-2", "mig"))),
            std::vector<std::string>{"dgx-a100/gpu-0-mig-1g10gb-19-1"});

  // The pod finishes (it still exists, so no garbage collector is involved):
  // its claim is deleted, and the MIG device is free for a third pod.
  ASSERT_TRUE(testing::SetPodPhase(client(), Pod("infer"), "Succeeded").ok());
  ASSERT_TRUE(WaitFor([&] { return !ClaimExists(name); }));
  Create(res::kPods, "default", PodWithClaims("infer-3", ByTemplate("mig", "one-mig")));
  ASSERT_TRUE(WaitBound("infer-3"));
  EXPECT_EQ(Devices(ClaimObj(ClaimOf("infer-3", "mig"))),
            std::vector<std::string>{"dgx-a100/gpu-0-mig-1g10gb-19-0"});
}

TEST_F(SchedulerDraTest, SharedClaimIsAllocatedOnceReservedForBothAndReleasedWhenBothAreGone) {
  CreateClaim("shared", ClaimSpec("gpu.nvidia.com",
                                  "device.attributes['gpu.nvidia.com']"
                                  ".productName == 'NVIDIA L40S'"));
  StartScheduler();
  Create(res::kPods, "default", PodWithClaims("a", ByName("gpu", "shared")));
  ASSERT_TRUE(WaitBound("a"));
  Create(res::kPods, "default", PodWithClaims("b", ByName("gpu", "shared")));
  ASSERT_TRUE(WaitBound("b"));
  EXPECT_EQ(NodeOf("a"), "l40s-4");
  EXPECT_EQ(NodeOf("b"), "l40s-4");
  Json claim = ClaimObj("shared");
  EXPECT_EQ(Devices(claim), std::vector<std::string>{"l40s-4/gpu-0"});
  EXPECT_EQ(ReservedNames(claim), (std::vector<std::string>{"a", "b"}));

  DeletePod("a");
  ASSERT_TRUE(WaitFor([&] { return ReservedNames(ClaimObj("shared")).size() == 1; }));
  EXPECT_EQ(ReservedNames(ClaimObj("shared")), std::vector<std::string>{"b"});
  EXPECT_EQ(Devices(ClaimObj("shared")), std::vector<std::string>{"l40s-4/gpu-0"});
  DeletePod("b");
  // Nobody reserves it: deallocated, but kept (it was not made for a pod).
  ASSERT_TRUE(WaitFor([&] { return !ClaimObj("shared")["status"].contains("allocation"); }))
      << ClaimObj("shared").dump(2);
  EXPECT_TRUE(ReservedNames(ClaimObj("shared")).empty());
}

TEST_F(SchedulerDraTest, DevicesAreNeverGivenTwice) {
  CreateTemplate("h100", ClaimSpec("gpu.nvidia.com",
                                   "device.attributes['gpu.nvidia.com']"
                                   ".productName == '" +
                                       kH100 + "'"));
  StartScheduler();
  for (const char* p : {"p1", "p2", "p3"}) {
    Create(res::kPods, "default", PodWithClaims(p, ByTemplate("gpu", "h100")));
  }
  // Two H100s: two pods bound to distinct GPUs, the third pending.
  std::vector<std::string> bound, pending;
  ASSERT_TRUE(WaitFor([&] {
    bound.clear();
    pending.clear();
    for (const char* p : {"p1", "p2", "p3"}) {
      if (!NodeOf(p).empty()) bound.push_back(p);
      if (!UnschedulableMessage(p).empty()) pending.push_back(p);
    }
    return bound.size() == 2 && pending.size() == 1;
  }));
  std::set<std::string> devices;
  for (const auto& p : bound) {
    for (const auto& d : Devices(ClaimObj(ClaimOf(p, "gpu")))) devices.insert(d);
  }
  EXPECT_EQ(devices, (std::set<std::string>{"dgx-h100/gpu-0", "dgx-h100/gpu-1"}));
  EXPECT_EQ(UnschedulableMessage(pending[0]),
            "0/3 nodes are available: 3 cannot allocate all claims. preemption: 0/3 nodes are "
            "available: 3 Preemption is not helpful for scheduling.");
  // One bound pod goes: its GPU goes to the waiting pod.
  DeletePod(bound[0]);
  ASSERT_TRUE(WaitBound(pending[0]));
  EXPECT_EQ(NodeOf(pending[0]), "dgx-h100");
}

TEST_F(SchedulerDraTest, ClaimNothingSatisfiesStaysPendingUntilADeviceAppears) {
  CreateClaim("b200", ClaimSpec("gpu.nvidia.com",
                                "device.attributes['gpu.nvidia.com']"
                                ".productName == 'NVIDIA B200'"));
  StartScheduler();
  Create(res::kPods, "default", PodWithClaims("big", ByName("gpu", "b200")));
  const std::string want =
      "0/3 nodes are available: 3 cannot allocate all claims. preemption: 0/3 nodes are "
      "available: 3 Preemption is not helpful for scheduling.";
  ASSERT_TRUE(WaitFor([&] { return UnschedulableMessage("big") == want; })) << Pod("big").dump(2);
  EXPECT_FALSE(ClaimObj("b200")["status"].contains("allocation"));
  EXPECT_EQ(NodeOf("big"), "");
  // A node with a B200 comes up and its plugin publishes it.
  CreateNode(client(), {"dgx-b200", {}});
  Create(kResourceSlices, "", Slice("dgx-b200", Json::array({Gpu(0, "NVIDIA B200")})));
  ASSERT_TRUE(WaitBound("big"));
  EXPECT_EQ(NodeOf("big"), "dgx-b200");
  EXPECT_EQ(Devices(ClaimObj("b200")), std::vector<std::string>{"dgx-b200/gpu-0"});
}

TEST_F(SchedulerDraTest, ClaimsThatCannotBeUsedAnywhereSayWhy) {
  CreateClaim("regex", ClaimSpec("gpu.nvidia.com",
                                 "device.attributes['gpu.nvidia.com']"
                                 ".productName.matches('H100')"));
  StartScheduler();
  Create(res::kPods, "default", PodWithClaims("regex", ByName("gpu", "regex")));
  ASSERT_TRUE(WaitFor([&] {
    return UnschedulableMessage("regex").find(
               "the method matches() is not supported by the simulator") != std::string::npos;
  })) << Pod("regex").dump(2);
  EXPECT_TRUE(StartsWith(UnschedulableMessage("regex"),
                         "0/3 nodes are available: resourceclaim default/regex request gpu"));

  // A claim that does not exist yet: pending, then bound once it is created.
  Create(res::kPods, "default", PodWithClaims("early", ByName("gpu", "later")));
  ASSERT_TRUE(WaitFor([&] {
    return UnschedulableMessage("early") ==
           "0/3 nodes are available: resourceclaim \"later\" not found. preemption: 0/3 nodes "
           "are available: 3 Preemption is not helpful for scheduling.";
  })) << Pod("early").dump(2);
  CreateClaim("later", ClaimSpec("mig.nvidia.com"));
  ASSERT_TRUE(WaitBound("early"));
  EXPECT_EQ(NodeOf("early"), "dgx-a100");

  Create(res::kPods, "default", PodWithClaims("no-template", ByTemplate("gpu", "missing")));
  ASSERT_TRUE(WaitFor([&] {
    return UnschedulableMessage("no-template")
               .find("resourceclaimtemplate \"missing\" not found") != std::string::npos;
  })) << Pod("no-template").dump(2);
}

TEST_F(SchedulerDraTest, AnAllocatedClaimPinsLaterPodsToItsNode) {
  CreateClaim("l40s", ClaimSpec("gpu.nvidia.com",
                                "device.attributes['gpu.nvidia.com']"
                                ".productName == 'NVIDIA L40S'"));
  StartScheduler();
  Create(res::kPods, "default", PodWithClaims("first", ByName("gpu", "l40s")));
  ASSERT_TRUE(WaitBound("first"));
  // The second pod also needs an H100 of its own: no node has both.
  Json pod = PodWithClaims("second", ByName("gpu", "l40s"));
  pod["spec"]["resourceClaims"].push_back({{"name", "h100"}, {"resourceClaimName", "h100"}});
  CreateClaim("h100", ClaimSpec("gpu.nvidia.com",
                                "device.attributes['gpu.nvidia.com']"
                                ".productName == '" +
                                    kH100 + "'"));
  Create(res::kPods, "default", pod);
  ASSERT_TRUE(WaitFor([&] {
    return UnschedulableMessage("second") ==
           "0/3 nodes are available: 1 cannot allocate all claims, 2 resourceclaim not available "
           "on the node. preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
           "scheduling.";
  })) << Pod("second").dump(2);
  EXPECT_FALSE(ClaimObj("h100")["status"].contains("allocation"));
  EXPECT_EQ(ReservedNames(ClaimObj("l40s")), std::vector<std::string>{"first"});
}

TEST_F(SchedulerDraTest, TheEmulatorServesResourceClaimTemplates) {
  CreateTemplate("t", ClaimSpec("gpu.nvidia.com"));
  Json t = Get(kResourceClaimTemplates, "t");
  EXPECT_EQ(t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"],
            "gpu.nvidia.com");
  // Validated against the 1.35 schema like any other object.
  auto bad = client().Create(kResourceClaimTemplates, "default",
                             {{"apiVersion", "resource.k8s.io/v1"},
                              {"kind", "ResourceClaimTemplate"},
                              {"metadata", {{"name", "bad"}}},
                              {"spec", {{"spec", {{"devices", {{"requests", "one"}}}}}}}});
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace gpuop::simcluster
