// The DRA driver end to end below gRPC: claims stored in the API emulator
// (validated against the 1.35 resource.k8s.io/v1 schema) and read back through
// the kube client, GPUs from the GPU simulator, the checkpoint and CDI specs in
// temporary directories, time slicing through a recording fake.
#include "dra/driver.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "base/files.h"
#include "dra/claim_cdi.h"
#include "kube/resource.h"
#include "sim/host/host_root.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/temp_dir.h"
#include "tests/unit/dra/prepare_fixtures.h"

namespace gpuop::dra {
namespace {

namespace cdi = toolkit::cdi;
namespace res = kube::resources;
using Json = nlohmann::json;
using testing::Allocated;
using testing::ClaimObject;
using testing::ConfigEntryJson;
using testing::GpuTimeSlicing;
using testing::kNode;
using testing::Result;

constexpr char kNs[] = "team-a";
const kube::Resource kClaims{"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true};

class RecordingTimeSlicer : public TimeSlicer {
 public:
  Status SetTimeSlice(const std::string& gpu_uuid, TimeSliceInterval interval) override {
    calls.emplace_back(gpu_uuid, interval);
    if (fail_next) {
      fail_next = false;
      return Unavailable("nvidia-smi compute-policy: the GPU is busy");
    }
    return Status::Ok();
  }
  std::vector<std::pair<std::string, TimeSliceInterval>> calls;
  bool fail_next = false;
};

// The inode of `path`: WriteFileAtomic gives a rewritten file a new one.
ino_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = gpuop::testing::StartApiEmulator(8);
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
    ASSERT_TRUE(
        api_.client
            ->Create(res::kNamespaces, "",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}})
            .ok());
    plugin_dir_ = dir_.path() + "/plugins/gpu.nvidia.com";
    cdi_root_ = dir_.path() + "/run/cdi";
    boot_id_ = dir_.path() + "/boot_id";
    ASSERT_TRUE(MakeDirs(plugin_dir_).ok());
    ASSERT_TRUE(WriteFileAtomic(boot_id_, "3f1c0f3e-0000-4000-8000-000000000001\n").ok());
  }

  // Boots the simulated machine and opens NVML on it.
  void Boot(const std::string& machine, const std::vector<std::string>& mig_on_gpu0 = {}) {
    ASSERT_TRUE(node_.Boot(machine, "driver-test"));
    if (!mig_on_gpu0.empty()) {
      ASSERT_TRUE(sim::SetMigLayout(node_.store(), 0, true, mig_on_gpu0).ok());
    }
    nvml_ = node_.OpenNvmlOrFail();
    ASSERT_NE(nvml_, nullptr);
    auto gpus = nvml_->Gpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    gpus_ = *gpus;
  }

  std::unique_ptr<Driver> NewDriver() {
    DriverOptions o;
    o.node_name = kNode;
    o.plugin_dir = plugin_dir_;
    o.cdi_root = cdi_root_;
    o.boot_id_path = boot_id_;
    o.cdi = testing::CdiOptions();
    auto devices = [this]() -> gpuop::Result<NodeDevices> {
      ++device_reads_;
      auto gpus = nvml_->Gpus();
      if (!gpus.ok()) return gpus.status();
      return NodeDevices{*gpus, testing::SimCdiInputs(*gpus)};
    };
    return std::make_unique<Driver>(o, ApiClaimFetcher(*api_.client), devices, slicer_);
  }

  // Creates claim `name` and, unless `results` is empty, allocates it as the
  // scheduler does (status.allocation through the status subresource).
  kubelet::DraClaim CreateClaim(const std::string& name, const std::vector<Json>& results,
                                const std::vector<Json>& config = {},
                                const std::vector<std::string>& requests = {"gpu"}) {
    auto created = api_.client->Create(kClaims, kNs, ClaimObject(kNs, name, requests));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (!created.ok()) return {};
    if (!results.empty()) {
      auto updated = api_.client->UpdateStatus(kClaims, Allocated(*created, results, config));
      EXPECT_TRUE(updated.ok()) << updated.status().ToString();
    }
    return {kNs, (*created)["metadata"]["uid"].get<std::string>(), name};
  }

  std::string Gpu(unsigned i) const { return GpuDeviceName(gpus_[i]); }

  std::set<std::string> CdiFiles() const {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(cdi_root_, ec)) {
      out.insert(e.path().filename().string());
    }
    return out;
  }

  cdi::Spec ReadSpec(const std::string& uid) const {
    auto text = ReadFile(cdi_root_ + "/" + ClaimCdiFileName(uid));
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    if (!text.ok()) return {};
    auto spec = cdi::Parse(*text);
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return {};
    EXPECT_TRUE(cdi::Validate(*spec).ok()) << cdi::Validate(*spec).ToString();
    return *spec;
  }

  Checkpoint LoadCheckpoint() const {
    auto cp = CheckpointFile(plugin_dir_ + "/checkpoint.json", boot_id_).Load();
    EXPECT_TRUE(cp.ok()) << cp.status().ToString();
    return cp.ok() ? *cp : Checkpoint{};
  }

  gpuop::testing::TempDir dir_{"dra-driver"};
  gpuop::testing::SimNode node_;
  std::unique_ptr<nvml::Client> nvml_;
  std::vector<nvml::Gpu> gpus_;
  gpuop::testing::ApiEmulator api_;
  RecordingTimeSlicer slicer_;
  std::atomic<int> device_reads_ = 0;
  std::string plugin_dir_, cdi_root_, boot_id_;
};

