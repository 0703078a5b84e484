// Server-side apply (PATCH with Content-Type application/apply-patch+yaml,
// `kubectl apply --server-side`) and the metadata.managedFields bookkeeping
// that goes with it, in the simplified form the emulator needs.
//
// Fields are tracked as sets of paths in the FieldsV1 trie format of
// sigs.k8s.io/structured-merge-diff ("f:spec" fields, "k:{\"name\":\"c\"}"
// items of map lists, "v:\"x\"" items of set lists, "." for an item itself).
// List semantics come from the schema: x-kubernetes-list-type map (merged by
// x-kubernetes-list-map-keys), set (union), atomic or unspecified (replaced
// whole); maps with x-kubernetes-map-type atomic are replaced whole.
//
// ServerSideApply:
//   - creates the object when it does not exist;
//   - merges the applied configuration into the live object, and removes the
//     fields this manager applied before and no longer applies (unless
//     another manager also owns them);
//   - reports a 409 Conflict when the configuration sets a field to a value
//     different from the live one and another manager owns it — the real
//     message ("Apply failed with 1 conflict: conflict with \"kubectl-label\"
//     using v1: .metadata.labels.app") and FieldManagerConflict causes —
//     unless force, which takes the fields over;
//   - keeps one managedFields entry per manager and operation (manager,
//     operation Apply|Update, apiVersion, time, fieldsType FieldsV1, fieldsV1,
//     subresource). A live object without managedFields is first owned by
//     "before-first-apply" (operation Update), like the real server.
// TrackUpdate records a non-apply write (create, update, patch) the same way:
// the fields it changed move to the writing manager (operation Update).
//
// Known simplifications: no conversion between versions of managed fields;
// field ownership is per leaf path only (no "." ownership of whole structs);
// ordering of merged list items keeps the live order and appends new items.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "sim/kube/api_error.h"
#include "sim/kube/resource.h"
#include "sim/kube/schema.h"

namespace gpuop::simkube {

// One path in FieldsV1 form: {"f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"}.
using FieldPath = std::vector<std::string>;
using FieldSet = std::set<FieldPath>;

// The set of fields an object (or applied configuration) specifies, by the
// schema's list and map types (schema may be nullptr: lists then atomic).
// apiVersion, kind and server-owned metadata (name, namespace, uid,
// resourceVersion, generation, creationTimestamp, managedFields, ...) are not
// fields anyone manages.
FieldSet FieldSetOf(const Json& object, const Schema* schema);

// FieldsV1 JSON of a set, and back.
Json FieldSetToFieldsV1(const FieldSet& set);
FieldSet FieldSetFromFieldsV1(const Json& fields_v1);

// ".spec.template.spec.containers[name=\"app\"].image": how conflicts print a path.
std::string FieldPathString(const FieldPath& path);

struct ApplyOptions {
  std::string field_manager;  // required
  bool force = false;
  std::string subresource;  // "" or "status"
  std::string now;          // RFC 3339 time for managedFields entries
};

// Applies `applied` (the request body) onto `live` (nullptr: the object does
// not exist and is created). Returns the new object with its managedFields.
// Errors: 400 when the body is not an object or the field manager is
// missing, 409 Conflict as described above.
ApiResult<Json> ServerSideApply(const Json* live, const Json& applied, const Schema* schema,
                                const ResourceInfo& resource, const ApplyOptions& options);

// Records in new_object's managedFields that `manager` (operation Update)
// wrote the fields that differ between old_object (nullptr on create) and
// new_object; those fields leave other managers' sets. An empty manager
// leaves managedFields as they are.
void TrackUpdate(const Json* old_object, Json& new_object, const Schema* schema,
                 const std::string& manager, const std::string& subresource,
                 const std::string& now);

}  // namespace gpuop::simkube
