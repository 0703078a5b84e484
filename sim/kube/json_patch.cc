#include "sim/kube/json_patch.h"

#include <string>
#include <vector>

namespace gpuop::simkube {

using nlohmann::json;

json MergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  json result = target.is_object() ? target : json::object();
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      result.erase(key);
    } else {
      auto it = result.find(key);
      result[key] = MergePatch(it == result.end() ? json() : *it, value);
    }
  }
  return result;
}

json CreateMergePatch(const json& from, const json& to) {
  if (!from.is_object() || !to.is_object()) return to;
  json patch = json::object();
  for (const auto& [key, value] : from.items()) {
    if (!to.contains(key)) patch[key] = nullptr;
  }
  for (const auto& [key, value] : to.items()) {
    auto it = from.find(key);
    if (it == from.end()) {
      patch[key] = value;
    } else if (*it != value) {
      if (it->is_object() && value.is_object()) {
        patch[key] = CreateMergePatch(*it, value);
      } else {
        patch[key] = value;
      }
    }
  }
  return patch;
}

namespace {

// An RFC 6901 pointer split into unescaped reference tokens.
Result<std::vector<std::string>> ParsePointer(const std::string& ptr) {
  std::vector<std::string> tokens;
  if (ptr.empty()) return tokens;
  if (ptr[0] != '/') {
    return InvalidArgument("JSON pointer " + json(ptr).dump() + " must start with '/'");
  }
  std::string cur;
  for (size_t i = 1; i <= ptr.size(); ++i) {
    if (i == ptr.size() || ptr[i] == '/') {
      tokens.push_back(std::move(cur));
      cur.clear();
    } else if (ptr[i] == '~') {
      if (i + 1 < ptr.size() && (ptr[i + 1] == '0' || ptr[i + 1] == '1')) {
        cur += ptr[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        return InvalidArgument("JSON pointer " + json(ptr).dump() + " has an invalid escape");
      }
    } else {
      cur += ptr[i];
    }
  }
  return tokens;
}

// Array index: decimal without leading zeros. nullopt when not an index.
std::optional<size_t> ParseIndex(const std::string& tok) {
  if (tok.empty() || tok.size() > 18) return std::nullopt;
  if (tok.size() > 1 && tok[0] == '0') return std::nullopt;
  size_t v = 0;
  for (char c : tok) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  return v;
}

// The container holding the last token; nullptr when a step is missing.
json* Parent(json& doc, const std::vector<std::string>& tokens) {
  json* cur = &doc;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (cur->is_object()) {
      auto it = cur->find(t);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      auto idx = ParseIndex(t);
      if (!idx || *idx >= cur->size()) return nullptr;
      cur = &(*cur)[*idx];
    } else {
      return nullptr;
    }
  }
  return cur;
}

json* Find(json& doc, const std::vector<std::string>& tokens) {
  if (tokens.empty()) return &doc;
  json* parent = Parent(doc, tokens);
  if (parent == nullptr) return nullptr;
  const std::string& last = tokens.back();
  if (parent->is_object()) {
    auto it = parent->find(last);
    return it == parent->end() ? nullptr : &*it;
  }
  if (parent->is_array()) {
    auto idx = ParseIndex(last);
    return (idx && *idx < parent->size()) ? &(*parent)[*idx] : nullptr;
  }
  return nullptr;
}

std::string Missing(const std::string& op, const std::string& path) {
  return op + " operation does not apply: doc is missing path: " + json(path).dump() +
         ": missing value";
}

Status Add(json& doc, const std::string& path, json value) {
  GPUOP_ASSIGN_OR_RETURN(auto tokens, ParsePointer(path));
  if (tokens.empty()) {
    doc = std::move(value);
    return Status::Ok();
  }
  json* parent = Parent(doc, tokens);
  if (parent == nullptr) return InvalidArgument(Missing("add", path));
  const std::string& last = tokens.back();
  if (parent->is_object()) {
    (*parent)[last] = std::move(value);
  } else if (parent->is_array()) {
    if (last == "-") {
      parent->push_back(std::move(value));
    } else {
      auto idx = ParseIndex(last);
      if (!idx || *idx > parent->size()) {
        return InvalidArgument("add operation does not apply: index " + json(last).dump() +
                               " out of bounds in " + json(path).dump());
      }
      parent->insert(parent->begin() + static_cast<std::ptrdiff_t>(*idx), std::move(value));
    }
  } else {
    return InvalidArgument(Missing("add", path));
  }
  return Status::Ok();
}

Status Remove(json& doc, const std::string& path, const std::string& op) {
  GPUOP_ASSIGN_OR_RETURN(auto tokens, ParsePointer(path));
  if (tokens.empty()) {
    doc = nullptr;
    return Status::Ok();
  }
  json* parent = Parent(doc, tokens);
  const std::string& last = tokens.back();
  if (parent != nullptr && parent->is_object() && parent->contains(last)) {
    parent->erase(last);
    return Status::Ok();
  }
  if (parent != nullptr && parent->is_array()) {
    auto idx = ParseIndex(last);
    if (idx && *idx < parent->size()) {
      parent->erase(*idx);
      return Status::Ok();
    }
  }
  return InvalidArgument(op == "remove" ? "unable to remove nonexistent key: " + json(path).dump() +
                                              ": missing value"
                                        : Missing(op, path));
}

Result<json> Get(json& doc, const std::string& path, const std::string& op) {
  GPUOP_ASSIGN_OR_RETURN(auto tokens, ParsePointer(path));
  json* v = Find(doc, tokens);
  if (v == nullptr) return InvalidArgument(Missing(op, path));
  return *v;
}

Result<std::string> StringField(const json& op, const char* name, size_t index) {
  auto it = op.find(name);
  if (it == op.end() || !it->is_string()) {
    return InvalidArgument("operation " + std::to_string(index) + " is missing " +
                           json(name).dump());
  }
  return it->get<std::string>();
}

Status ApplyOne(json& doc, const json& op, size_t index) {
  if (!op.is_object()) {
    return InvalidArgument("operation " + std::to_string(index) + " is not an object");
  }
  GPUOP_ASSIGN_OR_RETURN(std::string kind, StringField(op, "op", index));
  GPUOP_ASSIGN_OR_RETURN(std::string path, StringField(op, "path", index));
  if (kind == "add" || kind == "replace" || kind == "test") {
    auto v = op.find("value");
    if (v == op.end()) {
      return InvalidArgument("operation " + std::to_string(index) + " (" + kind +
                             ") is missing \"value\"");
    }
    if (kind == "add") return Add(doc, path, *v);
    if (kind == "replace") {
      GPUOP_ASSIGN_OR_RETURN(auto tokens, ParsePointer(path));
      json* target = Find(doc, tokens);
      if (target == nullptr) {
        return InvalidArgument("replace operation does not apply: doc is missing key: " + path +
                               ": missing value");
      }
      *target = *v;
      return Status::Ok();
    }
    GPUOP_ASSIGN_OR_RETURN(json have, Get(doc, path, "test"));
    if (have != *v) return InvalidArgument("testing value " + path + " failed: test failed");
    return Status::Ok();
  }
  if (kind == "remove") return Remove(doc, path, "remove");
  if (kind == "move" || kind == "copy") {
    GPUOP_ASSIGN_OR_RETURN(std::string from, StringField(op, "from", index));
    GPUOP_ASSIGN_OR_RETURN(json value, Get(doc, from, kind));
    if (kind == "move") {
      if (path.size() > from.size() && path.compare(0, from.size(), from) == 0 &&
          path[from.size()] == '/') {
        return InvalidArgument("move operation cannot move " + json(from).dump() +
                               " into its own child " + json(path).dump());
      }
      if (path == from) return Status::Ok();
      GPUOP_RETURN_IF_ERROR(Remove(doc, from, "move"));
    }
    return Add(doc, path, std::move(value));
  }
  return InvalidArgument("Unexpected kind: " + kind);
}

}  // namespace

Result<json> ApplyJsonPatch(const json& doc, const json& patch) {
  if (!patch.is_array()) {
    return InvalidArgument("json: cannot unmarshal " + std::string(patch.type_name()) +
                           " into Go value of type jsonpatch.Patch");
  }
  json out = doc;
  for (size_t i = 0; i < patch.size(); ++i) {
    GPUOP_RETURN_IF_ERROR(ApplyOne(out, patch[i], i));
  }
  return out;
}

}  // namespace gpuop::simkube
