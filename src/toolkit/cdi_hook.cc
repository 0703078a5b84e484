#include "toolkit/cdi_hook.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <random>

#include "base/files.h"
#include "base/process.h"
#include "base/strings.h"

namespace gpuop::toolkit {
namespace {

constexpr int kMaxSymlinks = 255;

std::string JoinUnder(const std::string& root, const std::vector<std::string>& parts) {
  std::string out = root == "/" ? "" : root;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

// Splits into components, dropping empty ones and ".".
std::deque<std::string> Components(std::string_view path) {
  std::deque<std::string> out;
  for (std::string& c : Split(path, '/')) {
    if (c != ".") out.push_back(std::move(c));
  }
  return out;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string TempName(const std::string& name) {
  return "." + name + ".gpuop-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::random_device{}() % 1000000);
}

Result<LinkOutcome> CreateOneSymlink(const std::string& rootfs, const LinkRequest& req) {
  std::string link = CleanPath(req.link);
  if (link.empty() || link[0] != '/' || link == "/") {
    return InvalidArgument("link " + req.link + " must be an absolute path inside the container");
  }
  size_t slash = link.rfind('/');
  std::string parent = slash == 0 ? "/" : link.substr(0, slash);
  std::string name = link.substr(slash + 1);
  GPUOP_ASSIGN_OR_RETURN(std::string host_parent, SecureJoin(rootfs, parent, HostReadlink));
  Status made = MakeDirs(host_parent);
  if (!made.ok()) return made.Annotate("creating the directory of link " + link);
  Fd dir(::open(host_parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) {
    return Internal("opening " + host_parent + " (the directory of link " + link +
                    "): " + ErrnoText(errno));
  }
  struct stat st {};
  if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return Internal("stat " + link + ": " + ErrnoText(errno));
    if (::symlinkat(req.target.c_str(), dir.get(), name.c_str()) != 0) {
      return Internal("creating link " + link + " -> " + req.target + ": " + ErrnoText(errno));
    }
    return LinkOutcome::kCreated;
  }
  if (!S_ISLNK(st.st_mode)) {
    return FailedPrecondition(link +
                              " exists in the container and is not a symlink; "
                              "refusing to replace it with a link to " +
                              req.target);
  }
  char buf[4096];
  ssize_t n = ::readlinkat(dir.get(), name.c_str(), buf, sizeof(buf));
  if (n >= 0 && std::string_view(buf, static_cast<size_t>(n)) == req.target) {
    return LinkOutcome::kUnchanged;
  }
  std::string tmp = TempName(name);
  if (::symlinkat(req.target.c_str(), dir.get(), tmp.c_str()) != 0) {
    return Internal("creating link " + link + " -> " + req.target + ": " + ErrnoText(errno));
  }
  if (::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
    int err = errno;
    ::unlinkat(dir.get(), tmp.c_str(), 0);
    return Internal("replacing link " + link + ": " + ErrnoText(err));
  }
  return LinkOutcome::kReplaced;
}

}  // namespace

Result<ContainerState> ParseContainerState(std::string_view json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("the container state on stdin is not JSON: ") + e.what());
  }
  if (!j.is_object()) return InvalidArgument("the container state on stdin is not a JSON object");
  ContainerState s;
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::Ok();
    if (!it->is_string()) {
      return InvalidArgument(std::string("container state: \"") + key + "\" is not a string");
    }
    *out = it->get<std::string>();
    return Status::Ok();
  };
  GPUOP_RETURN_IF_ERROR(str("ociVersion", &s.oci_version));
  GPUOP_RETURN_IF_ERROR(str("id", &s.id));
  GPUOP_RETURN_IF_ERROR(str("status", &s.status));
  GPUOP_RETURN_IF_ERROR(str("bundle", &s.bundle));
  if (auto it = j.find("pid"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer())
      return InvalidArgument("container state: \"pid\" is not a number");
    s.pid = it->get<int>();
  }
  if (auto it = j.find("annotations"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return InvalidArgument("container state: \"annotations\" is not an object");
    }
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) {
        return InvalidArgument("container state: annotation \"" + k + "\" is not a string");
      }
      s.annotations[k] = v.get<std::string>();
    }
  }
  if (s.bundle.empty()) {
    return InvalidArgument(
        "the container state on stdin has no \"bundle\"; is this run as an "
        "OCI hook?");
  }
  if (s.bundle[0] != '/') {
    return InvalidArgument("the container state's bundle \"" + s.bundle + "\" is not absolute");
  }
  return s;
}

