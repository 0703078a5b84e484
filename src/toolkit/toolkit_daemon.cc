#include "toolkit/toolkit_daemon.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/memory.h"
#include "base/strings.h"
#include "host/driver_ready.h"
#include "nvml/client.h"
#include "toolkit/cdi_generate.h"
#include "toolkit/cdi_spec.h"

namespace gpuop::toolkit {
namespace {

using Clock = ToolkitCore::Clock;

constexpr uint32_t kWatchMask =
    IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_ATTRIB | IN_ONLYDIR;
// Events come in bursts (a driver install, ldconfig, several device nodes):
// after the first one the loop waits until the directory has been quiet this
// long, up to kMaxSettle, and regenerates once.
constexpr int kSettleMs = 250;
constexpr int kMaxSettleRounds = 20;

// Library directories a driver installs into, relative to the driver root.
constexpr const char* kLibDirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64",
    "/lib/x86_64-linux-gnu",     "/lib/aarch64-linux-gnu"};

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseOf(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

Status ValidateToolkitOptions(const ToolkitOptions& o) {
  for (const auto& [flag, value] :
       std::initializer_list<std::pair<const char*, const std::string*>>{
           {"--cdi-output", &o.cdi_output},
           {"--driver-root", &o.driver_root},
           {"--validations-dir", &o.validations_dir},
           {"--trigger-file", &o.trigger_file},
           {"--status-file", &o.status_file}}) {
    if (value->empty() || (*value)[0] != '/') {
      return InvalidArgument(std::string(flag) + " \"" + *value + "\" must be an absolute path");
    }
  }
  for (const auto& [flag, value] :
       std::initializer_list<std::pair<const char*, const std::string*>>{
           {"--dev-root", &o.dev_root},
           {"--install-dir", &o.install_dir},
           {"--hook-path", &o.hook_path}}) {
    if (!value->empty() && (*value)[0] != '/') {
      return InvalidArgument(std::string(flag) + " \"" + *value + "\" must be an absolute path");
    }
  }
  if (o.hook_path.empty() && o.install_dir.empty()) {
    return InvalidArgument("--hook-path is required when --install-dir is empty");
  }
  if (o.timing.check_interval.count() <= 0 || o.timing.resync.count() <= 0) {
    return InvalidArgument("--check-interval and --resync must be positive durations");
  }
  return Status::Ok();
}

std::string EffectiveHookPath(const ToolkitOptions& o) {
  if (!o.hook_path.empty()) return o.hook_path;
  return (o.install_dir == "/" ? "" : o.install_dir) + "/gpuop";
}

std::string ToolkitStatusJson(const ToolkitReport& r, const std::string& spec_path) {
  nlohmann::ordered_json j;
  j["phase"] = ToolkitPhaseName(r.phase);
  j["spec"] = spec_path;
  j["fingerprint"] = r.fingerprint;
  j["generations"] = r.generations;
  j["failures"] = r.failures;
  j["lastError"] = r.last_error;
  return j.dump(2) + "\n";
}

struct ToolkitDaemon::Impl {
  struct Watch {
    WatchKind kind;
    std::string dir;
  };

  explicit Impl(ToolkitOptions o) : opt(std::move(o)), core(opt.timing) {}
  ~Impl() {
    if (inotify_fd >= 0) ::close(inotify_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  std::string Host(const std::string& path) const { return JoinRoot(opt.host_root, path); }
  std::string DevRoot() const { return opt.dev_root.empty() ? opt.driver_root : opt.dev_root; }

  void Wake() {
    if (wake_fd < 0) return;
    uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof(one));
  }

  // ---- watches ----

  std::vector<Watch> WantedWatches() const {
    std::vector<Watch> w;
    w.push_back({WatchKind::kDriverEtc, Host(JoinRoot(opt.driver_root, "/etc"))});
    for (const char* d : kLibDirs) {
      w.push_back({WatchKind::kDriverLib, Host(JoinRoot(opt.driver_root, d))});
    }
    w.push_back({WatchKind::kDev, Host(JoinRoot(DevRoot(), "/dev"))});
    w.push_back({WatchKind::kDevCaps, Host(JoinRoot(DevRoot(), "/dev/nvidia-caps"))});
    w.push_back({WatchKind::kTriggerDir, Host(DirOf(opt.trigger_file))});
    w.push_back({WatchKind::kValidations, Host(opt.validations_dir)});
    return w;
  }

  // Adds the watches whose directory exists now (a driver root may appear
  // after start); a directory that goes away is re-added when it returns.
  void EnsureWatches() {
    for (const Watch& w : WantedWatches()) {
      if (watched_dirs.count(w.dir)) continue;
      int wd = ::inotify_add_watch(inotify_fd, w.dir.c_str(), kWatchMask);
      if (wd < 0) continue;  // not there (yet)
      // Two paths can be one directory (/lib64 -> usr/lib64): inotify gives
      // the same wd, and the first kind is kept.
      if (!watches.count(wd)) watches[wd] = w;
      watched_dirs.insert(w.dir);
      LogDebug("watching", {{"dir", w.dir}});
    }
  }

  // Drains the inotify queue; returns the trigger bits of what it held.
  unsigned ReadEvents() {
    unsigned bits = 0;
    alignas(inotify_event) char buf[16384];
    for (;;) {
      ssize_t n = ::read(inotify_fd, buf, sizeof(buf));
      if (n <= 0) break;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
          bits |= kTriggerFileChange;
          continue;
        }
        auto it = watches.find(ev->wd);
        if (it == watches.end()) continue;
        if (ev->mask & IN_IGNORED) {  // the directory went away
          watched_dirs.erase(it->second.dir);
          watches.erase(it);
          bits |= kTriggerFileChange;
          continue;
        }
        std::string name = ev->len > 0 ? std::string(ev->name) : "";
        unsigned b = ClassifyWatchEvent(it->second.kind, name, BaseOf(opt.trigger_file));
        if (b != kTriggerNone) {
          LogDebug("file event", {{"dir", it->second.dir}, {"name", name}});
        }
        bits |= b;
      }
    }
    return bits;
  }

  // Blocks until there is work (events, a request, the core's timer) or a
  // stop; returns the trigger bits.
  unsigned WaitForWork(const std::stop_token& stop) {
    unsigned bits = 0;
    for (;;) {
      if (stop.stop_requested()) return bits;
      auto now = Clock::now();
      auto next = core.NextWake();
      if (next <= now) return bits | kTriggerTick;
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
      int timeout = static_cast<int>(std::min<int64_t>(wait, INT_MAX));
      pollfd fds[2] = {{inotify_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
      int r = ::poll(fds, 2, timeout);
      if (r < 0 && errno != EINTR) {
        LogError("poll failed", {{"error", ErrnoText(errno)}});
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (fds[1].revents & POLLIN) {
        uint64_t v;
        (void)!::read(wake_fd, &v, sizeof(v));
        bits |= pending.exchange(0);
        if (bits != 0) return bits;
      }
      if (fds[0].revents & POLLIN) {
        unsigned b = ReadEvents();
        if (b == kTriggerNone) continue;
        bits |= b;
        for (int i = 0; i < kMaxSettleRounds && !stop.stop_requested(); ++i) {
          pollfd settle{inotify_fd, POLLIN, 0};
          if (::poll(&settle, 1, kSettleMs) <= 0) break;
          bits |= ReadEvents();
        }
        return bits;
      }
    }
  }

  // ---- work ----

  Result<Fingerprint> Observe(std::unique_ptr<nvml::Client>* client) {
    auto c = nvml::Client::Open(opt.nvml_lib(opt.driver_root));
    if (!c.ok()) return c.status();
    auto system = (*c)->System();
    if (!system.ok()) return system.status();
    auto gpus = (*c)->Gpus();
    if (!gpus.ok()) return gpus.status();
    *client = std::move(*c);
    return FingerprintOf(*system, *gpus);
  }

  // Streamed, never read into memory: a 20 MB binary read twice (to
  // compare) stayed in the heap of every restarted toolkit (the soak).
  Status InstallSelf() {
    if (opt.install_dir.empty() || installed) return Status::Ok();
    const std::string dir = Host(opt.install_dir);
    const std::string dest = dir + "/gpuop";
    GPUOP_RETURN_IF_ERROR(MakeDirs(dir));
    if (!SameContents(opt.self_exe, dest)) {
      Status s = CopyFileAtomic(opt.self_exe, dest, 0755);
      if (!s.ok()) return s.Annotate("installing gpuop for the runtime's hooks");
      LogInfo("installed gpuop for the runtime's hooks", {{"path", dest}});
    }
    installed = true;
    return Status::Ok();
  }

  Status Regenerate(const nvml::Client& client, bool* changed, size_t* devices) {
    GPUOP_RETURN_IF_ERROR(InstallSelf());
    CdiGenerateOptions g;
    g.host_root = opt.host_root;
    g.driver_root = opt.driver_root;
    g.dev_root = opt.dev_root;
    g.hook_path = EffectiveHookPath(opt);
    GPUOP_ASSIGN_OR_RETURN(cdi::Spec spec, GenerateCdiSpec(client, g));
    Status valid = cdi::Validate(spec);
    if (!valid.ok()) return valid.Annotate("the generated spec is invalid (a gpuop bug)");
    *devices = spec.devices.size();
    const std::string text =
        EndsWith(opt.cdi_output, ".json") ? cdi::ToJson(spec) : cdi::ToYaml(spec);
    const std::string path = Host(opt.cdi_output);
    auto existing = ReadFile(path);
    if (existing.ok() && *existing == text) {
      *changed = false;
      return Status::Ok();
    }
    GPUOP_RETURN_IF_ERROR(MakeDirs(DirOf(path)));
    GPUOP_RETURN_IF_ERROR(WriteFileAtomic(path, text, 0644));
    *changed = true;
    return Status::Ok();
  }

  void WriteReady() {
    const std::string dir = Host(opt.validations_dir);
    const std::string path = dir + "/toolkit-ready";
    if (PathExists(path)) return;
    Status s = MakeDirs(dir);
    if (s.ok()) s = WriteFileAtomic(path, "spec=" + opt.cdi_output + "\n");
    if (s.ok()) {
      LogInfo("toolkit ready", {{"file", path}});
    } else {
      LogError("cannot write the ready file", {{"file", path}, {"error", s}});
    }
  }

  void WriteStatus() {
    std::string json = ToolkitStatusJson(core.report(), opt.cdi_output);
    if (json == last_status) return;
    const std::string path = Host(opt.status_file);
    Status s = MakeDirs(DirOf(path));
    if (s.ok()) s = WriteFileAtomic(path, json);
    if (!s.ok()) {
      LogWarn("cannot write the status file", {{"file", path}, {"error", s}});
      return;
    }
    last_status = std::move(json);
  }

  static std::string Seconds(Clock::time_point at) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(std::max<int64_t>(ms, 0)) / 1000);
    return buf;
  }

  // Takes the roots the validator found (driver-ready) when they differ
  // from the configured ones; the spec is then regenerated from them.
  void AdoptDriverReady(unsigned* triggers) {
    auto ready = host::ReadDriverReady(opt.host_root, opt.validations_dir);
    if (!ready.ok()) {
      if (ready.status().message() != driver_ready_error) {
        LogWarn("ignoring the validator's driver-ready", {{"error", ready.status()}});
        driver_ready_error = ready.status().message();
      }
      return;
    }
    driver_ready_error.clear();
    if (!ready->has_value()) return;
    const host::DriverReady& d = **ready;
    if (d.driver_root == opt.driver_root && d.dev_root == DevRoot()) return;
    LogInfo("driver root from the validator's driver-ready", {{"driver_root", d.driver_root},
                                                              {"dev_root", d.dev_root},
                                                              {"host_driver", d.host_driver},
                                                              {"configured", opt.driver_root}});
    opt.driver_root = d.driver_root;
    opt.dev_root = d.dev_root;
    *triggers |= kTriggerFileChange;
  }

  void Tick(unsigned triggers) {
    AdoptDriverReady(&triggers);
    std::unique_ptr<nvml::Client> client;
    Result<Fingerprint> observed = Observe(&client);
    ToolkitDecision d = core.Decide(triggers, observed, Clock::now());
    if (!observed.ok()) {
      if (d.log_unavailable) {
        LogWarn("nvml unavailable; keeping the cdi spec on disk, retrying with backoff",
                {{"error", observed.status().message()},
                 {"spec", Host(opt.cdi_output)},
                 {"spec_exists", PathExists(Host(opt.cdi_output))}});
      } else {
        LogDebug("nvml still unavailable",
                 {{"error", observed.status().message()}, {"retry_in", Seconds(core.NextWake())}});
      }
      WriteStatus();
      return;
    }
    if (d.regenerate) {
      LogInfo("regenerating cdi spec",
              {{"reason", d.reason},
               {"fingerprint", observed->Summary()},
               {"changes", d.diff.empty() ? std::string("none") : d.diff.ToString()}});
      bool changed = false;
      size_t devices = 0;
      Status s = Regenerate(*client, &changed, &devices);
      core.Generated(*observed, s, Clock::now());
      if (s.ok()) {
        LogInfo(changed ? "cdi spec written" : "cdi spec unchanged",
                {{"spec", Host(opt.cdi_output)},
                 {"devices", devices},
                 {"fingerprint", observed->Summary()}});
        WriteReady();
      } else {
        LogError("cdi spec regeneration failed; keeping the last good spec",
                 {{"reason", d.reason},
                  {"error", s.message()},
                  {"spec", Host(opt.cdi_output)},
                  {"has_good_spec", core.has_spec()},
                  {"failures", core.report().failures},
                  {"retry_in", Seconds(core.NextWake())}});
      }
    }
    WriteStatus();
    client.reset();  // nvmlShutdown: the next check initialises afresh
  }

  Status Run(std::stop_token stop) {
    inotify_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd < 0) return Internal("inotify_init1: " + ErrnoText(errno));
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd < 0) return Internal("eventfd: " + ErrnoText(errno));
    std::stop_callback on_stop(stop, [this] { Wake(); });
    // The trigger file's directory, so that `touch` works for the MIG manager.
    Status s = MakeDirs(Host(DirOf(opt.trigger_file)));
    if (!s.ok()) LogWarn("cannot create the trigger directory", {{"error", s}});
    LogInfo("toolkit starting", {{"host_root", opt.host_root},
                                 {"driver_root", opt.driver_root},
                                 {"spec", opt.cdi_output},
                                 {"hook", EffectiveHookPath(opt)},
                                 {"trigger_file", opt.trigger_file}});
    unsigned triggers = kTriggerTick;
    while (!stop.stop_requested()) {
      EnsureWatches();
      Tick(triggers);
      triggers = WaitForWork(stop);
    }
    LogInfo("toolkit stopping", {{"phase", ToolkitPhaseName(core.report().phase)}});
    return Status::Ok();
  }

