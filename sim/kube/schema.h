// Schemas of Kubernetes objects, and the checks the API server makes with them.
//
// A SchemaSet is loaded once from the API server's OpenAPI v3 documents (one
// file per group/version, api/openapi/1.35/*.json). Every component schema
// becomes a Schema node; `allOf: [{$ref}]` is resolved by copying the target's
// structure into the referring node while keeping the referring node's own
// extensions (x-kubernetes-patch-strategy, list types, ...), exactly where the
// documents put them. Kinds are indexed by x-kubernetes-group-version-kind.
// The same node type holds a CustomResourceDefinition's openAPIV3Schema
// (crd.h builds those with BuildSchema).
//
// The checks follow what kube-apiserver does with a request body:
//   - DecodeBuiltin: the strict JSON decoding of a built-in type. Fields the
//     schema does not declare are dropped (always) and reported, so the caller
//     can apply the request's fieldValidation (Strict: 400 "strict decoding
//     error: unknown field ...", Warn: a Warning header, Ignore: nothing); a
//     JSON type the Go struct cannot hold is a 400 decode error.
//   - ValidateBuiltin: the hand-written validation the server runs for the
//     kinds gpuop creates (names, labels, pod containers, selectors, ...),
//     returning field errors for a 422 Invalid.
//   - Name validators with the apiserver's messages (DNS-1123 subdomain and
//     label, DNS-1035 label, path segment names, label keys and values).
//
// Thread-safety: a SchemaSet and its nodes are immutable once built; share them
// freely between threads (const access only). The free functions are pure.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kube/names.h"
#include "sim/kube/api_error.h"
#include "sim/kube/resource.h"

namespace gpuop::simkube {

using Json = nlohmann::json;

struct GroupVersionKind {
  std::string group;  // "" for the core group
  std::string version;
  std::string kind;

  // "v1" or "apps/v1".
  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // Splits "apps/v1" into group and version.
  static GroupVersionKind FromApiVersion(std::string_view api_version, std::string_view kind);
  bool operator==(const GroupVersionKind&) const = default;
  auto operator<=>(const GroupVersionKind&) const = default;
};

enum class SchemaType {
  kAny,     // no type: any JSON value (apiextensions JSON, RawExtension contents)
  kObject,  // properties and/or additionalProperties
  kArray,
  kString,
  kInteger,
  kNumber,
  kBoolean,
  kIntOrString,  // format int-or-string / x-kubernetes-int-or-string
  kQuantity,     // resource.Quantity: a string or a number
};

// One resolved schema node. Pointers point into the owning SchemaSet (or the
// CRD's arena) and stay valid as long as it lives.
struct Schema {
  SchemaType type = SchemaType::kAny;
  std::string format;   // int32, int64, byte, date-time, ...
  std::string go_name;  // Go type name of a component ("DeploymentSpec"); "" inline
  std::map<std::string, const Schema*> properties;
  const Schema* items = nullptr;                  // arrays
  const Schema* additional_properties = nullptr;  // maps: schema of the values
  bool additional_properties_any = false;         // additionalProperties: true
  std::vector<std::string> required;
  bool nullable = false;
  bool preserve_unknown_fields = false;  // x-kubernetes-preserve-unknown-fields
  bool embedded_resource = false;        // x-kubernetes-embedded-resource
  std::optional<Json> default_value;
  std::vector<Json> enum_values;
  std::optional<double> minimum, maximum;
  bool exclusive_minimum = false, exclusive_maximum = false;
  std::optional<int64_t> min_length, max_length, min_items, max_items;
  std::optional<int64_t> min_properties, max_properties;
  std::string pattern;

  // Merge semantics.
  std::string list_type;  // "atomic", "set", "map", or "" (unspecified)
  std::vector<std::string> list_map_keys;
  std::string map_type;        // "atomic", "granular" or ""
  std::string patch_strategy;  // "merge", "replace", "retainKeys", "merge,retainKeys"
  std::string patch_merge_key;

  bool IsObject() const { return type == SchemaType::kObject; }
  bool IsMap() const {
    return type == SchemaType::kObject && properties.empty() &&
           (additional_properties != nullptr || additional_properties_any);
  }
  // The schema of child `name` of an object node: a declared property, else
  // the additionalProperties schema; nullptr when the field is unknown.
  const Schema* Child(std::string_view name) const;
  bool HasPatchStrategy(std::string_view strategy) const;
};

// Owns schema nodes. Not copyable: nodes point at each other.
class SchemaArena {
 public:
  SchemaArena() = default;
  SchemaArena(const SchemaArena&) = delete;
  SchemaArena& operator=(const SchemaArena&) = delete;
  Schema* New();

 private:
  std::vector<std::unique_ptr<Schema>> nodes_;
};

// Builds the node tree of a JSON schema with no $ref (a CRD's openAPIV3Schema)
// in `arena`. Unknown keywords are ignored; a malformed one is an error.
Result<const Schema*> BuildSchema(const Json& json_schema, SchemaArena& arena);

class SchemaSet {
 public:
  // Loads every *.json document in `dir`.
  static Result<std::shared_ptr<const SchemaSet>> LoadDirectory(const std::string& dir);
  // For tests: from documents already parsed.
  static Result<std::shared_ptr<const SchemaSet>> FromDocuments(const std::vector<Json>& docs);

