#include "lifecycle/node_cleanup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kube/resource.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::lifecycle {
namespace {

using Json = nlohmann::json;
namespace res = kube::resources;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every .toml under the root's /etc/containerd, concatenated.
std::string ContainerdConfig(const std::string& root) {
  std::string all;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root + "/etc/containerd", ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".toml") all += Slurp(it->path().string());
  }
  return all;
}

TEST(CleanNodeTest, RevertsTheRuntimeHandlerAndRemovesTheToolkitsFiles) {
  testing::TempDir root;
  const std::string r = root.path();
  std::filesystem::create_directories(r + "/etc/containerd");
  const std::string original = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n";
  std::ofstream(r + "/etc/containerd/config.toml") << original;
  runtime::ConfigureRequest add;
  add.host_root = r;
  ASSERT_TRUE(runtime::RunConfigure(add).ok());
  ASSERT_NE(ContainerdConfig(r).find("nvidia"), std::string::npos);
  for (const char* f : {"/var/run/cdi/nvidia.yaml", "/usr/local/nvidia/toolkit/gpuop",
                        "/run/nvidia/validations/toolkit-ready"}) {
    std::filesystem::create_directories(std::filesystem::path(r + f).parent_path());
    std::ofstream(r + f) << "x";
  }

  NodeCleanupOptions o;
  o.host_root = r;
  auto changed = CleanNode(o);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_EQ(ContainerdConfig(r).find("nvidia"), std::string::npos) << ContainerdConfig(r);
  EXPECT_EQ(Slurp(r + "/etc/containerd/config.toml"), original);
  for (const char* f : {"/var/run/cdi/nvidia.yaml", "/usr/local/nvidia/toolkit/gpuop",
                        "/run/nvidia/validations/toolkit-ready"}) {
    EXPECT_FALSE(std::filesystem::exists(r + f)) << f;
  }
  // Again: nothing left to do, and no error.
  auto again = CleanNode(o);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->empty());
}

TEST(OwnerDaemonSetRemovedTest, OnlyWhenTheDaemonSetIsGoneOrGoing) {
  auto api = testing::StartApiEmulator();
  ASSERT_TRUE(api.ok()) << api.status().message();
  kube::Client& c = *api->client;
  ASSERT_TRUE(
      c.Create(
           res::kNamespaces, "",
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gpu-operator"}}}})
          .ok());
  Json ds = {{"apiVersion", "apps/v1"},
             {"kind", "DaemonSet"},
             {"metadata", {{"name", "toolkit"}, {"namespace", "gpu-operator"}}},
             {"spec",
              {{"selector", {{"matchLabels", {{"app", "t"}}}}},
               {"template",
                {{"metadata", {{"labels", {{"app", "t"}}}}},
                 {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}}}}}}};
  auto made = c.Create(res::kDaemonSets, "gpu-operator", ds);
  ASSERT_TRUE(made.ok()) << made.status().message();
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "toolkit-abcde"},
                {"namespace", "gpu-operator"},
                {"ownerReferences", Json::array({{{"apiVersion", "apps/v1"},
                                                  {"kind", "DaemonSet"},
                                                  {"name", "toolkit"},
                                                  {"uid", (*made)["metadata"]["uid"]},
                                                  {"controller", true}}})}}},
              {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}}};
  ASSERT_TRUE(c.Create(res::kPods, "gpu-operator", pod).ok());

  auto removed = OwnerDaemonSetRemoved(c, "gpu-operator", "toolkit-abcde");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_FALSE(*removed);  // a pod being replaced: the node keeps its configuration

  // A pod no DaemonSet controls (orphaned): nothing says the toolkit goes.
  Json bare = pod;
  bare["metadata"]["name"] = "bare";
  bare["metadata"].erase("ownerReferences");
  ASSERT_TRUE(c.Create(res::kPods, "gpu-operator", bare).ok());
  auto orphaned = OwnerDaemonSetRemoved(c, "gpu-operator", "bare");
  ASSERT_TRUE(orphaned.ok()) << orphaned.status().message();
  EXPECT_FALSE(*orphaned);

  // The DaemonSet deleted as the garbage collector deletes it (uninstall).
  kube::DeleteOptions background;
  background.propagation_policy = "Background";
  ASSERT_TRUE(c.Delete(res::kDaemonSets, "gpu-operator", "toolkit", background).ok());
  removed = OwnerDaemonSetRemoved(c, "gpu-operator", "toolkit-abcde");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_TRUE(*removed);
}

// Uninstall's garbage collection takes the component's ServiceAccount and
// RBAC while its pods still run their preStop: the API refusing the pod's
// identity says the component goes.
TEST(OwnerDaemonSetRemovedTest, WhenThePodsServiceAccountIsGone) {
  simkube::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  so.threads = 8;
  so.token = "admin";
  so.rbac = true;
  auto server = simkube::ApiServer::Start(so);
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto client_for = [&](const std::string& token) {
    kube::RestConfig rc;
    rc.server = (*server)->url();
    rc.token = token;
    rc.qps = 0;
    return std::move(kube::Client::New(rc)).value();
  };
  auto admin = client_for("admin");
  ASSERT_TRUE(admin->Create(res::kNamespaces, "", {{"apiVersion", "v1"}, {"kind", "Namespace"},
                                                   {"metadata", {{"name", "gpu-operator"}}}})
                  .ok());
  ASSERT_TRUE(admin->Create(res::kServiceAccounts, "gpu-operator",
                            {{"apiVersion", "v1"}, {"kind", "ServiceAccount"},
                             {"metadata", {{"name", "toolkit"}}}})
                  .ok());
  auto token = admin->Raw("POST", "/api/v1/namespaces/gpu-operator/serviceaccounts/toolkit/token",
                          "{}");
  ASSERT_TRUE(token.ok()) << token.status().message();
  auto sa = client_for(Json::parse(*token)["status"]["token"].get<std::string>());

  // No Role: 403.
  auto removed = OwnerDaemonSetRemoved(*sa, "gpu-operator", "toolkit-abcde");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_TRUE(*removed);
  // The ServiceAccount gone: 401.
  ASSERT_TRUE(admin->Delete(res::kServiceAccounts, "gpu-operator", "toolkit").ok());
  removed = OwnerDaemonSetRemoved(*sa, "gpu-operator", "toolkit-abcde");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_TRUE(*removed);
}

}  // namespace
}  // namespace gpuop::lifecycle
