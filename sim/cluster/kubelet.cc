#include "sim/cluster/kubelet.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/files.h"
#include "base/json_field.h"
#include "base/log.h"
#include "base/strings.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "sim/cluster/cdi_view.h"
#include "sim/cluster/dra_manager.h"
#include "sim/cluster/pod_spec.h"
#include "sim/cluster/podman.h"
#include "sim/kubelet/fake_kubelet.h"
#include "sim/kubelet/fake_pod_resources.h"

namespace gpuop::simcluster {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

const kube::Resource kRuntimeClasses{"node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", false};

// The simulator's state reaches containers here (kubelet.h).
constexpr const char* kSimMountPath = "/run/gpuop-sim";

std::string NowRfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// podman reports "2026-12-03 18:17:48.123456789 +0000 UTC"; Kubernetes wants RFC 3339.
std::string ToRfc3339(const std::string& podman_time) {
  if (podman_time.size() < 19 || podman_time.rfind("0001-01-01", 0) == 0) return NowRfc3339();
  if (podman_time.find('T') != std::string::npos) {
    return podman_time.substr(0, 19) + "Z";
  }
  return podman_time.substr(0, 10) + "T" + podman_time.substr(11, 8) + "Z";
}

// A stable 32-hex-digit id from a name (machine ID, boot ID).
std::string StableId(const std::string& name) {
  std::string out;
  uint64_t h = 1469598103934665603ull;
  for (int round = 0; round < 2; ++round) {
    for (unsigned char c : name) {
      h ^= c;
      h *= 1099511628211ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    out += buf;
  }
  return out;
}

// One container's answers for several resources, as the kubelet combines them.
void MergeAllocation(const kubelet::ContainerAllocation& a, kubelet::ContainerAllocation& into) {
  for (const auto& [k, v] : a.envs) into.envs[k] = v;
  into.mounts.insert(into.mounts.end(), a.mounts.begin(), a.mounts.end());
  into.devices.insert(into.devices.end(), a.devices.begin(), a.devices.end());
  for (const auto& [k, v] : a.annotations) into.annotations[k] = v;
  into.cdi_devices.insert(into.cdi_devices.end(), a.cdi_devices.begin(), a.cdi_devices.end());
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// The extended resources (domain/name, outside kubernetes.io) a container asks for.
std::map<std::string, int64_t> ExtendedRequests(const Json& container) {
  std::map<std::string, int64_t> out;
  const Json& res = Field(container, "resources");
  for (const char* kind : {"limits", "requests"}) {
    const Json& m = Field(res, kind);
    if (!m.is_object()) continue;
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& name = it.key();
      if (name.find('/') == std::string::npos || StartsWith(name, "kubernetes.io/")) continue;
      std::string v = it->is_string() ? it->get<std::string>() : it->dump();
      auto n = ParseUint(v);
      if (n && !out.count(name)) out[name] = static_cast<int64_t>(*n);
    }
  }
  return out;
}

// A blocking HTTP GET with a deadline: the kubelet's httpGet probe.
// Success is a status in [200, 400).
Status HttpProbe(const std::string& host, int port, const std::string& path, int timeout_s,
                 const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string url = "http://" + host + ":" + std::to_string(port) + path;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("Get \"" + url + "\": socket failed");
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return InvalidArgument("Get \"" + url + "\": not an IPv4 address");
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    return Unavailable(
        "Get \"" + url + "\": dial tcp " + host + ":" + std::to_string(port) +
        ": connect: " + (err == ECONNREFUSED ? "connection refused" : std::strerror(err)));
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                    "\r\nUser-Agent: kube-probe/1.35\r\nAccept: */*\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  req += "\r\n";
  (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  char buf[512];
  ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  if (n <= 0) {
    return DeadlineExceeded("Get \"" + url +
                            "\": context deadline exceeded (Client.Timeout exceeded while awaiting "
                            "headers)");
  }
  buf[n] = 0;
  std::string line(buf, strnlen(buf, static_cast<size_t>(n)));
  int code = 0;
  if (line.size() > 12) code = std::atoi(line.c_str() + 9);
  if (code >= 200 && code < 400) return Status::Ok();
  return Unavailable("HTTP probe failed with statuscode: " + std::to_string(code));
}

Status TcpProbe(const std::string& host, int port, int timeout_s) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("socket failed");
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::close(fd);
  if (rc == 0) return Status::Ok();
  return Unavailable("dial tcp " + host + ":" + std::to_string(port) + ": connect: " +
                     (err == ECONNREFUSED ? "connection refused" : std::strerror(err)));
}

// Back-off of a container's restarts, as the kubelet's: none before the first
// restart, then 10 s doubling to `max` (5 min by default); reset after 10 min
// of running.
std::chrono::seconds RestartBackoff(int restarts_in_a_row, std::chrono::seconds max) {
  if (restarts_in_a_row <= 0) return 0s;
  int64_t s = 10;
  for (int i = 1; i < restarts_in_a_row && s < max.count(); ++i) s *= 2;
  return std::chrono::seconds(std::min<int64_t>(s, max.count()));
}

}  // namespace

std::string CriLogText(const std::string& content) {
  std::string out;
  for (const std::string& line : Split(content, '\n')) {
    // <time> <stream> <tag> <text>
    size_t a = line.find(' ');
    size_t b = a == std::string::npos ? a : line.find(' ', a + 1);
    size_t c = b == std::string::npos ? b : line.find(' ', b + 1);
    if (c == std::string::npos) {
      if (b != std::string::npos && line.substr(b + 1) == "F") out += "\n";  // an empty full line
      continue;
    }
    std::string tag = line.substr(b + 1, c - b - 1);
    out += line.substr(c + 1);
    if (tag != "P") out += "\n";
  }
  return out;
}

bool RuntimeHandlerConfigured(const std::string& host_root, const std::string& handler) {
  std::error_code ec;
  const std::string dir = host_root + "/etc/containerd";
  if (!std::filesystem::is_directory(dir, ec)) return false;
  const std::vector<std::string> needles = {
      "runtimes." + handler + "]", "runtimes." + handler + ".", "runtimes.\"" + handler + "\""};
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".toml") continue;
    auto text = ReadFile(it->path().string());
    if (!text.ok()) continue;
    for (const auto& n : needles) {
      if (text->find(n) != std::string::npos) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------

class Kubelet::Impl {
 public:
  Impl(KubeletOptions o, kube::Client* client, Podman podman)
      : opt_(std::move(o)), client_(client), podman_(std::move(podman)) {}

  Status Start();
  void Stop();
  Status Restart(std::chrono::milliseconds down);
  Result<std::string> Logs(const std::string& ns, const std::string& pod,
                           const std::string& container, bool previous) const;

  // ---- shared with pod workers ----
  struct ContainerRun {
    std::string name;          // spec name
    std::string runtime_name;  // podman's name of the current run
    std::string id;
    int restarts = 0;  // restartCount
    int crashes_in_a_row = 0;
    enum class State { kWaiting, kRunning, kTerminated } state = State::kWaiting;
    std::string waiting_reason = "ContainerCreating", waiting_message;
    std::string started_at;
    Json last_terminated;  // {exitCode, reason, startedAt, finishedAt, containerID}
    Json terminated;       // current terminated state
    int exit_code = 0;
    int pidfd = -1;
    bool ever_started = false;
    bool started = false;  // startup probe passed (or none)
    bool ready = false;
    Clock::time_point next_start{};
    Clock::time_point running_since{};
    // Probe bookkeeping.
    struct ProbeState {
      std::optional<Probe> spec;
      Clock::time_point next{};
      int successes = 0, failures = 0;
    } startup, readiness, liveness;
    bool image_failed_once = false;
  };

  struct PodWorker {
    std::string uid, ns, name;
    std::jthread thread;
    std::mutex mu;
    std::condition_variable cv;
    Json pod;              // latest seen
    bool deleted = false;  // gone from the API
    bool notified = false;
  };

  void Dispatch(const Json& pod, bool deleted);
  void RunPod(PodWorker* w, std::stop_token stop);
  void NodeLoop(std::stop_token stop);

  KubeletOptions opt_;
  kube::Client* client_;
  Podman podman_;
  NodeContext ctx_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::unique_ptr<sim::FakeKubelet> devices_;
  std::shared_ptr<sim::FakePodResources> pod_resources_;  // GUARDED_BY(mu_): Restart replaces it
  std::unique_ptr<DraManager> dra_;
  std::unique_ptr<kube::Informer> pods_;
  std::jthread node_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex restart_mu_;  // one Restart at a time, never during Stop

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<PodWorker>> workers_;  // by uid
  // Device assignments: pod uid → container → resource → ids.
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<std::string>>>>
      assigned_;
  std::map<std::string, std::pair<std::string, std::string>> pod_names_;  // uid → (ns, name)
  // Where each container's logs are: (ns/pod/container) → files, oldest first.
  std::map<std::string, std::vector<std::string>> log_files_;

  // Device manager.
  Result<std::map<std::string, kubelet::ContainerAllocation>> Admit(const Json& pod,
                                                                    const std::string& uid,
                                                                    std::string* reason);
  void ReleaseDevices(const std::string& uid);
  void PublishPodResources();

  // A token of the pod's ServiceAccount from the TokenRequest API, as the
  // real kubelet asks for a projected token.
  Result<std::string> RequestToken(const Json& pod, const std::string& audience, int64_t seconds);
};

Result<std::string> Kubelet::Impl::RequestToken(const Json& pod, const std::string& audience,
                                                int64_t seconds) {
  const Json meta = pod.value("metadata", Json::object());
  const Json spec = pod.value("spec", Json::object());
  const std::string ns = meta.value("namespace", "default");
  std::string sa = spec.value("serviceAccountName", spec.value("serviceAccount", ""));
  if (sa.empty()) sa = "default";
  Json request{{"apiVersion", "authentication.k8s.io/v1"},
               {"kind", "TokenRequest"},
               {"spec",
                {{"expirationSeconds", seconds},
                 {"boundObjectRef",
                  {{"apiVersion", "v1"},
                   {"kind", "Pod"},
                   {"name", meta.value("name", "")},
                   {"uid", meta.value("uid", "")}}}}}};
  if (!audience.empty()) request["spec"]["audiences"] = Json::array({audience});
  const std::string path = "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token";
  auto body = client_->Raw("POST", path, request.dump());
  if (!body.ok() && kube::IsNotFound(body.status()) && sa == "default") {
    // Every namespace has a "default" ServiceAccount in a real cluster
    // (kube-controller-manager's serviceaccounts controller, which this
    // simulator lacks): made on first use.
    Json def{{"apiVersion", "v1"},
             {"kind", "ServiceAccount"},
             {"metadata", {{"name", "default"}, {"namespace", ns}}}};
    (void)client_->Create(kube::resources::kServiceAccounts, ns, def);
    body = client_->Raw("POST", path, request.dump());
  }
  if (!body.ok()) return body.status().Annotate("ServiceAccount " + ns + "/" + sa);
  try {
    return Json::parse(*body).at("status").at("token").get<std::string>();
  } catch (const std::exception& e) {
    return Internal("TokenRequest for ServiceAccount " + ns + "/" + sa +
                    " answered without a token: " + e.what());
  }
}

// ---- node -------------------------------------------------------------------

Status Kubelet::Impl::Start() {
  ctx_.node_name = opt_.node_name;
  ctx_.node_ip = opt_.node_ip;
  ctx_.host_root = opt_.host_root;
  ctx_.pods_dir = opt_.host_root + "/var/lib/kubelet/pods";
  ctx_.api_host = opt_.api_host;
  ctx_.api_port = opt_.api_port;
  ctx_.ca_file = opt_.ca_file;
  ctx_.node_allocatable = {{"cpu", opt_.cpu}, {"memory", opt_.memory}};
  ctx_.get_configmap = [this](const std::string& ns, const std::string& name) {
    return client_->Get(kube::resources::kConfigMaps, ns, name);
  };
  ctx_.get_secret = [this](const std::string& ns, const std::string& name) {
    return client_->Get(kube::resources::kSecrets, ns, name);
  };
  ctx_.service_account_token = [this](const Json& pod, const std::string& audience,
                                      int64_t seconds) {
    return RequestToken(pod, audience, seconds);
  };
  GPUOP_RETURN_IF_ERROR(MakeDirs(ctx_.pods_dir));
  GPUOP_RETURN_IF_ERROR(MakeDirs(opt_.host_root + "/var/log/pods"));

  kube::EventRecorderOptions eo;
  eo.component = "kubelet";
  eo.host = opt_.node_name;
  eo.instance = opt_.node_name;
  events_ = std::make_unique<kube::EventRecorder>(*client_, eo);

  auto dp = sim::FakeKubelet::Start(opt_.host_root + "/var/lib/kubelet/device-plugins");
  if (!dp.ok()) return dp.status().Annotate("the device plugin socket of node " + opt_.node_name);
  devices_ = std::move(dp).value();
  GPUOP_RETURN_IF_ERROR(MakeDirs(opt_.host_root + "/var/lib/kubelet/pod-resources"));
  auto pr =
      sim::FakePodResources::Start(opt_.host_root + "/var/lib/kubelet/pod-resources/kubelet.sock");
  if (!pr.ok()) return pr.status().Annotate("the pod-resources socket of node " + opt_.node_name);
  {
    std::lock_guard l(mu_);
    pod_resources_ = std::move(pr).value();
  }
  const std::string registry = opt_.host_root + "/var/lib/kubelet/plugins_registry";
  GPUOP_RETURN_IF_ERROR(MakeDirs(registry));
  GPUOP_RETURN_IF_ERROR(MakeDirs(opt_.host_root + "/var/lib/kubelet/plugins"));
  auto dra = DraManager::Start({opt_.node_name, registry, opt_.host_root}, client_);
  if (!dra.ok()) return dra.status().Annotate("the DRA manager of node " + opt_.node_name);
  dra_ = std::move(dra).value();

  // Register the Node (a leftover object of the same name is taken over, as a
  // kubelet re-registering does).
  Json labels = {{"kubernetes.io/hostname", opt_.node_name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"beta.kubernetes.io/os", "linux"},
                 {"beta.kubernetes.io/arch", "amd64"}};
  for (auto it = opt_.extra_labels.begin(); it != opt_.extra_labels.end(); ++it)
    labels[it.key()] = *it;
  Json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata",
                {{"name", opt_.node_name},
                 {"labels", labels},
                 {"annotations", {{"node.alpha.kubernetes.io/ttl", "0"}}}}},
               {"spec", Json::object()}};
  auto created = client_->Create(kube::resources::kNodes, "", node);
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
    return created.status().Annotate("register node " + opt_.node_name);
  }
  // The lease namespace exists on a real cluster from the start.
  (void)client_->Create(kube::resources::kNamespaces, "",
                        Json{{"apiVersion", "v1"},
                             {"kind", "Namespace"},
                             {"metadata", {{"name", "kube-node-lease"}}}});

  kube::InformerOptions io;
  io.resource = kube::resources::kPods;
  io.field_selector = "spec.nodeName=" + opt_.node_name;
  pods_ = std::make_unique<kube::Informer>(client_, io);
  kube::EventHandler h;
  h.on_add = [this](const kube::ObjectPtr& o) { Dispatch(*o, false); };
  h.on_update = [this](const kube::ObjectPtr&, const kube::ObjectPtr& o) { Dispatch(*o, false); };
  h.on_delete = [this](const kube::ObjectPtr& o) { Dispatch(*o, true); };
  pods_->AddEventHandler(std::move(h));

  node_thread_ = std::jthread([this](std::stop_token st) { NodeLoop(st); });
  pods_->Start();
  return Status::Ok();
}

