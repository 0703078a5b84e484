// Golden label maps for every simulated model and layout, read through the
// real NVML binding from the GPU simulator. Each test also checks the values
// that carry a rule (product, family, memory, count, MIG labels) explicitly,
// so regenerating the goldens (GPUOP_UPDATE_GOLDEN=1) cannot hide a wrong rule.
#include "gfd/labels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/files.h"
#include "deviceplugin/config.h"
#include "nvml/client.h"
#include "sim/nvml/state.h"
#include "tests/testing/scoped_env.h"
#include "tests/testing/sim_node.h"

namespace gpuop::gfd {
namespace {

using Labels = std::map<std::string, std::string>;
using deviceplugin::Config;
using deviceplugin::MigStrategy;

const std::string kGolden = std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/gfd/";
constexpr int64_t kTimestamp = 1724632719;

class GfdLabelsTest : public ::testing::Test {
 protected:
  // A fresh node per SetUp: the loops below start over with TearDown + SetUp.
  void SetUp() override { sim_.emplace(); }
  void TearDown() override { sim_.reset(); }

  // The simulator's state for `machine` (a preset or a YAML file).
  void Machine(const std::string& machine) { ASSERT_TRUE(sim_->Boot(machine, "gfd-test")); }

  // The labeller's input as the gfd command builds it from NVML; every GPU
  // has PCI class `pci_class`.
  LabelInput Input(Config config = {}, unsigned pci_class = 0x030200) {
    LabelInput in;
    auto c = testing::SimEnv::OpenNvml();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return in;
    auto gpus = (*c)->Gpus();
    EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
    auto sys = (*c)->System();
    EXPECT_TRUE(sys.ok()) << sys.status().ToString();
    if (gpus.ok()) in.gpus = *gpus;
    if (sys.ok()) in.system = *sys;
    for (const auto& g : in.gpus) in.pci_class[g.pci.bus_id] = pci_class;
    in.machine_type = "DGX A100 (sim)";
    in.config = std::move(config);
    in.timestamp = kTimestamp;
    return in;
  }

  Labels Generate(const LabelInput& in) {
    auto l = GenerateLabels(in);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : Labels{};
  }

  static Config Shared(int replicas, bool rename_by_default) {
    auto c = deviceplugin::ParseConfig(
        "version: v1\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    renameByDefault: " +
            std::string(rename_by_default ? "true" : "false") +
            "\n"
            "    resources:\n"
            "    - name: nvidia.com/gpu\n"
            "      replicas: " +
            std::to_string(replicas) + "\n",
        "test config");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : Config{};
  }

  static Config Mig(MigStrategy s) {
    Config c;
    c.mig_strategy = s;
    return c;
  }

  std::optional<testing::SimNode> sim_;
};

std::string Text(const Labels& l) {
  std::string out;
  for (const auto& [k, v] : l) out += k + "=" + v + "\n";
  return out;
}

// Compares with tests/fixtures/gfd/<name>.txt, or rewrites it when
// GPUOP_UPDATE_GOLDEN=1 (check every changed value by hand first).
void ExpectGolden(const Labels& got, const std::string& name) {
  const std::string path = kGolden + name + ".txt";
  const char* update = std::getenv("GPUOP_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    ASSERT_TRUE(WriteFileAtomic(path, Text(got)).ok()) << path;
    return;
  }
  auto want = ReadFile(path);
  ASSERT_TRUE(want.ok()) << want.status().ToString()
                         << " (create it with GPUOP_UPDATE_GOLDEN=1, then check it by hand)";
  EXPECT_EQ(Text(got), *want) << "golden " << path
                              << " differs; if the change is intended, rerun with "
                                 "GPUOP_UPDATE_GOLDEN=1 and review the diff";
}

// The labels every node with GPUs has, with the simulator's driver
// 570.172.08 and CUDA 12.8.
void ExpectCommon(const Labels& l) {
  EXPECT_EQ(l.at("nvidia.com/gfd.timestamp"), "1724632719");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.major"), "570");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.minor"), "172");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver.rev"), "08");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.full"), "570.172.08");
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.revision"), "08");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime.major"), "12");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime.minor"), "8");
  EXPECT_EQ(l.at("nvidia.com/cuda.runtime-version.full"), "12.8");
  EXPECT_EQ(l.at("nvidia.com/gpu.machine"), "DGX-A100-sim");
}

