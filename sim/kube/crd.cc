#include "sim/kube/crd.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include "base/strings.h"

namespace gpuop::simkube {

namespace {

// The JSON type of a value as the real server names it in validation errors.
const char* JsonTypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    case Json::value_t::null:
      return "null";
    case Json::value_t::number_float:
      return "number";
    default:
      return "integer";
  }
}

const Json& Get(const Json& obj, const char* key) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string Str(const Json& obj, const char* key) {
  const Json& v = Get(obj, key);
  return v.is_string() ? v.get<std::string>() : "";
}

std::string Idx(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// The metadata fields a custom resource keeps (metav1.ObjectMeta).
const std::set<std::string>& ObjectMetaFields() {
  static const std::set<std::string> kFields = {"name",
                                                "generateName",
                                                "namespace",
                                                "selfLink",
                                                "uid",
                                                "resourceVersion",
                                                "generation",
                                                "creationTimestamp",
                                                "deletionTimestamp",
                                                "deletionGracePeriodSeconds",
                                                "labels",
                                                "annotations",
                                                "ownerReferences",
                                                "finalizers",
                                                "managedFields"};
  return kFields;
}

// --- Structural schema checks of a CRD version ---

void CheckStructural(const Json& s, const std::string& path, bool root, bool array_item,
                     std::vector<FieldError>& errs) {
  if (!s.is_object()) {
    errs.push_back(FieldError::Invalid(path, s, "must be a JSON schema object"));
    return;
  }
  bool preserve = s.value("x-kubernetes-preserve-unknown-fields", false);
  bool int_or_string = s.value("x-kubernetes-int-or-string", false);
  std::string type = Str(s, "type");
  if (root && type != "object") {
    if (type.empty()) {
      errs.push_back(FieldError::Required(path + ".type", "must not be empty at the root"));
    } else {
      errs.push_back(FieldError::Invalid(path + ".type", type, "must be object at the root"));
    }
  } else if (!root && type.empty() && !preserve && !int_or_string) {
    errs.push_back(FieldError::Required(
        path + ".type", array_item ? "must not be empty for specified array items"
                                   : "must not be empty for specified object fields"));
  }
  static const std::set<std::string> kTypes = {"object",  "array",  "string",
                                               "integer", "number", "boolean"};
  if (!type.empty() && kTypes.count(type) == 0) {
    errs.push_back(FieldError::NotSupported(
        path + ".type", type, {"array", "boolean", "integer", "number", "object", "string"}));
  }
  if (s.contains("$ref"))
    errs.push_back(FieldError::Forbidden(path + ".$ref", "$ref is not supported"));
  const Json& props = Get(s, "properties");
  const Json& addl = Get(s, "additionalProperties");
  if (props.is_object() && !props.empty() && !addl.is_null() &&
      !(addl.is_boolean() && addl.get<bool>())) {
    errs.push_back(
        FieldError::Forbidden(path + ".additionalProperties",
                              "additionalProperties and properties are mutual exclusive"));
  }
  if (props.is_object()) {
    for (auto& [name, sub] : props.items()) {
      CheckStructural(sub, path + ".properties[" + name + "]", false, false, errs);
    }
  }
  if (addl.is_object()) CheckStructural(addl, path + ".additionalProperties", false, false, errs);
  const Json& items = Get(s, "items");
  if (type == "array") {
    if (items.is_null()) {
      errs.push_back(FieldError::Required(path + ".items", "must be specified"));
    } else if (items.is_array()) {
      errs.push_back(
          FieldError::Forbidden(path + ".items", "items must be a schema object and not an array"));
    }
  }
  if (items.is_object()) CheckStructural(items, path + ".items", false, true, errs);
  const Json& list_type = Get(s, "x-kubernetes-list-type");
  if (list_type.is_string()) {
    std::string lt = list_type.get<std::string>();
    if (lt != "atomic" && lt != "set" && lt != "map") {
      errs.push_back(
          FieldError::NotSupported(path + ".x-kubernetes-list-type", lt, {"atomic", "set", "map"}));
    } else if (type != "array") {
      errs.push_back(FieldError::Invalid(path + ".type", type,
                                         "must be array if x-kubernetes-list-type is specified"));
    } else if (lt == "map" && !Get(s, "x-kubernetes-list-map-keys").is_array()) {
      errs.push_back(FieldError::Required(path + ".x-kubernetes-list-map-keys",
                                          "must not be empty if x-kubernetes-list-type is map"));
    }
  }
}

// --- Custom resource pruning, defaulting and validation ---

class CrWalker {
 public:
  explicit CrWalker(CustomResourceFindings& out) : out_(out) {}

  // Drops unknown fields and nulls of non-nullable fields, then fills defaults.
  void PruneAndDefault(const Schema& s, Json& v, const std::string& path) {
    if (v.is_object() && s.type == SchemaType::kObject) {
      std::vector<std::string> drop;
      for (auto& [key, child] : v.items()) {
        const Schema* cs = nullptr;
        if (auto it = s.properties.find(key); it != s.properties.end()) {
          cs = it->second;
        } else if (s.additional_properties != nullptr) {
          cs = s.additional_properties;
        } else if (s.additional_properties_any || s.preserve_unknown_fields) {
          continue;
        } else if (s.embedded_resource &&
                   (key == "apiVersion" || key == "kind" || key == "metadata")) {
          continue;
        } else {
          out_.unknown_fields.push_back(Join2(path, key));
          drop.push_back(key);
          continue;
        }
        if (child.is_null() && !cs->nullable) {
          drop.push_back(key);
          continue;
        }
        PruneAndDefault(*cs, child, Join2(path, key));
      }
      for (const std::string& k : drop) v.erase(k);
      for (auto& [key, cs] : s.properties) {
        if (v.contains(key) || !cs->default_value.has_value()) continue;
        v[key] = *cs->default_value;
        PruneAndDefault(*cs, v[key], Join2(path, key));
      }
      return;
    }
    if (v.is_array() && s.type == SchemaType::kArray && s.items != nullptr) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].is_null() && s.items->default_value.has_value() && !s.items->nullable) {
          v[i] = *s.items->default_value;
        }
        PruneAndDefault(*s.items, v[i], Idx(path, i));
      }
    }
  }

  void Validate(const Schema& s, const Json& v, const std::string& path) {
    if (v.is_null()) {
      if (s.nullable || s.type == SchemaType::kAny) return;
      TypeError(s, v, path);
      return;
    }
    if (!TypeMatches(s, v)) {
      TypeError(s, v, path);
      return;
    }
    if (!s.enum_values.empty() &&
        std::find(s.enum_values.begin(), s.enum_values.end(), v) == s.enum_values.end()) {
      std::vector<std::string> allowed;
      for (const Json& e : s.enum_values)
        allowed.push_back(e.is_string() ? e.get<std::string>() : e.dump());
      out_.errors.push_back(FieldError::NotSupported(path, v, allowed));
    }
    if (v.is_string()) {
      const std::string& str = v.get_ref<const std::string&>();
      size_t len = CountRunes(str);
      if (s.max_length && static_cast<int64_t>(len) > *s.max_length) {
        out_.errors.push_back(FieldError::TooLong(path, v, static_cast<size_t>(*s.max_length)));
      }
      if (s.min_length && static_cast<int64_t>(len) < *s.min_length) {
        out_.errors.push_back(FieldError::Invalid(
            path, v,
            path + " in body should be at least " + std::to_string(*s.min_length) + " chars long"));
      }
      if (!s.pattern.empty()) {
        try {
          std::regex re(s.pattern, std::regex::ECMAScript);
          if (!std::regex_search(str, re)) {
            out_.errors.push_back(
                FieldError::Invalid(path, v, path + " in body should match '" + s.pattern + "'"));
          }
        } catch (const std::regex_error&) {
          // A pattern RE2 accepts and std::regex does not: not checked.
        }
      }
    }
    if (v.is_number() && s.type != SchemaType::kIntOrString) {
      double d = v.get<double>();
      if (s.maximum) {
        bool bad = s.exclusive_maximum ? d >= *s.maximum : d > *s.maximum;
        if (bad) {
          out_.errors.push_back(FieldError::Invalid(
              path, v,
              path + " in body should be less than " +
                  std::string(s.exclusive_maximum ? "" : "or equal to ") + Num(*s.maximum)));
        }
      }
      if (s.minimum) {
        bool bad = s.exclusive_minimum ? d <= *s.minimum : d < *s.minimum;
        if (bad) {
          out_.errors.push_back(FieldError::Invalid(
              path, v,
              path + " in body should be greater than " +
                  std::string(s.exclusive_minimum ? "" : "or equal to ") + Num(*s.minimum)));
        }
      }
    }
    if (v.is_array()) {
      if (s.max_items && static_cast<int64_t>(v.size()) > *s.max_items) {
        out_.errors.push_back({FieldError::Type::kTooMany, path, Json(v.size()),
                               "must have at most " + std::to_string(*s.max_items) + " items"});
      }
      if (s.min_items && static_cast<int64_t>(v.size()) < *s.min_items) {
        out_.errors.push_back(FieldError::Invalid(
            path, v,
            path + " in body should have at least " + std::to_string(*s.min_items) + " items"));
      }
      CheckListUniqueness(s, v, path);
      if (s.items != nullptr) {
        for (size_t i = 0; i < v.size(); ++i) Validate(*s.items, v[i], Idx(path, i));
      }
    }
    if (v.is_object() && s.type == SchemaType::kObject) {
      for (const std::string& req : s.required) {
        if (!v.contains(req)) out_.errors.push_back(FieldError::Required(Join2(path, req)));
      }
      if (s.max_properties && static_cast<int64_t>(v.size()) > *s.max_properties) {
        out_.errors.push_back(
            {FieldError::Type::kTooMany, path, Json(v.size()),
             "must have at most " + std::to_string(*s.max_properties) + " items"});
      }
      if (s.min_properties && static_cast<int64_t>(v.size()) < *s.min_properties) {
        out_.errors.push_back(FieldError::Invalid(path, v,
                                                  path + " in body should have at least " +
                                                      std::to_string(*s.min_properties) +
                                                      " properties"));
      }
      for (auto& [key, child] : v.items()) {
        auto it = s.properties.find(key);
        const Schema* cs = it != s.properties.end() ? it->second : s.additional_properties;
        if (cs != nullptr) Validate(*cs, child, Join2(path, key));
      }
    }
  }

 private:
  static std::string Join2(const std::string& a, const std::string& b) {
    return a.empty() ? b : a + "." + b;
  }

  static size_t CountRunes(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }

  static std::string Num(double d) {
    if (std::floor(d) == d && std::fabs(d) < 1e15) return std::to_string(static_cast<int64_t>(d));
    Json j = d;
    return j.dump();
  }

  static const char* TypeName(const Json& v) { return JsonTypeName(v); }


  static bool IsIntegral(const Json& v) {
    if (v.is_number_integer() || v.is_number_unsigned()) return true;
    if (v.is_number_float()) {
      double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
    return false;
  }

  static bool TypeMatches(const Schema& s, const Json& v) {
    switch (s.type) {
      case SchemaType::kAny:
        return true;
      case SchemaType::kObject:
        return v.is_object();
      case SchemaType::kArray:
        return v.is_array();
      case SchemaType::kString:
        return v.is_string();
      case SchemaType::kInteger:
        return IsIntegral(v);
      case SchemaType::kNumber:
        return v.is_number();
      case SchemaType::kBoolean:
        return v.is_boolean();
      case SchemaType::kIntOrString:
        return v.is_string() || IsIntegral(v);
      case SchemaType::kQuantity:
        return v.is_string() || v.is_number();
    }
    return true;
  }

  void TypeError(const Schema& s, const Json& v, const std::string& path) {
    std::string want;
    switch (s.type) {
      case SchemaType::kObject:
        want = "object";
        break;
      case SchemaType::kArray:
        want = "array";
        break;
      case SchemaType::kString:
        want = "string";
        break;
      case SchemaType::kInteger:
        want = "integer";
        break;
      case SchemaType::kNumber:
        want = "number";
        break;
      case SchemaType::kBoolean:
        want = "boolean";
        break;
      case SchemaType::kIntOrString:
        want = "integer,string";
        break;
      default:
        want = "string,number";
        break;
    }
    std::string got = TypeName(v);
    out_.errors.push_back(FieldError::TypeInvalid(
        path, got, path + " in body must be of type " + want + ": " + JsonQuote(got)));
  }

  void CheckListUniqueness(const Schema& s, const Json& v, const std::string& path) {
    if (s.list_type == "set") {
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (v[i] == v[j]) {
            out_.errors.push_back(FieldError::Duplicate(Idx(path, i), v[i]));
            break;
          }
        }
      }
    } else if (s.list_type == "map" && !s.list_map_keys.empty()) {
      std::vector<Json> seen;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_object()) continue;
        Json key = Json::object();
        for (const std::string& k : s.list_map_keys) {
          if (v[i].contains(k)) key[k] = v[i][k];
        }
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
          out_.errors.push_back(FieldError::Duplicate(Idx(path, i), key));
        } else {
          seen.push_back(key);
        }
      }
    }
  }

  CustomResourceFindings& out_;
};

}  // namespace

