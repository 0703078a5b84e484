// DraKubeletClient: the kubelet's side of a DRA plugin (as the kubelet's
// pkg/kubelet/cm/dra does it), for tests and the simulated kubelet. Register()
// does what the kubelet's plugin manager does with a socket that appears in
// plugins_registry: dial it (10 s), GetInfo (1 s), validate the answer, and
// report the outcome with NotifyRegistrationStatus (5 s): false with the reason
// when the plugin is refused, true when it is accepted. The accepted plugin's
// service is the first entry of its supported_versions that this kubelet knows
// (v1.DRAPlugin or v1beta1.DRAPlugin), and Prepare/Unprepare go to that service
// only, at the plugin's endpoint, each with a 45 s deadline.
//
//   auto plugin = DraKubeletClient::Register(registry_dir + "/gpu.nvidia.com-reg.sock");
//   auto results = (*plugin)->Prepare({{"default", uid, "gpu-claim"}});
//
// Like the kubelet, a gRPC error fails the whole call, and a claim asked for
// but missing from the answer is an error naming that claim. Unlike the
// kubelet it does not check that the endpoint lies in the plugins directory
// (kubelet master only), keeps no checkpoint and watches no health stream.
//
// Thread-safety: Prepare and Unprepare may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kubelet/dra_types.h"

namespace gpuop::sim {

enum class DraApiVersion { kV1, kV1beta1 };
// "v1.DRAPlugin" or "v1beta1.DRAPlugin".
std::string_view DraApiVersionName(DraApiVersion version);

// A PluginInfo as GetInfo returned it.
struct DraPluginInfo {
  std::string type, name, endpoint;
  std::vector<std::string> supported_versions;
};

// A plugin the kubelet accepted: where to call it, and which service.
struct DraPluginRegistration {
  std::string driver_name;
  std::string endpoint;   // absolute path of the DRA socket on the node
  std::string dial_path;  // where this process reaches it (under node_root)
  DraApiVersion version = DraApiVersion::kV1;
};

// The kubelet's checks of a PluginInfo read from `registration_socket`: type
// DRAPlugin, a driver name, an absolute endpoint (an empty one means the
// registration socket itself), a known version. InvalidArgument saying what
// is wrong and what the kubelet expects otherwise; this message is what
// Register() sends back in NotifyRegistrationStatus.
Result<DraPluginRegistration> ValidateDraPluginInfo(const DraPluginInfo& info,
                                                    const std::string& registration_socket);

struct DraKubeletOptions {
  // The node's root as this process sees it: a plugin's endpoint is a path
  // on its node, dialled under this root (a simulated node's "/").
  std::string node_root;
  std::chrono::milliseconds dial_timeout{10000};
  std::chrono::milliseconds get_info_timeout{1000};
  std::chrono::milliseconds notify_timeout{5000};
  std::chrono::milliseconds call_timeout{45000};
};

class DraKubeletClient {
 public:
  // Registers the plugin serving `registration_socket`. Errors: the socket
  // is missing or does not answer, GetInfo failed, the PluginInfo was refused
  // (after telling the plugin why), or NotifyRegistrationStatus failed.
  static Result<std::unique_ptr<DraKubeletClient>> Register(const std::string& registration_socket,
                                                            DraKubeletOptions options = {});

  ~DraKubeletClient();
  DraKubeletClient(const DraKubeletClient&) = delete;
  DraKubeletClient& operator=(const DraKubeletClient&) = delete;

  const DraPluginRegistration& registration() const { return registration_; }

  // NodePrepareResources: claim UID → result, one per claim asked for.
  Result<std::map<std::string, kubelet::DraPrepareResult>> Prepare(
      const std::vector<kubelet::DraClaim>& claims);
  // NodeUnprepareResources: claim UID → error ("" when unprepared).
  Result<std::map<std::string, std::string>> Unprepare(
      const std::vector<kubelet::DraClaim>& claims);

 private:
  class Stubs;
  DraKubeletClient(DraPluginRegistration registration, DraKubeletOptions options);

  const DraPluginRegistration registration_;
  const DraKubeletOptions options_;
  std::unique_ptr<Stubs> stubs_;
};

// The registration sockets in a plugins_registry directory, as the kubelet's
// plugin watcher finds them: unix sockets named *-reg.sock, ignoring names
// that start with '.' (a plugin's socket before it is renamed into place).
// Full paths, sorted; empty when the directory is missing.
std::vector<std::string> ListDraRegistrationSockets(const std::string& registry_dir);

}  // namespace gpuop::sim