  ToolkitOptions opt;
  ToolkitCore core;
  int inotify_fd = -1;
  int wake_fd = -1;
  std::map<int, Watch> watches;
  std::set<std::string> watched_dirs;
  std::atomic<unsigned> pending{0};
  bool installed = false;
  std::string last_status;
  std::string driver_ready_error;  // logged once per distinct error
};

ToolkitDaemon::ToolkitDaemon(ToolkitOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
ToolkitDaemon::~ToolkitDaemon() = default;

Status ToolkitDaemon::Run(std::stop_token stop) { return impl_->Run(std::move(stop)); }

void ToolkitDaemon::RequestRegenerate() {
  impl_->pending.fetch_or(kTriggerSighup);
  impl_->Wake();
}

int RunToolkit(const ToolkitOptions& options) {
  sigset_t set, old;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&set, sig);
  // Blocked before the worker starts, so every thread inherits the mask and
  // the signals are only ever taken by sigwait below.
  pthread_sigmask(SIG_BLOCK, &set, &old);

  ToolkitDaemon daemon(options);
  Status result;
  std::atomic<bool> done{false};
  const pthread_t main_thread = pthread_self();
  std::jthread worker([&](std::stop_token stop) {
    result = daemon.Run(stop);
    done = true;
    pthread_kill(main_thread, SIGUSR1);  // wake sigwait
  });
  IdleUpkeep upkeep;  // page-out once started, then heap scavenges (base/memory.h)
  for (;;) {
    const timespec wait{upkeep.NextWait().count(), 0};
    const int sig = sigtimedwait(&set, nullptr, &wait);
    if (sig < 0) {
      if (errno == EAGAIN) upkeep.OnIdle();
      continue;
    }
    if (sig == SIGHUP) {
      LogInfo("SIGHUP: regenerating the cdi spec");
      daemon.RequestRegenerate();
      continue;
    }
    if (sig == SIGUSR1) {
      if (done) break;
      continue;
    }
    LogInfo("signal received; stopping", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    break;
  }
  worker.request_stop();
  worker.join();
  // The worker's wake-up (and any late signal of the set) is still pending:
  // take it here, so that unblocking does not deliver SIGUSR1's default action.
  const timespec zero{};
  while (sigtimedwait(&set, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!result.ok()) {
    LogError("toolkit failed", {{"error", result}});
    return 1;
  }
  return 0;
}

}  // namespace gpuop::toolkit
