#include "sim/kube/strategic_merge.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "base/strings.h"

namespace gpuop::simkube {

namespace {

constexpr std::string_view kPatch = "$patch";
constexpr std::string_view kRetainKeys = "$retainKeys";
constexpr std::string_view kDeleteFromPrimitiveList = "$deleteFromPrimitiveList/";
constexpr std::string_view kSetElementOrder = "$setElementOrder/";

bool IsDirectiveKey(std::string_view key) {
  return key == kPatch || key == kRetainKeys || StartsWith(key, kDeleteFromPrimitiveList) ||
         StartsWith(key, kSetElementOrder);
}

const Schema* ItemsOf(const Schema* s) { return s == nullptr ? nullptr : s->items; }
const Schema* ChildOf(const Schema* s, const std::string& key) {
  return s == nullptr ? nullptr : s->Child(key);
}

// Removes every directive from a value that lands in the result without a
// counterpart in the original (a new map, a replaced list).
Json StripDirectives(const Json& v) {
  if (v.is_object()) {
    Json out = Json::object();
    for (auto& [k, x] : v.items()) {
      if (IsDirectiveKey(k)) continue;
      out[k] = StripDirectives(x);
    }
    return out;
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& x : v) {
      if (x.is_object() && x.size() == 1 && x.contains(kPatch)) continue;
      out.push_back(StripDirectives(x));
    }
    return out;
  }
  return v;
}

class Merger {
 public:
  // Merges `patch` into `orig` (a map). Returns nullopt when the patch says
  // the whole map is to be deleted ({"$patch": "delete"}).
  Result<std::optional<Json>> MergeMap(Json orig, const Json& patch, const Schema* schema) {
    if (!orig.is_object()) orig = Json::object();
    if (auto it = patch.find(kPatch); it != patch.end()) {
      if (!it->is_string()) return BadPatchType(*it);
      const std::string directive = it->get<std::string>();
      if (directive == "replace") return std::optional<Json>(StripDirectives(patch));
      if (directive == "delete") return std::optional<Json>();
      if (directive != "merge") return BadPatchType(*it);
    }
    if (auto it = patch.find(kRetainKeys); it != patch.end()) {
      if (!it->is_array()) {
        return InvalidArgument("invalid patch: $retainKeys must be a list of strings");
      }
      std::set<std::string> keep;
      for (const Json& k : *it) {
        if (!k.is_string())
          return InvalidArgument("invalid patch: $retainKeys must be a list of strings");
        keep.insert(k.get<std::string>());
      }
      for (auto& [k, _] : patch.items()) {
        if (!IsDirectiveKey(k) && keep.count(k) == 0) {
          return InvalidArgument("doesn't satisfy the retainKeys requirement: key " + JsonQuote(k) +
                                 " is in the patch but not in $retainKeys");
        }
      }
      std::vector<std::string> drop;
      for (auto& [k, _] : orig.items()) {
        if (keep.count(k) == 0) drop.push_back(k);
      }
      for (const std::string& k : drop) orig.erase(k);
    }
    std::map<std::string, Json> orders;
    for (auto& [k, v] : patch.items()) {
      if (StartsWith(k, kDeleteFromPrimitiveList)) {
        std::string field = k.substr(kDeleteFromPrimitiveList.size());
        if (!v.is_array()) {
          return InvalidArgument("invalid patch: " + k + " must be a list of primitives");
        }
        if (orig.contains(field) && orig[field].is_array()) {
          Json kept = Json::array();
          for (const Json& x : orig[field]) {
            if (std::find(v.begin(), v.end(), x) == v.end()) kept.push_back(x);
          }
          orig[field] = std::move(kept);
        }
      } else if (StartsWith(k, kSetElementOrder)) {
        if (!v.is_array()) return InvalidArgument("invalid patch: " + k + " must be a list");
        orders[k.substr(kSetElementOrder.size())] = v;
      }
    }
    for (auto& [k, v] : patch.items()) {
      if (IsDirectiveKey(k)) continue;
      const Schema* child = ChildOf(schema, k);
      if (v.is_null()) {
        orig.erase(k);
        continue;
      }
      if (v.is_object()) {
        Json base = orig.contains(k) && orig[k].is_object() ? orig[k] : Json::object();
        GPUOP_ASSIGN_OR_RETURN(std::optional<Json> merged, MergeMap(std::move(base), v, child));
        if (merged.has_value()) {
          orig[k] = std::move(*merged);
        } else {
          orig.erase(k);
        }
        continue;
      }
      if (v.is_array()) {
        Json base = orig.contains(k) && orig[k].is_array() ? orig[k] : Json::array();
        GPUOP_ASSIGN_OR_RETURN(Json merged, MergeList(std::move(base), v, child));
        orig[k] = std::move(merged);
        continue;
      }
      orig[k] = v;
    }
    for (auto& [field, order] : orders) {
      if (!orig.contains(field) || !orig[field].is_array()) continue;
      const Schema* child = ChildOf(schema, field);
      std::string key = child ? child->patch_merge_key : "";
      orig[field] = Reorder(orig[field], order, key);
    }
    return std::optional<Json>(std::move(orig));
  }

