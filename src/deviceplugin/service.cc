#include "deviceplugin/service.h"

#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpuop::deviceplugin {

Service::Service(ServiceOptions options) : options_(std::move(options)) {}
Service::~Service() = default;

Status Service::InitFailed(const Status& s, std::stop_token stop) {
  if (options_.initial.config.fail_on_init_error) return s;
  LogError("device plugin not started (FAIL_ON_INIT_ERROR=false: waiting for SIGTERM)",
           {{"error", s}});
  WaitForStop(stop);
  return Status::Ok();
}

Status Service::CheckHealth() const {
  MutexLock lock(mu_);
  if (plugin_ == nullptr) return Unavailable("the device plugin is not serving");
  return plugin_->CheckHealth();
}

Status Service::Run(std::stop_token stop) {
  auto client = options_.open_nvml();
  if (!client.ok()) return InitFailed(client.status(), stop);
  DevicePlugin plugin(**client, options_.initial.config, options_.plugin);
  if (Status s = plugin.Start(); !s.ok()) return InitFailed(s, stop);
  {
    MutexLock lock(mu_);
    plugin_ = &plugin;
  }
  // From here the watcher's thread may be inside plugin.Reload; it is
  // stopped below before the plugin goes.
  options_.watcher->Follow(
      [&plugin](const LoadedConfig& loaded) { return plugin.Reload(loaded.config); });

  std::vector<std::string> counts;
  for (const auto& r : plugin.Resources()) {
    counts.push_back(r.name + "=" + std::to_string(r.devices));
  }
  const auto config = plugin.config();
  const std::string health = options_.health_address ? options_.health_address() : "";
  LogInfo(
      "device plugin serving resources",
      {{"resources", Join(counts, ",")},
       {"dir", plugin.device_plugin_dir()},
       {"config", options_.initial.origin},
       {"mig_strategy", MigStrategyName(config->mig_strategy)},
       {"device_list_strategy", DeviceListStrategyString(config->device_list)},
       {"health_addr", health.empty() ? std::string("off") : health.substr(health.rfind(':'))}});
  WaitForStop(stop);
  options_.watcher->Stop();
  {
    MutexLock lock(mu_);
    plugin_ = nullptr;
  }
  plugin.Stop();
  return Status::Ok();
}

}  // namespace gpuop::deviceplugin
