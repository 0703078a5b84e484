#include "sim/kube/rbac.h"

#include <algorithm>

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::vector<std::string> Strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) return out;
  for (const Json& s : j[key]) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

std::string Meta(const Json& obj, const char* key) {
  const Json meta = obj.value("metadata", Json::object());
  return meta.is_object() ? meta.value(key, "") : "";
}

bool ResourceMatches(const PolicyRule& r, const std::string& combined,
                     const std::string& subresource) {
  for (const std::string& rr : r.resources) {
    if (rr == "*" || rr == combined) return true;
    if (!subresource.empty() && rr == "*/" + subresource) return true;
  }
  return false;
}

bool UrlMatches(const std::string& rule_url, const std::string& path) {
  if (rule_url == "*" || rule_url == path) return true;
  return !rule_url.empty() && rule_url.back() == '*' &&
         path.compare(0, rule_url.size() - 1, rule_url, 0, rule_url.size() - 1) == 0;
}

// kube's appliesToUser; `binding_ns` is "" for a ClusterRoleBinding.
bool SubjectMatches(const Json& s, const UserInfo& u, const std::string& binding_ns) {
  std::string kind = s.value("kind", ""), name = s.value("name", "");
  if (kind == "User") return name == u.name;
  if (kind == "Group") return Has(u.groups, name);
  if (kind == "ServiceAccount") {
    std::string ns = s.value("namespace", binding_ns);
    if (ns.empty()) ns = binding_ns;
    return !ns.empty() && u.name == "system:serviceaccount:" + ns + ":" + name;
  }
  return false;
}

bool BindingApplies(const Json& b, const UserInfo& u, const std::string& binding_ns) {
  for (const Json& s : b.value("subjects", Json::array())) {
    if (s.is_object() && SubjectMatches(s, u, binding_ns)) return true;
  }
  return false;
}

std::vector<PolicyRule> RulesOf(const Json& role) {
  std::vector<PolicyRule> out;
  for (const Json& r : role.value("rules", Json::array())) out.push_back(PolicyRule::FromJson(r));
  return out;
}

bool CoversAll(const std::vector<std::string>& owner, const std::vector<std::string>& wanted) {
  if (Has(owner, "*")) return true;
  return std::all_of(wanted.begin(), wanted.end(), [&](const auto& w) { return Has(owner, w); });
}

// kube's resourceCoversAll: "*", the resource itself, or "*/sub" for "res/sub".
bool ResourcesCover(const std::vector<std::string>& owner, const std::vector<std::string>& wanted) {
  if (Has(owner, "*")) return true;
  for (const std::string& w : wanted) {
    if (Has(owner, w)) continue;
    size_t slash = w.find('/');
    if (slash != std::string::npos && Has(owner, "*" + w.substr(slash))) continue;
    return false;
  }
  return true;
}

bool RuleCovers(const PolicyRule& owner, const PolicyRule& sub) {
  if (!CoversAll(owner.verbs, sub.verbs)) return false;
  if (!sub.non_resource_urls.empty()) {
    return std::all_of(sub.non_resource_urls.begin(), sub.non_resource_urls.end(),
                       [&](const std::string& u) {
                         return std::any_of(
                             owner.non_resource_urls.begin(), owner.non_resource_urls.end(),
                             [&](const std::string& o) { return UrlMatches(o, u); });
                       });
  }
  if (!CoversAll(owner.api_groups, sub.api_groups)) return false;
  if (!ResourcesCover(owner.resources, sub.resources)) return false;
  if (owner.resource_names.empty()) return true;
  return !sub.resource_names.empty() && CoversAll(owner.resource_names, sub.resource_names);
}

// One rule per group x resource x verb (x name), one per URL x verb.
std::vector<PolicyRule> Breakdown(const PolicyRule& r) {
  std::vector<PolicyRule> out;
  for (const auto& g : r.api_groups) {
    for (const auto& res : r.resources) {
      for (const auto& v : r.verbs) {
        if (r.resource_names.empty()) {
          out.push_back({{v}, {g}, {res}, {}, {}});
        } else {
          for (const auto& n : r.resource_names) out.push_back({{v}, {g}, {res}, {n}, {}});
        }
      }
    }
  }
  for (const auto& u : r.non_resource_urls) {
    for (const auto& v : r.verbs) out.push_back({{v}, {}, {}, {}, {u}});
  }
  return out;
}

std::string QuotedList(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? " \"" : "\"") + v[i] + "\"";
  return out + "]";
}

Json Rule(std::vector<std::string> groups, std::vector<std::string> resources,
          std::vector<std::string> verbs) {
  return {{"apiGroups", groups}, {"resources", resources}, {"verbs", verbs}};
}

Json UrlRule(std::vector<std::string> urls, std::vector<std::string> verbs) {
  return {{"nonResourceURLs", urls}, {"verbs", verbs}};
}

Json BootstrapMeta(const std::string& name) {
  return {{"name", name},
          {"labels", {{"kubernetes.io/bootstrapping", "rbac-defaults"}}},
          {"annotations", {{"rbac.authorization.kubernetes.io/autoupdate", "true"}}}};
}

}  // namespace

