#include "sim/cluster/dra_allocator.h"

#include <gtest/gtest.h>

#include "tests/unit/simcluster/dra_fixtures.h"

namespace gpuop::simcluster {
namespace {

using testing::DeviceClass;

using kube::Json;

constexpr const char* kDriver = "gpu.nvidia.com";


Json Gpu(int minor, const std::string& product, int numa, const std::string& memory) {
  return {{"name", "gpu-" + std::to_string(minor)},
          {"attributes",
           {{"type", {{"string", "gpu"}}},
            {"productName", {{"string", product}}},
            {"driverVersion", {{"version", "550.127.5"}}},
            {"resource.kubernetes.io/numaNode", {{"int", numa}}}}},
          {"capacity", {{"memory", {{"value", memory}}}}}};
}

Json Mig(int parent, const std::string& profile, int gi_profile, int start) {
  std::string flat;
  for (char c : profile) {
    if (c != '.') flat += c;
  }
  return {{"name", "gpu-" + std::to_string(parent) + "-mig-" + flat + "-" +
                       std::to_string(gi_profile) + "-" + std::to_string(start)},
          {"attributes",
           {{"type", {{"string", "mig"}}},
            {"profile", {{"string", profile}}},
            {"productName", {{"string", "NVIDIA A100-SXM4-80GB"}}},
            {"resource.kubernetes.io/numaNode", {{"int", 0}}}}},
          {"capacity", {{"memory", {{"value", "10Gi"}}}}}};
}

Json Slice(const std::string& node, Json devices, int64_t generation = 1,
           const std::string& name_suffix = "") {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", node + "-gpu.nvidia.com-" + name_suffix}}},
          {"spec",
           {{"driver", kDriver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", devices}}}};
}

// Request JSON: {"name", "exactly": {...}}.
Json Request(const std::string& name, const std::string& cls, Json extra = Json::object()) {
  Json exactly = {{"deviceClassName", cls}};
  exactly.update(extra);
  return {{"name", name}, {"exactly", exactly}};
}

Json Claim(const std::string& name, Json requests, Json constraints = nullptr,
           Json config = nullptr) {
  Json c = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}, {"namespace", "default"}}},
            {"spec", {{"devices", {{"requests", requests}}}}}};
  if (!constraints.is_null()) c["spec"]["devices"]["constraints"] = constraints;
  if (!config.is_null()) c["spec"]["devices"]["config"] = config;
  return c;
}

Json Selector(const std::string& expression) {
  return Json::array({{{"cel", {{"expression", expression}}}}});
}

class DraAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_class_ = DeviceClass("gpu.nvidia.com", "gpu");
    mig_class_ = DeviceClass("mig.nvidia.com", "mig");
    classes_ = {{"gpu.nvidia.com", &gpu_class_}, {"mig.nvidia.com", &mig_class_}};
    Json h100 = Json::array();
    for (int i = 0; i < 8; ++i) h100.push_back(Gpu(i, "NVIDIA H100 80GB HBM3", i / 4, "80Gi"));
    Json a100 = Json::array({Mig(0, "1g.10gb", 19, 0), Mig(0, "1g.10gb", 19, 1),
                             Mig(0, "3g.40gb", 9, 4), Gpu(1, "NVIDIA A100-SXM4-80GB", 0, "80Gi")});
    Json l40s = Json::array();
    for (int i = 0; i < 4; ++i) l40s.push_back(Gpu(i, "NVIDIA L40S", 0, "46068Mi"));
    slices_["dgx-h100"] = {Slice("dgx-h100", h100)};
    slices_["dgx-a100"] = {Slice("dgx-a100", a100)};
    slices_["l40s-4"] = {Slice("l40s-4", l40s)};
  }

  Result<std::vector<Json>> Allocate(const std::vector<Json>& claims, const std::string& node,
                                     const std::set<DeviceRef>& in_use = {}) {
    std::vector<const Json*> c, s;
    for (const auto& x : claims) c.push_back(&x);
    for (const auto& x : slices_[node]) s.push_back(&x);
    return allocator_.Allocate(c, classes_, node, s, in_use);
  }

  // "request:device" for each result of an allocation.
  static std::vector<std::string> Devices(const Json& allocation) {
    std::vector<std::string> out;
    for (const auto& r : allocation["devices"]["results"]) {
      EXPECT_EQ(r["driver"], kDriver);
      out.push_back(r["request"].get<std::string>() + ":" + r["device"].get<std::string>());
    }
    return out;
  }

  Json gpu_class_, mig_class_;
  DeviceClasses classes_;
  std::map<std::string, std::vector<Json>> slices_;
  DraAllocator allocator_;
};

