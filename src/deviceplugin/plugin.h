// DevicePlugin: the device plugin component. It turns the NVML view into the
// extended resources the kubelet hands to pods, and keeps them current.
//
//   - One DevicePluginServer per resource on
//     <kubelet_dir>/device-plugins/nvidia-<name after "nvidia.com/">.sock,
//     serving before it registers (RegisterWithKubelet, retried with backoff
//     while the kubelet is absent or refuses).
//   - A kubelet restart (kubelet.sock created anew, KubeletSocketWatcher)
//     stops every server, serves anew and registers again at once.
//   - Health changes from HealthMonitor reach ListAndWatch at once; a MIG
//     device follows its own health and its GPU's; replicas share their unit's.
//     A driver reload seen by a rescan (NVML answering again after it stopped,
//     or reporting another driver version) is recovery evidence for the
//     monitor (HealthTracker::OnDriverReloaded).
//   - NVML is re-enumerated every rescan_interval (NVML has no event for a MIG
//     layout change): a different layout rebuilds the resources and pushes the
//     new lists, adding and removing servers as resource names come and go,
//     without a restart. A layout that cannot be advertised (a MIG GPU half
//     reconfigured) keeps the last good resources, with the devices that
//     vanished marked Unhealthy, until a rescan succeeds.
//   - Reload swaps the configuration atomically: a config whose resources
//     cannot be built is rejected and the running one stays.
//   - Allocate and GetPreferredAllocation answer from the resource as it is
//     at the time of the call (allocate.h, preferred.h with the topology read
//     once at Start).
//
// The component opens nothing itself: it is handed an open nvml::Client and a
// resolved Config. Threads: one loop thread (registration, kubelet restarts,
// rescans), the watcher's and the monitor's threads, and gRPC's. Every public
// method may be called from any thread. REQUIRES: the Client outlives the
// plugin.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "deviceplugin/config.h"
#include "deviceplugin/health.h"
#include "deviceplugin/health_monitor.h"
#include "deviceplugin/resources.h"
#include "deviceplugin/topology.h"
#include "nvml/client.h"

namespace gpuop::kubelet {
class DevicePluginServer;
class KubeletSocketWatcher;
}  // namespace gpuop::kubelet

namespace gpuop::deviceplugin {

struct DevicePluginOptions {
  // The kubelet's root as this process sees it (host root already applied);
  // sockets live in <kubelet_dir>/device-plugins.
  std::string kubelet_dir = "/var/lib/kubelet";
  // Where the host's file system is mounted: mig-minors
  // (<host_root>/proc/driver/nvidia-caps/mig-minors), the device nodes
  // (<host_root><dev root>/dev/...) and sysfs NUMA nodes.
  std::string host_root = "/";
  // How often NVML is re-enumerated to notice MIG and GPU layout changes.
  std::chrono::milliseconds rescan_interval{3000};
  // One Register call's deadline, and the backoff between failed attempts.
  std::chrono::milliseconds register_timeout{5000};
  std::chrono::milliseconds register_backoff_initial{200};
  std::chrono::milliseconds register_backoff_max{10000};
  // DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS; nullopt: upstream's
  // defaults. No monitor runs when !Active().
  std::optional<HealthPolicy> health_policy;
  HealthMonitorOptions health;
  // The random part of CDI annotation keys; null: a random UUID v4.
  std::function<std::string()> new_uuid;
  // The rescan and registration timing; null: RealClock() (tests: a FakeClock).
  const Clock* clock = nullptr;
};

// One advertised resource, for logs, tests and liveness.
struct ResourceStatus {
  std::string name;    // "nvidia.com/gpu"
  std::string socket;  // full path of its plugin socket
  size_t devices = 0;  // advertised devices (replicas counted)
  size_t healthy = 0;
  bool serving = false;
  bool registered = false;
};

struct DevicePluginStats {
  uint64_t registrations = 0;  // accepted Register calls
  uint64_t registration_errors = 0;
  uint64_t kubelet_restarts = 0;  // kubelet.sock creations acted on
  uint64_t rescans = 0;           // NVML enumerations after Start
  uint64_t rescan_errors = 0;
  uint64_t layout_changes = 0;  // rescans that found a different GPU/MIG layout
  uint64_t rebuild_errors = 0;  // changed layouts that could not be advertised
  uint64_t reloads = 0;
  uint64_t reload_errors = 0;
  uint64_t health_changes = 0;  // unit health changes applied
};

// "nvidia.com/gpu" → "nvidia-gpu.sock"; "nvidia.com/mig-1g.10gb" →
// "nvidia-mig-1g.10gb.sock"; other domains keep their name, '/' → '-'.
std::string PluginSocketName(std::string_view resource);

// Drops from c->control_device_nodes the nodes absent under
// <host_root><c->DevRoot()> (nvidia-modeset often is).
void TrimControlDeviceNodes(const std::string& host_root, Config* c);

class DevicePlugin {
 public:
  DevicePlugin(const nvml::Client& client, Config config, DevicePluginOptions options = {});
  ~DevicePlugin();  // Stop()
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Enumerates the GPUs, builds the resources, reads the topology, starts the
  // kubelet.sock watcher, serves every resource and starts the health
  // monitor and the loop thread (which registers). Fails, with nothing left
  // running, when NVML cannot be read, the resources cannot be built (an
  // invalid single-strategy layout, a sharing entry that matches nothing),
  // the device-plugins directory is missing or a server cannot start.
  Status Start();

