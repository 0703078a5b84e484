#include "deviceplugin/plugin.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <random>
#include <utility>

#include "base/backoff.h"
#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "deviceplugin/allocate.h"
#include "deviceplugin/preferred.h"
#include "host/mig_minors.h"
#include "kubelet/device_plugin_server.h"
#include "kubelet/registration.h"
#include "kubelet/socket_watcher.h"

namespace gpuop::deviceplugin {
namespace {

std::string RandomUuid() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi, lo;
  {
    std::lock_guard lock(mu);
    hi = rng();
    lo = rng();
  }
  hi = (hi & ~0xF000ull) | 0x4000ull;              // version 4
  lo = (lo & ~(0xC0ull << 56)) | (0x80ull << 56);  // variant 10
  char buf[37];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xFFFF), static_cast<unsigned>(hi & 0xFFFF),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

// What decides the advertised devices: GPUs, their MIG mode and MIG devices.
std::string Fingerprint(const std::vector<nvml::Gpu>& gpus) {
  std::string fp;
  for (const nvml::Gpu& g : gpus) {
    fp += g.uuid + "|" + std::to_string(g.minor) + "|" + (g.mig_enabled ? "mig" : "-") + "|" +
          std::to_string(g.numa_node);
    for (const nvml::MigDevice& m : g.mig_devices) {
      fp += "|" + m.uuid + "," + m.profile + "," + std::to_string(m.gi_id) + "," +
            std::to_string(m.ci_id);
    }
    fp += "\n";
  }
  return fp;
}

// The loaded driver's version as NVML reports it; "" when unreadable.
std::string DriverVersion(const nvml::Client& client) {
  auto system = client.System();
  return system.ok() ? system->driver_version : "";
}

std::string ResourceNames(const std::vector<Resource>& resources) {
  std::vector<std::string> names;
  for (const Resource& r : resources) names.push_back(r.name);
  return Join(names, ",");
}

}  // namespace

std::string PluginSocketName(std::string_view resource) {
  std::string name(resource);
  if (StartsWith(name, "nvidia.com/")) name = name.substr(std::string_view("nvidia.com/").size());
  std::replace(name.begin(), name.end(), '/', '-');
  return "nvidia-" + name + ".sock";
}

void TrimControlDeviceNodes(const std::string& host_root, Config* c) {
  std::vector<std::string> kept;
  for (const std::string& node : c->control_device_nodes) {
    if (PathExists(JoinRoot(host_root, JoinRoot(c->DevRoot(), node)))) kept.push_back(node);
  }
  c->control_device_nodes = std::move(kept);
}

DevicePlugin::DevicePlugin(const nvml::Client& client, Config config, DevicePluginOptions options)
    : client_(client),
      options_(std::move(options)),
      policy_(options_.health_policy ? *options_.health_policy : ParseHealthPolicy("", "").value()),
      config_(std::make_shared<const Config>(std::move(config))),
      topology_(std::make_shared<const Topology>()) {}

DevicePlugin::~DevicePlugin() { Stop(); }

std::string DevicePlugin::device_plugin_dir() const {
  return JoinRoot(options_.kubelet_dir, "/device-plugins");
}

Result<std::vector<nvml::Gpu>> DevicePlugin::Enumerate() const {
  GPUOP_ASSIGN_OR_RETURN(std::vector<nvml::Gpu> gpus, client_.Gpus());
  // NUMA as the kubelet's topology manager sees it: sysfs, like upstream.
  for (nvml::Gpu& g : gpus) {
    char addr[32];
    std::snprintf(addr, sizeof(addr), "%04x:%02x:%02x.0", g.pci.domain, g.pci.bus, g.pci.device);
    auto text = ReadFile(
        JoinRoot(options_.host_root, std::string("/sys/bus/pci/devices/") + addr + "/numa_node"));
    if (!text.ok()) continue;
    std::string_view v = Trim(*text);
    int node = -1;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), node);
    if (ec == std::errc() && ptr == v.data() + v.size()) g.numa_node = node < 0 ? -1 : node;
  }
  return gpus;
}

