#include "base/json_field.h"

namespace gpuop {

const nlohmann::json& Field(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string StringField(const nlohmann::json& obj, const char* key, std::string fallback) {
  const nlohmann::json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

std::string NonEmptyStringField(const nlohmann::json& obj, const char* key, std::string fallback) {
  const nlohmann::json& v = Field(obj, key);
  return v.is_string() && !v.get_ref<const std::string&>().empty() ? v.get<std::string>()
                                                                   : fallback;
}

bool BoolField(const nlohmann::json& obj, const char* key, bool fallback) {
  const nlohmann::json& v = Field(obj, key);
  return v.is_boolean() ? v.get<bool>() : fallback;
}

std::optional<int64_t> IntField(const nlohmann::json& obj, const char* key) {
  const nlohmann::json& v = Field(obj, key);
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

std::vector<std::string> StringList(const nlohmann::json& v) {
  std::vector<std::string> out;
  if (!v.is_array()) return out;
  for (const nlohmann::json& s : v) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

std::map<std::string, std::string> StringMap(const nlohmann::json& obj) {
  std::map<std::string, std::string> out;
  if (!obj.is_object()) return out;
  for (const auto& [k, v] : obj.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace gpuop
