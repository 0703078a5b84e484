// The shared vocabulary of `gpuop runtime configure`: what the user asked for
// (ConfigureOptions) and what the pure cores decide (Plan: the complete new
// bytes of every file to write, or the files to delete, in the order they must
// be applied, plus the lines to tell the user).
//
// A Plan is computed from file contents alone, without I/O, and is validated
// before anything is written; the adapter (configure.h) applies it. Paths in a
// Plan are host paths (as the container runtime sees them), never prefixed
// with the host root. Plain values; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuop::runtime {

enum class RuntimeKind { kContainerd, kCrio, kDocker };

std::string_view RuntimeKindName(RuntimeKind kind);

struct ConfigureOptions {
  RuntimeKind runtime = RuntimeKind::kContainerd;
  std::string config_path;   // host path; empty: the runtime's default
  std::string drop_in_path;  // host path; empty: the runtime's default
  bool drop_in = true;       // containerd: false edits the main config (not supported)
  std::string runtime_name = "nvidia";
  bool set_as_default = false;
  bool cdi_enabled = false;
  bool revert = false;
};

// One file operation. `after` empty: delete the file. A `directory` change
// removes an empty directory gpuop created (left in place when not empty).
struct FileChange {
  std::string path;
  std::optional<std::string> before;  // current bytes; nullopt: the file does not exist
  std::optional<std::string> after;   // new bytes; nullopt: delete
  bool directory = false;
};

struct Plan {
  std::vector<FileChange> changes;  // in the order they must be applied
  std::vector<std::string> notes;   // lines for the user (what was done, restart needs)
};

// A unified diff of every change in the plan (labels are the host paths;
// /dev/null for a created or deleted file). Empty when nothing changes.
std::string RenderPlanDiff(const Plan& plan);

// The runtime handler name is used as the RuntimeClass handler: letters,
// digits and '-', '_' , '.' (a DNS-label-like name as CRI handlers are).
bool ValidRuntimeName(std::string_view name);

}  // namespace gpuop::runtime