Result<std::vector<Resource>> DevicePlugin::Build(const std::vector<nvml::Gpu>& gpus,
                                                  const Config& c) const {
  const std::string path = JoinRoot(options_.host_root, "/proc/driver/nvidia-caps/mig-minors");
  std::optional<host::MigMinors> minors;
  if (PathExists(path)) {
    GPUOP_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    GPUOP_ASSIGN_OR_RETURN(host::MigMinors m, host::ParseMigMinors(text, path));
    minors = std::move(m);
  }
  return BuildResources(gpus, c, minors ? &*minors : nullptr);
}

// ---- Start / Stop -----------------------------------------------------------

Status DevicePlugin::Start() {
  MutexLock ops(ops_mu_);
  if (started_) return FailedPrecondition("the device plugin is already running");
  Config config = *DevicePlugin::config();
  TrimControlDeviceNodes(options_.host_root, &config);
  auto gpus = Enumerate();
  if (!gpus.ok()) return gpus.status().Annotate("reading the GPUs through NVML");
  auto resources = Build(*gpus, config);
  if (!resources.ok()) return resources.status();
  for (const std::string& w : config.warnings) LogWarn("device plugin config", {{"warning", w}});
  driver_version_ = DriverVersion(client_);

  auto topo = ReadTopology(client_, *gpus);
  {
    MutexLock lock(mu_);
    if (topo.ok()) {
      for (const std::string& note : topo->notes) LogDebug("topology", {{"note", note}});
      topology_ = std::make_shared<const Topology>(std::move(topo).value());
    } else {
      LogWarn("GPU topology unreadable; preferred allocations ignore it",
              {{"error", topo.status()}});
      topology_ = std::make_shared<const Topology>(static_cast<unsigned>(gpus->size()));
    }
  }

  // The watcher first, so a kubelet restart before the first registration is seen.
  auto watcher = kubelet::KubeletSocketWatcher::Start(device_plugin_dir(), [this] {
    MutexLock lock(mu_);
    kubelet_restarted_ = true;
    cv_.notify_all();
  });
  if (!watcher.ok()) {
    return watcher.status().Annotate("watching the kubelet's device plugin directory (is " +
                                     options_.kubelet_dir + " the kubelet's root, mounted here?)");
  }
  watcher_ = std::move(watcher).value();

  Status applied = ApplyLocked(*gpus, std::move(config), std::move(*resources));
  if (!applied.ok()) {
    // Leave nothing running.
    std::vector<std::shared_ptr<kubelet::DevicePluginServer>> servers;
    {
      MutexLock lock(mu_);
      for (auto& [name, s] : served_) {
        if (s.server) servers.push_back(std::move(s.server));
      }
      served_.clear();
    }
    for (auto& s : servers) s->Stop();
    if (monitor_) monitor_->Stop();
    monitor_.reset();
    monitor_units_.clear();
    watcher_->Stop();
    watcher_.reset();
    return applied;
  }
  started_ = true;
  loop_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
  return Status::Ok();
}

void DevicePlugin::Stop() {
  if (loop_.joinable()) {
    loop_.request_stop();
    loop_.join();
  }
  MutexLock ops(ops_mu_);
  if (monitor_) monitor_->Stop();
  monitor_.reset();
  monitor_units_.clear();
  if (watcher_) watcher_->Stop();
  watcher_.reset();
  std::vector<std::shared_ptr<kubelet::DevicePluginServer>> servers;
  {
    MutexLock lock(mu_);
    for (auto& [name, s] : served_) {
      if (s.server) servers.push_back(std::move(s.server));
      s.registered = false;
    }
  }
  for (auto& s : servers) s->Stop();  // removes each socket
  started_ = false;
}

// ---- Structural changes (ops_mu_ held) ---------------------------------------

