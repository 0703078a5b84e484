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

// Every document of a YAML stream ("---"-separated), empty documents skipped.
// Errors carry the line: "line 12: ...".
Result<std::vector<nlohmann::json>> ParseYamlDocuments(std::string_view text);

}  // namespace gpuop
