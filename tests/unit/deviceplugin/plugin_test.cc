// DevicePlugin end to end: the GPU simulator (libnvml-sim.so through a real
// nvml::Client) and a FakeKubelet speaking the v1beta1 protos over unix
// sockets in a short /tmp directory. Every wait is on a condition with a
// generous deadline; nothing is timed.
#include "deviceplugin/plugin.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <set>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/strings.h"
#include "sim/host/host_root.h"
#include "sim/kubelet/fake_kubelet.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/wait.h"
#include "toolkit/cdi_generate.h"

namespace gpuop::deviceplugin {
namespace {

using namespace std::chrono_literals;

constexpr auto kWait = 20s;  // generous: only a broken plugin takes this long

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

size_t CountHealthy(const std::vector<PluginDevice>& d) {
  return static_cast<size_t>(
      std::count_if(d.begin(), d.end(), [](const PluginDevice& x) { return x.healthy; }));
}

class DpPluginTest : public ::testing::Test {
 protected:
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    client_.reset();
  }

  // The simulator's state and a fake kubelet; GPUs come from `machine`.
  void Machine(const std::string& machine) {
    ASSERT_TRUE(sim_.Boot(machine, dir_));
    auto k = sim::FakeKubelet::Start(dir_ + "/k/device-plugins");
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    kubelet_ = std::move(k).value();
  }

  void OpenNvml() {
    client_ = sim_.OpenNvmlOrFail();
    ASSERT_NE(client_, nullptr);
    auto gpus = client_->Gpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    gpus_ = *gpus;
  }

  DevicePluginOptions Options() {
    DevicePluginOptions o;
    o.kubelet_dir = dir_ + "/k";
    o.host_root = host_root_.empty() ? dir_ : host_root_;
    o.rescan_interval = 100ms;
    o.register_backoff_initial = 20ms;
    o.register_backoff_max = 200ms;
    o.health.probe_interval = 50ms;
    o.health.wait_slice = 20ms;
    o.new_uuid = [] { return std::string("1f2e3d4c-0000-4000-8000-000000000001"); };
    o.clock = clock_;
    return o;
  }

  void StartPlugin(Config config = {}) {
    if (!client_) OpenNvml();
    plugin_ = std::make_unique<DevicePlugin>(*client_, std::move(config), Options());
    Status s = plugin_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::vector<PluginDevice> WaitDevices(const std::string& resource,
                                        const sim::FakeKubelet::DevicePredicate& pred) {
    auto d = kubelet_->WaitForDevices(resource, pred, kWait);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : std::vector<PluginDevice>{};
  }

  std::vector<PluginDevice> WaitCount(const std::string& resource, size_t n) {
    return WaitDevices(resource, [n](const auto& d) { return d.size() == n; });
  }

  static Config ParseOrDie(const std::string& yaml) {
    auto c = ParseConfig(yaml, "test config");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : Config{};
  }

  static Config Shared(int replicas) {
    return ParseOrDie(
        "version: v1\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    resources:\n"
        "    - name: nvidia.com/gpu\n"
        "      replicas: " +
        std::to_string(replicas) + "\n");
  }

  testing::SimNode sim_;
  const std::string dir_ = sim_.dir();  // also the seed: sim::LoadMachine gives the same GPUs
  std::string host_root_;
  std::unique_ptr<sim::FakeKubelet> kubelet_;
  std::unique_ptr<nvml::Client> client_;
  std::vector<nvml::Gpu> gpus_;
  FakeClock fake_clock_;          // outlives plugin_, which may run on it
  const Clock* clock_ = nullptr;  // the plugin's clock; null: the real one
  std::unique_ptr<DevicePlugin> plugin_;
};

TEST(DpPluginSocketTest, NamesFollowUpstream) {
  EXPECT_EQ(PluginSocketName("nvidia.com/gpu"), "nvidia-gpu.sock");
  EXPECT_EQ(PluginSocketName("nvidia.com/mig-1g.10gb"), "nvidia-mig-1g.10gb.sock");
  EXPECT_EQ(PluginSocketName("nvidia.com/gpu.shared"), "nvidia-gpu.shared.sock");
}

TEST_F(DpPluginTest, RegistersGpuAndStreamsTheDeviceList) {
  Machine("dgx-h100");
  StartPlugin();
  auto reg = kubelet_->WaitForRegistration("nvidia.com/gpu", kWait);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->version, "v1beta1");
  EXPECT_EQ(reg->endpoint, "nvidia-gpu.sock");
  EXPECT_TRUE(reg->get_preferred_allocation_available);

