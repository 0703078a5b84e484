// DevicePluginServer: serves /v1beta1.DevicePlugin (the kubelet device plugin
// API) for one resource on a unix socket, e.g.
// /var/lib/kubelet/device-plugins/nvidia-gpu.sock. It is the gRPC adapter
// only: what to advertise and how to allocate come from the caller (the
// device plugin's pure cores) as plain values and callbacks.
//
//   auto server = DevicePluginServer::Start(dir + "/nvidia-gpu.sock", callbacks);
//   server->SetDevices(devices);           // before registering: the first list
//   RegisterWithKubelet(dir + "/kubelet.sock", "nvidia-gpu.sock", "nvidia.com/gpu", true, 5s);
//   ...
//   server->SetDevices(devices_with_one_unhealthy);   // pushed to the kubelet at once
//
// ListAndWatch streams send the current list first, then the full list again
// on every SetDevices (event-driven: no polling). A callback error reaches the
// kubelet as a gRPC error carrying the message, never as an empty success.
// PreStartContainer is a no-op.
//
// Thread-safety: every method may be called from any thread. Callbacks run on
// gRPC's threads, possibly concurrently; they must not call Stop().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kubelet/device_plugin_types.h"

namespace gpuop::kubelet {

struct DevicePluginCallbacks {
  // One AllocateRequest: the device IDs of each container, in request order.
  // Must return exactly one allocation per container (a mismatch is an
  // INTERNAL error to the kubelet). Unset: Allocate answers UNIMPLEMENTED.
  std::function<Result<std::vector<ContainerAllocation>>(
      const std::vector<std::vector<std::string>>& container_device_ids)>
      allocate;
  // One container of a PreferredAllocationRequest. Unset: UNIMPLEMENTED.
  std::function<Result<std::vector<std::string>>(const std::vector<std::string>& available,
                                                 const std::vector<std::string>& must_include,
                                                 int allocation_size)>
      get_preferred_allocation;
};

struct DevicePluginServerOptions {
  // Answered by GetDevicePluginOptions (RegisterRequest.options is the
  // registration's business: see registration.h).
  bool get_preferred_allocation_available = true;
  bool pre_start_required = false;
  // How long Start waits for the socket to answer a call.
  std::chrono::milliseconds start_timeout{5000};
};

// Calls served so far; for liveness checks, metrics and tests.
struct DevicePluginServerStats {
  uint64_t get_options_calls = 0;
  uint64_t list_and_watch_calls = 0;  // streams opened
  uint64_t list_and_watch_open = 0;   // streams open now
  uint64_t list_and_watch_sends = 0;  // device lists written to streams
  uint64_t allocate_calls = 0;
  uint64_t allocate_errors = 0;
  uint64_t preferred_allocation_calls = 0;
  uint64_t preferred_allocation_errors = 0;
  uint64_t pre_start_calls = 0;
};

class DevicePluginServer {
 public:
  // Removes a stale socket file at socket_path, serves, and returns once a
  // GetDevicePluginOptions call over the socket has answered. Errors name the
  // socket: a missing directory, a path too long for a unix socket (107
  // bytes), a bind failure, or no answer within options.start_timeout.
  static Result<std::unique_ptr<DevicePluginServer>> Start(std::string socket_path,
                                                           DevicePluginCallbacks callbacks,
                                                           DevicePluginServerOptions options = {});

  ~DevicePluginServer();  // Stop()
  DevicePluginServer(const DevicePluginServer&) = delete;
  DevicePluginServer& operator=(const DevicePluginServer&) = delete;

  // Replaces the advertised list and pushes it, whole, to every open
  // ListAndWatch stream. Later streams start with it.
  void SetDevices(std::vector<PluginDevice> devices);
  std::vector<PluginDevice> Devices() const;

  // Ends every ListAndWatch stream (status OK, as the NVIDIA plugin does when
  // it stops), shuts the server down (in-flight calls get at most ~200 ms)
  // and removes the socket file if it is still ours. Idempotent.
  void Stop();

  // True from Start until Stop.
  bool Serving() const;
  DevicePluginServerStats Stats() const;
  const std::string& socket_path() const;

 private:
  class Impl;
  explicit DevicePluginServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuop::kubelet
