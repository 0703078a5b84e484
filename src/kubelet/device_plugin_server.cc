#include "kubelet/device_plugin_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <condition_variable>
#include <exception>
#include <optional>
#include <set>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/mutex.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "kubelet/proto_convert.h"
#include "kubelet/unix_socket.h"

namespace gpuop::kubelet {
namespace {


}  // namespace

class DevicePluginServer::Impl final : public v1beta1::DevicePlugin::CallbackService {
 public:
  Impl(std::string socket_path, DevicePluginCallbacks callbacks, DevicePluginServerOptions options)
      : socket_path_(std::move(socket_path)), callbacks_(std::move(callbacks)), options_(options) {}

  ~Impl() override { Stop(); }

  // One ListAndWatch stream. At most one write is in flight; a newer list
  // replaces one still waiting, since each message is the full list. Owned by
  // gRPC: deleted in OnDone, after it has left the owner's set.
  class Stream final : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
   public:
    explicit Stream(Impl* owner) : owner_(owner) {}

    void Offer(v1beta1::ListAndWatchResponse response) {
      {
        MutexLock lock(mu_);
        if (finishing_) return;
        next_ = std::move(response);
        if (writing_) return;
        writing_ = true;
        current_ = std::move(*next_);
        next_.reset();
      }
      // No lock held: gRPC may run OnWriteDone on this thread.
      owner_->sends_.fetch_add(1, std::memory_order_relaxed);
      StartWrite(&current_);
    }

    // Finishes the stream, after the write in flight if there is one.
    void End(grpc::Status status) {
      {
        MutexLock lock(mu_);
        if (finishing_) return;
        finishing_ = true;
        next_.reset();
        if (writing_) {
          final_status_ = std::move(status);
          return;  // OnWriteDone finishes
        }
      }
      Finish(std::move(status));
    }

    void OnWriteDone(bool ok) override {
      bool finish = false;
      grpc::Status finish_with;
      {
        MutexLock lock(mu_);
        if (!ok && !finishing_) {  // the kubelet hung up
          finishing_ = true;
          next_.reset();
          final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "ListAndWatch write failed");
        }
        if (!finishing_ && next_) {
          current_ = std::move(*next_);
          next_.reset();
        } else {
          writing_ = false;
          if (!finishing_) return;
          finish = true;
          finish_with = final_status_;
        }
      }
      if (finish) {
        Finish(std::move(finish_with));
        return;
      }
      owner_->sends_.fetch_add(1, std::memory_order_relaxed);
      StartWrite(&current_);
    }

    void OnCancel() override { End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }

    void OnDone() override {
      owner_->RemoveStream(this);
      delete this;
    }