Status DevicePlugin::ApplyLocked(std::vector<nvml::Gpu> gpus, Config config,
                                 std::vector<Resource> resources) {
  std::vector<std::shared_ptr<kubelet::DevicePluginServer>> to_stop;
  {
    MutexLock lock(mu_);
    config_ = std::make_shared<const Config>(std::move(config));
    layout_ = Fingerprint(gpus);
    gpus_ = std::move(gpus);
    vanished_.clear();
    std::map<std::string, Served> next;
    for (Resource& r : resources) {
      Served s;
      if (auto it = served_.find(r.name); it != served_.end()) {
        s = std::move(it->second);
        served_.erase(it);
      }
      std::string name = r.name;
      s.resource = std::make_shared<const Resource>(std::move(r));
      next.emplace(std::move(name), std::move(s));
    }
    for (auto& [name, s] : served_) {
      LogInfo("resource no longer advertised", {{"resource", name}});
      if (s.server) to_stop.push_back(std::move(s.server));
    }
    served_ = std::move(next);
    PushLocked();
  }
  for (auto& s : to_stop) s->Stop();
  Status started = Status::Ok();
  {
    // Start servers for new resources; report the first failure.
    std::vector<std::string> missing;
    {
      MutexLock lock(mu_);
      for (auto& [name, s] : served_) {
        if (!s.server) missing.push_back(name);
      }
    }
    StartMissingServersLocked();
    MutexLock lock(mu_);
    for (const std::string& name : missing) {
      auto it = served_.find(name);
      if (it != served_.end() && !it->second.server && started.ok()) {
        started = Unavailable("resource " + name + ": cannot serve on " + device_plugin_dir() +
                              "/" + PluginSocketName(name) + " (see the log line before)");
      }
    }
  }
  RestartMonitorIfNeededLocked();
  Wake();  // new servers register at once
  return started;
}

void DevicePlugin::StartMissingServersLocked() {
  std::vector<std::string> missing;
  {
    MutexLock lock(mu_);
    for (auto& [name, s] : served_) {
      if (!s.server) missing.push_back(name);
    }
  }
  for (const std::string& name : missing) {
    kubelet::DevicePluginCallbacks callbacks;
    callbacks.allocate = [this, name](const std::vector<std::vector<std::string>>& containers)
        -> Result<std::vector<ContainerAllocation>> {
      std::shared_ptr<const Resource> r;
      std::shared_ptr<const Config> c;
      {
        MutexLock lock(mu_);
        auto it = served_.find(name);
        if (it == served_.end()) {
          return FailedPrecondition("Allocate: " + name +
                                    " is no longer advertised by this node's device plugin");
        }
        r = it->second.resource;
        c = config_;
      }
      const auto& new_uuid = options_.new_uuid ? options_.new_uuid : RandomUuid;
      std::vector<ContainerAllocation> out;
      for (const std::vector<std::string>& ids : containers) {
        GPUOP_ASSIGN_OR_RETURN(ContainerAllocation a, Allocate(*r, ids, *c, new_uuid));
        out.push_back(std::move(a));
      }
      return out;
    };
    callbacks.get_preferred_allocation = [this, name](
                                             const std::vector<std::string>& available,
                                             const std::vector<std::string>& must_include,
                                             int size) -> Result<std::vector<std::string>> {
      std::shared_ptr<const Resource> r;
      std::shared_ptr<const Config> c;
      std::shared_ptr<const Topology> topo;
      {
        MutexLock lock(mu_);
        auto it = served_.find(name);
        if (it == served_.end()) {
          return FailedPrecondition("GetPreferredAllocation: " + name +
                                    " is no longer advertised by this node's device plugin");
        }
        r = it->second.resource;
        c = config_;
        topo = topology_;
      }
      std::vector<DeviceRef> refs;
      for (const std::string& id : available) {
        const Unit* u = r->FindUnit(id);
        if (!u) {
          return InvalidArgument("GetPreferredAllocation: unknown device ID \"" + id +
                                 "\" for resource " + name + " (not advertised by this plugin)");
        }
        refs.push_back({.id = id,
                        .gpu = u->gpu,
                        .unit = u->uuid,
                        .shared = r->shared() || u->is_mig(),
                        .replicas = static_cast<unsigned>(r->replicas)});
      }
      SharedPolicy policy = c->shared_policy == SharedAllocationPolicy::kPacked
                                ? SharedPolicy::kPacked
                                : SharedPolicy::kDistributed;
      return PreferredAllocation(*topo, refs, must_include, size, policy);
    };

    const std::string socket = device_plugin_dir() + "/" + PluginSocketName(name);
    auto server = kubelet::DevicePluginServer::Start(socket, std::move(callbacks));
    if (!server.ok()) {
      LogError("cannot serve resource", {{"resource", name}, {"error", server.status()}});
      continue;
    }
    std::shared_ptr<kubelet::DevicePluginServer> s = std::move(server).value();
    MutexLock lock(mu_);
    auto it = served_.find(name);
    if (it == served_.end() || it->second.server) {
      s->Stop();  // the resource went meanwhile (cannot happen under ops_mu_, but be safe)
      continue;
    }
    it->second.server = s;
    it->second.registered = false;
    s->SetDevices(DevicesLocked(*it->second.resource));
  }
}