// Node status and lease: capacity from the device plugins, Ready heartbeat.
void Kubelet::Impl::NodeLoop(std::stop_token stop) {
  Json last_ext;
  // Device counts of every resource ever registered: after a kubelet restart
  // a resource keeps its capacity with nothing allocatable until its plugin
  // registers again (the kubelet's checkpoint).
  std::map<std::string, size_t> known;
  auto last_heartbeat = Clock::time_point{};
  while (!stop.stop_requested()) {
    Json capacity = {{"cpu", opt_.cpu},
                     {"memory", opt_.memory},
                     {"pods", opt_.pods},
                     {"ephemeral-storage", opt_.ephemeral_storage},
                     {"hugepages-2Mi", "0"}};
    Json allocatable = capacity;
    Json ext = Json::object();
    std::set<std::string> resources;
    for (const auto& r : devices_->Registrations()) {
      if (r.accepted) resources.insert(r.resource_name);
    }
    for (const auto& [r, count] : known) {
      if (resources.count(r)) continue;
      capacity[r] = std::to_string(count);
      allocatable[r] = "0";
      ext[r] = {count, 0};
    }
    for (const std::string& r : resources) {
      auto devs = devices_->Devices(r);
      int64_t healthy = std::count_if(devs.begin(), devs.end(), [](auto& d) { return d.healthy; });
      // A plugin whose stream ended keeps its capacity but nothing allocatable, as the kubelet
      // does.
      if (!devices_->StreamOpen(r)) healthy = 0;
      capacity[r] = std::to_string(devs.size());
      allocatable[r] = std::to_string(healthy);
      ext[r] = {devs.size(), healthy};
      known[r] = devs.size();
    }
    const bool heartbeat = Clock::now() - last_heartbeat > 10s;
    if (ext != last_ext || heartbeat) {
      std::string now = NowRfc3339();
      Json status = {
          {"capacity", capacity},
          {"allocatable", allocatable},
          {"addresses", Json::array({{{"type", "InternalIP"}, {"address", opt_.node_ip}},
                                     {{"type", "Hostname"}, {"address", opt_.node_name}}})},
          {"nodeInfo",
           {{"machineID", StableId(opt_.node_name)},
            {"systemUUID", StableId(opt_.node_name + "/uuid")},
            {"bootID", StableId(opt_.node_name + "/boot")},
            {"kernelVersion", opt_.kernel_version},
            {"osImage", opt_.os_image},
            {"containerRuntimeVersion", "containerd://1.7.20"},
            {"kubeletVersion", "v1.35.0-gpuop-sim"},
            {"kubeProxyVersion", ""},
            {"operatingSystem", "linux"},
            {"architecture", "amd64"}}},
          {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
          {"conditions", Json::array({
                             {{"type", "MemoryPressure"},
                              {"status", "False"},
                              {"reason", "KubeletHasSufficientMemory"},
                              {"message", "kubelet has sufficient memory available"},
                              {"lastHeartbeatTime", now}},
                             {{"type", "DiskPressure"},
                              {"status", "False"},
                              {"reason", "KubeletHasNoDiskPressure"},
                              {"message", "kubelet has no disk pressure"},
                              {"lastHeartbeatTime", now}},
                             {{"type", "PIDPressure"},
                              {"status", "False"},
                              {"reason", "KubeletHasSufficientPID"},
                              {"message", "kubelet has sufficient PID available"},
                              {"lastHeartbeatTime", now}},
                             {{"type", "Ready"},
                              {"status", "True"},
                              {"reason", "KubeletReady"},
                              {"message", "kubelet is posting ready status"},
                              {"lastHeartbeatTime", now}},
                         })}};
      auto r =
          client_->Patch(kube::resources::kNodes, "", opt_.node_name, kube::PatchType::kStrategic,
                         Json{{"status", status}}, kube::PatchOptions{"", false, "status"});
      if (r.ok()) {
        last_ext = ext;
        if (heartbeat) last_heartbeat = Clock::now();
      } else {
        LogWarn("kubelet: node status update failed",
                {{"node", opt_.node_name}, {"error", r.status().message()}});
      }
      if (heartbeat) {
        Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                      {"kind", "Lease"},
                      {"metadata", {{"name", opt_.node_name}, {"namespace", "kube-node-lease"}}},
                      {"spec",
                       {{"holderIdentity", opt_.node_name},
                        {"leaseDurationSeconds", 40},
                        {"renewTime", NowRfc3339().substr(0, 19) + ".000000Z"}}}};
        (void)client_->Apply(kube::resources::kLeases, lease, "kubelet");
      }
    }
    RealClock().SleepFor(1s, stop);
  }
}

