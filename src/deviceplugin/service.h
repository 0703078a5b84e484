// Service: the device plugin as its DaemonSet runs it, one runnable of the
// process's manager (manager/manager.h). Run opens NVML, starts the plugin,
// follows the config watcher, and on stop takes them down in the safe order
// (the watcher, whose thread calls into the plugin, before the plugin).
//
// Upstream's FAIL_ON_INIT_ERROR (the config's flags.failOnInitError): true,
// a node whose GPUs cannot be served fails the process (the pod restarts);
// false, the error is logged and Run waits for its stop, so the DaemonSet
// does not crash-loop on a node without a working GPU.
//
// Thread-safety: Run once, from one thread; CheckHealth from any.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "deviceplugin/config_source.h"
#include "deviceplugin/plugin.h"
#include "nvml/client.h"

namespace gpuop::deviceplugin {

struct ServiceOptions {
  std::function<Result<std::unique_ptr<nvml::Client>>()> open_nvml;
  DevicePluginOptions plugin;
  // From ConfigWatcher::Load; the watcher is followed once the plugin runs.
  std::unique_ptr<ConfigWatcher> watcher;
  LoadedConfig initial;
  // The health server's address for the start-up log ("" when off).
  std::function<std::string()> health_address;
};

class Service {
 public:
  explicit Service(ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  Status Run(std::stop_token stop);
  // The plugin's health once it serves; an error before (or without) that.
  Status CheckHealth() const;

 private:
  // FAIL_ON_INIT_ERROR: the error, or a wait for `stop`.
  Status InitFailed(const Status& s, std::stop_token stop);

  ServiceOptions options_;
  mutable Mutex mu_;
  DevicePlugin* plugin_ GPUOP_GUARDED_BY(mu_) = nullptr;  // while Run serves
};

}  // namespace gpuop::deviceplugin