TEST_F(DraAllocatorTest, OneGpuByProductFitsOnlyTheH100NodeAmongThree) {
  Json claim = Claim(
      "h100", Json::array({Request(
                  "gpu", "gpu.nvidia.com",
                  {{"selectors", Selector("device.attributes['gpu.nvidia.com'].productName == "
                                          "'NVIDIA H100 80GB HBM3'")}})}));
  auto a100 = Allocate({claim}, "dgx-a100");
  ASSERT_FALSE(a100.ok());
  EXPECT_EQ(a100.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(a100.status().message(),
            "cannot allocate all claims on node dgx-a100: resourceclaim default/h100 request gpu: "
            "0 device(s) match, 0 of them free, 1 wanted");
  EXPECT_FALSE(Allocate({claim}, "l40s-4").ok());
  auto h100 = Allocate({claim}, "dgx-h100");
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  ASSERT_EQ(h100->size(), 1u);
  const Json& alloc = (*h100)[0];
  EXPECT_EQ(alloc["devices"]["results"],
            Json::parse(R"([{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dgx-h100",
                             "device": "gpu-0"}])"));
  EXPECT_EQ(alloc["nodeSelector"], Json::parse(R"({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["dgx-h100"]}]}]})"));
  EXPECT_FALSE(alloc["devices"].contains("config"));
  // gpu-0 held by another claim: the next one.
  auto next = Allocate({claim}, "dgx-h100", {{kDriver, "dgx-h100", "gpu-0"}});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(Devices((*next)[0]), std::vector<std::string>{"gpu:gpu-1"});
}

TEST_F(DraAllocatorTest, MigProfileRequestGetsOneMigDevice) {
  Json claim = Claim(
      "mig",
      Json::array({Request(
          "mig", "mig.nvidia.com",
          {{"selectors", Selector("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")}})}));
  auto r = Allocate({claim}, "dgx-a100");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Devices((*r)[0]), std::vector<std::string>{"mig:gpu-0-mig-1g10gb-19-0"});
  // The whole-GPU class never hands out a MIG device, and the H100 node has none.
  EXPECT_FALSE(Allocate({claim}, "dgx-h100").ok());
  // Both 1g.10gb in use: nothing left of that profile.
  auto none = Allocate({claim}, "dgx-a100",
                       {{kDriver, "dgx-a100", "gpu-0-mig-1g10gb-19-0"},
                        {kDriver, "dgx-a100", "gpu-0-mig-1g10gb-19-1"}});
  EXPECT_FALSE(none.ok());
}

TEST_F(DraAllocatorTest, CountTwoAndMatchAttributeAcrossRequests) {
  // Two GPUs in one request on one NUMA node, with gpu-0..2 taken: gpu-3 is
  // alone on NUMA 0, so the search backtracks to gpu-4 and gpu-5.
  Json pair = Claim("pair", Json::array({Request("gpus", "gpu.nvidia.com", {{"count", 2}})}),
                    Json::array({{{"matchAttribute", "resource.kubernetes.io/numaNode"}}}));
  std::set<DeviceRef> taken = {{kDriver, "dgx-h100", "gpu-0"},
                               {kDriver, "dgx-h100", "gpu-1"},
                               {kDriver, "dgx-h100", "gpu-2"}};
  auto r = Allocate({pair}, "dgx-h100", taken);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Devices((*r)[0]), (std::vector<std::string>{"gpus:gpu-4", "gpus:gpu-5"}));
  // Without the constraint, the first two free ones.
  Json loose = Claim("loose", Json::array({Request("gpus", "gpu.nvidia.com", {{"count", 2}})}));
  auto l = Allocate({loose}, "dgx-h100", taken);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Devices((*l)[0]), (std::vector<std::string>{"gpus:gpu-3", "gpus:gpu-4"}));

  // Across two requests, named by the constraint: a MIG device and a GPU of
  // the same product.
  Json mixed = Claim(
      "mixed", Json::array({Request("mig", "mig.nvidia.com"), Request("gpu", "gpu.nvidia.com")}),
      Json::array(
          {{{"requests", {"mig", "gpu"}}, {"matchAttribute", "gpu.nvidia.com/productName"}}}));
  auto m = Allocate({mixed}, "dgx-a100");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Devices((*m)[0]), (std::vector<std::string>{"mig:gpu-0-mig-1g10gb-19-0", "gpu:gpu-1"}));
  // A device lacking the attribute never satisfies the constraint.
  Json odd = Claim("odd", Json::array({Request("gpu", "gpu.nvidia.com")}),
                   Json::array({{{"matchAttribute", "gpu.nvidia.com/profile"}}}));
  auto no_attribute = Allocate({odd}, "dgx-h100");
  ASSERT_FALSE(no_attribute.ok());
  EXPECT_EQ(no_attribute.status().message(),
            "cannot allocate all claims on node dgx-h100: no choice of free devices serves every "
            "request (each device once) and keeps every constraint");
  // Nine GPUs on an eight-GPU node.
  Json nine = Claim("nine", Json::array({Request("gpus", "gpu.nvidia.com", {{"count", 9}})}));
  auto too_many = Allocate({nine}, "dgx-h100", taken);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find(
                "resourceclaim default/nine request gpus: 8 device(s) match, 5 of them free, 9 "
                "wanted"),
            std::string::npos)
      << too_many.status().message();
}

