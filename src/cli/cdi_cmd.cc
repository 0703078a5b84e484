// `gpuop cdi generate`: write the CDI spec for this host's GPUs (nvidia-ctk cdi
// generate's flags). `gpuop cdi list` and `gpuop cdi hook` are registered here
// and live in their own files. The work is toolkit::GenerateCdiSpec; this file
// only wires flags to it and writes the result.
#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <memory>
#include <string>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "host/driver_files.h"
#include "nvml/client.h"
#include "toolkit/cdi_generate.h"
#include "toolkit/cdi_spec.h"

namespace gpuop::cli {
namespace {

// Where gpuop is installed on the host by the toolkit DaemonSet.

struct GenerateFlags {
  std::string driver_root = "/";
  std::string dev_root;
  std::string output;
  std::string format;
  std::string strategies = "index,uuid";
  std::string vendor = "nvidia.com";
  std::string device_class = "gpu";
  std::string hook_path;
  bool no_all_device = false;
  bool additional_gids = false;
};

int Generate(const GlobalOptions& g, const GenerateFlags& f) {
  toolkit::CdiGenerateOptions opt;
  opt.host_root = g.host_root;
  opt.driver_root = f.driver_root;
  opt.dev_root = f.dev_root;
  opt.vendor = f.vendor;
  opt.device_class = f.device_class;
  opt.no_all_device = f.no_all_device;
  opt.additional_gids = f.additional_gids;
  auto strategies = toolkit::ParseDeviceNameStrategies(f.strategies);
  if (!strategies.ok()) return Fail("cdi generate", strategies.status());
  opt.name_strategies = std::move(*strategies);
  opt.hook_path = f.hook_path;
  if (opt.hook_path.empty()) {
    opt.hook_path = DefaultCdiHookPath(g);
    if (opt.hook_path.empty()) {
      return Fail("cdi generate",
                  InvalidArgument("cannot find this executable's path; pass --hook-path"));
    }
  }
  std::string format = f.format;
  if (format.empty()) format = EndsWith(ToLower(f.output), ".json") ? "json" : "yaml";

  auto client = nvml::Client::Open(NvmlLibraryPath(g));
  if (!client.ok()) return Fail("cdi generate", client.status());
  auto spec = toolkit::GenerateCdiSpec(**client, opt);
  if (!spec.ok()) return Fail("cdi generate", spec.status());
  const std::string text =
      format == "json" ? toolkit::cdi::ToJson(*spec) : toolkit::cdi::ToYaml(*spec);

  if (f.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
  }
  // A host path, under --host-root like every path gpuop reads or writes for
  // a node (cdi list, the toolkit and runtime configure see it there).
  const std::string output = JoinRoot(g.host_root, f.output);
  Status s = MakeDirs(DirName(output));
  if (s.ok()) s = WriteFileAtomic(output, text, 0644);
  if (!s.ok()) return Fail("cdi generate", s);
  LogInfo("wrote CDI spec", {{"path", output},
                             {"kind", spec->kind},
                             {"cdi_version", spec->cdi_version},
                             {"devices", spec->devices.size()}});
  return kExitOk;
}

}  // namespace

void RegisterCdiCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto* cdi = app.add_subcommand("cdi", "Container Device Interface: generate, list, hooks");
  cdi->require_subcommand(1);

  auto f = std::make_shared<GenerateFlags>();
  auto* gen = cdi->add_subcommand("generate", "Print or write the CDI spec for this host's GPUs");
  gen->add_option("--driver-root", f->driver_root,
                  "Root of the NVIDIA driver installation, as the host sees it")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str();
  gen->add_option("--dev-root", f->dev_root,
                  "Root holding the /dev device nodes, as the host sees it (default: driver root)");
  gen->add_option("--output", f->output,
                  "File to write atomically, a host path under --host-root (default: stdout)");
  gen->add_option("--format", f->format,
                  "yaml|json (default: from --output's extension, else yaml)")
      ->check(CLI::IsMember({"yaml", "json"}));
  gen->add_option("--device-name-strategy", f->strategies,
                  "Comma-separated device names to emit: index, uuid, type-index")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) {
            auto r = toolkit::ParseDeviceNameStrategies(v);
            return r.ok() ? std::string() : r.status().message();
          },
          "index,uuid,type-index"));
  gen->add_option("--vendor", f->vendor, "CDI vendor")->capture_default_str();
  gen->add_option("--class", f->device_class, "CDI device class")->capture_default_str();
  gen->add_option("--hook-path", f->hook_path,
                  "gpuop's path on the host, run by the spec's hooks (default: " +
                      std::string(kToolkitHookPath) + " with --host-root, else this executable)");
  gen->add_flag("--no-all-device", f->no_all_device, "Do not emit the \"all\" device");
  gen->add_flag("--additional-gids", f->additional_gids,
                "Add the group of nodes that are not world read/write to additionalGids "
                "(needs cdiVersion 0.7.0: podman 4.3 and containerd 1.7 cannot read it)");
  gen->callback([&g, action, f] { *action = [&g, f] { return Generate(g, *f); }; });

  RegisterCdiListCommand(*cdi, g, action);
  RegisterCdiHookCommand(*cdi, g, action);
}

}  // namespace gpuop::cli
