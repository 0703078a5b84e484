#include "sim/kubelet/fake_pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "kubelet/unix_socket.h"
#include "podresources/v1/api.grpc.pb.h"

namespace gpuop::sim {
namespace {

using kubelet::ContainerDevices;

constexpr auto kShutdownGrace = std::chrono::milliseconds(200);
// How often a stalled call looks whether its client gave up.
constexpr auto kStallCheck = std::chrono::milliseconds(10);

// The assignments of one pod as the kubelet reports them: containers in order
// of first appearance, each with its resources' devices.
void FillPod(const std::vector<ContainerDevices>& assignments, const std::string& namespace_,
             const std::string& pod, v1::PodResources* out) {
  out->set_name(pod);
  out->set_namespace_(namespace_);
  std::map<std::string, v1::ContainerResources*> containers;
  for (const ContainerDevices& a : assignments) {
    if (a.namespace_ != namespace_ || a.pod != pod) continue;
    v1::ContainerResources*& container = containers[a.container];
    if (container == nullptr) {
      container = out->add_containers();
      container->set_name(a.container);
    }
    if (a.device_ids.empty()) continue;
    v1::ContainerDevices* devices = container->add_devices();
    devices->set_resource_name(a.resource_name);
    for (const std::string& id : a.device_ids) devices->add_device_ids(id);
  }
}

}  // namespace

class FakePodResources::Impl final : public v1::PodResourcesLister::Service {
 public:
  Impl(std::string socket_path, std::function<void()> on_call)
      : socket_path_(std::move(socket_path)), on_call_(std::move(on_call)) {}
  ~Impl() override { Stop(); }

  // --- v1.PodResourcesLister ---

  grpc::Status List(grpc::ServerContext* ctx, const v1::ListPodResourcesRequest* /*request*/,
                    v1::ListPodResourcesResponse* response) override {
    list_calls_.fetch_add(1);
    if (on_call_) on_call_();
    std::unique_lock lock(mu_);
    if (grpc::Status s = WaitWhileStalled(ctx, lock); !s.ok()) return s;
    std::vector<std::pair<std::string, std::string>> pods;  // (namespace, pod), first seen first
    for (const ContainerDevices& a : assignments_) {
      std::pair<std::string, std::string> key{a.namespace_, a.pod};
      if (std::find(pods.begin(), pods.end(), key) == pods.end()) pods.push_back(std::move(key));
    }
    for (const auto& [namespace_, pod] : pods) {
      FillPod(assignments_, namespace_, pod, response->add_pod_resources());
    }
    return grpc::Status::OK;
  }

  grpc::Status Get(grpc::ServerContext* ctx, const v1::GetPodResourcesRequest* request,
                   v1::GetPodResourcesResponse* response) override {
    get_calls_.fetch_add(1);
    if (on_call_) on_call_();
    std::unique_lock lock(mu_);
    if (grpc::Status s = WaitWhileStalled(ctx, lock); !s.ok()) return s;
    const bool known = std::any_of(assignments_.begin(), assignments_.end(), [&](const auto& a) {
      return a.namespace_ == request->pod_namespace() && a.pod == request->pod_name();
    });
    if (!known) {
      // The kubelet's wording; it sends it as a plain (UNKNOWN) error.
      return grpc::Status(
          grpc::StatusCode::UNKNOWN,
          "pod " + request->pod_name() + " not found in namespace " + request->pod_namespace());
    }
    FillPod(assignments_, request->pod_namespace(), request->pod_name(),
            response->mutable_pod_resources());
    return grpc::Status::OK;
  }

  grpc::Status GetAllocatableResources(grpc::ServerContext* ctx,
                                       const v1::AllocatableResourcesRequest* /*request*/,
                                       v1::AllocatableResourcesResponse* response) override {
    allocatable_calls_.fetch_add(1);
    std::unique_lock lock(mu_);
    if (grpc::Status s = WaitWhileStalled(ctx, lock); !s.ok()) return s;
    for (const auto& [resource, ids] : allocatable_) {
      v1::ContainerDevices* devices = response->add_devices();
      devices->set_resource_name(resource);
      for (const std::string& id : ids) devices->add_device_ids(id);
    }
    return grpc::Status::OK;
  }

  // --- owner side ---

  Status Serve() {
    grpc::ServerBuilder builder;
    builder.RegisterService(this);
    auto served = kubelet::ServeOnUnixSocket(builder, socket_path_, "fake pod-resources socket");
    if (!served.ok()) return served.status();
    server_ = std::move(served->server);
    socket_id_ = served->socket_id;
    return Status::Ok();
  }

  void SetAssignments(std::vector<ContainerDevices> assignments) {
    std::lock_guard lock(mu_);
    assignments_ = std::move(assignments);
  }
  std::vector<ContainerDevices> Assignments() const {
    std::lock_guard lock(mu_);
    return assignments_;
  }
  void SetAllocatable(std::map<std::string, std::vector<std::string>> devices) {
    std::lock_guard lock(mu_);
    allocatable_ = std::move(devices);
  }
  void SetStalled(bool stalled) {
    {
      std::lock_guard lock(mu_);
      stalled_ = stalled;
    }
    cv_.notify_all();
  }

  void Stop() {
    std::lock_guard stop_lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
      server_->Wait();
    }
    kubelet::RemoveOwnUnixSocket(socket_path_, socket_id_);
  }

  uint64_t ListCalls() const { return list_calls_.load(); }
  uint64_t GetCalls() const { return get_calls_.load(); }
  uint64_t AllocatableCalls() const { return allocatable_calls_.load(); }
  const std::string& socket_path() const { return socket_path_; }

