// Reading optional fields of JSON objects (Kubernetes objects, policies)
// without a check at every level: Field(Field(pod, "spec"), "containers").
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

namespace gpuop {

// Member `key` of `obj`, or a null value when `obj` is not an object or has
// no such member.
const nlohmann::json& Field(const nlohmann::json& obj, const char* key);

}  // namespace gpuop