// ---- device manager ---------------------------------------------------------

Result<std::map<std::string, kubelet::ContainerAllocation>> Kubelet::Impl::Admit(
    const Json& pod, const std::string& uid, std::string* reason) {
  std::map<std::string, kubelet::ContainerAllocation> out;
  std::lock_guard l(mu_);
  if (assigned_.count(
          uid)) {  // admitted before (a restart of the worker): ask again for the same ids
    for (const auto& [container, by_res] : assigned_[uid]) {
      for (const auto& [res, ids] : by_res) {
        auto a = devices_->Allocate(res, ids);
        if (!a.ok()) return a.status();
        MergeAllocation(*a, out[container]);
      }
    }
    return out;
  }
  std::map<std::string, std::set<std::string>> used;
  for (const auto& [u, by_c] : assigned_) {
    for (const auto& [c, by_r] : by_c) {
      for (const auto& [r, ids] : by_r) used[r].insert(ids.begin(), ids.end());
    }
  }
  std::map<std::string, std::map<std::string, std::vector<std::string>>> mine;
  std::set<std::string> registered;
  for (const auto& r : devices_->Registrations()) {
    if (r.accepted) registered.insert(r.resource_name);
  }
  for (const char* list : {"initContainers", "containers"}) {
    const Json& cs = Field(Field(pod, "spec"), list);
    if (!cs.is_array()) continue;
    for (const Json& c : cs) {
      for (const auto& [res, n] : ExtendedRequests(c)) {
        if (n == 0) continue;
        std::vector<std::string> avail;
        if (registered.count(res) && devices_->StreamOpen(res)) {
          for (const auto& d : devices_->Devices(res)) {
            if (d.healthy && !used[res].count(d.id)) avail.push_back(d.id);
          }
        }
        if (static_cast<int64_t>(avail.size()) < n) {
          *reason = "UnexpectedAdmissionError";
          return FailedPrecondition(
              "Allocate failed due to requested number of devices unavailable for " + res +
              ". Requested: " + std::to_string(n) + ", Available: " + std::to_string(avail.size()) +
              ", which is unexpected");
        }
        std::vector<std::string> ids(avail.begin(), avail.begin() + n);
        auto preferred = devices_->GetPreferredAllocation(res, avail, {}, static_cast<int>(n));
        if (preferred.ok() && static_cast<int64_t>(preferred->size()) == n) ids = *preferred;
        used[res].insert(ids.begin(), ids.end());
        auto a = devices_->Allocate(res, ids);
        if (!a.ok()) {
          *reason = "UnexpectedAdmissionError";
          return Unavailable("Allocate failed: " + a.status().message());
        }
        mine[StringField(c, "name")][res] = ids;
        MergeAllocation(*a, out[StringField(c, "name")]);
      }
    }
  }
  if (!mine.empty()) assigned_[uid] = std::move(mine);
  return out;
}

