// Node labelling: which nvidia.com/ labels the operator wants on a node, as a
// pure function of the node's labels and the active policy. The adapter turns
// the difference into one merge patch per node, and writes nothing when there
// is no difference (so an idle cluster sees no writes).
//
// Rules (NVIDIA's controllers/nodelabeling_controller.go):
//   - a GPU node has feature.node.kubernetes.io/pci-10de.present=true, or the
//     pci-0300_10de / pci-0302_10de class variants (NFD's, or gpuop
//     node-discovery's, which sets the same keys);
//   - GPU nodes get nvidia.com/gpu.present=true (false once the PCI labels go)
//     and nvidia.com/gpu.deploy.<component>=true for each enabled component;
//     a non-empty value another component set (paused-for-mig-change) stays;
//     mig-manager only on MIG-capable nodes;
//   - nvidia.com/gpu.deploy.operands=false removes the deploy labels;
//   - MIG-capable nodes get nvidia.com/mig.config=<migManager.config.default>
//     when unset;
//   - without a policy (deleted) every label the operator adds goes away,
//     mig.config only while it still holds the default the operator set.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "operator/policy.h"

namespace gpuop::op {

using Labels = std::map<std::string, std::string>;
// label key → new value, or nullopt to remove it.
using LabelChanges = std::map<std::string, std::optional<std::string>>;

inline constexpr const char* kGpuPresentLabel = "nvidia.com/gpu.present";
inline constexpr const char* kDeployOperandsLabel = "nvidia.com/gpu.deploy.operands";
inline constexpr const char* kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr const char* kMigCapableLabel = "nvidia.com/mig.capable";

// "nvidia.com/gpu.deploy.device-plugin".
std::string DeployLabel(Component c);
bool IsGpuNode(const Labels& labels);
// nvidia.com/mig.capable=true, or else a MIG-capable product in
// nvidia.com/gpu.product (A100, A30, H100, H200, B200...).
bool IsMigCapable(const Labels& labels);

// The changes that bring `labels` to what `policy` wants; `policy` null: the
// cleanup after the ClusterPolicy is gone. Empty when nothing differs.
LabelChanges PlanNodeLabels(const Labels& labels, const Policy* policy);

// {"metadata":{"labels":{key: value|null}}}: a JSON merge patch.
nlohmann::json LabelPatch(const LabelChanges& changes);

// The operator's Node cache keeps a Node's labels as one "key=value\n"
// string in metadata.flatLabels instead of a json object: a GPU node's
// twenty-odd labels then take ~0.9 KB instead of ~3.2 KB, which is most of
// what 5,000 cached nodes cost (docs/performance.md). Label keys and values
// hold neither '=' nor a newline, so the form is unambiguous.
inline constexpr const char* kFlatLabelsField = "flatLabels";
// Moves metadata.labels of `node` into metadata.flatLabels.
void FlattenNodeLabels(nlohmann::json& node);
// A Node's labels, from metadata.flatLabels when the cache flattened them,
// else from metadata.labels.
Labels NodeLabels(const nlohmann::json& node);

// Beyond NVIDIA, opt-in (OperatorEnv::validation_taint): a GPU node is tainted
// NoSchedule with this key until its validator pod is Ready, and again when a
// validation fails later (the validator's readiness probe re-checks the
// driver), so GPU workloads never land on a node that cannot run them. Every
// operand DaemonSet tolerates it. Only this key is ever added or removed: a
// taint someone else set is never touched.
inline constexpr const char* kValidationTaintKey = "gpuop.io/validation-pending";

// Whether the node should carry the taint: the feature is on, a policy is
// active, the node runs the operands, and its validator pod is not Ready.
bool WantValidationTaint(bool enabled, bool policy_active, bool gpu_node_with_operands,
                         bool validator_ready);

// The node's spec.taints with the validation taint added (want) or removed;
// nullopt when the list already is so. Other taints keep their order.
std::optional<nlohmann::json> TaintsWithValidation(const nlohmann::json& taints, bool want);

}  // namespace gpuop::op
