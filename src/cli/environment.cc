// ProcessEnvironment, NodeKernelModules and DefaultCdiHookPath (cli.h).
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "base/files.h"
#include "cli/cli.h"
#include "sim/host/sim_kernel.h"

namespace gpuop::cli {

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

Result<std::unique_ptr<host::KernelModules>> NodeKernelModules(const std::string& host_root) {
  const char* sim_state = std::getenv("GPUOP_SIM_STATE");
  if (sim_state != nullptr && *sim_state != '\0') return sim::SimKernelModulesFromEnv();
  // /proc/modules is the kernel's whatever the mount namespace; /sys/module
  // is read through the host root the chart mounts.
  return host::SystemKernelModules("/", host_root);
}

std::string DefaultCdiHookPath(const GlobalOptions& g) {
  if (JoinRoot(g.host_root, "/") != "/") return kToolkitHookPath;
  char buf[PATH_MAX];
  if (::realpath("/proc/self/exe", buf) == nullptr) return "";
  return buf;
}

}  // namespace gpuop::cli
