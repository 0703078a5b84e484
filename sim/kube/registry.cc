#include "sim/kube/registry.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <set>

namespace gpuop::simkube {
namespace {

struct Builtin {
  const char* group;
  const char* kind;
  const char* plural;
  bool namespaced;
  std::vector<std::string> short_names;
  bool status = false;
  bool all_category = false;
  bool eviction = false;
  bool scale = false;
};

const std::vector<Builtin>& BuiltinTable() {
  static const std::vector<Builtin> kTable = {
      // core/v1
      {"", "Namespace", "namespaces", false, {"ns"}, true},
      {"", "Node", "nodes", false, {"no"}, true},
      {"", "Pod", "pods", true, {"po"}, true, true, true},
      {"", "Service", "services", true, {"svc"}, true, true},
      {"", "ServiceAccount", "serviceaccounts", true, {"sa"}},
      {"", "ConfigMap", "configmaps", true, {"cm"}},
      {"", "Secret", "secrets", true, {}},
      {"", "Event", "events", true, {"ev"}},
      // apps/v1
      {"apps", "DaemonSet", "daemonsets", true, {"ds"}, true, true},
      {"apps", "Deployment", "deployments", true, {"deploy"}, true, true, false, true},
      {"apps", "ReplicaSet", "replicasets", true, {"rs"}, true, true, false, true},
      {"apps", "ControllerRevision", "controllerrevisions", true, {}},
      // batch/v1
      {"batch", "Job", "jobs", true, {}, true, true},
      // events.k8s.io/v1
      {"events.k8s.io", "Event", "events", true, {"ev"}},
      // policy/v1 (read by the eviction subresource, disruption.h)
      {"policy", "PodDisruptionBudget", "poddisruptionbudgets", true, {"pdb"}, true},
      // authorization.k8s.io/v1 (answered by the server, never stored)
      {"authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false, {}},
      // rbac.authorization.k8s.io/v1
      {"rbac.authorization.k8s.io", "Role", "roles", true, {}},
      {"rbac.authorization.k8s.io", "RoleBinding", "rolebindings", true, {}},
      {"rbac.authorization.k8s.io", "ClusterRole", "clusterroles", false, {}},
      {"rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", false, {}},
      // apiextensions.k8s.io/v1
      {"apiextensions.k8s.io",
       "CustomResourceDefinition",
       "customresourcedefinitions",
       false,
       {"crd", "crds"},
       true},
      // scheduling.k8s.io/v1
      {"scheduling.k8s.io", "PriorityClass", "priorityclasses", false, {"pc"}},
      // coordination.k8s.io/v1
      {"coordination.k8s.io", "Lease", "leases", true, {}},
      // node.k8s.io/v1
      {"node.k8s.io", "RuntimeClass", "runtimeclasses", false, {}},
      // resource.k8s.io/v1
      {"resource.k8s.io", "DeviceClass", "deviceclasses", false, {}},
      {"resource.k8s.io", "ResourceClaim", "resourceclaims", true, {}, true},
      {"resource.k8s.io", "ResourceClaimTemplate", "resourceclaimtemplates", true, {}},
      {"resource.k8s.io", "ResourceSlice", "resourceslices", false, {}},
  };
  return kTable;
}

// The order kube-apiserver lists its groups in, for the ones served here.
const char* const kGroupOrder[] = {
    "",
    "apps",
    "events.k8s.io",
    "authorization.k8s.io",
    "batch",
    "policy",
    "rbac.authorization.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "resource.k8s.io",
};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "v2beta1" into (major, stage, minor): stage 2 GA, 1 beta, 0 alpha;
// -1 for versions that are not Kubernetes-like (sorted last, by name).
struct VersionKey {
  int stage = -1;
  long major = 0, minor = 0;
};

VersionKey ParseVersion(std::string_view v) {
  VersionKey k;
  if (v.size() < 2 || v[0] != 'v' || !std::isdigit(static_cast<unsigned char>(v[1]))) return k;
  size_t i = 1;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    k.major = k.major * 10 + (v[i++] - '0');
  }
  if (i == v.size()) {
    k.stage = 2;
    return k;
  }
  std::string_view rest = v.substr(i);
  int stage = -1;
  if (rest.substr(0, 4) == "beta")
    stage = 1, rest.remove_prefix(4);
  else if (rest.substr(0, 5) == "alpha")
    stage = 0, rest.remove_prefix(5);
  else
    return VersionKey{};
  if (rest.empty()) return VersionKey{};
  for (char c : rest) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return VersionKey{};
    k.minor = k.minor * 10 + (c - '0');
  }
  k.stage = stage;
  return k;
}

}  // namespace

bool VersionPriorityLess(std::string_view a, std::string_view b) {
  VersionKey ka = ParseVersion(a), kb = ParseVersion(b);
  if (ka.stage != kb.stage) return ka.stage > kb.stage;
  if (ka.stage == -1) return a < b;
  if (ka.major != kb.major) return ka.major > kb.major;
  return ka.minor > kb.minor;
}

std::vector<ResourceInfo> BuiltinResources() {
  std::vector<ResourceInfo> out;
  for (const auto& b : BuiltinTable()) {
    ResourceInfo r;
    r.group = b.group;
    r.version = "v1";
    r.kind = b.kind;
    r.plural = b.plural;
    r.singular = Lower(b.kind);
    r.list_kind = std::string(b.kind) + "List";
    r.namespaced = b.namespaced;
    r.short_names = b.short_names;
    if (b.all_category) r.categories = {"all"};
    r.subresources.status = b.status;
    r.subresources.eviction = b.eviction;
    r.subresources.scale = b.scale;
    if (b.scale) r.subresources.scale_paths.label_selector = ".spec.selector";
    if (r.group.empty() && r.plural == "namespaces") {
      r = NamespaceResource();
    }
    if (r.group == "authorization.k8s.io") r.verbs = {"create"};
    ApplyDefaultBehaviour(r);
    out.push_back(std::move(r));
  }
  return out;
}

