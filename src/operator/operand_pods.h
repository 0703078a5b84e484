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
//   metadata   name, namespace, uid, resourceVersion, labels, annotations,
//              ownerReferences, deletionTimestamp
//   spec       nodeName; each container's name, resources and the driver's
//              config digest variable (upgrade.h upgrade::kConfigDigestEnv); the
//              emptyDir volumes; resourceClaims
//   status     phase, conditions, resourceClaimStatuses, and each container
//              status but its image and ids
// A field added to what those functions read must be added here too
// (tests/unit/operator/operand_pods_test.cc compares both forms).
void KeepOperandPodFields(Json& pod);

}  // namespace gpuop::op