void Kubelet::Impl::ReleaseDevices(const std::string& uid) {
  if (dra_) dra_->ReleasePod(uid);
  {
    std::lock_guard l(mu_);
    assigned_.erase(uid);
  }
  PublishPodResources();
}

void Kubelet::Impl::PublishPodResources() {
  std::vector<kubelet::ContainerDevices> list;
  std::shared_ptr<sim::FakePodResources> server;
  {
    std::lock_guard l(mu_);
    server = pod_resources_;
    for (const auto& [uid, by_c] : assigned_) {
      auto names = pod_names_.find(uid);
      if (names == pod_names_.end()) continue;
      for (const auto& [c, by_r] : by_c) {
        for (const auto& [r, ids] : by_r) {
          list.push_back(
              kubelet::ContainerDevices{names->second.second, names->second.first, c, r, ids});
        }
      }
    }
  }
  if (server) server->SetAssignments(std::move(list));
}

// ---- pods -------------------------------------------------------------------

void Kubelet::Impl::Dispatch(const Json& pod, bool deleted) {
  if (stopping_) return;
  const Json& meta = Field(pod, "metadata");
  std::string uid = StringField(meta, "uid");
  if (uid.empty()) return;
  std::lock_guard l(mu_);
  auto it = workers_.find(uid);
  if (it == workers_.end()) {
    if (deleted) return;
    std::string phase = StringField(Field(pod, "status"), "phase");
    auto w = std::make_unique<PodWorker>();
    w->uid = uid;
    w->ns = StringField(meta, "namespace");
    w->name = StringField(meta, "name");
    w->pod = pod;
    pod_names_[uid] = {w->ns, w->name};
    PodWorker* raw = w.get();
    workers_[uid] = std::move(w);
    // A pod that finished before this kubelet started is left as it is.
    if (phase == "Succeeded" || phase == "Failed") {
      raw->thread = std::jthread([](std::stop_token) {});
      return;
    }
    raw->thread = std::jthread([this, raw](std::stop_token st) { RunPod(raw, st); });
    return;
  }
  PodWorker* w = it->second.get();
  {
    std::lock_guard wl(w->mu);
    w->pod = pod;
    if (deleted) w->deleted = true;
    w->notified = true;
  }
  w->cv.notify_all();
}

