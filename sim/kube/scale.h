// The scale subresource (GET/PUT/PATCH <resource>/<name>/scale), as
// kube-apiserver serves it for Deployments and ReplicaSets and for custom
// resources whose CRD turns it on: an autoscaling/v1 Scale that views the
// object's replica count. `kubectl scale` patches it; HPAs and KEDA read it.
//
// A Scale carries the object's name, namespace, uid, resourceVersion and
// creationTimestamp; spec.replicas from the object's spec replicas path;
// status.replicas from its status replicas path (0 when absent) and
// status.selector as a label selector string ("app=x,tier in (a,b)").
// Writing a Scale sets only the spec replicas path of the object; a
// resourceVersion in the Scale is a precondition, as on the object.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/kube/api_error.h"
#include "sim/kube/resource.h"

namespace gpuop::simkube {

inline constexpr std::string_view kScaleApiVersion = "autoscaling/v1";

// The Scale view of `obj`, a stored object of resource `r` (whose
// subresources.scale is on).
nlohmann::json ScaleOf(const ResourceInfo& r, const nlohmann::json& obj);

// `obj` with the replicas of `scale` written to its spec replicas path, after
// checking `scale` as the real server does: apiVersion/kind when given, the
// name, spec.replicas a non-negative integer (422 naming Scale.autoscaling
// otherwise), and metadata.resourceVersion, when set, equal to the object's
// (409 Conflict otherwise).
ApiResult<nlohmann::json> WithScale(const ResourceInfo& r, const nlohmann::json& obj,
                                    const nlohmann::json& scale);

// Whether `scale` names the resourceVersion it was read at (a precondition).
bool ScaleNamesResourceVersion(const nlohmann::json& scale);

}  // namespace gpuop::simkube
