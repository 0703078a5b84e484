#include "kube/resource.h"

namespace gpuop::kube {

std::string Resource::ApiVersion() const { return group.empty() ? version : group + "/" + version; }

std::string Resource::QualifiedName() const {
  return group.empty() ? resource : resource + "." + group;
}

std::string Resource::Path(std::string_view ns, std::string_view name,
                           std::string_view subresource) const {
  std::string path = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) {
    path += "/namespaces/";
    path += ns;
  }
  path += "/";
  path += resource;
  if (!name.empty()) {
    path += "/";
    path += name;
    if (!subresource.empty()) {
      path += "/";
      path += subresource;
    }
  }
  return path;
}

namespace resources {
// {group, version, plural, kind, namespaced}
const Resource kNodes{"", "v1", "nodes", "Node", false};
const Resource kPods{"", "v1", "pods", "Pod", true};
const Resource kNamespaces{"", "v1", "namespaces", "Namespace", false};
const Resource kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};
const Resource kSecrets{"", "v1", "secrets", "Secret", true};
const Resource kServices{"", "v1", "services", "Service", true};
const Resource kServiceAccounts{"", "v1", "serviceaccounts", "ServiceAccount", true};
const Resource kEvents{"", "v1", "events", "Event", true};
const Resource kDaemonSets{"apps", "v1", "daemonsets", "DaemonSet", true};
const Resource kDeployments{"apps", "v1", "deployments", "Deployment", true};
const Resource kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const Resource kRoles{"rbac.authorization.k8s.io", "v1", "roles", "Role", true};
const Resource kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding",
                             true};
const Resource kClusterRoles{"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole",
                             false};
const Resource kClusterRoleBindings{"rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                    "ClusterRoleBinding", false};
const Resource kCustomResourceDefinitions{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                          "CustomResourceDefinition", false};
const Resource kNodeFeatures{"nfd.k8s-sigs.io", "v1alpha1", "nodefeatures", "NodeFeature", true};
const Resource kClusterPolicies{"nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", false};
const Resource kDeviceClasses{"resource.k8s.io", "v1", "deviceclasses", "DeviceClass", false};
const Resource kResourceSlices{"resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false};
const Resource kResourceClaims{"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true};
const Resource kResourceClaimTemplates{"resource.k8s.io", "v1", "resourceclaimtemplates",
                                       "ResourceClaimTemplate", true};
}  // namespace resources

std::string UrlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace gpuop::kube
