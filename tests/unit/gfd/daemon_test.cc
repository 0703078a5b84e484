// The gfd daemon: the pure node-label patch, and the loop against the GPU
// simulator (real NVML binding) and the in-process API emulator.
#include "gfd/daemon.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/files.h"
#include "deviceplugin/config.h"
#include "kube/client.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "nvml/client.h"
#include "sim/kube/server.h"
#include "sim/nvml/state.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/wait.h"

namespace gpuop::gfd {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

using testing::kSimNvml;
constexpr int64_t kTimestamp = 1724632719;
constexpr auto kWait = 20s;

Json NodeWith(const Labels& labels, std::optional<std::string> owned) {
  Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-1"}}}};
  for (const auto& [k, v] : labels) node["metadata"]["labels"][k] = v;
  if (owned) node["metadata"]["annotations"][kOwnedLabelsAnnotation] = *owned;
  return node;
}

// ---------------------------------------------------------------------------
// Pure

// As upstream: a flag or its environment variable, else the config file's
// flags.gfd.
TEST(GfdSettingsTest, ConfigFileFillsWhatNoFlagGives) {
  deviceplugin::Config::Gfd file;
  file.oneshot = true;
  file.no_timestamp = true;
  file.sleep_interval = "2m";
  file.output_file = "/run/gfd/features";
  file.machine_type_file = "/tmp/product_name";

  const Settings from_file = CompleteFromConfigFile({}, file);
  EXPECT_EQ(from_file.oneshot, true);
  EXPECT_EQ(from_file.no_timestamp, true);
  EXPECT_EQ(from_file.sleep_interval, "2m");
  EXPECT_EQ(from_file.output_file, "/run/gfd/features");
  EXPECT_EQ(from_file.machine_type_file, "/tmp/product_name");

  Settings given;
  given.oneshot = false;
  given.sleep_interval = "infinite";
  given.output_file = "";
  const Settings merged = CompleteFromConfigFile(given, file);
  EXPECT_EQ(merged.oneshot, false);
  EXPECT_EQ(merged.sleep_interval, "infinite");
  EXPECT_EQ(merged.output_file, "");
  EXPECT_EQ(merged.no_timestamp, true);

  // A file without flags.gfd leaves gfd's defaults, and no output file.
  const Settings defaults = CompleteFromConfigFile({}, deviceplugin::Config::Gfd{});
  EXPECT_EQ(defaults.oneshot, false);
  EXPECT_EQ(defaults.sleep_interval, "60s");
  EXPECT_EQ(defaults.machine_type_file, std::string(kDefaultMachineTypeFile));
  EXPECT_FALSE(defaults.output_file.has_value());
}

TEST(GfdDaemonPatchTest, SetsChangedRemovesOnlyItsOwnStaleLabels) {
  const Json node = NodeWith({{"team", "ml"},
                              {"nvidia.com/device-plugin.config", "a100"},  // the user's
                              {"nvidia.com/gpu.product", "OLD"},
                              {"nvidia.com/mig.capable", "true"},
                              {"nvidia.com/mig-1g.10gb.count", "7"},
                              {"other.io/x", "1"}},
                             "nvidia.com/gpu.product,nvidia.com/mig-1g.10gb.count,"
                             "nvidia.com/mig.capable,other.io/x");
  const Labels labels = {{"nvidia.com/gpu.product", "NEW"},
                         {"nvidia.com/mig.capable", "true"},
                         {"nvidia.com/gpu.count", "8"}};
  auto patch = NodeLabelPatch(node, labels);
  ASSERT_TRUE(patch.has_value());
  const Json want = {
      {"metadata",
       {{"labels",
         {{"nvidia.com/gpu.product", "NEW"},
          {"nvidia.com/gpu.count", "8"},
          {"nvidia.com/mig-1g.10gb.count", nullptr}}},  // it produced it; not any more
        {"annotations",
         {{kOwnedLabelsAnnotation,
           "nvidia.com/gpu.count,nvidia.com/gpu.product,nvidia.com/mig.capable"}}}}}};
  EXPECT_EQ(*patch, want) << patch->dump();
}

TEST(GfdDaemonPatchTest, NothingToWriteWhenTheNodeMatches) {
  const Labels labels = {{"nvidia.com/gpu.product", "X"}, {"nvidia.com/gpu.count", "2"}};
  Labels on_node = labels;
  on_node["team"] = "ml";
  EXPECT_FALSE(NodeLabelPatch(NodeWith(on_node, OwnedLabelsValue(labels)), labels).has_value());
}

TEST(GfdDaemonPatchTest, FirstRunRemovesNothing) {
  // No annotation: nothing is known to be gfd's, so nothing is removed.
  const Json node = NodeWith({{"nvidia.com/gpu.present", "true"}}, std::nullopt);
  auto patch = NodeLabelPatch(node, {{"nvidia.com/gpu.count", "1"}});
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ((*patch)["metadata"]["labels"], Json({{"nvidia.com/gpu.count", "1"}}));
  EXPECT_EQ((*patch)["metadata"]["annotations"][kOwnedLabelsAnnotation], "nvidia.com/gpu.count");
}

TEST(GfdDaemonPatchTest, OnlyTheAnnotationWhenLabelsAlreadyThere) {
  const Labels labels = {{"nvidia.com/gpu.count", "1"}};
  auto patch = NodeLabelPatch(NodeWith(labels, std::nullopt), labels);
  ASSERT_TRUE(patch.has_value());
  EXPECT_FALSE((*patch)["metadata"].contains("labels"));
}

TEST(GfdDaemonPureTest, FeaturesFileNodeFeatureAndPciAddress) {
  const Labels labels = {{"nvidia.com/b", "2"}, {"nvidia.com/a", "1"}};
  EXPECT_EQ(FeaturesFileContent(labels), "nvidia.com/a=1\nnvidia.com/b=2\n");
  EXPECT_EQ(FeaturesFileContent({}), "");

  const Json nf = NodeFeatureObject("node-1", "gpu-operator", labels);
  EXPECT_EQ(nf["apiVersion"], "nfd.k8s-sigs.io/v1alpha1");
  EXPECT_EQ(nf["kind"], "NodeFeature");
  EXPECT_EQ(nf["metadata"]["name"], "nvidia-features-for-node-1");
  EXPECT_EQ(nf["metadata"]["namespace"], "gpu-operator");
  EXPECT_EQ(nf["metadata"]["labels"][kNodeFeatureNodeLabel], "node-1");
  EXPECT_EQ(nf["spec"]["labels"], Json({{"nvidia.com/a", "1"}, {"nvidia.com/b", "2"}}));

  EXPECT_EQ(*NvmlToSysfsPciAddress("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(*NvmlToSysfsPciAddress("0001:AF:1F.7"), "0001:af:1f.7");
  for (const char* bad : {"", "1B:00.0", "10000000:1B:00.0", "0000:1B:00", "0000:1G:00.0"}) {
    EXPECT_FALSE(NvmlToSysfsPciAddress(bad).ok()) << bad;
  }
}

TEST(GfdDaemonPureTest, ValidateNamesTheMissingPiece) {
  DaemonOptions o;
  o.open_nvml = [] { return nvml::Client::Open("/nonexistent"); };
  Status s = ValidateOptions(o);
  EXPECT_NE(s.message().find("no output"), std::string::npos) << s.ToString();
  o.direct_labels = true;
  s = ValidateOptions(o);
  EXPECT_NE(s.message().find("--direct-labels needs the API server"), std::string::npos)
      << s.ToString();
}

// ---------------------------------------------------------------------------
// The loop

class GfdDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(sim_.booted());
    // The host files gfd reads: the DMI name and each GPU's PCI class.
    root_ = sim_.dir() + "/root";
    ASSERT_TRUE(MakeDirs(root_ + "/sys/class/dmi/id").ok());
    ASSERT_TRUE(WriteFileAtomic(root_ + "/sys/class/dmi/id/product_name", "DGX H100\n").ok());
    auto c = sim_.OpenNvml();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto gpus = (*c)->Gpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    for (const auto& g : *gpus) {
      auto addr = NvmlToSysfsPciAddress(g.pci.bus_id);
      ASSERT_TRUE(addr.ok()) << addr.status().ToString();
      const std::string d = root_ + "/sys/bus/pci/devices/" + *addr;
      ASSERT_TRUE(MakeDirs(d).ok());
      ASSERT_TRUE(WriteFileAtomic(d + "/class", "0x030200\n").ok());
    }
  }

  void TearDown() override { daemon_.reset(); }

  void StartApiServer() {
    auto api = testing::StartApiEmulator(16);
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
  }

  DaemonOptions Options() {
    DaemonOptions o;
    o.host_root = root_;
    o.now = [] { return kTimestamp; };
    o.rescan_interval = 20ms;
    o.nvml_retry_interval = 20ms;
    o.sleep_interval = 60s;  // relabels in these tests come from changes only
    o.open_nvml = [] { return nvml::Client::Open(kSimNvml); };
    o.clock = clock_;
    return o;
  }

  void Start(DaemonOptions o, deviceplugin::Config config = {}) {
    auto d = Daemon::Start(std::move(o), std::move(config));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }

  std::map<std::string, std::string> NodeLabels() {
    auto n = api_.client->Get(kube::resources::kNodes, "", "node-1");
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? kube::Labels(*n) : std::map<std::string, std::string>{};
  }

  testing::SimNode sim_{"dgx-h100", "gfd-daemon-test"};
  std::string root_;
  testing::ApiEmulator api_;
  FakeClock fake_clock_;          // outlives daemon_, which may run on it
  const Clock* clock_ = nullptr;  // the daemon's clock; null: the real one
  std::unique_ptr<Daemon> daemon_;
};

// Direct-label mode: gfd's labels appear on its node; the mig-* labels of a
// MIG layout that is undone go again; the user's labels stay throughout.
TEST_F(GfdDaemonTest, DirectLabelsFollowTheMigLayout) {
  StartApiServer();
  ASSERT_TRUE(api_.client
                  ->Create(kube::resources::kNodes, "",
                           NodeWith({{"team", "ml"}, {"nvidia.com/device-plugin.config", "a"}},
                                    std::nullopt))
                  .ok());
  DaemonOptions o = Options();
  o.direct_labels = true;
  o.client = api_.client.get();
  o.node_name = "node-1";
  deviceplugin::Config config;
  config.mig_strategy = deviceplugin::MigStrategy::kMixed;
  Start(o, config);

  ASSERT_TRUE(daemon_->WaitForPasses(1, kWait));
  auto l = NodeLabels();
  EXPECT_EQ(l["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(l["nvidia.com/gpu.count"], "8");
  EXPECT_EQ(l["nvidia.com/gpu.machine"], "DGX-H100");
  EXPECT_EQ(l["nvidia.com/gpu.mode"], "compute");
  EXPECT_EQ(l["nvidia.com/gfd.timestamp"], std::to_string(kTimestamp));
  EXPECT_EQ(l["team"], "ml");
  EXPECT_FALSE(l.contains("nvidia.com/mig-1g.10gb.count"));

  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 0, true, {"1g.10gb", "1g.10gb"}).ok());
  ASSERT_TRUE(daemon_->WaitForPasses(2, kWait));
  l = NodeLabels();
  EXPECT_EQ(l["nvidia.com/mig-1g.10gb.count"], "2");

  // The user relabels in the meantime; gfd must not undo it.
  ASSERT_TRUE(api_.client
                  ->Patch(kube::resources::kNodes, "", "node-1", kube::PatchType::kMerge,
                          {{"metadata", {{"labels", {{"team", "infra"}}}}}})
                  .ok());
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 0, false, {}).ok());
  ASSERT_TRUE(daemon_->WaitForPasses(3, kWait));
  l = NodeLabels();
  for (const auto& [k, v] : l) EXPECT_FALSE(k.starts_with("nvidia.com/mig-")) << k << "=" << v;
  EXPECT_EQ(l["nvidia.com/gpu.count"], "8");
  EXPECT_EQ(l["team"], "infra");
  EXPECT_EQ(l["nvidia.com/device-plugin.config"], "a");
  EXPECT_EQ(l, [&] {
    auto want = daemon_->labels();
    want["team"] = "infra";
    want["nvidia.com/device-plugin.config"] = "a";
    return want;
  }());
}

