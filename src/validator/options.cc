#include "validator/options.h"

#include <charconv>

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::validator {

Result<Component> ParseComponent(std::string_view name) {
  if (name.empty() || name == "main") return Component::kMain;
  if (name == "driver") return Component::kDriver;
  if (name == "toolkit") return Component::kToolkit;
  if (name == "cuda") return Component::kCuda;
  if (name == "plugin") return Component::kPlugin;
  if (name == "metrics") return Component::kMetrics;
  return InvalidArgument("COMPONENT \"" + std::string(name) +
                         "\" is not a validator component gpuop runs; use driver, toolkit, "
                         "cuda, plugin or metrics (or none for the main container)");
}

std::string ComponentName(Component c) {
  switch (c) {
    case Component::kMain:
      return "main";
    case Component::kDriver:
      return "driver";
    case Component::kToolkit:
      return "toolkit";
    case Component::kCuda:
      return "cuda";
    case Component::kPlugin:
      return "plugin";
    case Component::kMetrics:
      return "metrics";
  }
  return "?";
}

std::string ReadyFile(Component c) {
  switch (c) {
    case Component::kDriver:
      return kDriverReadyFile;
    case Component::kToolkit:
      return kToolkitReadyFile;
    case Component::kCuda:
      return kCudaReadyFile;
    case Component::kPlugin:
      return kPluginReadyFile;
    default:
      return "";
  }
}

std::string Options::OutputDir() const {
  return output_dir.empty() ? JoinRoot(read_root, kDefaultOutputDir) : output_dir;
}

Result<bool> ParseBoolValue(std::string_view name, std::string_view value) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "true" || v == "1" || v == "yes" || v == "t") return true;
  if (v == "false" || v == "0" || v == "no" || v == "f" || v.empty()) return false;
  return InvalidArgument(std::string(name) + "=" + std::string(value) +
                         " is not a boolean; use true or false");
}

namespace {

Result<int> ParseIntValue(std::string_view name, std::string_view value, int min) {
  int n = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || ptr != value.data() + value.size() || n < min) {
    return InvalidArgument(std::string(name) + "=" + std::string(value) +
                           " is not a whole number >= " + std::to_string(min));
  }
  return n;
}

}  // namespace

Result<Options> OptionsFromEnv(const std::map<std::string, std::string>& env, Options o) {
  auto get = [&](const char* k) -> const std::string* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : &it->second;
  };
  if (auto* v = get("COMPONENT")) {
    GPUOP_ASSIGN_OR_RETURN(o.component, ParseComponent(*v));
  }
  for (auto [name, field] :
       {std::pair{"WITH_WAIT", &o.with_wait}, std::pair{"WITH_WORKLOAD", &o.with_workload},
        std::pair{"GPUOP_DEVICE_PLUGIN", &o.device_plugin}}) {
    if (auto* v = get(name)) {
      GPUOP_ASSIGN_OR_RETURN(*field, ParseBoolValue(name, *v));
    }
  }
  if (auto* v = get("SLEEP_INTERVAL_SECONDS")) {
    GPUOP_ASSIGN_OR_RETURN(o.sleep_interval_seconds,
                           ParseIntValue("SLEEP_INTERVAL_SECONDS", *v, 1));
  }
  if (auto* v = get("METRICS_PORT")) {
    GPUOP_ASSIGN_OR_RETURN(o.metrics_port, ParseIntValue("METRICS_PORT", *v, 0));
  }
  if (auto* v = get("MIG_STRATEGY"); v && !v->empty()) {
    if (*v != "none" && *v != "single" && *v != "mixed") {
      return InvalidArgument("MIG_STRATEGY=" + *v + " is not none, single or mixed");
    }
    o.mig_strategy = *v;
  }
  auto str = [&](const char* k, std::string& field) {
    if (auto* v = get(k); v && !v->empty()) field = *v;
  };
  str("OUTPUT_DIR", o.output_dir);
  str("HOST_ROOT", o.host_root);
  str("DRIVER_INSTALL_DIR", o.driver_install_dir);
  str("NODE_NAME", o.node_name);
  str("OPERATOR_NAMESPACE", o.namespace_);
  str("HOSTNAME", o.pod_name);
  str("POD_NAME", o.pod_name);
  str("VALIDATOR_IMAGE", o.validator_image);
  str("VALIDATOR_IMAGE_PULL_POLICY", o.validator_image_pull_policy);
  str("VALIDATOR_RUNTIME_CLASS", o.validator_runtime_class);
  str("GPUOP_VALIDATOR_REQUIRE_CUDA", o.require_cuda);
  if (auto* v = get("VALIDATOR_IMAGE_PULL_SECRETS"); v && !v->empty()) {
    o.validator_image_pull_secrets.clear();
    for (const std::string& s : Split(*v, ',')) {
      std::string t(Trim(s));
      if (!t.empty()) o.validator_image_pull_secrets.push_back(t);
    }
  }
  return o;
}

}  // namespace gpuop::validator
