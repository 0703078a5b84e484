// `gpuop sim kubelet --dir DIR`: a fake kubelet (sim/kubelet/fake_kubelet.h)
// serving the device plugin Registration API on DIR/kubelet.sock. It prints
// one JSON line to stdout per event: serving, each RegisterRequest, each
// device list a plugin streams, and restarts. SIGHUP simulates a kubelet
// restart (every socket in DIR removed, kubelet.sock made anew); SIGTERM or
// SIGINT stops it (exit 0). For tests and demos; not for production.
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/cli.h"
#include "sim/kubelet/fake_kubelet.h"

namespace gpuop::cli {
namespace {

class JsonOut {
 public:
  void Print(const nlohmann::json& j) {
    std::lock_guard lock(mu_);
    std::string line = j.dump() + "\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }

 private:
  std::mutex mu_;
};

int RunSimKubelet(const std::string& dir) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts

  auto kubelet = sim::FakeKubelet::Start(dir);
  if (!kubelet.ok()) {
    std::fprintf(stderr, "gpuop sim kubelet: %s\n", kubelet.status().message().c_str());
    return kExitFailure;
  }
  JsonOut out;
  out.Print({{"event", "serving"}, {"socket", (*kubelet)->socket_path()}});

  // The fake kubelet keeps state, not a feed: report what changed since the
  // last look (a tool's loop, not a component's).
  std::mutex mu;
  size_t seen = 0;                          // registrations printed
  std::map<std::string, uint64_t> updates;  // lists printed per resource
  auto poll = [&] {
    std::lock_guard lock(mu);
    auto regs = (*kubelet)->Registrations();
    for (; seen < regs.size(); ++seen) {
      const sim::KubeletRegistration& r = regs[seen];
      out.Print({{"event", "registration"},
                 {"resource", r.resource_name},
                 {"endpoint", r.endpoint},
                 {"version", r.version},
                 {"preferred_allocation", r.get_preferred_allocation_available},
                 {"accepted", r.accepted},
                 {"error", r.error}});
      updates.erase(r.resource_name);  // its list count starts again
    }
    for (const auto& r : regs) {
      if (!r.accepted) continue;
      uint64_t n = (*kubelet)->ListAndWatchUpdates(r.resource_name);
      auto it = updates.find(r.resource_name);
      if (n == 0 || (it != updates.end() && it->second == n)) continue;
      updates[r.resource_name] = n;
      nlohmann::json devices = nlohmann::json::array();
      size_t healthy = 0;
      auto list = (*kubelet)->Devices(r.resource_name);
      for (const auto& d : list) {
        nlohmann::json dj = {{"id", d.id}, {"health", d.healthy ? "Healthy" : "Unhealthy"}};
        if (d.numa_node >= 0) dj["numa"] = d.numa_node;
        devices.push_back(std::move(dj));
        if (d.healthy) ++healthy;
      }
      out.Print({{"event", "devices"},
                 {"resource", r.resource_name},
                 {"count", list.size()},
                 {"healthy", healthy},
                 {"devices", std::move(devices)}});
    }
  };
  std::jthread poller([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig != SIGHUP) break;
    std::lock_guard lock(mu);
    Status s = (*kubelet)->Restart();
    seen = 0;
    updates.clear();
    out.Print({{"event", "restart"}, {"ok", s.ok()}, {"error", s.ok() ? "" : s.message()}});
  }
  poller.request_stop();
  poller.join();
  (*kubelet)->Stop();
  out.Print({{"event", "stopped"}});
  return kExitOk;
}

}  // namespace

void RegisterSimKubeletCommand(CLI::App& sim, const GlobalOptions&, Action* action) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = sim.add_subcommand(
      "kubelet",
      "A fake kubelet for device plugins: serves Registration on DIR/kubelet.sock, follows each "
      "plugin's ListAndWatch and prints JSON lines. SIGHUP: a kubelet restart");
  cmd->add_option("--dir", *dir,
                  "The device-plugins directory (e.g. <root>/var/lib/kubelet/"
                  "device-plugins); created if missing")
      ->required();
  cmd->callback([action, dir] { *action = [dir] { return RunSimKubelet(*dir); }; });
}

}  // namespace gpuop::cli
