// The OCI hooks a CDI spec from `gpuop cdi generate` asks the container
// runtime to run: `gpuop cdi hook create-symlinks` and `gpuop cdi hook
// update-ldcache`, gpuop's own versions of nvidia-cdi-hook's commands.
//
// The runtime runs a createContainer hook in the host's mount namespace after
// the container's root file system is mounted and before the user's process
// starts, with the container state JSON (OCI runtime-spec "State": ociVersion,
// id, status, pid, bundle, annotations) on stdin. The hook reads the bundle's
// config.json for root.path (absolute, or relative to the bundle) and edits
// the container's root file system from outside. That root is untrusted: its
// symlinks may point anywhere, so every path inside it is resolved the way the
// kernel would resolve it inside the container (SecureJoin), never by
// following a link out of the root.
//
// The parsing and path functions are pure (the symlink reader is injected) and
// thread-safe; CreateSymlinks and UpdateLdcache touch the file system and run
// ldconfig, and are meant for one hook process at a time per container.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::toolkit {

// The OCI container state a runtime passes to a hook on stdin.
struct ContainerState {
  std::string oci_version;
  std::string id;
  std::string status;
  int pid = 0;
  std::string bundle;  // absolute path of the bundle directory
  std::map<std::string, std::string> annotations;
};

// Parses the state JSON. `bundle` is required and must be absolute.
Result<ContainerState> ParseContainerState(std::string_view json);

// root.path of a bundle's config.json, as written (absolute or relative).
Result<std::string> ParseConfigRootPath(std::string_view config_json);

// The container's root file system on the host: `root_path` itself when
// absolute, else `bundle`/`root_path`; cleaned lexically.
std::string RootfsPath(const std::string& bundle, const std::string& root_path);

// Lexical clean-up of a path: collapses "//", removes "." and resolves ".."
// against the preceding component; ".." above the start of an absolute path
// stays at "/". "" cleans to ".".
std::string CleanPath(std::string_view path);

// Reads a symlink: the link's target when `host_path` is a symlink, nullopt
// when it is anything else or does not exist.
using ReadlinkFn = std::function<std::optional<std::string>(const std::string& host_path)>;

// Resolves `unsafe_path` inside `root` as if `root` were "/": every symlink
// met on the way (read with `readlink`) is followed with absolute targets
// taken relative to `root`, and ".." never climbs above `root`. Returns a host
// path under `root`; components that do not exist are kept as written. With
// `follow_last` false the last component is not followed (for a path that is
// about to be replaced, like a link being created). Fails after 255 links
// (a loop) with InvalidArgument.
Result<std::string> SecureJoin(const std::string& root, std::string_view unsafe_path,
                               const ReadlinkFn& readlink, bool follow_last = true);

// readlink(2) on the host.
std::optional<std::string> HostReadlink(const std::string& host_path);

// One --link flag: "TARGET::LINK". LINK must be absolute (a path inside the
// container); TARGET is written into the link as given.
struct LinkRequest {
  std::string target;
  std::string link;
};
Result<LinkRequest> ParseLinkFlag(std::string_view flag);

// What CreateSymlinks did for one link.
enum class LinkOutcome { kCreated, kReplaced, kUnchanged };

// Makes each LINK inside `rootfs` a symlink to TARGET, creating missing parent
// directories. Idempotent: a link that already points at TARGET is left
// alone; a symlink pointing elsewhere is replaced atomically. A LINK that
// exists as anything else (a file, a directory) is an error: the image's own
// file is never clobbered. Stops at the first error.
Result<std::vector<LinkOutcome>> CreateSymlinks(const std::string& rootfs,
                                                const std::vector<LinkRequest>& links);

// The name of the ld.so.conf.d drop-in update-ldcache writes.
inline constexpr std::string_view kLdsoConfDropIn = "/etc/ld.so.conf.d/00-nvidia-gpuop.conf";

// The content of that drop-in: one folder per line, after a comment line.
std::string LdsoConfContent(const std::vector<std::string>& folders);

// The ldconfig command line update-ldcache runs: ldconfig -r ROOTFS FOLDER...
// (folders on the command line too, so the cache includes them even when the
// image's /etc/ld.so.conf does not include ld.so.conf.d).
std::vector<std::string> LdconfigArgs(const std::string& ldconfig, const std::string& rootfs,
                                      const std::vector<std::string>& folders);

// The ldconfig to run: `explicit_path` when given (it must exist), else
// /sbin/ldconfig, /usr/sbin/ldconfig. NotFound names what was tried.
Result<std::string> FindLdconfig(const std::string& explicit_path);

// Writes the drop-in inside `rootfs` (atomically, resolving /etc/ld.so.conf.d
// safely) and runs ldconfig -r `rootfs`. Folders must be absolute paths inside
// the container. Fails with ldconfig's own output when it exits non-zero.
Status UpdateLdcache(const std::string& rootfs, const std::vector<std::string>& folders,
                     const std::string& ldconfig);

// Reads the state from `state_json` and the bundle's config.json (or
// `config_override` when not empty) and returns the container's root file
// system on the host. Fails when the root does not exist.
Result<std::string> RootfsFromState(std::string_view state_json,
                                    const std::string& config_override);

// The two hooks end to end, as `gpuop cdi hook ...` runs them: the state JSON
// (read from stdin by the caller), an optional config.json override, and the
// raw flag values. Each fails with one line naming the problem.
Status RunCreateSymlinksHook(std::string_view state_json, const std::string& config_override,
                             const std::vector<std::string>& link_flags);
Status RunUpdateLdcacheHook(std::string_view state_json, const std::string& config_override,
                            const std::vector<std::string>& folders,
                            const std::string& ldconfig_path);

// Everything on file descriptor `fd` (stdin for a hook) until end of file.
Result<std::string> ReadAllFromFd(int fd);

}  // namespace gpuop::toolkit
