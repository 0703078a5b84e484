#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "base/files.h"
#include "base/version.h"
#include "cli/cli.h"
#include "host/driver_files.h"

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

std::string NvmlLibraryPath(const GlobalOptions& g, const std::string& driver_root) {
  static const std::string kSoname = "libnvidia-ml.so.1";
  if (!g.nvml_lib.empty()) return g.nvml_lib;
  // In the process's own library path: the host's, or what the container
  // runtime injected (runtimeClass nvidia, CDI). NODELETE: loaded again next.
  if (void* h = dlopen(kSoname.c_str(), RTLD_LAZY | RTLD_NODELETE)) {
    dlclose(h);
    return kSoname;
  }
  // A container the runtime did not give the driver (the toolkit's, before
  // any runtime is configured): the driver root under the host root, found
  // through its ld.so.cache, as NVIDIA's toolkit finds it.
  std::string root = driver_root;
  if (root.empty()) {
    const char* env = std::getenv("NVIDIA_DRIVER_ROOT");
    root = env && *env ? env : "/";
  }
  const std::string read_root = JoinRoot(g.host_root, root);
  auto found = host::FindLibraryBySoname(read_root, kSoname);
  return found.ok() ? JoinRoot(read_root, *found) : kSoname;
}

}  // namespace gpuop::cli
