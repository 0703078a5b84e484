// `gpuop sim apiserver`: runs the Kubernetes API emulator (sim/kube/server.h)
// until SIGTERM or SIGINT. Not for production.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "sim/kube/kubeconfig.h"
#include "sim/kube/server.h"

namespace gpuop::cli {
namespace {

struct ApiserverOptions {
  std::string listen = "127.0.0.1:6443";
  bool tls = false;
  std::string token;
  std::string authorization = "AlwaysAllow";
  std::string kubeconfig_out;
  std::string faults;
  std::string audit_log;
  std::string openapi_dir;
};

int RunApiserver(const ApiserverOptions& o) {
  // Termination signals are taken by sigwait below, never by a handler: block
  // them before any thread starts so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  simkube::ServerOptions so;
  so.listen = o.listen;
  so.tls = o.tls;
  so.token = o.token;
  so.rbac = o.authorization == "RBAC";
  so.faults = o.faults;
  so.audit_log = o.audit_log;
  so.openapi_dir = o.openapi_dir;
  auto server = simkube::ApiServer::Start(std::move(so));
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", server.status().message().c_str());
    return kExitFailure;
  }
  if (!o.kubeconfig_out.empty()) {
    Status s = simkube::WriteKubeconfig(o.kubeconfig_out, (*server)->kubeconfig());
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitFailure;
    }
  }
  std::printf("gpuop sim apiserver: serving %s (not for production)\n", (*server)->url().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  (*server)->Stop();
  return kExitOk;
}

}  // namespace

void RegisterSimApiserverCommand(CLI::App& sim, const GlobalOptions&, Action* action) {
  auto o = std::make_shared<ApiserverOptions>();
  auto* cmd = sim.add_subcommand(
      "apiserver",
      "Kubernetes API emulator for tests and `gpuop sim` (NOT FOR PRODUCTION): a subset of "
      "kube-apiserver's REST API, discovery and OpenAPI, with fault injection");
  cmd->add_option("--listen", o->listen, "HOST:PORT to serve on; port 0 picks a free one")
      ->capture_default_str();
  cmd->add_flag("--tls", o->tls, "Serve HTTPS with a CA and certificate made at start");
  cmd->add_option("--token", o->token, "Require `Authorization: Bearer TOKEN` on every request");
  cmd->add_option("--authorization", o->authorization,
                  "AlwaysAllow, or RBAC: authorise requests against the Roles and bindings "
                  "(the admin token is in system:masters)")
      ->check(CLI::IsMember({"AlwaysAllow", "RBAC"}))
      ->capture_default_str();
  cmd->add_option("--kubeconfig-out", o->kubeconfig_out,
                  "Write a kubeconfig for the emulator (server, CA, token) to FILE");
  cmd->add_option("--faults", o->faults,
                  "Fault rules, e.g. \"error=429,verb=list,rate=0.5;latency=100ms\" "
                  "(docs/simulator.md)");
  cmd->add_option("--audit-log", o->audit_log, "Append one JSON line per request to FILE");
  cmd->add_option("--openapi-dir", o->openapi_dir,
                  "Directory of the Kubernetes OpenAPI v3 documents (default: "
                  "<exe dir>/../share/gpuop/openapi/1.35, else the source tree's)");
  cmd->callback([action, o] { *action = [o] { return RunApiserver(*o); }; });
}

}  // namespace gpuop::cli
