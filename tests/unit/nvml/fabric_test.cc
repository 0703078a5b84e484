// The GPU fabric (NVLink domain) through the real C ABI: nvml::Client's
// FabricInfo and Gpu::fabric against the GPU simulator (libnvml-sim.so), the
// simulator's nvmlDeviceGetGpuFabricInfoV versions called directly, and an
// old driver without the call.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>

#include "nvml/client.h"
#include "nvml/nvml_abi.h"
#include "tests/testing/sim_env.h"

namespace gpuop::nvml {
namespace {

using testing::kSimNvml;
const std::string kOld = std::string(GPUOP_BINARY_DIR) + "/lib/libnvml-old.so";

class FabricNvmlTest : public ::testing::Test {
 protected:
  void Env(const std::string& machine, const std::string& seed) {
    // A fresh state per machine: a state directory belongs to one machine.
    sim_.Point(machine, seed, "state-" + std::to_string(states_++));
  }

  Client* Open(const std::string& machine, const std::string& seed = "node-a") {
    client_.reset();
    Env(machine, seed);
    client_ = sim_.OpenNvmlOrFail();
    return client_.get();
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = sim_.dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  testing::SimEnv sim_;
  unsigned states_ = 0;
  std::unique_ptr<Client> client_;
};

bool IsStandardUuid(const std::string& s) {
  static const std::regex re("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$");
  return std::regex_match(s, re);
}

TEST_F(FabricNvmlTest, Gb200Nvl4GpusShareOneCompletedClique) {
  Client* c = Open("gb200-nvl4");
  ASSERT_NE(c, nullptr);
  auto gpus = c->Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 4u);
  const std::string cluster = (*gpus)[0].fabric ? (*gpus)[0].fabric->cluster_uuid : "";
  EXPECT_TRUE(IsStandardUuid(cluster)) << cluster;
  EXPECT_NE(cluster, "00000000-0000-0000-0000-000000000000");
  for (const Gpu& g : *gpus) {
    SCOPED_TRACE(g.index);
    EXPECT_EQ(g.name, "NVIDIA GB200");
    EXPECT_EQ(g.memory_mib, 189471u);
    EXPECT_EQ(g.cc_major, 10);
    EXPECT_EQ(g.cc_minor, 0);
    EXPECT_EQ(g.architecture, "Blackwell");
    EXPECT_EQ(g.pci.device_id, 0x294110DEu);
    EXPECT_FALSE(g.mig_capable);
    ASSERT_TRUE(g.fabric.has_value());
    EXPECT_EQ(g.fabric->cluster_uuid, cluster);
    EXPECT_EQ(g.fabric->clique_id, 32767u);
    EXPECT_EQ(g.fabric->state, FabricState::kCompleted);
    EXPECT_EQ(g.fabric->status, 0);
    EXPECT_TRUE(FabricAttached(*g.fabric));
    // FabricInfo says the same as the Gpu description.
    auto f = c->FabricInfo(g.index);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(*f, g.fabric);
  }
}

TEST_F(FabricNvmlTest, Gb200ClusterIsTheSameOnEveryNodeOfTheRack) {
  Client* a = Open("gb200-nvl4", "node-a");
  ASSERT_NE(a, nullptr);
  auto fa = a->FabricInfo(0);
  Client* b = Open("gb200-nvl4", "node-b");
  ASSERT_NE(b, nullptr);
  auto fb = b->FabricInfo(3);
  ASSERT_TRUE(fa.ok() && fb.ok());
  ASSERT_TRUE(fa->has_value() && fb->has_value());
  EXPECT_EQ((*fa)->cluster_uuid, (*fb)->cluster_uuid);
  // ... while the GPUs themselves are distinct per node.
  auto ga = Open("gb200-nvl4", "node-a")->GpuByIndex(0);
  auto gb = Open("gb200-nvl4", "node-b")->GpuByIndex(0);
  ASSERT_TRUE(ga.ok() && gb.ok());
  EXPECT_NE(ga->uuid, gb->uuid);
}

TEST_F(FabricNvmlTest, SingleNodeBoardsHaveNoFabric) {
  for (const char* machine : {"dgx-h100", "dgx-a100", "l40s-4", "t4-1"}) {
    SCOPED_TRACE(machine);
    Client* c = Open(machine);
    ASSERT_NE(c, nullptr);
    auto gpus = c->Gpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    for (const Gpu& g : *gpus) EXPECT_FALSE(g.fabric.has_value()) << g.index;
    auto f = c->FabricInfo(0);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_FALSE(f->has_value());
  }
}

TEST_F(FabricNvmlTest, UnregisteredGb200ReportsNotStarted) {
  Client* c = Open("gb200");  // one GB200, no fabric manager
  ASSERT_NE(c, nullptr);
  auto f = c->FabricInfo(0);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->state, FabricState::kNotStarted);
  EXPECT_EQ((*f)->cluster_uuid, "00000000-0000-0000-0000-000000000000");
  EXPECT_FALSE(FabricAttached(**f));
}

TEST_F(FabricNvmlTest, NoSuchGpuIsAnError) {
  Client* c = Open("gb200-nvl4");
  ASSERT_NE(c, nullptr);
  auto f = c->FabricInfo(9);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound) << f.status().ToString();
}

