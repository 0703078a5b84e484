// `gpuop dra-plugin`: the node's DRA kubelet plugin for driver gpu.nvidia.com
// (docs/dra.md). It publishes the node's GPUs and MIG devices as
// ResourceSlices with NVIDIA's names and attributes (dra/devices.h,
// dra/slice_publisher.h), follows MIG layout changes and GPU health (an
// unhealthy GPU's devices are tainted), serves NodePrepareResources and
// NodeUnprepareResources (dra/driver.h: per-claim CDI specs, checkpointed)
// and registers with the kubelet (kubelet/dra_server.h). Paths are host
// paths under --host-root. Exit 0 on SIGTERM/SIGINT, 1 when it cannot start,
// 2 on a bad flag.
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "deviceplugin/health_monitor.h"
#include "dra/devices.h"
#include "dra/driver.h"
#include "dra/health.h"
#include "dra/names.h"
#include "dra/slice_publisher.h"
#include "http/server.h"
#include "kube/object.h"
#include "kubelet/dra_server.h"
#include "nvml/client.h"

namespace gpuop::cli {
namespace {

struct DraPluginFlags {
  std::string node_name;
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string cdi_root = "/etc/cdi";
  std::string driver_root = "/";
  std::string dev_root;
  std::string hook_path;
  std::string rescan_interval = "5s";
  std::string additional_xids;
  std::string health_addr;
  KubeFlags kube;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "gpuop dra-plugin: %s\n", s.message().c_str());
  return kExitFailure;
}

// The health monitor's open faults in the DRA health tracker's terms.
std::map<std::string, dra::UnitFault> UnitFaults(
    const std::map<std::string, deviceplugin::OpenFault>& open) {
  std::map<std::string, dra::UnitFault> out;
  for (const auto& [unit, f] : open) {
    out[unit] = {f.xid, f.cls == deviceplugin::FaultClass::kLost};
  }
  return out;
}

// The set of units (GPU and MIG UUIDs) the health monitor watches: a MIG
// layout change replaces them, and the monitor is started again.
std::set<std::string> Units(const std::vector<nvml::Gpu>& gpus) {
  std::set<std::string> out;
  for (const nvml::Gpu& g : gpus) {
    out.insert(g.uuid);
    for (const nvml::MigDevice& m : g.mig_devices) out.insert(m.uuid);
  }
  return out;
}

int RunDraPlugin(const GlobalOptions& g, const DraPluginFlags& f) {
  StopSignals signals;  // before any thread starts
  if (f.node_name.empty()) {
    std::fprintf(stderr, "gpuop dra-plugin: --node-name (or NODE_NAME) is required\n");
    return kExitUsage;
  }
  auto rescan = ParseDuration(f.rescan_interval);
  if (!rescan.ok()) {
    std::fprintf(stderr, "gpuop dra-plugin: --rescan-interval: %s\n",
                 rescan.status().message().c_str());
    return kExitUsage;
  }
  std::set<uint64_t> ignored_xids;
  for (const std::string& x : Split(f.additional_xids, ',')) {
    if (Trim(x).empty()) continue;
    auto n = ParseUint(Trim(x));
    if (!n) {
      std::fprintf(stderr,
                   "gpuop dra-plugin: --additional-xids-to-ignore: \"%s\" is not an XID number "
                   "(a comma-separated list such as 13,31)\n",
                   x.c_str());
      return kExitUsage;
    }
    ignored_xids.insert(*n);
  }
  const auto env = ProcessEnvironment();
  auto env_of = [&env](const char* key) {
    auto it = env.find(key);
    return it == env.end() ? std::string() : it->second;
  };
  auto policy = deviceplugin::ParseHealthPolicy(env_of("DP_DISABLE_HEALTHCHECKS"),
                                                env_of("DP_ENABLE_HEALTHCHECKS"));
  if (!policy.ok()) return Fail(policy.status());

  auto nvml_client = nvml::Client::Open(NvmlLibraryPath(g));
  if (!nvml_client.ok()) return Fail(nvml_client.status());
  const nvml::Client& nvml = **nvml_client;
  auto kube_client = NewKubeClient(f.kube, "gpuop-dra-plugin");
  if (!kube_client.ok()) return Fail(kube_client.status());
  kube::Client& kube = **kube_client;

  const std::string plugin_dir =
      JoinRoot(g.host_root, f.kubelet_dir + "/plugins/" + dra::kDriverName);
  const std::string registry_dir = JoinRoot(g.host_root, f.kubelet_dir + "/plugins_registry");
  toolkit::CdiHostRoots roots{g.host_root, f.driver_root,
                              f.dev_root.empty() ? f.driver_root : f.dev_root};
  dra::DriverOptions options;
  options.node_name = f.node_name;
  options.plugin_dir = plugin_dir;
  options.cdi_root = JoinRoot(g.host_root, f.cdi_root);
  options.cdi.driver_root = roots.driver_root;
  options.cdi.dev_root = roots.dev_root;
  options.cdi.hook_path = f.hook_path.empty() ? DefaultCdiHookPath(g) : f.hook_path;
  if (options.cdi.hook_path.empty()) {
    return Fail(InvalidArgument("cannot find this executable's path; pass --hook-path"));
  }
  Status made = MakeDirs(options.cdi_root);
  if (!made.ok()) return Fail(made.Annotate("--cdi-root"));
  dra::NvidiaSmiTimeSlicer time_slicer;
  dra::Driver driver(options, dra::ApiClaimFetcher(kube), dra::NvmlNodeDevices(nvml, roots),
                     time_slicer);

  // Publishing: the devices now, again whenever health or the layout
  // changes, and on every rescan (which also brings back deleted slices).
  dra::SlicePublisher publisher(kube, f.node_name);
  std::mutex mu;
  std::condition_variable_any wake;
  bool dirty = true;
  Status last_publish = Unavailable("not published yet");
  std::unique_ptr<deviceplugin::HealthMonitor> monitor;
  std::set<std::string> monitored;
  dra::GpuHealthTracker gpu_health;
  auto publish_once = [&]() -> Status {
    auto gpus = nvml.Gpus();
    if (!gpus.ok()) return gpus.status().Annotate("reading the GPUs");
    auto system = nvml.System();
    if (!system.ok()) return system.status().Annotate("reading the driver version");
    if (policy->Active() && Units(*gpus) != monitored) {
      monitor.reset();
      auto m = deviceplugin::HealthMonitor::Start(nvml, *gpus, *policy,
                                                  [&](const std::map<std::string, bool>&) {
                                                    std::lock_guard l(mu);
                                                    dirty = true;
                                                    wake.notify_all();
                                                  });
      if (!m.ok()) return m.status().Annotate("watching GPU health");
      monitor = std::move(m).value();
      monitored = Units(*gpus);
    }
    dra::DeviceInputs inputs;
    inputs.additional_ignored_xids = ignored_xids;
    if (monitor) {
      inputs.health = gpu_health.Update(*gpus, UnitFaults(monitor->OpenFaults()),
                                        kube::Rfc3339(std::chrono::system_clock::now()));
    }
    for (const nvml::Gpu& gpu : *gpus) {
      const std::string bus = dra::SysfsBusId(gpu.pci);
      if (auto root = dra::ReadPcieRoot(g.host_root, bus)) inputs.pcie_roots[bus] = *root;
    }
    auto devices = dra::BuildDevices(*gpus, *system, inputs);
    if (!devices.ok()) return devices.status();
    return publisher.Publish(std::move(devices).value());
  };
  std::jthread publisher_thread([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      {
        std::lock_guard l(mu);
        dirty = false;
      }
      Status s = publish_once();
      if (!s.ok() && s.message() != last_publish.message()) {
        LogWarn("publishing the node's ResourceSlices failed (retrying)", {{"error", s}});
      } else if (s.ok() && !last_publish.ok()) {
        LogInfo("ResourceSlices published",
                {{"node", f.node_name}, {"generation", publisher.generation()}});
      }
      {
        std::lock_guard l(mu);
        last_publish = s;
      }
      std::unique_lock l(mu);
      wake.wait_for(l, stop, *rescan, [&] { return dirty; });
    }
  });

