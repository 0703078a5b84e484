// The simulated kubelet's DRA manager: which claims a pod uses, which CDI
// devices each container gets, and, against the API emulator and a plugin
// served over the real registration and DRA sockets, registration, one
// prepare per claim however many pods share it, unprepare when the last pod
// goes, and the ResourceSlices a kubelet deletes (at start, and when a plugin
// stays gone).
#include "sim/cluster/dra_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "base/files.h"
#include "kube/resource.h"
#include "kubelet/dra_server.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace gpuop::simcluster {
namespace {

using Json = nlohmann::json;
using kube::resources::kResourceClaims;
using kube::resources::kResourceSlices;

Json Pod(const std::string& name, const std::string& uid, Json claims, Json statuses) {
  return Json{{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", uid}}},
              {"spec",
               {{"resourceClaims", std::move(claims)},
                {"containers",
                 Json::array({Json{{"name", "main"},
                                   {"resources",
                                    {{"claims", Json::array({Json{{"name", "gpu"}}})}}}},
                              Json{{"name", "side"}}})}}},
              {"status", {{"resourceClaimStatuses", std::move(statuses)}}}};
}

Json NamedClaimPod(const std::string& name, const std::string& uid) {
  return Pod(name, uid,
             Json::array({Json{{"name", "gpu"}, {"resourceClaimName", "shared-gpu"}}}),
             Json::array());
}

TEST(ResolvePodClaimsTest, NamedAndTemplateClaims) {
  Json pod = Pod("p", "u1",
                 Json::array({Json{{"name", "a"}, {"resourceClaimName", "claim-a"}},
                              Json{{"name", "b"}, {"resourceClaimTemplateName", "tmpl"}}}),
                 Json::array({Json{{"name", "b"}, {"resourceClaimName", "p-b-x7k2q"}}}));
  auto claims = ResolvePodClaims(pod);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  ASSERT_EQ(claims->size(), 2u);
  EXPECT_EQ((*claims)[0].claim, "claim-a");
  EXPECT_EQ((*claims)[1].entry, "b");
  EXPECT_EQ((*claims)[1].claim, "p-b-x7k2q");

  pod["status"]["resourceClaimStatuses"] = Json::array();
  auto waiting = ResolvePodClaims(pod);
  ASSERT_FALSE(waiting.ok());
  EXPECT_NE(waiting.status().message().find("entry \"b\" (template tmpl) to be created"),
            std::string::npos)
      << waiting.status().message();
}

TEST(CheckClaimForPodTest, AllocatedAndReservedForThePod) {
  Json pod = NamedClaimPod("p", "u1");
  Json claim = {{"metadata", {{"name", "shared-gpu"}, {"namespace", "default"}}}};
  Status s = CheckClaimForPod(claim, pod);
  EXPECT_NE(s.message().find("resource claim default/shared-gpu is not allocated"),
            std::string::npos)
      << s.message();
  claim["status"]["allocation"] = Json::object();
  claim["status"]["reservedFor"] =
      Json::array({Json{{"resource", "pods"}, {"name", "other"}, {"uid", "u9"}}});
  s = CheckClaimForPod(claim, pod);
  EXPECT_NE(s.message().find("not allowed to use resource claim default/shared-gpu"),
            std::string::npos)
      << s.message();
  claim["status"]["reservedFor"].push_back(
      Json{{"resource", "pods"}, {"name", "p"}, {"uid", "u1"}});
  EXPECT_TRUE(CheckClaimForPod(claim, pod).ok());
}

TEST(ContainerCdiDevicesTest, EachContainerGetsTheDevicesOfTheRequestsItNames) {
  Json pod = Pod("p", "u1", Json::array({Json{{"name", "gpus"}, {"resourceClaimName", "c1"}}}),
                 Json::array());
  auto with_claims = [](const std::string& name, Json refs) {
    return Json{{"name", name}, {"resources", {{"claims", std::move(refs)}}}};
  };
  pod["spec"]["containers"] = Json::array(
      {with_claims("all", Json::array({Json{{"name", "gpus"}}})),
       with_claims("big", Json::array({Json{{"name", "gpus"}, {"request", "big"}}})),
       Json{{"name", "none"}}});
  std::map<std::string, std::vector<kubelet::DraPreparedDevice>> prepared = {
      {"c1",
       {{{"big"}, "n1", "gpu-0", {"k8s.gpu.nvidia.com/claim=u-gpu-0"}, ""},
        {{"small"}, "n1", "gpu-1", {"k8s.gpu.nvidia.com/claim=u-gpu-1"}, ""},
        {{}, "n1", "gpu-2", {"k8s.gpu.nvidia.com/claim=u-gpu-2"}, ""}}}};
  auto out = ContainerCdiDevices(pod, {{"gpus", "c1"}}, prepared);
  EXPECT_EQ(out["all"],
            (std::vector<std::string>{"k8s.gpu.nvidia.com/claim=u-gpu-0",
                                      "k8s.gpu.nvidia.com/claim=u-gpu-1",
                                      "k8s.gpu.nvidia.com/claim=u-gpu-2"}));
  EXPECT_EQ(out["big"], (std::vector<std::string>{"k8s.gpu.nvidia.com/claim=u-gpu-0",
                                                  "k8s.gpu.nvidia.com/claim=u-gpu-2"}));
  EXPECT_EQ(out.count("none"), 0u);
}

// Answers every claim with one GPU and counts the calls.
class CountingDriver : public kubelet::DraDriver {
 public:
  std::map<std::string, kubelet::DraPrepareResult> Prepare(
      const std::vector<kubelet::DraClaim>& claims) override {
    std::lock_guard l(mu);
    std::map<std::string, kubelet::DraPrepareResult> out;
    for (const auto& c : claims) {
      prepared.push_back(c.name);
      out[c.uid].devices = {
          {{"gpu"}, "node-a", "gpu-0", {"k8s.gpu.nvidia.com/claim=" + c.uid + "-gpu-0"}, ""}};
    }
    return out;
  }
  std::map<std::string, std::string> Unprepare(
      const std::vector<kubelet::DraClaim>& claims) override {
    std::lock_guard l(mu);
    std::map<std::string, std::string> out;
    for (const auto& c : claims) {
      unprepared.push_back(c.name);
      out[c.uid] = "";
    }
    return out;
  }
  std::vector<std::string> Prepared() {
    std::lock_guard l(mu);
    return prepared;
  }
  std::vector<std::string> Unprepared() {
    std::lock_guard l(mu);
    return unprepared;
  }

 private:
  std::mutex mu;
  std::vector<std::string> prepared, unprepared;
};

Json Slice(const std::string& name, const std::string& node, const std::string& driver) {
  return Json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceSlice"},
              {"metadata", {{"name", name}}},
              {"spec",
               {{"driver", driver},
                {"nodeName", node},
                {"pool", {{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
                {"devices", Json::array({Json{{"name", "gpu-0"}}})}}}};
}

std::set<std::string> SliceNames(kube::Client& client) {
  std::set<std::string> out;
  auto list = client.List(kResourceSlices, "");
  if (list.ok()) {
    for (const Json& s : list->items) out.insert(s["metadata"]["name"]);
  }
  return out;
}

TEST(DraManagerTest, RegistersPreparesOncePerClaimAndWipesSlicesLikeAKubelet) {
  auto api = testing::StartApiEmulator();
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  kube::Client& client = *api->client;
  gpuop::testing::TempDir tmp("dramgr");
  const std::string registry = tmp.path() + "/plugins_registry";
  ASSERT_TRUE(MakeDirs(registry).ok());
  // Left from before the kubelet started: its own node's go, others' stay.
  ASSERT_TRUE(client.Create(kResourceSlices, "", Slice("stale", "node-a", "gpu.nvidia.com")).ok());
  ASSERT_TRUE(client.Create(kResourceSlices, "", Slice("other", "node-b", "gpu.nvidia.com")).ok());

  DraManagerOptions o;
  o.node_name = "node-a";
  o.registry_dir = registry;
  o.scan_interval = std::chrono::milliseconds(20);
  o.wiping_delay = std::chrono::milliseconds(300);
  auto manager = DraManager::Start(o, &client);
  ASSERT_TRUE(manager.ok()) << manager.status().ToString();
  EXPECT_EQ(SliceNames(client), (std::set<std::string>{"other"}));

  // A pod whose claim has no registered driver waits, and says why.
  Json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "shared-gpu"}, {"namespace", "default"}}},
                {"spec",
                 {{"devices",
                   {{"requests",
                     Json::array({Json{{"name", "gpu"},
                                       {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}})}}}}}};
  auto created = client.Create(kResourceClaims, "default", claim);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Json with_status = *created;
  Json result = {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node-a"},
                 {"device", "gpu-0"}};
  with_status["status"]["allocation"]["devices"]["results"] = Json::array({result});
  with_status["status"]["reservedFor"] =
      Json::array({Json{{"resource", "pods"}, {"name", "p1"}, {"uid", "u1"}},
                   Json{{"resource", "pods"}, {"name", "p2"}, {"uid", "u2"}}});
  auto stored = client.UpdateStatus(kResourceClaims, with_status);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const std::string uid = (*stored)["metadata"]["uid"];
  auto early = (*manager)->PreparePod(NamedClaimPod("p1", "u1"));
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("DRA driver gpu.nvidia.com is not registered"),
            std::string::npos)
      << early.status().message();

