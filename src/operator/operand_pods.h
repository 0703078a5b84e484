// What the operator keeps of its operands' pods (the validator's and the
// driver's: one each per GPU node, so thousands at scale). A whole pod is
// 5-10 KB of JSON and several times that as a json tree; the operator reads a
// handful of fields (upgrade.h ReadPod, status.h ValidationBlockers, the
// validation taint), so its pod caches keep those and nothing else, as its node
// cache keeps only what node_labels.h reads.
#pragma once

#include <nlohmann/json.hpp>

namespace gpuop::op {

using Json = nlohmann::json;

// Reduces `pod` in place to what the operator reads, with the same answers
// from ReadPod, ValidationBlockers, kube::IsPodReady, PodNodeName, PodPhase,
// IsBeingDeleted and IsGpuPod as the whole pod:
//   metadata   name, namespace, uid, resourceVersion, deletionTimestamp,
//              the controller-revision-hash label, the controller's owner
//              reference (kind, name), the static pod mirror annotation
//   spec       nodeName, resourceClaims; the containers' resources and the
//              driver's config digest variable (upgrade::kConfigDigestEnv);
//              whether an emptyDir is mounted
//   status     phase, the Ready condition, resourceClaimStatuses, each
//              container's ready and restartCount; and, while the pod is
//              neither Ready nor terminating (what ValidationBlockers
//              explains), the first container's state and the init
//              containers' names and states
// A field added to what those functions read must be added here too
// (tests/unit/operator/operand_pods_test.cc compares both forms).
void KeepOperandPodFields(Json& pod);

}  // namespace gpuop::op