void DevicePlugin::RestartServersLocked() {
  std::vector<std::shared_ptr<kubelet::DevicePluginServer>> old;
  {
    MutexLock lock(mu_);
    ++stats_.kubelet_restarts;
    for (auto& [name, s] : served_) {
      if (s.server) old.push_back(std::move(s.server));
      s.registered = false;
    }
  }
  for (auto& s : old) s->Stop();
  StartMissingServersLocked();
}

bool DevicePlugin::RegisterPendingLocked(std::stop_token stop) {
  std::vector<std::pair<std::string, std::shared_ptr<kubelet::DevicePluginServer>>> todo;
  bool all = true;
  {
    MutexLock lock(mu_);
    for (auto& [name, s] : served_) {
      if (!s.server) all = false;
      if (s.server && !s.registered) todo.emplace_back(name, s.server);
    }
  }
  const std::string kubelet_socket =
      device_plugin_dir() + "/" + std::string(kubelet::kKubeletSocketName);
  for (auto& [name, server] : todo) {
    if (stop.stop_requested()) return false;
    Status st = kubelet::RegisterWithKubelet(kubelet_socket, PluginSocketName(name), name,
                                             /*preferred_allocation=*/true,
                                             options_.register_timeout, stop);
    if (stop.stop_requested()) return false;  // cancelled: not a registration error
    MutexLock lock(mu_);
    if (!st.ok()) {
      all = false;
      ++stats_.registration_errors;
      if (st.message() != last_register_error_) {
        LogWarn("registration with the kubelet failed; retrying", {{"error", st}});
        last_register_error_ = st.message();
      }
      continue;
    }
    last_register_error_.clear();
    ++stats_.registrations;
    auto it = served_.find(name);
    if (it != served_.end() && it->second.server == server) it->second.registered = true;
  }
  return all;
}

void DevicePlugin::RestartMonitorIfNeededLocked() {
  if (!policy_.Active()) return;
  std::vector<nvml::Gpu> gpus;
  {
    MutexLock lock(mu_);
    gpus = gpus_;
  }
  const std::set<std::string> units = HealthUnits(gpus);
  if (monitor_ && units == monitor_units_) return;
  if (monitor_) {
    // A fresh tracker forgets open faults: wait (next rescan) until every unit
    // that stays is healthy. New MIG units meanwhile follow their GPU's health.
    MutexLock lock(mu_);
    for (const std::string& u : unhealthy_) {
      if (units.count(u) != 0) return;
    }
  }
  if (monitor_) monitor_->Stop();
  monitor_.reset();
  monitor_units_.clear();
  {
    MutexLock lock(mu_);
    unhealthy_.clear();  // only units that vanished are left in it
    PushLocked();
  }
  auto m = HealthMonitor::Start(
      client_, gpus, policy_, [this](const std::map<std::string, bool>& c) { OnHealth(c); },
      options_.health);
  if (!m.ok()) {
    LogError("health monitor not running; retrying at the next rescan", {{"error", m.status()}});
    return;
  }
  monitor_ = std::move(m).value();
  monitor_units_ = units;
}

