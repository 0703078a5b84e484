#include "host/driver_ready.h"

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::host {

Result<DriverReady> ParseDriverReady(std::string_view text) {
  DriverReady d;
  bool has_root = false;
  for (std::string_view line : Split(text, '\n')) {
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = Trim(line.substr(0, eq));
    std::string_view value = Trim(line.substr(eq + 1));
    // `sh` would strip one level of quotes; so do we.
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "IS_HOST_DRIVER") {
      d.host_driver = value == "true";
    } else if (key == "NVIDIA_DRIVER_ROOT") {
      d.driver_root = std::string(value);
      has_root = true;
    } else if (key == "NVIDIA_DEV_ROOT") {
      d.dev_root = std::string(value);
    }
  }
  if (!has_root || d.driver_root.empty() || d.driver_root.front() != '/') {
    return InvalidArgument("NVIDIA_DRIVER_ROOT must be an absolute path, got '" + d.driver_root +
                           "'");
  }
  if (d.dev_root.empty()) d.dev_root = d.driver_root;
  return d;
}

Result<std::optional<DriverReady>> ReadDriverReady(const std::string& read_root,
                                                   const std::string& validations_dir) {
  const std::string path = JoinRoot(read_root, validations_dir + "/" + kDriverReadyFile);
  auto text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::optional<DriverReady>();
    return text.status();
  }
  auto parsed = ParseDriverReady(*text);
  if (!parsed.ok()) {
    return InvalidArgument(path + ": " + parsed.status().message() +
                           " (the validator writes this file: delete it and the validator pod on "
                           "this node to have it written again)");
  }
  return std::optional<DriverReady>(std::move(*parsed));
}

std::string NodeDriverRoot(const std::string& read_root, const std::string& configured) {
  auto ready = ReadDriverReady(read_root, kValidationsDir);
  return ready.ok() && ready->has_value() ? (*ready)->driver_root : configured;
}

}  // namespace gpuop::host
