#include "validator/checks.h"

#include <sys/stat.h>

#include "base/clock.h"
#include "base/files.h"
#include "base/strings.h"
#include "host/driver_files.h"
#include "host/ld_cache.h"
#include "kube/object.h"
#include "nvml/client.h"

namespace gpuop::validator {

using Json = nlohmann::json;

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// "6", "1k" → 6, 1000: device counts are plain integers; anything else is 0.
int64_t Quantity(const std::string& q) {
  auto n = ParseUint(q);
  return n ? static_cast<int64_t>(*n) : 0;
}

Json CapacityOf(const Json& node) {
  if (!node.is_object() || !node.contains("status") || !node["status"].is_object()) return {};
  const Json& st = node["status"];
  auto it = st.find("capacity");
  return it != st.end() && it->is_object() ? *it : Json{};
}

}  // namespace

std::string DriverReadyContent(const DriverInfo& d) {
  return "IS_HOST_DRIVER=" + std::string(d.host_driver ? "true" : "false") + "\n" +
         "NVIDIA_DRIVER_ROOT=" + d.driver_root + "\n" +
         "DRIVER_ROOT_CTR_PATH=" + d.driver_root_ctr + "\n" + "NVIDIA_DEV_ROOT=" + d.dev_root +
         "\n" + "DEV_ROOT_CTR_PATH=" + d.dev_root_ctr + "\n";
}

Result<std::string> FindNvmlLibrary(const std::string& read_root) {
  const std::string cache_path = JoinRoot(read_root, "/etc/ld.so.cache");
  auto cache = host::ReadLdCache(cache_path);
  if (cache.ok()) {
    const int32_t arch = host::HostLdArchFlag();
    for (const host::LdCacheEntry& e : cache->entries) {
      if (e.key != "libnvidia-ml.so.1") continue;
      if (arch != 0 && (e.flags & host::kLdFlagArchMask) != arch) continue;
      std::string path = JoinRoot(read_root, e.value);
      if (PathExists(path)) return path;
    }
  } else if (cache.status().code() != StatusCode::kNotFound) {
    return cache.status();
  }
  for (std::string_view dir : host::kStandardLibraryDirs) {
    std::string path = JoinRoot(read_root, std::string(dir) + "/libnvidia-ml.so.1");
    if (PathExists(path)) return path;
  }
  return NotFound("no libnvidia-ml.so.1 under " + read_root + " (neither in " + cache_path +
                  " nor in the standard library directories)");
}

Result<DriverInfo> CheckDriver(const Options& o) {
  DriverInfo d;
  std::string read_driver_root;
  auto host_nvml = FindNvmlLibrary(o.read_root);
  if (host_nvml.ok()) {
    d.host_driver = true;
    d.driver_root = o.host_root;
    d.dev_root = o.host_root;
    d.driver_root_ctr = "/host";
    d.dev_root_ctr = "/host";
    d.nvml_path = *host_nvml;
    read_driver_root = o.read_root;
  } else {
    const std::string ctr_ready = JoinRoot(o.OutputDir(), kDriverCtrReadyFile);
    read_driver_root = JoinRoot(o.read_root, o.driver_install_dir);
    if (!PathExists(ctr_ready)) {
      if (!IsDirectory(read_driver_root)) {
        return NotFound(
            "driver validation failed: no NVIDIA driver on node " + o.node_name +
            ": none on the host (" + host_nvml.status().message() + ") and no driver container (" +
            o.driver_install_dir +
            " does not exist); install the driver on the host, or enable driver.enabled in the "
            "ClusterPolicy so the operator deploys it");
      }
      return FailedPrecondition(
          "driver validation failed: the driver container on node " + o.node_name +
          " is not ready yet (" + ctr_ready +
          " is missing); it appears when the driver is loaded: check the "
          "nvidia-driver-daemonset pod on this node (kubectl logs -c nvidia-driver-ctr)");
    }
    d.host_driver = false;
    d.driver_root = o.driver_install_dir;
    d.driver_root_ctr = "/driver-root";
    if (IsDirectory(JoinRoot(read_driver_root, "/dev"))) {
      d.dev_root = o.driver_install_dir;
      d.dev_root_ctr = "/driver-root";
    } else {
      d.dev_root = o.host_root;
      d.dev_root_ctr = "/host";
    }
    auto nvml_path = FindNvmlLibrary(read_driver_root);
    if (!nvml_path.ok()) {
      return FailedPrecondition(
          "driver validation failed: the driver container signalled ready "
          "but its root has no NVML: " +
          nvml_path.status().message() + "; check the driver container's install (kubectl logs)");
    }
    d.nvml_path = *nvml_path;
  }
  const std::string where =
      d.host_driver ? "the host driver" : "the driver container's root " + d.driver_root;
  auto client = nvml::Client::Open(d.nvml_path);
  if (!client.ok()) {
    return FailedPrecondition("driver validation failed: NVML from " + where + " on node " +
                              o.node_name + " does not start: " + client.status().message() +
                              "; load the driver (modprobe nvidia, or restart the driver pod) "
                              "and check dmesg for NVRM errors");
  }
  auto count = (*client)->GpuCount();
  if (!count.ok()) {
    return FailedPrecondition("driver validation failed: NVML from " + where + " on node " +
                              o.node_name + " cannot count GPUs: " + count.status().message());
  }
  if (*count == 0) {
    return FailedPrecondition("driver validation failed: the driver on node " + o.node_name +
                              " sees no GPU; check that the GPUs are on the PCI bus (lspci) "
                              "and not bound to another driver (vfio-pci)");
  }
  d.gpus = *count;
  if (auto sys = (*client)->System(); sys.ok()) d.driver_version = sys->driver_version;
  return d;
}

