// `gpuop crd apply` and `gpuop uninstall`: the install lifecycle steps the
// Helm chart runs as hooks (pre-upgrade, pre-delete), also usable by hand
// where gpuop was installed without Helm; `gpuop node-cleanup`: the toolkit's
// preStop (lifecycle/node_cleanup.h). Exit 0 done, 1 failed, 2 bad flag.
#include <cstdio>
#include <memory>
#include <string>

#include "base/strings.h"
#include "base/log.h"
#include "cli/cli.h"
#include "lifecycle/node_cleanup.h"
#include "lifecycle/uninstall.h"
#include "operator/operator.h"
#include "toolkit/toolkit_core.h"

namespace gpuop::cli {
namespace {

struct LifecycleFlags {
  KubeFlags kube;
  std::string wait = "60s";
  lifecycle::UninstallOptions uninstall;
  std::string timeout = "5m";
  // node-cleanup
  lifecycle::NodeCleanupOptions node;
  std::string runtime;
  std::string pod_name, pod_namespace;
  bool force = false;
};

Result<std::chrono::seconds> Seconds(const char* flag, const std::string& text) {
  auto d = ParseDuration(text);
  if (!d.ok() || d->count() <= 0) {
    return InvalidArgument(std::string(flag) + ": " +
                           (d.ok() ? "must be positive, e.g. 60s" : d.status().message()));
  }
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

int ApplyCrd(const LifecycleFlags& f) {
  auto wait = Seconds("--wait", f.wait);
  if (!wait.ok()) {
    std::fprintf(stderr, "gpuop crd apply: %s\n", wait.status().message().c_str());
    return kExitUsage;
  }
  auto client = NewKubeClient(f.kube, "gpuop-crd");
  if (!client.ok()) return Fail("crd apply", client.status());
  Status st = op::EnsureClusterPolicyCrd(**client, "gpuop-operator", *wait);
  if (!st.ok()) return Fail("crd apply", st);
  std::printf("CustomResourceDefinition %s is current and Established\n", op::kCrdName);
  return kExitOk;
}

int RunUninstall(const LifecycleFlags& f) {
  auto timeout = Seconds("--timeout", f.timeout);
  if (!timeout.ok()) {
    std::fprintf(stderr, "gpuop uninstall: %s\n", timeout.status().message().c_str());
    return kExitUsage;
  }
  auto client = NewKubeClient(f.kube, "gpuop-uninstall");
  if (!client.ok()) return Fail("uninstall", client.status());
  lifecycle::UninstallOptions o = f.uninstall;
  o.timeout = *timeout;
  Status st = lifecycle::Uninstall(**client, o);
  if (!st.ok()) return Fail("uninstall", st);
  std::printf("gpuop removed from the cluster (namespace %s)\n", o.namespace_.c_str());
  return kExitOk;
}

int RunNodeCleanup(const GlobalOptions& g, const LifecycleFlags& f) {
  if (!f.force) {
    if (f.pod_name.empty() || f.pod_namespace.empty()) {
      std::fprintf(stderr,
                   "gpuop node-cleanup: --pod-name and --pod-namespace (POD_NAME, POD_NAMESPACE "
                   "from the downward API) are required, or --force to clean regardless\n");
      return kExitUsage;
    }
    auto client = NewKubeClient(f.kube, "gpuop-node-cleanup");
    if (!client.ok()) return Fail("node-cleanup", client.status());
    auto removed = lifecycle::OwnerDaemonSetRemoved(**client, f.pod_namespace, f.pod_name);
    if (!removed.ok()) return Fail("node-cleanup", removed.status());
    if (!*removed) {
      LogInfo("the DaemonSet stays (the pod is being replaced): node configuration kept",
              {{"pod", f.pod_namespace + "/" + f.pod_name}});
      return kExitOk;
    }
  }
  lifecycle::NodeCleanupOptions o = f.node;
  o.host_root = g.host_root;
  o.runtime.runtime = f.runtime == "crio"     ? runtime::RuntimeKind::kCrio
                      : f.runtime == "docker" ? runtime::RuntimeKind::kDocker
                                              : runtime::RuntimeKind::kContainerd;
  auto changed = lifecycle::CleanNode(o);
  if (!changed.ok()) return Fail("node-cleanup", changed.status());
  for (const std::string& path : *changed) LogInfo("removed from the node", {{"path", path}});
  LogInfo("node cleaned: the toolkit's runtime handler, CDI spec and hook are gone",
          {{"changed", std::to_string(changed->size())}});
  return kExitOk;
}

}  // namespace

void RegisterLifecycleCommands(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<LifecycleFlags>();
  auto* crd = app.add_subcommand("crd", "The ClusterPolicy CRD built into this binary");
  crd->require_subcommand(1);
  auto* apply = crd->add_subcommand(
      "apply",
      "Create the ClusterPolicy CRD, or upgrade the installed one when it is older (what the "
      "operator does at start; the Helm chart's pre-upgrade hook), and wait until Established");
  AddKubeFlags(apply, &f->kube);
  apply->add_option("--wait", f->wait, "How long to wait for Established")->capture_default_str();
  apply->callback([f, action] { *action = [f] { return ApplyCrd(*f); }; });

  auto* un = app.add_subcommand(
      "uninstall",
      "Remove what gpuop put on the cluster: the ClusterPolicies (and so the components), the "
      "node labels and taints gpuop set, each node's runtime handler and CDI spec (the "
      "toolkit's, as it goes); the Helm chart's pre-delete hook. The operator Deployment, "
      "its RBAC and the CRD (unless --delete-crd) are left to the installer.");
  AddKubeFlags(un, &f->kube);
  un->add_option("--namespace", f->uninstall.namespace_, "Namespace of the components")
      ->envname("OPERATOR_NAMESPACE")
      ->capture_default_str();
  un->add_flag("--delete-crd", f->uninstall.delete_crd,
               "Also delete the ClusterPolicy CRD (the chart's operator.cleanupCRD)");
  un->add_option("--timeout", f->timeout, "How long each step may wait")->capture_default_str();
  un->callback([f, action] { *action = [f] { return RunUninstall(*f); }; });

  auto* nc = app.add_subcommand(
      "node-cleanup",
      "The toolkit's preStop: when its DaemonSet is gone or going (uninstall, toolkit turned "
      "off), remove from this node (under --host-root) the runtime handler gpuop added, the CDI "
      "spec, the installed hook and toolkit-ready; when the pod is only being replaced, do "
      "nothing");
  AddKubeFlags(nc, &f->kube);
  nc->add_option("--runtime", f->runtime, "containerd|crio|docker")
      ->required()
      ->check(CLI::IsMember({"containerd", "crio", "docker"}));
  nc->add_option("--runtime-name", f->node.runtime.runtime_name,
                 "Runtime handler name (default nvidia)");
  nc->add_option("--config", f->node.runtime.config_path, "The runtime's main config file");
  nc->add_option("--cdi-output", f->node.cdi_spec, "The CDI spec the toolkit wrote")
      ->envname("GPUOP_CDI_OUTPUT")
      ->capture_default_str();
  nc->add_option("--install-dir", f->node.install_dir, "Where the toolkit installed gpuop")
      ->envname("GPUOP_TOOLKIT_INSTALL_DIR")
      ->capture_default_str();
  nc->add_option("--validations-dir", f->node.validations_dir, "Where toolkit-ready is")
      ->envname("GPUOP_VALIDATIONS_DIR")
      ->capture_default_str();
  nc->add_option("--pod-name", f->pod_name, "This pod's name")->envname("POD_NAME");
  nc->add_option("--pod-namespace", f->pod_namespace, "This pod's namespace")
      ->envname("POD_NAMESPACE");
  nc->add_flag("--force", f->force, "Clean the node without asking whether the DaemonSet stays");
  nc->callback([&g, f, action] { *action = [&g, f] { return RunNodeCleanup(g, *f); }; });
}

}  // namespace gpuop::cli
