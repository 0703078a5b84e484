// The DRA plugin as the kubelet meets it: the kubelet's side of the real
// registration and DRA gRPC protocols (sim/kubelet/dra_kubelet.h) against
// DraPluginServer serving dra::Driver, with claims in the API emulator and
// GPUs from the simulator. The plugin restarts between calls (a new server
// and driver on the same sockets, checkpoint and CDI directory), as a
// DaemonSet pod replaced mid-way does, and every answer stays the same.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/files.h"
#include "dra/claim_cdi.h"
#include "dra/driver.h"
#include "dra/names.h"
#include "kube/resource.h"
#include "kubelet/dra_server.h"
#include "sim/kubelet/dra_kubelet.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/dra/prepare_fixtures.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;
using kube::resources::kResourceClaims;
using testing::Allocated;
using testing::ClaimObject;
using testing::kNode;
using testing::Result;

class NoTimeSlicing : public TimeSlicer {
 public:
  Status SetTimeSlice(const std::string&, TimeSliceInterval) override { return Status::Ok(); }
};

class DraPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = gpuop::testing::StartApiEmulator(8);
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
    ASSERT_TRUE(node_.Boot("dgx-a100", "plugin-test"));
    ASSERT_TRUE(sim::SetMigLayout(node_.store(), 0, true, {"1g.5gb", "1g.5gb"}).ok());
    nvml_ = node_.OpenNvmlOrFail();
    ASSERT_NE(nvml_, nullptr);
    auto gpus = nvml_->Gpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    gpus_ = *gpus;
    registry_ = dir_.path() + "/plugins_registry";
    ASSERT_TRUE(MakeDirs(registry_).ok());
    ASSERT_TRUE(WriteFileAtomic(dir_.path() + "/boot_id", "5e1f-boot\n").ok());
  }

  // A plugin process: driver and server; the kubelet registers it.
  void StartPlugin() {
    server_.reset();
    DriverOptions o;
    o.node_name = kNode;
    o.plugin_dir = dir_.path() + "/plugins/gpu.nvidia.com";
    o.cdi_root = dir_.path() + "/cdi";
    o.boot_id_path = dir_.path() + "/boot_id";
    o.cdi = testing::CdiOptions();
    auto devices = [this]() -> gpuop::Result<NodeDevices> {
      auto gpus = nvml_->Gpus();
      if (!gpus.ok()) return gpus.status();
      return NodeDevices{*gpus, testing::SimCdiInputs(*gpus)};
    };
    driver_ = std::make_unique<Driver>(o, ApiClaimFetcher(*api_.client), devices, slicer_);
    kubelet::DraPluginServerOptions so;
    so.driver_name = kDriverName;
    so.plugin_dir = o.plugin_dir;
    so.registry_dir = registry_;
    auto server = kubelet::DraPluginServer::Start(driver_.get(), so);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    auto kubelet = sim::DraKubeletClient::Register((*server_).registration_socket());
    ASSERT_TRUE(kubelet.ok()) << kubelet.status().ToString();
    kubelet_ = std::move(kubelet).value();
    EXPECT_EQ(kubelet_->registration().version, sim::DraApiVersion::kV1);
    EXPECT_TRUE(server_->Registration().registered);
  }

  kubelet::DraClaim Claim(const std::string& name, const std::vector<Json>& results) {
    auto created = api_.client->Create(kResourceClaims, "default", ClaimObject("default", name));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    auto updated = api_.client->UpdateStatus(kResourceClaims, Allocated(*created, results));
    EXPECT_TRUE(updated.ok()) << updated.status().ToString();
    return {"default", (*created)["metadata"]["uid"].get<std::string>(), name};
  }

  bool SpecExists(const std::string& uid) const {
    return PathExists(dir_.path() + "/cdi/" + ClaimCdiFileName(uid));
  }

  gpuop::testing::TempDir dir_{"dra-plugin"};
  gpuop::testing::SimNode node_;
  std::unique_ptr<nvml::Client> nvml_;
  std::vector<nvml::Gpu> gpus_;
  gpuop::testing::ApiEmulator api_;
  NoTimeSlicing slicer_;
  std::string registry_;
  std::unique_ptr<Driver> driver_;
  std::unique_ptr<kubelet::DraPluginServer> server_;
  std::unique_ptr<sim::DraKubeletClient> kubelet_;
};

TEST_F(DraPluginTest, KubeletPreparesAndUnpreparesIdempotentlyAcrossPluginRestarts) {
  const std::string whole = GpuDeviceName(gpus_[1]);
  const std::string mig = MigDeviceName(gpus_[0], gpus_[0].mig_devices[1]);
  kubelet::DraClaim a = Claim("whole", {Result("gpu", whole)});
  kubelet::DraClaim b = Claim("slice", {Result("gpu", mig)});
  StartPlugin();

  auto first = kubelet_->Prepare({a, b});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ((*first)[a.uid].error, "");
  ASSERT_EQ((*first)[b.uid].error, "");
  EXPECT_EQ((*first)[a.uid].devices,
            (std::vector<kubelet::DraPreparedDevice>{
                {{"gpu"}, kNode, whole, {"k8s.gpu.nvidia.com/claim=" + a.uid + "-" + whole}, ""}}));
  EXPECT_EQ((*first)[b.uid].devices[0].device_name, mig);
  EXPECT_TRUE(SpecExists(a.uid));
  EXPECT_TRUE(SpecExists(b.uid));

  // The plugin pod replaced: the kubelet registers the new one and repeats
  // the call (its checkpoint may not have been written); the answer is equal.
  StartPlugin();
  auto again = kubelet_->Prepare({a, b});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *first);

  // Another claim for a device a prepared claim holds is refused alone.
  kubelet::DraClaim c = Claim("thief", {Result("gpu", whole)});
  auto refused = kubelet_->Prepare({c});
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_NE((*refused)[c.uid].error.find("already allocated to different claim"),
            std::string::npos)
      << (*refused)[c.uid].error;

  auto gone = kubelet_->Unprepare({a});
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ((*gone)[a.uid], "");
  EXPECT_FALSE(SpecExists(a.uid));
  EXPECT_TRUE(SpecExists(b.uid));

  // Restarted again: unpreparing what is gone (a kubelet retry) and what is
  // left both succeed.
  StartPlugin();
  auto rest = kubelet_->Unprepare({a, b});
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ((*rest)[a.uid], "");
  EXPECT_EQ((*rest)[b.uid], "");
  EXPECT_FALSE(SpecExists(b.uid));
  // The device is free again for the claim that was refused.
  auto now = kubelet_->Prepare({c});
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)[c.uid].error, "");
}

}  // namespace
}  // namespace gpuop::dra
