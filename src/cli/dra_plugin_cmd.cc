// `gpuop dra-plugin`: the node's DRA kubelet plugin for driver gpu.nvidia.com
// (docs/dra.md). It publishes the node's GPUs and MIG devices as
// ResourceSlices with NVIDIA's names and attributes (dra/devices.h,
// dra/slice_publisher.h), follows MIG layout changes and GPU health (an
// unhealthy GPU's devices are tainted), serves NodePrepareResources and
// NodeUnprepareResources (dra/driver.h: per-claim CDI specs, checkpointed)
// and registers with the kubelet (kubelet/dra_server.h). Paths are host
// paths under --host-root. Exit 0 on SIGTERM/SIGINT, 1 when it cannot start,
// 2 on a bad flag.
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "dra/driver.h"
#include "dra/names.h"
#include "dra/plugin_service.h"
#include "manager/manager.h"
#include "nvml/client.h"

namespace gpuop::cli {
namespace {

struct DraPluginFlags {
  std::string node_name;
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string cdi_root = "/etc/cdi";
  std::string driver_root = "/";
  std::string dev_root;
  std::string hook_path;
  std::string rescan_interval = "5s";
  std::string additional_xids;
  std::string health_addr;
  KubeFlags kube;
};

int RunDraPlugin(const GlobalOptions& g, const DraPluginFlags& f) {
  StopSignals signals;  // before any thread starts
  if (f.node_name.empty()) {
    std::fprintf(stderr, "gpuop dra-plugin: --node-name (or NODE_NAME) is required\n");
    return kExitUsage;
  }
  auto rescan = ParseDuration(f.rescan_interval);
  if (!rescan.ok()) {
    std::fprintf(stderr, "gpuop dra-plugin: --rescan-interval: %s\n",
                 rescan.status().message().c_str());
    return kExitUsage;
  }
  std::set<uint64_t> ignored_xids;
  for (const std::string& x : Split(f.additional_xids, ',')) {
    if (Trim(x).empty()) continue;
    auto n = ParseUint(Trim(x));
    if (!n) {
      std::fprintf(stderr,
                   "gpuop dra-plugin: --additional-xids-to-ignore: \"%s\" is not an XID number "
                   "(a comma-separated list such as 13,31)\n",
                   x.c_str());
      return kExitUsage;
    }
    ignored_xids.insert(*n);
  }
  const auto env = ProcessEnvironment();
  auto env_of = [&env](const char* key) {
    auto it = env.find(key);
    return it == env.end() ? std::string() : it->second;
  };
  auto policy = deviceplugin::ParseHealthPolicy(env_of("DP_DISABLE_HEALTHCHECKS"),
                                                env_of("DP_ENABLE_HEALTHCHECKS"));
  if (!policy.ok()) return Fail("dra-plugin", policy.status());

  auto nvml_client = nvml::Client::Open(NvmlLibraryPath(g));
  if (!nvml_client.ok()) return Fail("dra-plugin", nvml_client.status());
  const nvml::Client& nvml = **nvml_client;
  auto kube_client = NewKubeClient(f.kube, "gpuop-dra-plugin");
  if (!kube_client.ok()) return Fail("dra-plugin", kube_client.status());
  kube::Client& kube = **kube_client;

  const std::string plugin_dir =
      JoinRoot(g.host_root, f.kubelet_dir + "/plugins/" + dra::kDriverName);
  const std::string registry_dir = JoinRoot(g.host_root, f.kubelet_dir + "/plugins_registry");
  toolkit::CdiHostRoots roots{g.host_root, f.driver_root,
                              f.dev_root.empty() ? f.driver_root : f.dev_root};
  dra::DriverOptions options;
  options.node_name = f.node_name;
  options.plugin_dir = plugin_dir;
  options.cdi_root = JoinRoot(g.host_root, f.cdi_root);
  options.cdi.driver_root = roots.driver_root;
  options.cdi.dev_root = roots.dev_root;
  options.cdi.hook_path = f.hook_path.empty() ? DefaultCdiHookPath(g) : f.hook_path;
  if (options.cdi.hook_path.empty()) {
    return Fail("dra-plugin",
                InvalidArgument("cannot find this executable's path; pass --hook-path"));
  }
  Status made = MakeDirs(options.cdi_root);
  if (!made.ok()) return Fail("dra-plugin", made.Annotate("--cdi-root"));
  dra::NvidiaSmiTimeSlicer time_slicer;
  dra::Driver driver(options, dra::ApiClaimFetcher(kube), dra::NvmlNodeDevices(nvml, roots),
                     time_slicer);

  dra::PluginServiceOptions po;
  po.node_name = f.node_name;
  po.host_root = g.host_root;
  po.rescan_interval = *rescan;
  po.additional_ignored_xids = std::move(ignored_xids);
  po.health_policy = *policy;
  po.server.driver_name = dra::kDriverName;
  po.server.plugin_dir = plugin_dir;
  po.server.registry_dir = registry_dir;
  // The kubelet dials the socket on the host, not under --host-root.
  po.server.endpoint = f.kubelet_dir + "/plugins/" + dra::kDriverName + "/dra.sock";
  dra::PluginService service(nvml, kube, driver, std::move(po));

  manager::Manager m({.name = "dra-plugin", .health_addr = f.health_addr});
  m.Add("dra-plugin", [&service](std::stop_token stop) { return service.Run(stop); });
  m.AddHealthCheck("dra-plugin", [&service] { return service.CheckHealth(); });
  LogInfo("DRA plugin starting", {{"node", f.node_name}, {"cdi_root", options.cdi_root}});
  return m.Run(signals);
}

}  // namespace

void RegisterDraPluginCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<DraPluginFlags>();
  auto* cmd = app.add_subcommand(
      "dra-plugin",
      "Node DaemonSet: the DRA kubelet plugin for driver gpu.nvidia.com: publish the node's "
      "GPUs and MIG devices as ResourceSlices (NVIDIA's names and attributes), prepare and "
      "unprepare ResourceClaims with per-claim CDI specs");
  cmd->add_option("--node-name", f->node_name, "This node's name")->envname("NODE_NAME");
  cmd->add_option("--kubelet-dir", f->kubelet_dir,
                  "The kubelet's root directory on the host (sockets in <dir>/plugins and "
                  "<dir>/plugins_registry)")
      ->capture_default_str();
  cmd->add_option("--cdi-root", f->cdi_root, "Where the per-claim CDI specs are written")
      ->envname("CDI_ROOT")
      ->capture_default_str();
  cmd->add_option("--driver-root", f->driver_root,
                  "The driver's root on the host: / for a host driver, /run/nvidia/driver for "
                  "the driver container")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str();
  cmd->add_option("--dev-root", f->dev_root, "Where the device nodes are (default: --driver-root)");
  cmd->add_option("--hook-path", f->hook_path,
                  "The CDI hook binary on the host (default " + std::string(kToolkitHookPath) +
                      " with --host-root, else this executable)");
  cmd->add_option("--rescan-interval", f->rescan_interval,
                  "How often the GPUs are re-read and the slices checked")
      ->capture_default_str();
  cmd->add_option("--additional-xids-to-ignore", f->additional_xids,
                  "XIDs that taint a device with effect None instead of NoSchedule (comma list)");
  cmd->add_option("--health-addr", f->health_addr,
                  "Serve /healthz (registered with the kubelet, slices published) here; empty: off")
      ->envname("GPUOP_DRA_PLUGIN_HEALTH_ADDR");
  AddKubeFlags(cmd, &f->kube);
  cmd->callback([&g, action, f] { *action = [&g, f] { return RunDraPlugin(g, *f); }; });
}

}  // namespace gpuop::cli
