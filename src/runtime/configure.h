// The adapter of `gpuop runtime configure`: reads the runtime's files under
// the host root, asks the pure core (containerd.h, crio.h, docker.h) for the
// Plan, and applies it with WriteFileAtomic and unlink, in the plan's order.
// Nothing is written when the plan cannot be computed or validated, or with
// dry_run. It never restarts or signals the runtime; the report says what
// the user must do.
// Thread-compatible: one call at a time per host root.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/plan.h"

namespace gpuop::runtime {

struct ConfigureRequest {
  std::string host_root = "/";
  ConfigureOptions options;
  bool dry_run = false;
};

struct ConfigureReport {
  std::string diff;                  // unified diff of every change (filled with dry_run too)
  std::vector<std::string> changed;  // host paths written or deleted (empty with dry_run)
  std::vector<std::string> notes;    // lines for the user
};

// The runtime's default paths for options left empty (host paths).
ConfigureOptions WithDefaults(ConfigureOptions options);

Result<ConfigureReport> RunConfigure(const ConfigureRequest& request);

}  // namespace gpuop::runtime
