// Reading optional fields of JSON objects (Kubernetes objects, policies)
// without a check at every level: Field(Field(pod, "spec"), "containers").
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpuop {

// Member `key` of `obj`, or a null value when `obj` is not an object or has
// no such member.
const nlohmann::json& Field(const nlohmann::json& obj, const char* key);

// Member `key` as a string, or `fallback` when it is missing or not a string.
std::string StringField(const nlohmann::json& obj, const char* key, std::string fallback = "");
// The same, but an empty string is taken as missing too: NVIDIA's chart
// writes "" for settings it leaves unset.
std::string NonEmptyStringField(const nlohmann::json& obj, const char* key,
                                std::string fallback = "");
// Member `key` as a boolean, or `fallback`.
bool BoolField(const nlohmann::json& obj, const char* key, bool fallback);
// Member `key` as an integer; nullopt when missing or not an integer.
std::optional<int64_t> IntField(const nlohmann::json& obj, const char* key);
// The strings of an array (other elements skipped); empty for a non-array.
std::vector<std::string> StringList(const nlohmann::json& v);
// The string members of an object (others skipped); empty for a non-object.
std::map<std::string, std::string> StringMap(const nlohmann::json& obj);

}  // namespace gpuop