void Kubelet::Impl::RunPod(PodWorker* w, std::stop_token stop) {
  using State = ContainerRun::State;
  Json pod;
  {
    std::lock_guard l(w->mu);
    pod = w->pod;
  }
  const std::string pod_label = w->name + "_" + w->ns + "(" + w->uid + ")";
  const std::string log_dir =
      opt_.host_root + "/var/log/pods/" + w->ns + "_" + w->name + "_" + w->uid;
  auto obj_event = [&](kube::EventType type, const std::string& reason, const std::string& msg) {
    events_->Event(kube::ReferenceTo(pod, &kube::resources::kPods), type, reason, msg);
  };

  std::vector<ContainerRun> inits, mains;
  auto make_runs = [&](const char* list, std::vector<ContainerRun>& runs) {
    const Json& cs = Field(Field(pod, "spec"), list);
    if (!cs.is_array()) return;
    for (const Json& c : cs) {
      ContainerRun r;
      r.name = StringField(c, "name");
      auto sp = ParseProbe(c, "startupProbe");
      auto rp = ParseProbe(c, "readinessProbe");
      auto lp = ParseProbe(c, "livenessProbe");
      if (sp.ok()) r.startup.spec = *sp;
      if (rp.ok()) r.readiness.spec = *rp;
      if (lp.ok()) r.liveness.spec = *lp;
      runs.push_back(std::move(r));
    }
  };
  make_runs("initContainers", inits);
  make_runs("containers", mains);
  auto spec_of = [&](const char* list, size_t i) -> const Json& {
    return Field(Field(pod, "spec"), list)[i];
  };
  const std::string restart_policy = StringField(Field(pod, "spec"), "restartPolicy", "Always");
  const std::string start_time = NowRfc3339();

  std::map<std::string, std::string> volumes;
  bool volumes_ready = false, sandbox_ready = false, admitted = false;
  std::map<std::string, kubelet::ContainerAllocation> allocations;
  std::map<std::string, std::vector<std::string>> claim_devices;  // container → CDI ids (DRA)
  std::string last_claims_error;
  std::string pod_failure_reason, pod_failure_message;
  std::string last_volume_error, last_sandbox_error;
  Json last_status;
  auto next_retry = Clock::time_point{};

  auto start_container = [&](ContainerRun& r, const Json& c, bool init) {
    std::string image = StringField(c, "image");
    auto exists = podman_.ImageExists(image);
    if (!exists.ok() || !*exists) {
      r.state = State::kWaiting;
      if (!r.image_failed_once) {
        r.waiting_reason = "ErrImagePull";
        r.waiting_message = "rpc error: code = NotFound desc = failed to pull and unpack image \"" +
                            image + "\": failed to resolve reference \"" + image + "\": " + image +
                            ": not found (gpuop sim cluster never pulls: build or load it into the "
                            "local image store)";
        obj_event(kube::EventType::kWarning, "Failed",
                  "Failed to pull image \"" + image + "\": " + r.waiting_message);
        obj_event(kube::EventType::kWarning, "Failed", "Error: ErrImagePull");
        r.image_failed_once = true;
        r.next_start = Clock::now() + 10s;
      } else {
        r.waiting_reason = "ImagePullBackOff";
        r.waiting_message = "Back-off pulling image \"" + image + "\"";
        obj_event(kube::EventType::kNormal, "BackOff", r.waiting_message);
        r.next_start = Clock::now() + 20s;
      }
      return;
    }
    auto plan = PlanContainer(pod, c, ctx_, volumes);
    if (!plan.ok()) {
      r.state = State::kWaiting;
      r.waiting_reason = "CreateContainerConfigError";
      r.waiting_message = plan.status().message();
      obj_event(kube::EventType::kWarning, "Failed", "Error: " + r.waiting_message);
      r.next_start = Clock::now() + 10s;
      return;
    }
    ContainerPlan p = std::move(plan).value();
    // The node's one piece of hardware: the simulated GPUs' state.
    if (!opt_.sim_state_dir.empty()) {
      p.env.push_back({"GPUOP_SIM_MACHINE", opt_.sim_machine});
      p.env.push_back({"GPUOP_SIM_STATE", kSimMountPath});
      p.env.push_back({"GPUOP_SIM_SEED", opt_.sim_seed});
      p.env.push_back({"GPUOP_SIM_VISIBLE", "devnodes"});
      p.mounts.push_back(Mount{opt_.sim_state_dir, kSimMountPath, false, ""});
    }
    if (p.privileged && !opt_.sim_state_dir.empty()) {
      // A privileged container sees the host's /dev: here, the node's device
      // nodes. Bind mounts, not --device: podman ignores --device with
      // --privileged, and a privileged container has no device cgroup.
      std::error_code ec;
      for (auto it = std::filesystem::directory_iterator(opt_.host_root + "/dev", ec);
           !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
        std::string n = it->path().filename().string();
        if (!StartsWith(n, "nvidia") || !(it->is_character_file(ec) || n == "nvidia-caps"))
          continue;
        p.mounts.push_back(Mount{it->path().string(), "/dev/" + n, false, ""});
      }
    }
    if (auto claimed = claim_devices.find(r.name); claimed != claim_devices.end()) {
      p.cdi_devices.insert(p.cdi_devices.end(), claimed->second.begin(), claimed->second.end());
    }
    auto alloc = allocations.find(r.name);
    if (alloc != allocations.end()) {
      for (const auto& [k, v] : alloc->second.envs) {
        auto e = std::find_if(p.env.begin(), p.env.end(), [&](auto& kv) { return kv.first == k; });
        if (e != p.env.end())
          e->second = v;
        else
          p.env.push_back({k, v});
      }
      for (const auto& m : alloc->second.mounts) {
        p.mounts.push_back(Mount{opt_.host_root + m.host_path, m.container_path, m.read_only, ""});
      }
      for (const auto& d : alloc->second.devices) {
        p.devices.push_back(opt_.host_root + d.host_path + ":" + d.container_path + ":" +
                            d.permissions);
      }
      for (const auto& [k, v] : alloc->second.annotations) p.annotations[k] = v;
      for (const auto& cdi : alloc->second.cdi_devices) p.cdi_devices.push_back(cdi);
    }
    // The runtime handler: nvidia-container-runtime in CDI mode.
    std::string rc = StringField(Field(pod, "spec"), "runtimeClassName");
    if (rc == "nvidia") {
      auto e = std::find_if(p.env.begin(), p.env.end(),
                            [](auto& kv) { return kv.first == "NVIDIA_VISIBLE_DEVICES"; });
      if (e != p.env.end() && e->second != "void" && e->second != "none" && !e->second.empty()) {
        for (const std::string& id : Split(e->second, ',')) {
          std::string name = "nvidia.com/gpu=" + std::string(Trim(id));
          if (std::find(p.cdi_devices.begin(), p.cdi_devices.end(), name) == p.cdi_devices.end()) {
            p.cdi_devices.push_back(name);
          }
        }
      }
    }
    if (!p.cdi_devices.empty()) {
      Status v = SyncCdiView(opt_.host_root, opt_.state_dir + "/cdi-view");
      if (!v.ok()) LogWarn("kubelet: CDI view", {{"node", opt_.node_name}, {"error", v.message()}});
    }
    std::sort(p.cdi_devices.begin(), p.cdi_devices.end());
    p.cdi_devices.erase(std::unique(p.cdi_devices.begin(), p.cdi_devices.end()),
                        p.cdi_devices.end());

    const std::string runtime_name = "k8s_" + r.name + "_" + w->name + "_" + w->ns + "_" +
                                     w->uid.substr(0, 8) + "_" + std::to_string(r.restarts);
    (void)podman_.Remove(runtime_name);
    const std::string log_path = log_dir + "/" + r.name + "/" + std::to_string(r.restarts) + ".log";
    (void)MakeDirs(log_dir + "/" + r.name);
    obj_event(kube::EventType::kNormal, "Pulled",
              "Container image \"" + image + "\" already present on machine");
    auto id = podman_.Run(p, runtime_name, log_path,
                          {{"gpuop.sim/cluster", opt_.cluster_key},
                           {"gpuop.sim/node", opt_.node_name},
                           {"io.kubernetes.pod.uid", w->uid},
                           {"io.kubernetes.pod.name", w->name},
                           {"io.kubernetes.pod.namespace", w->ns},
                           {"io.kubernetes.container.name", r.name}});
    {
      std::lock_guard l(mu_);
      auto& files = log_files_[w->ns + "/" + w->name + "/" + r.name];
      if (files.empty() || files.back() != log_path) files.push_back(log_path);
    }
    if (!id.ok()) {
      r.state = State::kWaiting;
      r.waiting_reason = "RunContainerError";
      r.waiting_message = id.status().message();
      obj_event(kube::EventType::kWarning, "Failed", "Error: " + r.waiting_message);
      r.next_start = Clock::now() + RestartBackoff(++r.crashes_in_a_row, opt_.max_restart_period);
      return;
    }
    obj_event(kube::EventType::kNormal, "Created", "Created container " + r.name);
    obj_event(kube::EventType::kNormal, "Started", "Started container " + r.name);
    r.runtime_name = runtime_name;
    r.id = *id;
    r.state = State::kRunning;
    r.ever_started = true;
    r.started_at = NowRfc3339();
    r.running_since = Clock::now();
    r.started = !r.startup.spec.has_value();
    r.ready = false;
    auto now = Clock::now();
    for (auto* ps : {&r.startup, &r.readiness, &r.liveness}) {
      ps->successes = ps->failures = 0;
      if (ps->spec) ps->next = now + std::chrono::seconds(ps->spec->initial_delay_s);
    }
    // Without a readiness probe a container is Ready once started: at once,
    // or when its startup probe has passed.
    if (!init && !r.readiness.spec && r.started) r.ready = true;
    auto st = podman_.Inspect(runtime_name);
    if (st.ok() && st->pid > 0) r.pidfd = pidfd_open(st->pid);
  };

  auto stop_container = [&](ContainerRun& r, const Json& c, int64_t grace_s,
                            const std::string& why) {
    if (r.state != State::kRunning) return;
    obj_event(kube::EventType::kNormal, "Killing",
              "Stopping container " + r.name + (why.empty() ? "" : ": " + why));
    const Json& pre = Field(Field(Field(c, "lifecycle"), "preStop"), "exec");
    if (pre.is_object() && Field(pre, "command").is_array()) {
      std::vector<std::string> cmd;
      for (const auto& x : pre["command"]) cmd.push_back(x.get<std::string>());
      auto ran =
          podman_.Exec(r.runtime_name, cmd, std::chrono::seconds(std::max<int64_t>(grace_s, 1)));
      // As the kubelet: a failed hook is an event with its output; the
      // container is stopped all the same.
      if (!ran.ok() || ran->first != 0) {
        obj_event(kube::EventType::kWarning, "FailedPreStopHook",
                  "PreStopHook failed for container " + r.name + ": " +
                      (ran.ok() ? "exit code " + std::to_string(ran->first) + ": " + ran->second
                                : ran.status().message()));
      }
    }
    (void)podman_.Signal(r.runtime_name, SIGTERM);
    auto deadline = Clock::now() + std::chrono::seconds(grace_s);
    while (Clock::now() < deadline) {
      if (r.pidfd >= 0) {
        pollfd pfd{r.pidfd, POLLIN, 0};
        if (::poll(&pfd, 1, 200) > 0) break;
      } else {
        auto s = podman_.Inspect(r.runtime_name);
        if (!s.ok() || !s->running) break;
        std::this_thread::sleep_for(200ms);
      }
    }
    (void)podman_.Signal(r.runtime_name, SIGKILL);
  };

  // Reads a finished run's result and decides about a restart.
  auto reap = [&](ContainerRun& r, bool init) {
    auto st = podman_.Inspect(r.runtime_name);
    if (st.ok() && st->running) return false;
    if (r.pidfd >= 0) {
      ::close(r.pidfd);
      r.pidfd = -1;
    }
    int code = st.ok() ? st->exit_code : 137;
    std::string reason =
        code == 0 ? "Completed" : (st.ok() && st->oom_killed ? "OOMKilled" : "Error");
    r.terminated = {{"exitCode", code},
                    {"reason", reason},
                    {"startedAt", r.started_at},
                    {"finishedAt", st.ok() ? ToRfc3339(st->finished_at) : NowRfc3339()},
                    {"containerID", "podman://" + r.id}};
    r.exit_code = code;
    r.state = State::kTerminated;
    r.ready = false;
    r.started = false;
    (void)podman_.Remove(r.runtime_name);
    bool restart = restart_policy == "Always" || (restart_policy == "OnFailure" && code != 0);
    if (init && code == 0) restart = false;
    if (restart) {
      if (Clock::now() - r.running_since > 600s) r.crashes_in_a_row = 0;
      r.last_terminated = r.terminated;
      auto backoff = RestartBackoff(r.crashes_in_a_row, opt_.max_restart_period);
      r.crashes_in_a_row++;
      r.restarts++;
      r.next_start = Clock::now() + backoff;
      if (backoff > 0s) {
        r.state = State::kWaiting;
        r.waiting_reason = "CrashLoopBackOff";
        r.waiting_message = "back-off " + std::to_string(backoff.count()) +
                            "s restarting failed container=" + r.name + " pod=" + pod_label;
        obj_event(kube::EventType::kWarning, "BackOff",
                  "Back-off restarting failed container " + r.name + " in pod " + pod_label);
      } else {
        r.state = State::kWaiting;
        r.waiting_reason = "";
      }
    }
    return true;
  };

  auto run_probe = [&](ContainerRun& r, const Probe& p) -> Status {
    switch (p.kind) {
      case Probe::kExec: {
        auto res = podman_.Exec(r.runtime_name, p.command, std::chrono::seconds(p.timeout_s));
        if (!res.ok()) return res.status();
        if (res->first != 0) return Unavailable(std::string(Trim(res->second)));
        return Status::Ok();
      }
      case Probe::kHttpGet:
        return HttpProbe(p.host.empty() ? opt_.node_ip : p.host, p.port,
                         p.path.empty() ? "/" : p.path, p.timeout_s, p.headers);
      case Probe::kTcpSocket:
        return TcpProbe(p.host.empty() ? opt_.node_ip : p.host, p.port, p.timeout_s);
      case Probe::kGrpc:
        return TcpProbe(opt_.node_ip, p.port, p.timeout_s);
    }
    return Status::Ok();
  };

  auto container_status = [&](const ContainerRun& r, const Json& c, bool init) {
    Json s = {{"name", r.name},   {"image", StringField(c, "image")},
              {"imageID", ""},    {"restartCount", r.restarts},
              {"ready", r.ready}, {"started", r.state == State::kRunning && r.started}};
    if (!r.id.empty()) s["containerID"] = "podman://" + r.id;
    if (r.state == State::kRunning) {
      s["state"] = {{"running", {{"startedAt", r.started_at}}}};
    } else if (r.state == State::kTerminated) {
      s["state"] = {{"terminated", r.terminated}};
    } else {
      Json wt = {{"reason", r.waiting_reason.empty() ? "ContainerCreating" : r.waiting_reason}};
      if (!r.waiting_message.empty()) wt["message"] = r.waiting_message;
      if (init && r.waiting_reason.empty()) wt["reason"] = "PodInitializing";
      s["state"] = {{"waiting", wt}};
    }
    if (!r.last_terminated.is_null())
      s["lastState"] = {{"terminated", r.last_terminated}};
    else
      s["lastState"] = Json::object();
    return s;
  };

  bool terminating = false;
  while (true) {
    bool deleted;
    {
      std::unique_lock l(w->mu);
      pod = w->pod;
      deleted = w->deleted;
      w->notified = false;
    }
    const Json& meta = Field(pod, "metadata");
    if (stop.stop_requested() || stopping_) {
      for (size_t i = 0; i < inits.size(); ++i) {
        if (inits[i].state == State::kRunning) (void)podman_.Remove(inits[i].runtime_name);
      }
      for (size_t i = 0; i < mains.size(); ++i) {
        if (mains[i].state == State::kRunning) (void)podman_.Remove(mains[i].runtime_name);
      }
      break;
    }
    if (deleted || !Field(meta, "deletionTimestamp").is_null()) {
      if (!terminating) {
        terminating = true;
        int64_t grace = 30;
        if (Field(meta, "deletionGracePeriodSeconds").is_number())
          grace = meta["deletionGracePeriodSeconds"].get<int64_t>();
        else if (Field(Field(pod, "spec"), "terminationGracePeriodSeconds").is_number())
          grace = pod["spec"]["terminationGracePeriodSeconds"].get<int64_t>();
        for (size_t i = 0; i < mains.size(); ++i)
          stop_container(mains[i], spec_of("containers", i), grace, "");
        for (size_t i = 0; i < inits.size(); ++i)
          stop_container(inits[i], spec_of("initContainers", i), grace, "");
        for (auto* runs : {&inits, &mains}) {
          for (auto& r : *runs) {
            if (!r.runtime_name.empty()) (void)podman_.Remove(r.runtime_name);
            if (r.pidfd >= 0) ::close(r.pidfd), r.pidfd = -1;
          }
        }
        ReleaseDevices(w->uid);
        if (!deleted) {
          kube::DeleteOptions d;
          d.grace_period_seconds = 0;
          d.precondition_uid = w->uid;
          Status s = client_->Delete(kube::resources::kPods, w->ns, w->name, d);
          if (!s.ok() && s.code() != StatusCode::kNotFound) {
            LogWarn("kubelet: final delete failed",
                    {{"pod", w->ns + "/" + w->name}, {"error", s.message()}});
          }
        }
        std::error_code ec;
        std::filesystem::remove_all(ctx_.pods_dir + "/" + w->uid, ec);
      }
      break;
    }

    const std::string phase_now = StringField(Field(pod, "status"), "phase");
    bool finished = phase_now == "Succeeded" || phase_now == "Failed";
    auto now = Clock::now();

    if (!finished && pod_failure_reason.empty() && now >= next_retry) {
      // Admission: devices.
      if (!admitted) {
        std::string reason;
        auto a = Admit(pod, w->uid, &reason);
        if (!a.ok()) {
          pod_failure_reason = reason.empty() ? "UnexpectedAdmissionError" : reason;
          pod_failure_message = a.status().message();
          obj_event(kube::EventType::kWarning, pod_failure_reason, pod_failure_message);
        } else {
          allocations = std::move(a).value();
          // DRA: the pod's claims prepared by their drivers; until then the
          // pod waits in ContainerCreating, retried (the kubelet's
          // FailedPrepareDynamicResources).
          auto claimed = dra_->PreparePod(pod);
          if (!claimed.ok()) {
            const std::string msg =
                "Failed to prepare dynamic resources: " + claimed.status().message();
            if (msg != last_claims_error) {
              obj_event(kube::EventType::kWarning, "FailedPrepareDynamicResources", msg);
            }
            last_claims_error = msg;
            next_retry = now + 2s;
          } else {
            claim_devices = std::move(claimed).value();
            admitted = true;
            PublishPodResources();
          }
        }
      }
      // The sandbox: the runtime handler must exist.
      if (admitted && !sandbox_ready) {
        std::string rc = StringField(Field(pod, "spec"), "runtimeClassName");
        std::string handler = rc;
        if (!rc.empty()) {
          auto obj = client_->Get(kRuntimeClasses, "", rc);
          if (obj.ok()) handler = StringField(*obj, "handler", rc);
        }
        if (!rc.empty() && !RuntimeHandlerConfigured(opt_.host_root, handler)) {
          std::string msg =
              "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get "
              "sandbox runtime: no runtime for \"" +
              handler + "\" is configured";
          if (msg != last_sandbox_error)
            obj_event(kube::EventType::kWarning, "FailedCreatePodSandBox", msg);
          last_sandbox_error = msg;
          next_retry = now + 5s;
        } else {
          sandbox_ready = true;
        }
      }
      if (sandbox_ready && !volumes_ready) {
        auto v = PrepareVolumes(pod, ctx_);
        if (!v.ok()) {
          if (v.status().message() != last_volume_error) {
            obj_event(kube::EventType::kWarning, "FailedMount", v.status().message());
          }
          last_volume_error = v.status().message();
          next_retry = now + 2s;
        } else {
          volumes = std::move(v).value();
          volumes_ready = true;
        }
      }
    }

    // Containers.
    bool inits_done = true;
    if (!finished && pod_failure_reason.empty() && volumes_ready) {
      for (size_t i = 0; i < inits.size(); ++i) {
        ContainerRun& r = inits[i];
        if (r.state == State::kTerminated && r.exit_code == 0) continue;
        inits_done = false;
        if (r.state == State::kRunning) {
          if (r.pidfd >= 0) {
            pollfd pfd{r.pidfd, POLLIN, 0};
            if (::poll(&pfd, 1, 0) > 0) reap(r, true);
          } else {
            reap(r, true);
          }
          if (r.state == State::kTerminated && r.exit_code == 0) {
            inits_done = i + 1 == inits.size();
            continue;
          }
        }
        if (r.state == State::kTerminated && r.exit_code != 0) {
          // restartPolicy Never: the pod fails.
          break;
        }
        if (r.state == State::kWaiting && now >= r.next_start)
          start_container(r, spec_of("initContainers", i), true);
        break;
      }
      if (inits_done) {
        for (size_t i = 0; i < mains.size(); ++i) {
          ContainerRun& r = mains[i];
          const Json& c = spec_of("containers", i);
          if (r.state == State::kRunning) {
            // No pidfd: the process was gone before it could be opened (a
            // container that exits at once); Inspect says so.
            bool exited = r.pidfd < 0;
            if (r.pidfd >= 0) {
              pollfd pfd{r.pidfd, POLLIN, 0};
              exited = ::poll(&pfd, 1, 0) > 0;
            }
            if (exited && reap(r, false)) continue;
            // Probes.
            auto t = Clock::now();
            if (!r.started && r.startup.spec && t >= r.startup.next) {
              Status s = run_probe(r, *r.startup.spec);
              r.startup.next = t + std::chrono::seconds(r.startup.spec->period_s);
              if (s.ok()) {
                if (++r.startup.successes >= r.startup.spec->success_threshold) r.started = true;
                r.startup.failures = 0;
              } else {
                r.startup.successes = 0;
                obj_event(kube::EventType::kWarning, "Unhealthy",
                          "Startup probe failed: " + s.message());
                if (++r.startup.failures >= r.startup.spec->failure_threshold) {
                  stop_container(r, c, 30, "failed startup probe, will be restarted");
                  reap(r, false);
                  continue;
                }
              }
            }
            if (r.started && r.liveness.spec && t >= r.liveness.next) {
              Status s = run_probe(r, *r.liveness.spec);
              r.liveness.next = t + std::chrono::seconds(r.liveness.spec->period_s);
              if (s.ok()) {
                r.liveness.failures = 0;
              } else {
                obj_event(kube::EventType::kWarning, "Unhealthy",
                          "Liveness probe failed: " + s.message());
                if (++r.liveness.failures >= r.liveness.spec->failure_threshold) {
                  obj_event(kube::EventType::kNormal, "Killing",
                            "Container " + r.name + " failed liveness probe, will be restarted");
                  stop_container(r, c, 30, "");
                  reap(r, false);
                  continue;
                }
              }
            }
            if (r.started && r.readiness.spec && t >= r.readiness.next) {
              Status s = run_probe(r, *r.readiness.spec);
              r.readiness.next = t + std::chrono::seconds(r.readiness.spec->period_s);
              if (s.ok()) {
                r.readiness.failures = 0;
                if (++r.readiness.successes >= r.readiness.spec->success_threshold) r.ready = true;
              } else {
                r.readiness.successes = 0;
                if (++r.readiness.failures >= r.readiness.spec->failure_threshold) {
                  if (r.ready || r.readiness.failures == r.readiness.spec->failure_threshold) {
                    obj_event(kube::EventType::kWarning, "Unhealthy",
                              "Readiness probe failed: " + s.message());
                  }
                  r.ready = false;
                }
              }
            }
            if (r.started && !r.readiness.spec) r.ready = true;
          }
          if (r.state == State::kWaiting && Clock::now() >= r.next_start)
            start_container(r, c, false);
        }
      }
    }

    // Pod status.
    std::string phase = "Pending";
    bool all_ready = !mains.empty() && inits_done;
    int running = 0, succeeded = 0, failed = 0, waiting = 0;
    for (const auto& r : mains) {
      if (!r.ready) all_ready = false;
      if (r.state == State::kRunning)
        running++;
      else if (r.state == State::kTerminated && r.exit_code == 0)
        succeeded++;
      else if (r.state == State::kTerminated)
        failed++;
      else
        waiting++;
      if (r.state == State::kWaiting && r.restarts > 0) running++;  // restarting counts as running
    }
    bool init_failed_never = false;
    for (const auto& r : inits) {
      if (r.state == State::kTerminated && r.exit_code != 0 && restart_policy == "Never")
        init_failed_never = true;
    }
    if (!pod_failure_reason.empty() || init_failed_never) {
      phase = "Failed";
    } else if (inits_done && volumes_ready) {
      if (succeeded + failed == static_cast<int>(mains.size()) && !mains.empty()) {
        phase = failed > 0 ? "Failed" : "Succeeded";
        if (restart_policy == "Always") phase = "Running";
      } else if (running > 0 || succeeded + failed > 0) {
        phase = "Running";
      }
    }
    if (finished) phase = phase_now;
    std::string now_s = NowRfc3339();
    auto cond = [&](const char* type, bool ok, const std::string& reason = "") {
      Json c = {{"type", type}, {"status", ok ? "True" : "False"}, {"lastProbeTime", nullptr}};
      if (!ok && !reason.empty()) c["reason"] = reason;
      return c;
    };
    Json conditions = Json::array(
        {cond("PodReadyToStartContainers", sandbox_ready && volumes_ready),
         cond("Initialized", inits_done && volumes_ready, "ContainersNotInitialized"),
         cond("Ready", all_ready && phase == "Running", "ContainersNotReady"),
         cond("ContainersReady", all_ready && phase == "Running", "ContainersNotReady")});
    for (const Json& c : Field(Field(pod, "status"), "conditions")) {
      if (StringField(c, "type") == "PodScheduled") conditions.push_back(c);
    }
    Json init_statuses = Json::array(), statuses = Json::array();
    for (size_t i = 0; i < inits.size(); ++i)
      init_statuses.push_back(container_status(inits[i], spec_of("initContainers", i), true));
    for (size_t i = 0; i < mains.size(); ++i)
      statuses.push_back(container_status(mains[i], spec_of("containers", i), false));
    Json status = {{"phase", phase},          {"conditions", conditions},
                   {"hostIP", opt_.node_ip},  {"hostIPs", Json::array({{{"ip", opt_.node_ip}}})},
                   {"podIP", opt_.node_ip},   {"podIPs", Json::array({{{"ip", opt_.node_ip}}})},
                   {"startTime", start_time}, {"containerStatuses", statuses},
                   {"qosClass", "BestEffort"}};
    if (!init_statuses.empty()) status["initContainerStatuses"] = init_statuses;
    if (!pod_failure_reason.empty()) {
      status["reason"] = pod_failure_reason;
      status["message"] = pod_failure_message;
    }
    // lastTransitionTime only changes with the status itself.
    Json compare = status;
    if (compare != last_status && !finished) {
      for (Json& c : status["conditions"]) {
        if (!c.contains("lastTransitionTime")) c["lastTransitionTime"] = now_s;
      }
      auto r = client_->Patch(kube::resources::kPods, w->ns, w->name, kube::PatchType::kMerge,
                              Json{{"status", status}}, kube::PatchOptions{"", false, "status"});
      if (r.ok()) {
        last_status = compare;
      } else if (r.status().code() == StatusCode::kNotFound) {
        std::lock_guard l(w->mu);
        w->deleted = true;
        continue;
      }
    }
    if ((phase == "Succeeded" || phase == "Failed") && !finished) {
      ReleaseDevices(w->uid);
    }

    // Wait: a pod update, a container exit, or the next probe/back-off time.
    std::vector<pollfd> fds;
    for (auto* runs : {&inits, &mains}) {
      for (auto& r : *runs) {
        if (r.state == State::kRunning && r.pidfd >= 0) fds.push_back({r.pidfd, POLLIN, 0});
      }
    }
    auto deadline = Clock::now() + 2s;
    for (auto* runs : {&inits, &mains}) {
      for (auto& r : *runs) {
        if (r.state == State::kWaiting)
          deadline = std::min(deadline, std::max(r.next_start, Clock::now() + 50ms));
        if (r.state == State::kRunning) {
          for (auto* ps : {&r.startup, &r.readiness, &r.liveness}) {
            if (ps->spec) deadline = std::min(deadline, std::max(ps->next, Clock::now() + 50ms));
          }
        }
      }
    }
    if (next_retry > Clock::now()) deadline = std::min(deadline, next_retry);
    while (Clock::now() < deadline && !stop.stop_requested()) {
      {
        std::unique_lock l(w->mu);
        if (w->notified || w->deleted) break;
      }
      if (!fds.empty()) {
        if (::poll(fds.data(), fds.size(), 100) > 0) break;
      } else {
        std::unique_lock l(w->mu);
        w->cv.wait_for(l, 100ms, [&] { return w->notified || w->deleted; });
      }
    }
  }
  for (auto* runs : {&inits, &mains}) {
    for (auto& r : *runs) {
      if (r.pidfd >= 0) ::close(r.pidfd);
    }
  }
}

