// FakeKubelet: the kubelet's side of the device plugin API, for tests and the
// simulator. It serves /v1beta1.Registration on <dir>/kubelet.sock and, like
// the kubelet, answers each RegisterRequest at once, then dials
// <dir>/<endpoint> and keeps a ListAndWatch stream open on its own thread,
// remembering the latest device list per resource. Allocate,
// GetPreferredAllocation, GetDevicePluginOptions and PreStartContainer go to
// the registered plugin over real gRPC.
//
// Like the kubelet it rejects a RegisterRequest whose version is not v1beta1,
// whose resource name is not an extended resource name (domain/name, outside
// kubernetes.io), or whose endpoint is not a socket name in <dir>. A resource
// that registers again replaces its previous endpoint. Unlike the kubelet it
// does not check that allocated IDs were advertised, and it never calls the
// plugin on its own beyond ListAndWatch.
//
//   auto kubelet = FakeKubelet::Start("/tmp/x");
//   ... start a plugin that registers nvidia.com/gpu ...
//   auto devs = kubelet->WaitForDevices("nvidia.com/gpu", [](auto& d) { return d.size() == 8; },
//   2s); auto alloc = kubelet->Allocate("nvidia.com/gpu", {"GPU-a"});
//
// Restart() simulates a kubelet restart: like the kubelet, it removes every
// unix socket in <dir> (kubelet.sock and the plugins' sockets; other files
// stay), drops every registration and stream, and creates kubelet.sock again.
// A plugin must then serve anew and re-register, as with a real kubelet.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kubelet/device_plugin_types.h"

namespace gpuop::sim {

// One RegisterRequest, as received (also the rejected ones).
struct KubeletRegistration {
  std::string version;
  std::string endpoint;
  std::string resource_name;
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;
  bool accepted = false;
  std::string error;  // why it was rejected
};

struct PluginOptions {
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;
};

class FakeKubelet {
 public:
  using DevicePredicate = std::function<bool(const std::vector<kubelet::PluginDevice>&)>;

  // Creates `dir` if needed and serves Registration on <dir>/kubelet.sock
  // (a stale socket there is replaced). <dir>/kubelet.sock must stay under
  // 108 bytes: use a short /tmp directory in tests.
  //
  // `on_change`, when given, runs after each change to what the getters
  // below return (a registration, a device list, a stream's end, a restart
  // or stop), on the fake's own threads and outside its locks: it may read
  // the fake, but not Restart or Stop it, and it should return quickly
  // (wake a thread that does the work).
  static Result<std::unique_ptr<FakeKubelet>> Start(std::string dir,
                                                    std::function<void()> on_change = {});

  ~FakeKubelet();  // Stop()
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  const std::string& dir() const { return dir_; }
  std::string socket_path() const;  // <dir>/kubelet.sock

  // Every RegisterRequest since Start or the last Restart, in arrival order.
  std::vector<KubeletRegistration> Registrations() const;
  // Waits until `resource` has an accepted registration; its request, or
  // DeadlineExceeded naming what was registered instead.
  Result<KubeletRegistration> WaitForRegistration(const std::string& resource,
                                                  std::chrono::milliseconds timeout) const;

  // The latest list ListAndWatch delivered for `resource` (empty before one).
  std::vector<kubelet::PluginDevice> Devices(const std::string& resource) const;
  // Lists received for `resource` since it (re)registered.
  uint64_t ListAndWatchUpdates(const std::string& resource) const;
  // True while the ListAndWatch stream of `resource` is open.
  bool StreamOpen(const std::string& resource) const;
  // Waits until a list has arrived for `resource` and `pred` holds for the
  // latest one; returns it, or DeadlineExceeded showing the last list seen.
  Result<std::vector<kubelet::PluginDevice>> WaitForDevices(
      const std::string& resource, const DevicePredicate& pred,
      std::chrono::milliseconds timeout) const;
  // Waits until the ListAndWatch stream of `resource` has ended; its final
  // status (OK when the plugin finished it cleanly), nullopt on timeout.
  std::optional<Status> WaitForStreamEnd(const std::string& resource,
                                         std::chrono::milliseconds timeout) const;

  // Calls to the plugin registered for `resource`. Errors: NotFound when no
  // plugin is registered for it, else the plugin's gRPC error, message kept.
  Result<kubelet::ContainerAllocation> Allocate(const std::string& resource,
                                                const std::vector<std::string>& ids);
  Result<std::vector<kubelet::ContainerAllocation>> AllocateContainers(
      const std::string& resource, const std::vector<std::vector<std::string>>& containers);
  Result<std::vector<std::string>> GetPreferredAllocation(
      const std::string& resource, const std::vector<std::string>& available,
      const std::vector<std::string>& must_include, int size);
  Result<PluginOptions> GetDevicePluginOptions(const std::string& resource);
  Status PreStartContainer(const std::string& resource, const std::vector<std::string>& ids);

  // Removes every socket in dir(), drops every registration and stream,
  // serves kubelet.sock again.
  Status Restart();
  // Stops serving, ends every stream, removes kubelet.sock. Idempotent.
  void Stop();

  // Deadline of each call to a plugin.
  void set_call_timeout(std::chrono::milliseconds t) { call_timeout_.store(t); }

 private:
  class Impl;
  FakeKubelet(std::string dir, std::function<void()> on_change);

  const std::string dir_;
  std::atomic<std::chrono::milliseconds> call_timeout_{std::chrono::milliseconds(5000)};
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuop::sim