 private:
  // REQUIRES: lock holds mu_. OK once not stalled; an error if the client
  // gave up or the fake stops first.
  grpc::Status WaitWhileStalled(grpc::ServerContext* ctx, std::unique_lock<std::mutex>& lock) {
    while (stalled_ && !stopping_) {
      if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "client gave up");
      cv_.wait_for(lock, kStallCheck);
    }
    if (stopping_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet is stopping");
    return grpc::Status::OK;
  }

  const std::string socket_path_;
  const std::function<void()> on_call_;
  std::unique_ptr<grpc::Server> server_;
  std::optional<kubelet::SocketFileId> socket_id_;

  std::mutex stop_mu_;
  bool stopped_ = false;  // guarded by stop_mu_

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ContainerDevices> assignments_;                    // guarded by mu_
  std::map<std::string, std::vector<std::string>> allocatable_;  // guarded by mu_
  bool stalled_ = false;                                         // guarded by mu_
  bool stopping_ = false;                                        // guarded by mu_

  std::atomic<uint64_t> list_calls_{0}, get_calls_{0}, allocatable_calls_{0};
};

Result<std::unique_ptr<FakePodResources>> FakePodResources::Start(std::string socket_path,
                                                                  std::function<void()> on_call) {
  GPUOP_RETURN_IF_ERROR(kubelet::CheckUnixSocketPath(socket_path, "fake pod-resources socket"));
  GPUOP_RETURN_IF_ERROR(MakeDirs(DirName(socket_path)));
  auto impl = std::make_unique<Impl>(std::move(socket_path), std::move(on_call));
  Status s = impl->Serve();
  if (!s.ok()) {
    impl->Stop();
    return s;
  }
  LogInfo("fake pod-resources serving", {{"socket", impl->socket_path()}});
  return std::unique_ptr<FakePodResources>(new FakePodResources(std::move(impl)));
}

FakePodResources::FakePodResources(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakePodResources::~FakePodResources() { Stop(); }

void FakePodResources::SetAssignments(std::vector<ContainerDevices> assignments) {
  impl_->SetAssignments(std::move(assignments));
}
std::vector<ContainerDevices> FakePodResources::Assignments() const { return impl_->Assignments(); }
void FakePodResources::SetAllocatable(
    std::map<std::string, std::vector<std::string>> devices_by_resource) {
  impl_->SetAllocatable(std::move(devices_by_resource));
}
void FakePodResources::SetStalled(bool stalled) { impl_->SetStalled(stalled); }
uint64_t FakePodResources::ListCalls() const { return impl_->ListCalls(); }
uint64_t FakePodResources::GetCalls() const { return impl_->GetCalls(); }
uint64_t FakePodResources::AllocatableCalls() const { return impl_->AllocatableCalls(); }
void FakePodResources::Stop() { impl_->Stop(); }
const std::string& FakePodResources::socket_path() const { return impl_->socket_path(); }

// --- the assignments file ---

namespace {

Result<std::string> StringField(const nlohmann::json& entry, const char* key, bool required,
                                const std::string& where) {
  auto it = entry.find(key);
  if (it == entry.end()) {
    if (required) return InvalidArgument(where + ": missing \"" + key + "\"");
    return std::string();
  }
  if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
    return InvalidArgument(where + ": \"" + key + "\" must be a non-empty string");
  }
  return it->get<std::string>();
}

}  // namespace

Result<std::vector<ContainerDevices>> ParsePodResourcesJson(std::string_view text,
                                                            std::string_view source) {
  const std::string file(source);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("pod-resources file " + file + ": not JSON: " + e.what());
  }
  if (!doc.is_array()) {
    return InvalidArgument("pod-resources file " + file +
                           ": must be a JSON array of {\"pod\", \"namespace\", \"container\", "
                           "\"resource\", \"devices\"} objects");
  }
  std::vector<ContainerDevices> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& entry = doc[i];
    const std::string where = "pod-resources file " + file + ", entry " + std::to_string(i);
    if (!entry.is_object()) return InvalidArgument(where + ": must be an object");
    for (const auto& [key, value] : entry.items()) {
      if (key != "pod" && key != "namespace" && key != "container" && key != "resource" &&
          key != "devices") {
        return InvalidArgument(where + ": unknown key \"" + key +
                               "\" (known: pod, namespace, container, resource, devices)");
      }
    }
    ContainerDevices cd;
    auto pod = StringField(entry, "pod", true, where);
    if (!pod.ok()) return pod.status();
    auto namespace_ = StringField(entry, "namespace", false, where);
    if (!namespace_.ok()) return namespace_.status();
    auto container = StringField(entry, "container", true, where);
    if (!container.ok()) return container.status();
    auto resource = StringField(entry, "resource", true, where);
    if (!resource.ok()) return resource.status();
    cd.pod = *pod;
    cd.namespace_ = namespace_->empty() ? "default" : *namespace_;
    cd.container = *container;
    cd.resource_name = *resource;
    auto devices = entry.find("devices");
    if (devices == entry.end()) return InvalidArgument(where + ": missing \"devices\"");
    if (!devices->is_array()) {
      return InvalidArgument(where + ": \"devices\" must be an array of device IDs");
    }
    for (const auto& id : *devices) {
      if (!id.is_string() || id.get_ref<const std::string&>().empty()) {
        return InvalidArgument(where + ": \"devices\" must hold non-empty strings (device IDs)");
      }
      cd.device_ids.push_back(id.get<std::string>());
    }
    out.push_back(std::move(cd));
  }
  return out;
}

Result<std::vector<ContainerDevices>> LoadPodResourcesFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status().Annotate("pod-resources file");
  return ParsePodResourcesJson(*text, path);
}

}  // namespace gpuop::sim
