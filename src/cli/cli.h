// The gpuop command line: one binary, one subcommand per component.
//
// main.cc owns the CLI11 application and the options every subcommand shares
// (GlobalOptions). Each subcommand lives in its own file and exposes one
// Register function that adds its CLI11 subcommand and, when that subcommand
// is chosen, sets the action main() runs. Subcommand files parse flags, build
// the component and run it; they hold no logic of their own.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/signals.h"
#include "base/status.h"
#include "host/kernel_modules.h"
#include "kube/client.h"

namespace gpuop::cli {

// The process environment as a map (for components that read upstream's env names).
std::map<std::string, std::string> ProcessEnvironment();

struct GlobalOptions {
  std::string log_level = "info";
  std::string log_format = "text";
  std::string host_root = "/";  // --host-root / GPUOP_HOST_ROOT
  std::string nvml_lib;         // --nvml-lib / GPUOP_NVML_LIB; empty: libnvidia-ml.so.1
};

// The node's kernel modules: the simulated node's (sim/host/sim_kernel.h)
// when GPUOP_SIM_STATE is set, as the simulator sets it in every container of a
// simulated GPU node, else the running kernel's under `host_root`.
Result<std::unique_ptr<host::KernelModules>> NodeKernelModules(const std::string& host_root);

// What main() runs once flags are parsed; returns the process exit code.
using Action = std::function<int()>;

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints "gpuop <command>: <message>" to stderr and returns `code`.
int Fail(std::string_view command, const Status& s, int code = kExitFailure);

// Adds a binary's subcommands to its application.
using RegisterCommands = std::function<void(CLI::App& app, const GlobalOptions& g, Action* action)>;
// Parses the command line (the global options, then what `register_commands`
// added), sets up logging and runs the chosen subcommand; returns the exit code.
int RunCommandLine(int argc, char** argv, const std::string& description,
                   const RegisterCommands& register_commands);

void RegisterVersionCommand(CLI::App& app, const GlobalOptions& g, Action* action);
void RegisterNvmlCommand(CLI::App& app, const GlobalOptions& g, Action* action);
void RegisterSimCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop cdi generate|list|hook`, `gpuop toolkit`, `gpuop runtime configure`.
void RegisterCdiCommand(CLI::App& app, const GlobalOptions& g, Action* action);
void RegisterCdiListCommand(CLI::App& cdi, const GlobalOptions& g, Action* action);
void RegisterCdiHookCommand(CLI::App& cdi, const GlobalOptions& g, Action* action);
void RegisterToolkitCommand(CLI::App& app, const GlobalOptions& g, Action* action);
void RegisterRuntimeCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop sim gpu ...` and `gpuop sim host-root`, added under the `sim` subcommand.
void RegisterSimGpuCommand(CLI::App& sim, const GlobalOptions& g, Action* action);
void RegisterSimHostRootCommand(CLI::App& sim, const GlobalOptions& g, Action* action);
// `gpuop sim apiserver`: the Kubernetes API emulator (not for production). In
// gpuop-sim only, as is `sim cluster`: gpuop hands both over to it.
void RegisterSimApiserverCommand(CLI::App& sim, const GlobalOptions& g, Action* action);

// `gpuop operator`: the ClusterPolicy controller (operator/operator.h).
void RegisterOperatorCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop device-plugin`: the kubelet device plugin (deviceplugin/plugin.h).
void RegisterDevicePluginCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop gfd`: GPU feature discovery (gfd/daemon.h).
void RegisterGfdCommand(CLI::App& app, const GlobalOptions& g, Action* action);
void RegisterNodeDiscoveryCommand(CLI::App& app, const GlobalOptions& g, Action* action);
void RegisterExporterCommand(CLI::App& app, const GlobalOptions& g, Action* action);
void RegisterMigCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop mig-manager`: MIG layouts from the node label (mig/manager.h).
void RegisterMigManagerCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop sim kubelet`: a fake kubelet for device plugins (sim/kubelet/fake_kubelet.h).
void RegisterSimKubeletCommand(CLI::App& sim, const GlobalOptions& g, Action* action);
// `gpuop sim cluster up|status|exec|down`: a simulated cluster (sim/cluster/).
void RegisterSimClusterCommand(CLI::App& sim, const GlobalOptions& g, Action* action);
// `gpuop sim driver-image` and `gpuop sim driver-container` (sim/host/driver_container.h).
void RegisterSimDriverCommands(CLI::App& sim, const GlobalOptions& g, Action* action);
// `gpuop validator`: node validations and the node-status exporter (validator/).
void RegisterValidatorCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop driver-manager`: the driver pod's init container (driver_manager/manager.h).
void RegisterDriverManagerCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop dra-plugin`: the DRA kubelet plugin for gpu.nvidia.com.
void RegisterDraPluginCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop cuda vector-add`: the CUDA check (cuda/vector_add.h).
void RegisterCudaCommand(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop crd apply` and `gpuop uninstall` (lifecycle/uninstall.h): the chart's hooks.
void RegisterLifecycleCommands(CLI::App& app, const GlobalOptions& g, Action* action);
// `gpuop doctor`: what is wrong with the cluster's GPU stack (doctor/doctor.h).
void RegisterDoctorCommand(CLI::App& app, const GlobalOptions& g, Action* action);

// The API-server flags of every subcommand that talks to Kubernetes.
struct KubeFlags {
  std::string kubeconfig;  // --kubeconfig; "": in-cluster, $KUBECONFIG, ~/.kube/config
  std::string context;
  double qps = 50;
  int burst = 100;
};
void AddKubeFlags(CLI::App* cmd, KubeFlags* flags);
Result<std::unique_ptr<kube::Client>> NewKubeClient(const KubeFlags& flags, std::string user_agent);

// The NVML library path the user chose, or the driver's default soname.
// driver_root: the driver's root as the host sees it, for a container the
// runtime did not give the driver ("": $NVIDIA_DRIVER_ROOT, else "/").
std::string NvmlLibraryPath(const GlobalOptions& g, const std::string& driver_root = "");

// Where the toolkit installs gpuop on a node: the CDI hook binary specs name.
inline constexpr const char* kToolkitHookPath = "/usr/local/nvidia/toolkit/gpuop";
// The CDI hook path a spec written here names: kToolkitHookPath when the
// command runs for a node under --host-root (in a pod), else this
// executable; "" when its path cannot be read.
std::string DefaultCdiHookPath(const GlobalOptions& g);

}  // namespace gpuop::cli
