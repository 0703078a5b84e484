// Service: gfd as its DaemonSet runs it, one runnable of the process's
// manager (manager/manager.h). Run starts the labelling daemon, follows the
// device plugin's config watcher (a new config relabels), and on stop takes
// them down watcher first; the daemon then removes its features file.
// Reload is SIGHUP (upstream restarts on it): the config and the GPUs read
// anew, every output written again.
//
// Thread-safety: Run once, from one thread; Reload from any.
#pragma once

#include <memory>
#include <stop_token>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "deviceplugin/config_source.h"
#include "gfd/daemon.h"

namespace gpuop::gfd {

struct ServiceOptions {
  DaemonOptions daemon;
  // From ConfigWatcher::Load; followed once the daemon runs.
  std::unique_ptr<deviceplugin::ConfigWatcher> watcher;
  deviceplugin::LoadedConfig initial;
  std::string sleep_interval;  // as given, for the start-up log
};

class Service {
 public:
  explicit Service(ServiceOptions options);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  Status Run(std::stop_token stop);
  void Reload();

 private:
  ServiceOptions options_;
  Mutex mu_;
  Daemon* daemon_ GPUOP_GUARDED_BY(mu_) = nullptr;  // while Run labels
};

}  // namespace gpuop::gfd
