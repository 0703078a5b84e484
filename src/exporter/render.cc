#include "exporter/render.h"

#include <charconv>
#include <cmath>

namespace gpuop::exporter {
namespace {

void AppendLabel(std::string_view name, std::string_view value, bool first, std::string* out) {
  if (!first) out->push_back(',');
  out->append(name);
  out->append("=\"");
  AppendLabelValue(value, out);
  out->push_back('"');
}

void AppendHelpType(std::string_view name, std::string_view help, std::string_view type,
                    std::string* out) {
  out->append("# HELP ");
  out->append(name);
  out->push_back(' ');
  for (char c : help) {  // HELP escapes only \ and newline
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
  out->append("\n# TYPE ");
  out->append(name);
  out->push_back(' ');
  out->append(type);
  out->push_back('\n');
}

// gpu..hostname and the label-type fields of one device, without braces.
std::string DeviceLabels(const std::vector<Counter>& counters, const std::string& hostname,
                         const Collection& c, const Collection::Device& d) {
  const nvml::Gpu& g = c.gpus[d.gpu];
  std::string s;
  AppendLabel("gpu", std::to_string(g.index), true, &s);
  AppendLabel("UUID", g.uuid, false, &s);
  AppendLabel("pci_bus_id", g.pci.bus_id, false, &s);
  AppendLabel("device", g.minor >= 0 ? "nvidia" + std::to_string(g.minor) : std::string(), false,
              &s);
  AppendLabel("modelName", g.name, false, &s);
  if (d.mig) {
    const nvml::MigDevice& m = g.mig_devices[*d.mig];
    AppendLabel("GPU_I_PROFILE", m.profile, false, &s);
    AppendLabel("GPU_I_ID", std::to_string(m.gi_id), false, &s);
  }
  AppendLabel("hostname", hostname, false, &s);
  LabelSource src{&c.system, &g};
  for (const Counter& k : counters) {
    if (k.type != MetricType::kLabel) continue;
    std::string value;
    if (k.field->kind == FieldKind::kText) {
      value = k.field->text(src);
    } else if (k.field->kind == FieldKind::kNumeric && d.reading) {
      if (auto v = k.field->value(*d.reading)) {
        std::string num;
        AppendNumber(*v, &num);
        value = num;
      }
    }
    AppendLabel(k.field->name, value, false, &s);
  }
  return s;
}

DeviceKey KeyOf(const Collection& c, const Collection::Device& d) {
  const nvml::Gpu& g = c.gpus[d.gpu];
  if (d.mig) return {g.index, g.mig_devices[*d.mig].gi_id};
  return {g.index, std::nullopt};
}

}  // namespace

void AppendNumber(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, ec == std::errc() ? end : buf);
}

void AppendLabelValue(std::string_view value, std::string* out) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '"':
        out->append("\\\"");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        out->push_back(c);
    }
  }
}

void RenderMetrics(const std::vector<Counter>& counters, const std::string& hostname,
                   const Collection& c, const SelfStats& self, std::string* out) {
  out->clear();

  // Per device: its fixed labels and the label sets of its pods.
  std::vector<std::string> labels;
  std::vector<const std::vector<PodRef>*> pods;
  labels.reserve(c.devices.size());
  pods.reserve(c.devices.size());
  for (const Collection::Device& d : c.devices) {
    labels.push_back(DeviceLabels(counters, hostname, c, d));
    auto it = c.pods.find(KeyOf(c, d));
    pods.push_back(it == c.pods.end() || it->second.empty() ? nullptr : &it->second);
  }

  // (field, devices without it), in counters order.
  std::vector<std::pair<std::string_view, size_t>> unsupported;

  for (const Counter& k : counters) {
    if (k.type == MetricType::kLabel) continue;
    if (k.field->kind != FieldKind::kNumeric) {
      unsupported.emplace_back(k.field->name, c.devices.size());
      continue;
    }
    bool header = false;
    size_t missing = 0;
    for (size_t i = 0; i < c.devices.size(); ++i) {
      const Collection::Device& d = c.devices[i];
      std::optional<double> v;
      if (d.reading) v = k.field->value(*d.reading);
      if (!v) {
        ++missing;
        continue;
      }
      if (!header) {
        AppendHelpType(k.field->name, k.help, ExpositionTypeName(k.type), out);
        header = true;
      }
      auto line = [&](const PodRef* pod) {
        out->append(k.field->name);
        out->push_back('{');
        out->append(labels[i]);
        if (pod != nullptr) {
          AppendLabel("container", pod->container, false, out);
          AppendLabel("namespace", pod->namespace_, false, out);
          AppendLabel("pod", pod->pod, false, out);
        }
        out->append("} ");
        AppendNumber(*v, out);
        out->push_back('\n');
      };
      if (pods[i] == nullptr) {
        line(nullptr);
      } else {
        for (const PodRef& p : *pods[i]) line(&p);
      }
    }
    unsupported.emplace_back(k.field->name, missing);
  }

  // GPU health: every GPU, readable or not, with its device labels.
  AppendHelpType("gpuop_exporter_gpu_healthy",
                 "1 when the GPU answered NVML in the last collection, 0 when it did not "
                 "(lost, fallen off the bus, needs a reset).",
                 "gauge", out);
  for (size_t i = 0; i < c.devices.size(); ++i) {
    const Collection::Device& d = c.devices[i];
    if (d.mig) continue;
    out->append("gpuop_exporter_gpu_healthy{");
    out->append(labels[i]);
    out->append("} ");
    out->append(d.gpu < c.healthy.size() && c.healthy[d.gpu] ? "1" : "0");
    out->push_back('\n');
  }

  AppendHelpType("gpuop_exporter_field_unsupported",
                 "Devices (GPUs and MIG GPU instances) that did not report the field in the last "
                 "collection; fields NVML cannot give at all count every device.",
                 "gauge", out);
  for (const auto& [field, n] : unsupported) {
    out->append("gpuop_exporter_field_unsupported{field=\"");
    out->append(field);
    out->append("\"} ");
    out->append(std::to_string(n));
    out->push_back('\n');
  }

  AppendHelpType("gpuop_exporter_collections_total", "Collections run since the start.", "counter",
                 out);
  out->append("gpuop_exporter_collections_total " + std::to_string(self.collections) + "\n");
  AppendHelpType("gpuop_exporter_collection_errors_total",
                 "NVML reads that failed during collections (a whole collection, or one device).",
                 "counter", out);
  out->append("gpuop_exporter_collection_errors_total " + std::to_string(self.collection_errors) +
              "\n");
  AppendHelpType("gpuop_exporter_collection_duration_seconds", "How long the last collection took.",
                 "gauge", out);
  out->append("gpuop_exporter_collection_duration_seconds ");
  AppendNumber(self.last_collection_seconds, out);
  out->push_back('\n');
  if (self.kubernetes) {
    AppendHelpType("gpuop_exporter_pod_resources_errors_total",
                   "kubelet pod-resources List calls that failed.", "counter", out);
    out->append("gpuop_exporter_pod_resources_errors_total " +
                std::to_string(self.pod_resources_errors) + "\n");
  }
}

}  // namespace gpuop::exporter
