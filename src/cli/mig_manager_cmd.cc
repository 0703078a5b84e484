// `gpuop mig-manager`: the node DaemonSet that applies the MIG layout its
// Node's nvidia.com/mig.config label names (mig/manager.h). Upstream's
// environment names: NODE_NAME, CONFIG_FILE, WITH_REBOOT, CDI_ENABLED,
// NVIDIA_DRIVER_ROOT, DEFAULT_GPU_CLIENTS_NAMESPACE.
#include <cstdio>
#include <memory>
#include <string>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "host/driver_ready.h"
#include "kube/event_recorder.h"
#include "manager/manager.h"
#include "mig/manager.h"
#include "mig/node_commands.h"
#include "nvml/client.h"
#include "toolkit/toolkit_core.h"

namespace gpuop::cli {
namespace {

struct MigManagerFlags {
  KubeFlags kube;
  std::string node_name;
  std::string config_file;
  std::string clients_namespace = "gpu-operator";
  std::string clients_timeout = "5m";
  std::string busy_retry_interval = "1m";
  std::string state_dir = "/etc/nvidia-mig-manager";
  bool with_reboot = false;
  std::string gpu_reset_command;  // "": nvidia-smi -r under the driver root
  std::string reboot_command;     // "": chroot <host-root> reboot
  bool cdi_enabled = false;
  std::string cdi_output = "/var/run/cdi/nvidia.yaml";
  std::string driver_root = "/";
  std::string hook_path;
  std::string toolkit_install_dir = "/usr/local/nvidia/toolkit";
};

int RunMigManager(const GlobalOptions& g, const MigManagerFlags& f) {
  StopSignals signals(/*hangup=*/true);  // before any thread starts
  auto timeout = ParseDuration(f.clients_timeout);
  if (!timeout.ok()) {
    std::fprintf(stderr, "gpuop mig-manager: --clients-timeout: %s\n",
                 timeout.status().message().c_str());
    return kExitUsage;
  }
  auto busy_retry = ParseDuration(f.busy_retry_interval);
  if (!busy_retry.ok()) {
    std::fprintf(stderr, "gpuop mig-manager: --busy-retry-interval: %s\n",
                 busy_retry.status().message().c_str());
    return kExitUsage;
  }
  auto client = NewKubeClient(f.kube, "gpuop-mig-manager");
  if (!client.ok()) return Fail("mig-manager", client.status());
  kube::EventRecorder events(**client, {.component = "nvidia-mig-manager"});

  mig::ManagerOptions o;
  o.node_name = f.node_name;
  o.client = client->get();
  o.events = &events;
  const std::string lib = NvmlLibraryPath(g);
  o.open_nvml = [lib] { return nvml::Client::Open(lib); };
  o.config_file = f.config_file;
  o.host_root = g.host_root;
  o.state_dir = f.state_dir;
  o.clients_namespace = f.clients_namespace;
  o.clients_timeout = *timeout;
  o.busy_retry_interval = *busy_retry;
  // nvidia-smi resets a GPU; it lives in the driver root, as the host sees
  // it: the validator's driver-ready says where on this node, when it is a
  // host driver under a ClusterPolicy that deploys driver containers.
  o.gpu_reset = mig::GpuResetCommand(
      f.gpu_reset_command.empty()
          ? "chroot " + JoinRoot(g.host_root, host::NodeDriverRoot(g.host_root, f.driver_root)) +
                " nvidia-smi -r -i {bus_id}"
          : f.gpu_reset_command);
  o.with_reboot = f.with_reboot;
  o.reboot = mig::RebootCommand(f.reboot_command.empty() ? "chroot " + g.host_root + " reboot"
                                                         : f.reboot_command);
  if (f.cdi_enabled) {
    o.cdi_output = f.cdi_output;
    o.cdi.host_root = g.host_root;
    o.cdi.driver_root = host::NodeDriverRoot(g.host_root, f.driver_root);
    o.cdi.hook_path = f.hook_path.empty() ? f.toolkit_install_dir + "/gpuop" : f.hook_path;
  }
  if (Status s = mig::ValidateManagerOptions(o); !s.ok()) {
    std::fprintf(stderr, "gpuop mig-manager: %s\n", s.message().c_str());
    return kExitUsage;
  }

  mig::Manager mig_manager(o);
  manager::Manager m({.name = "mig-manager", .events = &events, .on_hangup = [&mig_manager] {
                        mig_manager.RequestReconcile();
                      }});
  m.Add("mig-manager", [&](std::stop_token stop) { return mig_manager.Run(stop); });
  LogInfo("mig-manager started", {{"node", o.node_name},
                                  {"config_file", o.config_file},
                                  {"cdi", o.cdi_output.empty() ? "off" : o.cdi_output},
                                  {"with_reboot", o.with_reboot}});
  return m.Run(signals);
}

}  // namespace

void RegisterMigManagerCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<MigManagerFlags>();
  auto* cmd = app.add_subcommand(
      "mig-manager",
      "Apply the MIG layout the node's nvidia.com/mig.config label names, pausing the GPU "
      "clients while it changes; reports nvidia.com/mig.config.state");
  AddKubeFlags(cmd, &f->kube);
  cmd->add_option("--node-name", f->node_name, "This node's name")->envname("NODE_NAME");
  cmd->add_option("--config-file", f->config_file, "The mig-parted config (version: v1)")
      ->envname("CONFIG_FILE");
  cmd->add_option("--clients-namespace", f->clients_namespace,
                  "Namespace of the GPU client pods to wait for")
      ->envname("DEFAULT_GPU_CLIENTS_NAMESPACE")
      ->capture_default_str();
  cmd->add_option("--clients-timeout", f->clients_timeout,
                  "How long to wait for the paused GPU clients' pods to leave")
      ->capture_default_str();
  cmd->add_option("--busy-retry-interval", f->busy_retry_interval,
                  "When to try a config again that failed because processes used a GPU")
      ->capture_default_str();
  cmd->add_option("--state-dir", f->state_dir,
                  "Host directory keeping the selected config across reboots")
      ->capture_default_str();
  cmd->add_flag("--with-reboot", f->with_reboot,
                "Reboot the node when a MIG mode change needs it and a GPU reset cannot do it")
      ->envname("WITH_REBOOT");
  cmd->add_option("--gpu-reset-command", f->gpu_reset_command,
                  "Resets one GPU; {index} and {bus_id} are filled in (default: chroot "
                  "<host-root><driver-root> nvidia-smi -r -i {bus_id})")
      ->envname("GPUOP_GPU_RESET_COMMAND");
  cmd->add_option("--reboot-command", f->reboot_command,
                  "Reboots the node (default: chroot <host-root> reboot)")
      ->envname("GPUOP_REBOOT_COMMAND");
  cmd->add_flag("--cdi-enabled", f->cdi_enabled, "Regenerate the CDI spec after a change")
      ->envname("CDI_ENABLED");
  cmd->add_option("--cdi-output", f->cdi_output, "The CDI spec (host path)")
      ->envname("GPUOP_CDI_OUTPUT")
      ->capture_default_str();
  cmd->add_option("--driver-root", f->driver_root, "The driver's root as the host sees it")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str();
  cmd->add_option("--hook-path", f->hook_path,
                  "The gpuop binary the CDI hooks run, as the host sees it (default: "
                  "<toolkit-install-dir>/gpuop)")
      ->envname("GPUOP_HOOK_PATH");
  cmd->add_option("--toolkit-install-dir", f->toolkit_install_dir,
                  "Where the toolkit installed gpuop on the host")
      ->envname("GPUOP_TOOLKIT_INSTALL_DIR")
      ->capture_default_str();
  cmd->callback([f, action, &g] { *action = [f, &g] { return RunMigManager(g, *f); }; });
}

}  // namespace gpuop::cli