  auto devices = WaitCount("nvidia.com/gpu", 8);
  ASSERT_EQ(devices.size(), 8u);
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].id, gpus_[i].uuid);
    EXPECT_TRUE(devices[i].healthy);
    EXPECT_EQ(devices[i].numa_node, gpus_[i].numa_node);
  }
  auto options = kubelet_->GetDevicePluginOptions("nvidia.com/gpu");
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->get_preferred_allocation_available);

  // Liveness, and the status the command logs.
  // Resources() has no waiter; the kubelet saw it already
  testing::WaitFor([&] { return plugin_->Resources().at(0).registered; });
  auto rs = plugin_->Resources();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].name, "nvidia.com/gpu");
  EXPECT_EQ(rs[0].devices, 8u);
  EXPECT_TRUE(rs[0].serving);
  EXPECT_TRUE(rs[0].registered);
  EXPECT_TRUE(plugin_->Healthy()) << plugin_->CheckHealth().ToString();

  // Stop removes the socket.
  const std::string socket = dir_ + "/k/device-plugins/nvidia-gpu.sock";
  EXPECT_TRUE(PathExists(socket));
  plugin_->Stop();
  EXPECT_FALSE(PathExists(socket));
  EXPECT_FALSE(plugin_->Healthy());
}

TEST_F(DpPluginTest, AllocateEnvvarAndVolumeMounts) {
  Machine("dgx-a100");
  Config c;
  c.device_list = *ParseDeviceListStrategy("envvar,volume-mounts");
  c.id_strategy = DeviceIdStrategy::kIndex;
  StartPlugin(c);
  WaitCount("nvidia.com/gpu", 8);
  auto a = kubelet_->Allocate("nvidia.com/gpu", {gpus_[3].uuid, gpus_[1].uuid});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // volume-mounts wins the variable (upstream order); the mounts name indexes.
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  std::set<std::string> mounts;
  for (const auto& m : a->mounts) {
    EXPECT_EQ(m.host_path, "/dev/null");
    mounts.insert(m.container_path);
  }
  EXPECT_EQ(mounts, (std::set<std::string>{"/var/run/nvidia-container-devices/1",
                                           "/var/run/nvidia-container-devices/3"}));
  EXPECT_TRUE(a->cdi_devices.empty());
  EXPECT_TRUE(a->annotations.empty());

  // envvar alone, by UUID, through a Reload.
  Config e;
  ASSERT_TRUE(plugin_->Reload(e).ok());
  a = kubelet_->Allocate("nvidia.com/gpu", {gpus_[2].uuid});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), gpus_[2].uuid);
  EXPECT_TRUE(a->mounts.empty());
}

TEST_F(DpPluginTest, UnknownDeviceIdIsAnError) {
  Machine("dgx-a100");
  StartPlugin();
  WaitCount("nvidia.com/gpu", 8);
  auto a = kubelet_->Allocate("nvidia.com/gpu", {gpus_[0].uuid, "GPU-not-here"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("GPU-not-here"), std::string::npos) << a.status().ToString();
  auto p =
      kubelet_->GetPreferredAllocation("nvidia.com/gpu", {"GPU-not-here", gpus_[0].uuid}, {}, 1);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("GPU-not-here"), std::string::npos);
}