Result<std::string> ParseConfigRootPath(std::string_view config_json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("config.json is not JSON: ") + e.what());
  }
  auto root = j.is_object() ? j.find("root") : j.end();
  if (!j.is_object() || root == j.end() || !root->is_object()) {
    return InvalidArgument("config.json has no \"root\" object");
  }
  auto path = root->find("path");
  if (path == root->end() || !path->is_string() || path->get<std::string>().empty()) {
    return InvalidArgument("config.json has no root.path");
  }
  return path->get<std::string>();
}

std::string RootfsPath(const std::string& bundle, const std::string& root_path) {
  if (!root_path.empty() && root_path[0] == '/') return CleanPath(root_path);
  return CleanPath(bundle + "/" + root_path);
}

std::string CleanPath(std::string_view path) {
  if (path.empty()) return ".";
  bool absolute = path[0] == '/';
  std::vector<std::string> out;
  for (std::string& c : Components(path)) {
    if (c == "..") {
      if (!out.empty() && out.back() != "..") {
        out.pop_back();
      } else if (!absolute) {
        out.push_back("..");
      }
      continue;
    }
    out.push_back(std::move(c));
  }
  std::string joined = Join(out, "/");
  if (absolute) return "/" + joined;
  return joined.empty() ? "." : joined;
}

Result<std::string> SecureJoin(const std::string& root, std::string_view unsafe_path,
                               const ReadlinkFn& readlink, bool follow_last) {
  const std::string clean_root = CleanPath(root);
  std::deque<std::string> remaining = Components(unsafe_path);
  std::vector<std::string> resolved;
  int links = 0;
  while (!remaining.empty()) {
    std::string comp = std::move(remaining.front());
    remaining.pop_front();
    if (comp == "..") {
      if (!resolved.empty()) resolved.pop_back();
      continue;
    }
    resolved.push_back(comp);
    if (!follow_last && remaining.empty()) break;
    std::optional<std::string> target = readlink(JoinUnder(clean_root, resolved));
    if (!target) continue;
    resolved.pop_back();
    if (++links > kMaxSymlinks) {
      return InvalidArgument("too many levels of symbolic links resolving " +
                             std::string(unsafe_path) + " inside " + clean_root);
    }
    if (!target->empty() && (*target)[0] == '/') resolved.clear();
    std::deque<std::string> t = Components(*target);
    remaining.insert(remaining.begin(), t.begin(), t.end());
  }
  return JoinUnder(clean_root, resolved);
}

std::optional<std::string> HostReadlink(const std::string& host_path) {
  char buf[4096];
  ssize_t n = ::readlink(host_path.c_str(), buf, sizeof(buf));
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

Result<LinkRequest> ParseLinkFlag(std::string_view flag) {
  size_t sep = flag.find("::");
  if (sep == std::string_view::npos) {
    return InvalidArgument("--link \"" + std::string(flag) + "\" is not TARGET::LINK");
  }
  LinkRequest r{std::string(flag.substr(0, sep)), std::string(flag.substr(sep + 2))};
  if (r.target.empty() || r.link.empty()) {
    return InvalidArgument("--link \"" + std::string(flag) + "\" has an empty TARGET or LINK");
  }
  if (r.link[0] != '/') {
    return InvalidArgument("--link \"" + std::string(flag) +
                           "\": LINK must be an absolute path inside the container");
  }
  if (r.link.find("::") != std::string::npos) {
    return InvalidArgument("--link \"" + std::string(flag) + "\" has more than one \"::\"");
  }
  return r;
}

Result<std::vector<LinkOutcome>> CreateSymlinks(const std::string& rootfs,
                                                const std::vector<LinkRequest>& links) {
  std::vector<LinkOutcome> out;
  for (const LinkRequest& req : links) {
    GPUOP_ASSIGN_OR_RETURN(LinkOutcome o, CreateOneSymlink(rootfs, req));
    out.push_back(o);
  }
  return out;
}

std::string LdsoConfContent(const std::vector<std::string>& folders) {
  std::string s = "# Written by `gpuop cdi hook update-ldcache`: the NVIDIA driver libraries.\n";
  for (const std::string& f : folders) s += f + "\n";
  return s;
}

std::vector<std::string> LdconfigArgs(const std::string& ldconfig, const std::string& rootfs,
                                      const std::vector<std::string>& folders) {
  std::vector<std::string> args{ldconfig, "-r", rootfs};
  args.insert(args.end(), folders.begin(), folders.end());
  return args;
}

Result<std::string> FindLdconfig(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (::access(explicit_path.c_str(), X_OK) != 0) {
      return NotFound("--ldconfig-path " + explicit_path + " is not an executable file");
    }
    return explicit_path;
  }
  for (const char* p : {"/sbin/ldconfig", "/usr/sbin/ldconfig"}) {
    if (::access(p, X_OK) == 0) return std::string(p);
  }
  return NotFound("no ldconfig at /sbin/ldconfig or /usr/sbin/ldconfig; pass --ldconfig-path");
}

