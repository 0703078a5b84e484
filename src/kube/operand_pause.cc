#include "kube/operand_pause.h"

#include <algorithm>

#include "base/json_field.h"
#include "base/strings.h"
#include "kube/object.h"

namespace gpuop::kube {
namespace {

using Json = nlohmann::json;

// The app labels of the operands k8s-driver-manager waits to leave the node.
constexpr std::array<std::string_view, 12> kOperandApps = {"nvidia-operator-validator",
                                                           "nvidia-container-toolkit-daemonset",
                                                           "nvidia-device-plugin-daemonset",
                                                           "gpu-feature-discovery",
                                                           "nvidia-dcgm-exporter",
                                                           "nvidia-dcgm",
                                                           "nvidia-dcgm-exporter-dra",
                                                           "nvidia-dcgm-dra",
                                                           "nvidia-mig-manager",
                                                           "nvidia-sandbox-validator",
                                                           "nvidia-sandbox-device-plugin-daemonset",
                                                           "nvidia-vgpu-device-manager"};
constexpr std::string_view kDraPluginApp = "nvidia-dra-driver-kubelet-plugin";

std::string Suffix() { return "_" + std::string(kPauseValue); }

std::optional<std::string> AppLabel(const Json& pod) { return Label(pod, "app"); }

std::map<std::string, std::string> Changes(
    const std::map<std::string, std::string>& node_labels, const std::vector<std::string>& labels,
    std::optional<std::string> (*rule)(std::optional<std::string_view>)) {
  std::map<std::string, std::string> out;
  for (const std::string& label : labels) {
    auto it = node_labels.find(label);
    std::optional<std::string_view> current;
    if (it != node_labels.end()) current = it->second;
    if (auto next = rule(current)) out[label] = *next;
  }
  return out;
}

}  // namespace

std::string OperandDeployLabel(std::string_view component) {
  return std::string(kOperandDeployLabelPrefix) + std::string(component);
}

std::optional<std::string> PausedValue(std::optional<std::string_view> current) {
  if (!current || current->empty() || *current == "false") return std::nullopt;
  if (current->find(kPauseValue) != std::string_view::npos) return std::nullopt;
  if (*current == "true") return std::string(kPauseValue);
  return std::string(*current) + Suffix();
}

std::optional<std::string> RestoredValue(std::optional<std::string_view> current) {
  if (!current) return std::nullopt;
  if (*current == kPauseValue) return std::string("true");
  if (EndsWith(*current, Suffix())) {
    return std::string(current->substr(0, current->size() - Suffix().size()));
  }
  return std::nullopt;
}

std::vector<std::string> PausableLabels(const std::string& custom_label) {
  std::vector<std::string> out;
  for (std::string_view c : kPausedComponents) out.push_back(OperandDeployLabel(c));
  if (!custom_label.empty() && std::find(out.begin(), out.end(), custom_label) == out.end()) {
    out.push_back(custom_label);
  }
  return out;
}

std::vector<std::string> PausableLabelsAndDra(const std::string& custom_label) {
  std::vector<std::string> out = PausableLabels(custom_label);
  out.push_back(OperandDeployLabel(kDraDriverComponent));
  return out;
}

std::map<std::string, std::string> PauseChanges(
    const std::map<std::string, std::string>& node_labels, const std::vector<std::string>& labels) {
  return Changes(node_labels, labels, PausedValue);
}

std::map<std::string, std::string> RestoreChanges(
    const std::map<std::string, std::string>& node_labels, const std::vector<std::string>& labels) {
  return Changes(node_labels, labels, RestoredValue);
}

Json LabelPatch(const std::map<std::string, std::string>& changes) {
  Json labels = Json::object();
  for (const auto& [k, v] : changes) labels[k] = v;
  return Json{{"metadata", {{"labels", std::move(labels)}}}};
}

bool IsDaemonSetPod(const Json& pod) {
  for (const OwnerReference& o : OwnerReferences(pod)) {
    if (o.controller && o.kind == "DaemonSet") return true;
  }
  return false;
}

bool IsOperandPod(const Json& pod, std::string_view operator_namespace) {
  if (Namespace(pod) == operator_namespace) {
    if (auto app = AppLabel(pod)) {
      if (std::find(kOperandApps.begin(), kOperandApps.end(), *app) != kOperandApps.end()) {
        return true;
      }
    }
  }
  if (!IsDaemonSetPod(pod)) return false;
  const Json& selector = Field(Field(pod, "spec"), "nodeSelector");
  return selector.is_object() && selector.contains(OperandDeployLabel("client"));
}

bool IsDraPluginPod(const Json& pod, std::string_view operator_namespace) {
  return Namespace(pod) == operator_namespace && AppLabel(pod) == kDraPluginApp;
}

}  // namespace gpuop::kube
