#include "operator/operand_pods.h"

#include <initializer_list>
#include <utility>

#include "operator/upgrade.h"

namespace gpuop::op {
namespace {

// The member `key` of `j` when `j` is an object holding one, else null.
Json* Member(Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// The elements of `j` when it is an array holding any.
Json* Elements(Json* j) { return j && j->is_array() && !j->empty() ? j : nullptr; }

// A new object with the listed members moved out of `from`.
Json Keep(Json* from, std::initializer_list<const char*> keys) {
  Json out = Json::object();
  if (!from) return out;
  for (const char* key : keys) {
    if (Json* v = Member(*from, key)) out[key] = std::move(*v);
  }
  return out;
}

}  // namespace

void KeepOperandPodFields(Json& pod) {
  if (!pod.is_object()) return;
  Json out = Json::object();
  out["metadata"] =
      Keep(Member(pod, "metadata"), {"name", "namespace", "uid", "resourceVersion", "labels",
                                     "annotations", "ownerReferences", "deletionTimestamp"});

  Json* spec = Member(pod, "spec");
  Json kept_spec = Keep(spec, {"nodeName", "resourceClaims"});
  if (Json* containers = Elements(spec ? Member(*spec, "containers") : nullptr)) {
    Json kept_containers = Json::array();
    for (Json& c : *containers) {
      Json kept = Keep(&c, {"name", "resources"});
      if (Json* env = Elements(Member(c, "env"))) {
        Json digest = Json::array();
        for (Json& e : *env) {
          if (Json* name = Member(e, "name"); name && *name == upgrade::kConfigDigestEnv) {
            digest.push_back(std::move(e));
          }
        }
        if (!digest.empty()) kept["env"] = std::move(digest);
      }
      kept_containers.push_back(std::move(kept));
    }
    kept_spec["containers"] = std::move(kept_containers);
  }
  if (Json* volumes = Elements(spec ? Member(*spec, "volumes") : nullptr)) {
    Json empty_dirs = Json::array();
    for (Json& v : *volumes) {
      if (Member(v, "emptyDir")) empty_dirs.push_back(Keep(&v, {"name", "emptyDir"}));
    }
    if (!empty_dirs.empty()) kept_spec["volumes"] = std::move(empty_dirs);
  }
  out["spec"] = std::move(kept_spec);

  Json* status = Member(pod, "status");
  Json kept_status = Keep(status, {"phase", "conditions", "resourceClaimStatuses"});
  for (const char* key : {"initContainerStatuses", "containerStatuses"}) {
    Json* statuses = status ? Member(*status, key) : nullptr;
    if (!statuses || !statuses->is_array()) continue;
    Json kept = Json::array();
    for (Json& s : *statuses) {
      kept.push_back(Keep(&s, {"name", "ready", "started", "restartCount", "state", "lastState"}));
    }
    kept_status[key] = std::move(kept);
  }
  out["status"] = std::move(kept_status);
  pod = std::move(out);
}

}  // namespace gpuop::op
