// `gpuop cdi hook create-symlinks|update-ldcache`: the OCI createContainer
// hooks a gpuop CDI spec names. The container runtime runs them with the
// container state JSON on stdin; the work is in toolkit/cdi_hook.h.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "toolkit/cdi_hook.h"

namespace gpuop::cli {
namespace {

struct HookFlags {
  std::vector<std::string> links;
  std::vector<std::string> folders;
  std::string ldconfig_path;
  std::string container_spec;
};

int RunHook(const char* name, const HookFlags& f) {
  auto state = toolkit::ReadAllFromFd(STDIN_FILENO);
  Status s = state.status();
  if (s.ok()) {
    s = std::string_view(name) == "create-symlinks"
            ? toolkit::RunCreateSymlinksHook(*state, f.container_spec, f.links)
            : toolkit::RunUpdateLdcacheHook(*state, f.container_spec, f.folders, f.ldconfig_path);
  }
  if (!s.ok()) std::fprintf(stderr, "gpuop cdi hook %s: %s\n", name, s.message().c_str());
  // The runtime runs a hook with an empty environment and another PID
  // namespace's /proc: exit at once, without the process's exit handlers (a
  // sanitizer build's leak check cannot stop the world there and would fail
  // the container's creation).
  std::fflush(nullptr);
  std::_Exit(s.ok() ? kExitOk : kExitFailure);
}

}  // namespace

void RegisterCdiHookCommand(CLI::App& cdi, const GlobalOptions&, Action* action) {
  auto* hook = cdi.add_subcommand(
      "hook", "OCI hooks run by the container runtime (container state JSON on stdin)");
  hook->require_subcommand(1);
  auto flags = std::make_shared<HookFlags>();

  auto* links = hook->add_subcommand("create-symlinks",
                                     "Create symlinks inside the container's root file system");
  links->add_option("--link", flags->links, "TARGET::LINK; LINK is a path inside the container")
      ->required();
  links->add_option("--container-spec", flags->container_spec,
                    "The container's config.json (default: <bundle>/config.json)");
  links->callback(
      [action, flags] { *action = [flags] { return RunHook("create-symlinks", *flags); }; });

  auto* ldcache = hook->add_subcommand(
      "update-ldcache", "Add folders to the container's ld.so.conf.d and rebuild its ld.so.cache");
  ldcache->add_option("--folder", flags->folders, "A library folder inside the container")
      ->required();
  ldcache->add_option("--ldconfig-path", flags->ldconfig_path,
                      "The host's ldconfig (default /sbin/ldconfig, then /usr/sbin/ldconfig)");
  ldcache->add_option("--container-spec", flags->container_spec,
                      "The container's config.json (default: <bundle>/config.json)");
  ldcache->callback(
      [action, flags] { *action = [flags] { return RunHook("update-ldcache", *flags); }; });
}

}  // namespace gpuop::cli
