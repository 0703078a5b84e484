// `gpuop operator`: the GPU Operator's controller (operator/operator.h), run
// by a manager (manager/manager.h) with its metrics and health endpoints and
// optional leader election. Runs until SIGTERM/SIGINT (exit 0) or until it
// loses the lease (exit 1, so the Deployment restarts it as a follower, like
// controller-runtime).
#include <cstdio>
#include <memory>
#include <string>

#include "base/log.h"
#include "base/strings.h"
#include "base/version.h"
#include "cli/cli.h"
#include "kube/event_recorder.h"
#include "kube/leader_election.h"
#include "manager/manager.h"
#include "operator/operator.h"

namespace gpuop::cli {
namespace {

struct OperatorFlags {
  KubeFlags kube{.qps = 100, .burst = 200};
  std::string namespace_ = "gpu-operator";
  std::string metrics_addr = ":8080";
  std::string health_addr = ":8081";
  bool leader_elect = false;
  std::string leader_election_id = "53822513.nvidia.com";  // NVIDIA's, so one of the two leads
  std::string renew_deadline;                              // "": controller-runtime's 10 s
  std::string gpuop_image = std::string("ghcr.io/gpuop/gpuop:") + kVersion;
  std::string driver_image;
  bool install_crd = true;
  std::string node_discovery = "auto";
  bool validation_taint = false;
};

int RunOperator(const OperatorFlags& f) {
  kube::LeaderElectionConfig defaults;
  std::chrono::milliseconds renew_deadline = defaults.renew_deadline;
  std::chrono::milliseconds lease_duration = defaults.lease_duration;
  if (!f.renew_deadline.empty()) {
    auto deadline = ParseDuration(f.renew_deadline);
    if (!deadline.ok()) {
      return Fail("operator",
                  InvalidArgument("--leader-lease-renew-deadline: " + deadline.status().message()));
    }
    if (*deadline <= defaults.retry_period) {
      return Fail(
          "operator",
          InvalidArgument("--leader-lease-renew-deadline " + f.renew_deadline +
                          " leaves no retry: give more than the 2s retry period, such as 30s"));
    }
    // NVIDIA's operator derives the lease from the deadline the same way.
    renew_deadline = *deadline;
    lease_duration = *deadline + std::chrono::seconds(5);
  }
  StopSignals signals;  // before any thread starts
  auto client = NewKubeClient(f.kube, std::string("gpuop-operator/") + kVersion);
  if (!client.ok()) return Fail("operator", client.status());

  kube::EventRecorder events(**client, {.component = "gpu-operator"});
  op::OperatorOptions options;
  options.env.namespace_ = f.namespace_;
  options.env.gpuop_image = f.gpuop_image;
  options.env.driver_image_fallback = f.driver_image;
  options.env.validation_taint = f.validation_taint;
  options.env.node_discovery = f.node_discovery == "true"    ? op::NodeDiscovery::kAlways
                               : f.node_discovery == "false" ? op::NodeDiscovery::kNever
                                                             : op::NodeDiscovery::kAuto;
  options.install_crd = f.install_crd;
  op::Operator controller(**client, options, &events);
  if (Status s = controller.Setup(); !s.ok()) return Fail("operator", s);

  manager::ManagerOptions mo{.name = "operator",
                             .health_addr = f.health_addr,
                             .metrics_addr = f.metrics_addr,
                             .metrics = [&] { return controller.metrics().Exposition(); },
                             .events = &events};
  // A client of its own, as controller-runtime gives its lock: the lease
  // writes wait behind no controller request in the rate limiter or pool.
  std::unique_ptr<kube::Client> lease_client;
  if (f.leader_elect) {
    auto own = NewKubeClient(f.kube, std::string("gpuop-operator-leader-election/") + kVersion);
    if (!own.ok()) return Fail("operator", own.status());
    lease_client = std::move(own).value();
    mo.lease_client = lease_client.get();
    mo.leader_election = kube::LeaderElectionConfig{.lease_namespace = f.namespace_,
                                                    .lease_name = f.leader_election_id,
                                                    .lease_duration = lease_duration,
                                                    .renew_deadline = renew_deadline};
  }
  manager::Manager m(std::move(mo));
  // Every replica keeps its caches warm; only the leader reconciles.
  m.Add("caches", [&](std::stop_token stop) { return controller.RunCaches(stop); });
  m.Add(
      "controllers", [&](std::stop_token stop) { return controller.RunControllers(stop); },
      /*needs_leader=*/true);
  m.AddHealthCheck("ping", [] { return Status::Ok(); });
  // A follower is ready to take over; a leader once its caches synced.
  m.AddReadyCheck("caches", [&] {
    return !m.Leading() || controller.Ready() ? Status::Ok() : Unavailable("caches not synced yet");
  });
  // Each cache's keys and resourceVersions, to check them against the server
  // (tests/integration/informer_check.py) or see why a reconcile waits.
  m.AddRoute("/debug/informers", [&] {
    return http::Response{.content_type = "application/json",
                          .body = controller.DescribeCaches().dump()};
  });
  LogInfo("operator starting", {{"namespace", f.namespace_}, {"version", kVersion}});
  return m.Run(signals);
}

}  // namespace

void RegisterOperatorCommand(CLI::App& app, const GlobalOptions&, Action* action) {
  auto f = std::make_shared<OperatorFlags>();
  auto* cmd = app.add_subcommand(
      "operator",
      "The GPU Operator controller: reconciles the ClusterPolicy into node labels and the "
      "component DaemonSets, and reports status");
  AddKubeFlags(cmd, &f->kube);
  cmd->add_option("--namespace", f->namespace_,
                  "Namespace of the components (created by the installer, not the operator)")
      ->envname("OPERATOR_NAMESPACE")
      ->capture_default_str();
  cmd->add_option("--metrics-addr", f->metrics_addr, "Prometheus /metrics address; port 0: any")
      ->capture_default_str();
  cmd->add_option("--health-addr", f->health_addr,
                  "/healthz, /readyz and /debug/informers (each informer cache's keys and "
                  "resourceVersions as JSON, to check the caches against the API server) "
                  "address; port 0: any")
      ->capture_default_str();
  cmd->add_flag("--leader-elect", f->leader_elect,
                "Lead through a coordination.k8s.io Lease so one replica acts at a time");
  cmd->add_option("--leader-election-id", f->leader_election_id, "The Lease's name")
      ->capture_default_str();
  cmd->add_option("--leader-lease-renew-deadline", f->renew_deadline,
                  "How long the leader keeps trying to renew its Lease before it stands down "
                  "and exits (a Go duration such as 30s; the Lease lasts 5 s longer). Unset: "
                  "10 s, controller-runtime's default, which a slow or restarting API server "
                  "exceeds");
  cmd->add_option("--gpuop-image", f->gpuop_image,
                  "The image the node components run (this operator's own image)")
      ->envname("GPUOP_IMAGE")
      ->capture_default_str();
  cmd->add_option("--driver-image", f->driver_image,
                  "Driver image when the ClusterPolicy names none")
      ->envname("DRIVER_IMAGE");
  cmd->add_option("--node-discovery", f->node_discovery,
                  "Deploy gpuop-node-discovery to find GPU nodes: auto (unless some node carries "
                  "Node Feature Discovery's annotations), true or false")
      ->check(CLI::IsMember({"auto", "true", "false"}))
      ->envname("GPUOP_NODE_DISCOVERY")
      ->capture_default_str();
  cmd->add_flag("--validation-taint", f->validation_taint,
                "Keep GPU workloads off a GPU node until its validations pass: taint it "
                "gpuop.io/validation-pending:NoSchedule until its validator is Ready, and again "
                "when a validation fails later (beyond NVIDIA; docs/validator.md)")
      ->envname("GPUOP_VALIDATION_TAINT");
  cmd->add_flag("--install-crd,!--no-install-crd", f->install_crd,
                "Create or upgrade the ClusterPolicy CRD at start (default on)");
  cmd->callback([f, action] { *action = [f] { return RunOperator(*f); }; });
}

}  // namespace gpuop::cli
