// Which config file the device plugin loads (the pure choice), loading it,
// and following changes of the file with the last good config kept.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/files.h"
#include "deviceplugin/config_source.h"
#include "kube/client.h"
#include "sim/kube/server.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace gpuop::deviceplugin {
namespace {

using namespace std::chrono_literals;
using Names = std::vector<std::string>;
const std::string kLabel = kDefaultNodeConfigLabel;

std::optional<std::string> Choose(std::optional<std::string> label, const std::string& def,
                                  const Names& available) {
  auto r = ChooseConfigName(label, kLabel, def, available);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::nullopt;
}

TEST(DpPluginConfigChoiceTest, LabelThenDefaultThenNamedDefaultThenTheOnlyOne) {
  EXPECT_EQ(Choose("a100", "other", {"a100", "other"}), "a100");
  EXPECT_EQ(Choose(std::nullopt, "other", {"a100", "other"}), "other");
  EXPECT_EQ(Choose("", "other", {"a100", "other"}), "other");  // an empty label is no label
  EXPECT_EQ(Choose(std::nullopt, "", {"a100", "default"}), "default");
  EXPECT_EQ(Choose(std::nullopt, "", {"only"}), "only");
  EXPECT_EQ(Choose(std::nullopt, "", {"a", "b"}), std::nullopt);
  EXPECT_EQ(Choose(std::nullopt, "", {}), std::nullopt);
}

TEST(DpPluginConfigChoiceTest, AMissingNameSaysWhereItCameFrom) {
  auto r = ChooseConfigName(std::string("h100"), kLabel, "", {"a100", "l40s"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("nvidia.com/device-plugin.config=h100"), std::string::npos);
  EXPECT_NE(r.status().message().find("a100, l40s"), std::string::npos);
  r = ChooseConfigName(std::nullopt, kLabel, "gone", {"a100"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("DEFAULT_CONFIG=gone"), std::string::npos);
}

TEST(DpPluginConfigChoiceTest, SelectionFromEnvironment) {
  std::map<std::string, std::string> env = {{"CONFIG_FILE_SRCDIR", "/available-configs"},
                                            {"DEFAULT_CONFIG", "a100"},
                                            {"NODE_NAME", "n1"},
                                            {"NODE_LABEL", ""}};
  ConfigSelection s = SelectionFromEnv(env, "");
  EXPECT_TRUE(s.PerNode());
  EXPECT_EQ(s.node_label, kLabel);  // empty counts as unset
  EXPECT_EQ(s.default_config, "a100");
  EXPECT_EQ(s.node_name, "n1");
  env["CONFIG_FILE"] = "/etc/dp.yaml";
  EXPECT_FALSE(SelectionFromEnv(env, "").PerNode());  // one file wins
  EXPECT_EQ(SelectionFromEnv(env, "/flag.yaml").file, "/flag.yaml");
}

class DpPluginConfigSourceTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, int replicas) {
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/" + name,
                                "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                "    - name: nvidia.com/gpu\n      replicas: " +
                                    std::to_string(replicas) + "\n")
                    .ok());
  }

  testing::TempDir tmp_{"dpcfg"};
  const std::string dir_ = tmp_.path();
};

TEST_F(DpPluginConfigSourceTest, LoadsTheLabelledFileWithEnvAndFlagsOnTop) {
  Write("two", 2);
  Write("four", 4);
  ASSERT_TRUE(MakeDirs(dir_ + "/..data").ok());  // a ConfigMap volume's internals: ignored
  ConfigSelection sel;
  sel.srcdir = dir_;
  sel.default_config = "two";
  ConfigOverrides flags;
  flags.device_id_strategy = "index";
  auto loaded = LoadConfig(sel, std::string("four"), {{"DEVICE_LIST_STRATEGY", "cdi-cri"}}, flags);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->config.sharing.resources.at(0).replicas, 4);
  EXPECT_TRUE(loaded->config.device_list.cdi_cri);
  EXPECT_EQ(loaded->config.id_strategy, DeviceIdStrategy::kIndex);
  EXPECT_NE(loaded->origin.find(dir_ + "/four"), std::string::npos) << loaded->origin;

  loaded = LoadConfig(sel, std::nullopt, {}, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->config.sharing.resources.at(0).replicas, 2);

  // Neither scheme: flags and environment.
  loaded = LoadConfig(ConfigSelection{}, std::nullopt, {{"MIG_STRATEGY", "mixed"}}, {});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->config.mig_strategy, MigStrategy::kMixed);
  EXPECT_EQ(loaded->origin, "flags and environment");
}

