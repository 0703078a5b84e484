// The GPU-pod helpers the driver upgrade shares (src/kube/gpu_pods.h): GPU
// resources in containers, the claims a pod uses, whose allocation names a
// driver, and the listing against the API emulator, with and without
// resource.k8s.io/v1.
#include "kube/gpu_pods.h"

#include <gtest/gtest.h>

#include "kube/resource.h"
#include "tests/testing/api_emulator.h"

namespace gpuop::kube {
namespace {

Json ClaimAllocatedBy(const std::string& ns, const std::string& name, const std::string& driver) {
  const Json request{{"name", "gpu"}, {"exactly", {{"deviceClassName", driver}}}};
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"devices", {{"requests", Json::array({request})}}}}},
          {"status",
           {{"allocation",
             {{"devices",
               {{"results", Json::array({{{"request", "gpu"},
                                          {"driver", driver},
                                          {"pool", "gpu-1"},
                                          {"device", "gpu-0"}}})}}}}}}}};
}

Json PodWith(Json spec) {
  return Json{{"metadata", {{"namespace", "ml"}, {"name", "p"}}}, {"spec", std::move(spec)}};
}

Json Containers(Json resources) {
  return Json{{"containers", Json::array({{{"name", "c"}, {"resources", std::move(resources)}}})}};
}

TEST(IsGpuPodTest, LimitsOrRequestsOfGpuOrMigResourcesInRegularContainers) {
  EXPECT_TRUE(IsGpuPod(PodWith(Containers({{"limits", {{"nvidia.com/gpu", "1"}}}})), {}));
  EXPECT_TRUE(IsGpuPod(PodWith(Containers({{"requests", {{"nvidia.com/gpu.shared", "1"}}}})), {}));
  EXPECT_TRUE(IsGpuPod(PodWith(Containers({{"limits", {{"nvidia.com/mig-1g.10gb", "1"}}}})), {}));
  EXPECT_FALSE(IsGpuPod(PodWith(Containers({{"limits", {{"cpu", "1"}}}})), {}));
  EXPECT_FALSE(IsGpuPod(PodWith(Containers({{"limits", {{"example.com/gpu", "1"}}}})), {}));
  Json init_only{
      {"initContainers",
       Json::array({{{"name", "i"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})},
      {"containers", Json::array({{{"name", "c"}}})}};
  EXPECT_FALSE(IsGpuPod(PodWith(init_only), {}));
}

TEST(PodClaimKeysTest, NamedClaimsAndTheClaimsMadeFromTemplates) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"resourceClaims": [
      {"name": "shared", "resourceClaimName": "shared-gpu"},
      {"name": "own", "resourceClaimTemplateName": "one-gpu"},
      {"name": "later", "resourceClaimTemplateName": "one-gpu"}]},
    "status": {"resourceClaimStatuses": [
      {"name": "own", "resourceClaimName": "train-own-7xk"},
      {"name": "later"}]}})");
  // "later" has no claim yet (or needs none): nothing to hold.
  EXPECT_EQ(PodClaimKeys(pod), (std::vector<std::string>{"ml/shared-gpu", "ml/train-own-7xk"}));
  EXPECT_TRUE(UsesAnyClaim(pod, {"ml/train-own-7xk"}));
  EXPECT_FALSE(UsesAnyClaim(pod, {"web/shared-gpu"}));  // same name, other namespace
  EXPECT_FALSE(UsesAnyClaim(pod, {}));
  EXPECT_TRUE(PodClaimKeys(Json::parse(R"({"metadata": {"name": "p"}, "spec": {}})")).empty());
}

TEST(IsAllocatedByDriverTest, OnlyAnAllocationResultOfThatDriver) {
  EXPECT_TRUE(IsAllocatedByDriver(ClaimAllocatedBy("ml", "a", "gpu.nvidia.com"), kGpuDraDriver));
  EXPECT_FALSE(IsAllocatedByDriver(ClaimAllocatedBy("ml", "b", "nic.example.com"), kGpuDraDriver));
  Json pending = ClaimAllocatedBy("ml", "c", "gpu.nvidia.com");
  pending.erase("status");  // not allocated yet
  EXPECT_FALSE(IsAllocatedByDriver(pending, kGpuDraDriver));
}

TEST(ListClaimsAllocatedByTest, EveryNamespaceAndNoneWithoutTheResourceApi) {
  auto api = testing::StartApiEmulator();
  ASSERT_TRUE(api.ok()) << api.status().message();
  Client& client = *api->client;
  for (const char* ns : {"ml", "web"}) {
    ASSERT_TRUE(
        client
            .Create(resources::kNamespaces, "",
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
            .ok());
  }
  for (const auto& [ns, name, driver] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"ml", "train", "gpu.nvidia.com"},
           {"web", "infer", "gpu.nvidia.com"},
           {"ml", "nic", "nic.example.com"}}) {
    Json claim = ClaimAllocatedBy(ns, name, driver);
    Json status = claim["status"];
    claim.erase("status");
    auto made = client.Create(resources::kResourceClaims, ns, claim);
    ASSERT_TRUE(made.ok()) << made.status().message();
    (*made)["status"] = status;
    auto allocated = client.UpdateStatus(resources::kResourceClaims, *made);
    ASSERT_TRUE(allocated.ok()) << allocated.status().message();
  }
  auto claims = ListClaimsAllocatedBy(client, kGpuDraDriver);
  ASSERT_TRUE(claims.ok()) << claims.status().message();
  EXPECT_EQ(*claims, (std::set<std::string>{"ml/train", "web/infer"}));

  ASSERT_TRUE(api->server->faults().Set("error=404,verb=list,resource=resourceclaims").ok());
  claims = ListClaimsAllocatedBy(client, kGpuDraDriver);
  ASSERT_TRUE(claims.ok()) << claims.status().message();
  EXPECT_TRUE(claims->empty());

  // Any other failure is an error that names the permission.
  ASSERT_TRUE(api->server->faults().Set("error=403,verb=list,resource=resourceclaims").ok());
  claims = ListClaimsAllocatedBy(client, kGpuDraDriver);
  ASSERT_FALSE(claims.ok());
  EXPECT_NE(claims.status().message().find("needs list on resourceclaims.resource.k8s.io"),
            std::string::npos)
      << claims.status().message();
}

}  // namespace
}  // namespace gpuop::kube
