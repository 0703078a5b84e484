// RBAC for the API emulator: kube-apiserver's RBAC authorizer and its
// escalation check, as a pure core over a snapshot of the Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings (the server lists them
// from its store per decision). Also the bootstrap ClusterRoles and bindings
// every real cluster has, and the Forbidden messages kube-apiserver writes.
//
// Semantics follow k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac and
// pkg/registry/rbac/validation: rules match on apiGroups, resources
// ("*", "res/sub", "*/sub"), resourceNames, verbs ("*") and
// nonResourceURLs (exact, "*", or a trailing "*" prefix); subjects are
// User, Group and ServiceAccount; system:masters bypasses everything.
//
// Thread-safety: functions only; a RbacSnapshot is immutable once built.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuop::simkube {

// Who a request authenticated as (after impersonation).
struct UserInfo {
  std::string name;
  std::vector<std::string> groups;
};

inline constexpr const char* kSystemMasters = "system:masters";

// The user and groups of a ServiceAccount's token.
UserInfo ServiceAccountUser(const std::string& ns, const std::string& name);

// What kube's authorizer.Attributes carry.
struct RequestAttributes {
  UserInfo user;
  std::string verb;  // get list watch create update patch delete deletecollection, impersonate, ...
  bool resource_request = true;
  std::string group, resource, subresource, ns, name;
  std::string path;  // non-resource requests: "/version", "/apis"
};

struct PolicyRule {
  std::vector<std::string> verbs, api_groups, resources, resource_names, non_resource_urls;

  static PolicyRule FromJson(const nlohmann::json& rule);
  // kube's CompactString: {APIGroups:["apps"], Resources:["daemonsets"], Verbs:["get"]}
  std::string CompactString() const;
};

bool RuleAllows(const PolicyRule& rule, const RequestAttributes& a);

// The RBAC objects one decision reads.
struct RbacSnapshot {
  using Object = std::shared_ptr<const nlohmann::json>;
  std::vector<Object> roles, role_bindings, cluster_roles, cluster_role_bindings;

  // The rules `user` holds in `ns` ("" : cluster-wide bindings only).
  std::vector<PolicyRule> RulesFor(const UserInfo& user, const std::string& ns) const;
  // The rules of the role a binding refers to (kind Role in `ns`, or ClusterRole).
  std::vector<PolicyRule> RoleRules(const std::string& kind, const std::string& name,
                                    const std::string& ns) const;
  // True when a rule bound to the user allows the request (or the user is
  // in system:masters).
  bool Allows(const RequestAttributes& a) const;
};

// The rules of `requested` that `owner` does not cover (kube's Covers, which
// breaks each requested rule into one verb x group x resource x name).
std::vector<PolicyRule> MissingRules(const std::vector<PolicyRule>& owner,
                                     const std::vector<PolicyRule>& requested);

// kube-apiserver's forbiddenMessage: `User "u" cannot patch resource "nodes"
// in API group "" at the cluster scope` (or `in the namespace "ns"`, or
// `cannot get path "/x"`).
std::string ForbiddenReason(const RequestAttributes& a);

// The escalation refusal's text after `... is forbidden: `.
std::string EscalationMessage(const UserInfo& user, const std::vector<PolicyRule>& missing);

// The ClusterRoles and ClusterRoleBindings kube-apiserver bootstraps that
// clients rely on: cluster-admin (bound to system:masters),
// system:discovery, system:basic-user, system:public-info-viewer.
std::vector<nlohmann::json> BootstrapClusterRoles();
std::vector<nlohmann::json> BootstrapClusterRoleBindings();

}  // namespace gpuop::simkube
