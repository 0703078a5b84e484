// ParseClaim: the kubelet's claim identity checked against the object read
// from the API server, our results kept; ResolveDevice against the GPU
// simulator's GPUs (dgx-h100 whole GPUs, dgx-a100 with MIG devices).
#include "dra/claims.h"

#include <gtest/gtest.h>

#include "dra/names.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"
#include "tests/unit/dra/prepare_fixtures.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;
using testing::Allocated;
using testing::ClaimObject;
using testing::kNode;
using testing::Result;

Json WithUid(Json claim, const std::string& uid) {
  claim["metadata"]["uid"] = uid;
  return claim;
}

const kubelet::DraClaim kClaim{"team-a", "uid-1", "train"};

TEST(ParseClaim, KeepsOurResultsOnThisNode) {
  std::vector<Json> results = {Result("gpu", "gpu-0"), Result("nic", "eth0", "net.example.com"),
                               Result("gpu", "gpu-5", kDriverName, "node-b"),
                               Result("big/h100", "gpu-1")};
  results[3]["adminAccess"] = true;
  std::vector<Json> config = {
      testing::ConfigEntryJson("FromClaim", {}, testing::GpuTimeSlicing("Long"))};
  auto a = ParseClaim(WithUid(Allocated(ClaimObject("team-a", "train"), results, config), "uid-1"),
                      kClaim, kNode);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->uid, "uid-1");
  EXPECT_EQ(a->ns, "team-a");
  EXPECT_EQ(a->name, "train");
  ASSERT_EQ(a->devices.size(), 2u);
  EXPECT_EQ(a->devices[0], (AllocatedDevice{"gpu", kNode, "gpu-0", false}));
  EXPECT_EQ(a->devices[1], (AllocatedDevice{"big/h100", kNode, "gpu-1", true}));
  EXPECT_EQ(ReportedRequestName(a->devices[1].request), "big");
  EXPECT_EQ(ReportedRequestName("gpu"), "gpu");
  EXPECT_EQ(a->config, Json(config));
}

TEST(ParseClaim, ReplacedClaimIsRefused) {
  auto a = ParseClaim(
      WithUid(Allocated(ClaimObject("team-a", "train"), {Result("gpu", "gpu-0")}), "uid-2"), kClaim,
      kNode);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("claim team-a/train was replaced: UID uid-2"),
            std::string::npos)
      << a.status().message();
  EXPECT_NE(a.status().message().find("uid-1"), std::string::npos);
}

TEST(ParseClaim, UnallocatedClaimIsRefused) {
  auto a = ParseClaim(WithUid(ClaimObject("team-a", "train"), "uid-1"), kClaim, kNode);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("claim team-a/train is not allocated (status.allocation"),
            std::string::npos)
      << a.status().message();
}

TEST(ParseClaim, MalformedResultsAreNamed) {
  Json claim = WithUid(Allocated(ClaimObject("team-a", "train"), {Result("gpu", "")}), "uid-1");
  auto a = ParseClaim(claim, kClaim, kNode);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("results[0] has no request or device"), std::string::npos)
      << a.status().message();
  claim["status"]["allocation"]["devices"]["results"] = "gpu-0";
  a = ParseClaim(claim, kClaim, kNode);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("results is not a list"), std::string::npos);
  EXPECT_FALSE(ParseClaim(Json::array(), kClaim, kNode).ok());
}

TEST(ResolveDevice, WholeGpusByMinor) {
  gpuop::testing::SimNode node("dgx-h100", "claims");
  auto nvml = node.OpenNvmlOrFail();
  ASSERT_NE(nvml, nullptr);
  auto gpus = nvml->Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 8u);
  const nvml::Gpu& g = (*gpus)[3];
  auto d = ResolveDevice(*gpus, "gpu-" + std::to_string(g.minor));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->type, DeviceType::kGpu);
  EXPECT_EQ(d->gpu_uuid, g.uuid);
  EXPECT_EQ(d->gpu_minor, g.minor);
  EXPECT_TRUE(d->mig_uuid.empty());

  auto missing = ResolveDevice(*gpus, "gpu-99");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("device gpu-99 is not on this node"),
            std::string::npos);
}

TEST(ResolveDevice, MigDevicesByNameAndTheirGpuNoLonger) {
  gpuop::testing::SimNode node("dgx-a100", "claims-mig");
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 0, true, {"3g.20gb", "1g.5gb"}).ok());
  auto nvml = node.OpenNvmlOrFail();
  ASSERT_NE(nvml, nullptr);
  auto gpus = nvml->Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  const nvml::Gpu& g = (*gpus)[0];
  ASSERT_EQ(g.mig_devices.size(), 2u);
  const nvml::MigDevice& m = g.mig_devices[1];
  const std::string name = MigDeviceName(g, m);
  EXPECT_EQ(name.rfind("gpu-" + std::to_string(g.minor) + "-mig-1g5gb-", 0), 0u) << name;
  auto d = ResolveDevice(*gpus, name);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->type, DeviceType::kMig);
  EXPECT_EQ(d->gpu_uuid, g.uuid);
  EXPECT_EQ(d->mig_uuid, m.uuid);
  EXPECT_EQ(d->gi_id, m.gi_id);
  EXPECT_EQ(d->ci_id, m.ci_id);
  // A GPU in MIG mode is published as its MIG devices, not as a whole GPU.
  auto whole = ResolveDevice(*gpus, GpuDeviceName(g));
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find(name), std::string::npos);
}

}  // namespace
}  // namespace gpuop::dra
