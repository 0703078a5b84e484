// Discovery documents of the API emulator, as kube-apiserver serves them:
//
//   /version             version.Info (gitVersion v1.35.0)
//   /api                 APIVersions (["v1"])
//   /api/v1              APIResourceList of the core group
//   /apis                APIGroupList
//   /apis/<g>            APIGroup
//   /apis/<g>/<v>        APIResourceList
//
// and the aggregated form kubectl asks for first (client-go sends
// `Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,...`):
// one APIGroupDiscoveryList for /api (the core group) and one for /apis
// (every other group), answered with that media type as Content-Type, which
// is how the client knows it got the aggregated form.
//
// Pure functions of the registry's current contents; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sim/kube/registry.h"

namespace gpuop::simkube {

// The version the emulator claims to be.
inline constexpr const char* kKubeGitVersion = "v1.35.0";

nlohmann::json VersionInfo();
nlohmann::json ApiVersions(std::string_view server_address);
nlohmann::json ApiGroupList(const Registry& registry);
// null when the group is not served.
nlohmann::json ApiGroup(const Registry& registry, std::string_view group);
// null when the group/version is not served.
nlohmann::json ApiResourceList(const Registry& registry, std::string_view group,
                               std::string_view version);

// Which aggregated discovery version an Accept header asks for: "v2",
// "v2beta1", or "" (the client wants the legacy documents).
std::string AggregatedDiscoveryVersion(std::string_view accept);
// The Content-Type of an aggregated answer of `version`.
std::string AggregatedContentType(std::string_view version);
// APIGroupDiscoveryList of the core group (legacy == true, for /api) or of
// every other group (for /apis).
nlohmann::json AggregatedDiscovery(const Registry& registry, bool legacy, std::string_view version);

}  // namespace gpuop::simkube
