// The containerd core of `gpuop runtime configure`: from the bytes of the
// main config, of the files it imports and of gpuop's drop-in, the Plan that
// adds (or, with --revert, removes) a CRI runtime handler.
//
// What it writes. A drop-in (default /etc/containerd/conf.d/99-nvidia.toml)
// holds the new runtime `plugins."<cri>".containerd.runtimes.<name>` (a copy
// of the default runtime's runtime_type and options: gpuop injects GPUs with
// CDI, so the handler is plain runc), `enable_cdi`/`cdi_spec_dirs` with
// --cdi-enabled and `default_runtime_name` with --set-as-default. The main
// config gets one textual edit, an `imports` entry, only when none of its
// imports covers the drop-in; every other byte stays as it was.
//
// Why the drop-in of a version 2 config copies the CRI section. containerd
// 1.x merges an imported file by replacing each plugin section it names as a
// whole (config.go mergeConfig: `to.Plugins[k] = v`), so a drop-in holding
// only the new runtime would drop CNI, registry, sandbox_image and the runc
// runtime of the main config (how NVIDIA's toolkit broke CNI on GKE). The
// drop-in therefore carries the effective CRI section (main config and the
// files imported before it) plus gpuop's keys. containerd 2.x (version 3)
// merges plugin sections key by key, so a version 3 drop-in holds gpuop's
// keys only.
//
// Revert removes exactly what gpuop added: the text it inserted into the main
// config (recorded in the drop-in, and marked by a comment), the drop-in, and
// a main config gpuop created if it is unchanged since.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/plan.h"

namespace gpuop::runtime {

inline constexpr std::string_view kContainerdConfigPath = "/etc/containerd/config.toml";
inline constexpr std::string_view kContainerdDropInPath = "/etc/containerd/conf.d/99-nvidia.toml";
// The CRI plugin that holds runtimes, by config version (as in nvidia-ctk's
// pkg/config/engine/containerd).
inline constexpr std::string_view kCriPluginV2 = "io.containerd.grpc.v1.cri";
inline constexpr std::string_view kCriPluginV3 = "io.containerd.cri.v1.runtime";
// Ends the `imports` line gpuop inserts into a main config.
inline constexpr std::string_view kImportMarker = "# added by gpuop runtime configure";
// Starts the line of a gpuop drop-in that records what gpuop changed elsewhere.
inline constexpr std::string_view kRecordPrefix = "# gpuop-record: ";

struct ImportedFile {
  std::string path;  // host path
  std::string content;
};

struct ContainerdInputs {
  std::string config_path;             // host path of the main config
  std::string drop_in_path;            // host path of gpuop's drop-in
  std::optional<std::string> main;     // nullopt: no main config
  std::optional<std::string> drop_in;  // current drop-in bytes, if any
  // Directories gpuop must create for the drop-in and the main config (host
  // paths, deepest first: /etc/containerd/conf.d, then /etc/containerd when
  // that is missing too); --revert removes them again when they are empty.
  std::vector<std::string> missing_dirs;
  std::vector<ImportedFile> imported;  // other imported files, in containerd's load order
  int installed_major = 0;             // containerd major version when known, else 0
};

// The imports a config lists, resolved like containerd does (relative paths
// against the config's directory). Entries may be glob patterns.
Result<std::vector<std::string>> ContainerdImports(std::string_view config_path,
                                                   std::string_view text);

// Whether any import pattern (filepath.Match rules: `*` stays within one path
// element) names `path`.
bool ImportsCover(const std::vector<std::string>& imports, std::string_view path);

// The Plan for opts (configure, or revert when opts.revert).
// REQUIRES: opts.runtime == RuntimeKind::kContainerd.
Result<Plan> PlanContainerd(const ContainerdInputs& in, const ConfigureOptions& opts);

}  // namespace gpuop::runtime
