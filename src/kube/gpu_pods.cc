#include "kube/gpu_pods.h"

#include "base/json_field.h"
#include "kube/object.h"
#include "kube/resource.h"

namespace gpuop::kube {

std::vector<std::string> PodClaimKeys(const Json& pod) {
  std::vector<std::string> out;
  const std::string ns = Namespace(pod);
  const Json& claims = Field(Field(pod, "spec"), "resourceClaims");
  const Json& statuses = Field(Field(pod, "status"), "resourceClaimStatuses");
  if (!claims.is_array()) return out;
  for (const Json& c : claims) {
    std::string claim = StringField(c, "resourceClaimName");
    if (claim.empty() && statuses.is_array()) {
      const std::string name = StringField(c, "name");
      for (const Json& s : statuses) {
        if (StringField(s, "name") == name) claim = StringField(s, "resourceClaimName");
      }
    }
    if (!claim.empty()) out.push_back(MakeKey(ns, claim));
  }
  return out;
}

bool RequestsGpuResource(const Json& resources) {
  for (const char* kind : {"limits", "requests"}) {
    const Json& m = Field(resources, kind);
    if (!m.is_object()) continue;
    for (const auto& [name, value] : m.items()) {
      if (name.starts_with("nvidia.com/gpu") || name.starts_with("nvidia.com/mig-")) return true;
    }
  }
  return false;
}

bool IsGpuPod(const Json& pod, const std::set<std::string>& gpu_claims) {
  const Json& containers = Field(Field(pod, "spec"), "containers");
  if (containers.is_array()) {
    for (const Json& c : containers) {
      if (RequestsGpuResource(Field(c, "resources"))) return true;
    }
  }
  return UsesAnyClaim(pod, gpu_claims);
}

bool IsAllocatedByDriver(const Json& claim, std::string_view driver) {
  const Json& results =
      Field(Field(Field(Field(claim, "status"), "allocation"), "devices"), "results");
  if (!results.is_array()) return false;
  for (const Json& r : results) {
    if (StringField(r, "driver") == driver) return true;
  }
  return false;
}

bool UsesAnyClaim(const Json& pod, const std::set<std::string>& claims) {
  if (claims.empty()) return false;
  for (const std::string& key : PodClaimKeys(pod)) {
    if (claims.contains(key)) return true;
  }
  return false;
}

Result<std::set<std::string>> ListClaimsAllocatedBy(Client& client, std::string_view driver) {
  auto list = client.ListAll(resources::kResourceClaims, "");
  if (!list.ok()) {
    if (IsNotFound(list.status())) return std::set<std::string>{};  // no DRA in this cluster
    return list.status().Annotate(
        "listing the ResourceClaims of every namespace (needs list on "
        "resourceclaims.resource.k8s.io)");
  }
  std::set<std::string> out;
  for (const Json& claim : list->items) {
    if (IsAllocatedByDriver(claim, driver)) out.insert(KeyOf(claim));
  }
  return out;
}

}  // namespace gpuop::kube
