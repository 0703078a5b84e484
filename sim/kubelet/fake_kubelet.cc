#include "sim/kubelet/fake_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "kubelet/proto_convert.h"
#include "kubelet/registration.h"
#include "kubelet/unix_socket.h"

namespace gpuop::sim {
namespace {

using kubelet::ContainerAllocation;
using kubelet::FromGrpcStatus;
using kubelet::PluginDevice;

// Why the kubelet would refuse this request; empty when it would not.
std::string RegistrationError(const KubeletRegistration& r) {
  if (r.version != kubelet::kDevicePluginApiVersion) {
    return "requested device plugin API version \"" + r.version +
           "\" is not supported by the kubelet; supported versions: [v1beta1]";
  }
  // An extended resource name: <domain>/<name>, outside kubernetes.io.
  const auto slash = r.resource_name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == r.resource_name.size() ||
      r.resource_name.find('/', slash + 1) != std::string::npos ||
      r.resource_name.find("kubernetes.io/") != std::string::npos ||
      StartsWith(r.resource_name, "requests.")) {
    return "invalid resource name \"" + r.resource_name +
           "\": must be an extended resource name such as nvidia.com/gpu";
  }
  if (r.endpoint.empty() || r.endpoint.find('/') != std::string::npos) {
    return "invalid endpoint \"" + r.endpoint +
           "\": must be the name of a socket in the device plugin directory";
  }
  return "";
}

std::string DeviceListString(const std::vector<PluginDevice>& devices) {
  std::string s = "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) s += ", ";
    s += devices[i].id + (devices[i].healthy ? "" : " (Unhealthy)");
    if (devices[i].numa_node >= 0) s += " numa=" + std::to_string(devices[i].numa_node);
  }
  return s + "]";
}

}  // namespace

class FakeKubelet::Impl {
 public:
  // One registered plugin: its stub and the ListAndWatch stream's state.
  struct Endpoint {
    std::string resource;
    std::string path;                        // <dir>/<endpoint>
    std::shared_ptr<grpc::Channel> channel;  // one connection for the stream and calls
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    grpc::ClientContext lw_ctx;  // TryCancel() ends the stream
    std::thread thread;
    // Guarded by Impl::mu_.
    std::vector<PluginDevice> devices;
    uint64_t updates = 0;
    bool open = false;
    bool ended = false;
    Status end_status;
  };

  class RegistrationService final : public v1beta1::Registration::Service {
   public:
    explicit RegistrationService(Impl* owner) : owner_(owner) {}
    grpc::Status Register(grpc::ServerContext* /*ctx*/, const v1beta1::RegisterRequest* req,
                          v1beta1::Empty* /*reply*/) override {
      return owner_->OnRegister(*req);
    }

   private:
    Impl* const owner_;
  };

  Impl(std::string dir, std::function<void()> on_change)
      : dir_(std::move(dir)), on_change_(std::move(on_change)) {}
  ~Impl() { Stop(); }

  std::string SocketPath() const { return dir_ + "/" + std::string(kubelet::kKubeletSocketName); }

