// The I/O half of the host root: creates a plan's entries and runs ldconfig.
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "sim/host/elf_stub.h"
#include "sim/host/host_root.h"

extern char** environ;

namespace gpuop::sim {
namespace {

constexpr char kManifestName[] = ".gpuop-host-root";

std::string Errno(int err) { return std::strerror(err); }

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

class Writer {
 public:
  explicit Writer(std::string root) : root_(std::move(root)) {}

  Status Create(const HostEntry& e) {
    switch (e.type) {
      case HostEntryType::kDirectory:
        GPUOP_RETURN_IF_ERROR(EnsureDirs(e.path));
        return Chmod(e.path, e.mode);
      case HostEntryType::kFile:
        GPUOP_RETURN_IF_ERROR(EnsureDirs(Parent(e.path)));
        return WriteRegular(e.path, e.content, e.mode);
      case HostEntryType::kCopy: {
        GPUOP_RETURN_IF_ERROR(EnsureDirs(Parent(e.path)));
        auto bytes = ReadFile(e.content);
        if (!bytes.ok()) {
          return bytes.status().Annotate("copying " + e.content + " to " + e.path +
                                         " in the host root");
        }
        return WriteRegular(e.path, *bytes, e.mode);
      }
      case HostEntryType::kCharDevice:
        GPUOP_RETURN_IF_ERROR(EnsureDirs(Parent(e.path)));
        return CharDevice(e);
      case HostEntryType::kSymlink:
        GPUOP_RETURN_IF_ERROR(EnsureDirs(Parent(e.path)));
        return Symlink(e.path, e.content);
      case HostEntryType::kSocket:
        GPUOP_RETURN_IF_ERROR(EnsureDirs(Parent(e.path)));
        return Socket(e.path, e.mode);
    }
    return Internal("unknown host entry type for " + e.path);
  }

  bool device_nodes_are_files() const { return mknod_denied_; }

