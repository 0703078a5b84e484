#include "sim/kube/schema.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <set>

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::simkube {

namespace {

constexpr std::string_view kRefPrefix = "#/components/schemas/";

std::string LastDotted(std::string_view name, int from_end) {
  auto parts = Split(name, '.');
  if (static_cast<int>(parts.size()) < from_end) return std::string(name);
  return parts[parts.size() - from_end];
}

// Parses the keywords of one JSON schema object into `s`. $refs (direct or in
// allOf) are recorded in `refs` when given, an error otherwise.
Status ParseInto(const Json& j, Schema* s, SchemaArena& arena,
                 std::vector<std::pair<Schema*, std::string>>* refs, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": a schema must be a JSON object");
  auto ref_of = [&](const Json& r) -> Status {
    if (!r.is_string()) return InvalidArgument(where + ": $ref must be a string");
    std::string ref = r.get<std::string>();
    if (refs == nullptr) return InvalidArgument(where + ": $ref is not allowed here");
    if (!StartsWith(ref, kRefPrefix)) return InvalidArgument(where + ": unsupported $ref " + ref);
    refs->emplace_back(s, ref.substr(kRefPrefix.size()));
    return Status::Ok();
  };
  if (auto it = j.find("$ref"); it != j.end()) GPUOP_RETURN_IF_ERROR(ref_of(*it));
  if (auto it = j.find("allOf"); it != j.end() && it->is_array()) {
    for (const Json& part : *it) {
      if (part.is_object() && part.contains("$ref")) {
        GPUOP_RETURN_IF_ERROR(ref_of(part["$ref"]));
      }
      // Inline allOf parts only add value validations (CRDs); not structural.
    }
  }
  if (auto it = j.find("type"); it != j.end()) {
    if (!it->is_string()) return InvalidArgument(where + ": type must be a string");
    const std::string t = it->get<std::string>();
    if (t == "object")
      s->type = SchemaType::kObject;
    else if (t == "array")
      s->type = SchemaType::kArray;
    else if (t == "string")
      s->type = SchemaType::kString;
    else if (t == "integer")
      s->type = SchemaType::kInteger;
    else if (t == "number")
      s->type = SchemaType::kNumber;
    else if (t == "boolean")
      s->type = SchemaType::kBoolean;
    else
      return InvalidArgument(where + ": unsupported type \"" + t + "\"");
  }
  if (auto it = j.find("format"); it != j.end() && it->is_string())
    s->format = it->get<std::string>();
  if (s->format == "int-or-string" || j.value("x-kubernetes-int-or-string", false)) {
    s->type = SchemaType::kIntOrString;
  }
  if (auto it = j.find("oneOf"); it != j.end() && it->is_array() && s->type == SchemaType::kAny) {
    std::set<std::string> types;
    for (const Json& alt : *it) {
      if (alt.is_object() && alt.contains("type") && alt["type"].is_string()) {
        types.insert(alt["type"].get<std::string>());
      }
    }
    if (types == std::set<std::string>{"string", "number"}) s->type = SchemaType::kQuantity;
    if (types == std::set<std::string>{"integer", "string"}) s->type = SchemaType::kIntOrString;
  }
  if (auto it = j.find("properties"); it != j.end()) {
    if (!it->is_object()) return InvalidArgument(where + ": properties must be an object");
    if (s->type == SchemaType::kAny) s->type = SchemaType::kObject;
    for (auto& [name, sub] : it->items()) {
      Schema* child = arena.New();
      GPUOP_RETURN_IF_ERROR(ParseInto(sub, child, arena, refs, where + ".properties." + name));
      s->properties[name] = child;
    }
  }
  if (auto it = j.find("items"); it != j.end()) {
    if (!it->is_object()) return InvalidArgument(where + ": items must be a single schema");
    Schema* child = arena.New();
    GPUOP_RETURN_IF_ERROR(ParseInto(*it, child, arena, refs, where + ".items"));
    s->items = child;
  }
  if (auto it = j.find("additionalProperties"); it != j.end()) {
    if (it->is_boolean()) {
      s->additional_properties_any = it->get<bool>();
    } else {
      Schema* child = arena.New();
      GPUOP_RETURN_IF_ERROR(ParseInto(*it, child, arena, refs, where + ".additionalProperties"));
      s->additional_properties = child;
    }
    if (s->type == SchemaType::kAny) s->type = SchemaType::kObject;
  }
  if (auto it = j.find("required"); it != j.end() && it->is_array()) {
    for (const Json& r : *it) {
      if (r.is_string()) s->required.push_back(r.get<std::string>());
    }
  }
  s->nullable = j.value("nullable", false);
  s->preserve_unknown_fields = j.value("x-kubernetes-preserve-unknown-fields", false);
  s->embedded_resource = j.value("x-kubernetes-embedded-resource", false);
  if (auto it = j.find("default"); it != j.end()) s->default_value = *it;
  if (auto it = j.find("enum"); it != j.end() && it->is_array()) {
    s->enum_values.assign(it->begin(), it->end());
  }
  auto num = [&](const char* key, std::optional<double>& out) {
    if (auto it = j.find(key); it != j.end() && it->is_number()) out = it->get<double>();
  };
  auto integer = [&](const char* key, std::optional<int64_t>& out) {
    if (auto it = j.find(key); it != j.end() && it->is_number_integer()) out = it->get<int64_t>();
  };
  num("minimum", s->minimum);
  num("maximum", s->maximum);
  s->exclusive_minimum = j.value("exclusiveMinimum", false);
  s->exclusive_maximum = j.value("exclusiveMaximum", false);
  integer("minLength", s->min_length);
  integer("maxLength", s->max_length);
  integer("minItems", s->min_items);
  integer("maxItems", s->max_items);
  integer("minProperties", s->min_properties);
  integer("maxProperties", s->max_properties);
  if (auto it = j.find("pattern"); it != j.end() && it->is_string())
    s->pattern = it->get<std::string>();
  if (auto it = j.find("x-kubernetes-list-type"); it != j.end() && it->is_string()) {
    s->list_type = it->get<std::string>();
  }
  if (auto it = j.find("x-kubernetes-list-map-keys"); it != j.end() && it->is_array()) {
    for (const Json& k : *it) {
      if (k.is_string()) s->list_map_keys.push_back(k.get<std::string>());
    }
  }
  if (auto it = j.find("x-kubernetes-map-type"); it != j.end() && it->is_string()) {
    s->map_type = it->get<std::string>();
  }
  if (auto it = j.find("x-kubernetes-patch-strategy"); it != j.end() && it->is_string()) {
    s->patch_strategy = it->get<std::string>();
  }
  if (auto it = j.find("x-kubernetes-patch-merge-key"); it != j.end() && it->is_string()) {
    s->patch_merge_key = it->get<std::string>();
  }
  return Status::Ok();
}

// Copies the structure of `target` into `node` where `node` has none of its own.
void CopyStructure(Schema* node, const Schema& target) {
  if (node->type == SchemaType::kAny) node->type = target.type;
  if (node->format.empty()) node->format = target.format;
  if (node->go_name.empty()) node->go_name = target.go_name;
  if (node->properties.empty()) node->properties = target.properties;
  if (node->items == nullptr) node->items = target.items;
  if (node->additional_properties == nullptr) {
    node->additional_properties = target.additional_properties;
  }
  node->additional_properties_any |= target.additional_properties_any;
  if (node->required.empty()) node->required = target.required;
  node->preserve_unknown_fields |= target.preserve_unknown_fields;
  node->nullable |= target.nullable;
  if (node->list_type.empty()) node->list_type = target.list_type;
  if (node->list_map_keys.empty()) node->list_map_keys = target.list_map_keys;
  if (node->map_type.empty()) node->map_type = target.map_type;
  if (node->patch_strategy.empty()) node->patch_strategy = target.patch_strategy;
  if (node->patch_merge_key.empty()) node->patch_merge_key = target.patch_merge_key;
  if (node->enum_values.empty()) node->enum_values = target.enum_values;
}

}  // namespace