Status UpdateLdcache(const std::string& rootfs, const std::vector<std::string>& folders,
                     const std::string& ldconfig) {
  for (const std::string& f : folders) {
    if (f.empty() || f[0] != '/') {
      return InvalidArgument("--folder " + f + " must be an absolute path inside the container");
    }
  }
  const std::string conf_dir(kLdsoConfDropIn.substr(0, kLdsoConfDropIn.rfind('/')));
  GPUOP_ASSIGN_OR_RETURN(std::string host_dir, SecureJoin(rootfs, conf_dir, HostReadlink));
  GPUOP_RETURN_IF_ERROR(MakeDirs(host_dir));
  const std::string conf_name(kLdsoConfDropIn.substr(kLdsoConfDropIn.rfind('/')));
  GPUOP_RETURN_IF_ERROR(WriteFileAtomic(host_dir + conf_name, LdsoConfContent(folders)));
  GPUOP_ASSIGN_OR_RETURN(CommandResult r, RunCommand(LdconfigArgs(ldconfig, rootfs, folders)));
  if (r.status != 0) {
    std::string out(Trim(r.output));
    for (char& c : out) {
      if (c == '\n') c = ' ';
    }
    return Internal(ldconfig + " -r " + rootfs + " exited with " + std::to_string(r.status) +
                    (out.empty() ? "" : ": " + out));
  }
  return Status::Ok();
}

Result<std::string> RootfsFromState(std::string_view state_json,
                                    const std::string& config_override) {
  GPUOP_ASSIGN_OR_RETURN(ContainerState state, ParseContainerState(state_json));
  const std::string config =
      config_override.empty() ? state.bundle + "/config.json" : config_override;
  auto text = ReadFile(config);
  if (!text.ok()) return text.status().Annotate("reading the container's OCI spec");
  auto root_path = ParseConfigRootPath(*text);
  if (!root_path.ok()) return root_path.status().Annotate(config);
  std::string rootfs = RootfsPath(state.bundle, *root_path);
  struct stat st {};
  if (::stat(rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFound("the container's root file system " + rootfs + " (root.path in " + config +
                    ") is not a directory");
  }
  return rootfs;
}

Status RunCreateSymlinksHook(std::string_view state_json, const std::string& config_override,
                             const std::vector<std::string>& link_flags) {
  if (link_flags.empty()) return InvalidArgument("no --link given");
  std::vector<LinkRequest> links;
  for (const std::string& f : link_flags) {
    GPUOP_ASSIGN_OR_RETURN(LinkRequest r, ParseLinkFlag(f));
    links.push_back(std::move(r));
  }
  GPUOP_ASSIGN_OR_RETURN(std::string rootfs, RootfsFromState(state_json, config_override));
  auto done = CreateSymlinks(rootfs, links);
  return done.ok() ? Status::Ok() : done.status();
}

Status RunUpdateLdcacheHook(std::string_view state_json, const std::string& config_override,
                            const std::vector<std::string>& folders,
                            const std::string& ldconfig_path) {
  if (folders.empty()) return InvalidArgument("no --folder given");
  GPUOP_ASSIGN_OR_RETURN(std::string ldconfig, FindLdconfig(ldconfig_path));
  GPUOP_ASSIGN_OR_RETURN(std::string rootfs, RootfsFromState(state_json, config_override));
  return UpdateLdcache(rootfs, folders, ldconfig);
}

Result<std::string> ReadAllFromFd(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal("reading the container state from stdin: " + ErrnoText(errno));
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace gpuop::toolkit
