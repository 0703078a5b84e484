// `gpuop runtime configure`: adds (or with --revert removes) the CRI runtime
// handler for GPUs to containerd, CRI-O or Docker. The logic lives in
// runtime/configure.h; this file maps flags to a ConfigureRequest and prints
// the report.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "runtime/configure.h"

namespace gpuop::cli {
namespace {

struct RuntimeFlags {
  std::string runtime;
  runtime::ConfigureRequest request;
};

int Configure(const GlobalOptions& g, RuntimeFlags f) {
  f.request.host_root = g.host_root;
  f.request.options.runtime = f.runtime == "crio"     ? runtime::RuntimeKind::kCrio
                              : f.runtime == "docker" ? runtime::RuntimeKind::kDocker
                                                      : runtime::RuntimeKind::kContainerd;
  auto report = runtime::RunConfigure(f.request);
  if (!report.ok()) {
    std::fprintf(stderr, "gpuop runtime configure: %s\n", report.status().message().c_str());
    return kExitFailure;
  }
  if (f.request.dry_run) std::fputs(report->diff.c_str(), stdout);
  for (const std::string& line : report->notes) std::printf("%s\n", line.c_str());
  return kExitOk;
}

}  // namespace

void RegisterRuntimeCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto* rt = app.add_subcommand("runtime", "Configure the container runtime for GPUs");
  rt->require_subcommand(1);
  auto f = std::make_shared<RuntimeFlags>();
  runtime::ConfigureOptions& o = f->request.options;

  auto* cfg = rt->add_subcommand(
      "configure",
      "Add the GPU runtime handler (RuntimeClass handler 'nvidia') to containerd, CRI-O or "
      "Docker through a drop-in; --revert removes exactly what gpuop added");
  cfg->add_option("--runtime", f->runtime, "containerd|crio|docker")
      ->required()
      ->check(CLI::IsMember({"containerd", "crio", "docker"}));
  cfg->add_option("--config", o.config_path,
                  "Main config file on the host (default /etc/containerd/config.toml, "
                  "/etc/crio/crio.conf, /etc/docker/daemon.json)");
  cfg->add_flag("--drop-in,!--no-drop-in", o.drop_in,
                "Write a drop-in (default; containerd conf.d via imports, CRI-O crio.conf.d; "
                "Docker has none and edits daemon.json)");
  cfg->add_option("--runtime-name", o.runtime_name, "Runtime handler name (default nvidia)");
  cfg->add_flag("--set-as-default", o.set_as_default, "Make the handler the default runtime");
  cfg->add_flag("--cdi-enabled", o.cdi_enabled,
                "Enable CDI device injection (containerd enable_cdi, Docker features.cdi)");
  cfg->add_flag("--revert", o.revert, "Remove what gpuop added; leave everything else as it was");
  cfg->add_flag("--dry-run", f->request.dry_run, "Print the diff of every change; write nothing");
  cfg->callback([&g, action, f] { *action = [&g, f] { return Configure(g, *f); }; });
}

}  // namespace gpuop::cli
