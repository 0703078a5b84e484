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

namespace {

Status WrongType(const std::string& path, const char* key, const char* want,
                 const nlohmann::json& got) {
  return InvalidArgument(path + "." + key + ": want " + want + ", got " + got.dump());
}

}  // namespace

Status ReadBool(const nlohmann::json& obj, const char* key, const std::string& path, bool* out) {
  const nlohmann::json& v = Field(obj, key);
  if (v.is_null()) return Status::Ok();
  if (!v.is_boolean()) return WrongType(path, key, "true or false", v);
  *out = v.get<bool>();
  return Status::Ok();
}

Status ReadString(const nlohmann::json& obj, const char* key, const std::string& path,
                  std::string* out) {
  const nlohmann::json& v = Field(obj, key);
  if (v.is_null()) return Status::Ok();
  if (!v.is_string()) return WrongType(path, key, "a string", v);
  *out = v.get<std::string>();
  return Status::Ok();
}

Status ReadNonEmptyString(const nlohmann::json& obj, const char* key, const std::string& path,
                          std::string* out) {
  std::string s;
  GPUOP_RETURN_IF_ERROR(ReadString(obj, key, path, &s));
  if (!s.empty()) *out = std::move(s);
  return Status::Ok();
}

Status ReadWholeNumber(const nlohmann::json& obj, const char* key, const std::string& path,
                       int64_t* out, const char* unit) {
  const nlohmann::json& v = Field(obj, key);
  if (v.is_null()) return Status::Ok();
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    const std::string want =
        std::string("a whole number") + (unit ? std::string(" of ") + unit : "") + " (0 or more)";
    return WrongType(path, key, want.c_str(), v);
  }
  *out = v.get<int64_t>();
  return Status::Ok();
}

Status ReadStringList(const nlohmann::json& obj, const char* key, const std::string& path,
                      std::vector<std::string>* out) {
  const nlohmann::json& v = Field(obj, key);
  if (v.is_null()) return Status::Ok();
  bool ok = v.is_array();
  for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i].is_string();
  if (!ok) return WrongType(path, key, "a list of strings", v);
  *out = v.get<std::vector<std::string>>();
  return Status::Ok();
}

Status ReadStringMap(const nlohmann::json& obj, const char* key, const std::string& path,
                     std::map<std::string, std::string>* out) {
  const nlohmann::json& v = Field(obj, key);
  if (v.is_null()) return Status::Ok();
  bool ok = v.is_object();
  for (auto it = v.begin(); ok && it != v.end(); ++it) ok = it->is_string();
  if (!ok) return WrongType(path, key, "an object of strings", v);
  *out = v.get<std::map<std::string, std::string>>();
  return Status::Ok();
}

}  // namespace gpuop