  Status Serve() {
    const std::string path = SocketPath();
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Internal("fake kubelet: removing " + path + ": " + std::strerror(errno));
    }
    service_ = std::make_unique<RegistrationService>(this);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (!server_) return Unavailable("fake kubelet: cannot serve on " + path);
    return Status::Ok();
  }

  // Stops the Registration server and drops every plugin; keeps nothing.
  void Stop() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      server_->Wait();
      server_.reset();
      service_.reset();
      ::unlink(SocketPath().c_str());
    }
    std::map<std::string, std::unique_ptr<Endpoint>> endpoints;
    {
      std::lock_guard lock(mu_);
      endpoints.swap(endpoints_);
      registrations_.clear();
      cv_.notify_all();
    }
    for (auto& [name, e] : endpoints) EndStream(*e);
    Changed();
  }

  grpc::Status OnRegister(const v1beta1::RegisterRequest& req) {
    KubeletRegistration r;
    r.version = req.version();
    r.endpoint = req.endpoint();
    r.resource_name = req.resource_name();
    r.pre_start_required = req.options().pre_start_required();
    r.get_preferred_allocation_available = req.options().get_preferred_allocation_available();
    r.error = RegistrationError(r);
    r.accepted = r.error.empty();
    if (!r.accepted) {
      {
        std::lock_guard lock(mu_);
        registrations_.push_back(r);
        cv_.notify_all();
      }
      Changed();
      // The kubelet returns a plain Go error: gRPC code UNKNOWN.
      return grpc::Status(grpc::StatusCode::UNKNOWN, r.error);
    }

    auto e = std::make_unique<Endpoint>();
    e->resource = r.resource_name;
    e->path = dir_ + "/" + r.endpoint;
    e->channel = grpc::CreateChannel("unix:" + e->path, grpc::InsecureChannelCredentials());
    e->stub = v1beta1::DevicePlugin::NewStub(e->channel);
    e->lw_ctx.set_wait_for_ready(true);  // the plugin may still be binding

    std::unique_ptr<Endpoint> old;
    {
      std::lock_guard lock(mu_);
      auto it = endpoints_.find(r.resource_name);
      if (it != endpoints_.end()) old = std::move(it->second);
      endpoints_.erase(r.resource_name);
    }
    if (old) EndStream(*old);  // a re-registration replaces the old endpoint

    Endpoint* raw = e.get();
    {
      std::lock_guard lock(mu_);
      registrations_.push_back(r);
      endpoints_[r.resource_name] = std::move(e);
      raw->thread = std::thread([this, raw] { WatchDevices(raw); });
      cv_.notify_all();
    }
    Changed();
    return grpc::Status::OK;
  }

  void WatchDevices(Endpoint* e) {
    v1beta1::Empty req;
    auto reader = e->stub->ListAndWatch(&e->lw_ctx, req);
    v1beta1::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      {
        std::lock_guard lock(mu_);
        e->devices = kubelet::FromListAndWatchResponse(resp);
        e->updates++;
        e->open = true;
        cv_.notify_all();
      }
      Changed();
    }
    grpc::Status s = reader->Finish();
    {
      std::lock_guard lock(mu_);
      e->open = false;
      e->ended = true;
      e->end_status = s.ok()
                          ? Status::Ok()
                          : FromGrpcStatus(s, "ListAndWatch of " + e->resource + " at " + e->path);
      cv_.notify_all();
    }
    Changed();
  }

  // After a change, outside mu_.
  void Changed() const {
    if (on_change_) on_change_();
  }

  static void EndStream(Endpoint& e) {
    e.lw_ctx.TryCancel();
    if (e.thread.joinable()) e.thread.join();
  }

  // A stub on the channel of `resource`'s plugin. The stub shares the channel,
  // so a call in flight survives a re-registration or Restart.
  Result<std::unique_ptr<v1beta1::DevicePlugin::Stub>> StubFor(const std::string& resource) {
    std::lock_guard lock(mu_);
    auto it = endpoints_.find(resource);
    if (it == endpoints_.end()) {
      return NotFound("fake kubelet: no device plugin registered for " + resource);
    }
    return v1beta1::DevicePlugin::NewStub(it->second->channel);
  }

  std::mutex lifecycle_mu_;  // serialises Stop/Serve (Restart vs Stop)
  const std::string dir_;
  const std::function<void()> on_change_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<KubeletRegistration> registrations_;              // guarded by mu_
  std::map<std::string, std::unique_ptr<Endpoint>> endpoints_;  // guarded by mu_
};

