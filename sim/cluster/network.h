// The simulated cluster's network: one Linux bridge on this machine and, per
// node, a network namespace joined to it by a veth pair. The node's address
// (its InternalIP) lives inside its namespace, so hostNetwork pods of two
// nodes both listen on :9400 without clashing, and every address is reachable
// from this machine (kubectl, probes) and from every node (the API server
// listens on the bridge's address, the gateway).
//
// PlanNetwork is pure: names and addresses from the cluster's key (a short
// hash of its directory, so two clusters do not collide) and the node names.
// SetUpNetwork / TearDownNetwork run `ip` and need CAP_NET_ADMIN; teardown is
// best effort and idempotent (it also removes what a crashed run left).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace gpuop::simcluster {

struct NodeNetwork {
  std::string node;
  std::string netns;      // under /var/run/netns
  std::string veth_host;  // the bridge's end; the node's end is eth0 in netns
  std::string address;    // "10.123.4.10"
};

struct NetworkPlan {
  std::string bridge;
  std::string gateway;  // the bridge's address: where the API server listens
  int prefix_len = 24;
  std::vector<NodeNetwork> nodes;
  const NodeNetwork* Find(const std::string& node) const;
};

// A stable short key for a cluster directory ("3fa9").
std::string ClusterKey(const std::string& dir);

// REQUIRES: nodes.size() <= 200.
NetworkPlan PlanNetwork(const std::string& key, const std::vector<std::string>& nodes);

Status SetUpNetwork(const NetworkPlan& plan);
void TearDownNetwork(const NetworkPlan& plan);

// Network namespaces whose name starts with "gpuop-<key>-" (what a run left).
std::vector<std::string> LeftoverNamespaces(const std::string& key);

}  // namespace gpuop::simcluster