TEST_F(DpPluginConfigSourceTest, BadFilesNameTheFileAndTheProblem) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/bad.yaml", "version: v1\nflagz: {}\n").ok());
  ConfigSelection sel;
  sel.file = dir_ + "/bad.yaml";
  auto loaded = LoadConfig(sel, std::nullopt, {}, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(dir_ + "/bad.yaml"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("flagz"), std::string::npos)
      << loaded.status().ToString();
  sel.file = dir_ + "/missing.yaml";
  loaded = LoadConfig(sel, std::nullopt, {}, {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("missing.yaml"), std::string::npos);
}

TEST_F(DpPluginConfigSourceTest, WatcherFollowsTheFileAndKeepsTheLastGoodConfig) {
  Write("cfg", 2);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> seen;
  ConfigWatcher::Options o;
  o.selection.file = dir_ + "/cfg";
  o.check_interval = 20ms;
  LoadedConfig initial;
  auto w = ConfigWatcher::Start(
      o,
      [&](const LoadedConfig& l) {
        std::lock_guard lock(mu);
        seen.push_back(l.config.sharing.resources.at(0).replicas);
        cv.notify_all();
        return Status::Ok();
      },
      &initial);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(initial.config.sharing.resources.at(0).replicas, 2);

  // A bad version: counted, not applied.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/cfg", "version: v2\n").ok());
  testing::WaitFor([&] { return (*w)->errors() > 0; });  // errors() has no waiter
  EXPECT_EQ((*w)->errors(), 1u);
  Write("cfg", 5);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return !seen.empty(); }));
    EXPECT_EQ(seen, std::vector<int>{5});
  }
  (*w)->Stop();  // joins the thread: its counters are final
  EXPECT_EQ((*w)->reloads(), 1u);
  EXPECT_EQ((*w)->errors(), 1u);
}

// Load, then Follow once the component exists: nothing is handed on before
// Follow, and a change made in between arrives at Follow's first check.
TEST_F(DpPluginConfigSourceTest, NothingIsHandedOnBeforeFollow) {
  Write("cfg", 2);
  ConfigWatcher::Options o;
  o.selection.file = dir_ + "/cfg";
  o.check_interval = 20ms;
  LoadedConfig initial;
  auto w = ConfigWatcher::Load(o, &initial);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(initial.config.sharing.resources.at(0).replicas, 2);
  Write("cfg", 3);
  std::this_thread::sleep_for(200ms);  // ten check intervals: none may run yet
  EXPECT_EQ((*w)->reloads(), 0u);
  EXPECT_EQ((*w)->errors(), 0u);

  std::mutex mu;
  std::vector<int> seen;
  (*w)->Follow([&](const LoadedConfig& l) {
    std::lock_guard lock(mu);
    seen.push_back(l.config.sharing.resources.at(0).replicas);
    return Status::Ok();
  });
  EXPECT_TRUE(testing::WaitFor([&] {
    std::lock_guard lock(mu);
    return !seen.empty();
  }));
  (*w)->Stop();
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, std::vector<int>{3});
  EXPECT_EQ((*w)->reloads(), 1u);
}

// The per-node scheme against the API emulator: the Node's label picks the
// file, and relabelling the node reloads without a restart; a label naming no
// config is an error that keeps the running config.
TEST_F(DpPluginConfigSourceTest, FollowsTheNodeLabel) {
  auto api = testing::StartApiEmulator();
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  kube::Client* client = api->client.get();
  const kube::Json node = {{"apiVersion", "v1"},
                           {"kind", "Node"},
                           {"metadata", {{"name", "node-1"}, {"labels", {{"other", "x"}}}}}};
  ASSERT_TRUE(client->Create(kube::resources::kNodes, "", node).ok());
  Write("two", 2);
  Write("four", 4);

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> seen;
  ConfigWatcher::Options o;
  o.selection.srcdir = dir_;
  o.selection.default_config = "two";
  o.selection.node_name = "node-1";
  o.client = client;
  o.check_interval = 10s;  // the label, not the timer, must trigger the reload
  LoadedConfig initial;
  auto w = ConfigWatcher::Start(
      o,
      [&](const LoadedConfig& l) {
        std::lock_guard lock(mu);
        seen.push_back(l.config.sharing.resources.at(0).replicas);
        cv.notify_all();
        return Status::Ok();
      },
      &initial);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(initial.config.sharing.resources.at(0).replicas, 2);  // no label: DEFAULT_CONFIG

  auto label = [&](const std::string& v) {
    kube::Json patch = {{"metadata", {{"labels", {{kLabel, v}}}}}};
    auto r = client->Patch(kube::resources::kNodes, "", "node-1", kube::PatchType::kMerge, patch);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  label("four");
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return !seen.empty(); }));
    EXPECT_EQ(seen, std::vector<int>{4});
  }
  EXPECT_EQ((*w)->label(), "four");
  label("missing");
  testing::WaitFor([&] { return (*w)->errors() > 0; });  // errors() has no waiter
  (*w)->Stop();
  EXPECT_EQ((*w)->errors(), 1u);
  EXPECT_EQ(seen, std::vector<int>{4});
}

}  // namespace
}  // namespace gpuop::deviceplugin
