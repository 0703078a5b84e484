// DevicePluginServer against the fake kubelet: every call crosses a real
// unix socket with real gRPC, and every check is made on the kubelet's side.
#include "kubelet/device_plugin_server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <mutex>

#include "kubelet/registration.h"
#include "kubelet_test_util.h"
#include "sim/kubelet/fake_kubelet.h"

namespace gpuop::kubelet {
namespace {

using kubelet::ContainerAllocation;
using kubelet::PluginDevice;
using std::chrono_literals::operator""s;
using testing::ShortTempDir;
using testing::WaitFor;

constexpr const char* kResource = "nvidia.com/gpu";
constexpr const char* kEndpoint = "nvidia-gpu.sock";
const std::string kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";
const std::string kGpu1 = "GPU-11111111-1111-1111-1111-111111111111";

bool IsSocket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

TEST(KubeletDevicePluginServer, StartServesAndStopRemovesSocket) {
  ShortTempDir dir;
  auto server = DevicePluginServer::Start(dir / kEndpoint, {});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE((*server)->Serving());
  EXPECT_TRUE(IsSocket(dir / kEndpoint));
  (*server)->Stop();
  EXPECT_FALSE((*server)->Serving());
  EXPECT_FALSE(std::filesystem::exists(dir / kEndpoint));
  (*server)->Stop();  // idempotent
}

TEST(KubeletDevicePluginServer, StartReplacesStaleSocketFile) {
  ShortTempDir dir;
  std::ofstream(dir / kEndpoint) << "left over by a crashed plugin";
  auto server = DevicePluginServer::Start(dir / kEndpoint, {});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE(IsSocket(dir / kEndpoint));
}

TEST(KubeletDevicePluginServer, StartErrorsNameTheProblem) {
  auto missing = DevicePluginServer::Start("/tmp/gk-does-not-exist/nvidia-gpu.sock", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/tmp/gk-does-not-exist"), std::string::npos);
  EXPECT_NE(missing.status().message().find("mounted"), std::string::npos);

  auto too_long = DevicePluginServer::Start("/tmp/" + std::string(120, 'x') + ".sock", {});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("107"), std::string::npos);
}

TEST(KubeletDevicePluginServer, DestructorRemovesSocket) {
  ShortTempDir dir;
  {
    auto server = DevicePluginServer::Start(dir / kEndpoint, {});
    ASSERT_TRUE(server.ok());
  }
  EXPECT_FALSE(std::filesystem::exists(dir / kEndpoint));
}

// The restart order of a plugin whose kubelet restarted: the new server
// starts, then the old one stops. The old one must not take the new socket
// with it (gRPC unlinks the path it bound when it shuts down).
TEST(KubeletDevicePluginServer, OldServerStoppingKeepsItsSuccessorsSocket) {
  ShortTempDir dir;
  auto old_server = DevicePluginServer::Start(dir / kEndpoint, {});
  ASSERT_TRUE(old_server.ok());
  auto new_server = DevicePluginServer::Start(dir / kEndpoint, {});
  ASSERT_TRUE(new_server.ok()) << new_server.status().ToString();
  old_server->reset();
  EXPECT_TRUE(IsSocket(dir / kEndpoint));
  // Nothing else is left in the directory (no private bind names).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
  (*new_server)->Stop();
  EXPECT_FALSE(std::filesystem::exists(dir / kEndpoint));
}

// A plugin registered with a fake kubelet, with recording callbacks.
class KubeletDevicePluginServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto k = sim::FakeKubelet::Start(dir_.path());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    kubelet_ = std::move(*k);
  }

  void StartPlugin(DevicePluginCallbacks callbacks, DevicePluginServerOptions options = {},
                   std::vector<PluginDevice> devices = {{kGpu0, true, 0}, {kGpu1, true, 1}}) {
    auto s = DevicePluginServer::Start(dir_ / kEndpoint, std::move(callbacks), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    server_->SetDevices(std::move(devices));
    Status r = RegisterWithKubelet(kubelet_->socket_path(), kEndpoint, kResource,
                                   options.get_preferred_allocation_available, 5s);
    ASSERT_TRUE(r.ok()) << r.ToString();
  }

  ShortTempDir dir_;
  std::unique_ptr<sim::FakeKubelet> kubelet_;
  std::unique_ptr<DevicePluginServer> server_;
};

TEST_F(KubeletDevicePluginServerTest, ListAndWatchSendsListThenEveryChange) {
  StartPlugin({});
  auto first = kubelet_->WaitForDevices(
      kResource, [](const auto& d) { return d.size() == 2; }, 5s);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, (std::vector<PluginDevice>{{kGpu0, true, 0}, {kGpu1, true, 1}}));
  const uint64_t updates = kubelet_->ListAndWatchUpdates(kResource);