struct ModelCase {
  std::string preset, golden, product, family, memory, count, cc_major, cc_minor, mig_capable;
};

TEST_F(GfdLabelsTest, EverySimulatedModel) {
  const std::vector<ModelCase> cases = {
      {"dgx-a100", "a100-40gb", "NVIDIA-A100-SXM4-40GB", "ampere", "40960", "8", "8", "0", "true"},
      {"a100-80gb", "a100-80gb", "NVIDIA-A100-SXM4-80GB", "ampere", "81920", "1", "8", "0", "true"},
      {"dgx-h100", "h100", "NVIDIA-H100-80GB-HBM3", "hopper", "81559", "8", "9", "0", "true"},
      {"hgx-h200", "h200", "NVIDIA-H200", "hopper", "143771", "8", "9", "0", "true"},
      {"l40s-4", "l40s", "NVIDIA-L40S", "ada-lovelace", "46068", "4", "8", "9", "false"},
      {"t4-1", "t4", "Tesla-T4", "turing", "15360", "1", "7", "5", "false"},
      {"a30", "a30", "NVIDIA-A30", "ampere", "24576", "1", "8", "0", "true"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.preset);
    TearDown();
    SetUp();
    Machine(c.preset);
    Labels l = Generate(Input());
    ExpectCommon(l);
    EXPECT_EQ(l.at("nvidia.com/gpu.product"), c.product);
    EXPECT_EQ(l.at("nvidia.com/gpu.family"), c.family);
    EXPECT_EQ(l.at("nvidia.com/gpu.memory"), c.memory);
    EXPECT_EQ(l.at("nvidia.com/gpu.count"), c.count);
    EXPECT_EQ(l.at("nvidia.com/gpu.count." + c.product), c.count);
    EXPECT_EQ(l.at("nvidia.com/gpu.compute.major"), c.cc_major);
    EXPECT_EQ(l.at("nvidia.com/gpu.compute.minor"), c.cc_minor);
    EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "1");
    EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "none");
    EXPECT_EQ(l.at("nvidia.com/gpu.mode"), "compute");
    EXPECT_EQ(l.at("nvidia.com/mig.capable"), c.mig_capable);
    EXPECT_EQ(l.at("nvidia.com/mps.capable"), "false");
    EXPECT_EQ(l.count("nvidia.com/mig.strategy"), 0u);  // none: omitted
    ExpectGolden(l, c.golden);
  }
}

// A node without libcuda: NVML answers LIBRARY_NOT_FOUND for the CUDA
// version, and the node is labelled without the CUDA runtime labels.
TEST_F(GfdLabelsTest, WithoutLibcudaNoCudaRuntimeLabels) {
  Machine("dgx-h100");
  LabelInput in;
  {
    testing::ScopedEnv no_libcuda("GPUOP_SIM_LIBCUDA", "absent");
    in = Input();
  }
  Labels l = Generate(in);
  EXPECT_EQ(l.at("nvidia.com/cuda.driver-version.full"), "570.172.08");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "8");
  for (const auto& [key, value] : l) {
    EXPECT_FALSE(key.starts_with("nvidia.com/cuda.runtime")) << key << "=" << value;
  }
}

// One compute tray of a GB200 NVL72 rack: the clique label joins the
// fabric's cluster UUID and clique id; the other labels are as for any model.
TEST_F(GfdLabelsTest, Gb200Nvl4HasTheCliqueLabel) {
  Machine("gb200-nvl4");
  LabelInput in = Input();
  ASSERT_EQ(in.gpus.size(), 4u);
  ASSERT_TRUE(in.gpus[0].fabric.has_value());
  const std::string cluster = in.gpus[0].fabric->cluster_uuid;
  Labels l = Generate(in);
  ExpectCommon(l);
  EXPECT_EQ(l.at("nvidia.com/gpu.clique"), cluster + ".32767");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-GB200");
  EXPECT_EQ(l.at("nvidia.com/gpu.family"), "blackwell");
  EXPECT_EQ(l.at("nvidia.com/gpu.memory"), "189471");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "4");
  EXPECT_EQ(l.at("nvidia.com/gpu.compute.major"), "10");
  EXPECT_EQ(l.at("nvidia.com/gpu.compute.minor"), "0");
  EXPECT_EQ(l.at("nvidia.com/mig.capable"), "false");
  ExpectGolden(l, "gb200-nvl4");
}

