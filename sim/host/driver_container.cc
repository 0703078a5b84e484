#include "sim/host/driver_container.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/files.h"
#include "base/log.h"
#include "base/process.h"
#include "base/strings.h"
#include "sim/host/elf_stub.h"
#include "sim/host/host_root.h"
#include "sim/nvml/machine.h"

namespace gpuop::sim {
namespace {

namespace fs = std::filesystem;

std::string DriverRoot(const DriverContainerOptions& o) { return o.run_dir + "/driver"; }

Status WriteDaemonsStatus(const DriverContainerOptions& o, const std::string& status) {
  GPUOP_RETURN_IF_ERROR(MakeDirs(o.run_dir + "/validations"));
  return WriteFileAtomic(o.run_dir + "/validations/.driver-daemons-status", status + "\n");
}

// Empties `dir` but keeps it: consumers bind-mounted it, and must see what
// comes next in the same directory.
Status ClearDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return MakeDirs(dir);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    fs::remove_all(entry.path(), ec);
    if (ec) return Internal("clearing " + entry.path().string() + ": " + ec.message());
  }
  if (ec) return Internal("reading " + dir + ": " + ec.message());
  return Status::Ok();
}

// Copies the tree at `from` into `to`, each file and link written under a
// temporary name and renamed into place: a consumer that polls for
// libnvidia-ml.so.1 never dlopens a half-written file, and one that has it
// mapped keeps its copy (an in-place overwrite would truncate it under the
// mapping and kill that process with SIGBUS).
Status InstallTree(const std::string& from, const std::string& to) {
  std::error_code ec;
  GPUOP_RETURN_IF_ERROR(MakeDirs(to));
  for (auto it = fs::recursive_directory_iterator(from, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    // Lexically: fs::relative would resolve a link to its target's name.
    const fs::path dst = fs::path(to) / it->path().lexically_relative(from);
    const fs::path tmp = dst.parent_path() / ("." + dst.filename().string() + ".installing");
    const fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(st)) {
      GPUOP_RETURN_IF_ERROR(MakeDirs(dst.string()));
      continue;
    }
    fs::remove(tmp, ec);
    if (fs::is_symlink(st)) {
      fs::create_symlink(fs::read_symlink(it->path(), ec), tmp, ec);
    } else {
      fs::copy_file(it->path(), tmp, ec);
    }
    if (!ec) fs::rename(tmp, dst, ec);
    if (ec) return Internal("installing " + dst.string() + ": " + ec.message());
  }
  if (ec) return Internal("copying " + from + " to " + to + ": " + ec.message());
  return Status::Ok();
}