  // A health event: GPU 1 goes unhealthy; the kubelet sees the full list again.
  server_->SetDevices({{kGpu0, true, 0}, {kGpu1, false, 1}});
  auto second = kubelet_->WaitForDevices(
      kResource, [](const auto& d) { return d.size() == 2 && !d[1].healthy; }, 5s);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE((*second)[0].healthy);
  EXPECT_EQ((*second)[1].id, kGpu1);
  EXPECT_GT(kubelet_->ListAndWatchUpdates(kResource), updates);

  // No topology: none sent, none read back.
  server_->SetDevices({{kGpu0 + "::0", true, -1}});
  auto third = kubelet_->WaitForDevices(
      kResource, [](const auto& d) { return d.size() == 1; }, 5s);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ((*third)[0], (PluginDevice{kGpu0 + "::0", true, -1}));

  const auto stats = server_->Stats();
  EXPECT_EQ(stats.list_and_watch_calls, 1u);
  EXPECT_EQ(stats.list_and_watch_open, 1u);
  EXPECT_GE(stats.list_and_watch_sends, 3u);
}

TEST_F(KubeletDevicePluginServerTest, AllocateCarriesEveryFieldToTheKubelet) {
  std::mutex mu;
  std::vector<std::vector<std::string>> seen;
  DevicePluginCallbacks cb;
  cb.allocate = [&](const std::vector<std::vector<std::string>>& containers)
      -> Result<std::vector<ContainerAllocation>> {
    std::lock_guard lock(mu);
    seen = containers;
    std::vector<ContainerAllocation> out;
    for (const auto& ids : containers) {
      ContainerAllocation a;
      a.envs["NVIDIA_VISIBLE_DEVICES"] = ids.empty() ? "" : ids[0];
      a.envs["CUDA_MPS_PIPE_DIRECTORY"] = "/mps/nvidia.com/gpu/pipe";
      a.mounts = {{"/var/run/nvidia-container-devices/" + kGpu0, "/dev/null", true},
                  {"/dev/shm", "/run/nvidia/mps/shm", false}};
      a.devices = {{"/dev/nvidiactl", "/dev/nvidiactl", "rw"},
                   {"/dev/nvidia0", "/host/dev/nvidia0", "rwm"}};
      a.annotations["cdi.k8s.io/nvidia-device-plugin_abc"] =
          "k8s.device-plugin.nvidia.com/gpu=" + kGpu0;
      a.cdi_devices = {"k8s.device-plugin.nvidia.com/gpu=" + kGpu0, "nvidia.com/gpu=all"};
      out.push_back(std::move(a));
    }
    return out;
  };
  StartPlugin(cb);

  auto got = kubelet_->Allocate(kResource, {kGpu0, kGpu1});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->envs, (std::map<std::string, std::string>{
                           {"NVIDIA_VISIBLE_DEVICES", kGpu0},
                           {"CUDA_MPS_PIPE_DIRECTORY", "/mps/nvidia.com/gpu/pipe"}}));
  EXPECT_EQ(got->mounts, (std::vector<kubelet::Mount>{
                             {"/var/run/nvidia-container-devices/" + kGpu0, "/dev/null", true},
                             {"/dev/shm", "/run/nvidia/mps/shm", false}}));
  EXPECT_EQ(got->devices,
            (std::vector<kubelet::DeviceSpec>{{"/dev/nvidiactl", "/dev/nvidiactl", "rw"},
                                              {"/dev/nvidia0", "/host/dev/nvidia0", "rwm"}}));
  EXPECT_EQ(got->annotations,
            (std::map<std::string, std::string>{{"cdi.k8s.io/nvidia-device-plugin_abc",
                                                 "k8s.device-plugin.nvidia.com/gpu=" + kGpu0}}));
  EXPECT_EQ(got->cdi_devices, (std::vector<std::string>{"k8s.device-plugin.nvidia.com/gpu=" + kGpu0,
                                                        "nvidia.com/gpu=all"}));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(seen, (std::vector<std::vector<std::string>>{{kGpu0, kGpu1}}));
  }

  // Several containers in one request keep their order.
  auto many = kubelet_->AllocateContainers(kResource, {{kGpu1}, {kGpu0}});
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  ASSERT_EQ(many->size(), 2u);
  EXPECT_EQ((*many)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu1);
  EXPECT_EQ((*many)[1].envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu0);
  EXPECT_EQ(server_->Stats().allocate_calls, 2u);
}

