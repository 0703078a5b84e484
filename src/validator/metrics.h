// The node-status exporter (COMPONENT=metrics): NVIDIA's gauges, each with
// the label node, served on METRICS_PORT at /metrics by src/http:
//
//   gpu_operator_node_metrics_ready_ts_seconds                   start time
//   gpu_operator_node_{driver,toolkit,plugin,cuda}_ready          the *-ready file exists
//   gpu_operator_node_driver_validation                           driver check (1/0)
//   gpu_operator_node_driver_validation_last_success_ts_seconds
//   gpu_operator_node_device_plugin_devices_total                 GPU + MIG capacity, -1 on error
//   gpu_operator_node_device_plugin_validation_last_success_ts_seconds
//   gpu_operator_nvidia_pci_devices_total                         NVIDIA PCI functions
//
// RenderNodeMetrics is pure. The exporter's probes (driver check, node
// capacity, PCI scan) run on one thread of its own every `interval`
// (NVIDIA: 30-60 s); the file gauges are read at scrape time (a stat each),
// so a scrape never waits on NVML or the API.
//
// Thread-safety: Exporter's methods may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "http/server.h"
#include "kube/client.h"
#include "validator/options.h"

namespace gpuop::validator {

struct NodeMetrics {
  std::string node;
  double ready_ts = 0;
  bool driver_ready = false, toolkit_ready = false, plugin_ready = false, cuda_ready = false;
  int driver_validation = 0;
  double driver_validation_last_success_ts = 0;
  int64_t device_plugin_devices = -1;
  double device_plugin_validation_last_success_ts = 0;
  int64_t pci_devices = 0;
};

std::string RenderNodeMetrics(const NodeMetrics& m);

// NVIDIA PCI functions (vendor 0x10de, display class 0x03) under
// <read_root>/sys/bus/pci/devices.
int64_t CountNvidiaPciDevices(const std::string& read_root);

class Exporter {
 public:
  // `listen`: ":8000", "127.0.0.1:0". `client` may be null (devices -1).
  static Result<std::unique_ptr<Exporter>> Start(const Options& o, kube::Client* client,
                                                 const std::string& listen,
                                                 std::chrono::milliseconds interval);
  ~Exporter();
  int port() const;
  // One probe round now (tests; the thread runs them every interval).
  void Probe();
  NodeMetrics Snapshot() const;

 private:
  Exporter(const Options& o, kube::Client* client);
  Options o_;
  kube::Client* client_;
  mutable Mutex mu_;
  NodeMetrics probed_ GPUOP_GUARDED_BY(mu_);
  http::ConnectionCounters connections_;  // outlives server_
  std::unique_ptr<http::Server> server_;
  std::jthread thread_;
};

}  // namespace gpuop::validator
