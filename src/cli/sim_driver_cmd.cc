// `gpuop sim driver-image IMAGE` builds a simulated NVIDIA driver image into
// the local image store, the one a simulated cluster's nodes run for
// driver.version; `gpuop sim driver-container init` is that image's
// entrypoint (sim/host/driver_container.h). Exit codes as the real driver
// container's: 1 when the driver cannot be loaded, 0 after a clean unload on
// SIGTERM.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>

#include "base/files.h"
#include "base/log.h"
#include "base/version.h"
#include "cli/cli.h"
#include "sim/host/driver_container.h"
#include "sim/host/host_root.h"
#include "sim/host/sim_kernel.h"

namespace gpuop::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

int RunDriverContainer() {
  sim::DriverContainerOptions o;
  o.version = Env("DRIVER_VERSION");
  o.config_digest = Env("DRIVER_CONFIG_DIGEST");
  o.fail = Env("GPUOP_SIM_DRIVER_FAIL");
  auto fail = [](const Status& s) {
    LogError("driver container", {{"error", s.message()}});
    return kExitFailure;
  };
  StopSignals signals(/*hangup=*/true);
  // One driver container per node: the real one's pid-file lock.
  if (Status s = MakeDirs(o.run_dir); !s.ok()) return fail(s);
  const std::string pid_file = o.run_dir + "/nvidia-driver.pid";
  int pid_fd = ::open(pid_file.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (pid_fd < 0 || ::flock(pid_fd, LOCK_EX | LOCK_NB) != 0) {
    LogError("An instance of the NVIDIA driver is already running, aborting",
             {{"pid_file", pid_file}});
    return kExitFailure;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(pid_fd, 0) != 0 || ::write(pid_fd, pid.data(), pid.size()) < 0) {
    return fail(Internal("writing " + pid_file));
  }

  auto store = sim::OpenStateFromEnv(/*require_shared=*/true);
  if (!store.ok()) return fail(store.status());
  std::shared_ptr<sim::StateStore> shared(std::move(store).value());
  auto kernel = sim::SimKernelModules(shared);
  LogInfo("starting the NVIDIA driver", {{"version", o.version}, {"digest", o.config_digest}});
  if (Status s = sim::StartDriver(o, *shared, *kernel); !s.ok()) {
    ::unlink(pid_file.c_str());
    return fail(s);
  }
  LogInfo("NVIDIA driver loaded; waiting for a signal", {{"version", o.version}});
  signals.Wait();
  LogInfo("stopping the NVIDIA driver");
  if (Status s = sim::StopDriver(o, *kernel); !s.ok()) {
    // As the real container: the modules and the root stay for the next
    // driver manager, and this one waits for SIGKILL.
    LogError("could not unload the driver; waiting to be killed", {{"error", s.message()}});
    for (;;) pause();
  }
  ::unlink(pid_file.c_str());
  LogInfo("NVIDIA driver unloaded");
  return kExitOk;
}

}  // namespace

void RegisterSimDriverCommands(CLI::App& sim, const GlobalOptions& /*g*/, Action* action) {
  auto* ctr = sim.add_subcommand(
      "driver-container",
      "The entrypoint of a simulated NVIDIA driver image (gpuop sim driver-image)");
  ctr->add_subcommand("init", "Load the image's driver on this simulated node and keep it loaded")
      ->callback([action] { *action = RunDriverContainer; });
  ctr->require_subcommand(1);

  struct Flags {
    sim::DriverImageOptions o;
  };
  auto f = std::make_shared<Flags>();
  f->o.base = std::string("localhost/gpuop:") + kVersion;
  f->o.busybox = "/usr/bin/busybox";
  auto* img = sim.add_subcommand(
      "driver-image",
      "Build a simulated NVIDIA driver image (gpuop's image + a driver of the tag's version) "
      "into the local image store, for driver.version on a simulated cluster");
  img->add_option("image", f->o.image,
                  "The image name, e.g. nvcr.io/nvidia/driver:550.127.05-ubuntu22.04")
      ->required();
  img->add_option("--fail", f->o.fail,
                  "Simulate a driver that fails: `build` (its kernel module does not compile)");
  img->add_option("--base", f->o.base, "gpuop's image to build on")->capture_default_str();
  img->add_option("--busybox", f->o.busybox, "A static busybox for the probes' shell")
      ->capture_default_str();
  img->callback([action, f] {
    *action = [f] {
      f->o.nvml_sim = sim::NvmlSimBesideExecutable();
      f->o.cuda_sim = sim::CudaSimBesideExecutable();
      auto built = sim::BuildDriverImage(f->o);
      if (!built.ok()) {
        std::fprintf(stderr, "gpuop sim driver-image: %s\n", built.status().message().c_str());
        return kExitFailure;
      }
      std::printf("%s\n", built->c_str());
      return kExitOk;
    };
  });
}

}  // namespace gpuop::cli