// The features file: the labels, atomically (no temporary left), mode 0644;
// a new config relabels at once; Stop removes the file.
TEST_F(GfdDaemonTest, FeaturesFileWrittenAndRemovedOnStop) {
  DaemonOptions o = Options();
  o.output_file = root_ + "/etc/kubernetes/node-feature-discovery/features.d/gfd";
  Start(o);
  ASSERT_TRUE(daemon_->WaitForPasses(1, kWait));
  auto text = ReadFile(o.output_file);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, FeaturesFileContent(daemon_->labels()));
  EXPECT_NE(text->find("nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n"), std::string::npos);
  EXPECT_NE(text->find("nvidia.com/gpu.replicas=1\n"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat(o.output_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(DirName(o.output_file))) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "gfd");
  }
  EXPECT_EQ(entries, 1u);

  auto shared = deviceplugin::ParseConfig(
      "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
      "      replicas: 4\n",
      "test");
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  daemon_->SetConfig(*shared);
  ASSERT_TRUE(daemon_->WaitForPasses(2, kWait));
  text = ReadFile(o.output_file);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("nvidia.com/gpu.replicas=4\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("nvidia.com/gpu.sharing-strategy=time-slicing\n"), std::string::npos);

  daemon_->Stop();
  EXPECT_FALSE(PathExists(o.output_file));
}

