// The MIG manager (`gpuop mig-manager`): makes the node's MIG layout what its
// label nvidia.com/mig.config names, from the mig-parted config file the
// operator mounts (CONFIG_FILE), and says how it went in
// nvidia.com/mig.config.state.
//
// One change, as a user sees it on the Node:
//   1. mig.config=<name> is set (by the operator's default, or a user).
//   2. Nothing differs (Prepare's plan is empty): state=success, done. No GPU
//      client is disturbed.
//   3. Otherwise state=pending; the wanted name is kept under the host root
//      (<state-dir>/selected-config, with a copy of the config file), so a
//      reboot reapplies it; the current layout is exported for a rollback.
//   4. The GPU clients' deploy labels (device-plugin, gpu-feature-discovery,
//      dcgm-exporter, dcgm, nvsm; those present and not "false") become
//      paused-for-mig-change and the manager waits, up to clients_timeout,
//      until their pods have left the node.
//   5. The plan is applied (only GPUs whose layout differs are touched). A
//      mode change the driver holds until a GPU reset is reset with
//      gpu_reset; failing that, with_reboot sets state=rebooting and reboots.
//   6. The CDI spec is regenerated (when cdi_output is set), so containers
//      see the new MIG devices.
//   7. The deploy labels get their previous values back; state=success, a
//      Normal Event.
// Any failure after step 3 puts the previous layout back, restores the labels
// and sets state=failed, with the reason in a Warning Event and in the
// annotation gpuop.io/mig-config-failure. A GPU whose mode cannot change
// because processes still use it after the clients left (the driver's
// NVML_ERROR_IN_USE) is never reset: the failure names the GPU and the pids,
// and the config is tried again after busy_retry_interval. A config that does not suit the
// GPUs fails at step 2 and touches nothing. Every wait has a timeout, so the
// state never stays pending.
//
// A name the config file lacks is looked up among the layouts generated for
// the GPUs present (DefaultConfigs: all-1g.10gb, all-balanced, ...), so the
// operator's small default ConfigMap serves every MIG model.
//
// Triggers: the label (an informer on the manager's own Node), a change of
// the config file's content (checked every config_check_interval: ConfigMap
// volumes change by a symlink swap), and RequestReconcile (SIGHUP). A failed
// attempt is not retried until one of those changes, except when the API
// server could not be reached to report it (after a reboot, say): then it is
// tried again at every check until it can. At start, the label's
// value is used once the Node is read, or else the kept selected-config.
//
// Thread-safety: Run on one thread; RequestReconcile from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "nvml/client.h"
#include "toolkit/cdi_generate.h"