// The CDI names Allocate hands out resolve in the spec gpuop's toolkit
// writes for the same host (whole GPUs and MIG devices), and the device
// specs name nodes that exist there.
TEST_F(DpPluginTest, CdiStrategiesNameDevicesOfTheToolkitSpec) {
  Machine("dgx-h100");
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 0, true, {"1g.10gb", "2g.20gb"}).ok());
  host_root_ = dir_ + "/root";
  auto machine = sim::LoadMachine("dgx-h100", dir_);
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  auto plan = sim::PlanHostRoot(*machine, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto written = sim::WriteHostRoot(host_root_, *plan);
  if (!written.ok() && written.status().message().find("ldconfig") != std::string::npos &&
      !InCi()) {
    GTEST_SKIP() << written.status().message();
  }
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  OpenNvml();

  toolkit::CdiGenerateOptions go;
  go.host_root = host_root_;
  go.hook_path = "/usr/local/nvidia/toolkit/gpuop";
  auto spec = toolkit::GenerateCdiSpec(*client_, go);
  if (!spec.ok() && ::geteuid() != 0 && !InCi()) GTEST_SKIP() << spec.status().ToString();
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  std::set<std::string> names;
  for (const auto& d : spec->devices) names.insert(spec->kind + "=" + d.name);

  Config c;
  c.mig_strategy = MigStrategy::kMixed;
  c.device_list = *ParseDeviceListStrategy("cdi-annotations,cdi-cri");
  c.pass_device_specs = true;
  StartPlugin(c);
  WaitCount("nvidia.com/gpu", 7);
  auto migs = WaitCount("nvidia.com/mig-1g.10gb", 1);
  ASSERT_EQ(migs.size(), 1u);

  auto a = kubelet_->Allocate("nvidia.com/gpu", {gpus_[1].uuid, gpus_[2].uuid});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // Only CDI strategies: no env, no mounts, no device specs (the runtime's
  // CDI edits carry the nodes).
  EXPECT_TRUE(a->envs.empty());
  EXPECT_TRUE(a->mounts.empty());
  EXPECT_TRUE(a->devices.empty());
  ASSERT_EQ(a->cdi_devices.size(), 2u);
  for (const auto& n : a->cdi_devices) EXPECT_TRUE(names.count(n)) << n << " not in the spec";
  ASSERT_EQ(a->annotations.size(), 1u);
  const auto& [key, value] = *a->annotations.begin();
  EXPECT_EQ(key, "cdi.k8s.io/nvidia-device-plugin_1f2e3d4c-0000-4000-8000-000000000001");
  for (const auto& n : Split(value, ',')) EXPECT_TRUE(names.count(n)) << n;

  // With envvar too, device specs: the GPUs' nodes and the control nodes
  // present on the host.
  c.device_list = *ParseDeviceListStrategy("envvar,cdi-cri");
  ASSERT_TRUE(plugin_->Reload(c).ok());
  a = kubelet_->Allocate("nvidia.com/gpu", {gpus_[1].uuid, gpus_[2].uuid});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), gpus_[1].uuid + "," + gpus_[2].uuid);
  std::set<std::string> specs;
  for (const auto& d : a->devices) specs.insert(d.host_path);
  EXPECT_TRUE(specs.count("/dev/nvidiactl"));
  EXPECT_TRUE(specs.count("/dev/nvidia" + std::to_string(gpus_[1].minor)));
  for (const auto& s : specs) EXPECT_TRUE(PathExists(host_root_ + s)) << s;

  auto m = kubelet_->Allocate("nvidia.com/mig-1g.10gb", {migs[0].id});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->cdi_devices.size(), 1u);
  EXPECT_EQ(m->cdi_devices[0], "nvidia.com/gpu=" + migs[0].id);
  EXPECT_TRUE(names.count(m->cdi_devices[0])) << m->cdi_devices[0];
  size_t caps = 0;
  for (const auto& d : m->devices) {
    if (StartsWith(d.host_path, "/dev/nvidia-caps/nvidia-cap")) ++caps;
    EXPECT_TRUE(PathExists(host_root_ + d.host_path)) << d.host_path;
  }
  EXPECT_EQ(caps, 2u);  // the GI and the CI
}

TEST_F(DpPluginTest, PreferredAllocationPicksAnNvLinkPair) {
  Machine("h100-nvl-8");
  StartPlugin();
  WaitCount("nvidia.com/gpu", 8);
  // GPUs 1, 2, 3 and 5 free: only 2 and 3 share an NVLink bridge.
  auto p = kubelet_->GetPreferredAllocation(
      "nvidia.com/gpu", {gpus_[1].uuid, gpus_[2].uuid, gpus_[3].uuid, gpus_[5].uuid}, {}, 2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, (std::vector<std::string>{gpus_[2].uuid, gpus_[3].uuid}));
  // With GPU 4 required, its bridge partner 5 joins it.
  p = kubelet_->GetPreferredAllocation("nvidia.com/gpu",
                                       {gpus_[0].uuid, gpus_[4].uuid, gpus_[5].uuid, gpus_[6].uuid},
                                       {gpus_[4].uuid}, 2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, (std::vector<std::string>{gpus_[4].uuid, gpus_[5].uuid}));
}

