// PluginService: the DRA kubelet plugin as its DaemonSet runs it, one
// runnable of the process's manager (manager/manager.h). Run serves the
// kubelet (kubelet/dra_server.h: registration, NodePrepareResources and
// NodeUnprepareResources through the Driver) and publishes the node's devices
// as ResourceSlices (slice_publisher.h): at once, again whenever GPU health or
// the layout changes (the health monitor calls back), and every rescan
// interval (which also brings back deleted slices). On stop the kubelet
// server goes first, then the publisher.
//
// Thread-safety: Run once, from one thread; CheckHealth from any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <set>
#include <stop_token>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "deviceplugin/health.h"
#include "deviceplugin/health_monitor.h"
#include "dra/driver.h"
#include "dra/health.h"
#include "dra/slice_publisher.h"
#include "kube/client.h"
#include "kubelet/dra_server.h"
#include "nvml/client.h"

namespace gpuop::dra {

struct PluginServiceOptions {
  std::string node_name;
  std::string host_root;  // where the PCIe roots are read (sysfs)
  std::chrono::milliseconds rescan_interval{std::chrono::seconds(5)};
  std::set<uint64_t> additional_ignored_xids;
  deviceplugin::HealthPolicy health_policy;
  kubelet::DraPluginServerOptions server;
};

class PluginService {
 public:
  // Each argument must outlive the service.
  PluginService(const nvml::Client& nvml, kube::Client& kube, Driver& driver,
                PluginServiceOptions options);
  ~PluginService();
  PluginService(const PluginService&) = delete;
  PluginService& operator=(const PluginService&) = delete;

  Status Run(std::stop_token stop);
  // Ok once the kubelet registered the plugin and the last publish worked.
  Status CheckHealth() const;

 private:
  Status PublishOnce();
  void PublishUntil(std::stop_token stop);

  const nvml::Client& nvml_;
  Driver& driver_;
  const PluginServiceOptions options_;
  SlicePublisher publisher_;
  GpuHealthTracker gpu_health_;
  // Only the publisher's thread touches these two.
  std::unique_ptr<deviceplugin::HealthMonitor> monitor_;
  std::set<std::string> monitored_;

  mutable Mutex mu_;
  std::condition_variable wake_;
  bool dirty_ GPUOP_GUARDED_BY(mu_) = true;
  Status last_publish_ GPUOP_GUARDED_BY(mu_) = Unavailable("not published yet");
  kubelet::DraPluginServer* server_ GPUOP_GUARDED_BY(mu_) = nullptr;  // while Run serves
};

}  // namespace gpuop::dra