TEST_F(DraAllocatorTest, AllocationModeAllTakesEveryMatchingDeviceOrNothing) {
  Json all =
      Claim("all", Json::array({Request("gpus", "gpu.nvidia.com", {{"allocationMode", "All"}})}));
  auto r = Allocate({all}, "l40s-4");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Devices((*r)[0]),
            (std::vector<std::string>{"gpus:gpu-0", "gpus:gpu-1", "gpus:gpu-2", "gpus:gpu-3"}));
  auto busy = Allocate({all}, "l40s-4", {{kDriver, "l40s-4", "gpu-2"}});
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.status().message().find("allocationMode All, but device gpu-2 is allocated"),
            std::string::npos)
      << busy.status().message();
  // A node without any matching device does not satisfy All.
  Json all_mig =
      Claim("all-mig", Json::array({Request("m", "mig.nvidia.com", {{"allocationMode", "All"}})}));
  EXPECT_FALSE(Allocate({all_mig}, "l40s-4").ok());
}

TEST_F(DraAllocatorTest, TaintedDevicesNeedATolerationOfTheirEffect) {
  Json& devices = slices_["l40s-4"][0]["spec"]["devices"];
  devices[0]["taints"] = Json::parse(R"([{"key": "gpu.nvidia.com/xid", "value": "79",
                                          "effect": "NoSchedule"}])");
  devices[1]["taints"] = Json::parse(R"([{"key": "gpu.nvidia.com/gpu-lost",
                                          "effect": "NoExecute"}])");
  devices[2]["taints"] = Json::parse(R"([{"key": "gpu.nvidia.com/unmonitored",
                                          "effect": "None"}])");
  Json one = Claim("one", Json::array({Request("gpu", "gpu.nvidia.com")}));
  auto r = Allocate({one}, "l40s-4");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Devices((*r)[0]), std::vector<std::string>{"gpu:gpu-2"});  // None is advice only
  Json tolerant =
      Claim("tolerant",
            Json::array({Request("gpu", "gpu.nvidia.com",
                                 {{"tolerations", Json::parse(R"([{"key": "gpu.nvidia.com/xid",
                                 "operator": "Exists", "effect": "NoSchedule"}])")}})}));
  auto t = Allocate({tolerant}, "l40s-4");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Devices((*t)[0]), std::vector<std::string>{"gpu:gpu-0"});
  // All devices tainted NoSchedule: nothing for a plain claim.
  for (auto& d : devices) {
    d["taints"] = Json::parse(R"([{"key": "gpu.nvidia.com/xid", "value": "48",
                                   "effect": "NoSchedule"}])");
  }
  EXPECT_FALSE(Allocate({one}, "l40s-4").ok());
}

TEST_F(DraAllocatorTest, OnlyTheNewestGenerationOfAPoolCounts) {
  // The plugin republished after a MIG change: generation 2 holds only gpu-7.
  slices_["dgx-h100"].push_back(
      Slice("dgx-h100", Json::array({Gpu(7, "NVIDIA H100 80GB HBM3", 1, "80Gi")}), 2, "b"));
  Json one = Claim("one", Json::array({Request("gpu", "gpu.nvidia.com")}));
  auto r = Allocate({one}, "dgx-h100");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Devices((*r)[0]), std::vector<std::string>{"gpu:gpu-7"});
  // Another node's slice in the list is ignored.
  slices_["dgx-h100"].push_back(slices_["l40s-4"][0]);
  Json two = Claim("two", Json::array({Request("gpu", "gpu.nvidia.com", {{"count", 2}})}));
  EXPECT_FALSE(Allocate({two}, "dgx-h100").ok());
}

