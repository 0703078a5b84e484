// Strategic merge patch (Content-Type application/strategic-merge-patch+json)
// for built-in kinds, driven by the schema's x-kubernetes-patch-strategy and
// x-kubernetes-patch-merge-key like k8s.io/apimachinery's strategicpatch:
//   - maps merge recursively; a null value deletes the key;
//   - lists whose strategy includes "merge" merge: lists of maps by their
//     merge key (containers by name, conditions by type, volumes by name, ...),
//     lists of primitives as a union (finalizers); other lists are replaced
//     whole (node taints, container args, tolerations, ...);
//   - directives: {"$patch": "replace" | "delete" | "merge"} in a map or as a
//     list element; "$retainKeys": [...] (retainKeys strategy: keys of the
//     original not listed are cleared); "$deleteFromPrimitiveList/<field>":
//     [...] (values removed from a merged primitive list);
//     "$setElementOrder/<field>": [...] (the order of a merged list).
// Where the schema does not know a field the patch behaves like a JSON merge
// patch (maps merged, lists replaced).
//
// Custom resources have no patch strategies: the real server refuses the
// media type with 415 UnsupportedMediaType; see UnsupportedMediaTypeMessage.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string>

#include "base/status.h"
#include "sim/kube/api_error.h"
#include "sim/kube/resource.h"
#include "sim/kube/schema.h"

namespace gpuop::simkube {

// Applies `patch` to `original`. `schema` is the kind's top-level schema
// (nullptr: no strategies known). An ill-formed patch (not an object, a list
// element without its merge key, a bad directive) is kInvalidArgument with the
// apiserver's wording; the HTTP layer answers it with 400 BadRequest.
Result<Json> StrategicMergePatch(const Json& original, const Json& patch, const Schema* schema);

// The media types a custom resource accepts for PATCH, in the order the real
// server lists them.
const std::vector<std::string>& CustomResourcePatchTypes();

// "the body of the request was in an unknown format - accepted media types
// include: application/json-patch+json, application/merge-patch+json,
// application/apply-patch+yaml": the message of the 415 the real server sends
// for a strategic merge patch of a custom resource.
std::string UnsupportedMediaTypeMessage(const std::vector<std::string>& accepted);

// The store's strategic-merge hook body: a custom resource (r.custom) is a
// 415 UnsupportedMediaType; otherwise the kind's schema drives the patch and an
// ill-formed patch is a 400 BadRequest with the message above.
ApiResult<Json> StrategicMergeForResource(const SchemaSet& schemas, const Json& current,
                                          const Json& patch, const ResourceInfo& r);

}  // namespace gpuop::simkube
