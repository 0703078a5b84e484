#include "lifecycle/node_cleanup.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kube/object.h"
#include "kube/resource.h"

namespace gpuop::lifecycle {

using Json = nlohmann::json;
namespace res = kube::resources;

namespace {

std::string UnderRoot(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

// Removes a file; one already gone is fine.
Status RemoveFile(const std::string& path, std::vector<std::string>& changed) {
  if (::unlink(path.c_str()) == 0) {
    changed.push_back(path);
    return Status::Ok();
  }
  if (errno == ENOENT) return Status::Ok();
  return Internal("removing " + path + ": " + std::strerror(errno));
}

// The pod's ServiceAccount token refused (401) or its permissions gone
// (403): the identity the operator gave the component was withdrawn, which
// happens only as the component goes (the ClusterPolicy's garbage
// collection takes the ServiceAccount and its RBAC along with the DaemonSet,
// while the pods still run their preStop).
bool IdentityWithdrawn(const Status& s) {
  return s.http_status() == 401 || s.http_status() == 403;
}

}  // namespace

Result<bool> OwnerDaemonSetRemoved(kube::Client& client, const std::string& ns,
                                   const std::string& pod) {
  auto p = client.Get(res::kPods, ns, pod);
  if (!p.ok()) {
    if (kube::IsNotFound(p.status()) || IdentityWithdrawn(p.status())) return true;
    return p.status().Annotate("reading pod " + ns + "/" + pod);
  }
  std::string owner;
  const Json refs = p->value("metadata", Json::object()).value("ownerReferences", Json::array());
  for (const Json& ref : refs) {
    if (ref.value("kind", "") == "DaemonSet" && ref.value("controller", false)) {
      owner = ref.value("name", "");
    }
  }
  // Orphaned (kubectl delete --cascade=orphan) or standalone: nothing says
  // the toolkit is going away.
  if (owner.empty()) return false;
  auto ds = client.Get(res::kDaemonSets, ns, owner);
  if (!ds.ok()) {
    if (kube::IsNotFound(ds.status()) || IdentityWithdrawn(ds.status())) return true;
    return ds.status().Annotate("reading DaemonSet " + ns + "/" + owner);
  }
  return kube::IsBeingDeleted(*ds);
}

Result<std::vector<std::string>> CleanNode(const NodeCleanupOptions& options) {
  runtime::ConfigureRequest revert;
  revert.host_root = options.host_root;
  revert.options = options.runtime;
  revert.options.revert = true;
  GPUOP_ASSIGN_OR_RETURN(runtime::ConfigureReport report, runtime::RunConfigure(revert));
  std::vector<std::string> changed = report.changed;
  GPUOP_RETURN_IF_ERROR(RemoveFile(UnderRoot(options.host_root, options.cdi_spec), changed));
  if (!options.install_dir.empty()) {
    GPUOP_RETURN_IF_ERROR(
        RemoveFile(UnderRoot(options.host_root, options.install_dir + "/gpuop"), changed));
  }
  GPUOP_RETURN_IF_ERROR(RemoveFile(
      UnderRoot(options.host_root, options.validations_dir + "/toolkit-ready"), changed));
  return changed;
}

}  // namespace gpuop::lifecycle
