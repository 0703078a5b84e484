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

}  // namespace
}  // namespace gpuop::lifecycle
