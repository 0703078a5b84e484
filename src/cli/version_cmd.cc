#include <cstdio>

#include "base/version.h"
#include "cli/cli.h"

namespace gpuop::cli {

void RegisterVersionCommand(CLI::App& app, const GlobalOptions&, Action* action) {
  auto* cmd = app.add_subcommand("version", "Print the version, git commit and build type");
  cmd->callback([action] {
    *action = [] {
      std::printf("gpuop %s\ncommit: %s\nbuild: %s\n", kVersion, kGitCommit, kBuildType);
      return kExitOk;
    };
  });
}

std::string NvmlLibraryPath(const GlobalOptions& g) {
  return g.nvml_lib.empty() ? std::string("libnvidia-ml.so.1") : g.nvml_lib;
}

}  // namespace gpuop::cli