// sleep_interval on the daemon's clock: unchanged labels are written again
// once it has passed since the last write, and not before.
TEST_F(GfdDaemonTest, UnchangedLabelsAreRewrittenEverySleepInterval) {
  clock_ = &fake_clock_;
  DaemonOptions o = Options();  // rescan 20 ms, sleep 60 s
  o.output_file = root_ + "/features.d/gfd";
  Start(o);
  ASSERT_TRUE(daemon_->WaitForPasses(1, kWait));
  ASSERT_TRUE(std::filesystem::remove(o.output_file));

  ASSERT_TRUE(testing::WaitFor([&] { return fake_clock_.waiters() > 0; }));
  fake_clock_.Advance(std::chrono::seconds(59));  // a rescan, nothing due
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(daemon_->passes(), 1u);
  EXPECT_FALSE(PathExists(o.output_file));

  ASSERT_TRUE(testing::WaitFor([&] { return fake_clock_.waiters() > 0; }));
  fake_clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(daemon_->WaitForPasses(2, kWait));
  auto text = ReadFile(o.output_file);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, FeaturesFileContent(daemon_->labels()));
}

// Relabel (SIGHUP): a full pass with NVML opened again, every output written
// even though no label changed, so a features file someone removed is back.
TEST_F(GfdDaemonTest, RelabelReopensNvmlAndRewritesUnchangedLabels) {
  DaemonOptions o = Options();
  o.output_file = root_ + "/features.d/gfd";
  auto opens = std::make_shared<std::atomic<int>>(0);
  o.open_nvml = [opens] {
    ++*opens;
    return nvml::Client::Open(kSimNvml);
  };
  Start(o);
  ASSERT_TRUE(daemon_->WaitForPasses(1, kWait));
  const Labels before = daemon_->labels();
  EXPECT_EQ(opens->load(), 1);
  ASSERT_TRUE(std::filesystem::remove(o.output_file));

  daemon_->Relabel();
  ASSERT_TRUE(daemon_->WaitForPasses(2, kWait));
  EXPECT_EQ(opens->load(), 2);
  EXPECT_EQ(daemon_->labels(), before);
  auto text = ReadFile(o.output_file);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, FeaturesFileContent(before));
}