TEST_F(DriverTest, PrepareIsIdempotentAcrossRepeatsAndRestarts) {
  Boot("dgx-h100");
  auto claim = CreateClaim("train", {Result("gpu", Gpu(2))});
  auto driver = NewDriver();
  EXPECT_TRUE(driver->Prepare({}).empty());  // the health probe's empty call

  auto first = driver->Prepare({claim});
  ASSERT_EQ(first.size(), 1u);
  const kubelet::DraPrepareResult& r = first[claim.uid];
  ASSERT_EQ(r.error, "");
  const std::string id = "k8s.gpu.nvidia.com/claim=" + claim.uid + "-" + Gpu(2);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0], (kubelet::DraPreparedDevice{{"gpu"}, kNode, Gpu(2), {id}, ""}));

  const std::string spec_path = cdi_root_ + "/k8s.gpu.nvidia.com-claim_" + claim.uid + ".yaml";
  EXPECT_EQ(driver->CdiSpecPath(claim.uid), spec_path);
  cdi::Spec spec = ReadSpec(claim.uid);
  EXPECT_EQ(spec.kind, "k8s.gpu.nvidia.com/claim");
  ASSERT_EQ(spec.devices.size(), 1u);
  EXPECT_EQ(spec.devices[0].name, claim.uid + "-" + Gpu(2));
  ASSERT_EQ(spec.devices[0].edits.device_nodes.size(), 1u);
  EXPECT_EQ(spec.devices[0].edits.device_nodes[0].path,
            "/dev/nvidia" + std::to_string(gpus_[2].minor));
  const ino_t inode = Inode(spec_path);
  ASSERT_NE(inode, 0u);

  // Again: the same answer from the checkpoint, nothing re-read or re-written.
  EXPECT_EQ(driver->Prepare({claim}), first);
  EXPECT_EQ(device_reads_, 1);
  EXPECT_EQ(Inode(spec_path), inode);

  // A restarted plugin answers the same from the checkpoint it left.
  driver = NewDriver();
  EXPECT_EQ(driver->Prepare({claim}), first);
  EXPECT_EQ(device_reads_, 1);
  EXPECT_EQ(Inode(spec_path), inode);
  EXPECT_EQ(LoadCheckpoint().claims.at(claim.uid).state, PrepareState::kCompleted);
  EXPECT_TRUE(slicer_.calls.empty());
}