// No model of the single-node presets has a fabric: no clique label.
TEST_F(GfdLabelsTest, NoCliqueLabelWithoutFabric) {
  for (const char* machine : {"dgx-h100", "gb200"}) {  // gb200 alone: NOT_STARTED
    SCOPED_TRACE(machine);
    TearDown();
    SetUp();
    Machine(machine);
    Labels l = Generate(Input());
    EXPECT_EQ(l.count("nvidia.com/gpu.clique"), 0u);
    EXPECT_EQ(l.count("nvidia.com/gpu.product"), 1u);
  }
}

// 2 H100 then 3 L40S: the L40S (more GPUs) are the primary model even though
// GPU 0 is an H100; both models get a count label.
TEST_F(GfdLabelsTest, MixedModelNodeLabelsTheMostCommonModel) {
  const std::string file = sim_->dir() + "/mixed.yaml";
  ASSERT_TRUE(WriteFileAtomic(file,
                              "name: mixed\n"
                              "gpus:\n"
                              "- model: h100-80gb\n"
                              "  count: 2\n"
                              "- model: l40s\n"
                              "  count: 3\n")
                  .ok());
  Machine(file);
  LabelInput in = Input();
  ASSERT_EQ(in.gpus.size(), 5u);
  in.pci_class[in.gpus[2].pci.bus_id] = 0x0300;  // the L40S in graphics mode
  in.pci_class[in.gpus[3].pci.bus_id] = 0x0300;
  in.pci_class[in.gpus[4].pci.bus_id] = 0x0300;
  Labels l = Generate(in);
  ExpectCommon(l);
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-L40S");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "3");
  EXPECT_EQ(l.at("nvidia.com/gpu.memory"), "46068");
  EXPECT_EQ(l.at("nvidia.com/gpu.family"), "ada-lovelace");
  EXPECT_EQ(l.at("nvidia.com/gpu.mode"), "graphics");
  EXPECT_EQ(l.at("nvidia.com/gpu.count.NVIDIA-L40S"), "3");
  EXPECT_EQ(l.at("nvidia.com/gpu.count.NVIDIA-H100-80GB-HBM3"), "2");
  EXPECT_EQ(l.at("nvidia.com/mig.capable"), "true");  // any GPU
  ExpectGolden(l, "mixed-models");
}

// A tie goes to the model of the lowest GPU index.
TEST_F(GfdLabelsTest, MixedModelTieGoesToTheLowestIndex) {
  const std::string file = sim_->dir() + "/tie.yaml";
  ASSERT_TRUE(WriteFileAtomic(file,
                              "gpus:\n"
                              "- model: t4\n"
                              "  count: 2\n"
                              "- model: a30\n"
                              "  count: 2\n")
                  .ok());
  Machine(file);
  Labels l = Generate(Input());
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "Tesla-T4");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(l.at("nvidia.com/gpu.count.NVIDIA-A30"), "2");
  EXPECT_EQ(l.at("nvidia.com/gpu.count.Tesla-T4"), "2");
}

TEST_F(GfdLabelsTest, MigSingle) {
  Machine("a100-40gb");
  ASSERT_TRUE(
      sim::SetMigLayout(sim_->store(), 0, true, std::vector<std::string>(7, "1g.5gb")).ok());
  Labels l = Generate(Input(Mig(MigStrategy::kSingle)));
  ExpectCommon(l);
  EXPECT_EQ(l.at("nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "7");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.memory"), "4864");
  EXPECT_EQ(l.at("nvidia.com/gpu.multiprocessors"), "14");
  EXPECT_EQ(l.at("nvidia.com/gpu.slices.gi"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.slices.ci"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.engines.copy"), "1");
  EXPECT_EQ(l.at("nvidia.com/gpu.engines.decoder"), "0");
  EXPECT_EQ(l.at("nvidia.com/gpu.family"), "ampere");                  // from the parent
  EXPECT_EQ(l.at("nvidia.com/gpu.count.NVIDIA-A100-SXM4-40GB"), "1");  // physical GPUs
  ExpectGolden(l, "mig-single");
}

