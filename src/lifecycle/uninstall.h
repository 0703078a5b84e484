// `gpuop uninstall`: takes off the cluster everything gpuop put there, so that
// `helm uninstall` (whose pre-delete hook runs it) leaves nothing behind:
// NVIDIA's operator leaves node labels, runtime configuration and CRs behind
// (gpu-operator #188, #1391), and users clean up by hand.
//
// In order, each step waiting for the one before:
//   1. every ClusterPolicy deleted: its DaemonSets and the rest of what the
//      operator rendered are garbage-collected, and the operator, still
//      running, removes the node labels it added;
//   2. gpuop's pods in the namespace gone: the toolkit's preStop removes the
//      runtime handler and the CDI spec from its node as its DaemonSet is
//      gone (toolkit/removal.h), so nothing points at a removed runtime;
//   3. from every node, what the node components wrote and leave on exit:
//      gpu-feature-discovery's labels (the ones its annotation records) and
//      that annotation, mig-manager's state label, node discovery's PCI
//      labels (only when gpuop's node discovery ran: NFD's own stay), and what
//      the operator would have removed itself (its labels, the validation
//      taint), in case it is not running;
//   4. with delete_crd, the ClusterPolicy CRD.
// Labels a user set (a gpu.deploy.* override, a device-plugin.config choice, a
// mig.config other than the operator's default) stay.
//
// Thread-safety: functions are reentrant.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "kube/client.h"

namespace gpuop::lifecycle {

struct UninstallOptions {
  std::string namespace_ = "gpu-operator";  // where the components run
  bool delete_crd = false;
  std::chrono::seconds timeout{300};  // for each wait
  std::chrono::milliseconds poll{500};
};

// The merge patch that strips from `node` what gpuop's components wrote
// (step 3 above); nullopt when there is nothing to strip. `node_discovery_ran`:
// gpuop's node discovery labelled the nodes (so its PCI labels are gpuop's).
std::optional<nlohmann::json> NodeCleanupPatch(const nlohmann::json& node, bool node_discovery_ran);

Status Uninstall(kube::Client& client, const UninstallOptions& options);

}  // namespace gpuop::lifecycle
