#include "dra/plugin_service.h"

#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "dra/devices.h"
#include "dra/names.h"
#include "kube/object.h"

namespace gpuop::dra {
namespace {

// The health monitor's open faults in the DRA health tracker's terms.
std::map<std::string, UnitFault> UnitFaults(
    const std::map<std::string, deviceplugin::OpenFault>& open) {
  std::map<std::string, UnitFault> out;
  for (const auto& [unit, f] : open) {
    out[unit] = {f.xid, f.cls == deviceplugin::FaultClass::kLost};
  }
  return out;
}

}  // namespace

PluginService::PluginService(const nvml::Client& nvml, kube::Client& kube, Driver& driver,
                             PluginServiceOptions options)
    : nvml_(nvml),
      driver_(driver),
      options_(std::move(options)),
      publisher_(kube, options_.node_name) {}

PluginService::~PluginService() = default;

Status PluginService::PublishOnce() {
  auto gpus = nvml_.Gpus();
  if (!gpus.ok()) return gpus.status().Annotate("reading the GPUs");
  auto system = nvml_.System();
  if (!system.ok()) return system.status().Annotate("reading the driver version");
  if (options_.health_policy.Active() && deviceplugin::HealthUnits(*gpus) != monitored_) {
    monitor_.reset();
    auto m = deviceplugin::HealthMonitor::Start(nvml_, *gpus, options_.health_policy,
                                                [this](const std::map<std::string, bool>&) {
                                                  MutexLock lock(mu_);
                                                  dirty_ = true;
                                                  wake_.notify_all();
                                                });
    if (!m.ok()) return m.status().Annotate("watching GPU health");
    monitor_ = std::move(m).value();
    monitored_ = deviceplugin::HealthUnits(*gpus);
  }
  DeviceInputs inputs;
  inputs.additional_ignored_xids = options_.additional_ignored_xids;
  if (monitor_) {
    inputs.health = gpu_health_.Update(*gpus, UnitFaults(monitor_->OpenFaults()),
                                       kube::Rfc3339(std::chrono::system_clock::now()));
  }
  for (const nvml::Gpu& gpu : *gpus) {
    const std::string bus = SysfsBusId(gpu.pci);
    if (auto root = ReadPcieRoot(options_.host_root, bus)) inputs.pcie_roots[bus] = *root;
  }
  auto devices = BuildDevices(*gpus, *system, inputs);
  if (!devices.ok()) return devices.status();
  return publisher_.Publish(std::move(devices).value());
}

void PluginService::PublishUntil(std::stop_token stop) {
  std::stop_callback wake(stop, [this] {
    MutexLock lock(mu_);
    wake_.notify_all();
  });
  while (!stop.stop_requested()) {
    Status last;
    {
      MutexLock lock(mu_);
      dirty_ = false;
      last = last_publish_;
    }
    Status s = PublishOnce();
    if (!s.ok() && s.message() != last.message()) {
      LogWarn("publishing the node's ResourceSlices failed (retrying)", {{"error", s}});
    } else if (s.ok() && !last.ok()) {
      LogInfo("ResourceSlices published",
              {{"node", options_.node_name}, {"generation", publisher_.generation()}});
    }
    MutexLock lock(mu_);
    last_publish_ = s;
    wake_.wait_for(lock.native(), options_.rescan_interval,
                   [&]() GPUOP_REQUIRES(mu_) { return dirty_ || stop.stop_requested(); });
  }
  monitor_.reset();
}

Status PluginService::Run(std::stop_token stop) {
  std::stop_source publishing;
  std::thread publisher([this, token = publishing.get_token()] { PublishUntil(token); });
  auto server = kubelet::DraPluginServer::Start(&driver_, options_.server);
  if (server.ok()) {
    {
      MutexLock lock(mu_);
      server_ = server->get();
    }
    LogInfo("DRA plugin serving", {{"driver", kDriverName},
                                   {"node", options_.node_name},
                                   {"socket", (*server)->dra_socket()}});
    WaitForStop(stop);
    {
      MutexLock lock(mu_);
      server_ = nullptr;
    }
    (*server)->Stop();
  }
  publishing.request_stop();
  publisher.join();
  return server.ok() ? Status::Ok() : server.status();
}

Status PluginService::CheckHealth() const {
  MutexLock lock(mu_);
  if (server_ == nullptr) return Unavailable("not serving the kubelet");
  kubelet::DraRegistrationState reg = server_->Registration();
  if (!reg.registered) {
    return Unavailable(reg.notifications == 0 ? "not registered with the kubelet yet (" +
                                                    server_->registration_socket() + ")"
                                              : "the kubelet refused the plugin: " + reg.error);
  }
  return last_publish_;
}

}  // namespace gpuop::dra