TEST_F(DriverTest, UnprepareRemovesExactlyTheClaimsCdiFile) {
  Boot("dgx-h100");
  auto a = CreateClaim("a", {Result("gpu", Gpu(0))});
  auto b = CreateClaim("b", {Result("gpu", Gpu(1))});
  auto driver = NewDriver();
  auto prepared = driver->Prepare({a, b});
  ASSERT_EQ(prepared[a.uid].error, "");
  ASSERT_EQ(prepared[b.uid].error, "");
  EXPECT_EQ(CdiFiles(), (std::set<std::string>{ClaimCdiFileName(a.uid), ClaimCdiFileName(b.uid)}));

  auto un = driver->Unprepare({a});
  EXPECT_EQ(un, (std::map<std::string, std::string>{{a.uid, ""}}));
  EXPECT_EQ(CdiFiles(), std::set<std::string>{ClaimCdiFileName(b.uid)});
  Checkpoint cp = LoadCheckpoint();
  EXPECT_FALSE(cp.claims.count(a.uid));
  EXPECT_TRUE(cp.claims.count(b.uid));

  // Repeated, or for a claim never prepared here: success, nothing touched.
  un = driver->Unprepare({a, {kNs, "never-seen", "ghost"}});
  EXPECT_EQ(un, (std::map<std::string, std::string>{{a.uid, ""}, {"never-seen", ""}}));
  EXPECT_EQ(CdiFiles(), std::set<std::string>{ClaimCdiFileName(b.uid)});
  // After a restart too.
  EXPECT_EQ(NewDriver()->Unprepare({b})[b.uid], "");
  EXPECT_TRUE(CdiFiles().empty());
  EXPECT_TRUE(LoadCheckpoint().claims.empty());
}

TEST_F(DriverTest, BadClaimsFailAlone) {
  Boot("dgx-h100");
  auto good = CreateClaim("good", {Result("gpu", Gpu(0))});
  auto unallocated = CreateClaim("pending", {});
  const kubelet::DraClaim replaced{kNs, "0b7c0000-0000-4000-8000-00000000dead", "good"};
  const kubelet::DraClaim missing{kNs, "0b7c0000-0000-4000-8000-00000000beef", "gone"};
  auto other_node = CreateClaim("elsewhere", {Result("gpu", "gpu-0", kDriverName, "node-b")});
  auto driver = NewDriver();
  auto out = driver->Prepare({good, unallocated, replaced, missing, other_node});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[good.uid].error, "");
  EXPECT_EQ(out[good.uid].devices.size(), 1u);
  EXPECT_NE(out[unallocated.uid].error.find("claim team-a/pending is not allocated"),
            std::string::npos)
      << out[unallocated.uid].error;
  EXPECT_NE(out[replaced.uid].error.find("claim team-a/good was replaced: UID " + good.uid),
            std::string::npos)
      << out[replaced.uid].error;
  EXPECT_NE(out[missing.uid].error.find("reading claim team-a/gone"), std::string::npos)
      << out[missing.uid].error;
  EXPECT_NE(out[other_node.uid].error.find("no device of driver gpu.nvidia.com in pool node-a"),
            std::string::npos)
      << out[other_node.uid].error;
  EXPECT_EQ(CdiFiles(), std::set<std::string>{ClaimCdiFileName(good.uid)});
  EXPECT_EQ(LoadCheckpoint().claims.size(), 1u);
}

TEST_F(DriverTest, AnotherClaimsDeviceIsRefused) {
  Boot("dgx-h100");
  auto first = CreateClaim("first", {Result("gpu", Gpu(4))});
  auto second = CreateClaim("second", {Result("gpu", Gpu(4))});
  auto driver = NewDriver();
  ASSERT_EQ(driver->Prepare({first})[first.uid].error, "");
  const std::string error = driver->Prepare({second})[second.uid].error;
  EXPECT_NE(error.find("claim team-a/second: device " + Gpu(4) +
                       " is already allocated to different claim team-a/first (" + first.uid + ")"),
            std::string::npos)
      << error;
  EXPECT_FALSE(LoadCheckpoint().claims.count(second.uid));
  EXPECT_EQ(CdiFiles(), std::set<std::string>{ClaimCdiFileName(first.uid)});

  // Once the first claim is unprepared, the device is free.
  ASSERT_EQ(driver->Unprepare({first})[first.uid], "");
  EXPECT_EQ(driver->Prepare({second})[second.uid].error, "");
}

