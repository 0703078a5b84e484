// RegisterWithKubelet against the fake kubelet, and the fake's checks of a
// RegisterRequest (it must refuse what the kubelet refuses).
#include "kubelet/registration.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <stop_token>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "kubelet/device_plugin_server.h"
#include "kubelet_test_util.h"
#include "sim/kubelet/fake_kubelet.h"

namespace gpuop::kubelet {
namespace {

using std::chrono_literals::operator""s;
using testing::ShortTempDir;

class KubeletRegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto k = sim::FakeKubelet::Start(dir_.path());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    kubelet_ = std::move(*k);
  }
  std::unique_ptr<DevicePluginServer> Serve(const std::string& endpoint) {
    auto s = DevicePluginServer::Start(dir_ / endpoint, {});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  ShortTempDir dir_;
  std::unique_ptr<sim::FakeKubelet> kubelet_;
};

TEST_F(KubeletRegistrationTest, RoundTripThroughFakeKubelet) {
  auto server = Serve("nvidia-mig-1g.10gb.sock");
  ASSERT_TRUE(server);
  server->SetDevices({{"MIG-a", true, -1}});
  Status s = RegisterWithKubelet(kubelet_->socket_path(), "nvidia-mig-1g.10gb.sock",
                                 "nvidia.com/mig-1g.10gb", true, 5s);
  ASSERT_TRUE(s.ok()) << s.ToString();

  auto regs = kubelet_->Registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_TRUE(regs[0].accepted) << regs[0].error;
  EXPECT_EQ(regs[0].version, "v1beta1");
  EXPECT_EQ(regs[0].endpoint, "nvidia-mig-1g.10gb.sock");
  EXPECT_EQ(regs[0].resource_name, "nvidia.com/mig-1g.10gb");
  EXPECT_TRUE(regs[0].get_preferred_allocation_available);
  EXPECT_FALSE(regs[0].pre_start_required);

  // The kubelet then dials the endpoint and lists the devices.
  auto devs = kubelet_->WaitForDevices(
      "nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 1; }, 5s);
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  EXPECT_EQ((*devs)[0].id, "MIG-a");
}

TEST_F(KubeletRegistrationTest, MissingKubeletSocketNamesTheFix) {
  ShortTempDir empty;
  Status s =
      RegisterWithKubelet(empty / "kubelet.sock", "nvidia-gpu.sock", "nvidia.com/gpu", true, 5s);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(empty / "kubelet.sock"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is the kubelet running?"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is " + empty.path() + " mounted"), std::string::npos) << s.message();
}

// A kubelet.sock that accepts but never answers (a hung kubelet, or one gone
// without removing its socket): a stop request ends the call at once, with
// gRPC's CANCELLED rather than the deadline.
TEST_F(KubeletRegistrationTest, StopCancelsARegistrationInFlight) {
  ShortTempDir stale_dir;
  const std::string stale = stale_dir / "kubelet.sock";
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(stale.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, stale.c_str(), stale.size());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);

  std::stop_source stop;
  auto call = std::async(std::launch::async, [&] {
    return RegisterWithKubelet(stale, "nvidia-gpu.sock", "nvidia.com/gpu", true, 60s,
                               stop.get_token());
  });
  // The connection arriving means the Register call is waiting on it.
  pollfd pfd{.fd = listener, .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&pfd, 1, 20000), 1);
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  stop.request_stop();
  Status s = call.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("CANCELLED"), std::string::npos) << s.message();
  close(conn);
  close(listener);
}

TEST_F(KubeletRegistrationTest, EndpointMustBeABasename) {
  Status s = RegisterWithKubelet(kubelet_->socket_path(), dir_ / "nvidia-gpu.sock",
                                 "nvidia.com/gpu", true, 5s);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(kubelet_->Registrations().empty());
}

TEST_F(KubeletRegistrationTest, KubeletRefusalCarriesItsMessage) {
  auto server = Serve("nvidia-gpu.sock");
  ASSERT_TRUE(server);
  Status s = RegisterWithKubelet(kubelet_->socket_path(), "nvidia-gpu.sock", "gpu", true, 5s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("invalid resource name \"gpu\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("registering gpu"), std::string::npos) << s.message();
  auto regs = kubelet_->Registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_FALSE(regs[0].accepted);
}

TEST_F(KubeletRegistrationTest, FakeKubeletRejectsOtherVersions) {
  auto stub = v1beta1::Registration::NewStub(
      grpc::CreateChannel("unix:" + kubelet_->socket_path(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  v1beta1::RegisterRequest req;
  req.set_version("v1alpha");
  req.set_endpoint("nvidia-gpu.sock");
  req.set_resource_name("nvidia.com/gpu");
  v1beta1::Empty reply;
  grpc::Status s = stub->Register(&ctx, req, &reply);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNKNOWN);  // a plain Go error in the kubelet
  EXPECT_NE(s.error_message().find("\"v1alpha\" is not supported"), std::string::npos)
      << s.error_message();
  auto regs = kubelet_->Registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_FALSE(regs[0].accepted);
  EXPECT_EQ(regs[0].version, "v1alpha");
  EXPECT_FALSE(kubelet_->WaitForRegistration("nvidia.com/gpu", std::chrono::milliseconds(1)).ok());
}

TEST_F(KubeletRegistrationTest, KubeletRestartDropsEverythingUntilThePluginReturns) {
  auto server = Serve("nvidia-gpu.sock");
  ASSERT_TRUE(server);
  server->SetDevices({{"GPU-a", true, -1}});
  ASSERT_TRUE(
      RegisterWithKubelet(kubelet_->socket_path(), "nvidia-gpu.sock", "nvidia.com/gpu", true, 5s)
          .ok());
  ASSERT_TRUE(kubelet_
                  ->WaitForDevices(
                      "nvidia.com/gpu", [](const auto& d) { return !d.empty(); }, 5s)
                  .ok());

  ASSERT_TRUE(kubelet_->Restart().ok());
  EXPECT_TRUE(kubelet_->Registrations().empty());
  EXPECT_TRUE(kubelet_->Devices("nvidia.com/gpu").empty());
  // Like the kubelet, the restart removed the plugin's socket too.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "nvidia-gpu.sock"));
  EXPECT_TRUE(std::filesystem::exists(kubelet_->socket_path()));

  // The plugin starts over: serve again, register again.
  server = Serve("nvidia-gpu.sock");
  ASSERT_TRUE(server);
  server->SetDevices({{"GPU-a", true, -1}, {"GPU-b", true, -1}});
  ASSERT_TRUE(
      RegisterWithKubelet(kubelet_->socket_path(), "nvidia-gpu.sock", "nvidia.com/gpu", true, 5s)
          .ok());
  auto devs = kubelet_->WaitForDevices(
      "nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 5s);
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
}

TEST_F(KubeletRegistrationTest, CallsToAnUnregisteredResourceAreNotFound) {
  auto got = kubelet_->Allocate("nvidia.com/gpu", {"GPU-a"});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  auto devs = kubelet_->WaitForDevices(
      "nvidia.com/gpu", [](const auto&) { return true; }, std::chrono::milliseconds(1));
  ASSERT_FALSE(devs.ok());
  EXPECT_NE(devs.status().message().find("not registered"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::kubelet
