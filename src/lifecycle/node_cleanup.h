// What the toolkit's preStop runs (`gpuop node-cleanup`): when the toolkit
// pod goes because its DaemonSet is gone or going (gpuop uninstalled, or the
// toolkit turned off in the ClusterPolicy), take off the node what the
// toolkit put there: the runtime handler its runtime-config step added (so no
// runtime configuration points at a removed runtime), the CDI spec, the
// installed hook binary and the toolkit-ready file. When the pod is only being
// replaced (an update, a restart, a drain) the DaemonSet is still there and
// nothing is touched: GPU pods keep running and starting meanwhile.
//
// NVIDIA's toolkit reverts on every exit instead, so an update briefly leaves
// nodes without the runtime; or, when it cannot, leaves the config behind
// pointing at a runtime that is gone (gpu-operator #188).
//
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "kube/client.h"
#include "runtime/configure.h"

namespace gpuop::lifecycle {

// True when the DaemonSet that controls pod `ns`/`pod` is gone or being
// deleted, or the pod itself is gone, or the API no longer accepts the
// pod's ServiceAccount (401/403: its identity went with the ClusterPolicy);
// false while the DaemonSet stays, or when no DaemonSet controls the pod
// (orphaned: nothing says it goes).
Result<bool> OwnerDaemonSetRemoved(kube::Client& client, const std::string& ns,
                                   const std::string& pod);

struct NodeCleanupOptions {
  std::string host_root = "/";
  runtime::ConfigureOptions runtime;  // what the runtime-config step added
  std::string cdi_spec = "/var/run/cdi/nvidia.yaml";
  std::string install_dir = "/usr/local/nvidia/toolkit";  // the hook binary: <dir>/gpuop
  std::string validations_dir = "/run/nvidia/validations";
};

// Reverts the runtime handler and removes the files (under host_root). Files
// already gone are fine. Returns the host paths changed.
Result<std::vector<std::string>> CleanNode(const NodeCleanupOptions& options);

}  // namespace gpuop::lifecycle
