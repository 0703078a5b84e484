// RunCommandLine (cli.h): the options every gpuop command shares, parsing and
// dispatch; main.cc (gpuop) and sim_main.cc (gpuop-sim) differ only in the
// subcommands they register.
#include <cstdio>

#include "base/log.h"
#include "cli/cli.h"

namespace gpuop::cli {

int Fail(std::string_view command, const Status& s, int code) {
  std::fprintf(stderr, "gpuop %.*s: %s\n", static_cast<int>(command.size()), command.data(),
               s.message().c_str());
  return code;
}

int RunCommandLine(int argc, char** argv, const std::string& description,
                   const RegisterCommands& register_commands) {
  GlobalOptions g;
  Action action;
  CLI::App app{description, "gpuop"};
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
  register_commands(app, g, &action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // CLI11 returns 0 for --help; every real parse error is a usage error.
    return rc == 0 ? kExitOk : kExitUsage;
  }

  LogLevel level{};
  LogFormat format{};
  ParseLogLevel(g.log_level, &level);
  ParseLogFormat(g.log_format, &format);
  SetLogLevel(level);
  SetLogFormat(format);

  if (!action) {
    std::fputs(app.help().c_str(), stderr);
    return kExitUsage;
  }
  return action();
}

}  // namespace gpuop::cli