Result<std::unique_ptr<FakeKubelet>> FakeKubelet::Start(std::string dir,
                                                        std::function<void()> on_change) {
  const std::string sock = dir + "/" + std::string(kubelet::kKubeletSocketName);
  if (sock.size() > kubelet::kMaxUnixSocketPath) {
    return InvalidArgument("fake kubelet: socket path " + sock + " is longer than " +
                           std::to_string(kubelet::kMaxUnixSocketPath) +
                           " bytes (a unix socket limit); use a shorter directory");
  }
  GPUOP_RETURN_IF_ERROR(MakeDirs(dir));
  std::unique_ptr<FakeKubelet> k(new FakeKubelet(std::move(dir), std::move(on_change)));
  GPUOP_RETURN_IF_ERROR(k->impl_->Serve());
  return k;
}

FakeKubelet::FakeKubelet(std::string dir, std::function<void()> on_change)
    : dir_(dir), impl_(std::make_unique<Impl>(dir, std::move(on_change))) {}
FakeKubelet::~FakeKubelet() { Stop(); }

std::string FakeKubelet::socket_path() const { return impl_->SocketPath(); }

std::vector<KubeletRegistration> FakeKubelet::Registrations() const {
  std::lock_guard lock(impl_->mu_);
  return impl_->registrations_;
}

Result<KubeletRegistration> FakeKubelet::WaitForRegistration(
    const std::string& resource, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu_);
  std::optional<KubeletRegistration> found;
  impl_->cv_.wait_for(lock, timeout, [&] {
    for (const auto& r : impl_->registrations_) {
      if (r.accepted && r.resource_name == resource) found = r;
    }
    return found.has_value();
  });
  if (found) return *found;
  std::vector<std::string> seen;
  for (const auto& r : impl_->registrations_) {
    seen.push_back(r.resource_name + (r.accepted ? "" : " (rejected: " + r.error + ")"));
  }
  return DeadlineExceeded("fake kubelet: no registration of " + resource + " within " +
                          std::to_string(timeout.count()) + " ms; registrations: [" +
                          Join(seen, ", ") + "]");
}

std::vector<PluginDevice> FakeKubelet::Devices(const std::string& resource) const {
  std::lock_guard lock(impl_->mu_);
  auto it = impl_->endpoints_.find(resource);
  return it == impl_->endpoints_.end() ? std::vector<PluginDevice>{} : it->second->devices;
}

uint64_t FakeKubelet::ListAndWatchUpdates(const std::string& resource) const {
  std::lock_guard lock(impl_->mu_);
  auto it = impl_->endpoints_.find(resource);
  return it == impl_->endpoints_.end() ? 0 : it->second->updates;
}

bool FakeKubelet::StreamOpen(const std::string& resource) const {
  std::lock_guard lock(impl_->mu_);
  auto it = impl_->endpoints_.find(resource);
  return it != impl_->endpoints_.end() && it->second->open;
}

Result<std::vector<PluginDevice>> FakeKubelet::WaitForDevices(
    const std::string& resource, const DevicePredicate& pred,
    std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu_);
  std::optional<std::vector<PluginDevice>> match;
  impl_->cv_.wait_for(lock, timeout, [&] {
    auto it = impl_->endpoints_.find(resource);
    if (it == impl_->endpoints_.end() || it->second->updates == 0) return false;
    if (!pred(it->second->devices)) return false;
    match = it->second->devices;
    return true;
  });
  if (match) return *match;
  auto it = impl_->endpoints_.find(resource);
  std::string last = it == impl_->endpoints_.end() ? "not registered"
                     : it->second->updates == 0    ? "no list received"
                                                   : DeviceListString(it->second->devices);
  return DeadlineExceeded("fake kubelet: devices of " + resource + " did not match within " +
                          std::to_string(timeout.count()) + " ms; last: " + last);
}

std::optional<Status> FakeKubelet::WaitForStreamEnd(const std::string& resource,
                                                    std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu_);
  std::optional<Status> end;
  impl_->cv_.wait_for(lock, timeout, [&] {
    auto it = impl_->endpoints_.find(resource);
    if (it == impl_->endpoints_.end() || !it->second->ended) return false;
    end = it->second->end_status;
    return true;
  });
  return end;
}

