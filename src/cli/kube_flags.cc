// The flags every subcommand that talks to the API server shares, and the
// client they build (cli.h: KubeFlags).
#include <cstdio>

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

}  // namespace gpuop::cli
