// The RBAC core (sim/kube/rbac.h): rule matching, subjects and bindings,
// the escalation cover check, kube-apiserver's messages.
#include "sim/kube/rbac.h"

#include <gtest/gtest.h>

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

PolicyRule R(Json j) { return PolicyRule::FromJson(j); }

RequestAttributes Res(std::string verb, std::string group, std::string resource,
                      std::string ns = "", std::string name = "", std::string sub = "") {
  RequestAttributes a;
  a.user = ServiceAccountUser("gpu-operator", "gfd");
  a.verb = std::move(verb);
  a.group = std::move(group);
  a.resource = std::move(resource);
  a.subresource = std::move(sub);
  a.ns = std::move(ns);
  a.name = std::move(name);
  return a;
}

RequestAttributes Path(std::string verb, std::string path) {
  RequestAttributes a;
  a.user = ServiceAccountUser("gpu-operator", "gfd");
  a.verb = std::move(verb);
  a.resource_request = false;
  a.path = std::move(path);
  return a;
}

TEST(RbacRule, VerbsGroupsResourcesAndNames) {
  PolicyRule r = R({{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"get", "patch"}}});
  EXPECT_TRUE(RuleAllows(r, Res("patch", "", "nodes", "", "n1")));
  EXPECT_FALSE(RuleAllows(r, Res("delete", "", "nodes", "", "n1")));
  EXPECT_FALSE(RuleAllows(r, Res("get", "apps", "nodes")));
  EXPECT_FALSE(RuleAllows(r, Res("patch", "", "nodes", "", "n1", "status")));

  PolicyRule star = R({{"apiGroups", {"*"}}, {"resources", {"*"}}, {"verbs", {"*"}}});
  EXPECT_TRUE(RuleAllows(star, Res("deletecollection", "apps", "daemonsets", "ns")));
  EXPECT_TRUE(RuleAllows(star, Res("create", "", "pods", "ns", "p", "eviction")));

  PolicyRule named = R({{"apiGroups", {"apiextensions.k8s.io"}},
                        {"resources", {"customresourcedefinitions"}},
                        {"resourceNames", {"clusterpolicies.nvidia.com"}},
                        {"verbs", {"get", "patch"}}});
  EXPECT_TRUE(RuleAllows(named, Res("get", "apiextensions.k8s.io", "customresourcedefinitions", "",
                                    "clusterpolicies.nvidia.com")));
  EXPECT_FALSE(RuleAllows(named, Res("get", "apiextensions.k8s.io", "customresourcedefinitions",
                                     "", "other.example.com")));
  // A create or an unnamed list has no name: resourceNames never match it.
  EXPECT_FALSE(RuleAllows(named, Res("get", "apiextensions.k8s.io", "customresourcedefinitions")));
}

TEST(RbacRule, Subresources) {
  PolicyRule exact = R({{"apiGroups", {""}}, {"resources", {"pods/eviction"}}, {"verbs", {"create"}}});
  EXPECT_TRUE(RuleAllows(exact, Res("create", "", "pods", "ns", "p", "eviction")));
  EXPECT_FALSE(RuleAllows(exact, Res("create", "", "pods", "ns", "p")));
  PolicyRule any = R({{"apiGroups", {""}}, {"resources", {"*/status"}}, {"verbs", {"patch"}}});
  EXPECT_TRUE(RuleAllows(any, Res("patch", "", "nodes", "", "n", "status")));
  EXPECT_FALSE(RuleAllows(any, Res("patch", "", "nodes", "", "n")));
}

TEST(RbacRule, NonResourceUrls) {
  PolicyRule r = R({{"nonResourceURLs", {"/apis/*", "/version"}}, {"verbs", {"get"}}});
  EXPECT_TRUE(RuleAllows(r, Path("get", "/version")));
  EXPECT_TRUE(RuleAllows(r, Path("get", "/apis/apps/v1")));
  EXPECT_FALSE(RuleAllows(r, Path("get", "/apis")));  // "/apis/*" needs the slash
  EXPECT_FALSE(RuleAllows(r, Path("post", "/version")));
  EXPECT_FALSE(RuleAllows(r, Res("get", "", "nodes")));
}