TEST_F(DpPluginTest, SharingWithFourReplicas) {
  Machine("dgx-a100");
  StartPlugin(Shared(4));
  auto devices = WaitCount("nvidia.com/gpu", 32);
  ASSERT_EQ(devices.size(), 32u);
  EXPECT_EQ(devices[0].id, gpus_[0].uuid + "::0");
  EXPECT_EQ(devices[3].id, gpus_[0].uuid + "::3");
  auto a = kubelet_->Allocate("nvidia.com/gpu", {gpus_[5].uuid + "::2"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), gpus_[5].uuid);
  // Distributed: two replicas go to two different GPUs.
  std::vector<std::string> available;
  for (const auto& d : devices) available.push_back(d.id);
  auto p = kubelet_->GetPreferredAllocation("nvidia.com/gpu", available, {}, 2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_NE((*p)[0].substr(0, (*p)[0].find("::")), (*p)[1].substr(0, (*p)[1].find("::")));
}

TEST_F(DpPluginTest, MixedMigOnH100s) {
  Machine("dgx-h100");
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 0, true, {"1g.10gb", "1g.10gb", "2g.20gb"}).ok());
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 1, true, {"3g.40gb"}).ok());
  Config c;
  c.mig_strategy = MigStrategy::kMixed;
  StartPlugin(c);
  for (const char* r : {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb",
                        "nvidia.com/mig-3g.40gb"}) {
    auto reg = kubelet_->WaitForRegistration(r, kWait);
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    EXPECT_EQ(reg->endpoint, PluginSocketName(r));
  }
  auto gpus = WaitCount("nvidia.com/gpu", 6);
  for (const auto& d : gpus) EXPECT_TRUE(StartsWith(d.id, "GPU-")) << d.id;
  auto small = WaitCount("nvidia.com/mig-1g.10gb", 2);
  for (const auto& d : small) EXPECT_TRUE(StartsWith(d.id, "MIG-")) << d.id;
  WaitCount("nvidia.com/mig-2g.20gb", 1);
  auto big = WaitCount("nvidia.com/mig-3g.40gb", 1);
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].id, gpus_[1].mig_devices.at(0).uuid);
  auto a = kubelet_->Allocate("nvidia.com/mig-3g.40gb", {big[0].id});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), big[0].id);
  // A MIG device of another resource is unknown here.
  EXPECT_FALSE(kubelet_->Allocate("nvidia.com/mig-3g.40gb", {small[0].id}).ok());
}

TEST_F(DpPluginTest, XidMakesTheDeviceUnhealthyAndAResetBringsItBack) {
  Machine("dgx-a100");
  StartPlugin();
  WaitCount("nvidia.com/gpu", 8);
  const std::string uuid = gpus_[2].uuid;
  auto health_of = [&uuid](bool healthy) {
    return [&uuid, healthy](const std::vector<PluginDevice>& d) {
      for (const auto& x : d) {
        if (x.id == uuid) return x.healthy == healthy;
      }
      return false;
    };
  };
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 2, 48, std::nullopt, std::nullopt).ok());
  auto after = WaitDevices("nvidia.com/gpu", health_of(false));
  EXPECT_EQ(CountHealthy(after), 7u);  // only GPU 2
  // An ignored (application) XID on another GPU changes nothing.
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 4, 13, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(sim::ResetGpu(sim_.store(), 2).ok());
  after = WaitDevices("nvidia.com/gpu", health_of(true));
  EXPECT_EQ(CountHealthy(after), 8u);
  EXPECT_GE(plugin_->Stats().health_changes, 2u);
}

TEST_F(DpPluginTest, SharedReplicasFollowTheirGpusHealth) {
  Machine("dgx-a100");
  StartPlugin(Shared(2));
  WaitCount("nvidia.com/gpu", 16);
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 6, 79, std::nullopt, std::nullopt).ok());
  auto after = WaitDevices("nvidia.com/gpu", [](const auto& d) { return CountHealthy(d) == 14; });
  for (const auto& d : after) {
    EXPECT_EQ(d.healthy, !StartsWith(d.id, gpus_[6].uuid)) << d.id;
  }
}

// Faults whose only way back is a driver reload: XID 64 (driver-reload class;
// the simulator posts a reboot action for it) and XID 32 (reset class, with no
// action posted, so no probe sees evidence until the reload resets every GPU).
// The driver comes back at another version, as a driver container loads it.
TEST_F(DpPluginTest, FaultsClearAfterTheDriverIsReloaded) {
  Machine("dgx-a100");
  StartPlugin();
  WaitCount("nvidia.com/gpu", 8);
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 1, 64, std::nullopt, std::nullopt).ok());
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 3, 32, std::nullopt, std::nullopt).ok());
  auto faulted = WaitDevices("nvidia.com/gpu", [](const auto& d) { return CountHealthy(d) == 6; });
  for (const auto& d : faulted) {
    EXPECT_EQ(d.healthy, d.id != gpus_[1].uuid && d.id != gpus_[3].uuid) << d.id;
  }

  const std::string next =
      sim_.store().machine().driver_version == "580.95.05" ? "575.64.05" : "580.95.05";
  ASSERT_TRUE(sim::SetDriverLoaded(sim_.store(), false).ok());
  ASSERT_TRUE(sim::LoadDriver(sim_.store(), next).ok());
  auto after = WaitDevices("nvidia.com/gpu", [](const auto& d) { return CountHealthy(d) == 8; });
  EXPECT_EQ(CountHealthy(after), 8u);
}