   private:
    Impl* const owner_;
    Mutex mu_;
    bool writing_ GPUOP_GUARDED_BY(mu_) = false;    // a StartWrite awaits its OnWriteDone
    bool finishing_ GPUOP_GUARDED_BY(mu_) = false;  // End() or a failed write: no more writes
    grpc::Status final_status_ GPUOP_GUARDED_BY(mu_);
    std::optional<v1beta1::ListAndWatchResponse> next_ GPUOP_GUARDED_BY(mu_);
    v1beta1::ListAndWatchResponse current_;  // the message being written
  };

  // --- v1beta1.DevicePlugin ---

  grpc::ServerUnaryReactor* GetDevicePluginOptions(
      grpc::CallbackServerContext* ctx, const v1beta1::Empty* /*request*/,
      v1beta1::DevicePluginOptions* response) override {
    if (serving_.load()) options_calls_.fetch_add(1, std::memory_order_relaxed);
    response->set_pre_start_required(options_.pre_start_required);
    response->set_get_preferred_allocation_available(options_.get_preferred_allocation_available);
    return Reply(ctx, grpc::Status::OK);
  }

  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(
      grpc::CallbackServerContext* /*ctx*/, const v1beta1::Empty* /*request*/) override {
    auto* stream = new Stream(this);
    MutexLock lock(mu_);
    // Tracked even when refused, so Stop() waits for its OnDone.
    streams_.insert(stream);
    if (stopping_) {
      stream->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "device plugin is stopping"));
      return stream;
    }
    lw_calls_.fetch_add(1, std::memory_order_relaxed);
    // Under mu_, so a SetDevices racing with this call is seen in order.
    stream->Offer(ToListAndWatchResponse(devices_));
    return stream;
  }

  grpc::ServerUnaryReactor* GetPreferredAllocation(
      grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* response) override {
    preferred_calls_.fetch_add(1, std::memory_order_relaxed);
    if (!callbacks_.get_preferred_allocation) {
      preferred_errors_.fetch_add(1, std::memory_order_relaxed);
      return Reply(ctx,
                   grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                "this device plugin does not implement GetPreferredAllocation"));
    }
    for (const auto& c : request->container_requests()) {
      std::vector<std::string> available(c.available_deviceids().begin(),
                                         c.available_deviceids().end());
      std::vector<std::string> must_include(c.must_include_deviceids().begin(),
                                            c.must_include_deviceids().end());
      Result<std::vector<std::string>> ids = Internal("not called");
      try {
        ids = callbacks_.get_preferred_allocation(available, must_include, c.allocation_size());
      } catch (const std::exception& e) {
        ids = Internal(std::string("GetPreferredAllocation: ") + e.what());
      }
      if (!ids.ok()) {
        preferred_errors_.fetch_add(1, std::memory_order_relaxed);
        LogWarn("GetPreferredAllocation failed",
                {{"socket", socket_path_}, {"error", ids.status()}});
        return Reply(ctx, ToGrpcStatus(ids.status()));
      }
      auto* out = response->add_container_responses();
      for (const auto& id : *ids) out->add_deviceids(id);
    }
    return Reply(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) override {
    allocate_calls_.fetch_add(1, std::memory_order_relaxed);
    if (!callbacks_.allocate) {
      allocate_errors_.fetch_add(1, std::memory_order_relaxed);
      return Reply(ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                     "this device plugin does not implement Allocate"));
    }
    std::vector<std::vector<std::string>> containers;
    containers.reserve(static_cast<size_t>(request->container_requests_size()));
    for (const auto& c : request->container_requests()) {
      containers.emplace_back(c.devices_ids().begin(), c.devices_ids().end());
    }
    Result<std::vector<ContainerAllocation>> allocations = Internal("not called");
    try {
      allocations = callbacks_.allocate(containers);
    } catch (const std::exception& e) {
      allocations = Internal(std::string("Allocate: ") + e.what());
    }
    if (allocations.ok() && allocations->size() != containers.size()) {
      allocations = Internal("Allocate returned " + std::to_string(allocations->size()) +
                             " container allocations for " + std::to_string(containers.size()) +
                             " container requests (a bug in the device plugin)");
    }
    if (!allocations.ok()) {
      allocate_errors_.fetch_add(1, std::memory_order_relaxed);
      LogWarn("Allocate failed", {{"socket", socket_path_}, {"error", allocations.status()}});
      return Reply(ctx, ToGrpcStatus(allocations.status()));
    }
    for (const auto& a : *allocations) ToProto(a, response->add_container_responses());
    return Reply(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* PreStartContainer(
      grpc::CallbackServerContext* ctx, const v1beta1::PreStartContainerRequest* /*request*/,
      v1beta1::PreStartContainerResponse* /*resp*/) override {
    prestart_calls_.fetch_add(1, std::memory_order_relaxed);
    return Reply(ctx, grpc::Status::OK);
  }

  // --- owner side ---

  Status Serve() {
    grpc::ServerBuilder builder;
    builder.RegisterService(this);
    auto served = ServeOnUnixSocket(builder, socket_path_, "device plugin socket");
    if (!served.ok()) return served.status();
    server_ = std::move(served->server);
    socket_id_ = served->socket_id;

    // The NVIDIA plugin dials its own socket before registering.
    GPUOP_RETURN_IF_ERROR(
        CheckAnswers(socket_path_, options_.start_timeout, "device plugin socket",
                     [](const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx) {
                       v1beta1::Empty request;
                       v1beta1::DevicePluginOptions reply;
                       return v1beta1::DevicePlugin::NewStub(channel)->GetDevicePluginOptions(
                           ctx, request, &reply);
                     }));
    serving_.store(true);
    return Status::Ok();
  }

  void SetDevices(std::vector<PluginDevice> devices) {
    MutexLock lock(mu_);
    devices_ = std::move(devices);
    if (streams_.empty()) return;
    const v1beta1::ListAndWatchResponse response = ToListAndWatchResponse(devices_);
    // Holding mu_ keeps each stream alive (OnDone waits in RemoveStream).
    for (Stream* s : streams_) s->Offer(response);
  }

  std::vector<PluginDevice> Devices() const {
    MutexLock lock(mu_);
    return devices_;
  }

  void Stop() {
    MutexLock stop_lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    serving_.store(false);
    {
      MutexLock lock(mu_);
      stopping_ = true;
      for (Stream* s : streams_) s->End(grpc::Status::OK);
    }
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
      server_->Wait();
      // Shutdown returns once every call is done; make sure no stream still
      // points at us before this object can go.
      MutexLock lock(mu_);
      if (!streams_cv_.wait_for(lock.native(), std::chrono::seconds(2),
                                [&]() GPUOP_REQUIRES(mu_) { return streams_.empty(); })) {
        LogError("device plugin streams still open after shutdown",
                 {{"socket", socket_path_}, {"streams", streams_.size()}});
      }
    }
    RemoveOwnUnixSocket(socket_path_, socket_id_);
  }

  DevicePluginServerStats Stats() const {
    DevicePluginServerStats s;
    s.get_options_calls = options_calls_.load();
    s.list_and_watch_calls = lw_calls_.load();
    {
      MutexLock lock(mu_);
      s.list_and_watch_open = streams_.size();
    }
    s.list_and_watch_sends = sends_.load();
    s.allocate_calls = allocate_calls_.load();
    s.allocate_errors = allocate_errors_.load();
    s.preferred_allocation_calls = preferred_calls_.load();
    s.preferred_allocation_errors = preferred_errors_.load();
    s.pre_start_calls = prestart_calls_.load();
    return s;
  }

  bool Serving() const { return serving_.load(); }
  const std::string& socket_path() const { return socket_path_; }

 private:
  static grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* ctx, grpc::Status status) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(std::move(status));
    return reactor;
  }

  void RemoveStream(Stream* s) {
    MutexLock lock(mu_);
    streams_.erase(s);
    streams_cv_.notify_all();
  }

  const std::string socket_path_;
  const DevicePluginCallbacks callbacks_;
  const DevicePluginServerOptions options_;

  std::unique_ptr<grpc::Server> server_;
  std::optional<SocketFileId> socket_id_;
  std::atomic<bool> serving_{false};

  Mutex stop_mu_;
  bool stopped_ GPUOP_GUARDED_BY(stop_mu_) = false;

  mutable Mutex mu_;
  std::condition_variable streams_cv_;
  std::vector<PluginDevice> devices_ GPUOP_GUARDED_BY(mu_);
  std::set<Stream*> streams_ GPUOP_GUARDED_BY(mu_);
  bool stopping_ GPUOP_GUARDED_BY(mu_) = false;

  std::atomic<uint64_t> options_calls_{0}, lw_calls_{0}, sends_{0}, allocate_calls_{0},
      allocate_errors_{0}, preferred_calls_{0}, preferred_errors_{0}, prestart_calls_{0};
};

