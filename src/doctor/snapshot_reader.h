// Reads the doctor's Snapshot (doctor.h) from the API server: a handful of
// lists (ClusterPolicies, nodes, the operator's pods, DaemonSets, every pod,
// Warning Events about nodes, FailedCreatePodSandBox Events about pods,
// ServiceMonitors) and the log tails of the device plugin pods whose node
// lost GPUs. Nothing is written.
//
// Thread-safety: uses the (thread-safe) client; no state of its own.
#pragma once

#include <string>

#include "base/status.h"
#include "doctor/doctor.h"
#include "kube/client.h"

namespace gpuop::doctor {

// An error names the request that failed and how to fix the access to the
// cluster (kubeconfig, network, RBAC); a missing ClusterPolicy CRD is not one
// (Snapshot::crd_installed), nor is a log that cannot be read (a hint only).
Result<Snapshot> ReadSnapshot(kube::Client& client, const std::string& operator_namespace);

}  // namespace gpuop::doctor
