#include "runtime/configure.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <set>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "runtime/containerd.h"
#include "runtime/crio.h"
#include "runtime/docker.h"

namespace gpuop::runtime {
namespace {


Result<std::optional<std::string>> ReadOptional(const std::string& root, const std::string& path) {
  auto r = ReadFile(JoinRoot(root, path));
  if (r.ok()) return std::optional<std::string>(std::move(*r));
  if (r.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
  return r.status();
}

std::string FindRunc(const std::string& root) {
  for (const char* p :
       {"/usr/bin/runc", "/usr/sbin/runc", "/usr/local/bin/runc", "/usr/local/sbin/runc"}) {
    if (PathExists(JoinRoot(root, p))) return p;
  }
  return "";
}

// containerd 2.x is built from module github.com/containerd/containerd/v2,
// whose path the Go build info in the binary names. 0 when no binary is found.
int InstalledContainerdMajor(const std::string& root) {
  static constexpr std::string_view kV2Module = "github.com/containerd/containerd/v2";
  for (const char* p :
       {"/usr/bin/containerd", "/usr/local/bin/containerd", "/usr/sbin/containerd"}) {
    int fd = ::open(JoinRoot(root, p).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string window;
    char buf[1 << 16];
    bool v2 = false;
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      window.append(buf, static_cast<size_t>(n));
      if (window.find(kV2Module) != std::string::npos) {
        v2 = true;
        break;
      }
      window.erase(0, window.size() - std::min(window.size(), kV2Module.size()));
    }
    ::close(fd);
    return v2 ? 2 : 1;
  }
  return 0;
}

// The files containerd loads through imports, in its order (breadth first,
// globs sorted), as host paths; the drop-in itself is left out.
Result<std::vector<ImportedFile>> ReadImports(const std::string& root, const std::string& config,
                                              const std::string& text, const std::string& drop_in) {
  std::vector<ImportedFile> out;
  std::set<std::string> seen{config, drop_in};
  std::deque<std::pair<std::string, std::string>> pending{{config, text}};
  while (!pending.empty()) {
    auto [path, content] = std::move(pending.front());
    pending.pop_front();
    auto imports = ContainerdImports(path, content);
    if (!imports.ok()) continue;  // the core reports a broken file
    for (const std::string& pattern : *imports) {
      std::string rooted = JoinRoot(root, pattern);
      glob_t g{};
      if (::glob(rooted.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) {
          std::string host = g.gl_pathv[i];
          if (root != "/" && !root.empty()) host = host.substr(JoinRoot(root, "/").size() - 1);
          if (!seen.insert(host).second) continue;
          auto bytes = ReadFile(g.gl_pathv[i]);
          if (!bytes.ok()) {
            ::globfree(&g);
            return bytes.status();
          }
          out.push_back({host, *bytes});
          pending.emplace_back(host, std::move(*bytes));
        }
      }
      ::globfree(&g);
    }
  }
  return out;
}

// The directories among `dirs` and their ancestors that do not exist under
// `root` (host paths), deepest first: what configure creates and --revert
// may remove again.
std::vector<std::string> MissingDirs(const std::string& root,
                                     const std::vector<std::string>& dirs) {
  std::set<std::string> missing;
  for (std::string dir : dirs) {
    while (!dir.empty() && dir != "/" && !PathExists(JoinRoot(root, dir))) {
      missing.insert(dir);
      dir = DirName(dir);
    }
  }
  std::vector<std::string> out(missing.begin(), missing.end());
  // A directory sorts before its children; reversed, every child comes first.
  std::reverse(out.begin(), out.end());
  return out;
}

Result<Plan> MakePlan(const std::string& root, const ConfigureOptions& o) {
  switch (o.runtime) {
    case RuntimeKind::kContainerd: {
      if (!o.drop_in) {
        return InvalidArgument(
            "containerd is configured only through a drop-in and one imports entry, so that "
            "--revert can restore the main config byte for byte; drop --no-drop-in");
      }
      ContainerdInputs in;
      in.config_path = o.config_path;
      in.drop_in_path = o.drop_in_path;
      GPUOP_ASSIGN_OR_RETURN(in.main, ReadOptional(root, in.config_path));
      GPUOP_ASSIGN_OR_RETURN(in.drop_in, ReadOptional(root, in.drop_in_path));
      in.missing_dirs = MissingDirs(root, {DirName(in.drop_in_path), DirName(in.config_path)});
      if (in.main) {
        GPUOP_ASSIGN_OR_RETURN(in.imported,
                               ReadImports(root, in.config_path, *in.main, in.drop_in_path));
      }
      in.installed_major = InstalledContainerdMajor(root);
      return PlanContainerd(in, o);
    }
    case RuntimeKind::kCrio: {
      if (!o.drop_in) {
        return InvalidArgument(
            "CRI-O is configured only through a drop-in in crio.conf.d; drop "
            "--no-drop-in");
      }
      CrioInputs in;
      in.drop_in_path = o.drop_in_path;
      GPUOP_ASSIGN_OR_RETURN(in.drop_in, ReadOptional(root, in.drop_in_path));
      in.runc_path = FindRunc(root);
      in.missing_dirs = MissingDirs(root, {DirName(in.drop_in_path)});
      return PlanCrio(in, o);
    }
    case RuntimeKind::kDocker: {
      DockerInputs in;
      in.config_path = o.config_path;
      GPUOP_ASSIGN_OR_RETURN(in.config, ReadOptional(root, in.config_path));
      GPUOP_ASSIGN_OR_RETURN(in.record,
                             ReadOptional(root, in.config_path + std::string(kDockerRecordSuffix)));
      in.runc_path = FindRunc(root);
      return PlanDocker(in, o);
    }
  }
  return Internal("unknown runtime");
}

Status Apply(const std::string& root, const FileChange& c) {
  std::string path = JoinRoot(root, c.path);
  if (c.directory) {  // only when empty: files someone else put there stay
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST) {
      return Internal("cannot remove directory " + path + ": " + std::strerror(errno));
    }
    return Status::Ok();
  }
  if (!c.after) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Internal("cannot delete " + path + ": " + std::strerror(errno));
    }
    return Status::Ok();
  }
  mode_t mode = 0644;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) mode = st.st_mode & 07777;
  GPUOP_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  return WriteFileAtomic(path, *c.after, mode);
}

}  // namespace

