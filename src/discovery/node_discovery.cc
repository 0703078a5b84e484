#include "discovery/node_discovery.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/backoff.h"
#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "discovery/system.h"
#include "kube/resource.h"

namespace gpuop::discovery {

namespace fs = std::filesystem;

Result<std::vector<PciDevice>> ReadPciDevices(const std::string& host_root) {
  const std::string dir = JoinRoot(host_root, "/sys/bus/pci/devices");
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return NotFound("cannot list PCI devices in " + dir + ": " + ec.message() +
                    " (mount the host's /sys at " + JoinRoot(host_root, "/sys") +
                    " or set --host-root)");
  }
  std::vector<PciDevice> devices;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const std::string addr = it->path().filename().string();
    const std::string path = it->path().string();
    auto vendor_file = ReadFile(path + "/vendor");
    auto class_file = ReadFile(path + "/class");
    if (!vendor_file.ok() || !class_file.ok()) {
      LogDebug("skipping PCI device without vendor/class", {{"device", path}});
      continue;
    }
    auto vendor = ParsePciVendor(*vendor_file);
    auto cls = ParsePciClass(*class_file);
    if (!vendor.ok() || !cls.ok()) {
      LogWarn("skipping PCI device with an unreadable id",
              {{"device", path},
               {"error", !vendor.ok() ? vendor.status().message() : cls.status().message()}});
      continue;
    }
    devices.push_back({addr, *vendor, *cls});
  }
  if (ec) return Unavailable("listing " + dir + ": " + ec.message());
  std::sort(devices.begin(), devices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  return devices;
}

Result<LabelChanges> SyncNodeLabels(kube::Client& client, const NodeDiscoveryOptions& options) {
  GPUOP_ASSIGN_OR_RETURN(std::vector<PciDevice> devices, ReadPciDevices(options.host_root));
  Labels wanted = NvidiaPciLabels(devices);

  auto node = client.Get(kube::resources::kNodes, "", options.node_name);
  if (!node.ok()) {
    if (kube::IsNotFound(node.status())) {
      return NotFound("node " + options.node_name +
                      " not found: set --node-name (NODE_NAME, from spec.nodeName) to this "
                      "node's name");
    }
    return node.status();
  }
  Labels current;
  // metadata.labels may be absent (or null in a hand-written object).
  const kube::Json* labels = nullptr;
  if (auto m = node->find("metadata"); m != node->end() && m->is_object()) {
    if (auto l = m->find("labels"); l != m->end() && l->is_object()) labels = &*l;
  }
  if (labels != nullptr) {
    for (const auto& [key, value] : labels->items()) {
      if (value.is_string()) current[key] = value.get<std::string>();
    }
  }

  // The OS and kernel labels NFD's system and kernel sources would set: the
  // host's os-release, and the kernel the kubelet reports for this node.
  auto os_release = ReadFile(JoinRoot(options.host_root, "/etc/os-release"));
  std::string kernel;
  if (auto s = node->find("status"); s != node->end() && s->is_object()) {
    kernel = s->value("nodeInfo", kube::Json::object()).value("kernelVersion", "");
  }
  wanted.merge(SystemLabels(os_release.ok() ? *os_release : "", kernel));

  LabelChanges changes = PlanLabelChanges(current, wanted);
  if (changes.empty()) return changes;
  auto patched = client.Patch(kube::resources::kNodes, "", options.node_name,
                              kube::PatchType::kMerge, LabelPatch(changes));
  if (!patched.ok()) return patched.status();
  return changes;
}

void RunNodeDiscovery(kube::Client& client, const NodeDiscoveryOptions& options,
                      std::stop_token stop) {
  int failures = 0;
  while (!stop.stop_requested()) {
    auto next = options.interval;
    auto changes = SyncNodeLabels(client, options);
    if (changes.ok()) {
      failures = 0;
      for (const auto& [key, value] : *changes) {
        LogInfo(value ? "label set" : "label removed",
                {{"node", options.node_name}, {"label", key}});
      }
    } else {
      next = ExponentialDelay(++failures, options.retry_initial, options.interval);
      LogWarn(
          "node discovery pass failed",
          {{"node", options.node_name}, {"error", changes.status()}, {"retry_ms", next.count()}});
    }
    RealClock().SleepFor(next, stop);
  }
}

}  // namespace gpuop::discovery
