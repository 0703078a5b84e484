#include "operator/operand_pods.h"

#include <initializer_list>
#include <utility>

#include "kube/object.h"
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

// Each element of `array` reduced to the listed members; null when none.
Json KeepEach(Json* array, std::initializer_list<const char*> keys) {
  if (!array || !array->is_array()) return nullptr;
  Json out = Json::array();
  for (Json& item : *array) out.push_back(Keep(&item, keys));
  return out;
}

Json KeptMetadata(Json* meta) {
  Json out = Keep(meta, {"name", "namespace", "uid", "resourceVersion", "deletionTimestamp"});
  // ReadPod: the DaemonSet revision the pod runs (the informer's selector is
  // the server's business; no other label is read).
  Json* labels = meta ? Member(*meta, "labels") : nullptr;
  if (Json* hash = labels ? Member(*labels, upgrade::kRevisionHashLabel) : nullptr) {
    out["labels"] = {{upgrade::kRevisionHashLabel, std::move(*hash)}};
  }
  // ReadPod: the controller's kind and name; a static pod's mirror annotation.
  if (Json* refs = Elements(meta ? Member(*meta, "ownerReferences") : nullptr)) {
    Json controllers = Json::array();
    for (Json& r : *refs) {
      if (Json* c = Member(r, "controller"); c && *c == true) {
        controllers.push_back(Keep(&r, {"kind", "name", "controller"}));
      }
    }
    if (!controllers.empty()) out["ownerReferences"] = std::move(controllers);
  }
  Json* annotations = meta ? Member(*meta, "annotations") : nullptr;
  if (Json* mirror = annotations ? Member(*annotations, "kubernetes.io/config.mirror") : nullptr) {
    out["annotations"] = {{"kubernetes.io/config.mirror", std::move(*mirror)}};
  }
  return out;
}

Json KeptSpec(Json* spec) {
  Json out = Keep(spec, {"nodeName", "resourceClaims"});
  // IsGpuPod: the containers' resources; ReadPod: the driver's config digest.
  if (Json* containers = Elements(spec ? Member(*spec, "containers") : nullptr)) {
    Json kept_containers = Json::array();
    bool any = false;
    for (Json& c : *containers) {
      Json kept = Json::object();
      if (Json* r = Member(c, "resources"); r && r->is_object() && !r->empty()) {
        kept["resources"] = std::move(*r);
      }
      if (Json* env = Elements(Member(c, "env"))) {
        Json digest = Json::array();
        for (Json& e : *env) {
          if (Json* name = Member(e, "name"); name && *name == upgrade::kConfigDigestEnv) {
            digest.push_back(std::move(e));
          }
        }
        if (!digest.empty()) kept["env"] = std::move(digest);
      }
      any = any || !kept.empty();
      kept_containers.push_back(std::move(kept));
    }
    if (any) out["containers"] = std::move(kept_containers);
  }
  // ReadPod: whether it mounts an emptyDir.
  if (Json* volumes = Elements(spec ? Member(*spec, "volumes") : nullptr)) {
    for (Json& v : *volumes) {
      if (Member(v, "emptyDir")) {
        out["volumes"] = Json::array({Keep(&v, {"emptyDir"})});
        break;
      }
    }
  }
  return out;
}

}  // namespace

void KeepOperandPodFields(Json& pod) {
  if (!pod.is_object()) return;
  // ValidationBlockers passes over a Ready or terminating pod, so of those
  // only what ReadPod reads stays: each container's ready and restartCount.
  const bool settled = kube::IsPodReady(pod) || kube::IsBeingDeleted(pod);
  Json out = Json::object();
  out["metadata"] = KeptMetadata(Member(pod, "metadata"));
  out["spec"] = KeptSpec(Member(pod, "spec"));

  Json* status = Member(pod, "status");
  Json kept_status = Keep(status, {"phase", "resourceClaimStatuses"});
  // IsPodReady: the Ready condition's status.
  if (Json* conditions = Elements(status ? Member(*status, "conditions") : nullptr)) {
    Json ready = Json::array();
    for (Json& c : *conditions) {
      if (Json* type = Member(c, "type"); type && *type == "Ready") {
        ready.push_back(Keep(&c, {"type", "status"}));
      }
    }
    if (!ready.empty()) kept_status["conditions"] = std::move(ready);
  }
  Json* mains = status ? Member(*status, "containerStatuses") : nullptr;
  Json* inits = status ? Member(*status, "initContainerStatuses") : nullptr;
  Json kept_mains = settled ? KeepEach(mains, {"ready", "restartCount"})
                            : KeepEach(mains, {"ready", "started", "restartCount", "state"});
  if (!kept_mains.is_null()) kept_status["containerStatuses"] = std::move(kept_mains);
  if (!settled) {
    Json kept_inits = KeepEach(inits, {"name", "state", "lastState"});
    if (!kept_inits.is_null()) kept_status["initContainerStatuses"] = std::move(kept_inits);
  }
  out["status"] = std::move(kept_status);
  pod = std::move(out);
}

}  // namespace gpuop::op
