// Label and field selectors with the real API server's syntax and semantics.
//
// Label selectors (k8s.io/apimachinery/pkg/labels): requirements separated by
// commas, all of which must hold:
//   a=b  a==b  a!=b  a in (x,y)  a notin (x,y)  a  !a  a>5  a<5
// `!=` and `notin` also match objects without the label. Keys are qualified
// names (optional DNS-subdomain prefix and '/', then at most 63 characters of
// [A-Za-z0-9-_.] starting and ending alphanumeric); values are empty or at most
// 63 characters of the same alphabet.
//
// Field selectors (k8s.io/apimachinery/pkg/fields): `f=v`, `f==v`, `f!=v`
// separated by commas; '\' escapes ',', '=', '!' and '\' in values. A field is a
// dotted path into the object (metadata.name, spec.nodeName, status.phase); a
// missing field reads as "", booleans as "true"/"false", numbers in decimal.
//
// Parsing and matching are pure functions of their inputs; a parsed selector is
// immutable and safe to share between threads.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::simkube {

struct LabelRequirement {
  enum class Op {
    kEquals,
    kNotEquals,
    kIn,
    kNotIn,
    kExists,
    kDoesNotExist,
    kGreaterThan,
    kLessThan
  };
  std::string key;
  Op op = Op::kExists;
  std::vector<std::string> values;  // sorted; one for =, !=, >, <

  // `labels` is the metadata.labels object (or null when absent).
  bool Matches(const nlohmann::json& labels) const;
  std::string String() const;
};

class LabelSelector {
 public:
  // The empty selector: matches everything.
  LabelSelector() = default;

  // Parses the query-string syntax. Errors read like the real server's,
  // e.g. "unable to parse requirement: found ')', expected: identifier".
  static Result<LabelSelector> Parse(std::string_view text);
  // From a metav1.LabelSelector object ({matchLabels, matchExpressions}) as
  // found in Deployment/DaemonSet specs. Null or {} selects everything.
  static Result<LabelSelector> FromJson(const nlohmann::json& selector);

  bool Empty() const { return requirements_.empty(); }
  // `labels` is the metadata.labels object (or null when absent).
  bool Matches(const nlohmann::json& labels) const;
  // Matches against obj["metadata"]["labels"].
  bool MatchesObject(const nlohmann::json& obj) const;
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }
  // Canonical text (requirements sorted by key), parseable again.
  std::string String() const;

 private:
  std::vector<LabelRequirement> requirements_;
};

struct FieldRequirement {
  std::string field;
  bool equals = true;  // false for !=
  std::string value;
};

class FieldSelector {
 public:
  FieldSelector() = default;

  static Result<FieldSelector> Parse(std::string_view text);

  bool Empty() const { return requirements_.empty(); }
  bool Matches(const nlohmann::json& obj) const;
  const std::vector<FieldRequirement>& requirements() const { return requirements_; }
  // The value this selector requires `field` to equal, if any (index shortcut).
  std::optional<std::string> RequiredValue(std::string_view field) const;
  std::string String() const;

  // The string value of a dotted field path in obj ("" when absent).
  static std::string FieldValue(const nlohmann::json& obj, std::string_view field);

 private:
  std::vector<FieldRequirement> requirements_;
};

// Validation used by the selector parser and by the store for metadata.labels.
// Each returns "" when valid, else the real server's message for that rule.
std::string ValidateQualifiedName(std::string_view key);
std::string ValidateLabelValue(std::string_view value);

}  // namespace gpuop::simkube