std::string Registry::Key(std::string_view group, std::string_view version,
                          std::string_view plural) {
  std::string k(group);
  k += '/';
  k += version;
  k += '/';
  k += plural;
  return k;
}

Registry::Registry() {
  for (const char* g : kGroupOrder) builtin_group_order_.emplace_back(g);
  std::unique_lock lock(mu_);
  for (auto& r : BuiltinResources()) {
    ServedResource s;
    s.info = std::move(r);
    AddLocked(std::move(s));
  }
}

void Registry::AddLocked(ServedResource r) {
  std::string key = Key(r.info.group, r.info.version, r.info.plural);
  by_key_[key] = std::make_shared<const ServedResource>(std::move(r));
}

ServedPtr Registry::Find(std::string_view group, std::string_view version,
                         std::string_view plural) const {
  std::shared_lock lock(mu_);
  auto it = by_key_.find(Key(group, version, plural));
  return it == by_key_.end() ? nullptr : it->second;
}

ServedPtr Registry::FindKind(std::string_view group, std::string_view version,
                             std::string_view kind) const {
  std::shared_lock lock(mu_);
  for (const auto& [key, r] : by_key_) {
    if (r->info.group == group && r->info.version == version && r->info.kind == kind) return r;
  }
  return nullptr;
}

std::vector<ServedPtr> Registry::FindAllVersions(std::string_view group,
                                                 std::string_view plural) const {
  std::shared_lock lock(mu_);
  std::vector<ServedPtr> out;
  for (const auto& [key, r] : by_key_) {
    if (r->info.group == group && r->info.plural == plural) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const ServedPtr& a, const ServedPtr& b) {
    return VersionPriorityLess(a->info.version, b->info.version);
  });
  return out;
}

std::vector<ServedGroup> Registry::Groups() const {
  std::shared_lock lock(mu_);
  std::map<std::string, std::set<std::string>> versions;
  for (const auto& [key, r] : by_key_) versions[r->info.group].insert(r->info.version);
  std::vector<ServedGroup> out;
  auto add = [&](const std::string& g) {
    auto it = versions.find(g);
    if (it == versions.end()) return;
    ServedGroup sg{g, {it->second.begin(), it->second.end()}};
    std::sort(sg.versions.begin(), sg.versions.end(),
              [](const std::string& a, const std::string& b) { return VersionPriorityLess(a, b); });
    out.push_back(std::move(sg));
    versions.erase(it);
  };
  for (const auto& g : builtin_group_order_) add(g);
  std::vector<std::string> rest;
  for (const auto& [g, v] : versions) rest.push_back(g);
  for (const auto& g : rest) add(g);
  return out;
}

std::vector<ServedPtr> Registry::Resources(std::string_view group, std::string_view version) const {
  std::shared_lock lock(mu_);
  std::vector<ServedPtr> out;
  for (const auto& [key, r] : by_key_) {
    if (r->info.group == group && r->info.version == version) out.push_back(r);
  }
  std::sort(out.begin(), out.end(),
            [](const ServedPtr& a, const ServedPtr& b) { return a->info.plural < b->info.plural; });
  return out;
}

std::vector<ServedPtr> Registry::All() const {
  std::shared_lock lock(mu_);
  std::vector<ServedPtr> out;
  for (const auto& [key, r] : by_key_) out.push_back(r);
  return out;
}

Status Registry::SetCustom(const std::string& crd_name, std::vector<ServedResource> versions) {
  std::unique_lock lock(mu_);
  for (const auto& v : versions) {
    for (const auto& [key, r] : by_key_) {
      if (r->crd_name == crd_name) continue;
      if (r->info.group != v.info.group) continue;
      if (r->info.plural == v.info.plural) {
        return AlreadyExists("the plural name \"" + v.info.plural +
                             "\" is already in use in group \"" + v.info.group + "\"" +
                             (r->crd_name.empty() ? "" : " by " + r->crd_name));
      }
      if (r->info.kind == v.info.kind && r->info.version == v.info.version) {
        return AlreadyExists("the kind \"" + v.info.kind + "\" is already in use in group \"" +
                             v.info.group + "\"" +
                             (r->crd_name.empty() ? "" : " by " + r->crd_name));
      }
    }
  }
  auto old = crd_keys_.find(crd_name);
  if (old != crd_keys_.end()) {
    for (const auto& k : old->second) by_key_.erase(k);
    crd_keys_.erase(old);
  }
  std::vector<std::string> keys;
  for (auto& v : versions) {
    v.crd_name = crd_name;
    v.info.custom = true;
    keys.push_back(Key(v.info.group, v.info.version, v.info.plural));
    AddLocked(std::move(v));
  }
  crd_keys_[crd_name] = std::move(keys);
  ++generation_;
  return Status::Ok();
}

void Registry::RemoveCustom(const std::string& crd_name) {
  std::unique_lock lock(mu_);
  auto it = crd_keys_.find(crd_name);
  if (it == crd_keys_.end()) return;
  for (const auto& k : it->second) by_key_.erase(k);
  crd_keys_.erase(it);
  ++generation_;
}

uint64_t Registry::generation() const {
  std::shared_lock lock(mu_);
  return generation_;
}

}  // namespace gpuop::simkube