  kubelet::DraPluginServerOptions so;
  so.driver_name = dra::kDriverName;
  so.plugin_dir = plugin_dir;
  so.registry_dir = registry_dir;
  // The kubelet dials the socket on the host, not under --host-root.
  so.endpoint = f.kubelet_dir + "/plugins/" + dra::kDriverName + "/dra.sock";
  auto server = kubelet::DraPluginServer::Start(&driver, std::move(so));
  if (!server.ok()) return Fail(server.status());

  std::unique_ptr<http::Server> health;
  if (!f.health_addr.empty()) {
    auto h = http::Server::Start(
        f.health_addr, "--health-addr",
        {{"/healthz", [&] {
            kubelet::DraRegistrationState reg = (*server)->Registration();
            Status published;
            {
              std::lock_guard l(mu);
              published = last_publish;
            }
            if (!reg.registered) {
              return http::Response{.status = 503,
                                    .body = reg.notifications == 0
                                                ? "not registered with the kubelet yet (" +
                                                      (*server)->registration_socket() + ")"
                                                : "the kubelet refused the plugin: " + reg.error};
            }
            if (!published.ok()) return http::Response{.status = 503, .body = published.message()};
            return http::Response{.status = 200, .body = "ok"};
          }}});
    if (!h.ok()) return Fail(h.status());
    health = std::move(h).value();
  }
  LogInfo("DRA plugin serving",
          {{"driver", dra::kDriverName},
           {"node", f.node_name},
           {"socket", (*server)->dra_socket()},
           {"cdi_root", options.cdi_root},
           {"health_addr", health ? ":" + std::to_string(health->port()) : std::string("off")}});

