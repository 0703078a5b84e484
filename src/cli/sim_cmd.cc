#include "cli/cli.h"

namespace gpuop::cli {

void RegisterSimCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto* sim = app.add_subcommand(
      "sim",
      "The simulator: simulated GPUs and host roots for trying and testing gpuop "
      "without GPUs (not for production)");
  sim->require_subcommand(1);
  RegisterSimGpuCommand(*sim, g, action);
  RegisterSimHostRootCommand(*sim, g, action);
  RegisterSimApiserverCommand(*sim, g, action);
  RegisterSimKubeletCommand(*sim, g, action);
  RegisterSimClusterCommand(*sim, g, action);
  RegisterSimDriverCommands(*sim, g, action);
}

}  // namespace gpuop::cli
