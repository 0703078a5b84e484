// `gpuop exporter`: the dcgm-exporter-compatible GPU metrics exporter
// (exporter/exporter.h). Serves /metrics and /health on --listen, with
// dcgm-exporter's flags and environment variables (DCGM_EXPORTER_LISTEN,
// DCGM_EXPORTER_COLLECTORS, DCGM_EXPORTER_INTERVAL, DCGM_EXPORTER_KUBERNETES,
// DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE, NVIDIA_RESOURCE_NAMES, NODE_NAME).
// Flags win over the environment. Exit 0 on SIGTERM/SIGINT, 1 when it cannot
// run (a bad collectors file, the address in use), 2 on a bad flag.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "exporter/exporter.h"
#include "http/server.h"
#include "kubelet/pod_resources.h"
#include "nvml/client.h"

namespace gpuop::cli {
namespace {

struct ExporterFlags {
  std::string listen = ":9400";
  std::string collectors;
  int64_t collect_interval_ms = 30000;
  bool kubernetes = false;
  std::string gpu_id_type = "uid";
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string pod_resources_socket;
  int64_t pod_resources_interval_ms = 10000;
  std::string node_name;
  bool print_default_counters = false;
};

std::string Hostname(const std::string& node_name) {
  if (!node_name.empty()) return node_name;
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

int RunExporter(const GlobalOptions& g, const ExporterFlags& f) {
  if (f.print_default_counters) {
    std::fwrite(exporter::DefaultCountersCsv().data(), 1, exporter::DefaultCountersCsv().size(),
                stdout);
    return kExitOk;
  }
  StopSignals signals;  // before any thread starts

  exporter::ExporterOptions o;
  if (!f.collectors.empty()) {
    auto counters = exporter::LoadCounters(f.collectors);
    if (!counters.ok()) return Fail("exporter", counters.status());
    o.counters = std::move(counters).value();
  } else {
    o.counters = exporter::DefaultCounters();
  }
  o.collect_interval = std::chrono::milliseconds(f.collect_interval_ms);
  o.nvml_retry_interval = std::min(o.collect_interval, std::chrono::milliseconds(5000));
  o.hostname = Hostname(f.node_name);
  const std::string lib = NvmlLibraryPath(g);
  o.open_nvml = [lib] { return nvml::Client::Open(lib); };

  std::string socket;
  if (f.kubernetes) {
    auto id_type = exporter::ParseGpuIdType(f.gpu_id_type);
    if (!id_type.ok()) return Fail("exporter", id_type.status());
    o.gpu_id_type = *id_type;
    // --kubelet-dir is a host path (the DaemonSet mounts it under /host);
    // --pod-resources-socket is taken as given.
    socket = f.pod_resources_socket.empty()
                 ? JoinRoot(g.host_root, kubelet::PodResourcesSocket(f.kubelet_dir))
                 : f.pod_resources_socket;
    o.pod_lister = [socket] { return kubelet::ListPodResources(socket, std::chrono::seconds(5)); };
    o.pod_resources_interval = std::chrono::milliseconds(f.pod_resources_interval_ms);
    auto env = ProcessEnvironment();
    if (auto it = env.find("NVIDIA_RESOURCE_NAMES"); it != env.end()) {
      for (const std::string& name : Split(it->second, ',')) {
        if (std::string t(Trim(name)); !t.empty()) o.extra_resource_names.push_back(t);
      }
    }
  }

  auto exp = exporter::Exporter::Start(std::move(o));
  if (!exp.ok()) return Fail("exporter", exp.status());
  exporter::Exporter* e = exp->get();
  http::ConnectionCounters connections;
  auto server =
      http::Server::Start(f.listen, "--listen",
                          {{"/metrics",
                            [e, &connections] {
                              http::Response r = e->Metrics();
                              if (r.status == 200) {
                                r.body += http::ConnectionMetrics({{"metrics", &connections}});
                              }
                              return r;
                            }},
                           {"/health", [e] { return e->Health(); }}},
                          {.counters = &connections});
  if (!server.ok()) return Fail("exporter", server.status());
  LogInfo("exporter started",
          {{"address", (*server)->address()},
           {"collectors", f.collectors.empty() ? std::string("built-in") : f.collectors},
           {"collect_interval_ms", f.collect_interval_ms},
           {"kubernetes", f.kubernetes},
           {"pod_resources_socket", f.kubernetes ? socket : std::string("off")}});
  signals.Wait();
  LogInfo("stopping");
  (*server)->Stop();
  (*exp)->Stop();
  return kExitOk;
}

}  // namespace

void RegisterExporterCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<ExporterFlags>();
  auto* cmd = app.add_subcommand(
      "exporter",
      "Node DaemonSet: GPU metrics for Prometheus, compatible with dcgm-exporter (DCGM_FI_* "
      "names and labels), with pod/namespace/container labels from the kubelet. Serves "
      "/metrics and /health.");
  cmd->add_option("-a,--listen,--address", f->listen,
                  "Address of the HTTP server (HOST:PORT, :PORT; --address as dcgm-exporter)")
      ->envname("DCGM_EXPORTER_LISTEN")
      ->capture_default_str();
  cmd->add_option("-f,--collectors", f->collectors,
                  "Counters CSV (dcgm-exporter format: FIELD, type, help); default: the built-in "
                  "list (see --print-default-counters)")
      ->envname("DCGM_EXPORTER_COLLECTORS");
  cmd->add_option("-c,--collect-interval", f->collect_interval_ms,
                  "Collection interval in milliseconds")
      ->envname("DCGM_EXPORTER_INTERVAL")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  cmd->add_flag("-k,--kubernetes,!--no-kubernetes", f->kubernetes,
                "Add pod, namespace and container labels from the kubelet's pod-resources API")
      ->envname("DCGM_EXPORTER_KUBERNETES");
  cmd->add_option("--kubernetes-gpu-id-type", f->gpu_id_type,
                  "How the device plugin names GPUs: uid (GPU UUIDs) or device-name "
                  "(nvidia<minor>); MIG devices are matched by MIG UUID")
      ->envname("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE")
      ->check(CLI::IsMember({"uid", "device-name"}))
      ->capture_default_str();
  cmd->add_option("--kubelet-dir", f->kubelet_dir,
                  "The kubelet's directory on the host (under --host-root); the socket is "
                  "<dir>/pod-resources/kubelet.sock")
      ->capture_default_str();
  cmd->add_option("--pod-resources-socket", f->pod_resources_socket,
                  "The kubelet's pod-resources socket (overrides --kubelet-dir)");
  cmd->add_option("--pod-resources-interval", f->pod_resources_interval_ms,
                  "How often the pod mapping is refreshed, in milliseconds (in the background; "
                  "never per scrape)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  cmd->add_option("--node-name", f->node_name, "The hostname label (default: the host name)")
      ->envname("NODE_NAME");
  cmd->add_flag("--print-default-counters", f->print_default_counters,
                "Print the built-in counters CSV (a starting point for --collectors) and exit");
  cmd->callback([&g, action, f] { *action = [&g, f] { return RunExporter(g, *f); }; });
}

}  // namespace gpuop::cli