Status DevicePlugin::RescanLocked() {
  auto gpus = Enumerate();
  if (!gpus.ok()) {
    // One GPU failing is the health monitor's business; NVML itself failing
    // (the driver gone) is the liveness probe's.
    auto count = client_.GpuCount();
    MutexLock lock(mu_);
    ++stats_.rescans;
    ++stats_.rescan_errors;
    std::string err = count.ok() ? "" : count.status().message();
    if (err != nvml_error_) {
      if (!err.empty()) LogError("NVML does not answer", {{"error", count.status()}});
    }
    nvml_error_ = err;
    return gpus.status();
  }
  std::shared_ptr<const Config> config;
  bool same = false;
  bool driver_back = false;
  {
    MutexLock lock(mu_);
    ++stats_.rescans;
    driver_back = !nvml_error_.empty();
    if (driver_back) LogInfo("NVML answers again");
    nvml_error_.clear();
    same = Fingerprint(*gpus) == layout_;
    config = config_;
  }
  // NVML stops answering only when the driver is gone; back, it was reloaded
  // (and every GPU reset with it): that is the recovery evidence for faults
  // only a reload fixes. Another driver version is the same evidence when the
  // driver came back between two rescans (a driver container's upgrade).
  const std::string version = DriverVersion(client_);
  const bool version_changed =
      !version.empty() && !driver_version_.empty() && version != driver_version_;
  if (version_changed) {
    LogInfo("the driver was reloaded", {{"from", driver_version_}, {"to", version}});
  }
  if (!version.empty()) driver_version_ = version;
  if ((driver_back || version_changed) && monitor_) monitor_->OnDriverReloaded();
  if (same) {
    RestartMonitorIfNeededLocked();
    return Status::Ok();
  }
  auto resources = Build(*gpus, *config);
  if (!resources.ok()) {
    const std::set<std::string> present = HealthUnits(*gpus);
    {
      MutexLock lock(mu_);
      ++stats_.rebuild_errors;
      vanished_.clear();
      for (const auto& [name, s] : served_) {
        for (const Unit& u : s.resource->units) {
          if (present.count(u.uuid) == 0) vanished_.insert(u.uuid);
        }
      }
      PushLocked();
    }
    if (resources.status().message() != last_rebuild_error_) {
      LogError(
          "GPU layout changed but cannot be advertised; keeping the last good resources "
          "with the vanished devices unhealthy",
          {{"error", resources.status()}});
      last_rebuild_error_ = resources.status().message();
    }
    return resources.status();
  }
  last_rebuild_error_.clear();
  {
    MutexLock lock(mu_);
    ++stats_.layout_changes;
  }
  LogInfo("GPU layout changed; advertising the new devices",
          {{"resources", ResourceNames(*resources)}});
  return ApplyLocked(std::move(*gpus), *config, std::move(*resources));
}

// ---- Public operations ------------------------------------------------------

Status DevicePlugin::Reload(Config config) {
  MutexLock ops(ops_mu_);
  TrimControlDeviceNodes(options_.host_root, &config);
  auto gpus = Enumerate();
  std::vector<nvml::Gpu> current;
  if (gpus.ok()) {
    current = std::move(gpus).value();
  } else {
    MutexLock lock(mu_);
    current = gpus_;
  }
  auto resources = Build(current, config);
  if (!resources.ok()) {
    MutexLock lock(mu_);
    ++stats_.reload_errors;
    return resources.status().Annotate("new configuration rejected, the running one stays");
  }
  for (const std::string& w : config.warnings) LogWarn("device plugin config", {{"warning", w}});
  {
    MutexLock lock(mu_);
    ++stats_.reloads;
  }
  LogInfo("configuration reloaded", {{"resources", ResourceNames(*resources)}});
  if (!started_) {
    MutexLock lock(mu_);
    config_ = std::make_shared<const Config>(std::move(config));
    return Status::Ok();
  }
  return ApplyLocked(std::move(current), std::move(config), std::move(*resources));
}

Status DevicePlugin::Rescan() {
  MutexLock ops(ops_mu_);
  if (!started_) return FailedPrecondition("the device plugin is not running");
  return RescanLocked();
}

Status DevicePlugin::CheckHealth() const {
  if (auto count = client_.GpuCount(); !count.ok()) {
    return Unavailable("NVML does not answer: " + count.status().message());
  }
  MutexLock lock(mu_);
  if (served_.empty()) return Unavailable("no resource is advertised");
  for (const auto& [name, s] : served_) {
    if (!s.server || !s.server->Serving()) {
      return Unavailable("resource " + name + ": its gRPC server is not running");
    }
    if (!PathExists(s.server->socket_path())) {
      return Unavailable("resource " + name + ": socket " + s.server->socket_path() + " is gone");
    }
  }
  return Status::Ok();
}

