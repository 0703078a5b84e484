// `gpuop validator`: NVIDIA's nvidia-validator components (validator/): the
// driver, toolkit, cuda and plugin checks that write the files under
// /run/nvidia/validations, the main container that holds them, and the
// node-status exporter (COMPONENT=metrics; also `gpuop node-status-exporter`,
// what the operator's node-status-exporter DaemonSet runs). NVIDIA's
// environment names (COMPONENT, WITH_WAIT, WITH_WORKLOAD,
// SLEEP_INTERVAL_SECONDS, OUTPUT_DIR, MIG_STRATEGY, METRICS_PORT, HOST_ROOT,
// DRIVER_INSTALL_DIR, NODE_NAME, OPERATOR_NAMESPACE, VALIDATOR_IMAGE, ...);
// flags win over the environment. Exit 0 when the check passed (or on
// SIGTERM for the main container and the exporter), 1 when it failed, 2 on a
// bad flag or variable.
#include <cstdio>
#include <memory>
#include <stop_token>
#include <thread>
#include <tuple>

#include "base/clock.h"
#include "base/log.h"
#include "cli/cli.h"
#include "validator/checks.h"
#include "validator/metrics.h"
#include "validator/options.h"
#include "validator/validator.h"

namespace gpuop::cli {
namespace {

struct ValidatorFlags {
  std::string component;
  std::string with_wait, with_workload;
  int sleep_interval = 0;
  std::string output_dir;
  std::string mig_strategy;
  int metrics_port = -1;
  std::string driver_install_dir;
  std::string node_name;
  std::string namespace_;
  std::string require_cuda;
  bool cleanup = false;
  bool probe = false;
  KubeFlags kube;
};

int RunValidator(const GlobalOptions& g, const ValidatorFlags& f, bool exporter_alias) {
  StopSignals signals;  // before any thread starts
  validator::Options base;
  base.read_root = g.host_root;
  base.nvml_library = NvmlLibraryPath(g);
  if (exporter_alias) {
    base.component = validator::Component::kMetrics;
    base.metrics_port = 8000;
  }
  auto parsed = validator::OptionsFromEnv(ProcessEnvironment(), base);
  if (!parsed.ok()) {
    std::fprintf(stderr, "gpuop validator: %s\n", parsed.status().message().c_str());
    return kExitUsage;
  }
  validator::Options o = std::move(parsed).value();
  // Flags win over the environment.
  if (!f.component.empty()) {
    auto c = validator::ParseComponent(f.component);
    if (!c.ok()) {
      std::fprintf(stderr, "gpuop validator: --component: %s\n", c.status().message().c_str());
      return kExitUsage;
    }
    o.component = *c;
  }
  for (auto [flag, value, field] :
       {std::tuple{"--with-wait", &f.with_wait, &o.with_wait},
        std::tuple{"--with-workload", &f.with_workload, &o.with_workload}}) {
    if (value->empty()) continue;
    auto b = validator::ParseBoolValue(flag, *value);
    if (!b.ok()) {
      std::fprintf(stderr, "gpuop validator: %s\n", b.status().message().c_str());
      return kExitUsage;
    }
    *field = *b;
  }
  if (f.sleep_interval > 0) o.sleep_interval_seconds = f.sleep_interval;
  if (!f.output_dir.empty()) o.output_dir = f.output_dir;
  if (!f.mig_strategy.empty()) o.mig_strategy = f.mig_strategy;
  if (f.metrics_port >= 0) o.metrics_port = f.metrics_port;
  if (!f.driver_install_dir.empty()) o.driver_install_dir = f.driver_install_dir;
  if (!f.node_name.empty()) o.node_name = f.node_name;
  if (!f.namespace_.empty()) o.namespace_ = f.namespace_;
  if (!f.require_cuda.empty()) o.require_cuda = f.require_cuda;

  if (f.probe) {
    // The main container's readiness probe: the driver check again, files untouched.
    auto d = validator::CheckDriver(o);
    if (!d.ok()) {
      std::fprintf(stderr, "driver validation failed: %s\n", d.status().message().c_str());
      return kExitFailure;
    }
    std::printf("driver %s: %u GPUs\n", d->driver_version.c_str(), d->gpus);
    return kExitOk;
  }
  if (f.cleanup) {
    if (Status s = validator::Cleanup(o.OutputDir()); !s.ok()) return Fail("validator", s);
    LogInfo("validation files removed", {{"dir", o.OutputDir()}});
    return kExitOk;
  }

  // The API server: the cuda and plugin checks and the exporter's device
  // count need it; driver and toolkit do not.
  std::unique_ptr<kube::Client> client;
  const bool needs_api = o.component == validator::Component::kPlugin ||
                         (o.component == validator::Component::kCuda && o.with_workload);
  if (needs_api || o.component == validator::Component::kMetrics) {
    auto c = NewKubeClient(f.kube, "gpuop-validator");
    if (c.ok()) {
      client = std::move(c).value();
    } else if (needs_api) {
      return Fail("validator", c.status().Annotate(validator::ComponentName(o.component) +
                                                   " validation needs the API server"));
    } else {
      LogWarn("no API server: gpu_operator_node_device_plugin_devices_total stays -1",
              {{"error", c.status()}});
    }
  }

  // SIGTERM/SIGINT stop whatever runs.
  StopOnSignal stop(signals);
  switch (o.component) {
    case validator::Component::kMain: {
      Status s = validator::RunMain(o, stop.token());
      return s.ok() ? kExitOk : Fail("validator", s);
    }
    case validator::Component::kMetrics: {
      if (o.metrics_port <= 0) {
        std::fprintf(stderr,
                     "gpuop validator: the metrics component needs METRICS_PORT (NVIDIA's "
                     "node-status exporter uses 8000)\n");
        return kExitUsage;
      }
      auto e = validator::Exporter::Start(o, client.get(), ":" + std::to_string(o.metrics_port),
                                          std::chrono::seconds(30));
      if (!e.ok()) return Fail("validator", e.status());
      LogInfo("node-status exporter serving", {{"port", (*e)->port()}, {"node", o.node_name}});
      WaitForStop(stop.token());
      return kExitOk;
    }
    default: {
      Status s = validator::RunCheck(o, client.get(), stop.token());
      return s.ok() ? kExitOk : Fail("validator", s);
    }
  }
}

void AddValidatorFlags(CLI::App* cmd, ValidatorFlags* f, bool with_component) {
  if (with_component) {
    cmd->add_option("--component", f->component,
                    "driver|toolkit|cuda|plugin|metrics; none: the main container (env COMPONENT)");
    cmd->add_option("--with-wait", f->with_wait,
                    "true: retry a failing check every --sleep-interval-seconds (env WITH_WAIT)");
    cmd->add_option(
        "--with-workload", f->with_workload,
        "true: run the CUDA (or plugin) workload pod (env WITH_WORKLOAD, default true)");
    cmd->add_option("--mig-strategy", f->mig_strategy, "none|single|mixed (env MIG_STRATEGY)")
        ->check(CLI::IsMember({"none", "single", "mixed"}));
    cmd->add_option("--driver-install-dir", f->driver_install_dir,
                    "The driver container's root on the host (env DRIVER_INSTALL_DIR, default "
                    "/run/nvidia/driver)");
    cmd->add_option("--require-cuda", f->require_cuda,
                    "CUDA version X.Y the workload must get (env GPUOP_VALIDATOR_REQUIRE_CUDA)");
    cmd->add_flag("--probe", f->probe,
                  "Check the driver once, write nothing, exit 1 with the reason when it fails "
                  "(the main container's readiness probe: a driver lost later unreadies the node)");
    cmd->add_flag("--cleanup", f->cleanup,
                  "Remove the *-ready files and exit (the main container's preStop)");
  }
  cmd->add_option("--sleep-interval-seconds", f->sleep_interval,
                  "Seconds between retries (env SLEEP_INTERVAL_SECONDS, default 5)");
  cmd->add_option(
      "--output-dir", f->output_dir,
      "Where the files go (env OUTPUT_DIR, default <host-root>/run/nvidia/validations)");
  cmd->add_option("--metrics-port", f->metrics_port,
                  "The node-status exporter's port (env METRICS_PORT)");
  cmd->add_option("--node-name", f->node_name, "This node's name (env NODE_NAME)");
  cmd->add_option("--namespace", f->namespace_,
                  "Where the workload pods run (env OPERATOR_NAMESPACE)");
  AddKubeFlags(cmd, &f->kube);
}

}  // namespace

void RegisterValidatorCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<ValidatorFlags>();
  auto* cmd = app.add_subcommand(
      "validator",
      "Node validations (NVIDIA's nvidia-validator): the driver, toolkit, cuda and plugin checks "
      "that write /run/nvidia/validations/*-ready, the main container that holds them, and the "
      "node-status exporter (--component metrics).");
  AddValidatorFlags(cmd, f.get(), true);
  cmd->callback([&g, action, f] { *action = [&g, f] { return RunValidator(g, *f, false); }; });

  auto fe = std::make_shared<ValidatorFlags>();
  auto* exp = app.add_subcommand(
      "node-status-exporter",
      "The node-status exporter: `gpuop validator --component metrics` on port 8000 "
      "(gpu_operator_node_* gauges at /metrics).");
  AddValidatorFlags(exp, fe.get(), false);
  exp->callback([&g, action, fe] { *action = [&g, fe] { return RunValidator(g, *fe, true); }; });
}

}  // namespace gpuop::cli
