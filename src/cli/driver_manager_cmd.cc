// `gpuop driver-manager uninstall_driver|preflight_check`: the driver pod's
// init container (driver_manager/manager.h), NVIDIA's k8s-driver-manager
// environment names (driver_manager/options.h). Flags win over the
// environment. Exit 0 when the driver container may (re)load the driver, 1
// when it may not (the message says why and what to do), 2 on a bad flag or
// variable.
#include <cstdio>
#include <memory>
#include <stop_token>
#include <thread>

#include "base/log.h"
#include "cli/cli.h"
#include "driver_manager/manager.h"
#include "driver_manager/options.h"

namespace gpuop::cli {
namespace {

struct DriverManagerFlags {
  std::string node_name;
  std::string run_dir;
  KubeFlags kube;
};

int RunUninstallDriver(const GlobalOptions& g, const DriverManagerFlags& f) {
  StopSignals signals;  // before any thread starts
  driver_manager::Options base;
  base.host_root = g.host_root;
  if (!f.node_name.empty()) base.node_name = f.node_name;
  if (!f.run_dir.empty()) base.run_dir = f.run_dir;
  auto o = driver_manager::OptionsFromEnv(ProcessEnvironment(), base);
  if (!o.ok()) {
    std::fprintf(stderr, "gpuop driver-manager: %s\n", o.status().message().c_str());
    return kExitUsage;
  }
  auto client = NewKubeClient(f.kube, "gpuop-driver-manager");
  if (!client.ok()) {
    std::fprintf(stderr, "gpuop driver-manager: %s\n", client.status().message().c_str());
    return kExitFailure;
  }
  auto kernel = NodeKernelModules(g.host_root);
  if (!kernel.ok()) {
    std::fprintf(stderr, "gpuop driver-manager: %s\n", kernel.status().message().c_str());
    return kExitFailure;
  }
  kube::EventRecorder events(**client,
                             {.component = "nvidia-driver-manager", .host = o->node_name});

  Status s = Status::Ok();
  {
    // SIGTERM (the pod is deleted) ends the run; it still restores the labels.
    StopOnSignal stop(signals);
    s = driver_manager::UninstallDriver(
        *o, {.client = **client, .kernel = **kernel, .events = events}, stop.token());
    events.Flush(std::chrono::seconds(5));
  }
  if (!s.ok()) {
    std::fprintf(stderr, "gpuop driver-manager: %s\n", s.message().c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void RegisterDriverManagerCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<DriverManagerFlags>();
  auto* cmd = app.add_subcommand(
      "driver-manager",
      "The driver pod's init container (NVIDIA's k8s-driver-manager environment): makes way "
      "for a driver (re)load on this node");
  cmd->require_subcommand(1);
  auto* uninstall = cmd->add_subcommand(
      "uninstall_driver",
      "Pause the GPU operands, evict GPU pods, unload the NVIDIA kernel modules, restore the "
      "operands; nothing when the loaded driver already has this configuration");
  AddKubeFlags(uninstall, &f->kube);
  uninstall->add_option("--node-name", f->node_name, "This node's name (default: $NODE_NAME)");
  uninstall->add_option("--run-dir", f->run_dir,
                        "Where the driver container keeps nvidia-driver.state and "
                        "nvidia-driver.pid (default: /run/nvidia)");
  uninstall->callback([f, action, &g] { *action = [f, &g] { return RunUninstallDriver(g, *f); }; });
  auto* preflight =
      cmd->add_subcommand("preflight_check", "Accepted for compatibility; does nothing");
  preflight->callback([action] { *action = [] { return kExitOk; }; });
}

}  // namespace gpuop::cli