ConfigureOptions WithDefaults(ConfigureOptions o) {
  switch (o.runtime) {
    case RuntimeKind::kContainerd:
      if (o.config_path.empty()) o.config_path = kContainerdConfigPath;
      if (o.drop_in_path.empty()) {
        o.drop_in_path = o.config_path == kContainerdConfigPath
                             ? std::string(kContainerdDropInPath)
                             : DirName(o.config_path) + "/conf.d/99-nvidia.toml";
      }
      break;
    case RuntimeKind::kCrio:
      if (o.config_path.empty()) o.config_path = "/etc/crio/crio.conf";
      if (o.drop_in_path.empty()) {
        o.drop_in_path = DirName(o.config_path) + "/crio.conf.d/99-nvidia.conf";
      }
      break;
    case RuntimeKind::kDocker:
      if (o.config_path.empty()) o.config_path = kDockerConfigPath;
      break;
  }
  return o;
}

Result<ConfigureReport> RunConfigure(const ConfigureRequest& request) {
  const std::string& root = request.host_root.empty() ? "/" : request.host_root;
  ConfigureOptions o = WithDefaults(request.options);
  for (const std::string* p : {&o.config_path, &o.drop_in_path}) {
    if (!p->empty() && !StartsWith(*p, "/")) {
      return InvalidArgument("path " + *p + " must be absolute (a path on the host)");
    }
  }
  GPUOP_ASSIGN_OR_RETURN(Plan plan, MakePlan(root, o));
  ConfigureReport report;
  report.diff = RenderPlanDiff(plan);
  report.notes = plan.notes;
  if (request.dry_run) {
    // First what happened (nothing), then what a real run would report.
    report.notes = {plan.changes.empty()
                        ? "dry run: nothing would change"
                        : "dry run: nothing was written; without --dry-run it would say:"};
    for (const std::string& n : plan.notes) report.notes.push_back("  " + n);
    return report;
  }
  for (const FileChange& c : plan.changes) {
    Status s = Apply(root, c);
    if (!s.ok()) {
      LogError("runtime configuration left partly applied",
               {{"runtime", RuntimeKindName(o.runtime)}, {"failed", c.path}, {"error", s}});
      return s.Annotate(report.changed.empty()
                            ? "nothing was changed"
                            : "applied up to " + report.changed.back() + ", then");
    }
    report.changed.push_back(c.path);
    LogInfo(c.after ? "wrote runtime config" : "deleted runtime config",
            {{"runtime", RuntimeKindName(o.runtime)}, {"path", c.path}});
  }
  return report;
}

}  // namespace gpuop::runtime