GroupVersionKind GroupVersionKind::FromApiVersion(std::string_view api_version,
                                                  std::string_view kind) {
  GroupVersionKind gvk;
  size_t slash = api_version.find('/');
  if (slash == std::string_view::npos) {
    gvk.version = std::string(api_version);
  } else {
    gvk.group = std::string(api_version.substr(0, slash));
    gvk.version = std::string(api_version.substr(slash + 1));
  }
  gvk.kind = std::string(kind);
  return gvk;
}

const Schema* Schema::Child(std::string_view name) const {
  auto it = properties.find(std::string(name));
  if (it != properties.end()) return it->second;
  return additional_properties;
}

bool Schema::HasPatchStrategy(std::string_view strategy) const {
  for (const std::string& s : Split(patch_strategy, ',')) {
    if (s == strategy) return true;
  }
  return false;
}

Schema* SchemaArena::New() {
  nodes_.push_back(std::make_unique<Schema>());
  return nodes_.back().get();
}

Result<const Schema*> BuildSchema(const Json& json_schema, SchemaArena& arena) {
  Schema* root = arena.New();
  GPUOP_RETURN_IF_ERROR(ParseInto(json_schema, root, arena, nullptr, "openAPIV3Schema"));
  return static_cast<const Schema*>(root);
}

Result<std::shared_ptr<const SchemaSet>> SchemaSet::LoadDirectory(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return NotFound("OpenAPI directory " + dir +
                    " cannot be opened; pass the path of api/openapi/1.35");
  }
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (EndsWith(name, ".json")) files.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) return NotFound("OpenAPI directory " + dir + " holds no *.json document");
  std::vector<Json> docs;
  for (const std::string& f : files) {
    GPUOP_ASSIGN_OR_RETURN(std::string text, ReadFile(f));
    Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return InvalidArgument("OpenAPI document " + f + " is not valid JSON");
    docs.push_back(std::move(doc));
  }
  return FromDocuments(docs);
}

Result<std::shared_ptr<const SchemaSet>> SchemaSet::FromDocuments(const std::vector<Json>& docs) {
  std::shared_ptr<SchemaSet> set(new SchemaSet());
  for (const Json& doc : docs) GPUOP_RETURN_IF_ERROR(set->AddDocument(doc));
  GPUOP_RETURN_IF_ERROR(set->Link());
  return std::shared_ptr<const SchemaSet>(std::move(set));
}

