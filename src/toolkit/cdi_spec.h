// The CDI (Container Device Interface) spec model: what a container runtime
// reads from /etc/cdi or /var/run/cdi to turn a device name such as
// "nvidia.com/gpu=0" into device nodes, mounts, environment and hooks
// (cncf-tags/container-device-interface SPEC.md).
//
// Rendering (ToYaml, ToJson) is deterministic: fields in the order of the
// CDI Go types (specs-go/config.go), lists in the order held, empty fields
// omitted, fileMode as a number, and a device node's hostPath omitted when it
// equals its path (as nvidia-ctk does). Parse reads YAML or JSON strictly: an
// unknown field is an error naming it. MinimumVersion computes the lowest
// cdiVersion a spec's features need. All functions are pure and thread-safe;
// the types are plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::toolkit::cdi {

// The oldest and the newest cdiVersion gpuop writes and reads.
inline constexpr std::string_view kOldestVersion = "0.3.0";
inline constexpr std::string_view kNewestVersion = "1.1.0";

struct DeviceNode {
  std::string path;       // inside the container, e.g. "/dev/nvidia0"
  std::string host_path;  // on the host; empty: same as path
  std::string type;       // "c", "b", "u", "p" or empty
  std::optional<int64_t> major, minor;
  std::optional<uint32_t> file_mode;  // permission bits, e.g. 0666
  std::string permissions;            // cgroup access "rwm" or a subset; empty: default
  std::optional<uint32_t> uid, gid;
  bool operator==(const DeviceNode&) const = default;
};

struct Mount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;
  std::string type;  // empty: not set (a bind mount via options)
  bool operator==(const Mount&) const = default;
};

struct Hook {
  std::string hook_name;  // createRuntime|createContainer|startContainer|poststart|poststop
  std::string path;       // absolute
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int> timeout;  // seconds, > 0
  bool operator==(const Hook&) const = default;
};

struct ContainerEdits {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<DeviceNode> device_nodes;
  std::vector<Mount> mounts;
  std::vector<Hook> hooks;
  std::vector<uint32_t> additional_gids;

  bool empty() const {
    return env.empty() && device_nodes.empty() && mounts.empty() && hooks.empty() &&
           additional_gids.empty();
  }
  bool operator==(const ContainerEdits&) const = default;
};

struct Device {
  std::string name;
  std::map<std::string, std::string> annotations;
  ContainerEdits edits;
  bool operator==(const Device&) const = default;
};

struct Spec {
  std::string cdi_version;
  std::string kind;  // "vendor/class", e.g. "nvidia.com/gpu"
  std::map<std::string, std::string> annotations;
  std::vector<Device> devices;
  ContainerEdits edits;  // applied whenever any device of this spec is requested
  bool operator==(const Spec&) const = default;
};

// The lowest cdiVersion that holds every feature `spec` uses (floor 0.3.0):
// mount type → 0.4.0; a device node hostPath (different from path) or a
// device name starting with a digit → 0.5.0; annotations (spec or device) or
// a dot in the class → 0.6.0; additionalGids → 0.7.0.
std::string MinimumVersion(const Spec& spec);

// Compares "a.b.c" versions; nullopt when either does not parse.
std::optional<int> CompareVersions(std::string_view a, std::string_view b);

// Checks what a CDI consumer checks before using a spec: a known cdiVersion
// not below MinimumVersion(spec), a valid kind, at least one device, unique
// valid device names, no device without edits, absolute paths, known hook
// names, positive timeouts. The message names the device and field.
Status Validate(const Spec& spec);

std::string ToYaml(const Spec& spec);
std::string ToJson(const Spec& spec);

// Parses a YAML or JSON spec. Strict: unknown fields and wrong types are
// InvalidArgument naming the field ("devices[2].containerEdits.mountz: unknown
// field"). Does not call Validate.
Result<Spec> Parse(std::string_view text);

}  // namespace gpuop::toolkit::cdi
