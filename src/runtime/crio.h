// The CRI-O core of `gpuop runtime configure`: the Plan for gpuop's drop-in
// /etc/crio/crio.conf.d/99-nvidia.conf, which defines the runtime handler
// [crio.runtime.runtimes.<name>] (runc, runtime_type "oci") and, with
// --set-as-default, [crio.runtime] default_runtime. CRI-O applies the files
// of crio.conf.d in name order over crio.conf key by key, so the drop-in
// holds gpuop's keys only and crio.conf is never touched; --revert deletes
// the drop-in. CRI-O reads CDI specs from /etc/cdi and /var/run/cdi by
// default, so --cdi-enabled needs no key.
// Pure functions of their inputs; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/plan.h"

namespace gpuop::runtime {

inline constexpr std::string_view kCrioDropInPath = "/etc/crio/crio.conf.d/99-nvidia.conf";
inline constexpr std::string_view kCrioMarker =
    "# Written by `gpuop runtime configure --runtime crio`";

struct CrioInputs {
  std::string drop_in_path;            // host path
  std::optional<std::string> drop_in;  // its current bytes, if any
  std::string runc_path;               // host path of runc; empty: not found
  // Directories gpuop must create for the drop-in (host paths, deepest
  // first: crio.conf.d, then /etc/crio when that is missing too).
  std::vector<std::string> missing_dirs;
};

// The header line, one per directory, by which the drop-in records the
// directories gpuop created for it, so --revert removes them too.
inline constexpr std::string_view kCrioCreatedDirLine = "# gpuop created directory: ";

// REQUIRES: opts.runtime == RuntimeKind::kCrio.
Result<Plan> PlanCrio(const CrioInputs& in, const ConfigureOptions& opts);

}  // namespace gpuop::runtime
