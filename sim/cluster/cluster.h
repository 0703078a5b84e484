// Cluster: `gpuop sim cluster`, a Kubernetes cluster on one machine with
// simulated GPU nodes (docs/simulated-cluster.md). One process (`gpuop sim cluster run`,
// started in the background by `up`) holds it: the API emulator on the
// cluster network's gateway, the controllers a cluster runs (scheduler,
// DaemonSet, Deployment/ReplicaSet), and a Kubelet per node, each node with
// its own host root, simulated GPUs (GPUOP_SIM_SEED = the node's name, so
// UUIDs differ between nodes), network namespace and address. The API
// emulator enforces RBAC; the in-process controllers and kubelets use the
// admin token.
//
// Files under the cluster directory D:
//   D/cluster.json      what `status`, `exec` and `down` read: state
//                       (starting|ready|failed|down), pid, API URL, nodes
//   D/kubeconfig        for kubectl (and the operator run as a local process)
//   D/ca.crt            the CA every pod's service account volume holds
//   D/token             the admin token (system:masters); pods get their
//                       ServiceAccount's own token (RBAC is enforced)
//   D/cluster.log       the process's log
//   D/audit.log         the API emulator's audit log (one JSON line per request)
//   D/nodes/<n>/root    the node's host root; D/nodes/<n>/sim its GPU state
//
// Thread-safety: Run blocks its caller until `stop`; nothing else is shared.
#pragma once

#include <chrono>
#include <stop_token>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpuop::simcluster {

struct NodeSpec {
  std::string name;
  std::string machine;  // a machine preset or file; "cpu": no GPU
  std::string os_id = "ubuntu", os_version = "22.04";
  std::string kernel = "5.15.0-105-generic";
  // A driver installed on the host (libraries, tools, the module loaded), or
  // none: a bare node whose driver a driver container must load.
  bool host_driver = true;
  // The kubelet's crashLoopBackOff.maxContainerRestartPeriod (KubeletConfiguration).
  std::chrono::seconds max_restart_period{300};
};

struct ClusterSpec {
  std::string dir;
  std::vector<NodeSpec> nodes;
  std::string nvml_sim;  // libnvml-sim.so installed into GPU nodes' driver roots
  std::string cuda_sim;  // libcuda-sim.so, likewise
  std::string nvidia_smi;  // nvidia-smi-sim, installed as the nodes' nvidia-smi
};

// "dgx-h100,l40s-4,cpu" or "gpu-a=dgx-h100,...": node NAME=MACHINE, or the
// machine alone (the name is then the machine, with -2, -3 for repeats).
Result<std::vector<NodeSpec>> ParseNodeList(const std::string& list);
// A cluster.yaml: {nodes: [{name, machine, os: {id, version}, kernel,
// driver: host|none}], kubelet: {crashLoopBackOff: {maxContainerRestartPeriod: 10s}}}.
Result<std::vector<NodeSpec>> ParseClusterFile(const std::string& path);

// Runs the cluster until `stop` is requested, then takes everything down
// (containers, network namespaces, veths, bridge). Cleans up what an earlier
// run in the same directory left first.
Status RunCluster(const ClusterSpec& spec, std::stop_token stop);

// Removes whatever a run in `dir` left (containers, namespaces, bridge);
// what it removed, one line each.
std::vector<std::string> CleanUpCluster(const std::string& dir);

}  // namespace gpuop::simcluster
