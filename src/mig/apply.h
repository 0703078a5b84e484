// The NVML side of the MIG tool: reads the GPUs' MIG state into the
// planner's model (plan.h), executes plans through nvml::Client, and checks
// the result. `gpuop mig apply|assert|export` and the MIG manager use these.
//
// Apply touches only the GPUs whose plan has operations, in the order
// destroy compute instances → destroy GPU instances → set mode → create GPU
// instances at the planned placements → create compute instances, then
// asserts. A mode change the driver holds until a GPU reset is reported
// (`reset required`) unless the caller gives a way to reset the GPU; nothing
// pretends the mode is in force. A GPU whose mode cannot change because
// processes use it (activationStatus NVML_ERROR_IN_USE) is never reset: apply
// stops with Unavailable naming the GPU and the pids. An error mid-apply
// names the GPU and the step; the caller rolls back by applying a config
// exported before (Export).
//
// Threads: the functions may be called from any thread, but two applies on
// the same GPUs at once race like two nvidia-smi runs would.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "mig/config.h"
#include "mig/plan.h"
#include "nvml/client.h"

namespace gpuop::mig {

// Every GPU's MIG state (mode, profiles with placements, instances).
Result<std::vector<GpuState>> ReadState(const nvml::Client& client);
Result<GpuState> ReadGpuState(const nvml::Client& client, unsigned gpu);

struct ApplyOptions {
  bool mode_only = false;
  // Resets GPU `gpu` so that a pending MIG mode takes effect; when unset, a
  // mode change that needs a reset is reported as `reset required`.
  std::function<Status(unsigned gpu)> reset_gpu;
};

// What apply did on one GPU: the NVML calls it made, and whether the GPU
// waits for a reset.
struct GpuApplyResult {
  unsigned gpu = 0;
  std::string gpu_desc;
  bool reset_required = false;
  bool reset_done = false;
  unsigned mode_changes = 0;
  unsigned created_gis = 0, created_cis = 0;
  unsigned destroyed_gis = 0, destroyed_cis = 0;
};

struct ApplyReport {
  Plan plan;                         // as first computed
  std::vector<GpuApplyResult> gpus;  // one per GPU in the plan
  // GPUs whose new MIG mode waits for a reset (their layout is not made yet).
  std::vector<unsigned> ResetRequired() const;
  // One line per changed GPU ("GPU 0 (...): destroyed 7 GI, created 1 GI..."),
  // "reset required" where it applies; "nothing to change" when empty.
  std::string Summary() const;
};

// Executes `plan`. Stops at the first failing call with an error naming the
// GPU and the step; GPUs done before it keep their new layout.
Result<ApplyReport> ApplyPlan(const nvml::Client& client, const Plan& plan,
                              const ApplyOptions& options);

// The first half of an apply: the current state, what config `name` wants
// of each GPU, and the plan. Touches nothing. Errors: InvalidArgument or
// NotFound for a config that does not suit these GPUs (naming the GPU, model
// and profile), other codes when NVML cannot be read. The MIG manager uses
// `plan.gpus.empty()` to skip pausing GPU clients when nothing changes.
struct Prepared {
  std::vector<GpuState> state;
  std::vector<GpuWant> wants;
  Plan plan;
};
Result<Prepared> Prepare(const nvml::Client& client, const ConfigFile& file,
                         const std::string& name, bool mode_only);

// The second half: ApplyPlan, then an assert of every wanted GPU that does
// not wait for a reset.
Result<ApplyReport> Execute(const nvml::Client& client, const Prepared& prepared,
                            const ApplyOptions& options);

// Prepare + Execute: selects, plans, applies and asserts config `name` of `file`. Errors: a bad
// config for these GPUs (nothing is touched), a failing NVML step, or an
// assert that fails after apply. GPUs that wait for a reset are left out of
// the final assert and listed in the report.
Result<ApplyReport> ApplyConfig(const nvml::Client& client, const ConfigFile& file,
                                const std::string& name, const ApplyOptions& options);

// OK when the GPUs match config `name` (only the mode with `mode_only`);
// FailedPrecondition with one line per difference otherwise.
Status AssertConfig(const nvml::Client& client, const ConfigFile& file, const std::string& name,
                    bool mode_only);

// The current layout as a config named `name` (ExportConfig on ReadState).
Result<ConfigFile> Export(const nvml::Client& client, const std::string& name);

}  // namespace gpuop::mig