TEST_F(DpPluginTest, KubeletRestartRegistersAgain) {
  Machine("dgx-a100");
  StartPlugin();
  ASSERT_TRUE(kubelet_->WaitForRegistration("nvidia.com/gpu", kWait).ok());
  WaitCount("nvidia.com/gpu", 8);
  ASSERT_TRUE(kubelet_->Restart().ok());
  auto reg = kubelet_->WaitForRegistration("nvidia.com/gpu", kWait);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  auto devices = WaitCount("nvidia.com/gpu", 8);
  EXPECT_EQ(devices.size(), 8u);
  auto a = kubelet_->Allocate("nvidia.com/gpu", {gpus_[0].uuid});
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_GE(plugin_->Stats().kubelet_restarts, 1u);
  EXPECT_TRUE(plugin_->Healthy()) << plugin_->CheckHealth().ToString();
}

TEST_F(DpPluginTest, KubeletStartingLateIsRegisteredWith) {
  Machine("dgx-a100");
  kubelet_->Stop();  // the directory stays; kubelet.sock is gone
  StartPlugin();
  EXPECT_TRUE(plugin_->Healthy());  // serving without a kubelet is fine
  auto k = sim::FakeKubelet::Start(dir_ + "/k/device-plugins");
  ASSERT_TRUE(k.ok());
  kubelet_ = std::move(k).value();
  ASSERT_TRUE(kubelet_->WaitForRegistration("nvidia.com/gpu", kWait).ok());
  WaitCount("nvidia.com/gpu", 8);
}

// A kubelet.sock that accepts but never answers (a kubelet hung or gone
// without removing its socket) must not hold up a stop for the registration
// deadline.
TEST_F(DpPluginTest, StopCutsShortARegistrationWithAStaleKubeletSocket) {
  Machine("dgx-a100");
  kubelet_->Stop();
  const std::string stale = dir_ + "/k/device-plugins/kubelet.sock";
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(stale.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, stale.c_str(), stale.size());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);

  OpenNvml();
  DevicePluginOptions o = Options();
  o.register_timeout = 3 * kWait;  // longer than the test waits for Stop
  plugin_ = std::make_unique<DevicePlugin>(*client_, Config{}, o);
  ASSERT_TRUE(plugin_->Start().ok());
  // The plugin connecting means its Register call is waiting on the socket.
  pollfd pfd{.fd = listener, .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&pfd, 1, static_cast<int>(kWait / 1ms)), 1);
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);

  auto stopped = std::async(std::launch::async, [this] { plugin_->Stop(); });
  EXPECT_EQ(stopped.wait_for(kWait), std::future_status::ready);
  stopped.wait();
  EXPECT_EQ(plugin_->Stats().registrations, 0u);
  close(conn);
  close(listener);
}

TEST_F(DpPluginTest, MigLayoutChangeSendsTheNewList) {
  Machine("dgx-h100");
  Config c;
  c.mig_strategy = MigStrategy::kMixed;
  StartPlugin(c);
  WaitCount("nvidia.com/gpu", 8);
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 3, true, {"3g.40gb", "3g.40gb"}).ok());
  auto gpus = WaitCount("nvidia.com/gpu", 7);
  for (const auto& d : gpus) EXPECT_NE(d.id, gpus_[3].uuid);
  ASSERT_TRUE(kubelet_->WaitForRegistration("nvidia.com/mig-3g.40gb", kWait).ok());
  auto migs = WaitCount("nvidia.com/mig-3g.40gb", 2);
  EXPECT_EQ(CountHealthy(migs), 2u);
  EXPECT_GE(plugin_->Stats().layout_changes, 1u);

  // Back to a whole GPU: the MIG resource's server goes, its stream ends.
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 3, false, {}).ok());
  WaitCount("nvidia.com/gpu", 8);
  EXPECT_TRUE(kubelet_->WaitForStreamEnd("nvidia.com/mig-3g.40gb", kWait).has_value());
  // The server removes its socket right after ending the streams.
  const std::string socket = dir_ + "/k/device-plugins/nvidia-mig-3g.40gb.sock";
  EXPECT_TRUE(testing::WaitFor([&] { return !PathExists(socket); })) << socket;
  ASSERT_EQ(plugin_->Resources().size(), 1u);
}

