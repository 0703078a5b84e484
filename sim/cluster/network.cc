#include "sim/cluster/network.h"

#include <cstdio>
#include <functional>

#include "base/log.h"
#include "base/process.h"
#include "base/strings.h"

namespace gpuop::simcluster {
namespace {

Status Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunCommand(argv);
  if (!r.ok()) return r.status();
  if (r->status != 0) {
    return Unavailable("`" + Join(argv, " ") + "` failed: " + std::string(Trim(r->output)) +
                       " (the cluster simulator needs root: CAP_NET_ADMIN)");
  }
  return Status::Ok();
}

void IpQuiet(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  (void)RunCommand(argv);
}

}  // namespace

const NodeNetwork* NetworkPlan::Find(const std::string& node) const {
  for (const auto& n : nodes) {
    if (n.node == node) return &n;
  }
  return nullptr;
}

std::string ClusterKey(const std::string& dir) {
  // FNV-1a: stable across runs and builds (std::hash is not).
  const uint32_t h = Fnv1a32(dir);
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", h & 0xffff);
  return buf;
}

NetworkPlan PlanNetwork(const std::string& key, const std::vector<std::string>& nodes) {
  unsigned k = static_cast<unsigned>(std::stoul(key, nullptr, 16));
  // 10.100.0.0 - 10.199.249.0: away from the usual 10.0/16, 10.96/12 service
  // and 10.244/16 pod ranges.
  std::string net = "10." + std::to_string(100 + k % 100) + "." + std::to_string((k / 100) % 250);
  NetworkPlan p;
  p.bridge = "gpuop" + key;
  p.gateway = net + ".1";
  for (size_t i = 0; i < nodes.size(); ++i) {
    p.nodes.push_back(NodeNetwork{nodes[i], "gpuop-" + key + "-" + nodes[i],
                                  "gp" + key + "h" + std::to_string(i),
                                  net + "." + std::to_string(10 + i)});
  }
  return p;
}

Status SetUpNetwork(const NetworkPlan& p) {
  const std::string prefix = "/" + std::to_string(p.prefix_len);
  GPUOP_RETURN_IF_ERROR(Ip({"link", "add", p.bridge, "type", "bridge"}));
  GPUOP_RETURN_IF_ERROR(Ip({"addr", "add", p.gateway + prefix, "dev", p.bridge}));
  GPUOP_RETURN_IF_ERROR(Ip({"link", "set", p.bridge, "up"}));
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const NodeNetwork& n = p.nodes[i];
    const std::string peer =
        n.veth_host.substr(0, n.veth_host.size() - 1 - std::to_string(i).size()) + "n" +
        std::to_string(i);
    GPUOP_RETURN_IF_ERROR(Ip({"netns", "add", n.netns}));
    GPUOP_RETURN_IF_ERROR(Ip({"link", "add", n.veth_host, "type", "veth", "peer", "name", peer}));
    GPUOP_RETURN_IF_ERROR(Ip({"link", "set", peer, "netns", n.netns}));
    GPUOP_RETURN_IF_ERROR(Ip({"link", "set", n.veth_host, "master", p.bridge}));
    GPUOP_RETURN_IF_ERROR(Ip({"link", "set", n.veth_host, "up"}));
    GPUOP_RETURN_IF_ERROR(Ip({"-n", n.netns, "link", "set", peer, "name", "eth0"}));
    GPUOP_RETURN_IF_ERROR(Ip({"-n", n.netns, "addr", "add", n.address + prefix, "dev", "eth0"}));
    GPUOP_RETURN_IF_ERROR(Ip({"-n", n.netns, "link", "set", "eth0", "up"}));
    GPUOP_RETURN_IF_ERROR(Ip({"-n", n.netns, "link", "set", "lo", "up"}));
    GPUOP_RETURN_IF_ERROR(Ip({"-n", n.netns, "route", "add", "default", "via", p.gateway}));
  }
  return Status::Ok();
}

void TearDownNetwork(const NetworkPlan& p) {
  for (const NodeNetwork& n : p.nodes) {
    IpQuiet({"link", "del", n.veth_host});
    IpQuiet({"netns", "del", n.netns});
  }
  IpQuiet({"link", "del", p.bridge});
}

std::vector<std::string> LeftoverNamespaces(const std::string& key) {
  std::vector<std::string> out;
  auto r = RunCommand({"ip", "netns", "list"});
  if (!r.ok() || r->status != 0) return out;
  const std::string prefix = "gpuop-" + key + "-";
  for (const std::string& line : Split(r->output, '\n')) {
    std::string name = line.substr(0, line.find(' '));
    if (StartsWith(name, prefix)) out.push_back(name);
  }
  return out;
}

}  // namespace gpuop::simcluster