// NVML does not open at start (the library is not there yet): no labels, no
// exit; once it opens, the labels appear without a restart.
TEST_F(GfdDaemonTest, NvmlUnavailableAtStartThenAvailable) {
  auto available = std::make_shared<std::atomic<bool>>(false);
  auto attempts = std::make_shared<std::atomic<int>>(0);
  DaemonOptions o = Options();
  o.output_file = sim_.dir() + "/out/gfd";
  const std::string missing = sim_.dir() + "/no-such-libnvidia-ml.so.1";
  o.open_nvml = [available, attempts, missing] {
    ++*attempts;
    return nvml::Client::Open(available->load() ? kSimNvml : missing);
  };
  Start(o);
  // attempts has no waiter
  ASSERT_TRUE(testing::WaitFor([&] { return attempts->load() >= 3; }, kWait));
  EXPECT_EQ(daemon_->passes(), 0u);
  EXPECT_FALSE(PathExists(o.output_file));

  available->store(true);
  ASSERT_TRUE(daemon_->WaitForPasses(1, kWait));
  auto text = ReadFile(o.output_file);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("nvidia.com/gpu.count=8\n"), std::string::npos);
}

// The NodeFeature output against the emulator with NFD's CRD installed:
// created with the node label and spec.labels, updated on a change.
TEST_F(GfdDaemonTest, NodeFeatureCreatedAndUpdated) {
  StartApiServer();
  const Json crd = Json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "nodefeatures.nfd.k8s-sigs.io"},
    "spec": {"group": "nfd.k8s-sigs.io", "scope": "Namespaced",
      "names": {"kind": "NodeFeature", "plural": "nodefeatures", "listKind": "NodeFeatureList",
                "singular": "nodefeature"},
      "versions": [{"name": "v1alpha1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
          "spec": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
            "x-kubernetes-preserve-unknown-fields": true}}}}}]}})");
  auto c = api_.client->Create(kube::resources::kCustomResourceDefinitions, "", crd);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(api_.client
                  ->Create(kube::resources::kNamespaces, "",
                           {{"apiVersion", "v1"},
                            {"kind", "Namespace"},
                            {"metadata", {{"name", "gpu-operator"}}}})
                  .ok());
  DaemonOptions o = Options();
  o.node_feature_api = true;
  o.client = api_.client.get();
  o.node_name = "node-1";
  o.namespace_name = "gpu-operator";
  o.timestamp = false;
  Start(o);
  ASSERT_TRUE(daemon_->WaitForPasses(1, kWait));
  auto nf = api_.client->Get(kube::resources::kNodeFeatures, "gpu-operator",
                             "nvidia-features-for-node-1");
  ASSERT_TRUE(nf.ok()) << nf.status().ToString();
  EXPECT_EQ(kube::Label(*nf, kNodeFeatureNodeLabel), "node-1");
  EXPECT_EQ((*nf)["spec"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_FALSE((*nf)["spec"]["labels"].contains("nvidia.com/gfd.timestamp"));

  deviceplugin::Config single;
  single.mig_strategy = deviceplugin::MigStrategy::kSingle;
  daemon_->SetConfig(single);
  ASSERT_TRUE(daemon_->WaitForPasses(2, kWait));
  nf = api_.client->Get(kube::resources::kNodeFeatures, "gpu-operator",
                        "nvidia-features-for-node-1");
  ASSERT_TRUE(nf.ok()) << nf.status().ToString();
  EXPECT_EQ((*nf)["spec"]["labels"], Json(daemon_->labels()));
  EXPECT_EQ((*nf)["spec"]["labels"]["nvidia.com/mig.strategy"], "single");
}

}  // namespace
}  // namespace gpuop::gfd
