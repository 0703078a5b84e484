// Server-side printing: the meta.k8s.io/v1 Table that kubectl asks for with
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` when it prints
// objects for people (`kubectl get`, `get -w`).
//
// A Table has columnDefinitions (name, type, format, description, priority;
// priority 1 columns show with -o wide only) and one row per object: the
// cells, and the object as PartialObjectMetadata (or the whole object with
// includeObject=Object, none with includeObject=None). Built-in resources get
// a few of the real server's standard columns (nodes: Status, Roles, Age,
// Version; pods: Ready, Status, Restarts, Age; ...); custom resources get
// their CRD's additionalPrinterColumns, or Name and Age when it has none.
//
// Pure functions of their inputs and the given clock reading; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/kube/registry.h"

namespace gpuop::simkube {

// True when an Accept header asks for a meta.k8s.io Table (v1 or v1beta1).
bool WantsTable(std::string_view accept);

struct TableOptions {
  bool include_headers = true;  // false: no columnDefinitions (watch events after the first)
  std::string include_object = "PartialObjectMetadata";  // or "Object", "None"
  std::string resource_version;                          // list metadata
  std::string continue_token;
  std::optional<int64_t> remaining_item_count;
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
};

// The Table for `objects` of resource `r`.
nlohmann::json ToTable(const ServedResource& r, const std::vector<nlohmann::json>& objects,
                       const TableOptions& options);

// The column definitions only (what ToTable puts in columnDefinitions).
nlohmann::json ColumnDefinitions(const ServedResource& r);

// k8s.io/apimachinery's duration.HumanDuration: "45s", "3m20s", "5h", "12d", "2y30d".
std::string HumanDuration(std::chrono::seconds d);

// Evaluates the JSONPath subset CRD printer columns use: `.a.b`, `['a.b']`,
// `[2]`, `[*]`, and filters `[?(@.type=="Ready")]`. Returns every match
// (empty when the path finds nothing or is malformed).
std::vector<nlohmann::json> EvalJsonPath(const nlohmann::json& obj, std::string_view path);

}  // namespace gpuop::simkube
