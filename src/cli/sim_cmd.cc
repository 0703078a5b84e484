#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/files.h"
#include "cli/cli.h"

namespace gpuop::cli {
namespace {

// The command line this process was started with.
std::vector<std::string> ProcessArguments() {
  std::vector<std::string> args;
  auto text = ReadFile("/proc/self/cmdline");
  if (!text.ok()) return args;
  size_t start = 0;
  for (size_t i = 0; i < text->size(); ++i) {
    if ((*text)[i] == '\0') {
      args.push_back(text->substr(start, i - start));
      start = i + 1;
    }
  }
  return args;
}

// `gpuop sim <name> ...` runs as gpuop-sim, the binary beside gpuop that
// carries the API emulator: the same arguments, handed over by exec.
void AddHandedOverCommand(CLI::App& sim, const std::string& name, const std::string& help,
                          Action* action) {
  auto* cmd = sim.add_subcommand(name, help + " (runs gpuop-sim; --help lists its flags)");
  cmd->prefix_command();  // everything after the name goes to gpuop-sim unparsed
  cmd->set_help_flag();   // so does --help
  cmd->fallthrough(false);
  cmd->callback([action, name] {
    *action = [name]() -> int {
      char self[PATH_MAX];
      if (::realpath("/proc/self/exe", self) == nullptr) {
        std::fprintf(stderr, "error: cannot find this binary (/proc/self/exe): %s\n",
                     std::strerror(errno));
        return kExitFailure;
      }
      std::string path = std::string(self);
      path = path.substr(0, path.rfind('/') + 1) + "gpuop-sim";
      std::vector<std::string> args = ProcessArguments();
      if (args.empty()) args = {"gpuop", "sim", name};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(path.c_str(), argv.data());
      std::fprintf(stderr,
                   "error: `gpuop sim %s` is run by gpuop-sim, which should be at %s: %s. It is "
                   "built beside gpuop (`make build` builds build/bin/gpuop-sim); the gpuop image "
                   "does not carry it: run the simulator from a build.\n",
                   name.c_str(), path.c_str(), std::strerror(errno));
      return kExitFailure;
    };
  });
}

}  // namespace

void RegisterSimCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto* sim = app.add_subcommand(
      "sim",
      "The simulator: simulated GPUs and host roots for trying and testing gpuop "
      "without GPUs (not for production)");
  sim->require_subcommand(1);
  RegisterSimGpuCommand(*sim, g, action);
  RegisterSimHostRootCommand(*sim, g, action);
  AddHandedOverCommand(*sim, "apiserver", "The Kubernetes API emulator", action);
  RegisterSimKubeletCommand(*sim, g, action);
  AddHandedOverCommand(*sim, "cluster",
                       "A simulated Kubernetes cluster with GPU nodes that runs real pods "
                       "(docs/simulated-cluster.md)",
                       action);
  RegisterSimDriverCommands(*sim, g, action);
}

}  // namespace gpuop::cli
