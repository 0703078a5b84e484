// `gpuop node-discovery`: a small node DaemonSet that labels its own Node
// with the NFD PCI labels of its NVIDIA devices (discovery/node_discovery.h),
// so the operator finds GPU nodes without Node Feature Discovery. Exit 0 on
// SIGTERM/SIGINT or after a successful --oneshot pass, 1 when a --oneshot
// pass fails or no API client can be built, 2 on a bad flag.
#include <cstdio>
#include <memory>
#include <string>

#include "base/log.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "discovery/node_discovery.h"
#include "manager/manager.h"
#include "toolkit/toolkit_core.h"

namespace gpuop::cli {
namespace {

struct NodeDiscoveryFlags {
  std::string node_name;
  std::string interval = "10m";
  bool oneshot = false;
  KubeFlags kube;
};

int RunNodeDiscoveryCmd(const GlobalOptions& g, const NodeDiscoveryFlags& f) {
  if (f.node_name.empty()) {
    std::fprintf(stderr,
                 "gpuop node-discovery: --node-name (or NODE_NAME) is required: the name of "
                 "the node this runs on (the downward API's spec.nodeName)\n");
    return kExitUsage;
  }
  auto interval = ParseDuration(f.interval);
  if (!interval.ok() || interval->count() <= 0) {
    std::fprintf(
        stderr, "gpuop node-discovery: --interval: %s\n",
        interval.ok() ? "must be positive, e.g. 10m" : interval.status().message().c_str());
    return kExitUsage;
  }
  StopSignals signals;  // before any thread starts
  auto client = NewKubeClient(f.kube, "gpuop-node-discovery");
  if (!client.ok()) return Fail("node-discovery", client.status());

  discovery::NodeDiscoveryOptions o;
  o.host_root = g.host_root;
  o.node_name = f.node_name;
  o.interval = *interval;
  if (f.oneshot) {
    auto changes = discovery::SyncNodeLabels(**client, o);
    if (!changes.ok()) return Fail("node-discovery", changes.status());
    std::printf("node %s: %zu label(s) changed\n", f.node_name.c_str(), changes->size());
    for (const auto& [key, value] : *changes) {
      std::printf("  %s=%s\n", key.c_str(), value ? value->c_str() : "(removed)");
    }
    return kExitOk;
  }
  LogInfo("node discovery started",
          {{"node", f.node_name}, {"host_root", g.host_root}, {"interval", f.interval}});
  manager::Manager m({.name = "node-discovery"});
  m.Add("node-discovery", [&](std::stop_token stop) {
    discovery::RunNodeDiscovery(**client, o, stop);
    return Status::Ok();
  });
  return m.Run(signals);
}

}  // namespace

void RegisterNodeDiscoveryCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<NodeDiscoveryFlags>();
  auto* cmd = app.add_subcommand(
      "node-discovery",
      "Node DaemonSet: label this node feature.node.kubernetes.io/pci-10de.present=true (and "
      "the NFD class variants pci-0302_10de, pci-0300_10de) when it has an NVIDIA GPU, so the "
      "operator finds GPU nodes without Node Feature Discovery. Reads sysfs under --host-root; "
      "no NVML.");
  cmd->add_option("--node-name", f->node_name, "This node's name")->envname("NODE_NAME");
  cmd->add_option("--interval", f->interval, "How often PCI devices are re-read (backstop)")
      ->capture_default_str();
  cmd->add_flag("--oneshot", f->oneshot, "Label once and exit");
  AddKubeFlags(cmd, &f->kube);
  cmd->callback([&g, action, f] { *action = [&g, f] { return RunNodeDiscoveryCmd(g, *f); }; });
}

}  // namespace gpuop::cli