TEST_F(FabricNvmlTest, MachineFileCarriesPerGpuFabric) {
  const std::string file =
      WriteFile("split.yaml",
                "name: split-rack\n"
                "gpus:\n"
                "- model: gb200\n"
                "  count: 2\n"
                "  fabric: {clusterUuid: 8F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B, "
                "cliqueId: 7}\n"
                "- model: gb200\n"
                "  fabric: {clusterUuid: 8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, "
                "cliqueId: 4294967295}\n"
                "- model: gb200\n");
  Client* c = Open(file);
  ASSERT_NE(c, nullptr);
  auto gpus = c->Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 4u);
  for (unsigned i = 0; i < 3; ++i) {
    ASSERT_TRUE((*gpus)[i].fabric.has_value()) << i;
    EXPECT_EQ((*gpus)[i].fabric->cluster_uuid, "8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b");
    EXPECT_EQ((*gpus)[i].fabric->state, FabricState::kCompleted);
  }
  EXPECT_EQ((*gpus)[0].fabric->clique_id, 7u);
  EXPECT_EQ((*gpus)[1].fabric->clique_id, 7u);
  EXPECT_EQ((*gpus)[2].fabric->clique_id, 4294967295u);
  ASSERT_TRUE((*gpus)[3].fabric.has_value());
  EXPECT_EQ((*gpus)[3].fabric->state, FabricState::kNotStarted);
}

// A bad fabric in a machine file stops the simulated driver from loading
// (nvmlInit fails), as any other bad machine file does.
TEST_F(FabricNvmlTest, MachineFileRejectsBadFabric) {
  const std::vector<std::string> bad = {
      // not a fabric-capable model
      "gpus:\n- model: h100-80gb\n  fabric: {clusterUuid: 8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, "
      "cliqueId: 1}\n",
      "gpus:\n- model: gb200\n  fabric: {clusterUuid: not-a-uuid, cliqueId: 1}\n",
      "gpus:\n- model: gb200\n  fabric: {clusterUuid: 8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b}\n",
      "gpus:\n- model: gb200\n  fabric: {clusterUuid: 8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, "
      "cliqueId: -1}\n",
  };
  const std::string good =
      "gpus:\n- model: gb200\n  fabric: {clusterUuid: 8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b, "
      "cliqueId: 1}\n";
  Env(WriteFile("good.yaml", good), "good");
  EXPECT_TRUE(Client::Open(kSimNvml).ok());
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(bad[i]);
    Env(WriteFile("bad" + std::to_string(i) + ".yaml", bad[i]), "bad" + std::to_string(i));
    EXPECT_FALSE(Client::Open(kSimNvml).ok());
  }
}