  Result<Json> MergeList(Json orig, const Json& patch, const Schema* schema) {
    // A {"$patch": "replace"} element replaces the whole list, whatever the strategy.
    for (const Json& e : patch) {
      if (e.is_object() && e.contains(kPatch)) {
        const Json& d = e[std::string(kPatch)];
        if (d == "replace" && e.size() == 1) return StripDirectives(patch);
      }
    }
    bool merge = schema != nullptr && schema->HasPatchStrategy("merge");
    if (!merge) return StripDirectives(patch);
    const std::string& key = schema->patch_merge_key;
    bool maps = !patch.empty() && patch[0].is_object();
    if (!maps) {
      // Primitive list with merge strategy: a union, original order first.
      for (const Json& e : patch) {
        if (e.is_object() || e.is_array()) {
          return InvalidArgument("unable to find api field in struct for the list of primitives");
        }
        if (std::find(orig.begin(), orig.end(), e) == orig.end()) orig.push_back(e);
      }
      return orig;
    }
    if (key.empty()) return StripDirectives(patch);
    for (const Json& e : patch) {
      if (!e.is_object()) {
        return InvalidArgument("invalid patch: a list of maps holds a non-map element " + e.dump());
      }
      auto kit = e.find(key);
      if (kit == e.end()) {
        return InvalidArgument("map: " + RenderMap(e) +
                               " does not contain declared merge key: " + key);
      }
      auto match = std::find_if(orig.begin(), orig.end(), [&](const Json& o) {
        return o.is_object() && o.contains(key) && o[key] == *kit;
      });
      std::string directive = e.contains(kPatch) && e[std::string(kPatch)].is_string()
                                  ? e[std::string(kPatch)].get<std::string>()
                                  : "";
      if (directive == "delete") {
        orig.erase(std::remove_if(orig.begin(), orig.end(),
                                  [&](const Json& o) {
                                    return o.is_object() && o.contains(key) && o[key] == *kit;
                                  }),
                   orig.end());
        continue;
      }
      if (directive == "replace") {
        Json replaced = StripDirectives(e);
        if (match != orig.end()) {
          *match = std::move(replaced);
        } else {
          orig.push_back(std::move(replaced));
        }
        continue;
      }
      Json base = match != orig.end() ? *match : Json::object();
      GPUOP_ASSIGN_OR_RETURN(std::optional<Json> merged,
                             MergeMap(std::move(base), e, ItemsOf(schema)));
      if (!merged.has_value()) continue;
      if (match != orig.end()) {
        *match = std::move(*merged);
      } else {
        orig.push_back(std::move(*merged));
      }
    }
    return orig;
  }

 private:
  static Status BadPatchType(const Json& v) {
    return InvalidArgument("Unknown patch type: " +
                           (v.is_string() ? v.get<std::string>() : v.dump()));
  }

  static std::string RenderMap(const Json& m) {
    std::string out = "map[";
    bool first = true;
    for (auto& [k, v] : m.items()) {
      if (!first) out += " ";
      first = false;
      out += k + ":" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    return out + "]";
  }

  // Orders `list` by `order` (primitives, or maps holding the merge key).
  // Elements not named by `order` keep their place after the element that
  // preceded them in the list.
  static Json Reorder(const Json& list, const Json& order, const std::string& key) {
    auto identity = [&](const Json& e) -> Json {
      if (!key.empty() && e.is_object()) return e.contains(key) ? e[key] : Json();
      return e;
    };
    std::vector<Json> order_ids;
    for (const Json& o : order) order_ids.push_back(identity(o));
    auto rank = [&](const Json& e) -> std::optional<size_t> {
      Json id = identity(e);
      for (size_t i = 0; i < order_ids.size(); ++i) {
        if (order_ids[i] == id) return i;
      }
      return std::nullopt;
    };
    std::vector<std::pair<size_t, Json>> ranked;
    for (const Json& e : list) {
      if (auto r = rank(e)) ranked.emplace_back(*r, e);
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    Json out = Json::array();
    for (auto& [_, e] : ranked) out.push_back(e);
    // Splice the unranked elements back after their predecessor.
    std::optional<Json> prev;
    for (const Json& e : list) {
      if (rank(e)) {
        prev = e;
        continue;
      }
      size_t at = 0;
      if (prev.has_value()) {
        for (size_t i = 0; i < out.size(); ++i) {
          if (out[i] == *prev) {
            at = i + 1;
            break;
          }
        }
      }
      out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), e);
      prev = e;
    }
    return out;
  }
};

}  // namespace

Result<Json> StrategicMergePatch(const Json& original, const Json& patch, const Schema* schema) {
  if (!patch.is_object()) {
    return InvalidArgument("the patch is not a JSON object: a strategic merge patch must be a map");
  }
  Merger m;
  GPUOP_ASSIGN_OR_RETURN(std::optional<Json> merged, m.MergeMap(original, patch, schema));
  if (!merged.has_value()) return Json::object();
  return std::move(*merged);
}

const std::vector<std::string>& CustomResourcePatchTypes() {
  static const std::vector<std::string> kTypes = {"application/json-patch+json",
                                                  "application/merge-patch+json",
                                                  "application/apply-patch+yaml"};
  return kTypes;
}

std::string UnsupportedMediaTypeMessage(const std::vector<std::string>& accepted) {
  return "the body of the request was in an unknown format - accepted media types include: " +
         Join(accepted, ", ");
}

ApiResult<Json> StrategicMergeForResource(const SchemaSet& schemas, const Json& current,
                                          const Json& patch, const ResourceInfo& r) {
  if (r.custom) {
    return UnsupportedMediaTypeError(UnsupportedMediaTypeMessage(CustomResourcePatchTypes()));
  }
  const Schema* schema = schemas.ForKind({r.group, r.version, r.kind});
  Result<Json> out = StrategicMergePatch(current, patch, schema);
  if (!out.ok()) return BadRequestError(out.status().message());
  return std::move(out).value();
}

}  // namespace gpuop::simkube