Json Binding(const std::string& kind, const std::string& ns, const std::string& role_kind,
             const std::string& role, Json subjects) {
  Json b{{"kind", kind},
         {"metadata", {{"name", "b"}}},
         {"roleRef", {{"kind", role_kind}, {"name", role}}},
         {"subjects", std::move(subjects)}};
  if (!ns.empty()) b["metadata"]["namespace"] = ns;
  return b;
}

Json Role(const std::string& kind, const std::string& name, const std::string& ns, Json rules) {
  Json r{{"kind", kind}, {"metadata", {{"name", name}}}, {"rules", std::move(rules)}};
  if (!ns.empty()) r["metadata"]["namespace"] = ns;
  return r;
}

RbacSnapshot::Object O(Json j) { return std::make_shared<const Json>(std::move(j)); }

TEST(RbacSnapshot, BindingsAndSubjects) {
  RbacSnapshot s;
  s.cluster_roles.push_back(O(Role("ClusterRole", "nodes", "",
                                   {{{"apiGroups", {""}}, {"resources", {"nodes"}},
                                     {"verbs", {"get", "patch"}}}})));
  s.roles.push_back(O(Role("Role", "leases", "gpu-operator",
                           {{{"apiGroups", {"coordination.k8s.io"}}, {"resources", {"leases"}},
                             {"verbs", {"get"}}}})));
  // A ServiceAccount subject without a namespace is the binding's.
  s.role_bindings.push_back(O(Binding("RoleBinding", "gpu-operator", "Role", "leases",
                                      {{{"kind", "ServiceAccount"}, {"name", "gfd"}}})));
  s.cluster_role_bindings.push_back(
      O(Binding("ClusterRoleBinding", "", "ClusterRole", "nodes",
                {{{"kind", "ServiceAccount"}, {"name", "gfd"}, {"namespace", "gpu-operator"}}})));

  EXPECT_TRUE(s.Allows(Res("patch", "", "nodes", "", "n1")));
  EXPECT_TRUE(s.Allows(Res("get", "coordination.k8s.io", "leases", "gpu-operator", "l")));
  EXPECT_FALSE(s.Allows(Res("get", "coordination.k8s.io", "leases", "default", "l")));
  RequestAttributes other = Res("patch", "", "nodes", "", "n1");
  other.user = ServiceAccountUser("default", "gfd");
  EXPECT_FALSE(s.Allows(other));

  // Group and User subjects; system:masters needs no binding.
  s.cluster_role_bindings.push_back(O(Binding("ClusterRoleBinding", "", "ClusterRole", "nodes",
                                              {{{"kind", "Group"}, {"name", "ops"}}})));
  RequestAttributes grp = Res("get", "", "nodes");
  grp.user = {"alice", {"ops", "system:authenticated"}};
  EXPECT_TRUE(s.Allows(grp));
  grp.user = {"bob", {"system:authenticated"}};
  EXPECT_FALSE(s.Allows(grp));
  grp.user = {"root", {kSystemMasters}};
  EXPECT_TRUE(s.Allows(grp));
}

TEST(RbacSnapshot, RoleBindingToClusterRoleIsNamespaced) {
  RbacSnapshot s;
  s.cluster_roles.push_back(O(Role("ClusterRole", "pods", "",
                                   {{{"apiGroups", {""}}, {"resources", {"pods"}},
                                     {"verbs", {"list"}}}})));
  s.role_bindings.push_back(O(Binding("RoleBinding", "gpu-operator", "ClusterRole", "pods",
                                      {{{"kind", "User"}, {"name", "u"}}})));
  RequestAttributes a = Res("list", "", "pods", "gpu-operator");
  a.user = {"u", {}};
  EXPECT_TRUE(s.Allows(a));
  a.ns = "";  // across namespaces: not granted by a RoleBinding
  EXPECT_FALSE(s.Allows(a));
}