  // Removes what an earlier run created (listed in its manifest) that this
  // plan no longer has, e.g. the GPUs of another machine, then the
  // directories that leaves empty. Only paths reached without symlinks.
  Status Prune(const std::vector<std::string>& old_paths, const HostRootPlan& plan) {
    std::set<std::string> keep;
    for (const HostEntry& e : plan.entries) {
      for (std::string p = e.path; p != "/"; p = Parent(p)) keep.insert(p);
    }
    for (const std::string& path : old_paths) {
      if (!StartsWith(path, "/") || path.find("/..") != std::string::npos ||
          keep.count(path) != 0 || !ParentsAreDirectories(path)) {
        continue;
      }
      std::string full = Full(path);
      struct stat st {};
      if (::lstat(full.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
      if (::unlink(full.c_str()) != 0)
        return Internal("cannot remove " + full + ": " + Errno(errno));
      for (std::string dir = Parent(path); dir != "/" && keep.count(dir) == 0; dir = Parent(dir)) {
        if (::rmdir(Full(dir).c_str()) != 0) break;  // not empty: something else lives there
      }
    }
    return Status::Ok();
  }

 private:
  std::string Full(const std::string& path) const { return JoinRoot(root_, path); }

  bool ParentsAreDirectories(const std::string& path) const {
    for (std::string dir = Parent(path); dir != "/"; dir = Parent(dir)) {
      struct stat st {};
      if (::lstat(Full(dir).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    }
    return true;
  }

  // mkdir -p inside the root that refuses to follow a symlink: an entry of an
  // earlier tree pointing at the real /dev must never send mknod there.
  Status EnsureDirs(const std::string& path) {
    std::string prefix;
    for (const std::string& part : Split(path, '/')) {
      prefix += "/" + part;
      if (verified_.count(prefix) != 0) continue;
      std::string full = Full(prefix);
      struct stat st {};
      if (::lstat(full.c_str(), &st) != 0) {
        if (errno != ENOENT) return Internal("cannot stat " + full + ": " + Errno(errno));
        if (::mkdir(full.c_str(), 0755) != 0 && errno != EEXIST) {
          return Internal("cannot create directory " + full + ": " + Errno(errno));
        }
      } else if (S_ISLNK(st.st_mode)) {
        return FailedPrecondition(full +
                                  " is a symbolic link; a host root is created without "
                                  "following links (remove it, or use an empty directory)");
      } else if (!S_ISDIR(st.st_mode)) {
        return FailedPrecondition(full +
                                  " exists and is not a directory; remove it, or use "
                                  "an empty directory");
      }
      verified_.insert(prefix);
    }
    return Status::Ok();
  }

  Status Chmod(const std::string& path, mode_t mode) {
    std::string full = Full(path);
    if (::chmod(full.c_str(), mode) != 0) {
      return Internal("chmod " + full + ": " + Errno(errno));
    }
    return Status::Ok();
  }

  // Removes a leftover of another type so the entry can be created; refuses
  // to remove a directory (that would need a recursive delete of user data).
  Status RemoveNonDirectory(const std::string& full, const struct stat& st) {
    if (S_ISDIR(st.st_mode)) {
      return FailedPrecondition(full +
                                " is a directory where the host root needs a file; "
                                "remove it, or use an empty directory");
    }
    if (::unlink(full.c_str()) != 0) return Internal("cannot remove " + full + ": " + Errno(errno));
    return Status::Ok();
  }

  Status WriteRegular(const std::string& path, std::string_view content, mode_t mode) {
    std::string full = Full(path);
    struct stat st {};
    if (::lstat(full.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode)) {
        auto old = ReadFile(full);
        if (old.ok() && *old == content) {
          return (st.st_mode & 07777) == mode ? Status::Ok() : Chmod(path, mode);
        }
      } else {
        GPUOP_RETURN_IF_ERROR(RemoveNonDirectory(full, st));
      }
    }
    return WriteFileAtomic(full, content, mode);
  }

  Status CharDevice(const HostEntry& e) {
    std::string full = Full(e.path);
    const dev_t want = makedev(e.major, e.minor);
    struct stat st {};
    bool exists = ::lstat(full.c_str(), &st) == 0;
    bool done = exists && S_ISCHR(st.st_mode) && st.st_rdev == want;
    if (!done && exists && mknod_denied_ && S_ISREG(st.st_mode) && st.st_size == 0) {
      done = true;  // the stand-in of an earlier unprivileged run
    }
    if (!done) {
      if (exists) GPUOP_RETURN_IF_ERROR(RemoveNonDirectory(full, st));
      if (!mknod_denied_ && ::mknod(full.c_str(), S_IFCHR | e.mode, want) != 0) {
        if (errno != EPERM && errno != EACCES) {
          return Internal("mknod " + full + ": " + Errno(errno));
        }
        mknod_denied_ = true;
        LogWarn(
            "mknod is not permitted (not root, or no CAP_MKNOD): device nodes of the "
            "simulated host root are empty regular files",
            {{"root", root_}});
      }
      if (mknod_denied_) GPUOP_RETURN_IF_ERROR(WriteFileAtomic(full, "", e.mode));
    }
    GPUOP_RETURN_IF_ERROR(Chmod(e.path, e.mode));  // mknod's mode passes through the umask
    if (e.gid != 0 && ::geteuid() == 0 && ::lchown(full.c_str(), 0, e.gid) != 0) {
      return Internal("chown " + full + ": " + Errno(errno));
    }
    return Status::Ok();
  }

  Status Symlink(const std::string& path, const std::string& target) {
    std::string full = Full(path);
    struct stat st {};
    if (::lstat(full.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) {
        char buf[PATH_MAX];
        ssize_t n = ::readlink(full.c_str(), buf, sizeof(buf));
        if (n >= 0 && std::string_view(buf, static_cast<size_t>(n)) == target) {
          return Status::Ok();
        }
      }
      GPUOP_RETURN_IF_ERROR(RemoveNonDirectory(full, st));
    }
    if (::symlink(target.c_str(), full.c_str()) != 0) {
      return Internal("symlink " + full + " -> " + target + ": " + Errno(errno));
    }
    return Status::Ok();
  }

  // A UNIX socket inode, as a daemon leaves it: bound, and no longer listening.
  Status Socket(const std::string& path, mode_t mode) {
    std::string full = Full(path);
    struct stat st {};
    if (::lstat(full.c_str(), &st) == 0) {
      if (S_ISSOCK(st.st_mode)) return Chmod(path, mode);
      GPUOP_RETURN_IF_ERROR(RemoveNonDirectory(full, st));
    }
    // sun_path holds 108 bytes; a deep root goes through /proc/self/fd/<dir>.
    int dirfd = -1;
    std::string bind_path = full;
    sockaddr_un addr{};
    if (full.size() >= sizeof(addr.sun_path)) {
      dirfd = ::open(Full(Parent(path)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dirfd < 0) return Internal("opening " + Full(Parent(path)) + ": " + Errno(errno));
      bind_path = "/proc/self/fd/" + std::to_string(dirfd) + "/" + BaseName(path);
    }
    Status s;
    if (bind_path.size() >= sizeof(addr.sun_path)) {
      s = InvalidArgument("socket name " + BaseName(path) + " is too long");
    } else {
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, bind_path.c_str(), bind_path.size() + 1);
      int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        s = Internal("socket(AF_UNIX): " + Errno(errno));
      } else {
        if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
            ::listen(fd, 1) != 0) {
          s = Internal("binding a UNIX socket at " + full + ": " + Errno(errno));
        }
        ::close(fd);
      }
    }
    if (dirfd >= 0) ::close(dirfd);
    GPUOP_RETURN_IF_ERROR(s);
    return Chmod(path, mode);
  }

  std::string root_;
  std::set<std::string> verified_;
  bool mknod_denied_ = false;
};

Result<std::string> FindLdconfig(const std::string& chosen) {
  if (!chosen.empty()) {
    if (::access(chosen.c_str(), X_OK) != 0) {
      return NotFound("ldconfig " + chosen + " is not an executable file");
    }
    return chosen;
  }
  std::vector<std::string> dirs = {"/sbin", "/usr/sbin"};
  if (const char* path = std::getenv("PATH")) {
    for (std::string& d : Split(path, ':')) dirs.push_back(std::move(d));
  }
  for (const std::string& d : dirs) {
    std::string candidate = d + "/ldconfig";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFound(
      "ldconfig was not found in /sbin, /usr/sbin or $PATH; a simulated host root needs the "
      "real ldconfig to build etc/ld.so.cache (install libc-bin)");
}

// Runs argv, returning its exit status and what it wrote to stdout and stderr.
Result<std::pair<int, std::string>> RunCaptured(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Internal("pipe: " + Errno(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return Internal("cannot run " + argv[0] + ": " + Errno(rc));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Internal("waitpid " + argv[0] + ": " + Errno(errno));
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return std::make_pair(code, out);
}

}  // namespace

Result<std::string> PrepareHostRootDir(const std::string& dir) {
  if (Trim(dir).empty()) {
    return InvalidArgument("the host root directory is empty; name a directory to create it in");
  }
  auto refuse = [&] {
    return InvalidArgument("refusing to lay out a simulated host root in \"" + dir +
                           "\": that is the real root file system; name another directory");
  };
  if (dir.find_first_not_of('/') == std::string::npos) return refuse();
  GPUOP_RETURN_IF_ERROR(MakeDirs(dir));
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) {
    return Internal("cannot resolve " + dir + ": " + Errno(errno));
  }
  if (std::string_view(resolved) == "/") return refuse();
  return std::string(resolved);
}

Result<HostRootResult> WriteHostRoot(const std::string& dir, const HostRootPlan& plan,
                                     const WriteHostRootOptions& options) {
  // Check what the tree needs from this machine first, so a failure changes nothing.
  GPUOP_ASSIGN_OR_RETURN(std::string ldconfig, FindLdconfig(options.ldconfig));
  for (const HostEntry& e : plan.entries) {
    if (e.type != HostEntryType::kCopy) continue;
    if (::access(e.content.c_str(), R_OK) != 0) {
      return NotFound("cannot read " + e.content + " (to install as " + e.path +
                      "): " + Errno(errno));
    }
    if (e.soname.empty()) continue;
    // A library copied in must answer to its soname, or ldconfig skips it.
    GPUOP_ASSIGN_OR_RETURN(std::string bytes, ReadFile(e.content));
    auto elf = ReadElfSharedObject(bytes);
    if (!elf.ok() || elf->soname != e.soname) {
      return InvalidArgument(e.content + " is not a shared library with soname " + e.soname +
                             (elf.ok() ? " (its soname is \"" + elf->soname + "\")"
                                       : " (" + elf.status().message() + ")") +
                             "; it cannot be installed as " + e.path);
    }
  }
  GPUOP_ASSIGN_OR_RETURN(std::string root, PrepareHostRootDir(dir));
  Writer writer(root);
  for (const HostEntry& e : plan.entries) {
    GPUOP_RETURN_IF_ERROR(writer.Create(e));
  }
  // The manifest lists what this run made, so the next run can drop what its
  // plan no longer has instead of leaving a stale GPU behind.
  const std::string manifest = root + "/" + kManifestName;
  std::string listing;
  for (const HostEntry& e : plan.entries) {
    if (e.type != HostEntryType::kDirectory) listing += e.path + "\n";
  }
  auto old = ReadFile(manifest);
  if (old.ok()) GPUOP_RETURN_IF_ERROR(writer.Prune(Split(*old, '\n'), plan));
  if (!old.ok() || *old != listing) {
    GPUOP_RETURN_IF_ERROR(WriteFileAtomic(manifest, listing, 0644));
  }
  GPUOP_ASSIGN_OR_RETURN(auto run, RunCaptured({ldconfig, "-r", root}));
  if (run.first != 0) {
    std::string msg = std::string(Trim(run.second));
    return Internal("ldconfig -r " + root + " failed (exit " + std::to_string(run.first) +
                    "): " + (msg.empty() ? "no output" : msg));
  }
  HostRootResult result;
  result.root = root;
  result.gpus = plan.gpus;
  result.device_nodes = plan.CountDeviceNodes();
  result.libraries = plan.CountLibraries();
  result.device_nodes_are_files = writer.device_nodes_are_files();
  result.ld_cache = root + "/etc/ld.so.cache";
  if (!PathExists(result.ld_cache)) {
    return Internal("ldconfig -r " + root + " succeeded but wrote no " + result.ld_cache);
  }
  return result;
}

namespace {

std::string SimLibraryBesideExecutable(const char* file) {
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  std::string path(exe, static_cast<size_t>(n));
  std::string candidate = Parent(path) + "/../lib/" + file;
  char resolved[PATH_MAX];
  if (::realpath(candidate.c_str(), resolved) == nullptr) return "";
  return resolved;
}

}  // namespace

std::string NvmlSimBesideExecutable() { return SimLibraryBesideExecutable("libnvml-sim.so"); }

std::string CudaSimBesideExecutable() { return SimLibraryBesideExecutable("libcuda-sim.so"); }

std::string NvidiaSmiSimBesideExecutable() { return SimLibraryBesideExecutable("nvidia-smi-sim"); }

}  // namespace gpuop::sim