Status SchemaSet::AddDocument(const Json& doc) {
  const Json* schemas = nullptr;
  if (doc.contains("components") && doc["components"].contains("schemas")) {
    schemas = &doc["components"]["schemas"];
  }
  if (schemas == nullptr || !schemas->is_object()) {
    return InvalidArgument("OpenAPI document has no components.schemas");
  }
  for (auto& [name, body] : schemas->items()) {
    if (named_.count(name) != 0) continue;  // shared types repeat in every document
    Schema* node = arena_.New();
    GPUOP_RETURN_IF_ERROR(ParseInto(body, node, arena_, &pending_refs_, name));
    node->go_name = LastDotted(name, 1);
    named_.emplace(name, node);
    if (auto it = body.find("x-kubernetes-group-version-kind");
        it != body.end() && it->is_array()) {
      // Kinds shared by every group (DeleteOptions, WatchEvent) are not objects we serve.
      if (it->size() != 1) continue;
      const Json& g = (*it)[0];
      GroupVersionKind gvk{g.value("group", ""), g.value("version", ""), g.value("kind", "")};
      kinds_.emplace(gvk, node);
    }
  }
  return Status::Ok();
}

Status SchemaSet::Link() {
  // Components are never bare aliases of other components here, so resolving
  // in order of appearance is enough: a target's own structure is complete.
  // A chain (A refers to B which refers to C) is handled by repeating.
  std::set<Schema*> unresolved;
  for (auto& [node, _] : pending_refs_) unresolved.insert(node);
  for (int pass = 0; pass < 8 && !unresolved.empty(); ++pass) {
    for (auto& [node, target_name] : pending_refs_) {
      if (unresolved.count(node) == 0) continue;
      auto it = named_.find(target_name);
      if (it == named_.end()) return NotFound("OpenAPI $ref to unknown schema " + target_name);
      if (unresolved.count(it->second) != 0 && it->second != node) continue;
      CopyStructure(node, *it->second);
      unresolved.erase(node);
    }
  }
  pending_refs_.clear();
  if (!unresolved.empty()) return Internal("OpenAPI $ref cycle between components");
  return Status::Ok();
}

const Schema* SchemaSet::ForKind(const GroupVersionKind& gvk) const {
  auto it = kinds_.find(gvk);
  return it == kinds_.end() ? nullptr : it->second;
}

const Schema* SchemaSet::Named(std::string_view name) const {
  auto it = named_.find(name);
  return it == named_.end() ? nullptr : it->second;
}

std::vector<GroupVersionKind> SchemaSet::Kinds() const {
  std::vector<GroupVersionKind> out;
  for (const auto& [gvk, _] : kinds_) out.push_back(gvk);
  return out;
}

namespace {

FieldError Invalid(std::string field, Json value, std::string detail) {
  return FieldError::Invalid(std::move(field), std::move(value), std::move(detail));
}
FieldError Required(std::string field, std::string detail = "") {
  return FieldError::Required(std::move(field), std::move(detail));
}
FieldError NotSupported(std::string field, Json value, const std::vector<std::string>& supported) {
  return FieldError::NotSupported(std::move(field), std::move(value), supported);
}
FieldError Duplicate(std::string field, Json value) {
  return FieldError::Duplicate(std::move(field), std::move(value));
}

}  // namespace

Result<FieldValidation> ParseFieldValidation(std::string_view value) {
  if (value.empty() || value == "Warn") return FieldValidation::kWarn;
  if (value == "Strict") return FieldValidation::kStrict;
  if (value == "Ignore") return FieldValidation::kIgnore;
  return InvalidArgument("fieldValidation: Unsupported value: " + JsonQuote(value) +
                         ": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
}

// ---------------------------------------------------------------------------
// Decoding built-in objects.

namespace {

const char* JsonTypeForGo(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    case Json::value_t::null:
      return "null";
    default:
      return "number";
  }
}

std::string GoPackage(const Schema& s) {
  (void)s;
  return "v1";
}

std::string GoTypeName(const Schema& s) {
  switch (s.type) {
    case SchemaType::kString:
      return s.format == "byte" ? "[]uint8" : "string";
    case SchemaType::kInteger:
      return s.format.empty() ? "int" : s.format;
    case SchemaType::kNumber:
      return "float64";
    case SchemaType::kBoolean:
      return "bool";
    case SchemaType::kIntOrString:
      return "intstr.IntOrString";
    case SchemaType::kQuantity:
      return "resource.Quantity";
    case SchemaType::kArray:
      return "[]" + (s.items ? GoTypeName(*s.items) : std::string("interface {}"));
    case SchemaType::kObject:
      if (!s.go_name.empty() && !s.properties.empty()) return GoPackage(s) + "." + s.go_name;
      if (s.additional_properties) return "map[string]" + GoTypeName(*s.additional_properties);
      if (!s.go_name.empty()) return GoPackage(s) + "." + s.go_name;
      return "map[string]interface {}";
    case SchemaType::kAny:
      return "interface {}";
  }
  return "interface {}";
}

bool IsBase64(std::string_view s, size_t* bad_at) {
  auto is_b64 = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
  };
  size_t i = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '=') break;
    if (s[i] == '\r' || s[i] == '\n') continue;
    if (!is_b64(s[i])) {
      *bad_at = i;
      return false;
    }
  }
  size_t data = i;
  size_t pad = 0;
  for (; i < s.size(); ++i) {
    if (s[i] != '=') {
      *bad_at = i;
      return false;
    }
    ++pad;
  }
  if (pad > 2 || (data + pad) % 4 != 0) {
    *bad_at = (data / 4) * 4;
    return false;
  }
  return true;
}