UserInfo ServiceAccountUser(const std::string& ns, const std::string& name) {
  return {"system:serviceaccount:" + ns + ":" + name,
          {"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}};
}

PolicyRule PolicyRule::FromJson(const Json& rule) {
  return {Strings(rule, "verbs"), Strings(rule, "apiGroups"), Strings(rule, "resources"),
          Strings(rule, "resourceNames"), Strings(rule, "nonResourceURLs")};
}

std::string PolicyRule::CompactString() const {
  std::string out = "{";
  auto add = [&](const char* key, const std::vector<std::string>& v) {
    if (v.empty()) return;
    if (out.size() > 1) out += ", ";
    out += std::string(key) + ":" + QuotedList(v);
  };
  add("APIGroups", api_groups);
  add("Resources", resources);
  add("ResourceNames", resource_names);
  add("NonResourceURLs", non_resource_urls);
  add("Verbs", verbs);
  return out + "}";
}

bool RuleAllows(const PolicyRule& r, const RequestAttributes& a) {
  if (!Has(r.verbs, "*") && !Has(r.verbs, a.verb)) return false;
  if (!a.resource_request) {
    return std::any_of(r.non_resource_urls.begin(), r.non_resource_urls.end(),
                       [&](const std::string& u) { return UrlMatches(u, a.path); });
  }
  if (!Has(r.api_groups, "*") && !Has(r.api_groups, a.group)) return false;
  std::string combined = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  if (!ResourceMatches(r, combined, a.subresource)) return false;
  return r.resource_names.empty() || Has(r.resource_names, a.name);
}

std::vector<PolicyRule> RbacSnapshot::RoleRules(const std::string& kind, const std::string& name,
                                                const std::string& ns) const {
  const auto& pool = kind == "Role" ? roles : cluster_roles;
  for (const Object& r : pool) {
    if (Meta(*r, "name") == name && (kind != "Role" || Meta(*r, "namespace") == ns)) {
      return RulesOf(*r);
    }
  }
  return {};
}

std::vector<PolicyRule> RbacSnapshot::RulesFor(const UserInfo& user, const std::string& ns) const {
  std::vector<PolicyRule> out;
  auto add = [&](const Json& b, const std::string& binding_ns) {
    if (!BindingApplies(b, user, binding_ns)) return;
    const Json ref = b.value("roleRef", Json::object());
    auto rules = RoleRules(ref.value("kind", ""), ref.value("name", ""), binding_ns);
    out.insert(out.end(), rules.begin(), rules.end());
  };
  for (const Object& b : cluster_role_bindings) add(*b, "");
  if (!ns.empty()) {
    for (const Object& b : role_bindings) {
      if (Meta(*b, "namespace") == ns) add(*b, ns);
    }
  }
  return out;
}

bool RbacSnapshot::Allows(const RequestAttributes& a) const {
  if (Has(a.user.groups, kSystemMasters)) return true;
  std::vector<PolicyRule> rules = RulesFor(a.user, a.resource_request ? a.ns : "");
  return std::any_of(rules.begin(), rules.end(),
                     [&](const PolicyRule& r) { return RuleAllows(r, a); });
}

std::vector<PolicyRule> MissingRules(const std::vector<PolicyRule>& owner,
                                     const std::vector<PolicyRule>& requested) {
  std::vector<PolicyRule> missing;
  for (const PolicyRule& r : requested) {
    for (const PolicyRule& sub : Breakdown(r)) {
      bool covered = std::any_of(owner.begin(), owner.end(),
                                 [&](const PolicyRule& o) { return RuleCovers(o, sub); });
      if (!covered) missing.push_back(sub);
    }
  }
  return missing;
}

std::string ForbiddenReason(const RequestAttributes& a) {
  std::string who = "User \"" + a.user.name + "\" cannot " + a.verb;
  if (!a.resource_request) return who + " path \"" + a.path + "\"";
  std::string resource = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  who += " resource \"" + resource + "\" in API group \"" + a.group + "\"";
  return a.ns.empty() ? who + " at the cluster scope" : who + " in the namespace \"" + a.ns + "\"";
}

std::string EscalationMessage(const UserInfo& user, const std::vector<PolicyRule>& missing) {
  std::string out = "user \"" + user.name + "\" (groups=" + QuotedList(user.groups) +
                    ") is attempting to grant RBAC permissions not currently held:";
  for (const PolicyRule& r : missing) out += "\n" + r.CompactString();
  return out;
}

std::vector<Json> BootstrapClusterRoles() {
  auto role = [](const std::string& name, Json rules) {
    return Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                {"kind", "ClusterRole"},
                {"metadata", BootstrapMeta(name)},
                {"rules", std::move(rules)}};
  };
  return {
      role("cluster-admin", {Rule({"*"}, {"*"}, {"*"}), UrlRule({"*"}, {"*"})}),
      role("system:discovery",
           {UrlRule({"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                     "/openapi/*", "/readyz", "/version", "/version/"},
                    {"get"})}),
      role("system:basic-user",
           {Rule({"authorization.k8s.io"}, {"selfsubjectaccessreviews", "selfsubjectrulesreviews"},
                 {"create"}),
            Rule({"authentication.k8s.io"}, {"selfsubjectreviews"}, {"create"})}),
      role("system:public-info-viewer",
           {UrlRule({"/healthz", "/livez", "/readyz", "/version", "/version/"}, {"get"})}),
  };
}

std::vector<Json> BootstrapClusterRoleBindings() {
  auto binding = [](const std::string& name, std::vector<std::string> groups) {
    Json subjects = Json::array();
    for (const auto& g : groups) {
      subjects.push_back(
          {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Group"}, {"name", g}});
    }
    return Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                {"kind", "ClusterRoleBinding"},
                {"metadata", BootstrapMeta(name)},
                {"roleRef",
                 {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", name}}},
                {"subjects", std::move(subjects)}};
  };
  return {
      binding("cluster-admin", {kSystemMasters}),
      binding("system:discovery", {"system:authenticated"}),
      binding("system:basic-user", {"system:authenticated"}),
      binding("system:public-info-viewer", {"system:authenticated", "system:unauthenticated"}),
  };
}

}  // namespace gpuop::simkube
