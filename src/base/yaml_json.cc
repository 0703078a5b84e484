#include "base/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <regex>
#include <string>

namespace gpuop {

nlohmann::json YamlToJson(const YAML::Node& n) {
  using Json = nlohmann::json;
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& x : n) a.push_back(YamlToJson(x));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(s, kInt)) {
    try {
      return std::stoll(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  if (std::regex_match(s, kFloat)) {
    try {
      return std::stod(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  return s;
}

Result<std::vector<nlohmann::json>> ParseYamlDocuments(std::string_view text) {
  std::vector<nlohmann::json> docs;
  try {
    for (const YAML::Node& doc : YAML::LoadAll(std::string(text))) {
      if (doc.IsNull()) continue;
      docs.push_back(YamlToJson(doc));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return docs;
}

}  // namespace gpuop