// The rescan runs on the clock: a layout change shows at the next
// rescan_interval of the plugin's clock, not before.
TEST_F(DpPluginTest, RescanFollowsTheClock) {
  Machine("dgx-h100");
  FakeClock& clock = fake_clock_;
  clock_ = &clock;
  Config c;
  c.mig_strategy = MigStrategy::kMixed;
  StartPlugin(c);
  WaitCount("nvidia.com/gpu", 8);
  // Registered and serving: the loop now waits for the rescan deadline.
  ASSERT_TRUE(testing::WaitFor([&] { return clock.waiters() > 0; }));
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 3, true, {"3g.40gb", "3g.40gb"}).ok());
  std::this_thread::sleep_for(300ms);  // real time passes; the plugin's does not
  EXPECT_EQ(kubelet_->Devices("nvidia.com/gpu").size(), 8u);
  EXPECT_EQ(plugin_->Stats().layout_changes, 0u);

  clock.Advance(100ms);  // Options(): rescan_interval
  WaitCount("nvidia.com/gpu", 7);
  EXPECT_TRUE(kubelet_->WaitForRegistration("nvidia.com/mig-3g.40gb", kWait).ok());
  EXPECT_EQ(plugin_->Stats().layout_changes, 1u);
}

TEST_F(DpPluginTest, ReloadChangesReplicasAndABadConfigKeepsTheRunningOne) {
  Machine("dgx-a100");
  StartPlugin(Shared(2));
  WaitCount("nvidia.com/gpu", 16);
  ASSERT_TRUE(plugin_->Reload(Shared(4)).ok());
  WaitCount("nvidia.com/gpu", 32);

  // renameByDefault: the resource becomes nvidia.com/gpu.shared.
  Config renamed = ParseOrDie(
      "version: v1\n"
      "sharing:\n"
      "  timeSlicing:\n"
      "    renameByDefault: true\n"
      "    resources:\n"
      "    - name: nvidia.com/gpu\n"
      "      replicas: 3\n");
  ASSERT_TRUE(plugin_->Reload(renamed).ok());
  ASSERT_TRUE(kubelet_->WaitForRegistration("nvidia.com/gpu.shared", kWait).ok());
  WaitCount("nvidia.com/gpu.shared", 24);
  EXPECT_TRUE(kubelet_->WaitForStreamEnd("nvidia.com/gpu", kWait).has_value());

  // single strategy with MIG on one GPU only cannot be advertised: rejected.
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 0, true, {"1g.5gb"}).ok());
  Config single;
  single.mig_strategy = MigStrategy::kSingle;
  Status s = plugin_->Reload(single);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the running one stays"), std::string::npos) << s.ToString();
  EXPECT_EQ(plugin_->config()->sharing.resources.at(0).replicas, 3);
  EXPECT_EQ(plugin_->Stats().reload_errors, 1u);
  EXPECT_EQ(kubelet_->Devices("nvidia.com/gpu.shared").size(), 24u);
}

TEST_F(DpPluginTest, StartFailsOnAnInvalidSingleLayout) {
  Machine("dgx-h100");
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 0, true, {"1g.10gb"}).ok());
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 1, true, {"2g.20gb"}).ok());
  OpenNvml();
  Config c;
  c.mig_strategy = MigStrategy::kSingle;
  DevicePlugin plugin(*client_, c, Options());
  Status s = plugin.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(plugin.Resources().empty());
  EXPECT_EQ(std::filesystem::directory_iterator(dir_ + "/k/device-plugins") ==
                std::filesystem::directory_iterator(),
            false);  // kubelet.sock only
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/k/device-plugins")) {
    EXPECT_EQ(e.path().filename(), "kubelet.sock");
  }
}

TEST_F(DpPluginTest, MissingDevicePluginDirIsAClearError) {
  Machine("dgx-a100");
  OpenNvml();
  DevicePluginOptions o = Options();
  o.kubelet_dir = dir_ + "/nowhere";
  DevicePlugin plugin(*client_, Config{}, o);
  Status s = plugin.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir_ + "/nowhere"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace gpuop::deviceplugin