TEST_F(KubeletDevicePluginServerTest, AllocateErrorReachesTheKubeletWithItsMessage) {
  DevicePluginCallbacks cb;
  cb.allocate =
      [](const std::vector<std::vector<std::string>>&) -> Result<std::vector<ContainerAllocation>> {
    return InvalidArgument("maximum request size for shared resources is 1");
  };
  StartPlugin(cb);
  auto got = kubelet_->Allocate(kResource, {kGpu0 + "::0", kGpu0 + "::1"});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("maximum request size for shared resources is 1"),
            std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("INVALID_ARGUMENT"), std::string::npos);
  EXPECT_EQ(server_->Stats().allocate_errors, 1u);
}

TEST_F(KubeletDevicePluginServerTest, AllocateWithWrongCountIsAnError) {
  DevicePluginCallbacks cb;
  cb.allocate =
      [](const std::vector<std::vector<std::string>>&) -> Result<std::vector<ContainerAllocation>> {
    return std::vector<ContainerAllocation>{};
  };
  StartPlugin(cb);
  auto got = kubelet_->Allocate(kResource, {kGpu0});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInternal);
  EXPECT_NE(got.status().message().find("0 container allocations for 1"), std::string::npos)
      << got.status().message();
}

TEST_F(KubeletDevicePluginServerTest, MissingCallbacksAreUnimplementedNotEmptySuccess) {
  StartPlugin({});
  auto alloc = kubelet_->Allocate(kResource, {kGpu0});
  ASSERT_FALSE(alloc.ok());
  EXPECT_EQ(alloc.status().code(), StatusCode::kNotSupported);
  auto pref = kubelet_->GetPreferredAllocation(kResource, {kGpu0}, {}, 1);
  ASSERT_FALSE(pref.ok());
  EXPECT_EQ(pref.status().code(), StatusCode::kNotSupported);
}

TEST_F(KubeletDevicePluginServerTest, GetPreferredAllocationRoundTrip) {
  std::mutex mu;
  std::vector<std::string> seen_available, seen_must;
  int seen_size = 0;
  DevicePluginCallbacks cb;
  cb.get_preferred_allocation = [&](const std::vector<std::string>& available,
                                    const std::vector<std::string>& must_include,
                                    int size) -> Result<std::vector<std::string>> {
    std::lock_guard lock(mu);
    seen_available = available;
    seen_must = must_include;
    seen_size = size;
    if (size > static_cast<int>(available.size())) {
      return InvalidArgument("asked for " + std::to_string(size) + " devices, " +
                             std::to_string(available.size()) + " available");
    }
    std::vector<std::string> out = must_include;
    for (const auto& id : available) {
      if (static_cast<int>(out.size()) == size) break;
      if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
    return out;
  };
  StartPlugin(cb);
  auto got = kubelet_->GetPreferredAllocation(kResource, {kGpu0, kGpu1, "GPU-2"}, {kGpu1}, 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<std::string>{kGpu1, kGpu0}));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(seen_available, (std::vector<std::string>{kGpu0, kGpu1, "GPU-2"}));
    EXPECT_EQ(seen_must, (std::vector<std::string>{kGpu1}));
    EXPECT_EQ(seen_size, 2);
  }
  auto bad = kubelet_->GetPreferredAllocation(kResource, {kGpu0}, {}, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("asked for 3 devices, 1 available"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(server_->Stats().preferred_allocation_calls, 2u);
  EXPECT_EQ(server_->Stats().preferred_allocation_errors, 1u);
}

TEST_F(KubeletDevicePluginServerTest, OptionsAndPreStartContainer) {
  DevicePluginServerOptions opts;
  opts.get_preferred_allocation_available = false;
  opts.pre_start_required = true;
  StartPlugin({}, opts);
  auto reg = kubelet_->WaitForRegistration(kResource, 5s);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_FALSE(reg->get_preferred_allocation_available);
  auto o = kubelet_->GetDevicePluginOptions(kResource);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->pre_start_required);
  EXPECT_FALSE(o->get_preferred_allocation_available);
  EXPECT_TRUE(kubelet_->PreStartContainer(kResource, {kGpu0}).ok());
  EXPECT_EQ(server_->Stats().pre_start_calls, 1u);
  EXPECT_EQ(server_->Stats().get_options_calls, 1u);  // Start's own check is not counted
}

