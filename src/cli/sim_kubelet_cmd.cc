// `gpuop sim kubelet --dir DIR`: a fake kubelet (sim/kubelet/fake_kubelet.h)
// serving the device plugin Registration API on DIR/kubelet.sock. It prints
// one JSON line to stdout per event: serving, each RegisterRequest, each
// device list a plugin streams, and restarts. SIGHUP simulates a kubelet
// restart (every socket in DIR removed, kubelet.sock made anew); SIGTERM or
// SIGINT stops it (exit 0). For tests and demos; not for production.
//
// With --pod-resources FILE it also serves the pod-resources API
// (sim/kubelet/fake_pod_resources.h) on <kubelet-dir>/pod-resources/kubelet.sock,
// <kubelet-dir> being DIR's parent (the kubelet's layout), answering from FILE.
// SIGUSR1 re-reads FILE; SIGHUP re-reads it too and restarts that socket as
// well. A bad FILE at a re-read keeps the previous table. With
// --log-list-calls it also prints {"event":"pod-resources-calls","list":N,
// "get":M} when the served call counts change (a client's polling shows).
#include <pthread.h>

#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/files.h"
#include "cli/cli.h"
#include "kubelet/pod_resources.h"
#include "sim/kubelet/fake_kubelet.h"
#include "sim/kubelet/fake_pod_resources.h"

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

// The fakes call Notify from their threads after each change; the reporter
// waits for a change it has not seen yet. Changes that come in a burst are
// reported together.
class ChangeSignal {
 public:
  void Notify() {
    {
      std::lock_guard lock(mu_);
      ++count_;
    }
    cv_.notify_all();
  }
  // Blocks until a change after *seen (and records it there); false on stop.
  bool Wait(uint64_t* seen, std::stop_token stop) {
    std::unique_lock lock(mu_);
    if (!cv_.wait(lock, stop, [&] { return count_ != *seen; })) return false;
    *seen = count_;
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  uint64_t count_ = 0;  // guarded by mu_
};

struct SimKubeletOptions {
  std::string dir;                   // the device-plugins directory
  std::string pod_resources_file;    // empty: no pod-resources API
  std::string pod_resources_socket;  // empty: <DIR's parent>/pod-resources/kubelet.sock
  bool log_list_calls = false;       // print pod-resources call counts as they change
};

// The kubelet dir of a device-plugins dir: "/x/var/lib/kubelet/device-plugins/"
// -> "/x/var/lib/kubelet".
std::string KubeletDirOf(std::string device_plugins_dir) {
  while (device_plugins_dir.size() > 1 && device_plugins_dir.back() == '/') {
    device_plugins_dir.pop_back();
  }
  return DirName(device_plugins_dir);
}

// The fake pod-resources server and the file it answers from.
class PodResourcesFromFile {
 public:
  PodResourcesFromFile(std::string file, std::string socket, JsonOut* out,
                       std::function<void()> on_call)
      : file_(std::move(file)),
        socket_(std::move(socket)),
        out_(out),
        on_call_(std::move(on_call)) {}

  // Loads the file (a bad one is fatal here) and serves.
  Status Start() {
    auto table = sim::LoadPodResourcesFile(file_);
    if (!table.ok()) return table.status();
    auto fake = sim::FakePodResources::Start(socket_, on_call_);
    if (!fake.ok()) return fake.status();
    fake_ = std::move(*fake);
    fake_->SetAssignments(*table);
    Report(table->size(), Status::Ok());
    return Status::Ok();
  }

  // Re-reads the file; a bad one keeps the previous table.
  void Reload() {
    auto table = sim::LoadPodResourcesFile(file_);
    if (!table.ok()) {
      Report(fake_->Assignments().size(), table.status());
      return;
    }
    fake_->SetAssignments(*table);
    Report(table->size(), Status::Ok());
  }

  // A kubelet restart: the socket goes away and comes back, then a re-read.
  void Restart() {
    std::vector<kubelet::ContainerDevices> previous = fake_->Assignments();
    fake_->Stop();
    auto fake = sim::FakePodResources::Start(socket_, on_call_);
    if (!fake.ok()) {
      Report(0, fake.status());
      return;
    }
    fake_ = std::move(*fake);
    fake_->SetAssignments(std::move(previous));
    Reload();
  }

  void Stop() { fake_->Stop(); }

  // List and Get calls served since the socket was (re)started.
  std::pair<uint64_t, uint64_t> Calls() const { return {fake_->ListCalls(), fake_->GetCalls()}; }

 private:
  void Report(size_t entries, const Status& s) {
    out_->Print({{"event", "pod-resources"},
                 {"socket", socket_},
                 {"file", file_},
                 {"entries", entries},
                 {"ok", s.ok()},
                 {"error", s.ok() ? "" : s.message()}});
  }

