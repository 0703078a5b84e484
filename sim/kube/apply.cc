#include "sim/kube/apply.h"

#include <algorithm>
#include <map>

#include "base/strings.h"

namespace gpuop::simkube {

namespace {

const std::set<std::string>& ServerOwnedMeta() {
  static const std::set<std::string> kFields = {"name",
                                                "namespace",
                                                "uid",
                                                "resourceVersion",
                                                "generation",
                                                "creationTimestamp",
                                                "deletionTimestamp",
                                                "deletionGracePeriodSeconds",
                                                "managedFields",
                                                "selfLink",
                                                "generateName"};
  return kFields;
}

const Schema* ChildSchema(const Schema* s, const std::string& key) {
  return s == nullptr ? nullptr : s->Child(key);
}

// How a list is merged: "map" (with keys), "set" or "atomic".
std::string ListType(const Schema* s, std::vector<std::string>* keys) {
  if (s == nullptr) return "atomic";
  if (s->list_type == "map" && !s->list_map_keys.empty()) {
    *keys = s->list_map_keys;
    return "map";
  }
  if (s->list_type.empty() && !s->patch_merge_key.empty()) {
    *keys = {s->patch_merge_key};
    return "map";
  }
  if (s->list_type == "set") return "set";
  return "atomic";
}

bool IsAtomicMap(const Schema* s) { return s != nullptr && s->map_type == "atomic"; }

std::string KeyElement(const Json& item, const std::vector<std::string>& keys) {
  Json k = Json::object();  // nlohmann::json keeps keys sorted, like SMD
  for (const std::string& key : keys) {
    if (item.is_object() && item.contains(key)) k[key] = item[key];
  }
  return "k:" + k.dump();
}

void Walk(const Json& v, const Schema* s, FieldPath& prefix, FieldSet& out) {
  if (v.is_object() && !IsAtomicMap(s)) {
    if (v.empty()) {
      if (!prefix.empty()) out.insert(prefix);
      return;
    }
    for (auto& [k, child] : v.items()) {
      prefix.push_back("f:" + k);
      Walk(child, ChildSchema(s, k), prefix, out);
      prefix.pop_back();
    }
    return;
  }
  if (v.is_array()) {
    std::vector<std::string> keys;
    std::string type = ListType(s, &keys);
    if (type == "map" && !v.empty()) {
      for (const Json& item : v) {
        prefix.push_back(KeyElement(item, keys));
        FieldPath self = prefix;
        self.push_back(".");
        out.insert(self);
        if (item.is_object()) {
          for (auto& [k, child] : item.items()) {
            prefix.push_back("f:" + k);
            Walk(child, ChildSchema(s->items, k), prefix, out);
            prefix.pop_back();
          }
        }
        prefix.pop_back();
      }
      return;
    }
    if (type == "set" && !v.empty()) {
      for (const Json& item : v) {
        prefix.push_back("v:" + item.dump());
        out.insert(prefix);
        prefix.pop_back();
      }
      return;
    }
  }
  if (!prefix.empty()) out.insert(prefix);
}

// Strips what nobody manages, and status or everything but status by subresource.
Json ManagedView(const Json& object, const ResourceInfo* r, const std::string& subresource) {
  Json v = object.is_object() ? object : Json::object();
  v.erase("apiVersion");
  v.erase("kind");
  if (v.contains("metadata") && v["metadata"].is_object()) {
    for (const std::string& f : ServerOwnedMeta()) v["metadata"].erase(f);
    if (v["metadata"].empty()) v.erase("metadata");
  }
  if (subresource == "status") {
    Json only = Json::object();
    if (v.contains("status")) only["status"] = v["status"];
    return only;
  }
  if (r == nullptr || r->subresources.status) v.erase("status");
  return v;
}

// The value at a path, or nullptr.
const Json* ValueAt(const Json& root, const FieldPath& path) {
  const Json* cur = &root;
  for (const std::string& e : path) {
    if (e == ".") return cur;
    if (StartsWith(e, "f:")) {
      if (!cur->is_object()) return nullptr;
      auto it = cur->find(e.substr(2));
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (StartsWith(e, "k:")) {
      if (!cur->is_array()) return nullptr;
      Json key = Json::parse(e.substr(2), nullptr, false);
      const Json* found = nullptr;
      for (const Json& item : *cur) {
        if (!item.is_object()) continue;
        bool match = key.is_object();
        for (auto& [k, kv] : key.items()) match &= item.contains(k) && item[k] == kv;
        if (match) {
          found = &item;
          break;
        }
      }
      if (found == nullptr) return nullptr;
      cur = found;
    } else if (StartsWith(e, "v:")) {
      if (!cur->is_array()) return nullptr;
      Json val = Json::parse(e.substr(2), nullptr, false);
      auto it = std::find(cur->begin(), cur->end(), val);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else {
      return nullptr;
    }
  }
  return cur;
}

// Removes the field at `path` from `root` (a list item for k:/v: paths ending in ".").
void RemoveAt(Json& root, FieldPath path) {
  if (path.empty()) return;
  if (path.back() == ".") path.pop_back();
  if (path.empty()) return;
  std::string last = path.back();
  path.pop_back();
  Json* parent = &root;
  for (const std::string& e : path) {
    const Json* found = ValueAt(*parent, {e});
    if (found == nullptr) return;
    parent = const_cast<Json*>(found);
  }
  if (StartsWith(last, "f:")) {
    if (parent->is_object()) parent->erase(last.substr(2));
    return;
  }
  const Json* item = ValueAt(*parent, {last});
  if (item == nullptr || !parent->is_array()) return;
  for (size_t i = 0; i < parent->size(); ++i) {
    if (&(*parent)[i] == item) {
      parent->erase(i);
      return;
    }
  }
}

// Drops maps left empty by removals, below `root` (not root itself).
void PruneEmpty(Json& v) {
  if (!v.is_object()) return;
  std::vector<std::string> drop;
  for (auto& [k, child] : v.items()) {
    bool was_nonempty_obj = child.is_object() && !child.empty();
    PruneEmpty(child);
    if (was_nonempty_obj && child.empty()) drop.push_back(k);
  }
  for (const std::string& k : drop) v.erase(k);
}

Json MergeApplied(const Json& live, const Json& applied, const Schema* s) {
  if (applied.is_object() && live.is_object() && !IsAtomicMap(s)) {
    Json out = live;
    for (auto& [k, v] : applied.items()) {
      out[k] = out.contains(k) ? MergeApplied(out[k], v, ChildSchema(s, k)) : v;
    }
    return out;
  }
  if (applied.is_array() && live.is_array()) {
    std::vector<std::string> keys;
    std::string type = ListType(s, &keys);
    if (type == "map") {
      Json out = live;
      for (const Json& item : applied) {
        std::string id = KeyElement(item, keys);
        bool merged = false;
        for (Json& cur : out) {
          if (KeyElement(cur, keys) == id) {
            cur = MergeApplied(cur, item, s->items);
            merged = true;
            break;
          }
        }
        if (!merged) out.push_back(item);
      }
      return out;
    }
    if (type == "set") {
      Json out = live;
      for (const Json& item : applied) {
        if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
      }
      return out;
    }
  }
  return applied;
}

struct Entry {
  std::string manager;
  std::string operation;
  std::string api_version;
  std::string time;
  std::string subresource;
  FieldSet fields;
};

std::vector<Entry> ReadEntries(const Json& object) {
  std::vector<Entry> out;
  if (!object.is_object() || !object.contains("metadata")) return out;
  const Json& meta = object["metadata"];
  if (!meta.is_object() || !meta.contains("managedFields") || !meta["managedFields"].is_array())
    return out;
  for (const Json& e : meta["managedFields"]) {
    if (!e.is_object()) continue;
    Entry entry;
    entry.manager = e.value("manager", "");
    entry.operation = e.value("operation", "");
    entry.api_version = e.value("apiVersion", "");
    entry.time = e.value("time", "");
    entry.subresource = e.value("subresource", "");
    if (e.contains("fieldsV1")) entry.fields = FieldSetFromFieldsV1(e["fieldsV1"]);
    out.push_back(std::move(entry));
  }
  return out;
}

void WriteEntries(Json& object, const std::vector<Entry>& entries) {
  Json list = Json::array();
  for (const Entry& e : entries) {
    if (e.fields.empty()) continue;
    Json j = {{"manager", e.manager},
              {"operation", e.operation},
              {"apiVersion", e.api_version},
              {"fieldsType", "FieldsV1"},
              {"fieldsV1", FieldSetToFieldsV1(e.fields)}};
    if (!e.time.empty()) j["time"] = e.time;
    if (!e.subresource.empty()) j["subresource"] = e.subresource;
    list.push_back(std::move(j));
  }
  if (!object["metadata"].is_object()) object["metadata"] = Json::object();
  if (list.empty()) {
    object["metadata"].erase("managedFields");
  } else {
    object["metadata"]["managedFields"] = std::move(list);
  }
}

bool IsLeafPath(const FieldPath& p) {
  return !p.empty() && p.back() != "." && !StartsWith(p.back(), "v:");
}

std::string ApiVersionOf(const Json& obj, const ResourceInfo* r) {
  if (obj.is_object() && obj.contains("apiVersion") && obj["apiVersion"].is_string()) {
    return obj["apiVersion"].get<std::string>();
  }
  return r != nullptr ? r->ApiVersion() : "";
}

}  // namespace

FieldSet FieldSetOf(const Json& object, const Schema* schema) {
  FieldSet out;
  FieldPath prefix;
  Json view = ManagedView(object, nullptr, "");
  if (object.is_object() && object.contains("status")) view["status"] = object["status"];
  Walk(view, schema, prefix, out);
  return out;
}

Json FieldSetToFieldsV1(const FieldSet& set) {
  Json root = Json::object();
  for (const FieldPath& p : set) {
    Json* cur = &root;
    for (const std::string& e : p) {
      if (!cur->contains(e)) (*cur)[e] = Json::object();
      cur = &(*cur)[e];
    }
  }
  return root;
}

namespace {
void ReadTrie(const Json& node, FieldPath& prefix, FieldSet& out) {
  if (!node.is_object()) return;
  if (node.empty() && !prefix.empty()) {
    out.insert(prefix);
    return;
  }
  for (auto& [k, child] : node.items()) {
    prefix.push_back(k);
    ReadTrie(child, prefix, out);
    prefix.pop_back();
  }
}
}  // namespace

FieldSet FieldSetFromFieldsV1(const Json& fields_v1) {
  FieldSet out;
  FieldPath prefix;
  ReadTrie(fields_v1, prefix, out);
  return out;
}

std::string FieldPathString(const FieldPath& path) {
  std::string out;
  for (const std::string& e : path) {
    if (e == ".") continue;
    if (StartsWith(e, "f:")) {
      out += "." + e.substr(2);
    } else if (StartsWith(e, "k:")) {
      Json key = Json::parse(e.substr(2), nullptr, false);
      std::vector<std::string> parts;
      if (key.is_object()) {
        for (auto& [k, v] : key.items()) parts.push_back(k + "=" + v.dump());
      }
      out += "[" + Join(parts, ",") + "]";
    } else if (StartsWith(e, "v:")) {
      out += "[=" + e.substr(2) + "]";
    } else if (StartsWith(e, "i:")) {
      out += "[" + e.substr(2) + "]";
    }
  }
  return out;
}

ApiResult<Json> ServerSideApply(const Json* live, const Json& applied, const Schema* schema,
                                const ResourceInfo& resource, const ApplyOptions& options) {
  if (!applied.is_object()) {
    return BadRequestError("error decoding YAML: the applied configuration must be an object");
  }
  if (options.field_manager.empty()) {
    return BadRequestError("PATCH /apply requires fieldManager to be set");
  }
  const std::string api_version = ApiVersionOf(applied, &resource);
  Json applied_view = ManagedView(applied, &resource, options.subresource);
  FieldSet applied_set;
  {
    FieldPath prefix;
    Walk(applied_view, schema, prefix, applied_set);
  }

  Json base;
  std::vector<Entry> entries;
  if (live == nullptr) {
    base = Json::object();
    base["apiVersion"] = api_version;
    base["kind"] = resource.kind;
    base["metadata"] = Json::object();
    for (const char* f : {"name", "namespace", "generateName"}) {
      if (applied.contains("metadata") && applied["metadata"].is_object() &&
          applied["metadata"].contains(f)) {
        base["metadata"][f] = applied["metadata"][f];
      }
    }
  } else {
    base = *live;
    entries = ReadEntries(*live);
    if (entries.empty()) {
      Entry first{"before-first-apply", "Update", ApiVersionOf(*live, &resource),
                  options.now,          "",       {}};
      FieldPath prefix;
      Walk(ManagedView(*live, &resource, options.subresource), schema, prefix, first.fields);
      entries.push_back(std::move(first));
    }
  }
  const Json live_view = ManagedView(base, &resource, options.subresource);

  // Conflicts: another manager owns a field we set to a different value.
  std::map<size_t, std::vector<FieldPath>> conflicts;
  size_t conflict_count = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    if (e.manager == options.field_manager && e.operation == "Apply") continue;
    if (e.subresource != options.subresource) continue;
    for (const FieldPath& p : applied_set) {
      if (!IsLeafPath(p) || e.fields.count(p) == 0) continue;
      const Json* want = ValueAt(applied_view, p);
      const Json* have = ValueAt(live_view, p);
      if (have == nullptr || want == nullptr || *want == *have) continue;
      conflicts[i].push_back(p);
      ++conflict_count;
    }
  }
  if (conflict_count > 0 && !options.force) {
    ApiError err;
    err.code = 409;
    err.reason = "Conflict";
    err.details = ApiError::Details{};
    std::string msg = "Apply failed with " + std::to_string(conflict_count) +
                      (conflict_count == 1 ? " conflict: " : " conflicts: ");
    bool first_group = true;
    for (auto& [idx, paths] : conflicts) {
      const Entry& e = entries[idx];
      std::string who = JsonQuote(e.manager);
      if (!e.subresource.empty()) who += " with subresource " + JsonQuote(e.subresource);
      std::string using_part = " using " + e.api_version;
      for (const FieldPath& p : paths) {
        err.details->causes.push_back(
            {"FieldManagerConflict", "conflict with " + who + using_part, FieldPathString(p)});
      }
      if (conflict_count == 1) {
        msg += "conflict with " + who + using_part + ": " + FieldPathString(paths[0]);
        continue;
      }
      if (!first_group) msg += "\n";
      first_group = false;
      msg += "conflicts with " + who + using_part + ":";
      for (const FieldPath& p : paths) msg += "\n- " + FieldPathString(p);
    }
    err.message = msg;
    return err;
  }
  // Forced: the conflicting fields leave their owners.
  for (auto& [idx, paths] : conflicts) {
    for (const FieldPath& p : paths) entries[idx].fields.erase(p);
  }

  // Fields this manager applied before and no longer applies are removed,
  // unless another manager owns them too.
  Entry* mine = nullptr;
  for (Entry& e : entries) {
    if (e.manager == options.field_manager && e.operation == "Apply" &&
        e.subresource == options.subresource) {
      mine = &e;
    }
  }
  Json merged = base;
  if (mine != nullptr) {
    for (const FieldPath& p : mine->fields) {
      if (applied_set.count(p) != 0) continue;
      bool shared = false;
      for (const Entry& e : entries) {
        if (&e != mine && e.fields.count(p) != 0) shared = true;
      }
      if (shared) continue;
      RemoveAt(merged, p);
    }
  }
  // Merge the applied configuration.
  Json to_merge = applied;
  to_merge.erase("apiVersion");
  to_merge.erase("kind");
  if (to_merge.contains("metadata") && to_merge["metadata"].is_object()) {
    for (const std::string& f : ServerOwnedMeta()) to_merge["metadata"].erase(f);
  }
  if (options.subresource == "status") {
    Json only = Json::object();
    if (to_merge.contains("status")) only["status"] = to_merge["status"];
    to_merge = only;
  } else if (resource.subresources.status) {
    to_merge.erase("status");
  }
  merged = MergeApplied(merged, to_merge, schema);
  PruneEmpty(merged);
  if (!merged.contains("metadata") || !merged["metadata"].is_object())
    merged["metadata"] = Json::object();
  if (live == nullptr) merged["apiVersion"] = api_version;

  if (mine != nullptr) {
    mine->fields = applied_set;
    mine->time = options.now;
    mine->api_version = api_version;
  } else {
    entries.push_back({options.field_manager, "Apply", api_version, options.now,
                       options.subresource, applied_set});
  }
  WriteEntries(merged, entries);
  return merged;
}

void TrackUpdate(const Json* old_object, Json& new_object, const Schema* schema,
                 const std::string& manager, const std::string& subresource,
                 const std::string& now) {
  if (manager.empty() || !new_object.is_object()) return;
  std::vector<Entry> entries = old_object ? ReadEntries(*old_object) : ReadEntries(new_object);
  Json old_view = old_object ? ManagedView(*old_object, nullptr, subresource) : Json::object();
  Json new_view = ManagedView(new_object, nullptr, subresource);
  if (subresource.empty()) {
    // The status of a resource without a status subresource is written here too.
    if (old_object && old_object->contains("status")) old_view["status"] = (*old_object)["status"];
    if (new_object.contains("status")) new_view["status"] = new_object["status"];
  }
  FieldSet old_set, new_set;
  {
    FieldPath prefix;
    Walk(old_view, schema, prefix, old_set);
  }
  {
    FieldPath prefix;
    Walk(new_view, schema, prefix, new_set);
  }
  FieldSet changed;
  for (const FieldPath& p : new_set) {
    const Json* before = ValueAt(old_view, p);
    const Json* after = ValueAt(new_view, p);
    if (old_set.count(p) == 0 || before == nullptr || after == nullptr || *before != *after) {
      changed.insert(p);
    }
  }
  FieldSet removed;
  for (const FieldPath& p : old_set) {
    if (new_set.count(p) == 0) removed.insert(p);
  }
  if (changed.empty() && removed.empty() && !entries.empty()) {
    WriteEntries(new_object, entries);
    return;
  }
  Entry* mine = nullptr;
  for (Entry& e : entries) {
    for (const FieldPath& p : changed) {
      if (!(e.manager == manager && e.operation == "Update")) e.fields.erase(p);
    }
    for (const FieldPath& p : removed) e.fields.erase(p);
    if (e.manager == manager && e.operation == "Update" && e.subresource == subresource) mine = &e;
  }
  std::string api_version = ApiVersionOf(new_object, nullptr);
  if (mine == nullptr) {
    entries.push_back({manager, "Update", api_version, now, subresource, {}});
    mine = &entries.back();
  }
  mine->fields.insert(changed.begin(), changed.end());
  mine->time = now;
  mine->api_version = api_version;
  WriteEntries(new_object, entries);
}

}  // namespace gpuop::simkube