  CountingDriver driver;
  auto server = kubelet::DraPluginServer::Start(
      &driver, {"gpu.nvidia.com", tmp.path() + "/plugins/gpu.nvidia.com", registry});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE(gpuop::testing::WaitFor([&] { return !(*manager)->Drivers().empty(); }));
  EXPECT_TRUE((*server)->Registration().registered);

  auto p1 = (*manager)->PreparePod(NamedClaimPod("p1", "u1"));
  ASSERT_TRUE(p1.ok()) << p1.status().ToString();
  EXPECT_EQ((*p1)["main"],
            (std::vector<std::string>{"k8s.gpu.nvidia.com/claim=" + uid + "-gpu-0"}));
  EXPECT_EQ(p1->count("side"), 0u);
  auto p2 = (*manager)->PreparePod(NamedClaimPod("p2", "u2"));  // the same claim
  ASSERT_TRUE(p2.ok()) << p2.status().ToString();
  EXPECT_EQ((*p2)["main"], (*p1)["main"]);
  EXPECT_EQ(driver.Prepared(), (std::vector<std::string>{"shared-gpu"}));

  // A pod the claim is not reserved for is refused.
  auto p3 = (*manager)->PreparePod(NamedClaimPod("p3", "u3"));
  EXPECT_FALSE(p3.ok());

  (*manager)->ReleasePod("u1");
  EXPECT_TRUE(driver.Unprepared().empty());  // p2 still uses it
  (*manager)->ReleasePod("u2");
  EXPECT_EQ(driver.Unprepared(), (std::vector<std::string>{"shared-gpu"}));

  // The plugin goes and stays gone: its slices of this node go after the
  // wiping delay; another node's stay.
  ASSERT_TRUE(client.Create(kResourceSlices, "", Slice("mine", "node-a", "gpu.nvidia.com")).ok());
  (*server)->Stop();
  ASSERT_TRUE(gpuop::testing::WaitFor([&] { return (*manager)->Drivers().empty(); }));
  EXPECT_TRUE(gpuop::testing::WaitFor(
      [&] { return SliceNames(client) == std::set<std::string>{"other"}; }));
}

}  // namespace
}  // namespace gpuop::simcluster
