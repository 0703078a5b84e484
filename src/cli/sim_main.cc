// gpuop-sim: the simulator's commands that carry a Kubernetes API server
// (`gpuop sim apiserver`, `gpuop sim cluster`). gpuop hands them over to this
// binary, which lies beside it, so that no gpuop component maps the
// emulator's HTTP, TLS and compression libraries (see docs/performance.md).
#include "cli/cli.h"

int main(int argc, char** argv) {
  using namespace gpuop::cli;
  return RunCommandLine(argc, argv,
                        "gpuop-sim: the Kubernetes API emulator and the simulated cluster "
                        "(run as `gpuop sim apiserver|cluster`; not for production)",
                        [](CLI::App& app, const GlobalOptions& g, Action* action) {
                          auto* sim = app.add_subcommand("sim", "The simulator");
                          sim->require_subcommand(1);
                          RegisterSimApiserverCommand(*sim, g, action);
                          RegisterSimClusterCommand(*sim, g, action);
                        });
}