TEST_F(DriverTest, CorruptCheckpointIsAClearError) {
  Boot("dgx-h100");
  auto a = CreateClaim("a", {Result("gpu", Gpu(0))});
  auto b = CreateClaim("b", {Result("gpu", Gpu(1))});
  auto driver = NewDriver();
  ASSERT_EQ(driver->Prepare({a})[a.uid].error, "");
  const std::string path = driver->CheckpointPath();
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  std::string edited = *text;
  const std::string from = "\"namespace\": \"team-a\"";
  edited.replace(edited.find(from), from.size(), "\"namespace\": \"team-b\"");
  ASSERT_TRUE(WriteFileAtomic(path, edited).ok());

  const std::string error = driver->Prepare({b})[b.uid].error;
  EXPECT_NE(error.find("DRA checkpoint " + path + " is corrupt: checksum"), std::string::npos)
      << error;
  EXPECT_NE(error.find("move it away"), std::string::npos);
  EXPECT_NE(driver->Unprepare({a})[a.uid].find("is corrupt"), std::string::npos);
  EXPECT_EQ(CdiFiles(), std::set<std::string>{ClaimCdiFileName(a.uid)});  // nothing undone

  // Moved away as the message says: the driver starts afresh.
  std::filesystem::rename(path, path + ".bad");
  EXPECT_EQ(driver->Prepare({b})[b.uid].error, "");
}

TEST_F(DriverTest, TimeSlicingIsAppliedAndResetOnUnprepare) {
  Boot("dgx-h100");
  auto claim = CreateClaim("shared", {Result("gpu", Gpu(3))},
                           {ConfigEntryJson("FromClaim", {"gpu"}, GpuTimeSlicing("Long"))});
  auto driver = NewDriver();
  ASSERT_EQ(driver->Prepare({claim})[claim.uid].error, "");
  using Call = std::pair<std::string, TimeSliceInterval>;
  EXPECT_EQ(slicer_.calls, (std::vector<Call>{{gpus_[3].uuid, TimeSliceInterval::kLong}}));
  EXPECT_TRUE(LoadCheckpoint().claims.at(claim.uid).time_slice_applied);
  ASSERT_EQ(driver->Unprepare({claim})[claim.uid], "");
  EXPECT_EQ(slicer_.calls, (std::vector<Call>{{gpus_[3].uuid, TimeSliceInterval::kLong},
                                              {gpus_[3].uuid, TimeSliceInterval::kDefault}}));
}

TEST_F(DriverTest, ClaimLeftStartedIsRolledBack) {
  Boot("dgx-h100");
  auto claim = CreateClaim("shared", {Result("gpu", Gpu(3))},
                           {ConfigEntryJson("FromClass", {}, GpuTimeSlicing("Short"))});
  slicer_.fail_next = true;
  auto driver = NewDriver();
  const std::string error = driver->Prepare({claim})[claim.uid].error;
  EXPECT_NE(error.find("setting the time slice of GPU " + gpus_[3].uuid), std::string::npos)
      << error;
  EXPECT_EQ(LoadCheckpoint().claims.at(claim.uid).state, PrepareState::kStarted);
  EXPECT_TRUE(CdiFiles().empty());

  // The kubelet retries (here after a plugin restart): the half-done
  // preparation is undone first, then done again.
  driver = NewDriver();
  ASSERT_EQ(driver->Prepare({claim})[claim.uid].error, "");
  using Call = std::pair<std::string, TimeSliceInterval>;
  const std::string uuid = gpus_[3].uuid;
  EXPECT_EQ(slicer_.calls, (std::vector<Call>{{uuid, TimeSliceInterval::kShort},
                                              {uuid, TimeSliceInterval::kDefault},
                                              {uuid, TimeSliceInterval::kShort}}));
  EXPECT_EQ(LoadCheckpoint().claims.at(claim.uid).state, PrepareState::kCompleted);
  EXPECT_EQ(CdiFiles(), std::set<std::string>{ClaimCdiFileName(claim.uid)});
}