bool IsQuantity(std::string_view s) {
  static const std::regex kRe("^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$");
  if (!std::regex_match(s.begin(), s.end(), kRe)) return false;
  // The suffix must be one the parser knows.
  static const std::regex kFull(
      "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$");
  return std::regex_match(s.begin(), s.end(), kFull);
}

class BuiltinDecoder {
 public:
  explicit BuiltinDecoder(DecodeFindings& out) : out_(out) {}

  // `path`: field path with indices for unknown-field messages; `go_path`: the
  // dotted path without indices for Go type errors; `owner`: the Go struct
  // holding the current field.
  void Walk(const Schema& s, Json& v, const std::string& path, const std::string& go_path,
            const std::string& owner) {
    if (v.is_null()) return;  // Go decodes null as the zero value
    auto type_error = [&](const std::string& what) {
      if (!out_.decode_error.empty()) return;
      out_.decode_error = "json: cannot unmarshal " + what + " into Go struct field " + owner +
                          "." + go_path + " of type " + GoTypeName(s);
    };
    switch (s.type) {
      case SchemaType::kAny:
        return;
      case SchemaType::kString:
        if (!v.is_string()) return type_error(JsonTypeForGo(v));
        if (s.format == "byte") {
          size_t bad = 0;
          if (!IsBase64(v.get_ref<const std::string&>(), &bad) && out_.decode_error.empty()) {
            out_.decode_error = "illegal base64 data at input byte " + std::to_string(bad);
          }
        }
        return;
      case SchemaType::kBoolean:
        if (!v.is_boolean()) return type_error(JsonTypeForGo(v));
        return;
      case SchemaType::kNumber:
        if (!v.is_number()) return type_error(JsonTypeForGo(v));
        return;
      case SchemaType::kInteger: {
        if (!v.is_number()) return type_error(JsonTypeForGo(v));
        if (v.is_number_float()) return type_error("number " + v.dump());
        if (s.format == "int32") {
          bool fits = v.is_number_integer()
                          ? v.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                                v.get<int64_t>() <= std::numeric_limits<int32_t>::max()
                          : v.get<uint64_t>() <= std::numeric_limits<int32_t>::max();
          if (!fits) return type_error("number " + v.dump());
        }
        return;
      }
      case SchemaType::kIntOrString:
        if (v.is_string()) return;
        if (v.is_number_integer() || v.is_number_unsigned()) return;
        return type_error(JsonTypeForGo(v));
      case SchemaType::kQuantity:
        if (v.is_number()) return;
        if (!v.is_string()) return type_error(JsonTypeForGo(v));
        if (!IsQuantity(v.get_ref<const std::string&>()) && out_.decode_error.empty()) {
          out_.decode_error =
              "quantities must match the regular expression "
              "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
        }
        return;
      case SchemaType::kArray:
        if (!v.is_array()) return type_error(JsonTypeForGo(v));
        if (s.items == nullptr) return;
        for (size_t i = 0; i < v.size(); ++i) {
          Walk(*s.items, v[i], path + "[" + std::to_string(i) + "]", go_path, owner);
        }
        return;
      case SchemaType::kObject:
        break;
    }
    if (!v.is_object()) return type_error(JsonTypeForGo(v));
    if (s.properties.empty()) {
      // A map (or a free-form object such as RawExtension).
      if (s.additional_properties == nullptr) return;
      for (auto& [key, child] : v.items()) {
        Walk(*s.additional_properties, child, Join2(path, key), go_path, owner);
      }
      return;
    }
    std::vector<std::string> unknown;
    for (auto& [key, child] : v.items()) {
      auto it = s.properties.find(key);
      if (it == s.properties.end()) {
        if (!s.preserve_unknown_fields) {
          unknown.push_back(key);
          out_.unknown_fields.push_back(Join2(path, key));
        }
        continue;
      }
      Walk(*it->second, child, Join2(path, key), Join2(go_path, key),
           s.go_name.empty() ? owner : s.go_name);
    }
    for (const std::string& key : unknown) v.erase(key);
  }

 private:
  static std::string Join2(const std::string& a, const std::string& b) {
    return a.empty() ? b : a + "." + b;
  }
  DecodeFindings& out_;
};

}  // namespace

DecodeFindings DecodeBuiltin(const Schema& root, Json& object) {
  DecodeFindings out;
  if (!object.is_object()) {
    out.decode_error = std::string("json: cannot unmarshal ") + JsonTypeForGo(object) +
                       " into Go value of type " + GoTypeName(root);
    return out;
  }
  BuiltinDecoder(out).Walk(root, object, "", "", root.go_name);
  return out;
}

std::string StrictDecodingMessage(const DecodeFindings& findings) {
  std::vector<std::string> parts;
  for (const std::string& f : findings.unknown_fields)
    parts.push_back("unknown field " + JsonQuote(f));
  for (const std::string& f : findings.duplicate_fields) {
    parts.push_back("duplicate field " + JsonQuote(f));
  }
  return "strict decoding error: " + Join(parts, ", ");
}