Result<unsigned> CheckToolkit(const Options& o) {
  auto client = nvml::Client::Open(o.nvml_library);
  if (!client.ok()) {
    return FailedPrecondition(
        "toolkit validation failed: NVML (" + o.nvml_library +
        ") is not usable in this "
        "container: " +
        client.status().message() +
        "; the container runtime did not inject the driver: check that the toolkit pod on node " +
        o.node_name +
        " is ready, the runtime class nvidia exists and the runtime was restarted "
        "with its configuration");
  }
  auto count = (*client)->GpuCount();
  if (!count.ok() || *count == 0) {
    return FailedPrecondition(
        "toolkit validation failed: NVML in this container sees no GPU" +
        (count.ok() ? std::string() : " (" + count.status().message() + ")") +
        "; the runtime injected the driver but no device: check NVIDIA_VISIBLE_DEVICES=all and "
        "the toolkit's CDI spec (gpuop cdi list)");
  }
  return *count;
}

int64_t PluginDeviceCount(const Json& node, const std::string& mig_strategy) {
  const Json capacity = CapacityOf(node);
  if (!capacity.is_object()) return 0;
  int64_t total = 0;
  for (const auto& [key, value] : capacity.items()) {
    if (!value.is_string()) continue;
    bool gpu = key == kGpuResource;
    bool mig = StartsWith(key, kMigResourcePrefix);
    if (gpu || (mig && mig_strategy == "mixed")) total += Quantity(value.get<std::string>());
  }
  return total;
}

std::string PluginWorkloadResource(const Json& node, const std::string& mig_strategy) {
  if (mig_strategy == "mixed") {
    const Json capacity = CapacityOf(node);
    if (capacity.is_object()) {
      for (const auto& [key, value] : capacity.items()) {
        if (StartsWith(key, kMigResourcePrefix) && value.is_string() &&
            Quantity(value.get<std::string>()) > 0) {
          return key;
        }
      }
    }
  }
  return kGpuResource;
}

std::string PluginNotReadyMessage(const std::string& node, const std::string& mig_strategy) {
  std::string want =
      mig_strategy == "mixed" ? "nvidia.com/gpu or nvidia.com/mig-*" : "nvidia.com/gpu";
  return "plugin validation failed: node " + node + " advertises no " + want +
         " in its capacity (MIG_STRATEGY " + mig_strategy +
         "): the device plugin has not registered; check the nvidia-device-plugin-daemonset pod "
         "on this node (its logs, and that toolkit-ready exists)";
}

Result<int64_t> WaitForPluginResources(kube::Client& client, const Options& o,
                                       std::stop_token stop) {
  if (o.node_name.empty()) {
    return InvalidArgument("plugin validation needs NODE_NAME (the downward API's spec.nodeName)");
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(int64_t{o.plugin_retries} * o.sleep_interval_seconds);
  std::string last_error;
  while (!stop.stop_requested() && std::chrono::steady_clock::now() < deadline) {
    kube::ListOptions lo;
    lo.field_selector = "metadata.name=" + o.node_name;
    auto list = client.List(kube::resources::kNodes, "", lo);
    if (!list.ok()) {
      last_error = list.status().message();
      if (!RealClock().SleepFor(std::chrono::seconds(o.sleep_interval_seconds), stop)) break;
      continue;
    }
    for (const Json& n : list->items) {
      if (int64_t c = PluginDeviceCount(n, o.mig_strategy); c > 0) return c;
    }
    if (list->items.empty()) last_error = "node " + o.node_name + " not found";
    // Event-driven: watch the node from the list's version until it shows
    // the resources or the deadline passes.
    kube::WatchOptions wo;
    wo.field_selector = lo.field_selector;
    wo.resource_version = list->resource_version;
    auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline -
                                                                 std::chrono::steady_clock::now());
    wo.timeout = std::max(std::chrono::seconds(1), left);
    int64_t found = 0;
    Status s = client.Watch(
        kube::resources::kNodes, "", wo,
        [&](kube::WatchEvent&& ev) {
          if (ev.type == kube::WatchEvent::Type::kError) return false;
          if (ev.type == kube::WatchEvent::Type::kAdded ||
              ev.type == kube::WatchEvent::Type::kModified) {
            found = PluginDeviceCount(ev.object, o.mig_strategy);
          }
          return found == 0 && std::chrono::steady_clock::now() < deadline;
        },
        stop);
    if (found > 0) return found;
    if (!s.ok()) last_error = s.message();
  }
  if (stop.stop_requested()) return Aborted("plugin validation stopped");
  std::string msg = PluginNotReadyMessage(o.node_name, o.mig_strategy) + " (waited " +
                    std::to_string(int64_t{o.plugin_retries} * o.sleep_interval_seconds) + "s)";
  if (!last_error.empty()) msg += "; last API error: " + last_error;
  return DeadlineExceeded(msg);
}

}  // namespace gpuop::validator
