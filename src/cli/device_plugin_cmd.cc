// `gpuop device-plugin`: advertises the node's GPUs (and MIG devices) to the
// kubelet and allocates them (deviceplugin/plugin.h), with its config from a
// file, a per-node label (deviceplugin/config_source.h), the upstream
// environment variables and these flags (flag > environment > file). Paths
// are host paths under --host-root. Exit 0 on SIGTERM/SIGINT, 1 when it cannot
// start, 2 on a bad flag.
#include <unistd.h>

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
#include "deviceplugin/plugin.h"
#include "http/server.h"
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

int Fail(const Status& s) {
  std::fprintf(stderr, "gpuop device-plugin: %s\n", s.message().c_str());
  return kExitFailure;
}

std::string Get(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() ? "" : it->second;
}

// Upstream blocks instead of exiting when FAIL_ON_INIT_ERROR=false, so the
// DaemonSet does not crash-loop on a node without a working GPU.
int InitFailed(const Status& s, bool fail_on_init_error, StopSignals& signals) {
  if (fail_on_init_error) return Fail(s);
  LogError("device plugin not started (FAIL_ON_INIT_ERROR=false: waiting for SIGTERM)",
           {{"error", s}});
  signals.Wait();
  return kExitOk;
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
  if (!policy.ok()) return Fail(policy.status());

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

  deviceplugin::LoadedConfig initial;
  auto watcher = deviceplugin::ConfigWatcher::Load(std::move(wo), &initial);
  if (!watcher.ok()) return Fail(watcher.status());
  const bool fail_on_init = initial.config.fail_on_init_error;

  auto client = nvml::Client::Open(NvmlLibraryPath(g));
  if (!client.ok()) return InitFailed(client.status(), fail_on_init, signals);

  deviceplugin::DevicePluginOptions options;
  options.kubelet_dir = JoinRoot(g.host_root, f.kubelet_dir);
  options.host_root = g.host_root;
  options.rescan_interval = *rescan;
  options.health_policy = *policy;
  if (!policy->Active()) LogInfo("health checks disabled (DP_DISABLE_HEALTHCHECKS)");

  deviceplugin::DevicePlugin plugin(**client, initial.config, options);
  if (Status s = plugin.Start(); !s.ok()) return InitFailed(s, fail_on_init, signals);

  std::unique_ptr<http::Server> health;
  if (!f.health_addr.empty()) {
    auto h = http::Server::Start(f.health_addr, "--health-addr",
                                 {{"/healthz", [&plugin] {
                                     Status s = plugin.CheckHealth();
                                     return http::Response{.status = s.ok() ? 200 : 503,
                                                           .body = s.ok() ? "ok" : s.message()};
                                   }}});
    if (!h.ok()) return Fail(h.status());
    health = std::move(h).value();
  }
  // After the last early return: from here the watcher's thread may be
  // inside plugin.Reload, and it is stopped below before the plugin goes.
  (*watcher)->Follow(
      [&plugin](const deviceplugin::LoadedConfig& loaded) { return plugin.Reload(loaded.config); });

  std::vector<std::string> counts;
  for (const auto& r : plugin.Resources()) {
    counts.push_back(r.name + "=" + std::to_string(r.devices));
  }
  const auto config = plugin.config();
  LogInfo("device plugin serving resources",
          {{"resources", Join(counts, ",")},
           {"dir", plugin.device_plugin_dir()},
           {"config", initial.origin},
           {"mig_strategy", deviceplugin::MigStrategyName(config->mig_strategy)},
           {"device_list_strategy", deviceplugin::DeviceListStrategyString(config->device_list)},
           {"health_addr", health ? ":" + std::to_string(health->port()) : std::string("off")}});

  signals.Wait();
  LogInfo("stopping");
  (*watcher)->Stop();
  plugin.Stop();
  return kExitOk;
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