TEST(RbacBootstrap, DiscoveryForEveryAuthenticatedUser) {
  RbacSnapshot s;
  for (Json& r : BootstrapClusterRoles()) s.cluster_roles.push_back(O(r));
  for (Json& b : BootstrapClusterRoleBindings()) s.cluster_role_bindings.push_back(O(b));
  for (const char* p : {"/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/openapi/v3",
                        "/openapi/v3/api/v1"}) {
    EXPECT_TRUE(s.Allows(Path("get", p))) << p;
  }
  EXPECT_TRUE(s.Allows(Res("create", "authorization.k8s.io", "selfsubjectaccessreviews")));
  EXPECT_FALSE(s.Allows(Res("get", "", "nodes")));
  RequestAttributes anon = Path("get", "/version");
  anon.user = {"system:anonymous", {"system:unauthenticated"}};
  EXPECT_TRUE(s.Allows(anon));
  anon.path = "/apis";
  EXPECT_FALSE(s.Allows(anon));
}

TEST(RbacEscalation, MissingRules) {
  std::vector<PolicyRule> owner = {
      R({{"apiGroups", {""}}, {"resources", {"nodes", "pods/*"}}, {"verbs", {"get", "list"}}}),
      R({{"apiGroups", {"apps"}}, {"resources", {"*"}}, {"verbs", {"*"}}}),
      R({{"apiGroups", {""}}, {"resources", {"*/status"}}, {"verbs", {"patch"}}}),
      R({{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"resourceNames", {"a"}},
         {"verbs", {"get"}}}),
      R({{"nonResourceURLs", {"/metrics*"}}, {"verbs", {"get"}}})};
  auto missing = [&](Json rule) { return MissingRules(owner, {R(std::move(rule))}); };
  EXPECT_TRUE(missing({{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"get"}}}).empty());
  EXPECT_TRUE(missing({{"apiGroups", {"apps"}}, {"resources", {"daemonsets"}},
                       {"verbs", {"create", "delete"}}})
                  .empty());
  EXPECT_TRUE(missing({{"apiGroups", {""}}, {"resources", {"nodes/status"}}, {"verbs", {"patch"}}})
                  .empty());
  EXPECT_TRUE(missing({{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"resourceNames", {"a"}},
                       {"verbs", {"get"}}})
                  .empty());
  EXPECT_TRUE(missing({{"nonResourceURLs", {"/metrics/cadvisor"}}, {"verbs", {"get"}}}).empty());
  // Each uncovered verb x group x resource comes back on its own.
  auto m = missing({{"apiGroups", {""}}, {"resources", {"nodes", "pods"}}, {"verbs", {"get", "patch"}}});
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].CompactString(), R"({APIGroups:[""], Resources:["nodes"], Verbs:["patch"]})");
  EXPECT_EQ(m[1].CompactString(), R"({APIGroups:[""], Resources:["pods"], Verbs:["get"]})");
  // A name-limited grant does not cover the whole resource; "*" needs "*".
  EXPECT_EQ(missing({{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", {"get"}}}).size(),
            1u);
  EXPECT_EQ(missing({{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"*"}}}).size(), 1u);
}

TEST(RbacMessages, AsKubeApiserverWritesThem) {
  RequestAttributes a = Res("patch", "", "nodes", "", "n1");
  a.user = {"system:serviceaccount:gpu-operator:x", {}};
  EXPECT_EQ(ForbiddenReason(a),
            "User \"system:serviceaccount:gpu-operator:x\" cannot patch resource \"nodes\" in API "
            "group \"\" at the cluster scope");
  a = Res("create", "", "pods", "ns", "p", "eviction");
  a.user = {"u", {}};
  EXPECT_EQ(ForbiddenReason(a),
            "User \"u\" cannot create resource \"pods/eviction\" in API group \"\" in the "
            "namespace \"ns\"");
  a = Path("get", "/metrics");
  a.user = {"u", {}};
  EXPECT_EQ(ForbiddenReason(a), "User \"u\" cannot get path \"/metrics\"");
  EXPECT_EQ(EscalationMessage({"u", {"g1", "g2"}},
                              {R({{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"get"}}})}),
            "user \"u\" (groups=[\"g1\" \"g2\"]) is attempting to grant RBAC permissions not "
            "currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}");
}

}  // namespace
}  // namespace gpuop::simkube
