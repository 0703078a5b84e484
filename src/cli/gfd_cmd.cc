// `gpuop gfd`: GPU feature discovery (gfd/daemon.h). Labels the node's GPUs
// into the NFD features file, the NodeFeature object and/or the Node's own
// labels, with upstream's environment variables (GFD_ONESHOT,
// GFD_SLEEP_INTERVAL, GFD_OUTPUT_FILE, GFD_NO_TIMESTAMP, GFD_MIG_STRATEGY or
// MIG_STRATEGY, GFD_MACHINE_TYPE_FILE, USE_NODE_FEATURE_API, NODE_NAME) and
// the device plugin's config (--config / CONFIG_FILE, or the per-node
// scheme) for the sharing labels and, as upstream, its flags.gfd. Flags win
// over the environment, which wins over flags.gfd. Exit 0 on
// SIGTERM/SIGINT or after a good one-shot run, 1 when it cannot label, 2 on a
// bad flag.
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
#include "gfd/daemon.h"
#include "gfd/service.h"
#include "manager/manager.h"
#include "nvml/client.h"
#include "toolkit/toolkit_core.h"

extern char** environ;

namespace gpuop::cli {
namespace {

struct GfdFlags {
  bool oneshot = false;
  std::string sleep_interval = "60s";
  std::string rescan_interval = "5s";
  std::string output_file;
  bool no_timestamp = false;
  std::string mig_strategy;
  std::string config_file;
  std::string machine_type_file = gfd::kDefaultMachineTypeFile;
  gfd::Settings given;  // what a flag or the environment set, over flags.gfd
  bool direct_labels = false;
  bool node_feature_api = false;
  std::string node_name;
  std::string namespace_name;
  KubeFlags kube;
};

int RunGfd(const GlobalOptions& g, const GfdFlags& f) {
  StopSignals signals(/*hangup=*/true);  // before any thread starts
  auto env = ProcessEnvironment();

  gfd::DaemonOptions o;
  auto rescan = ParseDuration(f.rescan_interval);
  if (!rescan.ok()) {
    std::fprintf(stderr, "gpuop gfd: --rescan-interval: %s\n", rescan.status().message().c_str());
    return kExitUsage;
  }
  o.rescan_interval = *rescan;
  o.nvml_retry_interval = *rescan;
  o.host_root = g.host_root;
  o.direct_labels = f.direct_labels;
  o.node_feature_api = f.node_feature_api;
  o.node_name = f.node_name;
  o.namespace_name = f.namespace_name;
  const std::string lib = NvmlLibraryPath(g);
  o.open_nvml = [lib] { return nvml::Client::Open(lib); };

  deviceplugin::ConfigOverrides overrides;
  std::string mig = f.mig_strategy;
  if (mig.empty() && env.contains("GFD_MIG_STRATEGY")) mig = env["GFD_MIG_STRATEGY"];
  if (!mig.empty()) overrides.mig_strategy = mig;

  deviceplugin::ConfigWatcher::Options wo;
  wo.selection = deviceplugin::SelectionFromEnv(env, f.config_file);
  if (wo.selection.node_name.empty()) wo.selection.node_name = f.node_name;
  wo.env = env;
  wo.overrides = overrides;

  std::unique_ptr<kube::Client> kube_client;
  if (o.direct_labels || o.node_feature_api || wo.selection.PerNode()) {
    auto c = NewKubeClient(f.kube, "gpuop-gfd");
    if (c.ok()) {
      kube_client = std::move(c).value();
      o.client = kube_client.get();
      if (wo.selection.PerNode() && !wo.selection.node_name.empty()) wo.client = o.client;
    } else if (o.direct_labels || o.node_feature_api) {
      return Fail("gfd", c.status());
    } else {
      LogWarn("no API server: the node's config label is not followed", {{"error", c.status()}});
    }
  }

  deviceplugin::LoadedConfig initial;
  auto watcher = deviceplugin::ConfigWatcher::Load(std::move(wo), &initial);
  if (!watcher.ok()) return Fail("gfd", watcher.status());

  const gfd::Settings settings = gfd::CompleteFromConfigFile(f.given, initial.config.gfd);
  if (*settings.sleep_interval == "infinite") {
    o.sleep_interval = std::nullopt;
  } else {
    auto d = ParseDuration(*settings.sleep_interval);
    if (!d.ok()) {
      std::fprintf(stderr,
                   "gpuop gfd: --sleep-interval (or flags.gfd.sleepInterval): %s (or "
                   "\"infinite\")\n",
                   d.status().message().c_str());
      return kExitUsage;
    }
    o.sleep_interval = *d;
  }
  o.machine_type_file = *settings.machine_type_file;
  // Upstream writes the file only without the NodeFeature API; an output
  // file that is given is taken as it is, "" turning it off.
  if (settings.output_file) {
    o.output_file = *settings.output_file;
  } else if (!f.node_feature_api) {
    o.output_file = JoinRoot(g.host_root, gfd::kDefaultFeaturesFile);
  }
  o.timestamp = !*settings.no_timestamp;
  if (Status s = gfd::ValidateOptions(o); !s.ok()) return Fail("gfd", s);

  if (*settings.oneshot) {
    (*watcher)->Stop();
    auto labels = gfd::Daemon::RunOnce(o, initial.config);
    if (!labels.ok()) return Fail("gfd", labels.status());
    LogInfo("labels written (oneshot)",
            {{"labels", labels->size()}, {"file", o.output_file}, {"config", initial.origin}});
    return kExitOk;
  }

  gfd::Service service({.daemon = std::move(o),
                        .watcher = std::move(watcher).value(),
                        .initial = std::move(initial),
                        .sleep_interval = *settings.sleep_interval});
  manager::Manager m({.name = "gfd", .on_hangup = [&service] { service.Reload(); }});
  m.Add("gfd", [&service](std::stop_token stop) { return service.Run(stop); });
  return m.Run(signals);
}

}  // namespace

void RegisterGfdCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<GfdFlags>();
  auto* cmd = app.add_subcommand(
      "gfd",
      "Node DaemonSet: GPU feature discovery. Labels the node's GPUs (nvidia.com/gpu.product, "
      "gpu.count, mig.*, ...) into the NFD features file, the NFD NodeFeature object or the "
      "Node's own labels, and relabels when the GPU or MIG layout or the config changes.");
  auto* oneshot = cmd->add_flag("--oneshot", f->oneshot, "Label once and exit (the file stays)")
                      ->envname("GFD_ONESHOT");
  auto* sleep =
      cmd->add_option("--sleep-interval", f->sleep_interval,
                      "Relabel at least this often (e.g. 60s; \"infinite\": only on changes)")
          ->envname("GFD_SLEEP_INTERVAL")
          ->capture_default_str();
  cmd->add_option("--rescan-interval", f->rescan_interval,
                  "How often NVML is re-read for GPU and MIG layout changes (and retried "
                  "while it does not open)")
      ->capture_default_str();
  auto* out = cmd->add_option("--output-file", f->output_file,
                              "The NFD features file (default <host-root>" +
                                  std::string(gfd::kDefaultFeaturesFile) +
                                  ", none with --use-node-feature-api); \"\": none")
                  ->envname("GFD_OUTPUT_FILE");
  auto* no_timestamp =
      cmd->add_flag("--no-timestamp", f->no_timestamp, "Leave out nvidia.com/gfd.timestamp")
          ->envname("GFD_NO_TIMESTAMP");
  cmd->add_option("--mig-strategy", f->mig_strategy,
                  "none|single|mixed (env GFD_MIG_STRATEGY, then MIG_STRATEGY)")
      ->check(CLI::IsMember({"none", "single", "mixed"}));
  cmd->add_option("--config", f->config_file,
                  "The device plugin's config file, for the sharing labels and flags.gfd (default "
                  "$CONFIG_FILE, or the per-node scheme CONFIG_FILE_SRCDIR + NODE_LABEL)");
  auto* machine_type = cmd->add_option("--machine-type-file", f->machine_type_file,
                                       "Host path of the DMI product name (under --host-root)")
                           ->envname("GFD_MACHINE_TYPE_FILE")
                           ->capture_default_str();
  cmd->add_flag("--direct-labels", f->direct_labels,
                "Patch the Node's own labels (no NFD needed); labels it no longer produces are "
                "removed, others never touched")
      ->envname("GPUOP_GFD_DIRECT_LABELS");
  cmd->add_flag("--use-node-feature-api,!--no-use-node-feature-api", f->node_feature_api,
                "Write the NFD NodeFeature object nvidia-features-for-<node>")
      ->envname("USE_NODE_FEATURE_API");
  cmd->add_option("--node-name", f->node_name, "This node's name")->envname("NODE_NAME");
  cmd->add_option("--namespace", f->namespace_name, "Namespace of the NodeFeature object")
      ->envname("OPERATOR_NAMESPACE");
  AddKubeFlags(cmd, &f->kube);
  cmd->callback([&g, action, f, oneshot, sleep, out, no_timestamp, machine_type] {
    if (oneshot->count() > 0) f->given.oneshot = f->oneshot;
    if (sleep->count() > 0) f->given.sleep_interval = f->sleep_interval;
    if (out->count() > 0) f->given.output_file = f->output_file;
    if (no_timestamp->count() > 0) f->given.no_timestamp = f->no_timestamp;
    if (machine_type->count() > 0) f->given.machine_type_file = f->machine_type_file;
    *action = [&g, f] { return RunGfd(g, *f); };
  });
}

}  // namespace gpuop::cli