TEST_F(GfdLabelsTest, MigSingleInvalidLayout) {
  Machine("dgx-a100");
  // MIG on GPU 0 only: single needs every GPU in MIG mode.
  ASSERT_TRUE(sim::SetMigLayout(sim_->store(), 0, true, {"1g.5gb"}).ok());
  Labels l = Generate(Input(Mig(MigStrategy::kSingle)));
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-INVALID");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "0");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "0");
  EXPECT_EQ(l.at("nvidia.com/gpu.memory"), "0");
  EXPECT_EQ(l.count("nvidia.com/gpu.multiprocessors"), 0u);
  ExpectGolden(l, "mig-single-invalid");
}

TEST_F(GfdLabelsTest, MigSingleTwoProfilesIsInvalid) {
  Machine("a100-40gb");
  ASSERT_TRUE(sim::SetMigLayout(sim_->store(), 0, true, {"1g.5gb", "2g.10gb"}).ok());
  Labels l = Generate(Input(Mig(MigStrategy::kSingle)));
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-40GB-MIG-INVALID");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "0");
}

TEST_F(GfdLabelsTest, MigMixed) {
  Machine("dgx-h100");
  ASSERT_TRUE(sim::SetMigLayout(sim_->store(), 0, true, {"1g.10gb", "1g.10gb", "2g.20gb"}).ok());
  ASSERT_TRUE(sim::SetMigLayout(sim_->store(), 1, true, {"3g.40gb"}).ok());
  Labels l = Generate(Input(Mig(MigStrategy::kMixed)));
  ExpectCommon(l);
  EXPECT_EQ(l.at("nvidia.com/mig.strategy"), "mixed");
  // Whole GPUs: all 8 H100 counted; sharing from the whole ones.
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "8");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.product"), "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.count"), "2");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.replicas"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.sharing-strategy"), "none");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.memory"), "9984");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.multiprocessors"), "16");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.10gb.engines.jpeg"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-2g.20gb.count"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-2g.20gb.memory"), "20096");
  EXPECT_EQ(l.at("nvidia.com/mig-2g.20gb.slices.gi"), "2");
  EXPECT_EQ(l.at("nvidia.com/mig-3g.40gb.count"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-3g.40gb.multiprocessors"), "60");
  EXPECT_EQ(l.at("nvidia.com/mig-3g.40gb.slices.ci"), "3");
  EXPECT_EQ(l.count("nvidia.com/gpu.multiprocessors"), 0u);
  ExpectGolden(l, "mig-mixed");
}

// Every GPU in MIG mode: gpu.* describe the MIG-enabled parents, unshared.
TEST_F(GfdLabelsTest, MigMixedAllGpusInMigModeHaveZeroReplicas) {
  Machine("a30");
  ASSERT_TRUE(sim::SetMigLayout(sim_->store(), 0, true, {"1g.6gb", "1g.6gb"}).ok());
  Labels l = Generate(Input(Mig(MigStrategy::kMixed)));
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-A30");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "0");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "1");
  EXPECT_EQ(l.at("nvidia.com/mig-1g.6gb.count"), "2");
}

TEST_F(GfdLabelsTest, TimeSlicingFourReplicas) {
  Machine("l40s-4");
  Labels l = Generate(Input(Shared(4, false)));
  ExpectCommon(l);
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-L40S-SHARED");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
  EXPECT_EQ(l.at("nvidia.com/gpu.count"), "4");  // physical GPUs, not replicas
  EXPECT_EQ(l.at("nvidia.com/gpu.count.NVIDIA-L40S"), "4");
  EXPECT_EQ(l.at("nvidia.com/mps.capable"), "false");
  ExpectGolden(l, "time-slicing-4");
}

TEST_F(GfdLabelsTest, TimeSlicingRenamedKeepsTheProduct) {
  Machine("l40s-4");
  Labels l = Generate(Input(Shared(4, true)));
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "NVIDIA-L40S");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
}

TEST_F(GfdLabelsTest, MpsSharingIsMpsCapable) {
  Machine("t4-1");
  Config c;
  c.sharing.kind = deviceplugin::Sharing::Kind::kMps;
  c.sharing.fail_requests_greater_than_one = true;
  c.sharing.resources.push_back(
      {.name = "nvidia.com/gpu", .rename = "", .devices = {}, .replicas = 2});
  c.mps_root = "/run/nvidia/mps";
  Labels l = Generate(Input(c));
  EXPECT_EQ(l.at("nvidia.com/mps.capable"), "true");
  EXPECT_EQ(l.at("nvidia.com/gpu.sharing-strategy"), "mps");
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "Tesla-T4-SHARED");
  EXPECT_EQ(l.at("nvidia.com/gpu.replicas"), "2");
}