Result<std::unique_ptr<DevicePluginServer>> DevicePluginServer::Start(
    std::string socket_path, DevicePluginCallbacks callbacks, DevicePluginServerOptions options) {
  GPUOP_RETURN_IF_ERROR(CheckUnixSocketPath(socket_path, "device plugin socket"));
  const std::string dir = DirName(socket_path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFound("device plugin socket directory " + dir +
                    " does not exist: is the kubelet running? is " + dir +
                    " mounted into this container?");
  }
  auto impl = std::make_unique<Impl>(std::move(socket_path), std::move(callbacks), options);
  Status s = impl->Serve();
  if (!s.ok()) {
    impl->Stop();
    return s;
  }
  LogInfo("device plugin serving", {{"socket", impl->socket_path()}});
  return std::unique_ptr<DevicePluginServer>(new DevicePluginServer(std::move(impl)));
}

DevicePluginServer::DevicePluginServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DevicePluginServer::~DevicePluginServer() { Stop(); }

void DevicePluginServer::SetDevices(std::vector<PluginDevice> devices) {
  impl_->SetDevices(std::move(devices));
}
std::vector<PluginDevice> DevicePluginServer::Devices() const { return impl_->Devices(); }
void DevicePluginServer::Stop() { impl_->Stop(); }
bool DevicePluginServer::Serving() const { return impl_->Serving(); }
DevicePluginServerStats DevicePluginServer::Stats() const { return impl_->Stats(); }
const std::string& DevicePluginServer::socket_path() const { return impl_->socket_path(); }

}  // namespace gpuop::kubelet