std::vector<std::string> UnknownFieldWarnings(const DecodeFindings& findings) {
  std::vector<std::string> out;
  for (const std::string& f : findings.unknown_fields)
    out.push_back("unknown field " + JsonQuote(f));
  for (const std::string& f : findings.duplicate_fields) {
    out.push_back("duplicate field " + JsonQuote(f));
  }
  return out;
}

std::string CannotHandleMessage(const GroupVersionKind& gvk, std::string_view detail) {
  return gvk.kind + " in version " + JsonQuote(gvk.version) + " cannot be handled as a " +
         gvk.kind + ": " + std::string(detail);
}

NameRule NameRuleForKind(const GroupVersionKind& gvk) {
  if (gvk.group.empty() && gvk.kind == "Namespace") return NameRule::kDns1123Label;
  if (gvk.group.empty() && gvk.kind == "Service") return NameRule::kDns1035Label;
  if (gvk.group == "rbac.authorization.k8s.io") return NameRule::kPathSegment;
  return NameRule::kDns1123Subdomain;
}

namespace {

std::vector<std::string> CheckName(std::string_view name, NameRule rule, bool prefix) {
  std::string n(name);
  if (prefix && rule != NameRule::kPathSegment && !n.empty() && n.back() == '-') n.back() = 'a';
  switch (rule) {
    case NameRule::kDns1123Subdomain:
      return IsDns1123Subdomain(n);
    case NameRule::kDns1123Label:
      return IsDns1123Label(n);
    case NameRule::kDns1035Label:
      return IsDns1035Label(n);
    case NameRule::kPathSegment:
      return IsPathSegmentName(n);
  }
  return {};
}

std::string StringAt(const Json& obj, std::initializer_list<const char*> path) {
  const Json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object()) return "";
    auto it = cur->find(p);
    if (it == cur->end()) return "";
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

const Json* At(const Json& obj, std::initializer_list<const char*> path) {
  const Json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(p);
    if (it == cur->end() || it->is_null()) return nullptr;
    cur = &*it;
  }
  return cur;
}

void ValidateLabels(const Json* labels, const std::string& path, std::vector<FieldError>& errs) {
  if (labels == nullptr || !labels->is_object()) return;
  for (auto& [k, v] : labels->items()) {
    for (const std::string& m : IsQualifiedName(k)) errs.push_back(Invalid(path, k, m));
    if (v.is_string()) {
      for (const std::string& m : IsLabelValue(v.get<std::string>())) {
        errs.push_back(Invalid(path, v, m));
      }
    }
  }
}

void ValidateMetaInto(const Json& object, NameRule rule, bool namespaced, const std::string& base,
                      bool name_required, std::vector<FieldError>& errs) {
  const Json* meta = At(object, {"metadata"});
  Json empty = Json::object();
  if (meta == nullptr) meta = &empty;
  std::string name = StringAt(*meta, {"name"});
  std::string generate_name = StringAt(*meta, {"generateName"});
  if (!generate_name.empty()) {
    for (const std::string& m : CheckName(generate_name, rule, true)) {
      errs.push_back(Invalid(base + ".generateName", generate_name, m));
    }
  }
  if (name.empty()) {
    // The server generates the name from generateName before validating.
    if (name_required && generate_name.empty())
      errs.push_back(Required(base + ".name", "name or generateName is required"));
  } else {
    for (const std::string& m : CheckName(name, rule, false)) {
      errs.push_back(Invalid(base + ".name", name, m));
    }
  }
  if (namespaced) {
    std::string ns = StringAt(*meta, {"namespace"});
    if (ns.empty()) {
      if (name_required) errs.push_back(Required(base + ".namespace"));
    } else {
      for (const std::string& m : IsDns1123Label(ns))
        errs.push_back(Invalid(base + ".namespace", ns, m));
    }
  }
  ValidateLabels(At(*meta, {"labels"}), base + ".labels", errs);
  if (const Json* ann = At(*meta, {"annotations"}); ann != nullptr && ann->is_object()) {
    size_t total = 0;
    for (auto& [k, v] : ann->items()) {
      for (const std::string& m : IsQualifiedName(ToLower(k))) {
        errs.push_back(Invalid(base + ".annotations", k, m));
      }
      total += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : 0);
    }
    if (total > 256 * 1024) {
      errs.push_back({FieldError::Type::kTooLong, base + ".annotations", std::nullopt,
                      "may not be more than 262144 bytes"});
    }
  }
}

