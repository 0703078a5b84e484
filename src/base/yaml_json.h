// YAML to JSON, the way the API server and kubectl read manifests: YAML 1.2
// core-schema scalars (unquoted null/true/false/numbers are typed; quoted
// scalars and everything else are strings).
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace YAML {
class Node;
}

namespace gpuop {

nlohmann::json YamlToJson(const YAML::Node& node);

// Whether `text` may go to yaml-cpp: UTF-8 with no NUL. YAML allows neither
// (yaml-cpp would take NULs for UTF-16/32 and decode the rest into strings
// that are not UTF-8, which nlohmann::json then throws on). InvalidArgument
// naming the byte: "byte 7 is not valid UTF-8".
Status CheckYamlText(std::string_view text);

// Every document of a YAML stream ("---"-separated), empty documents skipped.
// Errors carry the line ("line 12: ...") or, from CheckYamlText, the byte.
Result<std::vector<nlohmann::json>> ParseYamlDocuments(std::string_view text);

}  // namespace gpuop
