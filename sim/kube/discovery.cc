#include "sim/kube/discovery.h"

#include "base/strings.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

std::string GroupVersion(std::string_view group, std::string_view version) {
  return group.empty() ? std::string(version) : std::string(group) + "/" + std::string(version);
}

Json GroupVersionForDiscovery(std::string_view group, std::string_view version) {
  return {{"groupVersion", GroupVersion(group, version)}, {"version", version}};
}

// A short stable hash of the resource's identity (the real server hashes the
// storage version; clients only compare it for equality).
std::string StorageVersionHash(const ResourceInfo& r) {
  uint64_t h = 1469598103934665603ull;
  for (char c : r.group + "/" + r.version + "/" + r.kind) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (int i = 0; i < 11; ++i, h >>= 6) out += kAlphabet[h & 63];
  return out;
}

Json ResourceVerbs(const ResourceInfo& r) {
  Json verbs = Json::array();
  for (const auto& v : r.verbs) verbs.push_back(v);
  return verbs;
}

Json Gvk(std::string_view group, std::string_view version, std::string_view kind) {
  return {{"group", group}, {"version", version}, {"kind", kind}};
}

// A subresource as both discovery documents describe it.
struct Subresource {
  std::string name;                  // "status"
  std::string group, version, kind;  // of the object it answers with
  std::vector<std::string> verbs;
};

std::vector<Subresource> SubresourcesOf(const ResourceInfo& r) {
  std::vector<Subresource> subs;
  if (r.subresources.status)
    subs.push_back({"status", r.group, r.version, r.kind, {"get", "patch", "update"}});
  if (r.subresources.scale)
    subs.push_back({"scale", "autoscaling", "v1", "Scale", {"get", "patch", "update"}});
  if (r.subresources.eviction) subs.push_back({"eviction", "policy", "v1", "Eviction", {"create"}});
  return subs;
}

}  // namespace

Json VersionInfo() {
  return {{"major", "1"},
          {"minor", "35"},
          {"emulationMajor", "1"},
          {"emulationMinor", "35"},
          {"minCompatibilityMajor", "1"},
          {"minCompatibilityMinor", "34"},
          {"gitVersion", kKubeGitVersion},
          {"gitCommit", "gpuop-sim"},
          {"gitTreeState", "clean"},
          {"buildDate", "2025-12-17T00:00:00Z"},
          {"goVersion", "go1.25.5"},
          {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

Json ApiVersions(std::string_view server_address) {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
}

Json ApiGroupList(const Registry& registry) {
  Json groups = Json::array();
  for (const auto& g : registry.Groups()) {
    if (g.name.empty()) continue;
    Json versions = Json::array();
    for (const auto& v : g.versions) versions.push_back(GroupVersionForDiscovery(g.name, v));
    groups.push_back({{"name", g.name},
                      {"versions", std::move(versions)},
                      {"preferredVersion", GroupVersionForDiscovery(g.name, g.versions.front())}});
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", std::move(groups)}};
}

Json ApiGroup(const Registry& registry, std::string_view group) {
  for (const auto& g : registry.Groups()) {
    if (g.name != group || g.name.empty()) continue;
    Json versions = Json::array();
    for (const auto& v : g.versions) versions.push_back(GroupVersionForDiscovery(g.name, v));
    return {{"kind", "APIGroup"},
            {"apiVersion", "v1"},
            {"name", g.name},
            {"versions", std::move(versions)},
            {"preferredVersion", GroupVersionForDiscovery(g.name, g.versions.front())}};
  }
  return nullptr;
}

Json ApiResourceList(const Registry& registry, std::string_view group, std::string_view version) {
  auto resources = registry.Resources(group, version);
  if (resources.empty()) return nullptr;
  Json list = Json::array();
  for (const auto& sr : resources) {
    const ResourceInfo& r = sr->info;
    Json entry{{"name", r.plural},           {"singularName", r.singular},
               {"namespaced", r.namespaced}, {"kind", r.kind},
               {"verbs", ResourceVerbs(r)},  {"storageVersionHash", StorageVersionHash(r)}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    if (!r.categories.empty()) entry["categories"] = r.categories;
    list.push_back(std::move(entry));
    for (const Subresource& sub : SubresourcesOf(r)) {
      Json e{{"name", r.plural + "/" + sub.name},
             {"singularName", ""},
             {"namespaced", r.namespaced},
             {"kind", sub.kind},
             {"verbs", sub.verbs}};
      // An entry names its group and version only where they differ from the list's.
      if (sub.group != r.group || sub.version != r.version) {
        e["group"] = sub.group;
        e["version"] = sub.version;
      }
      list.push_back(std::move(e));
    }
  }
  Json out{{"kind", "APIResourceList"}, {"groupVersion", GroupVersion(group, version)}};
  if (!group.empty()) out["apiVersion"] = "v1";
  out["resources"] = std::move(list);
  return out;
}

std::string AggregatedDiscoveryVersion(std::string_view accept) {
  // The client lists its choices in preference order; take the first we speak.
  for (const auto& part : Split(accept, ',')) {
    std::string p;
    for (char c : part) {
      if (c != ' ') p += c;
    }
    if (p.find("g=apidiscovery.k8s.io") == std::string::npos ||
        p.find("as=APIGroupDiscoveryList") == std::string::npos) {
      continue;
    }
    if (p.find("v=v2beta1") != std::string::npos) return "v2beta1";
    if (p.find("v=v2") != std::string::npos) return "v2";
  }
  return "";
}

std::string AggregatedContentType(std::string_view version) {
  return "application/json;g=apidiscovery.k8s.io;v=" + std::string(version) +
         ";as=APIGroupDiscoveryList";
}

Json AggregatedDiscovery(const Registry& registry, bool legacy, std::string_view version) {
  Json items = Json::array();
  for (const auto& g : registry.Groups()) {
    if (g.name.empty() != legacy) continue;
    Json versions = Json::array();
    for (const auto& v : g.versions) {
      Json resources = Json::array();
      for (const auto& sr : registry.Resources(g.name, v)) {
        const ResourceInfo& r = sr->info;
        Json entry{{"resource", r.plural},
                   {"responseKind", Gvk(r.group, r.version, r.kind)},
                   {"scope", r.namespaced ? "Namespaced" : "Cluster"},
                   {"singularResource", r.singular},
                   {"verbs", ResourceVerbs(r)}};
        if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
        if (!r.categories.empty()) entry["categories"] = r.categories;
        Json subs = Json::array();
        for (const Subresource& sub : SubresourcesOf(r)) {
          subs.push_back({{"subresource", sub.name},
                          {"responseKind", Gvk(sub.group, sub.version, sub.kind)},
                          {"verbs", sub.verbs}});
        }
        if (!subs.empty()) entry["subresources"] = std::move(subs);
        resources.push_back(std::move(entry));
      }
      versions.push_back(
          {{"version", v}, {"resources", std::move(resources)}, {"freshness", "Current"}});
    }
    Json meta = Json::object();
    if (!g.name.empty()) meta["name"] = g.name;
    items.push_back({{"metadata", std::move(meta)}, {"versions", std::move(versions)}});
  }
  return {{"kind", "APIGroupDiscoveryList"},
          {"apiVersion", "apidiscovery.k8s.io/" + std::string(version)},
          {"metadata", Json::object()},
          {"items", std::move(items)}};
}

}  // namespace gpuop::simkube
