// CustomResourceDefinitions (apiextensions.k8s.io/v1): what the API server
// checks in a CRD, what it serves from one, and how it treats the custom
// resources it serves.
//
//   - ValidateCrd: the CRD's own validation (name = <plural>.<group>, group
//     with a dot, scope, names, versions with exactly one storage version,
//     a structural openAPIV3Schema) as 422 field errors.
//   - DefaultCrd / AcceptCrd: the defaults the server fills in
//     (singular, listKind, conversion) and the status it sets once the names
//     are accepted (acceptedNames, storedVersions, conditions NamesAccepted
//     and Established True), so `kubectl wait --for=condition=established`
//     returns at once.
//   - CompiledCrd: the parsed CRD. Per served version: the ResourceInfo to
//     register, the printer columns, and the schema used by PrepareObject,
//     which does to a custom resource what the real server does on create and
//     update: prune fields the schema does not declare (unless
//     x-kubernetes-preserve-unknown-fields), report them for fieldValidation,
//     apply `default:` values, drop nulls of non-nullable fields, and validate
//     types, enums, required fields, bounds and metadata.
//
// Thread-safety: a CompiledCrd is immutable after Compile; share it between
// threads. The free functions are pure.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/kube/api_error.h"
#include "sim/kube/registry.h"
#include "sim/kube/resource.h"
#include "sim/kube/schema.h"

namespace gpuop::simkube {

struct CrdVersion {
  std::string name;  // "v1"
  bool served = false;
  bool storage = false;
  bool deprecated = false;
  std::string deprecation_warning;
  const Schema* schema = nullptr;  // openAPIV3Schema; nullptr only when absent
  // The version's additionalPrinterColumns as written ([] when none: the
  // table then shows Name and Age, like the real server; see table.h).
  Json printer_columns = Json::array();
  ResourceInfo info;
};

// What PrepareObject found in a custom resource.
struct CustomResourceFindings {
  std::vector<std::string> unknown_fields;  // pruned: "spec.foo", "metadata.app"
  std::vector<FieldError> errors;           // non-empty: 422 Invalid
};

class CompiledCrd {
 public:
  // Parses a CRD object that ValidateCrd accepts (call ValidateCrd first).
  static Result<std::shared_ptr<const CompiledCrd>> Compile(const Json& crd);

  const std::string& name() const { return name_; }    // "clusterpolicies.nvidia.com"
  const std::string& group() const { return group_; }  // "nvidia.com"
  const std::string& kind() const { return kind_; }
  bool namespaced() const { return namespaced_; }
  const std::vector<CrdVersion>& versions() const { return versions_; }
  // A served version by name, or nullptr.
  const CrdVersion* Version(std::string_view version) const;
  const CrdVersion* StorageVersion() const;

  // Prunes, defaults and validates `object` (a custom resource of `version`)
  // in place. Metadata is validated (name: DNS-1123 subdomain) when
  // `validate_meta`; pass false for a status-subresource write or a patch
  // preview where the caller validates the metadata itself.
  CustomResourceFindings PrepareObject(std::string_view version, Json& object,
                                       bool validate_meta = true) const;

 private:
  CompiledCrd() = default;
  static std::string TypeNameOf(const Json& v);
  std::string name_, group_, kind_;
  bool namespaced_ = true;
  std::vector<CrdVersion> versions_;
  std::vector<std::unique_ptr<SchemaArena>> arenas_;
};

// The CRD's own validation; empty when the CRD is acceptable. Call it after
// DefaultCrd, on the object the server would store.
std::vector<FieldError> ValidateCrd(const Json& crd);

// Fills what the server defaults in a CRD: names.singular (lowercase kind),
// names.listKind (<Kind>List), spec.conversion.strategy None.
void DefaultCrd(Json& crd);

// Sets status.acceptedNames, status.storedVersions and the NamesAccepted and
// Established conditions (True), with `now` as lastTransitionTime
// (RFC 3339, e.g. "2025-01-02T03:04:05Z").
void AcceptCrd(Json& crd, std::string_view now);

// --- As the HTTP layer and the store use them ---

// ValidateCrd as a 422 Invalid ApiError
// (`CustomResourceDefinition.apiextensions.k8s.io "x" is invalid: ...`).
ApiStatus ValidateCrdObject(const Json& crd);

// The resources to register for a compiled CRD: one per served version.
std::vector<ServedResource> ServedResources(const CompiledCrd& crd,
                                            std::shared_ptr<const Json> crd_object);

// PrepareObject with the request's fieldValidation: unknown fields under
// Strict are a 400 BadRequest ("<Kind> in version \"v1\" cannot be handled
// as a <Kind>: strict decoding error: unknown field \"spec.foo\""), under Warn
// warnings, under Ignore nothing (pruned in every mode); field errors are a
// 422 Invalid (`<Kind>.<group> "name" is invalid: ...`).
ApiStatus PrepareCustomResource(const CompiledCrd& crd, std::string_view version, Json& object,
                                FieldValidation mode, std::vector<std::string>* warnings);

}  // namespace gpuop::simkube