  signals.Wait();
  LogInfo("stopping");
  (*server)->Stop();
  publisher_thread.request_stop();
  publisher_thread.join();
  return kExitOk;
}

}  // namespace

void RegisterDraPluginCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<DraPluginFlags>();
  auto* cmd = app.add_subcommand(
      "dra-plugin",
      "Node DaemonSet: the DRA kubelet plugin for driver gpu.nvidia.com: publish the node's "
      "GPUs and MIG devices as ResourceSlices (NVIDIA's names and attributes), prepare and "
      "unprepare ResourceClaims with per-claim CDI specs");
  cmd->add_option("--node-name", f->node_name, "This node's name")->envname("NODE_NAME");
  cmd->add_option("--kubelet-dir", f->kubelet_dir,
                  "The kubelet's root directory on the host (sockets in <dir>/plugins and "
                  "<dir>/plugins_registry)")
      ->capture_default_str();
  cmd->add_option("--cdi-root", f->cdi_root, "Where the per-claim CDI specs are written")
      ->envname("CDI_ROOT")
      ->capture_default_str();
  cmd->add_option("--driver-root", f->driver_root,
                  "The driver's root on the host: / for a host driver, /run/nvidia/driver for "
                  "the driver container")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str();
  cmd->add_option("--dev-root", f->dev_root, "Where the device nodes are (default: --driver-root)");
  cmd->add_option("--hook-path", f->hook_path,
                  "The CDI hook binary on the host (default " + std::string(kToolkitHookPath) +
                      " with --host-root, else this executable)");
  cmd->add_option("--rescan-interval", f->rescan_interval,
                  "How often the GPUs are re-read and the slices checked")
      ->capture_default_str();
  cmd->add_option("--additional-xids-to-ignore", f->additional_xids,
                  "XIDs that taint a device with effect None instead of NoSchedule (comma list)");
  cmd->add_option("--health-addr", f->health_addr,
                  "Serve /healthz (registered with the kubelet, slices published) here; empty: off")
      ->envname("GPUOP_DRA_PLUGIN_HEALTH_ADDR");
  AddKubeFlags(cmd, &f->kube);
  cmd->callback([&g, action, f] { *action = [&g, f] { return RunDraPlugin(g, *f); }; });
}

}  // namespace gpuop::cli