TEST_F(DriverTest, MpsIsRefusedAndNothingIsTouched) {
  Boot("dgx-h100");
  Json mps = {{"apiVersion", "resource.nvidia.com/v1beta1"},
              {"kind", "GpuConfig"},
              {"sharing", {{"strategy", "MPS"}}}};
  auto claim = CreateClaim("mps", {Result("gpu", Gpu(0))}, {ConfigEntryJson("FromClaim", {}, mps)});
  const std::string error = NewDriver()->Prepare({claim})[claim.uid].error;
  EXPECT_NE(error.find("claim team-a/mps: status.allocation.devices.config[0].opaque.parameters."
                       "sharing: sharing strategy MPS is not supported by gpuop"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("TimeSlicing"), std::string::npos);
  EXPECT_TRUE(LoadCheckpoint().claims.empty());
  EXPECT_TRUE(CdiFiles().empty());
  EXPECT_TRUE(slicer_.calls.empty());
}

TEST_F(DriverTest, MigDeviceOnA100GetsItsCapabilityNodes) {
  Boot("dgx-a100", {"1g.5gb", "1g.5gb"});
  const nvml::Gpu& parent = gpus_[0];
  ASSERT_EQ(parent.mig_devices.size(), 2u);
  const nvml::MigDevice& mig = parent.mig_devices[1];
  const std::string name = MigDeviceName(parent, mig);
  auto claim = CreateClaim("small", {Result("mig", name)}, {}, {"mig"});
  auto out = NewDriver()->Prepare({claim});
  ASSERT_EQ(out[claim.uid].error, "");
  EXPECT_EQ(out[claim.uid].devices[0].cdi_device_ids,
            std::vector<std::string>{"k8s.gpu.nvidia.com/claim=" + claim.uid + "-" + name});
  cdi::Spec spec = ReadSpec(claim.uid);
  ASSERT_EQ(spec.devices.size(), 1u);
  std::vector<std::string> nodes;
  for (const auto& n : spec.devices[0].edits.device_nodes) nodes.push_back(n.path);
  const unsigned minor = static_cast<unsigned>(parent.minor);
  EXPECT_EQ(nodes, (std::vector<std::string>{
                       "/dev/nvidia" + std::to_string(minor),
                       "/dev/nvidia-caps/nvidia-cap" +
                           std::to_string(sim::MigGiCapMinor(minor, mig.gi_id)),
                       "/dev/nvidia-caps/nvidia-cap" +
                           std::to_string(sim::MigCiCapMinor(minor, mig.gi_id, mig.ci_id))}));
  const CheckpointDevice held = LoadCheckpoint().claims.at(claim.uid).devices.at(0);
  EXPECT_EQ(held.type, DeviceType::kMig);
  EXPECT_EQ(held.uuid, parent.uuid);
  EXPECT_EQ(held.mig_uuid, mig.uuid);

  // The whole GPU is not preparable while it is in MIG mode.
  auto whole = CreateClaim("whole", {Result("gpu", GpuDeviceName(parent))});
  EXPECT_NE(NewDriver()->Prepare({whole})[whole.uid].error.find("is not on this node now"),
            std::string::npos);
}

TEST_F(DriverTest, ConcurrentCallsAreSerialised) {
  Boot("dgx-h100");
  std::vector<kubelet::DraClaim> claims;
  for (unsigned i = 0; i < 6; ++i) {
    claims.push_back(CreateClaim("c" + std::to_string(i), {Result("gpu", Gpu(i))}));
  }
  auto driver = NewDriver();
  auto other_process = NewDriver();  // a second plugin instance on the same files
  std::vector<std::string> errors(claims.size());
  {
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < claims.size(); ++i) {
      threads.emplace_back([&, i] {
        Driver& d = i % 2 == 0 ? *driver : *other_process;
        errors[i] = d.Prepare({claims[i]})[claims[i].uid].error;
      });
    }
  }
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(LoadCheckpoint().claims.size(), claims.size());  // no write lost another's entry
  EXPECT_EQ(CdiFiles().size(), claims.size());
}