TEST_F(GfdLabelsTest, NoTimestampWhenNullopt) {
  Machine("t4-1");
  LabelInput in = Input();
  in.timestamp = std::nullopt;
  Labels l = Generate(in);
  EXPECT_EQ(l.count("nvidia.com/gfd.timestamp"), 0u);
  EXPECT_EQ(l.at("nvidia.com/gpu.product"), "Tesla-T4");
}

TEST_F(GfdLabelsTest, UnknownMachineAndPciClass) {
  Machine("t4-1");
  LabelInput in = Input();
  in.machine_type = "";
  in.pci_class.clear();
  Labels l = Generate(in);
  EXPECT_EQ(l.at("nvidia.com/gpu.machine"), "unknown");
  EXPECT_EQ(l.at("nvidia.com/gpu.mode"), "unknown");
}

TEST_F(GfdLabelsTest, BadDriverVersionNamesIt) {
  Machine("t4-1");
  LabelInput in = Input();
  in.system.driver_version = "570";
  auto l = GenerateLabels(in);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("\"570\""), std::string::npos) << l.status().ToString();
}

TEST(GfdSanitiseTest, ProductRule) {
  EXPECT_EQ(SanitiseProduct("NVIDIA A100-SXM4-40GB"), "NVIDIA-A100-SXM4-40GB");
  EXPECT_EQ(SanitiseProduct("  NVIDIA  GeForce (R) RTX_4090 "), "NVIDIA-GeForce-R-RTX_4090");
  EXPECT_EQ(SanitiseProduct("1g.10gb+me"), "1g.10gbme");
}

TEST(GfdSanitiseTest, LabelValueRule) {
  EXPECT_EQ(SanitiseLabelValue("-ProLiant DL380 Gen10 ("), "ProLiant-DL380-Gen10");
  EXPECT_EQ(SanitiseLabelValue("a/b:c"), "abc");
  const std::string long_value(70, 'x');
  EXPECT_EQ(SanitiseLabelValue(long_value).size(), 63u);
  EXPECT_EQ(SanitiseLabelValue(std::string(62, 'x') + "-yz"), std::string(62, 'x'));
  EXPECT_EQ(SanitiseLabelValue("..."), "");
}

TEST(GfdSanitiseTest, ModelCountKeyFitsTheNameLimit) {
  EXPECT_EQ(ModelCountKey("NVIDIA H100 80GB HBM3"), "nvidia.com/gpu.count.NVIDIA-H100-80GB-HBM3");
  const std::string a = ModelCountKey(std::string(60, 'A') + " one");
  const std::string b = ModelCountKey(std::string(60, 'A') + " two");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size() - std::string("nvidia.com/").size(), 63u);
  EXPECT_EQ(a.substr(0, 31), "nvidia.com/gpu.count.AAAAAAAAAA");
}

TEST(GfdSanitiseTest, FamilyTable) {
  EXPECT_EQ(ArchFamily(7, 0), "volta");
  EXPECT_EQ(ArchFamily(7, 5), "turing");
  EXPECT_EQ(ArchFamily(8, 6), "ampere");
  EXPECT_EQ(ArchFamily(8, 9), "ada-lovelace");
  EXPECT_EQ(ArchFamily(9, 0), "hopper");
  EXPECT_EQ(ArchFamily(10, 0), "blackwell");
  EXPECT_EQ(ArchFamily(12, 0), "blackwell");
  EXPECT_EQ(ArchFamily(13, 0), "rubin");
  EXPECT_EQ(ArchFamily(4, 0), "undefined");
}

// ---- gpu.clique, pure ----

constexpr const char* kClusterA = "5fd7b1a2-8c3e-4d6f-9a0b-1c2d3e4f5a6b";
constexpr const char* kClusterB = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

