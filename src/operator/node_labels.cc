#include "operator/node_labels.h"

#include <string_view>

#include "base/strings.h"
#include "kube/object.h"
#include "kube/operand_pause.h"

namespace gpuop::op {
namespace {

constexpr const char* kGpuPciLabels[] = {
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
};

// Product names (as GFD writes nvidia.com/gpu.product) of MIG-capable
// models, for nodes GFD has not yet labelled nvidia.com/mig.capable.
constexpr const char* kMigProducts[] = {"A100", "A30",   "H100", "H200",  "H20",
                                        "H800", "GH200", "B200", "GB200", "B100"};

std::optional<std::string> Find(const Labels& labels, const std::string& key) {
  auto it = labels.find(key);
  if (it == labels.end()) return std::nullopt;
  return it->second;
}

void Want(const Labels& labels, const std::string& key, const std::string& value,
          LabelChanges& changes) {
  if (Find(labels, key) != value) changes[key] = value;
}

void Remove(const Labels& labels, const std::string& key, LabelChanges& changes) {
  if (labels.count(key)) changes[key] = std::nullopt;
}

}  // namespace

std::string DeployLabel(Component c) { return kube::OperandDeployLabel(ComponentName(c)); }

bool IsGpuNode(const Labels& labels) {
  for (const char* key : kGpuPciLabels) {
    if (Find(labels, key) == "true") return true;
  }
  return false;
}

bool IsMigCapable(const Labels& labels) {
  if (auto v = Find(labels, kMigCapableLabel)) return *v == "true";
  std::string product = Find(labels, "nvidia.com/gpu.product").value_or("");
  for (const char* model : kMigProducts) {
    // "NVIDIA-H100-80GB-HBM3": the model is a whole dash-separated word.
    for (const std::string& word : Split(product, '-')) {
      if (word == model) return true;
    }
  }
  return false;
}

LabelChanges PlanNodeLabels(const Labels& labels, const Policy* policy) {
  LabelChanges changes;
  const bool gpu = IsGpuNode(labels);
  const bool operands = Find(labels, kDeployOperandsLabel) != "false";

  // gpu.present: true on GPU nodes; false once a GPU node loses its PCI
  // labels (NVIDIA's behaviour); gone with the policy.
  if (policy == nullptr) {
    Remove(labels, kGpuPresentLabel, changes);
  } else if (gpu) {
    Want(labels, kGpuPresentLabel, "true", changes);
  } else if (labels.count(kGpuPresentLabel)) {
    Want(labels, kGpuPresentLabel, "false", changes);
  }

  for (Component c : kAllComponents) {
    const std::string key = DeployLabel(c);
    bool wanted = policy != nullptr && gpu && operands && policy->Enabled(c) &&
                  (c != Component::kMigManager || IsMigCapable(labels));
    if (!wanted) {
      Remove(labels, key, changes);
    } else if (Find(labels, key).value_or("").empty()) {
      changes[key] = "true";  // keep a value another component set
    }
  }

  const bool mig_wanted =
      policy != nullptr && gpu && policy->Enabled(Component::kMigManager) && IsMigCapable(labels);
  if (mig_wanted) {
    if (Find(labels, kMigConfigLabel).value_or("").empty()) {
      changes[kMigConfigLabel] = policy->mig_manager_config_default;
    }
  } else if (policy == nullptr && Find(labels, kMigConfigLabel) == "all-disabled") {
    // Only the value the operator sets by default: anything else a user chose.
    changes[kMigConfigLabel] = std::nullopt;
  }
  return changes;
}

bool WantValidationTaint(bool enabled, bool policy_active, bool gpu_node_with_operands,
                         bool validator_ready) {
  return enabled && policy_active && gpu_node_with_operands && !validator_ready;
}

std::optional<nlohmann::json> TaintsWithValidation(const nlohmann::json& taints, bool want) {
  nlohmann::json out = nlohmann::json::array();
  bool has = false;
  if (taints.is_array()) {
    for (const auto& t : taints) {
      if (t.is_object() && t.value("key", "") == kValidationTaintKey) {
        has = true;
        if (!want) continue;
      }
      out.push_back(t);
    }
  }
  if (has == want) return std::nullopt;
  if (want) out.push_back({{"key", kValidationTaintKey}, {"effect", "NoSchedule"}});
  return out;
}

nlohmann::json LabelPatch(const LabelChanges& changes) {
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [key, value] : changes) {
    labels[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  }
  return {{"metadata", {{"labels", labels}}}};
}

void FlattenNodeLabels(nlohmann::json& node) {
  auto meta = node.find("metadata");
  if (meta == node.end() || !meta->is_object()) return;
  auto labels = meta->find("labels");
  if (labels == meta->end()) return;
  std::string flat;
  if (labels->is_object()) {
    for (const auto& [key, value] : labels->items()) {
      if (value.is_string()) flat += key + "=" + value.get<std::string>() + "\n";
    }
  }
  meta->erase(labels);
  flat.shrink_to_fit();  // appending grew it by doubling: up to twice its size, per cached node
  (*meta)[kFlatLabelsField] = std::move(flat);
}

Labels NodeLabels(const nlohmann::json& node) {
  auto meta = node.find("metadata");
  if (meta == node.end() || !meta->is_object()) return {};
  auto flat = meta->find(kFlatLabelsField);
  if (flat == meta->end() || !flat->is_string()) return kube::Labels(node);
  Labels labels;
  const std::string& text = flat->get_ref<const std::string&>();
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (size_t eq = line.find('='); eq != std::string_view::npos) {
      labels.emplace(line.substr(0, eq), line.substr(eq + 1));
    }
    start = end + 1;
  }
  return labels;
}

}  // namespace gpuop::op
