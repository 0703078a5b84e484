#include <cstdio>

#include "base/log.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  using namespace gpuop;
  cli::GlobalOptions g;
  cli::Action action;

  CLI::App app{
      "gpuop: the GPU Operator for Kubernetes (one binary for the operator and "
      "every node component)",
      "gpuop"};
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the subcommand
  app.add_option("--log-level", g.log_level, "debug|info|warn|error")
      ->envname("GPUOP_LOG_LEVEL")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_option("--log-format", g.log_format, "text|json")
      ->envname("GPUOP_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--host-root", g.host_root,
                 "Where the host's file system is mounted (the chart mounts it at /host)")
      ->envname("GPUOP_HOST_ROOT");
  app.add_option("--nvml-lib", g.nvml_lib,
                 "NVML library to load (default libnvidia-ml.so.1; the simulator is "
                 "build/lib/libnvml-sim.so)")
      ->envname("GPUOP_NVML_LIB");

  cli::RegisterVersionCommand(app, g, &action);
  cli::RegisterNvmlCommand(app, g, &action);
  cli::RegisterCdiCommand(app, g, &action);
  cli::RegisterToolkitCommand(app, g, &action);
  cli::RegisterRuntimeCommand(app, g, &action);
  cli::RegisterOperatorCommand(app, g, &action);
  cli::RegisterDevicePluginCommand(app, g, &action);
  cli::RegisterGfdCommand(app, g, &action);
  cli::RegisterNodeDiscoveryCommand(app, g, &action);
  cli::RegisterExporterCommand(app, g, &action);
  cli::RegisterMigCommand(app, g, &action);
  cli::RegisterMigManagerCommand(app, g, &action);
  cli::RegisterValidatorCommand(app, g, &action);
  cli::RegisterDriverManagerCommand(app, g, &action);
  cli::RegisterDraPluginCommand(app, g, &action);
  cli::RegisterCudaCommand(app, g, &action);
  cli::RegisterLifecycleCommands(app, g, &action);
  cli::RegisterSimCommand(app, g, &action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // CLI11 returns 0 for --help; every real parse error is a usage error.
    return rc == 0 ? cli::kExitOk : cli::kExitUsage;
  }

  LogLevel level{};
  LogFormat format{};
  ParseLogLevel(g.log_level, &level);
  ParseLogFormat(g.log_format, &format);
  SetLogLevel(level);
  SetLogFormat(format);

  if (!action) {
    std::fputs(app.help().c_str(), stderr);
    return cli::kExitUsage;
  }
  return action();
}
