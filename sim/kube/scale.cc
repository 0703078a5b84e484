#include "sim/kube/scale.h"

#include <string>
#include <string_view>
#include <vector>

#include "sim/kube/selector.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

// The keys of a dotted path (".spec.replicas" -> spec, replicas).
std::vector<std::string> PathKeys(std::string_view path) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string_view::npos) dot = path.size();
    if (dot > start) keys.emplace_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  return keys;
}

const Json* At(const Json& obj, std::string_view path) {
  const Json* cur = &obj;
  for (const auto& key : PathKeys(path)) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

int64_t IntAt(const Json& obj, std::string_view path) {
  const Json* v = path.empty() ? nullptr : At(obj, path);
  return v && v->is_number_integer() ? v->get<int64_t>() : 0;
}

// status.selector: a LabelSelector object in its string form, or a custom
// resource's selector string as stored.
std::string SelectorAt(const Json& obj, std::string_view path) {
  const Json* v = path.empty() ? nullptr : At(obj, path);
  if (!v) return "";
  if (v->is_string()) return v->get<std::string>();
  auto selector = LabelSelector::FromJson(*v);
  return selector.ok() ? selector->String() : "";
}

void SetAt(Json& obj, std::string_view path, Json value) {
  Json* cur = &obj;
  for (const auto& key : PathKeys(path)) {
    if (!cur->is_object()) *cur = Json::object();
    cur = &(*cur)[key];
  }
  *cur = std::move(value);
}

// The string at a dotted path; "" when absent or not a string.
std::string StringAt(const Json& obj, std::string_view path) {
  const Json* v = At(obj, path);
  return v && v->is_string() ? v->get<std::string>() : "";
}

std::string ScaleMetaString(const Json& obj, const char* key) {
  return StringAt(obj, std::string(".metadata.") + key);
}

}  // namespace

Json ScaleOf(const ResourceInfo& r, const Json& obj) {
  const ScalePaths& paths = r.subresources.scale_paths;
  Json meta = Json::object();
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (std::string v = ScaleMetaString(obj, key); !v.empty()) meta[key] = v;
  }
  // autoscaling/v1 ScaleSpec.replicas is omitempty; ScaleStatus.replicas is not.
  Json spec = Json::object();
  if (int64_t replicas = IntAt(obj, paths.spec_replicas); replicas != 0) {
    spec["replicas"] = replicas;
  }
  Json status = {{"replicas", IntAt(obj, paths.status_replicas)}};
  if (std::string selector = SelectorAt(obj, paths.label_selector); !selector.empty()) {
    status["selector"] = selector;
  }
  return {{"kind", "Scale"},
          {"apiVersion", kScaleApiVersion},
          {"metadata", std::move(meta)},
          {"spec", std::move(spec)},
          {"status", std::move(status)}};
}

ApiResult<Json> WithScale(const ResourceInfo& r, const Json& obj, const Json& scale) {
  if (!scale.is_object()) return BadRequestError("the body of the request must be a Scale object");
  for (const char* field : {"apiVersion", "kind"}) {
    const Json* v = At(scale, std::string(".") + field);
    if (v && !v->is_string()) {
      return BadRequestError(std::string("the Scale's ") + field + " must be a string");
    }
  }
  std::string api_version = StringAt(scale, ".apiVersion");
  std::string kind = StringAt(scale, ".kind");
  if ((!api_version.empty() && api_version != kScaleApiVersion) ||
      (!kind.empty() && kind != "Scale")) {
    return BadRequestError("the scale subresource takes an autoscaling/v1 Scale, not " +
                           (api_version.empty() ? std::string("a") : api_version) + " " +
                           (kind.empty() ? std::string("object without a kind") : kind));
  }
  std::string name = ScaleMetaString(obj, "name");
  std::string scale_name = ScaleMetaString(scale, "name");
  if (!scale_name.empty() && scale_name != name) {
    return BadRequestError("the name of the object (" + scale_name +
                           ") does not match the name on the URL (" + name + ")");
  }
  const Json* replicas = At(scale, ".spec.replicas");
  std::vector<FieldError> errors;
  if (replicas && !replicas->is_number_integer()) {
    errors.push_back(FieldError::TypeInvalid("spec.replicas", *replicas, "must be of type int32"));
  } else if (replicas && replicas->get<int64_t>() < 0) {
    errors.push_back(
        FieldError::Invalid("spec.replicas", *replicas, "must be greater than or equal to 0"));
  }
  if (!errors.empty()) return InvalidError("autoscaling", "Scale", name, errors);
  std::string rv = ScaleMetaString(scale, "resourceVersion");
  if (!rv.empty() && rv != ScaleMetaString(obj, "resourceVersion")) {
    return ConflictError(r.Resource(), name, kOptimisticLockErrorMsg);
  }
  Json out = obj;
  SetAt(out, r.subresources.scale_paths.spec_replicas, replicas ? *replicas : Json(0));
  return out;
}

bool ScaleNamesResourceVersion(const Json& scale) {
  return !ScaleMetaString(scale, "resourceVersion").empty();
}

}  // namespace gpuop::simkube
