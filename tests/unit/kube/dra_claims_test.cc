// The DRA claim helpers the driver upgrade shares (src/kube/dra_claims.h):
// the claims a pod uses, whose allocation names a driver, and the listing
// against the API emulator, with and without resource.k8s.io/v1.
#include "kube/dra_claims.h"

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
