// `gpuop device-plugin`: advertises the node's GPUs (and MIG devices) to the
// kubelet and allocates them (deviceplugin/plugin.h), with its config from a
// file, a per-node label (deviceplugin/config_source.h), the upstream
// environment variables and these flags (flag > environment > file). Paths
// are host paths under --host-root. Exit 0 on SIGTERM/SIGINT, 1 when it cannot
// start, 2 on a bad flag.
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "deviceplugin/config_source.h"
#include "deviceplugin/health.h"
#include "deviceplugin/service.h"
#include "manager/manager.h"
#include "nvml/client.h"
#include "toolkit/toolkit_core.h"

extern char** environ;

namespace gpuop::cli {
namespace {

struct DevicePluginFlags {
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string config_file;
  std::string mig_strategy, device_list_strategy, device_id_strategy;
  bool pass_device_specs = false;
  bool pass_device_specs_given = false;
  std::string rescan_interval = "3s";
  std::string health_addr;
  KubeFlags kube;
};

std::string Get(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? "" : it->second;
}

int RunDevicePlugin(const GlobalOptions& g, const DevicePluginFlags& f) {
  StopSignals signals;  // before any thread starts
  const auto env = ProcessEnvironment();

  auto rescan = ParseDuration(f.rescan_interval);
  if (!rescan.ok()) {
    std::fprintf(stderr, "gpuop device-plugin: --rescan-interval: %s\n",
                 rescan.status().message().c_str());
    return kExitUsage;
  }
  auto policy = deviceplugin::ParseHealthPolicy(Get(env, "DP_DISABLE_HEALTHCHECKS"),
                                                Get(env, "DP_ENABLE_HEALTHCHECKS"));
  if (!policy.ok()) return Fail("device-plugin", policy.status());

  deviceplugin::ConfigOverrides overrides;
  if (!f.mig_strategy.empty()) overrides.mig_strategy = f.mig_strategy;
  if (!f.device_list_strategy.empty()) overrides.device_list_strategy = f.device_list_strategy;
  if (!f.device_id_strategy.empty()) overrides.device_id_strategy = f.device_id_strategy;
  if (f.pass_device_specs_given) overrides.pass_device_specs = f.pass_device_specs;

  deviceplugin::ConfigWatcher::Options wo;
  wo.selection = deviceplugin::SelectionFromEnv(env, f.config_file);
  wo.env = env;
  wo.overrides = overrides;
  // The per-node scheme reads the Node's label; without an API server the
  // plugin runs on DEFAULT_CONFIG, flags and environment.
  std::unique_ptr<kube::Client> kube_client;
  if (wo.selection.PerNode()) {
    if (wo.selection.node_name.empty()) {
      LogWarn("CONFIG_FILE_SRCDIR set without NODE_NAME: the node label cannot be read");
    } else if (auto c = NewKubeClient(f.kube, "gpuop-device-plugin"); c.ok()) {
      kube_client = std::move(c).value();
      wo.client = kube_client.get();
    } else {
      LogWarn("no API server: the node's config label is not followed", {{"error", c.status()}});
    }
  }

  deviceplugin::ServiceOptions so;
  auto watcher = deviceplugin::ConfigWatcher::Load(std::move(wo), &so.initial);
  if (!watcher.ok()) return Fail("device-plugin", watcher.status());
  so.watcher = std::move(watcher).value();
  const std::string lib = NvmlLibraryPath(g);
  so.open_nvml = [lib] { return nvml::Client::Open(lib); };
  so.plugin.kubelet_dir = JoinRoot(g.host_root, f.kubelet_dir);
  so.plugin.host_root = g.host_root;
  so.plugin.rescan_interval = *rescan;
  so.plugin.health_policy = *policy;
  if (!policy->Active()) LogInfo("health checks disabled (DP_DISABLE_HEALTHCHECKS)");

  manager::Manager m({.name = "device-plugin", .health_addr = f.health_addr});
  so.health_address = [&m] { return m.health_address(); };
  deviceplugin::Service service(std::move(so));
  m.Add("device-plugin", [&service](std::stop_token stop) { return service.Run(stop); });
  m.AddHealthCheck("device-plugin", [&service] { return service.CheckHealth(); });
  return m.Run(signals);
}

}  // namespace

void RegisterDevicePluginCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<DevicePluginFlags>();
  auto* cmd = app.add_subcommand(
      "device-plugin",
      "Node DaemonSet: advertise GPUs and MIG devices to the kubelet (device plugin API "
      "v1beta1) and allocate them. Upstream's environment variables apply (MIG_STRATEGY, "
      "DEVICE_LIST_STRATEGY, CONFIG_FILE, ...); flags win over them.");
  cmd->add_option("--kubelet-dir", f->kubelet_dir,
                  "The kubelet's root directory on the host (sockets in <dir>/device-plugins)")
      ->capture_default_str();
  cmd->add_option("--config", f->config_file,
                  "Device plugin config file (format v1; default $CONFIG_FILE, or the per-node "
                  "scheme CONFIG_FILE_SRCDIR + NODE_LABEL + DEFAULT_CONFIG)");
  cmd->add_option("--mig-strategy", f->mig_strategy, "none|single|mixed (env MIG_STRATEGY)")
      ->check(CLI::IsMember({"none", "single", "mixed"}));
  cmd->add_option("--device-list-strategy", f->device_list_strategy,
                  "Comma list of envvar, volume-mounts, cdi-annotations, cdi-cri (env "
                  "DEVICE_LIST_STRATEGY)");
  cmd->add_option("--device-id-strategy", f->device_id_strategy,
                  "uuid|index (env DEVICE_ID_STRATEGY)")
      ->check(CLI::IsMember({"uuid", "index"}));
  auto* pass = cmd->add_flag("--pass-device-specs,!--no-pass-device-specs", f->pass_device_specs,
                             "Pass the device nodes as DeviceSpecs (env PASS_DEVICE_SPECS)");
  cmd->add_option("--rescan-interval", f->rescan_interval,
                  "How often NVML is re-read for GPU and MIG layout changes")
      ->capture_default_str();
  cmd->add_option("--health-addr", f->health_addr,
                  "Serve /healthz (NVML answers, every resource served) here; empty: off")
      ->envname("GPUOP_DEVICE_PLUGIN_HEALTH_ADDR");
  AddKubeFlags(cmd, &f->kube);
  cmd->callback([&g, action, f, pass] {
    f->pass_device_specs_given = pass->count() > 0;
    *action = [&g, f] { return RunDevicePlugin(g, *f); };
  });
}

}  // namespace gpuop::cli