namespace gpuop::mig {

inline constexpr char kConfigLabel[] = "nvidia.com/mig.config";
inline constexpr char kStateLabel[] = "nvidia.com/mig.config.state";
inline constexpr char kPausedForMigChange[] = "paused-for-mig-change";
inline constexpr char kFailureAnnotation[] = "gpuop.io/mig-config-failure";

// The deploy labels of the GPU clients, in the order they are paused.
inline constexpr const char* kGpuClientDeployLabels[] = {
    "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter", "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm"};
// The `app` labels of their pods (NVIDIA's DaemonSet names).
inline constexpr const char* kGpuClientApps[] = {"nvidia-device-plugin-daemonset",
                                                 "gpu-feature-discovery", "nvidia-dcgm-exporter",
                                                 "nvidia-dcgm"};

using Labels = std::map<std::string, std::string>;

// ---- Pure ----

// The deploy labels to pause and the values to restore afterwards: each
// client label present on the node and not "false". One already paused (a
// manager that died mid-change) is restored to "true".
Labels ClientLabelsToPause(const Labels& node_labels);

// A JSON merge patch of a Node's labels and annotations; a nullopt value
// removes the key.
using LabelEdits = std::map<std::string, std::optional<std::string>>;
nlohmann::json NodeMetadataPatch(const LabelEdits& labels, const LabelEdits& annotations = {});

// The label selector of the GPU client pods ("app in (...)").
std::string GpuClientPodSelector();

// ---- Adapter ----

struct ManagerOptions {
  std::string node_name;
  kube::Client* client = nullptr;
  kube::EventRecorder* events = nullptr;  // optional
  // Opens NVML afresh for each change (a reloaded driver needs a new init).
  std::function<Result<std::unique_ptr<nvml::Client>>()> open_nvml;
  std::string config_file;  // the mig-parted config (full path, as mounted)
  std::string host_root = "/";
  std::string state_dir = "/etc/nvidia-mig-manager";  // host path: kept across reboots
  std::string clients_namespace = "gpu-operator";     // where the GPU client pods run
  std::chrono::milliseconds clients_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds poll_interval{500};
  std::chrono::milliseconds config_check_interval{5000};
  // How long to wait before trying again a config that failed because a GPU
  // was in use (or another transient NVML failure).
  std::chrono::milliseconds busy_retry_interval{std::chrono::minutes(1)};
  std::chrono::milliseconds node_sync_timeout{10000};
  // Resets one GPU so that its pending MIG mode takes effect (nvidia-smi -r);
  // unset: a mode change that needs a reset fails (or reboots, below).
  std::function<Status(unsigned gpu, const std::string& bus_id)> gpu_reset;
  // WITH_REBOOT: when a reset is needed and gpu_reset cannot do it, set
  // state=rebooting and call reboot (which should not return).
  bool with_reboot = false;
  std::function<Status()> reboot;
  // The CDI spec to regenerate after a change (host path); empty: none.
  std::string cdi_output;
  toolkit::CdiGenerateOptions cdi;
};

// InvalidArgument naming the missing piece.
Status ValidateManagerOptions(const ManagerOptions& options);

// What one reconcile did.
struct ReconcileOutcome {
  std::string state;     // the state label written: success, failed, rebooting
  std::string message;   // summary or failure reason
  bool changed = false;  // the layout was changed (clients were paused)
  bool retry = false;    // no driver yet, or the API server could not be told: try again later
  bool busy = false;     // failed on a transient GPU state (in use): try again later
};

class Manager {
 public:
  explicit Manager(ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // The whole flow for config `name`, now, on the calling thread.
  ReconcileOutcome Reconcile(const std::string& name, std::stop_token stop = {});

  // Follows the node's label until `stop`. Errors only when it cannot start
  // (bad options).
  Status Run(std::stop_token stop);

  // Reconcile again at once, even when nothing changed (SIGHUP).
  void RequestReconcile();

  // Completed reconciles, for tests.
  uint64_t reconciles() const { return reconciles_.load(); }

 private:
  Status PatchNode(const LabelEdits& labels, const LabelEdits& annotations = {});
  Status WaitForClientsGone(std::stop_token stop);
  Status Persist(const std::string& name, const std::string& config_text);
  std::optional<std::string> PersistedName() const;
  Status RegenerateCdi(const nvml::Client& nvml);
  Status ResetGpu(const nvml::Client& gpus, unsigned gpu);
  ReconcileOutcome Fail(const std::string& name, const std::string& reason);
  void Notify(bool warning, const std::string& reason, const std::string& message);

  const ManagerOptions options_;
  std::atomic<uint64_t> reconciles_{0};
  bool waiting_for_driver_ = false;  // the Run thread's: logged once per wait

  Mutex mu_;
  std::condition_variable_any cv_;
  std::optional<std::string> label_ GPUOP_GUARDED_BY(mu_);  // the node's mig.config
  bool label_seen_ GPUOP_GUARDED_BY(mu_) = false;
  bool wake_ GPUOP_GUARDED_BY(mu_) = false;
  bool forced_ GPUOP_GUARDED_BY(mu_) = false;
};

}  // namespace gpuop::mig
