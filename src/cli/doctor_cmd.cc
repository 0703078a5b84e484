// `gpuop doctor`: reads the cluster (doctor/snapshot_reader.h) and prints what
// is wrong with its GPU stack, the most blocking first (doctor/doctor.h).
// Exit 0 healthy, 1 findings, 2 the cluster cannot be read (or a bad flag).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "doctor/doctor.h"
#include "doctor/snapshot_reader.h"

namespace gpuop::cli {
namespace {

struct DoctorFlags {
  KubeFlags kube;
  std::string namespace_ = "gpu-operator";
  std::string output = "text";
};

int RunDoctor(const DoctorFlags& f) {
  auto client = NewKubeClient(f.kube, "gpuop-doctor");
  if (!client.ok()) {
    std::fprintf(stderr,
                 "gpuop doctor: cannot read the cluster: %s; pass --kubeconfig (and --context) "
                 "or set KUBECONFIG\n",
                 client.status().message().c_str());
    return kExitUsage;
  }
  auto snapshot = doctor::ReadSnapshot(**client, f.namespace_);
  if (!snapshot.ok()) {
    std::fprintf(stderr, "gpuop doctor: %s\n", snapshot.status().message().c_str());
    return kExitUsage;
  }
  const std::vector<doctor::Finding> findings = doctor::Diagnose(*snapshot);
  const std::string out = f.output == "json" ? doctor::FindingsJson(findings).dump(2) + "\n"
                                             : doctor::FindingsText(findings, *snapshot);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return findings.empty() ? kExitOk : kExitFailure;
}

}  // namespace

void RegisterDoctorCommand(CLI::App& app, const GlobalOptions&, Action* action) {
  auto f = std::make_shared<DoctorFlags>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "Check the cluster's GPU stack (ClusterPolicy, GPU nodes, the operator's pods, MIG, driver "
      "upgrades, conflicting device plugins, Pending GPU pods, workloads' CUDA against the "
      "driver, the runtime and CDI spec, the exporter's ServiceMonitor) and print each problem "
      "with its cause and fix, the most blocking first. Exit 0 healthy, 1 findings, 2 the "
      "cluster cannot be read. docs/doctor.md");
  AddKubeFlags(cmd, &f->kube);
  cmd->add_option("--namespace", f->namespace_, "The operator's namespace")
      ->envname("OPERATOR_NAMESPACE")
      ->capture_default_str();
  cmd->add_option("--output,-o", f->output,
                  "text|json (an array of {severity, object, problem, "
                  "cause, fix})")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([f, action] { *action = [f] { return RunDoctor(*f); }; });
}

}  // namespace gpuop::cli
