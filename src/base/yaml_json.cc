#include "base/yaml_json.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <optional>
#include <regex>
#include <sstream>
#include <string>

#include "base/strings.h"

namespace gpuop {
namespace {

// yaml-cpp 0.7's LoadAll never returns on a document that starts with a
// stray ',' (e.g. " , a"): its parser reports an empty document without
// consuming the token, again and again, and LoadAll keeps each one until
// memory runs out (found by tests/fuzz). A first pass over the parser's
// events finds that: two documents starting at the same place.
class StuckDocumentCheck : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> stuck;

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (last_ && last_->pos == mark.pos) stuck = mark;
    last_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  std::optional<YAML::Mark> last_;
};

}  // namespace

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

Status CheckYamlText(std::string_view text) {
  if (auto at = InvalidUtf8Offset(text)) {
    return InvalidArgument("byte " + std::to_string(*at) + " is not valid UTF-8");
  }
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument("byte " + std::to_string(nul) + " is a NUL, which YAML does not allow");
  }
  return Status::Ok();
}

Result<std::vector<nlohmann::json>> ParseYamlDocuments(std::string_view text) {
  GPUOP_RETURN_IF_ERROR(CheckYamlText(text));
  std::vector<nlohmann::json> docs;
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    StuckDocumentCheck check;
    while (parser.HandleNextDocument(check)) {
      if (check.stuck) {
        return InvalidArgument("line " + std::to_string(check.stuck->line + 1) +
                               ": a document starts with ',' outside a flow collection");
      }
    }
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
