#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "sim/host/host_root.h"
#include "sim/nvml/machine.h"

namespace gpuop::cli {
namespace {

struct SimHostRootFlags {
  std::string machine = "dgx-h100";
  std::string seed;
  std::string nvml_sim;
  std::string dir;
};

int RunSimHostRoot(const SimHostRootFlags& f) {
  // Same seed rule as libnvml-sim.so (GPUOP_SIM_SEED, default empty), so the
  // UUIDs under /proc match what NVML reports.
  auto machine = sim::LoadMachine(f.machine, f.seed);
  if (!machine.ok()) return Fail("sim host-root", machine.status());
  auto elf_machine = sim::HostElfMachine();
  if (!elf_machine.ok()) return Fail("sim host-root", elf_machine.status());
  sim::HostRootOptions options;
  options.elf_machine = *elf_machine;
  options.nvml_sim_library = f.nvml_sim.empty() ? sim::NvmlSimBesideExecutable() : f.nvml_sim;
  options.cuda_sim_library = sim::CudaSimBesideExecutable();
  auto plan = sim::PlanHostRoot(*machine, options);
  if (!plan.ok()) return Fail("sim host-root", plan.status());
  auto result = sim::WriteHostRoot(f.dir, *plan);
  if (!result.ok()) return Fail("sim host-root", result.status());
  std::printf(
      "host root %s: machine %s, %zu GPUs, %zu device nodes%s, %zu driver libraries "
      "(NVML: %s), driver %s\nld.so.cache: %s\n",
      result->root.c_str(), machine->name.c_str(), result->gpus, result->device_nodes,
      result->device_nodes_are_files ? " (regular files: mknod not permitted)" : "",
      result->libraries,
      options.nvml_sim_library.empty() ? "stub" : options.nvml_sim_library.c_str(),
      machine->driver_version.c_str(), result->ld_cache.c_str());
  return kExitOk;
}

}  // namespace

void RegisterSimHostRootCommand(CLI::App& sim, const GlobalOptions&, Action* action) {
  auto flags = std::make_shared<SimHostRootFlags>();
  auto* cmd = sim.add_subcommand(
      "host-root",
      "Lay out the host file system of a simulated GPU node under DIR (device "
      "nodes, /proc, /sys, driver libraries and ld.so.cache, binaries, sockets)");
  cmd->add_option("--machine", flags->machine, "Machine preset or YAML file")
      ->envname("GPUOP_SIM_MACHINE")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed,
                  "Seed for GPU UUIDs and serials; use the same value as the NVML simulator sees")
      ->envname("GPUOP_SIM_SEED");
  cmd->add_option("--nvml-sim", flags->nvml_sim,
                  "libnvml-sim.so to install as libnvidia-ml.so.<version> (default: "
                  "<gpuop dir>/../lib/libnvml-sim.so when present, else a stub)");
  cmd->add_option("DIR", flags->dir, "Directory to lay the host root out in (not /)")->required();
  cmd->callback([flags, action] { *action = [flags] { return RunSimHostRoot(*flags); }; });
}

}  // namespace gpuop::cli
