// `gpuop cdi list`: the fully-qualified CDI device names in the spec
// directories, one per line, like `nvidia-ctk cdi list`. Broken specs are
// reported on stderr (file: reason) and make the exit code 1; the work is in
// toolkit/cdi_list.h.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "toolkit/cdi_list.h"

namespace gpuop::cli {
namespace {

int List(const GlobalOptions& g, std::vector<std::string> dirs) {
  if (dirs.empty()) {
    dirs = {JoinRoot(g.host_root, toolkit::kCdiStaticDir),
            JoinRoot(g.host_root, toolkit::kCdiDynamicDir)};
  }
  toolkit::CdiListing listing = toolkit::ListCdiDevices(toolkit::ReadCdiSpecDirs(dirs));
  for (const std::string& d : listing.devices) std::printf("%s\n", d.c_str());
  if (listing.devices.empty() && listing.problems.empty()) {
    // Said on stderr: stdout stays the (empty) list for scripts.
    std::fprintf(stderr,
                 "gpuop cdi list: no CDI devices in %s; write a spec with `gpuop cdi generate` "
                 "(or let the toolkit write one)\n",
                 Join(dirs, ", ").c_str());
  }
  for (const auto& p : listing.problems) {
    std::fprintf(stderr, "gpuop cdi list: broken CDI spec %s: %s\n", p.path.c_str(),
                 p.reason.c_str());
  }
  return listing.ok() ? kExitOk : kExitFailure;
}

}  // namespace

void RegisterCdiListCommand(CLI::App& cdi, const GlobalOptions& g, Action* action) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto* list = cdi.add_subcommand(
      "list", "List the CDI device names (vendor/class=name) found in the spec directories");
  list->add_option("--spec-dir", *dirs,
                   "A spec directory, lowest priority first (default /etc/cdi and /var/run/cdi "
                   "under --host-root)");
  list->callback([&g, action, dirs] { *action = [&g, dirs] { return List(g, *dirs); }; });
}

}  // namespace gpuop::cli
