// PodObject: a Pod as the API returns it, for tests of pure code over pods:
// its namespace, name, labels and spec, owned (controller: true) by an
// object of `owner_kind` unless that is empty.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace gpuop::testing {

inline nlohmann::json PodObject(const std::string& ns, const std::string& name, nlohmann::json spec,
                                nlohmann::json labels = nlohmann::json::object(),
                                const std::string& owner_kind = "ReplicaSet") {
  nlohmann::json meta{{"namespace", ns}, {"name", name}, {"labels", std::move(labels)}};
  if (!owner_kind.empty()) {
    meta["ownerReferences"] = nlohmann::json::array({{{"apiVersion", "apps/v1"},
                                                      {"kind", owner_kind},
                                                      {"name", "o"},
                                                      {"uid", "u"},
                                                      {"controller", true}}});
  }
  return nlohmann::json{{"metadata", std::move(meta)}, {"spec", std::move(spec)}};
}

}  // namespace gpuop::testing
