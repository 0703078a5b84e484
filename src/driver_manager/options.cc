#include "driver_manager/options.h"

#include "base/strings.h"

namespace gpuop::driver_manager {

std::chrono::seconds Options::EffectiveDrainTimeout() const {
  return drain_timeout.count() > 0 ? drain_timeout : kDefaultWait;
}

Result<std::chrono::seconds> ParseDurationSeconds(std::string_view name, std::string_view value) {
  std::string_view s = Trim(value);
  if (auto whole = ParseUint(s); whole && !StartsWith(s, "0x")) {
    return std::chrono::seconds(static_cast<int64_t>(*whole));
  }
  // Upstream's DaemonSet writes "0s" (no limit); ParseDuration refuses zero.
  if (const size_t unit = s.find_first_not_of('0'); unit != 0 && unit != std::string_view::npos) {
    const std::string_view u = s.substr(unit);
    if (u == "ms" || u == "s" || u == "m" || u == "h") return std::chrono::seconds(0);
  }
  auto d = ParseDuration(s);
  if (!d.ok()) {
    return InvalidArgument(std::string(name) + "=\"" + Excerpt(value) +
                           "\" is not a duration: use a Go duration such as \"300s\" or \"5m\", "
                           "or a number of seconds");
  }
  // Rounded up: a bound is never shorter than asked.
  return std::chrono::ceil<std::chrono::seconds>(*d);
}

Result<bool> ParseBoolEnv(std::string_view name, std::string_view value) {
  std::string_view v = Trim(value);
  for (std::string_view t : {"1", "t", "T", "true", "TRUE", "True"}) {
    if (v == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "false", "FALSE", "False"}) {
    if (v == f) return false;
  }
  return InvalidArgument(std::string(name) + "=\"" + Excerpt(value) +
                         "\" is not a boolean: use true or false");
}

Result<Options> OptionsFromEnv(const std::map<std::string, std::string>& env, Options o) {
  auto get = [&](const char* key) -> const std::string* {
    auto it = env.find(key);
    return it == env.end() ? nullptr : &it->second;
  };
  auto set_string = [&](const char* key, std::string* field) {
    if (const std::string* v = get(key); v && !v->empty()) *field = *v;
  };
  set_string("NODE_NAME", &o.node_name);
  set_string("OPERATOR_NAMESPACE", &o.operator_namespace);
  set_string("DRAIN_POD_SELECTOR_LABEL", &o.drain_pod_selector);
  set_string("NODE_LABEL_FOR_GPU_POD_EVICTION", &o.custom_pause_label);
  set_string("DRIVER_CONFIG_DIGEST", &o.driver_config_digest);
  set_string("NVIDIA_DRIVER_ROOT", &o.driver_root);
  if (o.pod_name.empty()) set_string("HOSTNAME", &o.pod_name);
  set_string("POD_NAME", &o.pod_name);

  for (auto [key, field] : {std::pair{"ENABLE_GPU_POD_EVICTION", &o.enable_gpu_pod_eviction},
                            std::pair{"ENABLE_AUTO_DRAIN", &o.enable_auto_drain},
                            std::pair{"DRAIN_USE_FORCE", &o.drain_use_force},
                            std::pair{"DRAIN_DELETE_EMPTYDIR_DATA", &o.drain_delete_emptydir_data},
                            std::pair{"FORCE_REINSTALL", &o.force_reinstall}}) {
    const std::string* v = get(key);
    if (v == nullptr || v->empty()) continue;
    GPUOP_ASSIGN_OR_RETURN(*field, ParseBoolEnv(key, *v));
  }
  for (auto [key, field] : {std::pair{"DRAIN_TIMEOUT_SECONDS", &o.drain_timeout},
                            std::pair{"GPUOP_OPERAND_WAIT_TIMEOUT", &o.operand_wait_timeout}}) {
    const std::string* v = get(key);
    if (v == nullptr || v->empty()) continue;
    GPUOP_ASSIGN_OR_RETURN(*field, ParseDurationSeconds(key, *v));
  }
  if (o.operand_wait_timeout.count() == 0) o.operand_wait_timeout = kDefaultWait;
  if (o.node_name.empty()) {
    return InvalidArgument(
        "NODE_NAME is not set: the driver manager acts on its own node; set it from the pod's "
        "spec.nodeName (env valueFrom fieldRef)");
  }
  return o;
}

}  // namespace gpuop::driver_manager
