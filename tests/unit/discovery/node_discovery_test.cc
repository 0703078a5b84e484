// The node-discovery adapter: sysfs trees under a temporary host root, the
// API emulator in-process, and the emulator's audit counters to count writes.
#include "discovery/node_discovery.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "base/files.h"
#include "base/strings.h"
#include "kube/client.h"
#include "kube/resource.h"
#include "sim/host/host_root.h"
#include "sim/kube/server.h"
#include "sim/nvml/machine.h"

namespace gpuop::discovery {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kPlain = "feature.node.kubernetes.io/pci-10de.present";
const std::string k3d = "feature.node.kubernetes.io/pci-0302_10de.present";
const std::string kVga = "feature.node.kubernetes.io/pci-0300_10de.present";

class NodeDiscoveryAdapterTest : public ::testing::Test {
 protected:
  // One emulator for the suite: starting it costs more than the tests.
  static void SetUpTestSuite() {
    simkube::ServerOptions so;
    so.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    so.threads = 8;
    auto server = simkube::ApiServer::Start(std::move(so));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    char tmpl[] = "/tmp/nodedisc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ASSERT_TRUE(MakeDirs(root_ + "/sys/bus/pci/devices").ok());
    kube::RestConfig rc;
    rc.server = server_->url();
    rc.qps = 0;
    auto client = kube::Client::New(rc, kube::RetryPolicy{.max_attempts = 1});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
    options_.host_root = root_;
    options_.node_name = "gpu-1";
  }
  void TearDown() override {
    if (client_) {
      for (const char* n : {"gpu-1", "gpu-2"})
        (void)client_->Delete(kube::resources::kNodes, "", n);
    }
    client_.reset();
    fs::remove_all(root_);
  }

  // A device directory as sysfs has it (the kernel's files end in '\n').
  void AddDevice(const std::string& addr, const std::string& vendor, const std::string& cls) {
    const std::string dir = root_ + "/sys/bus/pci/devices/" + addr;
    ASSERT_TRUE(MakeDirs(dir).ok());
    ASSERT_TRUE(WriteFileAtomic(dir + "/vendor", vendor + "\n").ok());
    ASSERT_TRUE(WriteFileAtomic(dir + "/class", cls + "\n").ok());
  }
  void RemoveDevice(const std::string& addr) {
    fs::remove_all(root_ + "/sys/bus/pci/devices/" + addr);
  }