std::string Idx(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

void ValidatePort(const Json* port, const std::string& path, std::vector<FieldError>& errs,
                  bool required) {
  if (port == nullptr) {
    if (required) errs.push_back(Required(path));
    return;
  }
  if (!port->is_number_integer()) return;
  int64_t p = port->get<int64_t>();
  if (p < 1 || p > 65535)
    errs.push_back(Invalid(path, *port, "must be between 1 and 65535, inclusive"));
}

void ValidateContainers(const Json* list, const std::string& path, std::vector<FieldError>& errs,
                        std::set<std::string>& names, bool required) {
  if (list == nullptr || !list->is_array() || list->empty()) {
    if (required) errs.push_back(Required(path));
    return;
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& c = (*list)[i];
    std::string cp = Idx(path, i);
    std::string name = StringAt(c, {"name"});
    if (name.empty()) {
      errs.push_back(Required(cp + ".name"));
    } else {
      auto msgs = IsDns1123Label(name);
      for (const std::string& m : msgs) errs.push_back(Invalid(cp + ".name", name, m));
      if (msgs.empty() && !names.insert(name).second) {
        errs.push_back(Duplicate(cp + ".name", name));
      }
    }
    if (StringAt(c, {"image"}).empty()) errs.push_back(Required(cp + ".image"));
    if (const Json* ports = At(c, {"ports"}); ports != nullptr && ports->is_array()) {
      for (size_t j = 0; j < ports->size(); ++j) {
        std::string pp = Idx(cp + ".ports", j);
        ValidatePort(At((*ports)[j], {"containerPort"}), pp + ".containerPort", errs, true);
        if (const Json* hp = At((*ports)[j], {"hostPort"});
            hp != nullptr && hp->is_number_integer() && hp->get<int64_t>() != 0) {
          ValidatePort(hp, pp + ".hostPort", errs, false);
        }
      }
    }
    if (const Json* pol = At(c, {"imagePullPolicy"}); pol != nullptr && pol->is_string()) {
      std::string v = pol->get<std::string>();
      if (v != "Always" && v != "IfNotPresent" && v != "Never") {
        errs.push_back(
            NotSupported(cp + ".imagePullPolicy", v, {"Always", "IfNotPresent", "Never"}));
      }
    }
  }
}

void ValidatePodSpec(const Json* spec, const std::string& path, std::vector<FieldError>& errs) {
  Json empty = Json::object();
  if (spec == nullptr) spec = &empty;
  std::set<std::string> names;
  ValidateContainers(At(*spec, {"containers"}), path + ".containers", errs, names, true);
  ValidateContainers(At(*spec, {"initContainers"}), path + ".initContainers", errs, names, false);
  if (const Json* rp = At(*spec, {"restartPolicy"}); rp != nullptr && rp->is_string()) {
    std::string v = rp->get<std::string>();
    if (v != "Always" && v != "OnFailure" && v != "Never") {
      errs.push_back(NotSupported(path + ".restartPolicy", v, {"Always", "OnFailure", "Never"}));
    }
  }
  if (const Json* tols = At(*spec, {"tolerations"}); tols != nullptr && tols->is_array()) {
    for (size_t i = 0; i < tols->size(); ++i) {
      const Json& t = (*tols)[i];
      std::string tp = Idx(path + ".tolerations", i);
      std::string op = StringAt(t, {"operator"});
      if (!op.empty() && op != "Exists" && op != "Equal") {
        errs.push_back(NotSupported(tp + ".operator", op, {"Equal", "Exists"}));
      }
      std::string effect = StringAt(t, {"effect"});
      if (!effect.empty() && effect != "NoSchedule" && effect != "PreferNoSchedule" &&
          effect != "NoExecute") {
        errs.push_back(
            NotSupported(tp + ".effect", effect, {"NoSchedule", "PreferNoSchedule", "NoExecute"}));
      }
      if (op == "Exists" && !StringAt(t, {"value"}).empty()) {
        errs.push_back(
            Invalid(tp + ".operator", op, "value must be empty when `operator` is 'Exists'"));
      }
    }
  }
  if (const Json* vols = At(*spec, {"volumes"}); vols != nullptr && vols->is_array()) {
    std::set<std::string> seen;
    for (size_t i = 0; i < vols->size(); ++i) {
      std::string name = StringAt((*vols)[i], {"name"});
      std::string vp = Idx(path + ".volumes", i) + ".name";
      if (name.empty()) {
        errs.push_back(Required(vp));
      } else if (!seen.insert(name).second) {
        errs.push_back(Duplicate(vp, name));
      }
    }
  }
}

// Matches a label selector (matchLabels + matchExpressions) against labels.
bool SelectorMatches(const Json& selector, const Json& labels) {
  if (const Json* ml = At(selector, {"matchLabels"}); ml != nullptr && ml->is_object()) {
    for (auto& [k, v] : ml->items()) {
      if (!labels.is_object() || !labels.contains(k) || labels[k] != v) return false;
    }
  }
  if (const Json* me = At(selector, {"matchExpressions"}); me != nullptr && me->is_array()) {
    for (const Json& req : *me) {
      std::string key = StringAt(req, {"key"});
      std::string op = StringAt(req, {"operator"});
      bool has = labels.is_object() && labels.contains(key);
      std::set<std::string> values;
      if (const Json* vs = At(req, {"values"}); vs != nullptr && vs->is_array()) {
        for (const Json& x : *vs) {
          if (x.is_string()) values.insert(x.get<std::string>());
        }
      }
      std::string cur = has && labels[key].is_string() ? labels[key].get<std::string>() : "";
      if (op == "In" && !(has && values.count(cur))) return false;
      if (op == "NotIn" && has && values.count(cur)) return false;
      if (op == "Exists" && !has) return false;
      if (op == "DoesNotExist" && has) return false;
    }
  }
  return true;
}

bool SelectorEmpty(const Json& selector) {
  const Json* ml = At(selector, {"matchLabels"});
  const Json* me = At(selector, {"matchExpressions"});
  return (ml == nullptr || ml->empty()) && (me == nullptr || me->empty());
}

void ValidateWorkload(const Json& object, const std::string& kind_lower,
                      std::vector<FieldError>& errs, bool daemonset) {
  const Json* spec = At(object, {"spec"});
  Json empty = Json::object();
  if (spec == nullptr) spec = &empty;
  const Json* selector = At(*spec, {"selector"});
  if (selector == nullptr) {
    errs.push_back(Required("spec.selector"));
  } else if (SelectorEmpty(*selector)) {
    errs.push_back(
        Invalid("spec.selector", *selector, "empty selector is invalid for " + kind_lower));
  }
  const Json* labels = At(*spec, {"template", "metadata", "labels"});
  if (selector != nullptr && !SelectorEmpty(*selector)) {
    Json lab = labels ? *labels : Json::object();
    if (!SelectorMatches(*selector, lab)) {
      errs.push_back(Invalid("spec.template.metadata.labels", lab,
                             "`selector` does not match template `labels`"));
    }
  }
  ValidateLabels(labels, "spec.template.metadata.labels", errs);
  ValidatePodSpec(At(*spec, {"template", "spec"}), "spec.template.spec", errs);
  if (daemonset) {
    if (const Json* rp = At(*spec, {"template", "spec", "restartPolicy"});
        rp != nullptr && rp->is_string() && rp->get<std::string>() != "Always") {
      errs.push_back(NotSupported("spec.template.spec.restartPolicy", *rp, {"Always"}));
    }
  }
  if (const Json* r = At(*spec, {"replicas"});
      r != nullptr && r->is_number_integer() && r->get<int64_t>() < 0) {
    errs.push_back(Invalid("spec.replicas", *r, "must be greater than or equal to 0"));
  }
}

void ValidateConfigData(const Json& object, std::vector<FieldError>& errs) {
  std::set<std::string> keys;
  for (const char* field : {"data", "binaryData", "stringData"}) {
    const Json* data = At(object, {field});
    if (data == nullptr || !data->is_object()) continue;
    for (auto& [k, _] : data->items()) {
      std::string fp = std::string(field) + "[" + k + "]";
      for (const std::string& m : IsConfigMapKey(k)) errs.push_back(Invalid(fp, k, m));
      if (std::string(field) != "stringData" && !keys.insert(k).second) {
        errs.push_back(Invalid(fp, k, "duplicate of key present in data"));
      }
    }
  }
}

void ValidateRoleBinding(const Json& object, bool cluster, std::vector<FieldError>& errs) {
  const Json* ref = At(object, {"roleRef"});
  Json empty = Json::object();
  if (ref == nullptr) ref = &empty;
  std::string kind = StringAt(*ref, {"kind"});
  if (cluster) {
    if (kind != "ClusterRole") errs.push_back(NotSupported("roleRef.kind", kind, {"ClusterRole"}));
  } else if (kind != "Role" && kind != "ClusterRole") {
    errs.push_back(NotSupported("roleRef.kind", kind, {"Role", "ClusterRole"}));
  }
  std::string name = StringAt(*ref, {"name"});
  if (name.empty()) {
    errs.push_back(Required("roleRef.name"));
  } else {
    for (const std::string& m : IsPathSegmentName(name))
      errs.push_back(Invalid("roleRef.name", name, m));
  }
  if (const Json* subjects = At(object, {"subjects"});
      subjects != nullptr && subjects->is_array()) {
    for (size_t i = 0; i < subjects->size(); ++i) {
      const Json& s = (*subjects)[i];
      std::string sp = Idx("subjects", i);
      std::string sk = StringAt(s, {"kind"});
      if (sk != "ServiceAccount" && sk != "User" && sk != "Group") {
        errs.push_back(NotSupported(sp + ".kind", sk, {"ServiceAccount", "User", "Group"}));
      }
      if (StringAt(s, {"name"}).empty()) errs.push_back(Required(sp + ".name"));
      if (sk == "ServiceAccount" && StringAt(s, {"namespace"}).empty() && cluster) {
        errs.push_back(Required(sp + ".namespace"));
      }
    }
  }
}

void ValidateRules(const Json& object, std::vector<FieldError>& errs) {
  const Json* rules = At(object, {"rules"});
  if (rules == nullptr || !rules->is_array()) return;
  for (size_t i = 0; i < rules->size(); ++i) {
    const Json* verbs = At((*rules)[i], {"verbs"});
    if (verbs == nullptr || !verbs->is_array() || verbs->empty()) {
      errs.push_back(Required(Idx("rules", i) + ".verbs", "verbs must contain at least one value"));
    }
  }
}

}  // namespace

