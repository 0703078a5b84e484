// `gpuop toolkit`: the DaemonSet mode that installs gpuop for the runtime's
// hooks and keeps the node's CDI spec current (toolkit/toolkit_daemon.h).
// Flags and environment only; exit 2 on a bad flag, 0 on SIGTERM.
#include <cstdio>
#include <memory>
#include <string>

#include "base/strings.h"
#include "cli/cli.h"
#include "toolkit/toolkit_daemon.h"

namespace gpuop::cli {
namespace {

struct ToolkitFlags {
  toolkit::ToolkitOptions options;
  std::string resync = "5m";
  std::string check_interval = "5s";
};

int Usage(const Status& s) {
  std::fprintf(stderr, "gpuop toolkit: %s\n", s.message().c_str());
  return kExitUsage;
}

int RunToolkitCommand(const GlobalOptions& g, ToolkitFlags f) {
  f.options.host_root = g.host_root;
  f.options.nvml_lib = [g](const std::string& driver_root) {
    return NvmlLibraryPath(g, driver_root);
  };
  auto resync = ParseDuration(f.resync);
  if (!resync.ok()) return Usage(resync.status().Annotate("--resync"));
  auto check = ParseDuration(f.check_interval);
  if (!check.ok()) return Usage(check.status().Annotate("--check-interval"));
  f.options.timing.resync = *resync;
  f.options.timing.check_interval = *check;
  Status valid = toolkit::ValidateToolkitOptions(f.options);
  if (!valid.ok()) return Usage(valid);
  return toolkit::RunToolkit(f.options);
}

}  // namespace

void RegisterToolkitCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<ToolkitFlags>();
  toolkit::ToolkitOptions& o = f->options;
  auto* cmd = app.add_subcommand(
      "toolkit",
      "Node DaemonSet: install gpuop for the runtime's CDI hooks and keep the CDI spec current "
      "(regenerated on MIG, driver and device changes). Paths are host paths under --host-root.");
  cmd->add_option("--cdi-output", o.cdi_output, "The CDI spec to write (.json: JSON, else YAML)")
      ->envname("GPUOP_CDI_OUTPUT")
      ->capture_default_str();
  cmd->add_option("--driver-root", o.driver_root, "The driver's root as the host sees it")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str();
  cmd->add_option("--dev-root", o.dev_root,
                  "Where /dev is, as the host sees it (default: driver root)")
      ->envname("NVIDIA_DEV_ROOT");
  cmd->add_option("--hook-path", o.hook_path,
                  "gpuop as the host's container runtime runs it (default <install-dir>/gpuop)")
      ->envname("GPUOP_HOOK_PATH");
  cmd->add_option("--install-dir", o.install_dir,
                  "Where to copy this executable for the hooks (empty: do not copy)")
      ->envname("GPUOP_TOOLKIT_INSTALL_DIR")
      ->capture_default_str();
  cmd->add_option("--validations-dir", o.validations_dir, "Where toolkit-ready is written")
      ->envname("GPUOP_VALIDATIONS_DIR")
      ->capture_default_str();
  cmd->add_option("--trigger-file", o.trigger_file,
                  "Touch this file to make the toolkit regenerate (the MIG manager does)")
      ->envname("GPUOP_TOOLKIT_TRIGGER_FILE")
      ->capture_default_str();
  cmd->add_option("--status-file", o.status_file, "Where the toolkit reports its state (JSON)")
      ->envname("GPUOP_TOOLKIT_STATUS_FILE")
      ->capture_default_str();
  cmd->add_option("--resync", f->resync, "Regenerate at least this often (backstop)")
      ->envname("GPUOP_TOOLKIT_RESYNC")
      ->capture_default_str();
  cmd->add_option("--check-interval", f->check_interval,
                  "How often NVML is re-opened to compare the GPU/MIG fingerprint")
      ->envname("GPUOP_TOOLKIT_CHECK_INTERVAL")
      ->capture_default_str();
  cmd->callback([&g, action, f] { *action = [&g, f] { return RunToolkitCommand(g, *f); }; });
}

}  // namespace gpuop::cli
