// DraManager: the simulated kubelet's DRA manager (after the kubelet's
// pkg/kubelet/cm/dra), speaking the real registration and DRA gRPC protocols to
// the node's plugins (sim/kubelet/dra_kubelet.h).
//
//   - Plugins: a *-reg.sock that appears in <root>/var/lib/kubelet/
//     plugins_registry is registered (GetInfo, validation, Notify); one that
//     disappears is dropped, and its driver's ResourceSlices of this node are
//     deleted once it has been gone for the wiping delay (30 s, the kubelet's
//     defaultWipingDelay) without coming back.
//   - At start, like a kubelet starting, every ResourceSlice of this node is
//     deleted: plugins republish theirs.
//   - PreparePod: the pod's claims (spec.resourceClaims, a template's claim
//     through status.resourceClaimStatuses) must be allocated and reserved
//     for the pod; each driver gets one NodePrepareResources with that pod's
//     claims it has not prepared yet; every container gets the CDI device ids
//     of the claims (and requests) its resources.claims name.
//   - ReleasePod: a claim no prepared pod uses any more is unprepared; a
//     failed unprepare is retried until it succeeds.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/client.h"
#include "kubelet/dra_types.h"

namespace gpuop::simcluster {

// One entry of a pod's spec.resourceClaims, resolved to its claim's name.
struct PodClaim {
  std::string entry;  // spec.resourceClaims[].name
  std::string claim;  // the ResourceClaim's name
};

// The pod's claims by entry. FailedPrecondition naming the entry when a
// template's claim is not created yet (the pod waits, as on a kubelet).
Result<std::vector<PodClaim>> ResolvePodClaims(const nlohmann::json& pod);

// Whether `claim` may be used by `pod`: allocated, and the pod in its
// reservedFor. The kubelet's messages otherwise.
Status CheckClaimForPod(const nlohmann::json& claim, const nlohmann::json& pod);

// Container name → CDI device ids, from the pod's containers' resources.claims
// and what was prepared for each claim (by claim name). A device serves a
// container's {name, request} when the request is empty, the device names no
// request, or names that one.
std::map<std::string, std::vector<std::string>> ContainerCdiDevices(
    const nlohmann::json& pod, const std::vector<PodClaim>& claims,
    const std::map<std::string, std::vector<kubelet::DraPreparedDevice>>& prepared_by_claim);

struct DraManagerOptions {
  std::string node_name;
  std::string registry_dir;  // <root>/var/lib/kubelet/plugins_registry
  std::string node_root;     // the node's "/": plugins' endpoints are under it
  std::chrono::milliseconds wiping_delay{30000};
  std::chrono::milliseconds scan_interval{500};
};

class DraManager {
 public:
  // `client` must outlive the manager.
  static Result<std::unique_ptr<DraManager>> Start(DraManagerOptions options, kube::Client* client);
  ~DraManager();
  DraManager(const DraManager&) = delete;
  DraManager& operator=(const DraManager&) = delete;

  // Prepares the pod's claims; container name → CDI device ids. A pod with no
  // claims gets an empty map at no cost.
  Result<std::map<std::string, std::vector<std::string>>> PreparePod(const nlohmann::json& pod);
  void ReleasePod(const std::string& pod_uid);

  // A kubelet restart: every registration dropped and every plugin's socket
  // registered again by the next scan, the node's ResourceSlices deleted (the
  // plugins republish); prepared claims are kept (the kubelet's checkpoint).
  void Restart();

  // The drivers registered now.
  std::vector<std::string> Drivers() const;

  class Impl;

 private:
  explicit DraManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuop::simcluster
