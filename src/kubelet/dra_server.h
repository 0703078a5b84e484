// DraPluginServer: the gRPC side of a DRA kubelet plugin (the kubelet's dra/v1
// and pluginregistration APIs). It serves the DRA service, v1 and v1beta1 on
// one socket, at <plugin_dir>/dra.sock, and only then the kubelet's plugin
// Registration service at <registry_dir>/<driver>-reg.sock, so a kubelet that
// notices the registration socket always finds the DRA socket answering:
//
//   auto server = DraPluginServer::Start(&driver, {.driver_name = "gpu.nvidia.com",
//       .plugin_dir = "/var/lib/kubelet/plugins/gpu.nvidia.com",
//       .registry_dir = "/var/lib/kubelet/plugins_registry"});
//   ... the kubelet calls GetInfo, then NotifyRegistrationStatus ...
//   server->Registration().registered   // for health checks
//   server->Stop();   // removes both sockets: the kubelet deregisters the driver
//
// PluginInfo says type "DRAPlugin", name = the driver, endpoint = the
// absolute path of dra.sock, versions ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
// (v1 first: the kubelet takes the first one it knows). It is the gRPC
// adapter only: claims go to the DraDriver as plain values and its answers
// come back unchanged (v1beta1 has no share_id). A request with no claims is
// answered at once without the driver: NVIDIA's health check sends one.
//
// Thread-safety: every method may be called from any thread. The driver is
// called from gRPC's threads, concurrently, and must outlive the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kubelet/dra_types.h"

namespace gpuop::kubelet {

inline constexpr std::string_view kDraPluginType = "DRAPlugin";
inline constexpr std::string_view kDraV1Version = "v1.DRAPlugin";
inline constexpr std::string_view kDraV1beta1Version = "v1beta1.DRAPlugin";
inline constexpr std::string_view kDraSocketName = "dra.sock";

// <plugin_dir>/dra.sock and <registry_dir>/<driver>-reg.sock.
std::string DraSocketPath(const std::string& plugin_dir);
std::string DraRegistrationSocketPath(const std::string& registry_dir,
                                      const std::string& driver_name);

struct DraPluginServerOptions {
  std::string driver_name;   // e.g. gpu.nvidia.com
  std::string plugin_dir;    // the driver's own dir, created if missing
  std::string registry_dir;  // the kubelet's plugins_registry; must exist
  // The DRA socket's path as the kubelet sees it, sent in GetInfo. Empty:
  // <plugin_dir>/dra.sock. A plugin whose host directories are mounted
  // elsewhere in its container (gpuop's /host/...) gives the host path.
  std::string endpoint;
  // How long Start waits for dra.sock to answer before registering.
  std::chrono::milliseconds start_timeout{5000};
};

// The last NotifyRegistrationStatus the kubelet sent.
struct DraRegistrationState {
  uint64_t notifications = 0;  // 0: the kubelet has not answered yet
  bool registered = false;
  std::string error;  // the kubelet's reason when it refused the plugin
};

class DraPluginServer {
 public:
  // Removes stale sockets at both paths, serves dra.sock, waits until it
  // answers, then serves the registration socket. Errors name the socket and
  // the fix: a path too long for a unix socket, a missing plugins_registry
  // directory, a bind failure, no answer within start_timeout.
  static Result<std::unique_ptr<DraPluginServer>> Start(DraDriver* driver,
                                                        DraPluginServerOptions options);

  ~DraPluginServer();  // Stop()
  DraPluginServer(const DraPluginServer&) = delete;
  DraPluginServer& operator=(const DraPluginServer&) = delete;

  // Stops the registration socket first (the kubelet deregisters the driver
  // when it goes), then the DRA socket, and removes each socket file still
  // ours. Callers get ~200 ms; a driver call in progress is waited for (it
  // is not interrupted). Idempotent.
  void Stop();

  DraRegistrationState Registration() const;
  // Waits until the kubelet has sent NotifyRegistrationStatus at least
  // `min_notifications` times in total; false on timeout.
  bool WaitForNotification(uint64_t min_notifications, std::chrono::milliseconds timeout) const;

  const std::string& dra_socket() const;           // absolute
  const std::string& registration_socket() const;  // absolute

 private:
  class Impl;
  explicit DraPluginServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Conversions between the DRA protos and dra_types.h, for the plugin's server
// and the kubelet's client. Each template is instantiated (in dra_server.cc)
// for the v1 and v1beta1 messages of its kind; v1beta1 drops share_id.
template <class ClaimsRequest>  // Node{Prepare,Unprepare}ResourcesRequest
std::vector<DraClaim> ClaimsFromProto(const ClaimsRequest& request);
template <class ClaimsRequest>
ClaimsRequest ClaimsToProto(const std::vector<DraClaim>& claims);
template <class PrepareResponse>  // NodePrepareResourcesResponse
PrepareResponse PrepareResultsToProto(const std::map<std::string, DraPrepareResult>& results);
template <class PrepareResponse>
std::map<std::string, DraPrepareResult> PrepareResultsFromProto(const PrepareResponse& response);
template <class UnprepareResponse>  // NodeUnprepareResourcesResponse
UnprepareResponse UnprepareResultsToProto(const std::map<std::string, std::string>& errors);
template <class UnprepareResponse>
std::map<std::string, std::string> UnprepareResultsFromProto(const UnprepareResponse& response);

}  // namespace gpuop::kubelet