nvml::Gpu FabricGpu(unsigned index, std::optional<nvml::GpuFabric> fabric) {
  nvml::Gpu g;
  g.index = index;
  g.name = "NVIDIA GB200";
  g.uuid = "GPU-" + std::to_string(index);
  g.pci.bus_id = "00000000:0" + std::to_string(index) + ":00.0";
  g.memory_mib = 189471;
  g.cc_major = 10;
  g.fabric = std::move(fabric);
  return g;
}

nvml::GpuFabric Completed(const std::string& cluster, unsigned clique) {
  return {cluster, clique, nvml::FabricState::kCompleted, 0};
}

std::optional<std::string> Clique(const std::vector<nvml::Gpu>& gpus) {
  auto c = FabricClique(gpus);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : std::nullopt;
}

TEST(GfdCliqueTest, AllGpusInOneClique) {
  std::vector<nvml::Gpu> gpus;
  for (unsigned i = 0; i < 4; ++i) gpus.push_back(FabricGpu(i, Completed(kClusterA, 32767)));
  EXPECT_EQ(Clique(gpus), std::string(kClusterA) + ".32767");
}

TEST(GfdCliqueTest, GpusWithoutACompletedSuccessfulFabricAreSkipped) {
  auto zero = Completed("00000000-0000-0000-0000-000000000000", 0);  // HGX H100 style
  auto failed = Completed(kClusterB, 9);
  failed.status = 999;  // registration finished with an error
  auto progress = Completed(kClusterB, 9);
  progress.state = nvml::FabricState::kInProgress;
  auto not_started = Completed(kClusterB, 9);
  not_started.state = nvml::FabricState::kNotStarted;
  std::vector<nvml::Gpu> gpus = {FabricGpu(0, std::nullopt), FabricGpu(1, zero),
                                 FabricGpu(2, failed),       FabricGpu(3, progress),
                                 FabricGpu(4, not_started),  FabricGpu(5, Completed(kClusterA, 3))};
  EXPECT_EQ(Clique(gpus), std::string(kClusterA) + ".3");
  gpus.pop_back();  // none left that counts
  EXPECT_EQ(Clique(gpus), std::nullopt);
  EXPECT_EQ(Clique({}), std::nullopt);
}

TEST(GfdCliqueTest, DisagreeingGpusAreAnErrorNamingThem) {
  auto cliques =
      FabricClique({FabricGpu(0, Completed(kClusterA, 1)), FabricGpu(1, Completed(kClusterA, 1)),
                    FabricGpu(2, Completed(kClusterA, 2))});
  ASSERT_FALSE(cliques.ok());
  EXPECT_EQ(cliques.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(cliques.status().message().find("different NVLink fabric cliques (1 on GPU 0,1; 2 on "
                                            "GPU 2)"),
            std::string::npos)
      << cliques.status().message();

  auto clusters =
      FabricClique({FabricGpu(0, Completed(kClusterA, 1)), FabricGpu(1, Completed(kClusterB, 1))});
  ASSERT_FALSE(clusters.ok());
  EXPECT_NE(clusters.status().message().find("different NVLink fabric clusters"), std::string::npos)
      << clusters.status().message();
  EXPECT_NE(clusters.status().message().find(kClusterB), std::string::npos);
}

// Disagreeing GPUs cost the clique label only: every other label is written.
TEST(GfdCliqueTest, GenerateLabelsOmitsOnlyTheCliqueOnDisagreement) {
  LabelInput in;
  in.system.driver_version = "570.172.08";
  in.system.cuda_driver_version = 12080;
  in.gpus = {FabricGpu(0, Completed(kClusterA, 1)), FabricGpu(1, Completed(kClusterA, 2))};
  auto l = GenerateLabels(in);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->count("nvidia.com/gpu.clique"), 0u);
  EXPECT_EQ(l->at("nvidia.com/gpu.product"), "NVIDIA-GB200");
  EXPECT_EQ(l->at("nvidia.com/gpu.count"), "2");

  in.gpus[1].fabric = Completed(kClusterA, 1);
  l = GenerateLabels(in);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->at("nvidia.com/gpu.clique"), std::string(kClusterA) + ".1");
}

TEST(GfdLabelsPureTest, NoGpusOnlyTimestamp) {
  LabelInput in;
  in.timestamp = 5;
  auto l = GenerateLabels(in);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (Labels{{"nvidia.com/gfd.timestamp", "5"}}));
}

}  // namespace
}  // namespace gpuop::gfd
