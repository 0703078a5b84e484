// Resource: which REST collection a request goes to (group, version, plural,
// scope), and the well-known ones gpuop uses. Paths are built here and
// nowhere else.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <string_view>

namespace gpuop::kube {

struct Resource {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // plural: "nodes"
  std::string kind;      // "Node"
  bool namespaced = false;

  // "v1" or "apps/v1": an object's apiVersion.
  std::string ApiVersion() const;
  // "nodes" or "daemonsets.apps": for messages and audit matching.
  std::string QualifiedName() const;
  // /api/v1/nodes, /apis/apps/v1/namespaces/ns/daemonsets[/name[/sub]].
  // `ns` is ignored for cluster-scoped resources; "" lists all namespaces.
  std::string Path(std::string_view ns, std::string_view name = "",
                   std::string_view subresource = "") const;
};

// The resources gpuop talks to.
namespace resources {
extern const Resource kNodes;
extern const Resource kPods;
extern const Resource kNamespaces;
extern const Resource kConfigMaps;
extern const Resource kSecrets;
extern const Resource kServices;
extern const Resource kServiceAccounts;
extern const Resource kEvents;  // core/v1 Events (kubectl describe shows these)
extern const Resource kDaemonSets;
extern const Resource kDeployments;
extern const Resource kLeases;
extern const Resource kRoles;
extern const Resource kRoleBindings;
extern const Resource kClusterRoles;
extern const Resource kClusterRoleBindings;
extern const Resource kCustomResourceDefinitions;
extern const Resource kNodeFeatures;     // nfd.k8s-sigs.io/v1alpha1
extern const Resource kClusterPolicies;  // nvidia.com/v1
// resource.k8s.io/v1 (DRA)
extern const Resource kDeviceClasses;
extern const Resource kResourceSlices;
extern const Resource kResourceClaims;
extern const Resource kResourceClaimTemplates;
}  // namespace resources

// Percent-encodes a query parameter value (selectors carry '=', ',', '!').
std::string UrlEncode(std::string_view s);

}  // namespace gpuop::kube