  const std::string file_;
  const std::string socket_;
  JsonOut* const out_;
  const std::function<void()> on_call_;
  std::unique_ptr<sim::FakePodResources> fake_;
};

int RunSimKubelet(const SimKubeletOptions& options) {
  const std::string& dir = options.dir;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  if (!options.pod_resources_file.empty()) sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts

  ChangeSignal changed;  // outlives the fakes, which notify it until they stop
  auto kubelet = sim::FakeKubelet::Start(dir, [&changed] { changed.Notify(); });
  if (!kubelet.ok()) {
    std::fprintf(stderr, "gpuop sim kubelet: %s\n", kubelet.status().message().c_str());
    return kExitFailure;
  }
  JsonOut out;
  out.Print({{"event", "serving"}, {"socket", (*kubelet)->socket_path()}});

  std::unique_ptr<PodResourcesFromFile> pod_resources;
  if (!options.pod_resources_file.empty()) {
    const std::string socket = options.pod_resources_socket.empty()
                                   ? kubelet::PodResourcesSocket(KubeletDirOf(dir))
                                   : options.pod_resources_socket;
    std::function<void()> on_call;
    if (options.log_list_calls) on_call = [&changed] { changed.Notify(); };
    pod_resources = std::make_unique<PodResourcesFromFile>(options.pod_resources_file, socket, &out,
                                                           std::move(on_call));
    Status s = pod_resources->Start();
    if (!s.ok()) {
      std::fprintf(stderr, "gpuop sim kubelet: %s\n", s.message().c_str());
      (*kubelet)->Stop();
      return kExitFailure;
    }
  }

  // The fake kubelet keeps state, not a feed: at each change it signals,
  // report what changed since the last report.
  std::mutex mu;
  size_t seen = 0;                          // registrations printed
  std::map<std::string, uint64_t> updates;  // lists printed per resource
  std::pair<uint64_t, uint64_t> calls_printed{0, 0};
  auto report = [&] {
    std::lock_guard lock(mu);
    if (pod_resources && options.log_list_calls) {
      if (auto calls = pod_resources->Calls(); calls != calls_printed) {
        calls_printed = calls;
        out.Print({{"event", "pod-resources-calls"}, {"list", calls.first}, {"get", calls.second}});
      }
    }
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
  std::jthread reporter([&](std::stop_token stop) {
    uint64_t changes_seen = 0;
    do {
      report();
    } while (changed.Wait(&changes_seen, stop));
  });

  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGUSR1) {
      pod_resources->Reload();
      continue;
    }
    if (sig != SIGHUP) break;
    std::lock_guard lock(mu);  // the reporter reads pod_resources' server
    if (pod_resources) pod_resources->Restart();
    Status s = (*kubelet)->Restart();
    seen = 0;
    updates.clear();
    out.Print({{"event", "restart"}, {"ok", s.ok()}, {"error", s.ok() ? "" : s.message()}});
  }
  reporter.request_stop();
  reporter.join();
  (*kubelet)->Stop();
  if (pod_resources) pod_resources->Stop();
  out.Print({{"event", "stopped"}});
  return kExitOk;
}

}  // namespace

void RegisterSimKubeletCommand(CLI::App& sim, const GlobalOptions&, Action* action) {
  auto options = std::make_shared<SimKubeletOptions>();
  auto* cmd = sim.add_subcommand(
      "kubelet",
      "A fake kubelet for device plugins: serves Registration on DIR/kubelet.sock, follows each "
      "plugin's ListAndWatch and prints JSON lines. SIGHUP: a kubelet restart. With "
      "--pod-resources it also serves the pod-resources API; SIGUSR1 re-reads that file");
  cmd->add_option("--dir", options->dir,
                  "The device-plugins directory (e.g. <root>/var/lib/kubelet/"
                  "device-plugins); created if missing")
      ->required();
  cmd->add_option("--pod-resources", options->pod_resources_file,
                  "Also serve the pod-resources API (v1.PodResourcesLister) on "
                  "<DIR's parent>/pod-resources/kubelet.sock, answering List/Get from FILE: a "
                  "JSON array of {\"pod\": \"train-0\", \"namespace\": \"ml\" (default "
                  "\"default\"), \"container\": \"trainer\", \"resource\": \"nvidia.com/gpu\", "
                  "\"devices\": [\"GPU-<uuid>\", \"MIG-<uuid>\", \"GPU-<uuid>::1\"]}. Re-read on "
                  "SIGUSR1 and SIGHUP; a bad file then keeps the previous table")
      ->check(CLI::ExistingFile);
  cmd->add_option("--pod-resources-socket", options->pod_resources_socket,
                  "Where to serve the pod-resources API instead (needs --pod-resources)")
      ->needs(cmd->get_option("--pod-resources"));
  cmd->add_flag("--log-list-calls", options->log_list_calls,
                "Print {\"event\":\"pod-resources-calls\",\"list\":N,\"get\":M} whenever the "
                "pod-resources calls served change (counts restart with the socket on SIGHUP)")
      ->needs(cmd->get_option("--pod-resources"));
  cmd->callback([action, options] { *action = [options] { return RunSimKubelet(*options); }; });
}

}  // namespace gpuop::cli