// The simulator's C entry point with each struct version, as a driver
// answers them: v2 and v3 filled, anything else a version mismatch.
TEST_F(FabricNvmlTest, FabricInfoVHonoursTheCallersVersion) {
  Env("gb200-nvl4", "node-a");
  // NODELETE, as nvml::Library loads it: the simulator's handles live in
  // its statics, which an unmapping dlclose would turn into leaks.
  void* h = dlopen(kSimNvml.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  ASSERT_NE(h, nullptr) << dlerror();
  auto init = reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(h, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<decltype(&nvmlShutdown)>(dlsym(h, "nvmlShutdown"));
  auto handle = reinterpret_cast<decltype(&nvmlDeviceGetHandleByIndex_v2)>(
      dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
  auto info_v = reinterpret_cast<decltype(&nvmlDeviceGetGpuFabricInfoV)>(
      dlsym(h, "nvmlDeviceGetGpuFabricInfoV"));
  auto info_v1 = reinterpret_cast<decltype(&nvmlDeviceGetGpuFabricInfo)>(
      dlsym(h, "nvmlDeviceGetGpuFabricInfo"));
  ASSERT_TRUE(init && shutdown && handle && info_v && info_v1);
  ASSERT_EQ(init(), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(handle(1, &dev), NVML_SUCCESS);

  // v2 into a v2-sized buffer with a guard after it: nothing past 36 bytes.
  struct {
    nvmlGpuFabricInfo_v2_t info;
    unsigned char guard[8];
  } v2buf;
  std::memset(&v2buf, 0xAB, sizeof(v2buf));
  v2buf.info.version = nvmlGpuFabricInfo_v2;
  ASSERT_EQ(info_v(dev, reinterpret_cast<nvmlGpuFabricInfoV_t*>(&v2buf.info)), NVML_SUCCESS);
  EXPECT_EQ(v2buf.info.state, NVML_GPU_FABRIC_STATE_COMPLETED);
  EXPECT_EQ(v2buf.info.status, NVML_SUCCESS);
  EXPECT_EQ(v2buf.info.cliqueId, 32767u);
  EXPECT_EQ(v2buf.info.healthMask, 0u);
  for (unsigned char b : v2buf.guard) EXPECT_EQ(b, 0xAB);

  nvmlGpuFabricInfoV_t v3{};
  v3.version = nvmlGpuFabricInfo_v3;
  ASSERT_EQ(info_v(dev, &v3), NVML_SUCCESS);
  EXPECT_EQ(v3.state, NVML_GPU_FABRIC_STATE_COMPLETED);
  EXPECT_EQ(v3.cliqueId, 32767u);
  EXPECT_EQ(std::memcmp(v3.clusterUuid, v2buf.info.clusterUuid, NVML_GPU_FABRIC_UUID_LEN), 0);

  nvmlGpuFabricInfo_t v1{};
  ASSERT_EQ(info_v1(dev, &v1), NVML_SUCCESS);
  EXPECT_EQ(v1.cliqueId, 32767u);
  EXPECT_EQ(std::memcmp(v1.clusterUuid, v3.clusterUuid, NVML_GPU_FABRIC_UUID_LEN), 0);

  nvmlGpuFabricInfoV_t bad{};
  bad.version = 0x01000020;
  EXPECT_EQ(info_v(dev, &bad), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  bad.version = 0;
  EXPECT_EQ(info_v(dev, &bad), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  EXPECT_EQ(info_v(dev, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  shutdown();
  dlclose(h);
}

// A driver without nvmlDeviceGetGpuFabricInfo*: no fabric, never an error.
// (libnvml-old.so is built with integration_test; `ninja nvml-old`.)
TEST(FabricOldDriverTest, MissingSymbolMeansNoFabric) {
  if (!std::filesystem::exists(kOld)) GTEST_SKIP() << kOld << " not built";
  auto c = Client::Open(kOld);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto f = (*c)->FabricInfo(0);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->has_value());
  auto g = (*c)->GpuByIndex(0);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(g->fabric.has_value());
}

}  // namespace
}  // namespace gpuop::nvml