TEST_F(DraAllocatorTest, SeveralClaimsOfOnePodNeverShareADeviceAndAllocatedOnesAreSkipped) {
  Json a = Claim("a", Json::array({Request("gpu", "gpu.nvidia.com")}));
  Json b = Claim("b", Json::array({Request("gpu", "gpu.nvidia.com", {{"count", 3}})}));
  Json done = Claim("done", Json::array({Request("gpu", "gpu.nvidia.com")}));
  done["status"]["allocation"] = {{"devices", {{"results", Json::array()}}}};
  auto r = Allocate({a, done, b}, "l40s-4");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(Devices((*r)[0]), std::vector<std::string>{"gpu:gpu-0"});
  EXPECT_TRUE((*r)[1].is_null());
  EXPECT_EQ(Devices((*r)[2]), (std::vector<std::string>{"gpu:gpu-1", "gpu:gpu-2", "gpu:gpu-3"}));
  Json c = Claim("c", Json::array({Request("gpu", "gpu.nvidia.com")}));
  EXPECT_FALSE(Allocate({a, b, c, c}, "l40s-4").ok());  // six GPUs wanted, four there
}

TEST_F(DraAllocatorTest, ConfigComesFromTheClassPerRequestThenFromTheClaim) {
  Json opaque = {{"opaque",
                  {{"driver", kDriver},
                   {"parameters",
                    {{"apiVersion", "resource.nvidia.com/v1beta1"},
                     {"kind", "GpuConfig"},
                     {"sharing", {{"strategy", "TimeSlicing"}}}}}}}};
  gpu_class_["spec"]["config"] = Json::array({opaque});
  Json claim_config = opaque;
  claim_config["requests"] = Json::array({"b"});
  Json claim =
      Claim("c", Json::array({Request("a", "gpu.nvidia.com"), Request("b", "gpu.nvidia.com")}),
            nullptr, Json::array({claim_config}));
  auto r = Allocate({claim}, "l40s-4");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Json want = Json::array();
  for (const char* req : {"a", "b"}) {
    Json e = opaque;
    e["source"] = "FromClass";
    e["requests"] = Json::array({req});
    want.push_back(e);
  }
  Json from_claim = claim_config;
  from_claim["source"] = "FromClaim";
  want.push_back(from_claim);
  EXPECT_EQ((*r)[0]["devices"]["config"], want);
}

TEST_F(DraAllocatorTest, WhatTheSimulatorCannotDoIsRefusedWithTheClaimNamed) {
  auto refused = [&](Json claim, const std::string& what) {
    auto r = Allocate({claim}, "dgx-h100");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("resourceclaim default/" + kube::Name(claim)),
              std::string::npos)
        << r.status().message();
  };
  refused(Claim("no-class", Json::array({Request("gpu", "tpu.example.com")})),
          "request gpu: device class tpu.example.com does not exist");
  refused(Claim("regex",
                Json::array({Request("gpu", "gpu.nvidia.com",
                                     {{"selectors", Selector("device.attributes['gpu.nvidia.com']"
                                                             ".productName.matches('H100')")}})})),
          "the method matches() is not supported by the simulator");
  refused(Claim("first",
                Json::array(
                    {{{"name", "gpu"},
                      {"firstAvailable",
                       Json::array({{{"name", "a"}, {"deviceClassName", "gpu.nvidia.com"}}})}}})),
          "firstAvailable is not supported by the simulator");
  refused(Claim("admin", Json::array({Request("gpu", "gpu.nvidia.com", {{"adminAccess", true}})})),
          "adminAccess is not supported by the simulator");
  refused(Claim("distinct", Json::array({Request("gpu", "gpu.nvidia.com", {{"count", 2}})}),
                Json::array({{{"distinctAttribute", "gpu.nvidia.com/uuid"}}})),
          "distinctAttribute is not supported by the simulator");
}

TEST_F(DraAllocatorTest, SelectorErrorsMeanNoMatchAndAreReported) {
  // `profile` exists only on MIG devices: every GPU errors, none matches.
  Json claim = Claim(
      "err",
      Json::array({Request(
          "gpu", "gpu.nvidia.com",
          {{"selectors", Selector("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")}})}));
  auto r = Allocate({claim}, "dgx-h100");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device gpu-0: no such key: profile"), std::string::npos)
      << r.status().message();
}

TEST(AllocatedDevicesTest, ReadsTheResults) {
  Json claim = Json::parse(R"({"status": {"allocation": {"devices": {"results": [
      {"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-3"}]}}}})");
  EXPECT_EQ(AllocatedDevices(claim), (std::vector<DeviceRef>{{kDriver, "n1", "gpu-3"}}));
  EXPECT_TRUE(AllocatedDevices(Json::object()).empty());
}

}  // namespace
}  // namespace gpuop::simcluster
