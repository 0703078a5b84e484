// The Docker core of `gpuop runtime configure`: Docker has no drop-in
// directory, so gpuop edits /etc/docker/daemon.json itself: `runtimes.<name>`
// ({"path": runc}), `default-runtime` with --set-as-default and
// `features.cdi` with --cdi-enabled; every other key is kept, in order.
//
// A record beside it (daemon.json.gpuop-backup) holds the original bytes, the
// bytes gpuop wrote and the values gpuop replaced. --revert restores the
// original bytes when daemon.json is unchanged since gpuop wrote it, and
// otherwise removes only gpuop's keys (never leaving `default-runtime` naming
// the removed runtime).
// Pure functions of their inputs; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "runtime/plan.h"

namespace gpuop::runtime {

inline constexpr std::string_view kDockerConfigPath = "/etc/docker/daemon.json";
inline constexpr std::string_view kDockerRecordSuffix = ".gpuop-backup";

struct DockerInputs {
  std::string config_path;            // host path of daemon.json
  std::optional<std::string> config;  // its bytes, if it exists
  std::optional<std::string> record;  // bytes of config_path + kDockerRecordSuffix, if any
  std::string runc_path;              // host path of runc; empty: not found ("runc" on PATH)
};

// REQUIRES: opts.runtime == RuntimeKind::kDocker.
Result<Plan> PlanDocker(const DockerInputs& in, const ConfigureOptions& opts);

// "PATH:LINE:COL: message" for a JSON parse error at byte offset `byte`
// (nlohmann reports the offset one past the offending byte).
std::string JsonErrorAt(std::string_view path, std::string_view text, size_t byte,
                        std::string_view message);

}  // namespace gpuop::runtime