  void CreateNode(const std::string& name, const kube::Json& labels = kube::Json::object()) {
    kube::Json node = {
        {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", labels}}}};
    ASSERT_TRUE(client_->Create(kube::resources::kNodes, "", node).ok());
  }
  kube::Json NodeLabels(const std::string& name) {
    auto n = client_->Get(kube::resources::kNodes, "", name);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? (*n)["metadata"].value("labels", kube::Json::object()) : kube::Json();
  }
  // Requests that change objects, since the counters were last reset.
  uint64_t Writes() {
    kube::Json verbs = server_->audit().Counters().value("verbs", kube::Json::object());
    uint64_t n = 0;
    for (const char* v : {"create", "update", "patch", "delete", "deletecollection"}) {
      n += verbs.value(v, uint64_t{0});
    }
    return n;
  }

  static simkube::ApiServer* server_;
  std::string root_;
  std::unique_ptr<kube::Client> client_;
  NodeDiscoveryOptions options_;
};

simkube::ApiServer* NodeDiscoveryAdapterTest::server_ = nullptr;

TEST_F(NodeDiscoveryAdapterTest, ReadsSysfsDevicesInAddressOrder) {
  AddDevice("0000:18:00.0", "0x10de", "0x030200");
  AddDevice("0000:03:00.0", "0x1a03", "0x030000");
  ASSERT_TRUE(MakeDirs(root_ + "/sys/bus/pci/devices/0000:ff:00.0").ok());  // no id files: skipped
  AddDevice("0000:fe:00.0", "garbage", "0x030200");                         // unparsable: skipped
  auto devices = ReadPciDevices(root_);
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].address, "0000:03:00.0");
  EXPECT_EQ((*devices)[0].vendor, 0x1a03);
  EXPECT_EQ((*devices)[1].address, "0000:18:00.0");
  EXPECT_EQ((*devices)[1].class_code, 0x030200u);
}

TEST_F(NodeDiscoveryAdapterTest, MissingSysfsNamesTheMount) {
  auto devices = ReadPciDevices(root_ + "/nowhere");
  ASSERT_FALSE(devices.ok());
  EXPECT_NE(devices.status().message().find(root_ + "/nowhere/sys/bus/pci/devices"),
            std::string::npos);
  EXPECT_NE(devices.status().message().find("mount the host's /sys"), std::string::npos);
}

// The simulator's host root for a DGX H100 (its sysfs entries, as
// `gpuop sim host-root` writes them): 8 H100s (3D controllers) beside a BMC
// VGA controller and NICs.
TEST_F(NodeDiscoveryAdapterTest, SimulatedDgxH100HostRoot) {
  auto machine = sim::LoadMachine("dgx-h100", "");
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  auto plan = sim::PlanHostRoot(*machine, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  size_t written = 0;
  for (const sim::HostEntry& e : plan->entries) {
    if (e.type != sim::HostEntryType::kFile || e.path.rfind("/sys/bus/pci/devices/", 0) != 0) {
      continue;
    }
    if (!EndsWith(e.path, "/vendor") && !EndsWith(e.path, "/class")) continue;
    ASSERT_TRUE(MakeDirs(DirName(root_ + e.path)).ok());
    ASSERT_TRUE(WriteFileAtomic(root_ + e.path, e.content).ok());
    ++written;
  }
  ASSERT_GE(written, 2u * 8);  // the sim writes vendor and class for every GPU
  auto devices = ReadPciDevices(root_);
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  size_t nvidia = 0;
  for (const PciDevice& d : *devices) nvidia += d.vendor == kNvidiaVendor;
  EXPECT_EQ(nvidia, 8u);
  EXPECT_EQ(NvidiaPciLabels(*devices), (Labels{{kPlain, "true"}, {k3d, "true"}}));
}

TEST_F(NodeDiscoveryAdapterTest, LabelsOnlyItsOwnNodeAndKeepsForeignLabels) {
  AddDevice("0000:03:00.0", "0x1a03", "0x030000");  // BMC
  AddDevice("0000:18:00.0", "0x10de", "0x030200");
  CreateNode("gpu-1", {{"team", "ml"}, {"feature.node.kubernetes.io/pci-15b3.present", "true"}});
  CreateNode("gpu-2", {{"team", "web"}});

  auto changes = SyncNodeLabels(*client_, options_);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  EXPECT_EQ(changes->size(), 2u);
  EXPECT_EQ(NodeLabels("gpu-1"),
            (kube::Json{{"team", "ml"},
                        {"feature.node.kubernetes.io/pci-15b3.present", "true"},
                        {kPlain, "true"},
                        {k3d, "true"}}));
  EXPECT_EQ(NodeLabels("gpu-2"), (kube::Json{{"team", "web"}}));
}

TEST_F(NodeDiscoveryAdapterTest, NoWriteWhenNothingChanged) {
  AddDevice("0000:18:00.0", "0x10de", "0x030200");
  CreateNode("gpu-1", {{"team", "ml"}});
  ASSERT_TRUE(SyncNodeLabels(*client_, options_).ok());
  server_->audit().ResetCounters();
  for (int i = 0; i < 3; ++i) {
    auto changes = SyncNodeLabels(*client_, options_);
    ASSERT_TRUE(changes.ok()) << changes.status().ToString();
    EXPECT_TRUE(changes->empty());
  }
  EXPECT_EQ(Writes(), 0u);
  EXPECT_EQ(server_->audit().Counters()["verbs"].value("get", 0), 3);  // one read per pass
}

TEST_F(NodeDiscoveryAdapterTest, GpuGoneRemovesOnlyItsLabels) {
  AddDevice("0000:01:00.0", "0x10de", "0x030000");
  AddDevice("0000:18:00.0", "0x10de", "0x030200");
  // nvidia.com/gpu.present is the operator's to turn false; an NFD label of
  // another class stays.
  CreateNode("gpu-1", {{"nvidia.com/gpu.present", "true"},
                       {"feature.node.kubernetes.io/pci-0200_10de.present", "true"}});
  ASSERT_TRUE(SyncNodeLabels(*client_, options_).ok());
  EXPECT_EQ(NodeLabels("gpu-1").value(kVga, ""), "true");

  RemoveDevice("0000:01:00.0");  // the VGA board pulled: its class label goes
  auto changes = SyncNodeLabels(*client_, options_);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  EXPECT_EQ(*changes, (LabelChanges{{kVga, std::nullopt}}));

  RemoveDevice("0000:18:00.0");
  server_->audit().ResetCounters();
  ASSERT_TRUE(SyncNodeLabels(*client_, options_).ok());
  EXPECT_EQ(Writes(), 1u);  // one merge patch
  EXPECT_EQ(NodeLabels("gpu-1"),
            (kube::Json{{"nvidia.com/gpu.present", "true"},
                        {"feature.node.kubernetes.io/pci-0200_10de.present", "true"}}));
}

TEST_F(NodeDiscoveryAdapterTest, CpuNodeIsNeverWritten) {
  AddDevice("0000:03:00.0", "0x1a03", "0x030000");
  CreateNode("gpu-1", {{"team", "ml"}});
  server_->audit().ResetCounters();
  auto changes = SyncNodeLabels(*client_, options_);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  EXPECT_TRUE(changes->empty());
  EXPECT_EQ(Writes(), 0u);
}

TEST_F(NodeDiscoveryAdapterTest, UnknownNodeSaysWhatToSet) {
  AddDevice("0000:18:00.0", "0x10de", "0x030200");
  auto changes = SyncNodeLabels(*client_, options_);
  ASSERT_FALSE(changes.ok());
  EXPECT_EQ(changes.status().code(), StatusCode::kNotFound);
  EXPECT_NE(changes.status().message().find("node gpu-1 not found"), std::string::npos);
  EXPECT_NE(changes.status().message().find("NODE_NAME"), std::string::npos);
}

// The loop: a node registered after it started is labelled on a retry (not
// after the 1 h interval), and a stop request ends it promptly.
TEST_F(NodeDiscoveryAdapterTest, LoopRetriesUntilTheNodeExistsAndStops) {
  AddDevice("0000:18:00.0", "0x10de", "0x030200");
  options_.interval = 1h;
  options_.retry_initial = 10ms;
  std::jthread loop([&](std::stop_token stop) { RunNodeDiscovery(*client_, options_, stop); });
  CreateNode("gpu-1");
  bool labelled = false;
  for (int i = 0; i < 400 && !labelled; ++i) {  // bounded: up to 4 s
    labelled = NodeLabels("gpu-1").value(kPlain, "") == "true";
    if (!labelled) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(labelled);
  auto start = std::chrono::steady_clock::now();
  loop.request_stop();
  loop.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

}  // namespace
}  // namespace gpuop::discovery