Result<std::vector<ContainerAllocation>> FakeKubelet::AllocateContainers(
    const std::string& resource, const std::vector<std::vector<std::string>>& containers) {
  GPUOP_ASSIGN_OR_RETURN(auto stub, impl_->StubFor(resource));
  v1beta1::AllocateRequest req;
  for (const auto& ids : containers) {
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
  }
  v1beta1::AllocateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + call_timeout_.load());
  grpc::Status s = stub->Allocate(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s, "Allocate of " + resource);
  std::vector<ContainerAllocation> out;
  for (const auto& c : resp.container_responses()) out.push_back(kubelet::FromProto(c));
  return out;
}

Result<ContainerAllocation> FakeKubelet::Allocate(const std::string& resource,
                                                  const std::vector<std::string>& ids) {
  GPUOP_ASSIGN_OR_RETURN(auto all, AllocateContainers(resource, {ids}));
  if (all.size() != 1) {
    return Internal("Allocate of " + resource + ": the plugin answered " +
                    std::to_string(all.size()) + " container responses for 1 request");
  }
  return std::move(all[0]);
}

Result<std::vector<std::string>> FakeKubelet::GetPreferredAllocation(
    const std::string& resource, const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size) {
  GPUOP_ASSIGN_OR_RETURN(auto stub, impl_->StubFor(resource));
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : available) c->add_available_deviceids(id);
  for (const auto& id : must_include) c->add_must_include_deviceids(id);
  c->set_allocation_size(size);
  v1beta1::PreferredAllocationResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + call_timeout_.load());
  grpc::Status s = stub->GetPreferredAllocation(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s, "GetPreferredAllocation of " + resource);
  if (resp.container_responses_size() != 1) {
    return Internal("GetPreferredAllocation of " + resource + ": the plugin answered " +
                    std::to_string(resp.container_responses_size()) +
                    " container responses for 1 request");
  }
  const auto& ids = resp.container_responses(0).deviceids();
  return std::vector<std::string>(ids.begin(), ids.end());
}

Result<PluginOptions> FakeKubelet::GetDevicePluginOptions(const std::string& resource) {
  GPUOP_ASSIGN_OR_RETURN(auto stub, impl_->StubFor(resource));
  v1beta1::Empty req;
  v1beta1::DevicePluginOptions resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + call_timeout_.load());
  grpc::Status s = stub->GetDevicePluginOptions(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s, "GetDevicePluginOptions of " + resource);
  return PluginOptions{resp.pre_start_required(), resp.get_preferred_allocation_available()};
}

Status FakeKubelet::PreStartContainer(const std::string& resource,
                                      const std::vector<std::string>& ids) {
  GPUOP_ASSIGN_OR_RETURN(auto stub, impl_->StubFor(resource));
  v1beta1::PreStartContainerRequest req;
  for (const auto& id : ids) req.add_devices_ids(id);
  v1beta1::PreStartContainerResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + call_timeout_.load());
  grpc::Status s = stub->PreStartContainer(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s, "PreStartContainer of " + resource);
  return Status::Ok();
}

Status FakeKubelet::Restart() {
  std::lock_guard lock(impl_->lifecycle_mu_);
  impl_->Stop();
  // The kubelet's device manager starts by removing every socket in its
  // directory: the plugins' signal to start over.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::error_code ignored;
    if (entry.is_socket(ignored)) std::filesystem::remove(entry.path(), ignored);
  }
  LogInfo("fake kubelet restarting", {{"socket", impl_->SocketPath()}});
  return impl_->Serve();
}

void FakeKubelet::Stop() {
  std::lock_guard lock(impl_->lifecycle_mu_);
  impl_->Stop();
}

}  // namespace gpuop::sim
