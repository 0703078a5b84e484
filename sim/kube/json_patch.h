// JSON merge patch (RFC 7386, application/merge-patch+json) and JSON patch
// (RFC 6902, application/json-patch+json), as the API server applies them to
// an object's JSON.
//
// Merge patch: objects merge recursively, null deletes a key, anything else
// (arrays included) replaces. JSON patch: add/remove/replace/move/copy/test
// with RFC 6901 pointers ("~0" = '~', "~1" = '/', "-" = append to an array).
// Errors read like the real server's ("the server rejected our request due to
// an error in our request" is the HTTP layer's; these messages are the cause,
// e.g. "doc is missing path: \"/spec/x\": missing value").
//
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace gpuop::simkube {

// RFC 7386: returns target with patch merged into it. A non-object patch
// replaces the whole target.
nlohmann::json MergePatch(const nlohmann::json& target, const nlohmann::json& patch);

// RFC 7386 the other way round: the merge patch that turns `from` into `to`
// (null for removed keys, nested objects diffed, everything else replaced).
nlohmann::json CreateMergePatch(const nlohmann::json& from, const nlohmann::json& to);

// RFC 6902: applies the operations in order; the document is unchanged on
// error (InvalidArgument naming the operation index and the path).
Result<nlohmann::json> ApplyJsonPatch(const nlohmann::json& doc, const nlohmann::json& patch);

}  // namespace gpuop::simkube