void Kubelet::Impl::Stop() {
  std::lock_guard restart(restart_mu_);
  if (stopping_.exchange(true)) return;
  if (pods_) pods_->Stop();
  std::vector<PodWorker*> ws;
  {
    std::lock_guard l(mu_);
    for (auto& [uid, w] : workers_) ws.push_back(w.get());
  }
  for (PodWorker* w : ws) {
    w->thread.request_stop();
    w->cv.notify_all();
  }
  for (PodWorker* w : ws) {
    if (w->thread.joinable()) w->thread.join();
  }
  node_thread_.request_stop();
  if (node_thread_.joinable()) node_thread_.join();
  // Whatever is left of this node's containers.
  auto left = podman_.ListContainers(
      {{"gpuop.sim/node", opt_.node_name}, {"gpuop.sim/cluster", opt_.cluster_key}});
  if (left.ok()) {
    for (const auto& n : *left) (void)podman_.Remove(n);
  }
  if (devices_) devices_->Stop();
  dra_.reset();
  std::shared_ptr<sim::FakePodResources> pr;
  {
    std::lock_guard l(mu_);
    pr = std::move(pod_resources_);
  }
  if (pr) pr->Stop();
  if (events_) events_.reset();
}

// What a node's plugins see of `systemctl restart kubelet`: the kubelet's
// sockets go away for `down`; the new kubelet empties the device-plugin
// directory (each plugin must notice and register again), serves the
// pod-resources API anew and registers the DRA plugins again. Pods and their
// containers keep running, as they do under containerd, and device
// assignments survive (the kubelet's checkpoint): the pod workers stand for
// the state a real kubelet recovers from the runtime.
Status Kubelet::Impl::Restart(std::chrono::milliseconds down) {
  std::lock_guard restart(restart_mu_);
  if (stopping_)
    return FailedPrecondition("the kubelet of node " + opt_.node_name + " is stopping");
  LogInfo("kubelet: restarting",
          {{"node", opt_.node_name}, {"down_ms", std::to_string(down.count())}});
  std::shared_ptr<sim::FakePodResources> old;
  {
    std::lock_guard l(mu_);
    old = std::move(pod_resources_);
  }
  devices_->Stop();
  if (old) old->Stop();
  std::this_thread::sleep_for(down);

  GPUOP_RETURN_IF_ERROR(devices_->Restart());
  auto pr =
      sim::FakePodResources::Start(opt_.host_root + "/var/lib/kubelet/pod-resources/kubelet.sock");
  if (!pr.ok()) return pr.status().Annotate("the pod-resources socket of node " + opt_.node_name);
  {
    std::lock_guard l(mu_);
    pod_resources_ = std::move(pr).value();
  }
  PublishPodResources();
  dra_->Restart();
  Json node{{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", opt_.node_name}, {"uid", opt_.node_name}}}};
  events_->Event(node, kube::EventType::kNormal, "Starting", "Starting kubelet.");
  return Status::Ok();
}

Result<std::string> Kubelet::Impl::Logs(const std::string& ns, const std::string& pod,
                                        const std::string& container, bool previous) const {
  std::vector<std::string> files;
  {
    std::lock_guard l(mu_);
    auto it = log_files_.find(ns + "/" + pod + "/" + container);
    if (it != log_files_.end()) files = it->second;
  }
  if (files.empty() || (previous && files.size() < 2)) {
    return NotFound(std::string(previous ? "previous terminated container" : "container") + " \"" +
                    container + "\" in pod \"" + pod + "\" not found");
  }
  auto text = ReadFile(files[files.size() - (previous ? 2 : 1)]);
  if (!text.ok()) return std::string();
  return CriLogText(*text);
}

// ---------------------------------------------------------------------------

Result<std::unique_ptr<Kubelet>> Kubelet::Start(KubeletOptions options, kube::Client* client) {
  Podman::Options po;
  po.node_name = options.node_name;
  po.netns = options.netns;
  po.host_root = options.host_root;
  po.state_dir = options.state_dir + "/podman";
  // podman reads the node's CDI specs, translated (cdi_view.h), from /etc/cdi;
  // its /var/run/cdi is empty so the machine's own specs stay out.
  po.node_binds = {{options.state_dir + "/cdi-view", "/etc/cdi"},
                   {options.state_dir + "/cdi-empty", "/var/run/cdi"}};
  GPUOP_RETURN_IF_ERROR(MakeDirs(options.state_dir + "/cdi-view"));
  GPUOP_RETURN_IF_ERROR(MakeDirs(options.state_dir + "/cdi-empty"));
  auto podman = Podman::Create(po);
  if (!podman.ok()) return podman.status();
  auto impl = std::make_unique<Impl>(std::move(options), client, std::move(podman).value());
  GPUOP_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Kubelet>(new Kubelet(std::move(impl)));
}

Kubelet::Kubelet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Kubelet::~Kubelet() { Stop(); }
void Kubelet::Stop() { impl_->Stop(); }
Status Kubelet::Restart(std::chrono::milliseconds down) { return impl_->Restart(down); }
Result<std::string> Kubelet::Logs(const std::string& ns, const std::string& pod,
                                  const std::string& container, bool previous) const {
  return impl_->Logs(ns, pod, container, previous);
}

}  // namespace gpuop::simcluster