  // The top-level schema of a kind, or nullptr.
  const Schema* ForKind(const GroupVersionKind& gvk) const;
  // A component by its name ("io.k8s.api.core.v1.PodSpec"), or nullptr.
  const Schema* Named(std::string_view name) const;
  std::vector<GroupVersionKind> Kinds() const;

 private:
  SchemaSet() = default;
  Status AddDocument(const Json& doc);
  Status Link();

  SchemaArena arena_;
  std::map<std::string, Schema*, std::less<>> named_;
  std::map<GroupVersionKind, const Schema*> kinds_;
  // Nodes whose allOf/$ref still needs resolving: node -> target component name.
  std::vector<std::pair<Schema*, std::string>> pending_refs_;
};

// ---------------------------------------------------------------------------
// fieldValidation (query parameter of POST/PUT/PATCH).

enum class FieldValidation { kIgnore, kWarn, kStrict };
// "" is the server's default, Warn. Anything else than Ignore/Warn/Strict is
// an error with the apiserver's message.
Result<FieldValidation> ParseFieldValidation(std::string_view value);

// What decoding a request body found. Unknown fields were removed from the
// object already; the caller decides, from the fieldValidation mode, whether
// they are an error (StrictDecodingMessage), warnings (UnknownFieldWarnings)
// or nothing.
struct DecodeFindings {
  std::vector<std::string> unknown_fields;  // "spec.foo", "spec.ports[0].nodeport"
  std::vector<std::string> duplicate_fields;
  // Non-empty: the body cannot be decoded (a JSON type the field cannot hold);
  // a 400 BadRequest whatever the fieldValidation mode.
  std::string decode_error;
};

// Checks `object` against the kind's schema the way the Go JSON decoder of a
// built-in type would, dropping unknown fields from `object`.
DecodeFindings DecodeBuiltin(const Schema& root, Json& object);

// "strict decoding error: unknown field \"spec.foo\", unknown field \"x\"".
std::string StrictDecodingMessage(const DecodeFindings& findings);
// One Warning per unknown field: "unknown field \"spec.foo\"".
std::vector<std::string> UnknownFieldWarnings(const DecodeFindings& findings);
// "Deployment in version \"v1\" cannot be handled as a Deployment: <detail>":
// the message of the 400 the server sends for a body it cannot decode.
std::string CannotHandleMessage(const GroupVersionKind& gvk, std::string_view detail);

// ---------------------------------------------------------------------------
// Names, labels, annotations.

// The apiserver's rules and messages (src/kube/names.h, shared with gpuop).
using kube::IsConfigMapKey;
using kube::IsDns1035Label;
using kube::IsDns1123Label;
using kube::IsDns1123Subdomain;
using kube::IsLabelValue;
using kube::IsPathSegmentName;
using kube::IsQualifiedName;

enum class NameRule { kDns1123Subdomain, kDns1123Label, kDns1035Label, kPathSegment };
// The rule the server uses for metadata.name of a kind (namespaces:
// DNS-1123 label, services: DNS-1035 label, RBAC: path segment, most others:
// DNS-1123 subdomain). Custom resources use kDns1123Subdomain.
NameRule NameRuleForKind(const GroupVersionKind& gvk);

// Validates metadata: name (or generateName) by `rule`, namespace presence
// for `namespaced`, labels and annotations. Paths start at "metadata".
std::vector<FieldError> ValidateObjectMeta(const Json& object, NameRule rule, bool namespaced);

// The kind-specific validation of a built-in object (after DecodeBuiltin):
// object meta plus what the kind's strategy checks for the kinds gpuop uses.
// Kinds without specific rules get the object-meta checks only.
std::vector<FieldError> ValidateBuiltin(const GroupVersionKind& gvk, const Json& object,
                                        bool namespaced);

// ---------------------------------------------------------------------------
// Request-level checks for built-in resources, as ApiErrors.

// Decodes a POST/PUT body (or the result of a patch) of built-in resource `r`:
// unknown fields are dropped; under Strict they are a 400 BadRequest
// ("Deployment in version \"v1\" cannot be handled as a Deployment: strict
// decoding error: unknown field \"spec.foo\""), under Warn each is appended
// to `warnings` (may be null), under Ignore nothing. A wrong JSON type is a
// 400 in every mode. A kind the schemas do not know passes unchanged.
ApiStatus DecodeBuiltinBody(const SchemaSet& schemas, const ResourceInfo& r, Json& body,
                            FieldValidation mode, std::vector<std::string>* warnings);

// ValidateBuiltin as a 422 Invalid ApiError (InvalidError of api_error.h).
ApiStatus ValidateBuiltinObject(const ResourceInfo& r, const Json& object);

}  // namespace gpuop::simkube
