// Pausing the GPU operands on a node for a driver reload: k8s-driver-manager's
// table over the node's nvidia.com/gpu.deploy.* labels, and which pods are the
// operands that must leave before the driver unloads. The driver manager
// pauses them from inside the new driver pod; the operator's upgrade
// controller pauses them before it deletes the old one, so that the old
// driver container can unload on SIGTERM instead of waiting to be killed.
//
// Thread-safety: pure functions over values.
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuop::kube {

inline constexpr std::string_view kPauseValue = "paused-for-driver-upgrade";
inline constexpr std::string_view kOperandDeployLabelPrefix = "nvidia.com/gpu.deploy.";

// The operands k8s-driver-manager pauses, as their deploy label suffix. The
// DRA driver is paused after the GPU pods are gone (its kubelet plugin
// releases their claims), so it is not in this list; see kDraDriverComponent.
inline constexpr std::array<std::string_view, 15> kPausedComponents = {
    "operator-validator",  "container-toolkit",
    "device-plugin",       "gpu-feature-discovery",
    "dcgm-exporter",       "dcgm",
    "mig-manager",         "nvsm",
    "sandbox-validator",   "sandbox-device-plugin",
    "vgpu-device-manager", "client",
    "dra-validator",       "dcgm-dra",
    "dcgm-exporter-dra"};
inline constexpr std::string_view kDraDriverComponent = "dra-driver";

// "nvidia.com/gpu.deploy.<component>".
std::string OperandDeployLabel(std::string_view component);

// k8s-driver-manager's pause table: the value pausing writes for a label's
// current value; nullopt when the label is left as it is (absent, "", "false",
// already paused).
std::optional<std::string> PausedValue(std::optional<std::string_view> current);
// The value restoring writes; nullopt when the label is not paused.
std::optional<std::string> RestoredValue(std::optional<std::string_view> current);

// The labels gpuop pauses: the deploy labels of kPausedComponents plus the
// custom NODE_LABEL_FOR_GPU_POD_EVICTION label when it is named.
std::vector<std::string> PausableLabels(const std::string& custom_label);
// Those and the DRA driver's: every label a driver reload pauses, and so
// every label a restore looks at.
std::vector<std::string> PausableLabelsAndDra(const std::string& custom_label);

// Label writes (label → new value) that pause, or restore, `labels` on a node
// with `node_labels`; only the labels that change.
std::map<std::string, std::string> PauseChanges(
    const std::map<std::string, std::string>& node_labels, const std::vector<std::string>& labels);
std::map<std::string, std::string> RestoreChanges(
    const std::map<std::string, std::string>& node_labels, const std::vector<std::string>& labels);

// A strategic-merge patch body that sets these labels.
nlohmann::json LabelPatch(const std::map<std::string, std::string>& changes);

// The operand pods that must leave before a driver reload: in the operator
// namespace with one of the operands' app labels, or (any namespace) owned by
// a DaemonSet and selecting nodes by nvidia.com/gpu.deploy.client.
bool IsOperandPod(const nlohmann::json& pod, std::string_view operator_namespace);
// The DRA driver's kubelet plugin (app=nvidia-dra-driver-kubelet-plugin).
bool IsDraPluginPod(const nlohmann::json& pod, std::string_view operator_namespace);

bool IsDaemonSetPod(const nlohmann::json& pod);

}  // namespace gpuop::kube
