#include "validator/metrics.h"

#include <dirent.h>

#include <cstdio>

#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "validator/checks.h"

namespace gpuop::validator {

namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string Number(double v) {
  char buf[64];
  if (v == static_cast<double>(static_cast<int64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%.3f", v);
  }
  return buf;
}

void Gauge(std::string& out, const char* name, const char* help, const std::string& node,
           double value) {
  out += "# HELP ";
  out += name;
  out += " ";
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += " gauge\n";
  out += name;
  out += "{node=\"" + EscapeLabel(node) + "\"} " + Number(value) + "\n";
}

}  // namespace

std::string RenderNodeMetrics(const NodeMetrics& m) {
  std::string out;
  Gauge(out, "gpu_operator_node_metrics_ready_ts_seconds",
        "Timestamp when the node-status exporter became ready", m.node, m.ready_ts);
  Gauge(out, "gpu_operator_node_driver_ready", "1 when driver-ready exists on the node", m.node,
        m.driver_ready ? 1 : 0);
  Gauge(out, "gpu_operator_node_toolkit_ready", "1 when toolkit-ready exists on the node", m.node,
        m.toolkit_ready ? 1 : 0);
  Gauge(out, "gpu_operator_node_plugin_ready", "1 when plugin-ready exists on the node", m.node,
        m.plugin_ready ? 1 : 0);
  Gauge(out, "gpu_operator_node_cuda_ready", "1 when cuda-ready exists on the node", m.node,
        m.cuda_ready ? 1 : 0);
  Gauge(out, "gpu_operator_node_driver_validation",
        "1 when the driver validation passed at the last probe", m.node, m.driver_validation);
  Gauge(out, "gpu_operator_node_driver_validation_last_success_ts_seconds",
        "Timestamp of the last successful driver validation", m.node,
        m.driver_validation_last_success_ts);
  Gauge(out, "gpu_operator_node_device_plugin_devices_total",
        "GPU and MIG devices the node advertises (capacity), -1 when it cannot be read", m.node,
        static_cast<double>(m.device_plugin_devices));
  Gauge(out, "gpu_operator_node_device_plugin_validation_last_success_ts_seconds",
        "Timestamp of the last time the node advertised devices", m.node,
        m.device_plugin_validation_last_success_ts);
  Gauge(out, "gpu_operator_nvidia_pci_devices_total", "NVIDIA PCI devices on the node", m.node,
        static_cast<double>(m.pci_devices));
  return out;
}

int64_t CountNvidiaPciDevices(const std::string& read_root) {
  const std::string dir = JoinRoot(read_root, "/sys/bus/pci/devices");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int64_t n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    auto vendor = ReadFile(dir + "/" + e->d_name + "/vendor");
    if (!vendor.ok() || Trim(*vendor) != "0x10de") continue;
    auto cls = ReadFile(dir + "/" + e->d_name + "/class");
    // Display controllers (0x03xxxx): GPUs, not NVSwitches or audio functions.
    if (cls.ok() && !StartsWith(Trim(*cls), "0x03")) continue;
    ++n;
  }
  ::closedir(d);
  return n;
}

Exporter::Exporter(const Options& o, kube::Client* client) : o_(o), client_(client) {
  probed_.node = o.node_name;
  probed_.ready_ts = NowSeconds();
}

Exporter::~Exporter() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  if (server_) server_->Stop();
}

Result<std::unique_ptr<Exporter>> Exporter::Start(const Options& o, kube::Client* client,
                                                  const std::string& listen,
                                                  std::chrono::milliseconds interval) {
  std::unique_ptr<Exporter> e(new Exporter(o, client));
  Exporter* self = e.get();
  std::map<std::string, http::Handler> routes;
  routes["/metrics"] = [self] {
    http::Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = RenderNodeMetrics(self->Snapshot()) +
             http::ConnectionMetrics({{"metrics", &self->connections_}});
    return r;
  };
  routes["/healthz"] = [] { return http::Response{200, "text/plain; charset=utf-8", "ok\n", {}}; };
  auto server = http::Server::Start(listen, "METRICS_PORT", std::move(routes),
                                    {.counters = &e->connections_});
  if (!server.ok()) return server.status().Annotate("node-status exporter");
  e->server_ = std::move(server).value();
  e->thread_ = std::jthread([self, interval](std::stop_token stop) {
    while (!stop.stop_requested()) {
      self->Probe();
      if (!RealClock().SleepFor(interval, stop)) break;
    }
  });
  return e;
}

int Exporter::port() const { return server_ ? server_->port() : 0; }

void Exporter::Probe() {
  NodeMetrics m;
  {
    MutexLock lock(mu_);
    m = probed_;
  }
  const double now = NowSeconds();
  auto driver = CheckDriver(o_);
  m.driver_validation = driver.ok() ? 1 : 0;
  if (driver.ok()) {
    m.driver_validation_last_success_ts = now;
  } else {
    LogWarn("node-status exporter: driver validation failed", {{"error", driver.status()}});
  }
  if (client_ != nullptr && !o_.node_name.empty()) {
    auto node = client_->Get(kube::resources::kNodes, "", o_.node_name);
    if (node.ok()) {
      m.device_plugin_devices = PluginDeviceCount(*node, "mixed");
      if (m.device_plugin_devices > 0) m.device_plugin_validation_last_success_ts = now;
    } else {
      m.device_plugin_devices = -1;
    }
  } else {
    m.device_plugin_devices = -1;
  }
  m.pci_devices = CountNvidiaPciDevices(o_.read_root);
  MutexLock lock(mu_);
  probed_ = m;
}

NodeMetrics Exporter::Snapshot() const {
  NodeMetrics m;
  {
    MutexLock lock(mu_);
    m = probed_;
  }
  // The files are read at scrape time: a stat each.
  const std::string dir = o_.OutputDir();
  m.driver_ready = PathExists(JoinRoot(dir, std::string("/") + kDriverReadyFile));
  m.toolkit_ready = PathExists(JoinRoot(dir, std::string("/") + kToolkitReadyFile));
  m.plugin_ready = PathExists(JoinRoot(dir, std::string("/") + kPluginReadyFile));
  m.cuda_ready = PathExists(JoinRoot(dir, std::string("/") + kCudaReadyFile));
  return m;
}

}  // namespace gpuop::validator
