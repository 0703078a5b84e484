#include "sim/kubelet/sim_kubelet.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "base/files.h"
#include "kubelet/pod_resources.h"
#include "sim/kubelet/fake_kubelet.h"
#include "sim/kubelet/fake_pod_resources.h"

namespace gpuop::sim {
namespace {

class JsonOut {
 public:
  explicit JsonOut(std::FILE* out) : out_(out) {}
  void Print(const nlohmann::json& j) {
    std::lock_guard lock(mu_);
    std::string line = j.dump() + "\n";
    std::fputs(line.c_str(), out_);
    std::fflush(out_);
  }

 private:
  std::mutex mu_;
  std::FILE* const out_;
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

// "/x/var/lib/kubelet/device-plugins/" -> "/x/var/lib/kubelet".
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
    auto table = LoadPodResourcesFile(file_);
    if (!table.ok()) return table.status();
    auto fake = FakePodResources::Start(socket_, on_call_);
    if (!fake.ok()) return fake.status();
    fake_ = std::move(*fake);
    fake_->SetAssignments(*table);
    Report(table->size(), Status::Ok());
    return Status::Ok();
  }

  // Re-reads the file; a bad one keeps the previous table.
  void Reload() {
    auto table = LoadPodResourcesFile(file_);
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
    auto fake = FakePodResources::Start(socket_, on_call_);
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
  std::unique_ptr<FakePodResources> fake_;
};

}  // namespace

struct SimKubelet::Impl {
  explicit Impl(SimKubeletOptions o) : options(std::move(o)), out(options.out) {}

  // The fake kubelet keeps state, not a feed: at each change it signals,
  // report what changed since the last report.
  void Report() {
    std::lock_guard lock(mu);
    if (pod_resources && options.log_list_calls) {
      if (auto calls = pod_resources->Calls(); calls != calls_printed) {
        calls_printed = calls;
        out.Print({{"event", "pod-resources-calls"}, {"list", calls.first}, {"get", calls.second}});
      }
    }
    auto regs = kubelet->Registrations();
    for (; seen < regs.size(); ++seen) {
      const KubeletRegistration& r = regs[seen];
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
      uint64_t n = kubelet->ListAndWatchUpdates(r.resource_name);
      auto it = updates.find(r.resource_name);
      if (n == 0 || (it != updates.end() && it->second == n)) continue;
      updates[r.resource_name] = n;
      nlohmann::json devices = nlohmann::json::array();
      size_t healthy = 0;
      auto list = kubelet->Devices(r.resource_name);
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
  }

  const SimKubeletOptions options;
  JsonOut out;
  ChangeSignal changed;  // outlives the fakes, which notify it until they stop
  std::unique_ptr<FakeKubelet> kubelet;
  std::unique_ptr<PodResourcesFromFile> pod_resources;
  std::mutex mu;                            // the reporter's state, and the fakes across a restart
  size_t seen = 0;                          // registrations printed
  std::map<std::string, uint64_t> updates;  // lists printed per resource
  std::pair<uint64_t, uint64_t> calls_printed{0, 0};
  std::jthread reporter;
  bool stopped = false;
};

SimKubelet::SimKubelet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SimKubelet::~SimKubelet() { Stop(); }

Result<std::unique_ptr<SimKubelet>> SimKubelet::Start(SimKubeletOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  Impl* i = impl.get();
  GPUOP_ASSIGN_OR_RETURN(i->kubelet,
                         FakeKubelet::Start(i->options.dir, [i] { i->changed.Notify(); }));
  i->out.Print({{"event", "serving"}, {"socket", i->kubelet->socket_path()}});
  if (!i->options.pod_resources_file.empty()) {
    const std::string socket = i->options.pod_resources_socket.empty()
                                   ? kubelet::PodResourcesSocket(KubeletDirOf(i->options.dir))
                                   : i->options.pod_resources_socket;
    std::function<void()> on_call;
    if (i->options.log_list_calls) on_call = [i] { i->changed.Notify(); };
    i->pod_resources = std::make_unique<PodResourcesFromFile>(i->options.pod_resources_file, socket,
                                                              &i->out, std::move(on_call));
    if (Status s = i->pod_resources->Start(); !s.ok()) {
      i->kubelet->Stop();
      return s;
    }
  }
  i->reporter = std::jthread([i](std::stop_token stop) {
    uint64_t changes_seen = 0;
    do {
      i->Report();
    } while (i->changed.Wait(&changes_seen, stop));
  });
  return std::unique_ptr<SimKubelet>(new SimKubelet(std::move(impl)));
}

void SimKubelet::ReloadPodResources() {
  if (impl_->pod_resources) impl_->pod_resources->Reload();
}

void SimKubelet::Restart() {
  Impl& i = *impl_;
  std::lock_guard lock(i.mu);  // the reporter reads the fakes
  if (i.pod_resources) i.pod_resources->Restart();
  Status s = i.kubelet->Restart();
  i.seen = 0;
  i.updates.clear();
  i.out.Print({{"event", "restart"}, {"ok", s.ok()}, {"error", s.ok() ? "" : s.message()}});
}

void SimKubelet::Stop() {
  Impl& i = *impl_;
  if (std::exchange(i.stopped, true)) return;
  i.reporter.request_stop();
  if (i.reporter.joinable()) i.reporter.join();
  i.kubelet->Stop();
  if (i.pod_resources) i.pod_resources->Stop();
  i.out.Print({{"event", "stopped"}});
}

}  // namespace gpuop::sim