std::vector<FieldError> ValidateObjectMeta(const Json& object, NameRule rule, bool namespaced) {
  std::vector<FieldError> errs;
  ValidateMetaInto(object, rule, namespaced, "metadata", true, errs);
  return errs;
}

std::vector<FieldError> ValidateBuiltin(const GroupVersionKind& gvk, const Json& object,
                                        bool namespaced) {
  std::vector<FieldError> errs = ValidateObjectMeta(object, NameRuleForKind(gvk), namespaced);
  const std::string& k = gvk.kind;
  if (gvk.group.empty()) {
    if (k == "Pod") {
      ValidatePodSpec(At(object, {"spec"}), "spec", errs);
    } else if (k == "ConfigMap" || k == "Secret") {
      ValidateConfigData(object, errs);
    } else if (k == "Service") {
      std::string type = StringAt(object, {"spec", "type"});
      std::string cluster_ip = StringAt(object, {"spec", "clusterIP"});
      const Json* ports = At(object, {"spec", "ports"});
      bool no_ports = ports == nullptr || !ports->is_array() || ports->empty();
      if (no_ports && type != "ExternalName" && cluster_ip != "None") {
        errs.push_back(Required("spec.ports"));
      }
      if (!type.empty() && type != "ClusterIP" && type != "NodePort" && type != "LoadBalancer" &&
          type != "ExternalName") {
        errs.push_back(NotSupported("spec.type", type,
                                    {"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}));
      }
      if (!no_ports) {
        for (size_t i = 0; i < ports->size(); ++i) {
          ValidatePort(At((*ports)[i], {"port"}), Idx("spec.ports", i) + ".port", errs, true);
        }
      }
    } else if (k == "Node") {
      if (const Json* taints = At(object, {"spec", "taints"});
          taints != nullptr && taints->is_array()) {
        for (size_t i = 0; i < taints->size(); ++i) {
          const Json& t = (*taints)[i];
          std::string tp = Idx("spec.taints", i);
          std::string key = StringAt(t, {"key"});
          for (const std::string& m : IsQualifiedName(key))
            errs.push_back(Invalid(tp + ".key", key, m));
          std::string effect = StringAt(t, {"effect"});
          if (effect.empty()) {
            errs.push_back(Required(tp + ".effect"));
          } else if (effect != "NoSchedule" && effect != "PreferNoSchedule" &&
                     effect != "NoExecute") {
            errs.push_back(NotSupported(tp + ".effect", effect,
                                        {"NoSchedule", "PreferNoSchedule", "NoExecute"}));
          }
        }
      }
    }
  } else if (gvk.group == "apps") {
    if (k == "DaemonSet") ValidateWorkload(object, "daemonset", errs, true);
    if (k == "Deployment") ValidateWorkload(object, "deployment", errs, false);
  } else if (gvk.group == "rbac.authorization.k8s.io") {
    if (k == "RoleBinding") ValidateRoleBinding(object, false, errs);
    if (k == "ClusterRoleBinding") ValidateRoleBinding(object, true, errs);
    if (k == "Role" || k == "ClusterRole") ValidateRules(object, errs);
  } else if (gvk.group == "coordination.k8s.io" && k == "Lease") {
    if (const Json* d = At(object, {"spec", "leaseDurationSeconds"});
        d != nullptr && d->is_number_integer() && d->get<int64_t>() <= 0) {
      errs.push_back(Invalid("spec.leaseDurationSeconds", *d, "must be greater than 0"));
    }
  } else if (gvk.group == "node.k8s.io" && k == "RuntimeClass") {
    std::string handler = StringAt(object, {"handler"});
    for (const std::string& m : IsDns1123Label(handler))
      errs.push_back(Invalid("handler", handler, m));
  } else if (gvk.group == "resource.k8s.io" && k == "ResourceSlice") {
    std::string driver = StringAt(object, {"spec", "driver"});
    if (driver.empty()) {
      errs.push_back(Required("spec.driver"));
    } else {
      for (const std::string& m : IsDns1123Subdomain(driver))
        errs.push_back(Invalid("spec.driver", driver, m));
    }
    if (StringAt(object, {"spec", "pool", "name"}).empty())
      errs.push_back(Required("spec.pool.name"));
  }
  return errs;
}

ApiStatus DecodeBuiltinBody(const SchemaSet& schemas, const ResourceInfo& r, Json& body,
                            FieldValidation mode, std::vector<std::string>* warnings) {
  GroupVersionKind gvk{r.group, r.version, r.kind};
  const Schema* root = schemas.ForKind(gvk);
  if (root == nullptr) return ApiStatus::Ok();
  DecodeFindings f = DecodeBuiltin(*root, body);
  if (!f.decode_error.empty()) return BadRequestError(CannotHandleMessage(gvk, f.decode_error));
  if (f.unknown_fields.empty() && f.duplicate_fields.empty()) return ApiStatus::Ok();
  if (mode == FieldValidation::kStrict) {
    return BadRequestError(CannotHandleMessage(gvk, StrictDecodingMessage(f)));
  }
  if (mode == FieldValidation::kWarn && warnings != nullptr) {
    for (std::string& w : UnknownFieldWarnings(f)) warnings->push_back(std::move(w));
  }
  return ApiStatus::Ok();
}

ApiStatus ValidateBuiltinObject(const ResourceInfo& r, const Json& object) {
  GroupVersionKind gvk{r.group, r.version, r.kind};
  std::vector<FieldError> errs = ValidateBuiltin(gvk, object, r.namespaced);
  if (errs.empty()) return ApiStatus::Ok();
  std::string name;
  if (object.contains("metadata") && object["metadata"].is_object()) {
    name = object["metadata"].value("name", "");
  }
  return InvalidError(r.group, r.kind, name, errs);
}

}  // namespace gpuop::simkube
