#include "gfd/service.h"

#include <utility>

#include "base/clock.h"
#include "base/log.h"

namespace gpuop::gfd {

Service::Service(ServiceOptions options) : options_(std::move(options)) {}
Service::~Service() = default;

Status Service::Run(std::stop_token stop) {
  GPUOP_ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon,
                         Daemon::Start(options_.daemon, options_.initial.config));
  {
    MutexLock lock(mu_);
    daemon_ = daemon.get();
  }
  options_.watcher->Follow([d = daemon.get()](const deviceplugin::LoadedConfig& loaded) {
    LogInfo("config changed; relabelling", {{"config", loaded.origin}});
    d->SetConfig(loaded.config);
    return Status::Ok();
  });
  const DaemonOptions& o = options_.daemon;
  LogInfo("gfd started", {{"node", o.node_name},
                          {"file", o.output_file.empty() ? std::string("off") : o.output_file},
                          {"node_feature_api", o.node_feature_api},
                          {"direct_labels", o.direct_labels},
                          {"sleep_interval", options_.sleep_interval},
                          {"config", options_.initial.origin}});
  WaitForStop(stop);
  options_.watcher->Stop();
  {
    MutexLock lock(mu_);
    daemon_ = nullptr;
  }
  daemon->Stop();  // removes the features file
  return Status::Ok();
}

void Service::Reload() {
  options_.watcher->CheckNow();
  MutexLock lock(mu_);
  if (daemon_ != nullptr) daemon_->Relabel();
}

}  // namespace gpuop::gfd
