// The flags every subcommand that talks to the API server shares, and the
// client they build (cli.h: KubeFlags).
#include <cstdio>

#include "base/log.h"
#include "base/memory.h"
#include "cli/cli.h"

namespace gpuop::cli {

void AddKubeFlags(CLI::App* cmd, KubeFlags* f) {
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "kubeconfig file (default: in-cluster service account, else $KUBECONFIG, "
                  "else ~/.kube/config)");
  cmd->add_option("--context", f->context, "kubeconfig context (default: current-context)");
  cmd->add_option("--kube-qps", f->qps, "Requests per second to the API server, sustained")
      ->capture_default_str();
  cmd->add_option("--kube-burst", f->burst, "Requests to the API server in a burst")
      ->capture_default_str();
}

Result<std::unique_ptr<kube::Client>> NewKubeClient(const KubeFlags& f, std::string user_agent) {
  GPUOP_ASSIGN_OR_RETURN(kube::RestConfig config,
                         kube::LoadRestConfig({.path = f.kubeconfig, .context = f.context}));
  config.qps = f.qps;
  config.burst = f.burst;
  config.user_agent = std::move(user_agent);
  return kube::Client::New(std::move(config));
}

StopSignals::StopSignals(bool hangup) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  if (hangup) sigaddset(&set_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int StopSignals::WaitFor(std::chrono::milliseconds timeout) {
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  timespec ts{static_cast<time_t>(secs.count()),
              static_cast<long>((timeout - secs).count() * 1000000)};
  const int sig = sigtimedwait(&set_, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

int StopSignals::Wait() {
  if (!paged_out_) {
    // A signal first (a SIGHUP reload, say): the next Wait settles again.
    if (int sig = WaitFor(kStartupSettle); sig != 0) return sig;
    paged_out_ = true;
    auto bytes = PageOutExecutable();
    if (bytes.ok()) {
      LogDebug("paged out the executable's startup pages", {{"mapped_bytes", *bytes}});
    } else {
      LogDebug("keeping the executable's startup pages", {{"why", bytes.status()}});
    }
  }
  int sig = 0;
  sigwait(&set_, &sig);
  return sig;
}

}  // namespace gpuop::cli
