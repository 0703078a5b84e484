#include "cli/cli.h"

int main(int argc, char** argv) {
  using namespace gpuop::cli;
  return RunCommandLine(
      argc, argv,
      "gpuop: the GPU Operator for Kubernetes (one binary for the operator and every node "
      "component)",
      [](CLI::App& app, const GlobalOptions& g, Action* action) {
        RegisterVersionCommand(app, g, action);
        RegisterNvmlCommand(app, g, action);
        RegisterCdiCommand(app, g, action);
        RegisterToolkitCommand(app, g, action);
        RegisterRuntimeCommand(app, g, action);
        RegisterOperatorCommand(app, g, action);
        RegisterDevicePluginCommand(app, g, action);
        RegisterGfdCommand(app, g, action);
        RegisterNodeDiscoveryCommand(app, g, action);
        RegisterExporterCommand(app, g, action);
        RegisterMigCommand(app, g, action);
        RegisterMigManagerCommand(app, g, action);
        RegisterValidatorCommand(app, g, action);
        RegisterDriverManagerCommand(app, g, action);
        RegisterDraPluginCommand(app, g, action);
        RegisterCudaCommand(app, g, action);
        RegisterLifecycleCommands(app, g, action);
        RegisterDoctorCommand(app, g, action);
        RegisterSimCommand(app, g, action);
      });
}