TEST_F(KubeletDevicePluginServerTest, StopEndsTheStreamAndRemovesTheSocket) {
  StartPlugin({});
  ASSERT_TRUE(kubelet_
                  ->WaitForDevices(
                      kResource, [](const auto& d) { return !d.empty(); }, 5s)
                  .ok());
  ASSERT_TRUE(kubelet_->StreamOpen(kResource));
  server_->Stop();
  auto end = kubelet_->WaitForStreamEnd(kResource, 5s);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->ok()) << end->ToString();
  EXPECT_FALSE(kubelet_->StreamOpen(kResource));
  EXPECT_FALSE(std::filesystem::exists(dir_ / kEndpoint));
  EXPECT_FALSE(server_->Serving());
  // The kubelet's calls now fail instead of hanging.
  kubelet_->set_call_timeout(std::chrono::milliseconds(500));
  EXPECT_FALSE(kubelet_->Allocate(kResource, {kGpu0}).ok());
}

TEST_F(KubeletDevicePluginServerTest, StreamsOpenedLaterStartWithTheCurrentList) {
  StartPlugin({});
  server_->SetDevices({{kGpu1, false, 1}});
  // The same plugin registers again: the kubelet replaces its stream.
  ASSERT_TRUE(RegisterWithKubelet(kubelet_->socket_path(), kEndpoint, kResource, true, 5s).ok());
  auto got = kubelet_->WaitForDevices(
      kResource, [](const auto& d) { return d.size() == 1 && !d[0].healthy; }, 5s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(server_->Devices(), (std::vector<PluginDevice>{{kGpu1, false, 1}}));
}

// The fake kubelet's change callback (what `gpuop sim kubelet` reports
// from instead of polling): it runs after each registration and each list,
// with the change already visible to the getters.
TEST(FakeKubeletChanges, CallbackFollowsRegistrationsAndLists) {
  ShortTempDir dir;
  std::mutex mu;
  std::vector<uint64_t> seen;  // ListAndWatchUpdates read inside each callback
  sim::FakeKubelet* fake = nullptr;
  auto k = sim::FakeKubelet::Start(dir.path(), [&] {
    std::lock_guard lock(mu);
    if (fake) seen.push_back(fake->ListAndWatchUpdates(kResource));
  });
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  {
    std::lock_guard lock(mu);
    fake = k->get();
  }
  auto server = DevicePluginServer::Start(dir / kEndpoint, {});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->SetDevices({{kGpu0, true, 0}});
  ASSERT_TRUE(RegisterWithKubelet((*k)->socket_path(), kEndpoint, kResource, false, 5s).ok());
  auto count = [&] {
    std::lock_guard lock(mu);
    return seen.size();
  };
  auto last = [&] {
    std::lock_guard lock(mu);
    return seen.empty() ? uint64_t{0} : seen.back();
  };
  // The registration, then the first list.
  EXPECT_TRUE(WaitFor([&] { return count() >= 2 && last() == 1; }));
  (*server)->SetDevices({{kGpu0, false, 0}});
  EXPECT_TRUE(WaitFor([&] { return last() == 2; }));
  EXPECT_EQ((*k)->ListAndWatchUpdates(kResource), 2u);
  const size_t before_stop = count();
  (*k)->Stop();  // a stop is a change too
  EXPECT_GT(count(), before_stop);
  std::lock_guard lock(mu);
  fake = nullptr;
}

}  // namespace
}  // namespace gpuop::kubelet