// The production adapters: NVML through the simulator and the CDI inputs
// discovered on a simulated host root (real device nodes, libraries and
// ld.so.cache), as `gpuop dra-plugin` wires them.
TEST_F(DriverTest, NvmlAndHostRootAdapters) {
  const char* ci = std::getenv("CI");
  const bool in_ci = ci != nullptr && std::string(ci) == "true";
  if (::geteuid() != 0) {
    if (in_ci) FAIL() << "CI runs as root: device nodes must be real";
    GTEST_SKIP() << "needs root for real device nodes (mknod)";
  }
  Boot("dgx-a100", {"1g.5gb", "1g.5gb"});
  auto machine = sim::LoadMachine("dgx-a100", "driver-test");
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  auto plan = sim::PlanHostRoot(*machine, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::string root = dir_.path() + "/host";
  auto written = sim::WriteHostRoot(root, *plan);
  if (!written.ok() && written.status().message().find("ldconfig") != std::string::npos && !in_ci) {
    GTEST_SKIP() << written.status().message();
  }
  ASSERT_TRUE(written.ok()) << written.status().ToString();

  DriverOptions o;
  o.node_name = kNode;
  o.plugin_dir = plugin_dir_;
  o.cdi_root = cdi_root_;
  o.boot_id_path = boot_id_;
  o.cdi.hook_path = "/usr/local/nvidia/toolkit/gpuop";
  o.cdi.driver_root = root;
  o.cdi.dev_root = root;
  Driver driver(o, ApiClaimFetcher(*api_.client),
                NvmlNodeDevices(*nvml_, toolkit::CdiHostRoots{"/", root, root}), slicer_);
  const std::string mig = MigDeviceName(gpus_[0], gpus_[0].mig_devices[0]);
  auto claim = CreateClaim("pair", {Result("gpu", Gpu(1)), Result("mig", mig)}, {}, {"gpu", "mig"});
  auto out = driver.Prepare({claim});
  ASSERT_EQ(out[claim.uid].error, "");
  ASSERT_EQ(out[claim.uid].devices.size(), 2u);
  EXPECT_EQ(out[claim.uid].devices[1].request_names, std::vector<std::string>{"mig"});
  cdi::Spec spec = ReadSpec(claim.uid);
  ASSERT_EQ(spec.devices.size(), 2u);
  for (const cdi::Device& d : spec.devices) {
    for (const cdi::DeviceNode& n : d.edits.device_nodes) {
      EXPECT_EQ(n.host_path, root + n.path);  // the node as the runtime on the host finds it
      EXPECT_TRUE(n.major.has_value());
    }
  }
  EXPECT_FALSE(spec.edits.mounts.empty());  // the driver's libraries, found on the host root
  EXPECT_EQ(driver.Unprepare({claim})[claim.uid], "");
  EXPECT_TRUE(CdiFiles().empty());
}

TEST(NvidiaSmiTimeSlicer, RunsNvidiaSmiAndReportsItsFailure) {
  gpuop::testing::TempDir dir("dra-smi");
  const std::string log = dir.path() + "/calls";
  const std::string smi = dir.path() + "/nvidia-smi";
  ASSERT_TRUE(
      WriteFileAtomic(smi,
                      "#!/bin/sh\necho \"$*\" >> " + log + "\n[ -e " + dir.path() +
                          "/fail ] && { echo 'Insufficient Permissions'; exit 4; }\nexit 0\n",
                      0755)
          .ok());
  NvidiaSmiTimeSlicer slicer(smi);
  ASSERT_TRUE(slicer.SetTimeSlice("GPU-1234", TimeSliceInterval::kMedium).ok());
  auto calls = ReadFile(log);
  ASSERT_TRUE(calls.ok());
  EXPECT_EQ(*calls, "-i GPU-1234 -c DEFAULT\ncompute-policy -i GPU-1234 --set-timeslice 2\n");

  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/fail", "").ok());
  Status s = slicer.SetTimeSlice("GPU-1234", TimeSliceInterval::kDefault);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("-i GPU-1234 -c DEFAULT exited with status 4: Insufficient "
                             "Permissions"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace gpuop::dra
