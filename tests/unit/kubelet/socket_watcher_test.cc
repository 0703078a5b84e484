// KubeletSocketWatcher: inotify on the device-plugins directory, driven by
// the fake kubelet's restart and by plain file operations.
#include "kubelet/socket_watcher.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>

#include "kubelet/device_plugin_server.h"
#include "kubelet/registration.h"
#include "kubelet_test_util.h"
#include "sim/kubelet/fake_kubelet.h"

namespace gpuop::kubelet {
namespace {

using std::chrono_literals::operator""s;
using testing::ShortTempDir;

// Counts callback calls; tests wait on it.
class Counter {
 public:
  void Bump() {
    std::lock_guard lock(mu_);
    ++n_;
    cv_.notify_all();
  }
  bool WaitFor(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 5s, [&] { return n_ >= n; });
  }
  int value() {
    std::lock_guard lock(mu_);
    return n_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

TEST(KubeletSocketWatcher, FiresWhenTheKubeletRestarts) {
  ShortTempDir dir;
  auto kubelet = sim::FakeKubelet::Start(dir.path());
  ASSERT_TRUE(kubelet.ok()) << kubelet.status().ToString();
  Counter created;
  auto w = KubeletSocketWatcher::Start(dir.path(), [&] { created.Bump(); });
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE((*w)->Watching());

  ASSERT_TRUE((*kubelet)->Restart().ok());  // delete, then create kubelet.sock
  ASSERT_TRUE(created.WaitFor(1));
  ASSERT_TRUE((*kubelet)->Restart().ok());
  ASSERT_TRUE(created.WaitFor(2));
  EXPECT_EQ((*w)->Creations(), 2u);
}

TEST(KubeletSocketWatcher, OnlyTheKubeletSocketCounts) {
  ShortTempDir dir;
  Counter created;
  auto w = KubeletSocketWatcher::Start(dir.path(), [&] { created.Bump(); });
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  // Events arrive in order: once kubelet.sock's creation has been seen, the
  // plugin socket created before it has been looked at and ignored.
  std::ofstream(dir / "nvidia-gpu.sock") << "";
  std::ofstream(dir / "kubelet.sock.tmp") << "";
  std::rename((dir / "kubelet.sock.tmp").c_str(), (dir / "kubelet.sock").c_str());
  ASSERT_TRUE(created.WaitFor(1));
  std::filesystem::remove(dir / "kubelet.sock");
  std::ofstream(dir / "kubelet.sock") << "";
  ASSERT_TRUE(created.WaitFor(2));
  EXPECT_EQ(created.value(), 2);
}

TEST(KubeletSocketWatcher, MissingDirectoryIsAClearError) {
  auto w = KubeletSocketWatcher::Start("/tmp/gk-no-such-dir", [] {});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("/tmp/gk-no-such-dir"), std::string::npos);
  EXPECT_NE(w.status().message().find("mounted"), std::string::npos);
}

TEST(KubeletSocketWatcher, StopsWhenTheDirectoryGoesAndOnStop) {
  ShortTempDir parent;
  const std::string dir = parent / "dp";
  std::filesystem::create_directory(dir);
  auto w = KubeletSocketWatcher::Start(dir, [] {});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::filesystem::remove(dir);
  EXPECT_TRUE(testing::WaitFor([&] { return !(*w)->Watching(); }));
  (*w)->Stop();
  (*w)->Stop();  // idempotent

  ShortTempDir other;
  auto w2 = KubeletSocketWatcher::Start(other.path(), [] {});
  ASSERT_TRUE(w2.ok());
  (*w2)->Stop();
  EXPECT_FALSE((*w2)->Watching());
}

// The whole re-registration loop: kubelet restart → watcher → the plugin
// serves again and re-registers → the kubelet lists its devices.
TEST(KubeletSocketWatcher, DrivesReRegistrationAfterKubeletRestart) {
  ShortTempDir dir;
  auto kubelet = sim::FakeKubelet::Start(dir.path());
  ASSERT_TRUE(kubelet.ok());
  Counter created;
  auto w = KubeletSocketWatcher::Start(dir.path(), [&] { created.Bump(); });
  ASSERT_TRUE(w.ok());

  auto serve_and_register = [&]() -> std::unique_ptr<DevicePluginServer> {
    auto s = DevicePluginServer::Start(dir / "nvidia-gpu.sock", {});
    if (!s.ok()) return nullptr;
    (*s)->SetDevices({{"GPU-a", true, 0}});
    if (!RegisterWithKubelet((*kubelet)->socket_path(), "nvidia-gpu.sock", "nvidia.com/gpu", true,
                             5s)
             .ok()) {
      return nullptr;
    }
    return std::move(*s);
  };
  auto server = serve_and_register();
  ASSERT_TRUE(server);
  ASSERT_TRUE((*kubelet)->WaitForRegistration("nvidia.com/gpu", 5s).ok());

  ASSERT_TRUE((*kubelet)->Restart().ok());
  ASSERT_TRUE(created.WaitFor(1));
  server.reset();  // the plugin restarts its server, as the NVIDIA plugin does
  server = serve_and_register();
  ASSERT_TRUE(server);
  auto devs = (*kubelet)->WaitForDevices(
      "nvidia.com/gpu", [](const auto& d) { return d.size() == 1; }, 5s);
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
}

}  // namespace
}  // namespace gpuop::kubelet
