// `gpuop sim kubelet --dir DIR`: a fake kubelet (sim/kubelet/fake_kubelet.h)
// serving the device plugin Registration API on DIR/kubelet.sock. It prints
// one JSON line to stdout per event: serving, each RegisterRequest, each
// device list a plugin streams, and restarts. SIGHUP simulates a kubelet
// restart (every socket in DIR removed, kubelet.sock made anew); SIGTERM or
// SIGINT stops it (exit 0). For tests and demos; not for production.
//
// With --pod-resources FILE it also serves the pod-resources API
// (sim/kubelet/fake_pod_resources.h) on <kubelet-dir>/pod-resources/kubelet.sock,
// <kubelet-dir> being DIR's parent (the kubelet's layout), answering from FILE.
// SIGUSR1 re-reads FILE; SIGHUP re-reads it too and restarts that socket as
// well. A bad FILE at a re-read keeps the previous table. With
// --log-list-calls it also prints {"event":"pod-resources-calls","list":N,
// "get":M} when the served call counts change (a client's polling shows).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "sim/kubelet/sim_kubelet.h"

namespace gpuop::cli {
namespace {

int RunSimKubelet(const sim::SimKubeletOptions& options) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  if (!options.pod_resources_file.empty()) sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts

  auto kubelet = sim::SimKubelet::Start(options);
  if (!kubelet.ok()) {
    std::fprintf(stderr, "gpuop sim kubelet: %s\n", kubelet.status().message().c_str());
    return kExitFailure;
  }
  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGUSR1) {
      (*kubelet)->ReloadPodResources();
    } else if (sig == SIGHUP) {
      (*kubelet)->Restart();
    } else {
      break;
    }
  }
  (*kubelet)->Stop();
  return kExitOk;
}

}  // namespace

void RegisterSimKubeletCommand(CLI::App& sim, const GlobalOptions&, Action* action) {
  auto options = std::make_shared<sim::SimKubeletOptions>();
  auto* cmd = sim.add_subcommand(
      "kubelet",
      "A fake kubelet for device plugins: serves Registration on DIR/kubelet.sock, follows each "
      "plugin's ListAndWatch and prints JSON lines. SIGHUP: a kubelet restart. With "
      "--pod-resources it also serves the pod-resources API; SIGUSR1 re-reads that file");
  cmd->add_option("--dir", options->dir,
                  "The device-plugins directory (e.g. <root>/var/lib/kubelet/"
                  "device-plugins); created if missing")
      ->required();
  cmd->add_option("--pod-resources", options->pod_resources_file,
                  "Also serve the pod-resources API (v1.PodResourcesLister) on "
                  "<DIR's parent>/pod-resources/kubelet.sock, answering List/Get from FILE: a "
                  "JSON array of {\"pod\": \"train-0\", \"namespace\": \"ml\" (default "
                  "\"default\"), \"container\": \"trainer\", \"resource\": \"nvidia.com/gpu\", "
                  "\"devices\": [\"GPU-<uuid>\", \"MIG-<uuid>\", \"GPU-<uuid>::1\"]}. Re-read on "
                  "SIGUSR1 and SIGHUP; a bad file then keeps the previous table")
      ->check(CLI::ExistingFile);
  cmd->add_option("--pod-resources-socket", options->pod_resources_socket,
                  "Where to serve the pod-resources API instead (needs --pod-resources)")
      ->needs(cmd->get_option("--pod-resources"));
  cmd->add_flag("--log-list-calls", options->log_list_calls,
                "Print {\"event\":\"pod-resources-calls\",\"list\":N,\"get\":M} whenever the "
                "pod-resources calls served change (counts restart with the socket on SIGHUP)")
      ->needs(cmd->get_option("--pod-resources"));
  cmd->callback([action, options] { *action = [options] { return RunSimKubelet(*options); }; });
}

}  // namespace gpuop::cli