  // Stops the loop, the monitor, the watcher and every server (sockets
  // removed). Idempotent.
  void Stop();

  // Swaps the configuration. An error (resources that cannot be built) leaves
  // the running configuration and resources as they were.
  Status Reload(Config config);

  // Re-enumerates NVML now (what the loop does every rescan_interval).
  Status Rescan();

  // OK while NVML answers and every resource's server is serving on its
  // socket; otherwise says which is not (for a liveness probe).
  Status CheckHealth() const;
  bool Healthy() const { return CheckHealth().ok(); }

  std::vector<ResourceStatus> Resources() const;
  // The running configuration (control_device_nodes trimmed once started).
  std::shared_ptr<const Config> config() const;
  DevicePluginStats Stats() const;
  std::string device_plugin_dir() const;

 private:
  struct Served {
    std::shared_ptr<const Resource> resource;
    std::shared_ptr<kubelet::DevicePluginServer> server;  // null: to be started
    bool registered = false;
  };

  // Structural changes.
  Status ApplyLocked(std::vector<nvml::Gpu> gpus, Config config, std::vector<Resource> resources)
      GPUOP_REQUIRES(ops_mu_);
  Status RescanLocked() GPUOP_REQUIRES(ops_mu_);
  void StartMissingServersLocked() GPUOP_REQUIRES(ops_mu_);
  void RestartServersLocked() GPUOP_REQUIRES(ops_mu_);
  // True when every resource is registered; a stop request cuts it short.
  bool RegisterPendingLocked(std::stop_token stop) GPUOP_REQUIRES(ops_mu_);
  void RestartMonitorIfNeededLocked() GPUOP_REQUIRES(ops_mu_);
  Result<std::vector<Resource>> Build(const std::vector<nvml::Gpu>& gpus, const Config& c) const;
  Result<std::vector<nvml::Gpu>> Enumerate() const;

  std::vector<PluginDevice> DevicesLocked(const Resource& r) const GPUOP_REQUIRES(mu_);
  void PushLocked() GPUOP_REQUIRES(mu_);

  void OnHealth(const std::map<std::string, bool>& changed);
  void Loop(std::stop_token stop);
  void Wake();

  const nvml::Client& client_;
  const DevicePluginOptions options_;
  const HealthPolicy policy_;

  // Serialises structural changes: Start, Stop, Reload, rescans, kubelet
  // restarts, registration. Never taken by gRPC or monitor callbacks.
  Mutex ops_mu_;
  std::unique_ptr<HealthMonitor> monitor_ GPUOP_GUARDED_BY(ops_mu_);
  std::set<std::string> monitor_units_ GPUOP_GUARDED_BY(ops_mu_);
  std::unique_ptr<kubelet::KubeletSocketWatcher> watcher_ GPUOP_GUARDED_BY(ops_mu_);
  std::string last_rebuild_error_ GPUOP_GUARDED_BY(ops_mu_);
  std::string driver_version_ GPUOP_GUARDED_BY(ops_mu_);  // NVML's
  std::string last_register_error_ GPUOP_GUARDED_BY(mu_);
  bool started_ GPUOP_GUARDED_BY(ops_mu_) = false;

  // The state callbacks read. Order: ops_mu_ before mu_.
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const Config> config_ GPUOP_GUARDED_BY(mu_);
  std::vector<nvml::Gpu> gpus_ GPUOP_GUARDED_BY(mu_);
  std::string layout_ GPUOP_GUARDED_BY(mu_);
  std::map<std::string, Served> served_ GPUOP_GUARDED_BY(mu_);
  std::set<std::string> unhealthy_ GPUOP_GUARDED_BY(mu_);  // unit UUIDs
  std::set<std::string> vanished_ GPUOP_GUARDED_BY(mu_);   // units NVML no longer lists
  std::shared_ptr<const Topology> topology_ GPUOP_GUARDED_BY(mu_);
  std::string nvml_error_ GPUOP_GUARDED_BY(mu_);  // empty while NVML answers
  bool kubelet_restarted_ GPUOP_GUARDED_BY(mu_) = false;
  bool wake_ GPUOP_GUARDED_BY(mu_) = false;
  DevicePluginStats stats_ GPUOP_GUARDED_BY(mu_);

  std::jthread loop_;
};

}  // namespace gpuop::deviceplugin