std::vector<ResourceStatus> DevicePlugin::Resources() const {
  MutexLock lock(mu_);
  std::vector<ResourceStatus> out;
  for (const auto& [name, s] : served_) {
    ResourceStatus st;
    st.name = name;
    st.socket = device_plugin_dir() + "/" + PluginSocketName(name);
    for (const PluginDevice& d : DevicesLocked(*s.resource)) {
      ++st.devices;
      if (d.healthy) ++st.healthy;
    }
    st.serving = s.server && s.server->Serving();
    st.registered = s.registered;
    out.push_back(std::move(st));
  }
  return out;
}

std::shared_ptr<const Config> DevicePlugin::config() const {
  MutexLock lock(mu_);
  return config_;
}

DevicePluginStats DevicePlugin::Stats() const {
  MutexLock lock(mu_);
  return stats_;
}

// ---- Health and the loop ----------------------------------------------------

std::vector<PluginDevice> DevicePlugin::DevicesLocked(const Resource& r) const {
  return r.Devices([this](const Unit& u) GPUOP_REQUIRES(mu_) {
    return unhealthy_.count(u.uuid) == 0 && unhealthy_.count(u.parent_uuid) == 0 &&
           vanished_.count(u.uuid) == 0;
  });
}

void DevicePlugin::PushLocked() {
  for (auto& [name, s] : served_) {
    if (!s.server) continue;
    std::vector<PluginDevice> devices = DevicesLocked(*s.resource);
    if (devices != s.server->Devices()) s.server->SetDevices(std::move(devices));
  }
}

void DevicePlugin::OnHealth(const std::map<std::string, bool>& changed) {
  MutexLock lock(mu_);
  for (const auto& [unit, healthy] : changed) {
    ++stats_.health_changes;  // the health monitor logged it, with its reason
    if (healthy) {
      unhealthy_.erase(unit);
    } else {
      unhealthy_.insert(unit);
    }
  }
  PushLocked();
}

void DevicePlugin::Wake() {
  MutexLock lock(mu_);
  wake_ = true;
  cv_.notify_all();
}

void DevicePlugin::Loop(std::stop_token stop) {
  const Clock& clock = ClockOrReal(options_.clock);
  // A stop wakes the wait below. Registered before mu_ is taken: for a stop
  // already requested it runs here, at once.
  std::stop_callback on_stop(stop, [this] {
    MutexLock lock(mu_);
    cv_.notify_all();
  });
  auto next_rescan = clock.SteadyNow() + options_.rescan_interval;
  auto next_register = clock.SteadyNow();
  int register_failures = 0;  // since the last success: the backoff's exponent
  while (!stop.stop_requested()) {
    bool restart = false, woken = false;
    {
      MutexLock lock(mu_);
      restart = std::exchange(kubelet_restarted_, false);
      woken = std::exchange(wake_, false);
    }
    if (restart || woken) {
      next_register = clock.SteadyNow();
      register_failures = 0;
    }
    bool pending = false;
    {
      MutexLock ops(ops_mu_);
      if (restart) {
        LogInfo("kubelet.sock created (kubelet restart): serving anew and registering again");
        RestartServersLocked();
      }
      StartMissingServersLocked();
      if (clock.SteadyNow() >= next_rescan) {
        (void)RescanLocked();
        next_rescan = clock.SteadyNow() + options_.rescan_interval;
      }
      if (clock.SteadyNow() >= next_register) {
        if (RegisterPendingLocked(stop)) {
          register_failures = 0;
        } else {
          next_register = clock.SteadyNow() + ExponentialDelay(++register_failures,
                                                               options_.register_backoff_initial,
                                                               options_.register_backoff_max);
        }
      }
      MutexLock lock(mu_);
      for (const auto& [name, s] : served_) {
        if (!s.server || !s.registered) pending = true;
      }
    }
    auto deadline = next_rescan;
    if (pending) deadline = std::min(deadline, next_register);
    MutexLock lock(mu_);
    clock.WaitUntil(lock.native(), cv_, stop, deadline,
                    [&]() GPUOP_REQUIRES(mu_) { return kubelet_restarted_ || wake_; });
  }
}

}  // namespace gpuop::deviceplugin
