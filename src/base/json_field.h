// Reading optional fields of JSON objects (Kubernetes objects, policies)
// without a check at every level: Field(Field(pod, "spec"), "containers").
//
// Two kinds of reader: the *Field ones take what is there and fall back
// silently (for objects other programs wrote, where a field of another type
// is somebody else's business); the Read* ones are for specs users write:
// a missing or null member leaves *out (its default) as it is, and one of
// the wrong type is an error that names `path.key` and what it wants.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

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

Status ReadBool(const nlohmann::json& obj, const char* key, const std::string& path, bool* out);
Status ReadString(const nlohmann::json& obj, const char* key, const std::string& path,
                  std::string* out);
// As ReadString, but "" also leaves *out as it is: NVIDIA's chart writes ""
// for what it leaves unset.
Status ReadNonEmptyString(const nlohmann::json& obj, const char* key, const std::string& path,
                          std::string* out);
// An integer >= 0; `unit` ("seconds") goes into the error message.
Status ReadWholeNumber(const nlohmann::json& obj, const char* key, const std::string& path,
                       int64_t* out, const char* unit = nullptr);
// An array of strings.
Status ReadStringList(const nlohmann::json& obj, const char* key, const std::string& path,
                      std::vector<std::string>* out);
// An object whose members are strings (labels, annotations).
Status ReadStringMap(const nlohmann::json& obj, const char* key, const std::string& path,
                     std::map<std::string, std::string>* out);

}  // namespace gpuop