void DefaultCrd(Json& crd) {
  if (!crd.is_object()) return;
  Json& spec = crd["spec"];
  if (!spec.is_object()) return;
  Json& names = spec["names"];
  if (!names.is_object()) names = Json::object();
  std::string kind = Str(names, "kind");
  if (Str(names, "singular").empty() && !kind.empty()) names["singular"] = ToLower(kind);
  if (Str(names, "listKind").empty() && !kind.empty()) names["listKind"] = kind + "List";
  if (!spec.contains("conversion") || !spec["conversion"].is_object()) {
    spec["conversion"] = {{"strategy", "None"}};
  }
}

std::vector<FieldError> ValidateCrd(const Json& crd) {
  std::vector<FieldError> errs = ValidateObjectMeta(crd, NameRule::kDns1123Subdomain, false);
  const Json& spec = Get(crd, "spec");
  const Json& names = Get(spec, "names");
  std::string group = Str(spec, "group");
  std::string plural = Str(names, "plural");
  std::string name = Str(Get(crd, "metadata"), "name");
  if (!name.empty() && name != plural + "." + group) {
    errs.push_back(
        FieldError::Invalid("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
  }
  if (group.empty()) {
    errs.push_back(FieldError::Required("spec.group"));
  } else {
    std::vector<std::string> msgs = IsDns1123Subdomain(group);
    if (!msgs.empty()) {
      errs.push_back(FieldError::Invalid("spec.group", group, Join(msgs, ",")));
    } else if (group.find('.') == std::string::npos) {
      errs.push_back(
          FieldError::Invalid("spec.group", group, "should be a domain with at least one dot"));
    }
  }
  std::string scope = Str(spec, "scope");
  if (scope.empty()) {
    errs.push_back(FieldError::Required("spec.scope"));
  } else if (scope != "Cluster" && scope != "Namespaced") {
    errs.push_back(FieldError::NotSupported("spec.scope", scope, {"Cluster", "Namespaced"}));
  }
  auto check_name = [&](const char* field, bool mixed_case, bool required) {
    std::string v = Str(names, field);
    std::string path = std::string("spec.names.") + field;
    if (v.empty()) {
      if (required) errs.push_back(FieldError::Required(path));
      return;
    }
    std::vector<std::string> msgs = IsDns1035Label(mixed_case ? ToLower(v) : v);
    if (msgs.empty()) return;
    std::string detail = Join(msgs, ",");
    if (mixed_case) detail = "may have mixed case, but should otherwise match: " + detail;
    errs.push_back(FieldError::Invalid(path, v, detail));
  };
  check_name("plural", false, true);
  check_name("singular", false, true);
  check_name("kind", true, true);
  check_name("listKind", true, true);
  if (const Json& sn = Get(names, "shortNames"); sn.is_array()) {
    for (size_t i = 0; i < sn.size(); ++i) {
      std::string v = sn[i].is_string() ? sn[i].get<std::string>() : "";
      for (const std::string& m : IsDns1035Label(v)) {
        errs.push_back(FieldError::Invalid(Idx("spec.names.shortNames", i), v, m));
      }
    }
  }
  const Json& versions = Get(spec, "versions");
  if (!versions.is_array() || versions.empty()) {
    errs.push_back(FieldError::Invalid("spec.versions",
                                       versions.is_null() ? Json::array() : versions,
                                       "must have exactly one version marked as storage version"));
    return errs;
  }
  int storage = 0;
  bool any_served = false;
  std::set<std::string> seen;
  for (size_t i = 0; i < versions.size(); ++i) {
    const Json& v = versions[i];
    std::string vp = Idx("spec.versions", i);
    std::string vname = Str(v, "name");
    if (vname.empty()) {
      errs.push_back(FieldError::Required(vp + ".name"));
    } else {
      for (const std::string& m : IsDns1035Label(vname))
        errs.push_back(FieldError::Invalid(vp + ".name", vname, m));
      if (!seen.insert(vname).second) errs.push_back(FieldError::Duplicate(vp + ".name", vname));
    }
    if (Get(v, "storage").is_boolean() && Get(v, "storage").get<bool>()) ++storage;
    if (Get(v, "served").is_boolean() && Get(v, "served").get<bool>()) any_served = true;
    const Json& schema = Get(Get(v, "schema"), "openAPIV3Schema");
    std::string sp = vp + ".schema.openAPIV3Schema";
    if (schema.is_null()) {
      errs.push_back(FieldError::Required(sp, "schemas are required"));
    } else {
      CheckStructural(schema, sp, true, false, errs);
      SchemaArena arena;
      if (auto built = BuildSchema(schema, arena); !built.ok()) {
        errs.push_back(FieldError::Invalid(sp, Json::object(), built.status().message()));
      }
    }
    if (const Json& cols = Get(v, "additionalPrinterColumns"); cols.is_array()) {
      for (size_t c = 0; c < cols.size(); ++c) {
        std::string cp = Idx(vp + ".additionalPrinterColumns", c);
        if (Str(cols[c], "name").empty()) errs.push_back(FieldError::Required(cp + ".name"));
        std::string type = Str(cols[c], "type");
        static const std::vector<std::string> kTypes = {"boolean", "date", "integer", "number",
                                                        "string"};
        if (type.empty()) {
          errs.push_back(FieldError::Required(cp + ".type"));
        } else if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) {
          errs.push_back(FieldError::NotSupported(cp + ".type", type, kTypes));
        }
        if (Str(cols[c], "jsonPath").empty())
          errs.push_back(FieldError::Required(cp + ".jsonPath"));
      }
    }
  }
  if (storage != 1) {
    errs.push_back(FieldError::Invalid("spec.versions", versions,
                                       "must have exactly one version marked as storage version"));
  }
  if (!any_served) {
    errs.push_back(
        FieldError::Invalid("spec.versions", versions, "must have at least one version served"));
  }
  return errs;
}

void AcceptCrd(Json& crd, std::string_view now) {
  if (!crd.is_object()) return;
  const Json& spec = Get(crd, "spec");
  Json& status = crd["status"];
  if (!status.is_object()) status = Json::object();
  Json accepted = Json::object();
  const Json& names = Get(spec, "names");
  for (const char* f : {"plural", "singular", "shortNames", "kind", "listKind", "categories"}) {
    if (names.is_object() && names.contains(f)) accepted[f] = names[f];
  }
  status["acceptedNames"] = accepted;
  Json stored = status.contains("storedVersions") && status["storedVersions"].is_array()
                    ? status["storedVersions"]
                    : Json::array();
  if (const Json& versions = Get(spec, "versions"); versions.is_array()) {
    for (const Json& v : versions) {
      if (Get(v, "storage").is_boolean() && Get(v, "storage").get<bool>()) {
        Json name = Get(v, "name");
        if (std::find(stored.begin(), stored.end(), name) == stored.end()) stored.push_back(name);
      }
    }
  }
  status["storedVersions"] = stored;
  Json conditions = status.contains("conditions") && status["conditions"].is_array()
                        ? status["conditions"]
                        : Json::array();
  auto set_condition = [&](const char* type, const char* reason, const char* message) {
    for (Json& c : conditions) {
      if (Str(c, "type") == type) {
        if (Str(c, "status") != "True") c["lastTransitionTime"] = std::string(now);
        c["status"] = "True";
        c["reason"] = reason;
        c["message"] = message;
        return;
      }
    }
    conditions.push_back({{"type", type},
                          {"status", "True"},
                          {"lastTransitionTime", std::string(now)},
                          {"reason", reason},
                          {"message", message}});
  };
  set_condition("NamesAccepted", "NoConflicts", "no conflicts found");
  set_condition("Established", "InitialNamesAccepted", "the initial names have been accepted");
  status["conditions"] = conditions;
}

Result<std::shared_ptr<const CompiledCrd>> CompiledCrd::Compile(const Json& crd) {
  std::shared_ptr<CompiledCrd> out(new CompiledCrd());
  const Json& spec = Get(crd, "spec");
  const Json& names = Get(spec, "names");
  out->name_ = Str(Get(crd, "metadata"), "name");
  out->group_ = Str(spec, "group");
  out->kind_ = Str(names, "kind");
  out->namespaced_ = Str(spec, "scope") != "Cluster";
  if (out->group_.empty() || out->kind_.empty() || Str(names, "plural").empty()) {
    return InvalidArgument("CustomResourceDefinition " + out->name_ +
                           " lacks spec.group, spec.names.kind or spec.names.plural");
  }
  const Json& versions = Get(spec, "versions");
  if (!versions.is_array()) {
    return InvalidArgument("CustomResourceDefinition " + out->name_ + " has no spec.versions");
  }
  for (const Json& v : versions) {
    CrdVersion cv;
    cv.name = Str(v, "name");
    cv.served = Get(v, "served").is_boolean() && Get(v, "served").get<bool>();
    cv.storage = Get(v, "storage").is_boolean() && Get(v, "storage").get<bool>();
    cv.deprecated = Get(v, "deprecated").is_boolean() && Get(v, "deprecated").get<bool>();
    cv.deprecation_warning = Str(v, "deprecationWarning");
    const Json& schema = Get(Get(v, "schema"), "openAPIV3Schema");
    if (!schema.is_null()) {
      auto arena = std::make_unique<SchemaArena>();
      auto built = BuildSchema(schema, *arena);
      if (!built.ok()) {
        return built.status().Annotate("CustomResourceDefinition " + out->name_ + " version " +
                                       cv.name);
      }
      cv.schema = *built;
      out->arenas_.push_back(std::move(arena));
    }
    if (const Json& cols = Get(v, "additionalPrinterColumns"); cols.is_array()) {
      cv.printer_columns = cols;
    }
    ResourceInfo& info = cv.info;
    info.group = out->group_;
    info.version = cv.name;
    info.kind = out->kind_;
    info.plural = Str(names, "plural");
    info.singular = Str(names, "singular").empty() ? ToLower(out->kind_) : Str(names, "singular");
    info.list_kind = Str(names, "listKind").empty() ? out->kind_ + "List" : Str(names, "listKind");
    info.namespaced = out->namespaced_;
    for (const char* f : {"shortNames", "categories"}) {
      if (const Json& list = Get(names, f); list.is_array()) {
        for (const Json& x : list) {
          if (!x.is_string()) continue;
          (std::string(f) == "shortNames" ? info.short_names : info.categories)
              .push_back(x.get<std::string>());
        }
      }
    }
    const Json& sub = Get(v, "subresources");
    info.subresources.status = Get(sub, "status").is_object();
    if (const Json& scale = Get(sub, "scale"); scale.is_object()) {
      info.subresources.scale = true;
      ScalePaths& paths = info.subresources.scale_paths;
      paths.spec_replicas = Str(scale, "specReplicasPath");
      paths.status_replicas = Str(scale, "statusReplicasPath");
      paths.label_selector = Str(scale, "labelSelectorPath");
    }
    info.custom = true;
    ApplyDefaultBehaviour(info);
    out->versions_.push_back(std::move(cv));
  }
  return std::shared_ptr<const CompiledCrd>(std::move(out));
}

const CrdVersion* CompiledCrd::Version(std::string_view version) const {
  for (const CrdVersion& v : versions_) {
    if (v.name == version && v.served) return &v;
  }
  return nullptr;
}

const CrdVersion* CompiledCrd::StorageVersion() const {
  for (const CrdVersion& v : versions_) {
    if (v.storage) return &v;
  }
  return nullptr;
}

CustomResourceFindings CompiledCrd::PrepareObject(std::string_view version, Json& object,
                                                  bool validate_meta) const {
  CustomResourceFindings out;
  if (!object.is_object()) {
    out.errors.push_back(FieldError::TypeInvalid("", TypeNameOf(object), "must be of type object"));
    return out;
  }
  const CrdVersion* v = Version(version);
  // Metadata: only ObjectMeta's fields survive.
  if (object.contains("metadata") && object["metadata"].is_object()) {
    Json& meta = object["metadata"];
    std::vector<std::string> drop;
    for (auto& [k, _] : meta.items()) {
      if (ObjectMetaFields().count(k) == 0) drop.push_back(k);
    }
    for (const std::string& k : drop) {
      out.unknown_fields.push_back("metadata." + k);
      meta.erase(k);
    }
  }
  if (v != nullptr && v->schema != nullptr) {
    CrWalker walker(out);
    // The root: apiVersion, kind and metadata are the server's, the rest the schema's.
    Json meta = object.contains("metadata") ? object["metadata"] : Json();
    Json api_version = object.contains("apiVersion") ? object["apiVersion"] : Json();
    Json kind = object.contains("kind") ? object["kind"] : Json();
    object.erase("metadata");
    object.erase("apiVersion");
    object.erase("kind");
    walker.PruneAndDefault(*v->schema, object, "");
    // The root's own schema for metadata is ignored (ObjectMeta rules apply).
    object.erase("metadata");
    walker.Validate(*v->schema, object, "");
    if (!api_version.is_null()) object["apiVersion"] = api_version;
    if (!kind.is_null()) object["kind"] = kind;
    if (!meta.is_null()) object["metadata"] = meta;
  }
  if (validate_meta) {
    for (FieldError& e : ValidateObjectMeta(object, NameRule::kDns1123Subdomain, namespaced_)) {
      out.errors.push_back(std::move(e));
    }
  }
  return out;
}

std::string CompiledCrd::TypeNameOf(const Json& v) { return JsonTypeName(v); }

ApiStatus ValidateCrdObject(const Json& crd) {
  std::vector<FieldError> errs = ValidateCrd(crd);
  if (errs.empty()) return ApiStatus::Ok();
  return InvalidError("apiextensions.k8s.io", "CustomResourceDefinition",
                      Str(Get(crd, "metadata"), "name"), errs);
}

std::vector<ServedResource> ServedResources(const CompiledCrd& crd,
                                            std::shared_ptr<const Json> crd_object) {
  std::vector<ServedResource> out;
  for (const CrdVersion& v : crd.versions()) {
    if (!v.served) continue;
    ServedResource r;
    r.info = v.info;
    r.printer_columns = v.printer_columns;
    r.crd_name = crd.name();
    r.crd = crd_object;
    out.push_back(std::move(r));
  }
  return out;
}

ApiStatus PrepareCustomResource(const CompiledCrd& crd, std::string_view version, Json& object,
                                FieldValidation mode, std::vector<std::string>* warnings) {
  CustomResourceFindings f = crd.PrepareObject(version, object);
  GroupVersionKind gvk{crd.group(), std::string(version), crd.kind()};
  if (!f.unknown_fields.empty()) {
    DecodeFindings d;
    d.unknown_fields = f.unknown_fields;
    if (mode == FieldValidation::kStrict) {
      return BadRequestError(CannotHandleMessage(gvk, StrictDecodingMessage(d)));
    }
    if (mode == FieldValidation::kWarn && warnings != nullptr) {
      for (std::string& w : UnknownFieldWarnings(d)) warnings->push_back(std::move(w));
    }
  }
  if (f.errors.empty()) return ApiStatus::Ok();
  std::string name;
  if (object.contains("metadata") && object["metadata"].is_object()) {
    name = object["metadata"].value("name", "");
  }
  return InvalidError(crd.group(), crd.kind(), name, f.errors);
}

}  // namespace gpuop::simkube