// The driver root's /dev: the real container's root is bind-mounted there
// whole, its /dev (the node's, privileged) included, and consumers told to
// use the driver root for device nodes look there.
Status MirrorDeviceNodes(const std::string& from, const std::string& to) {
  std::error_code ec;
  for (const std::string& sub : {std::string(), std::string("/nvidia-caps")}) {
    const std::string src_dir = from + sub;
    if (!fs::is_directory(src_dir, ec)) continue;
    GPUOP_RETURN_IF_ERROR(MakeDirs(to + sub));
    for (const auto& entry : fs::directory_iterator(src_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (sub.empty() && !StartsWith(name, "nvidia")) continue;
      struct stat st {};
      if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
      const std::string dst = to + sub + "/" + name;
      ::unlink(dst.c_str());
      if (::mknod(dst.c_str(), st.st_mode, st.st_rdev) != 0) {
        return Internal("creating " + dst + ": " + std::strerror(errno));
      }
    }
  }
  return Status::Ok();
}

Status UnloadAll(host::KernelModules& kernel) {
  GPUOP_ASSIGN_OR_RETURN(std::vector<host::KernelModule> loaded, kernel.List());
  for (const char* name : host::kNvidiaModulesUnloadOrder) {
    if (host::FindModule(loaded, name) == nullptr) continue;
    if (Status s = kernel.Unload(name); !s.ok()) {
      return FailedPrecondition(
          "Could not unload NVIDIA driver kernel modules, driver is in use (" + s.message() + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Status StartDriver(const DriverContainerOptions& o, StateStore& store,
                   host::KernelModules& kernel) {
  if (o.version.empty()) {
    return InvalidArgument("DRIVER_VERSION is not set: this image carries no driver");
  }
  GPUOP_RETURN_IF_ERROR(WriteDaemonsStatus(o, "NotReady"));
  const std::string state_file = o.run_dir + "/nvidia-driver.state";
  GPUOP_ASSIGN_OR_RETURN(std::optional<std::string> loaded, kernel.NvidiaVersion());

  // The fast path: this very driver and configuration are loaded (a container
  // restart, not an upgrade). Only the user space is set up again.
  auto digest = ReadFile(state_file);
  const bool same = loaded == o.version && !o.config_digest.empty() && digest.ok() &&
                    Trim(*digest) == o.config_digest;
  if (same) {
    LogInfo("driver loaded with this configuration: no module reload",
            {{"version", o.version}, {"digest", o.config_digest}});
  } else {
    if (loaded) {
      LogInfo("unloading the loaded driver", {{"loaded", *loaded}, {"version", o.version}});
      GPUOP_RETURN_IF_ERROR(UnloadAll(kernel));
    }
    // The digest described the modules just unloaded; a load without one must
    // not leave it to claim the next fast path.
    std::error_code rm_ec;
    fs::remove(state_file, rm_ec);
    if (rm_ec) return Internal("removing " + state_file + ": " + rm_ec.message());
    GPUOP_RETURN_IF_ERROR(ClearDir(DriverRoot(o)));
    if (o.fail == "build") {
      return Internal("building the NVIDIA kernel module " + o.version +
                      " failed (this image was built with GPUOP_SIM_DRIVER_FAIL=build, a "
                      "simulated compile error): use a driver version that builds for this "
                      "kernel");
    }
  }
  // The driver root: the installation, where consumers look for it.
  GPUOP_RETURN_IF_ERROR(InstallTree(o.driver_tree, DriverRoot(o)));
  GPUOP_RETURN_IF_ERROR(MirrorDeviceNodes(o.dev_dir, DriverRoot(o) + "/dev"));
  if (!same) GPUOP_RETURN_IF_ERROR(LoadDriver(store, o.version));
  if (!o.config_digest.empty()) {
    GPUOP_RETURN_IF_ERROR(WriteFileAtomic(state_file, o.config_digest + "\n"));
  }
  return WriteDaemonsStatus(o, "Ready");
}

Status StopDriver(const DriverContainerOptions& o, host::KernelModules& kernel) {
  GPUOP_RETURN_IF_ERROR(UnloadAll(kernel));
  return ClearDir(DriverRoot(o));
}

Result<std::string> DriverVersionFromImage(const std::string& image) {
  const size_t slash = image.rfind('/');
  const size_t colon = image.rfind(':');
  if (image.find('@') != std::string::npos || colon == std::string::npos ||
      (slash != std::string::npos && colon < slash)) {
    return InvalidArgument("driver image \"" + Excerpt(image) +
                           "\" has no tag: name it REPOSITORY/IMAGE:VERSION[-OS], like "
                           "nvcr.io/nvidia/driver:550.127.05-ubuntu22.04");
  }
  std::string tag = image.substr(colon + 1);
  std::string version = tag.substr(0, tag.find('-'));
  bool ok = !version.empty() && version.front() >= '0' && version.front() <= '9';
  for (char c : version) ok = ok && ((c >= '0' && c <= '9') || c == '.');
  if (!ok) {
    return InvalidArgument("driver image tag \"" + Excerpt(tag) +
                           "\" does not start with a driver version like 550.127.05");
  }
  return version;
}

Result<std::string> BuildDriverImage(const DriverImageOptions& o) {
  GPUOP_ASSIGN_OR_RETURN(std::string version, DriverVersionFromImage(o.image));
  if (!o.fail.empty() && o.fail != "build") {
    return InvalidArgument("--fail \"" + o.fail + "\": the only simulated failure is `build`");
  }
  if (o.busybox.empty() || !PathExists(o.busybox)) {
    return NotFound("busybox not found (" + o.busybox +
                    "): the driver image's probes need a shell; install busybox-static");
  }
  char tmpl[] = "/tmp/gpuop-driver-image.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Internal("mkdtemp: " + std::string(std::strerror(errno)));
  const std::string stage = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{stage};

  // The installation of this version, as a driver install lays it out.
  GPUOP_ASSIGN_OR_RETURN(Machine machine, LoadMachine("dgx-h100", ""));
  machine.driver_version = version;
  machine.cuda_driver_version = CudaVersionForDriver(version);
  HostRootOptions ho;
  GPUOP_ASSIGN_OR_RETURN(ho.elf_machine, HostElfMachine());
  ho.nvml_sim_library = o.nvml_sim;
  ho.cuda_sim_library = o.cuda_sim;
  GPUOP_ASSIGN_OR_RETURN(HostRootPlan plan, PlanHostRoot(machine, ho));
  const std::string rootfs = stage + "/rootfs";
  GPUOP_RETURN_IF_ERROR(WriteHostRoot(rootfs + kDriverTreeInImage, DriverFilesOnly(plan)).status());
  // What the pod's probes and hooks run: a shell and its tools, and an
  // nvidia-smi that fails unless the driver answers.
  GPUOP_RETURN_IF_ERROR(MakeDirs(rootfs + "/bin"));
  std::error_code ec;
  fs::copy_file(o.busybox, rootfs + "/bin/busybox", ec);
  if (ec) return Internal("copying " + o.busybox + ": " + ec.message());
  chmod((rootfs + "/bin/busybox").c_str(), 0755);
  for (const char* tool : {"sh", "rm", "mkdir", "touch", "cat", "ls", "sleep", "echo", "test"}) {
    fs::create_symlink("busybox", rootfs + "/bin/" + tool, ec);
    if (ec) return Internal(std::string("linking /bin/") + tool + ": " + ec.message());
  }
  GPUOP_RETURN_IF_ERROR(MakeDirs(rootfs + "/usr/local/bin"));
  GPUOP_RETURN_IF_ERROR(WriteFileAtomic(
      rootfs + "/usr/local/bin/nvidia-smi",
      "#!/bin/sh\n# gpuop's simulated driver image: lists the GPUs through the driver's NVML.\n"
      "exec /usr/bin/gpuop --nvml-lib " +
          std::string(kDriverTreeInImage) + plan.lib_dir + "/libnvidia-ml.so.1 nvml list\n",
      0755));

  const std::string branch = version.substr(0, version.find('.'));
  std::string containerfile = "FROM " + o.base +
                              "\nCOPY rootfs/ /\n"
                              "ENV DRIVER_VERSION=" +
                              version + " DRIVER_BRANCH=" + branch +
                              " NVIDIA_VISIBLE_DEVICES=void"
                              " GPUOP_SIM_DRIVER_FAIL=" +
                              o.fail +
                              "\nLABEL org.opencontainers.image.title=\"gpuop simulated NVIDIA "
                              "driver\" gpuop.sim/driver-version=" +
                              version +
                              "\nENTRYPOINT [\"/usr/bin/gpuop\", \"sim\", \"driver-container\"]\n"
                              "CMD [\"init\"]\n";
  GPUOP_RETURN_IF_ERROR(WriteFileAtomic(stage + "/Containerfile", containerfile));
  GPUOP_ASSIGN_OR_RETURN(CommandResult r,
                         RunCommand({"podman", "build", "-q", "-t", o.image, stage}));
  if (r.status != 0) {
    return Internal("podman build of " + o.image + " FROM " + o.base + " failed: " +
                    Excerpt(r.output, 400) + " (build gpuop's image first: make image)");
  }
  return o.image;
}

}  // namespace gpuop::sim
