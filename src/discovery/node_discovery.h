// The adapter of `gpuop node-discovery`: reads the host's PCI devices from
// sysfs under the host root, computes the NVIDIA PCI labels (discovery/pci.h)
// and brings its own Node's labels in line with one merge patch holding only
// the difference. Nothing is written when the labels are already right, so a
// steady cluster sees one GET per node per interval and no writes.
//
// There is no NVML and no watch: PCI devices change only with hardware (or a
// driver binding a VF), so a long backstop interval is enough.
//
// Thread-safety: functions are reentrant; RunNodeDiscovery blocks its caller
// until `stop` is requested.
#pragma once

#include <chrono>
#include <stop_token>
#include <string>
#include <vector>

#include "base/status.h"
#include "discovery/pci.h"
#include "kube/client.h"

namespace gpuop::discovery {

// Every device in <host_root>/sys/bus/pci/devices, in address order. A device
// whose vendor or class file cannot be read or parsed is skipped (it may be
// going away); a missing directory is an error naming the mount to add.
Result<std::vector<PciDevice>> ReadPciDevices(const std::string& host_root);

struct NodeDiscoveryOptions {
  std::string host_root = "/";
  std::string node_name;                                         // REQUIRES: not empty
  std::chrono::milliseconds interval{std::chrono::minutes(10)};  // the backstop
  // After a failed pass (API server down, node not registered yet): retry
  // sooner than the interval, doubling up to it.
  std::chrono::milliseconds retry_initial{std::chrono::seconds(5)};
};

// One pass: read sysfs, read the node, patch what differs. Returns the changes
// written (empty: the node was already right, nothing written).
Result<LabelChanges> SyncNodeLabels(kube::Client& client, const NodeDiscoveryOptions& options);

// Passes every `interval` until `stop`; failures are logged and retried with
// backoff. Returns when stop is requested.
void RunNodeDiscovery(kube::Client& client, const NodeDiscoveryOptions& options,
                      std::stop_token stop);

}  // namespace gpuop::discovery
