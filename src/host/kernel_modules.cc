#include "host/kernel_modules.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::host {
namespace {

std::string UsersOf(const KernelModule& m) {
  std::string s = std::to_string(m.refcount) + " user(s)";
  if (!m.used_by.empty()) s += ": " + Join(m.used_by, ", ");
  return s;
}

class SystemModules final : public KernelModules {
 public:
  SystemModules(std::string proc_root, std::string sys_root)
      : proc_modules_(JoinRoot(proc_root, "/proc/modules")),
        nvidia_version_(JoinRoot(sys_root, "/sys/module/nvidia/version")) {}

  Result<std::vector<KernelModule>> List() override {
    GPUOP_ASSIGN_OR_RETURN(std::string text, ReadFile(proc_modules_));
    return ParseProcModules(text, proc_modules_);
  }

  Status Unload(const std::string& name) override {
    if (syscall(SYS_delete_module, name.c_str(), O_NONBLOCK) == 0) return Status::Ok();
    const int err = errno;
    if (err == ENOENT) return NotFound("kernel module " + name + " is not loaded");
    if (err == EBUSY || err == EWOULDBLOCK) {
      std::string users = "users unknown";
      if (auto list = List(); list.ok()) {
        if (const KernelModule* m = FindModule(*list, name)) users = UsersOf(*m);
      }
      return FailedPrecondition("kernel module " + name + " is in use (" + users +
                                "): stop the processes that hold /dev/nvidia* first");
    }
    if (err == EPERM) {
      return PermissionDenied("unloading kernel module " + name +
                              ": not permitted (needs CAP_SYS_MODULE: a privileged container)");
    }
    return Internal("unloading kernel module " + name + ": " + std::strerror(err));
  }

  Result<std::optional<std::string>> NvidiaVersion() override {
    if (!PathExists(nvidia_version_)) return std::optional<std::string>();
    GPUOP_ASSIGN_OR_RETURN(std::string v, ReadFile(nvidia_version_));
    return std::optional<std::string>(std::string(Trim(v)));
  }

 private:
  std::string proc_modules_, nvidia_version_;
};

}  // namespace

Result<std::vector<KernelModule>> ParseProcModules(std::string_view text,
                                                   const std::string& origin) {
  std::vector<KernelModule> out;
  int line_no = 0;
  for (const std::string& line : Split(text, '\n')) {
    ++line_no;
    if (Trim(line).empty()) continue;
    std::vector<std::string> f = Split(line, ' ');
    auto bad = [&](const std::string& why) {
      return InvalidArgument(origin + ":" + std::to_string(line_no) + ": " + why + " in \"" +
                             Excerpt(line) +
                             "\" (expected: name size refcount deps state address)");
    };
    if (f.size() < 4) return bad("too few fields");
    KernelModule m;
    m.name = f[0];
    auto refs = ParseUint(f[2]);
    if (!refs || f[2].rfind("0x", 0) == 0) return bad("refcount \"" + f[2] + "\" is not a count");
    m.refcount = static_cast<int64_t>(*refs);
    if (f[3] != "-") {
      for (const std::string& dep : Split(f[3], ',')) {
        if (!dep.empty()) m.used_by.push_back(dep);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

const KernelModule* FindModule(const std::vector<KernelModule>& modules, std::string_view name) {
  for (const KernelModule& m : modules) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::unique_ptr<KernelModules> SystemKernelModules(std::string proc_root, std::string sys_root) {
  return std::make_unique<SystemModules>(std::move(proc_root), std::move(sys_root));
}

}  // namespace gpuop::host
