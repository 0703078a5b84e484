#include "kubelet/dra_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <condition_variable>
#include <exception>
#include <filesystem>
#include <optional>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/mutex.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "kubelet/proto_convert.h"
#include "kubelet/unix_socket.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace gpuop::kubelet {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace reg = ::pluginregistration;

// The message types of one DRA API version, by tag.
struct V1Tag {};
struct V1beta1Tag {};
template <class Tag>
struct DraApi;

template <>
struct DraApi<V1Tag> {
  using Service = drav1::DRAPlugin::Service;
  using PrepareRequest = drav1::NodePrepareResourcesRequest;
  using PrepareResponse = drav1::NodePrepareResourcesResponse;
  using UnprepareRequest = drav1::NodeUnprepareResourcesRequest;
  using UnprepareResponse = drav1::NodeUnprepareResourcesResponse;
  static constexpr std::string_view kVersion = kDraV1Version;
};

template <>
struct DraApi<V1beta1Tag> {
  using Service = drav1beta1::DRAPlugin::Service;
  using PrepareRequest = drav1beta1::NodePrepareResourcesRequest;
  using PrepareResponse = drav1beta1::NodePrepareResourcesResponse;
  using UnprepareRequest = drav1beta1::NodeUnprepareResourcesRequest;
  using UnprepareResponse = drav1beta1::NodeUnprepareResourcesResponse;
  static constexpr std::string_view kVersion = kDraV1beta1Version;
};

std::string ClaimsString(const std::vector<DraClaim>& claims) {
  std::string s;
  for (const auto& c : claims) s += (s.empty() ? "" : ",") + c.ns + "/" + c.name;
  return s;
}

// One DRA API version, handing every non-empty call to the driver.
template <class Tag>
class DraService final : public DraApi<Tag>::Service {
  using Api = DraApi<Tag>;

 public:
  explicit DraService(DraDriver* driver) : driver_(driver) {}

  grpc::Status NodePrepareResources(grpc::ServerContext* /*ctx*/,
                                    const typename Api::PrepareRequest* request,
                                    typename Api::PrepareResponse* response) override {
    if (request->claims().empty()) return grpc::Status::OK;  // a health probe
    const std::vector<DraClaim> claims = ClaimsFromProto(*request);
    std::map<std::string, DraPrepareResult> results;
    try {
      results = driver_->Prepare(claims);
    } catch (const std::exception& e) {
      return DriverFailed("NodePrepareResources", claims, e);
    }
    size_t failed = 0;
    for (const auto& [uid, result] : results) {
      if (result.error.empty()) continue;
      ++failed;
      LogWarn("preparing a claim failed",
              {{"api", Api::kVersion}, {"claim_uid", uid}, {"error", result.error}});
    }
    LogInfo("NodePrepareResources",
            {{"api", Api::kVersion}, {"claims", ClaimsString(claims)}, {"failed", failed}});
    *response = PrepareResultsToProto<typename Api::PrepareResponse>(results);
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext* /*ctx*/,
                                      const typename Api::UnprepareRequest* request,
                                      typename Api::UnprepareResponse* response) override {
    if (request->claims().empty()) return grpc::Status::OK;
    const std::vector<DraClaim> claims = ClaimsFromProto(*request);
    std::map<std::string, std::string> errors;
    try {
      errors = driver_->Unprepare(claims);
    } catch (const std::exception& e) {
      return DriverFailed("NodeUnprepareResources", claims, e);
    }
    size_t failed = 0;
    for (const auto& [uid, error] : errors) {
      if (error.empty()) continue;
      ++failed;
      LogWarn("unpreparing a claim failed",
              {{"api", Api::kVersion}, {"claim_uid", uid}, {"error", error}});
    }
    LogInfo("NodeUnprepareResources",
            {{"api", Api::kVersion}, {"claims", ClaimsString(claims)}, {"failed", failed}});
    *response = UnprepareResultsToProto<typename Api::UnprepareResponse>(errors);
    return grpc::Status::OK;
  }

 private:
  // A throwing driver is a bug; the kubelet gets an error and retries.
  static grpc::Status DriverFailed(std::string_view method, const std::vector<DraClaim>& claims,
                                   const std::exception& e) {
    const std::string message =
        std::string(method) + " of " + ClaimsString(claims) + ": the driver threw: " + e.what();
    LogError("DRA driver threw", {{"api", Api::kVersion}, {"error", message}});
    return grpc::Status(grpc::StatusCode::INTERNAL, message);
  }

  DraDriver* const driver_;
};

std::string AbsolutePath(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace

std::string DraSocketPath(const std::string& plugin_dir) {
  return plugin_dir + "/" + std::string(kDraSocketName);
}

std::string DraRegistrationSocketPath(const std::string& registry_dir,
                                      const std::string& driver_name) {
  return registry_dir + "/" + driver_name + "-reg.sock";
}

class DraPluginServer::Impl final : public reg::Registration::Service {
 public:
  Impl(DraDriver* driver, DraPluginServerOptions options)
      : options_(std::move(options)),
        dra_socket_(AbsolutePath(DraSocketPath(options_.plugin_dir))),
        registration_socket_(
            AbsolutePath(DraRegistrationSocketPath(options_.registry_dir, options_.driver_name))),
        v1_(driver),
        v1beta1_(driver) {}

  ~Impl() override { Stop(); }

  // --- pluginregistration.Registration ---

  grpc::Status GetInfo(grpc::ServerContext* /*ctx*/, const reg::InfoRequest* /*request*/,
                       reg::PluginInfo* info) override {
    info->set_type(std::string(kDraPluginType));
    info->set_name(options_.driver_name);
    info->set_endpoint(options_.endpoint.empty() ? dra_socket_ : options_.endpoint);
    info->add_supported_versions(std::string(kDraV1Version));
    info->add_supported_versions(std::string(kDraV1beta1Version));
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* /*ctx*/,
                                        const reg::RegistrationStatus* status,
                                        reg::RegistrationStatusResponse* /*response*/) override {
    if (status->plugin_registered()) {
      LogInfo("registered with the kubelet",
              {{"driver", options_.driver_name}, {"socket", registration_socket_}});
    } else {
      LogError("the kubelet refused the DRA plugin", {{"driver", options_.driver_name},
                                                      {"socket", registration_socket_},
                                                      {"error", status->error()}});
    }
    MutexLock lock(mu_);
    ++state_.notifications;
    state_.registered = status->plugin_registered();
    state_.error = status->error();
    notified_.notify_all();
    return grpc::Status::OK;
  }

  // --- owner side ---

  Status Serve() {
    {
      grpc::ServerBuilder builder;
      builder.RegisterService(&v1_);
      builder.RegisterService(&v1beta1_);
      GPUOP_ASSIGN_OR_RETURN(UnixSocketServer served,
                             ServeOnUnixSocket(builder, dra_socket_, "DRA plugin socket"));
      dra_server_ = std::move(served.server);
      dra_socket_id_ = served.socket_id;
    }
    GPUOP_RETURN_IF_ERROR(CheckAnswers());
    grpc::ServerBuilder builder;
    builder.RegisterService(this);
    GPUOP_ASSIGN_OR_RETURN(
        UnixSocketServer served,
        ServeOnUnixSocket(builder, registration_socket_, "DRA plugin registration socket"));
    registration_server_ = std::move(served.server);
    registration_socket_id_ = served.socket_id;
    return Status::Ok();
  }

  void Stop() {
    MutexLock stop_lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    StopServer(registration_server_, registration_socket_, registration_socket_id_);
    StopServer(dra_server_, dra_socket_, dra_socket_id_);
  }

  DraRegistrationState Registration() const {
    MutexLock lock(mu_);
    return state_;
  }

  bool WaitForNotification(uint64_t min_notifications, std::chrono::milliseconds timeout) const {
    MutexLock lock(mu_);
    return notified_.wait_for(lock.native(), timeout, [&]() GPUOP_REQUIRES(mu_) {
      return state_.notifications >= min_notifications;
    });
  }

  const std::string& dra_socket() const { return dra_socket_; }
  const std::string& registration_socket() const { return registration_socket_; }

 private:
  // Like the kubelet's first call, with no claims.
  Status CheckAnswers() {
    return kubelet::CheckAnswers(
        dra_socket_, options_.start_timeout, "DRA plugin socket",
        [](const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx) {
          drav1::NodePrepareResourcesRequest request;
          drav1::NodePrepareResourcesResponse response;
          return drav1::DRAPlugin::NewStub(channel)->NodePrepareResources(ctx, request, &response);
        });
  }

  static void StopServer(std::unique_ptr<grpc::Server>& server, const std::string& socket,
                         const std::optional<SocketFileId>& socket_id) {
    if (!server) return;
    server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server->Wait();
    server.reset();
    RemoveOwnUnixSocket(socket, socket_id);
  }

  const DraPluginServerOptions options_;
  const std::string dra_socket_;
  const std::string registration_socket_;
  DraService<V1Tag> v1_;
  DraService<V1beta1Tag> v1beta1_;

  std::unique_ptr<grpc::Server> dra_server_;
  std::optional<SocketFileId> dra_socket_id_;
  std::unique_ptr<grpc::Server> registration_server_;
  std::optional<SocketFileId> registration_socket_id_;

  Mutex stop_mu_;
  bool stopped_ GPUOP_GUARDED_BY(stop_mu_) = false;

  mutable Mutex mu_;
  mutable std::condition_variable notified_;
  DraRegistrationState state_ GPUOP_GUARDED_BY(mu_);
};

Result<std::unique_ptr<DraPluginServer>> DraPluginServer::Start(DraDriver* driver,
                                                                DraPluginServerOptions options) {
  if (options.driver_name.empty() || options.driver_name.find('/') != std::string::npos) {
    return InvalidArgument("DRA driver name \"" + options.driver_name +
                           "\" must be a DNS subdomain such as gpu.nvidia.com");
  }
  auto impl = std::make_unique<Impl>(driver, std::move(options));
  GPUOP_RETURN_IF_ERROR(CheckUnixSocketPath(impl->dra_socket(), "DRA plugin socket"));
  GPUOP_RETURN_IF_ERROR(
      CheckUnixSocketPath(impl->registration_socket(), "DRA plugin registration socket"));
  const std::string registry_dir = DirName(impl->registration_socket());
  struct stat st {};
  if (::stat(registry_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFound("the kubelet's plugin registration directory " + registry_dir +
                    " does not exist: is the kubelet running? is " + registry_dir +
                    " mounted into this container?");
  }
  GPUOP_RETURN_IF_ERROR(MakeDirs(DirName(impl->dra_socket()), 0750));
  Status s = impl->Serve();
  if (!s.ok()) {
    impl->Stop();
    return s;
  }
  LogInfo("DRA plugin serving", {{"dra_socket", impl->dra_socket()},
                                 {"registration_socket", impl->registration_socket()}});
  return std::unique_ptr<DraPluginServer>(new DraPluginServer(std::move(impl)));
}

DraPluginServer::DraPluginServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DraPluginServer::~DraPluginServer() { Stop(); }
void DraPluginServer::Stop() { impl_->Stop(); }
DraRegistrationState DraPluginServer::Registration() const { return impl_->Registration(); }
bool DraPluginServer::WaitForNotification(uint64_t min_notifications,
                                          std::chrono::milliseconds timeout) const {
  return impl_->WaitForNotification(min_notifications, timeout);
}
const std::string& DraPluginServer::dra_socket() const { return impl_->dra_socket(); }
const std::string& DraPluginServer::registration_socket() const {
  return impl_->registration_socket();
}

// --- conversions ---

template <class ClaimsRequest>
std::vector<DraClaim> ClaimsFromProto(const ClaimsRequest& request) {
  std::vector<DraClaim> out;
  out.reserve(static_cast<size_t>(request.claims_size()));
  for (const auto& c : request.claims()) out.push_back({c.namespace_(), c.uid(), c.name()});
  return out;
}

template <class ClaimsRequest>
ClaimsRequest ClaimsToProto(const std::vector<DraClaim>& claims) {
  ClaimsRequest out;
  for (const auto& c : claims) {
    auto* claim = out.add_claims();
    claim->set_namespace_(c.ns);
    claim->set_uid(c.uid);
    claim->set_name(c.name);
  }
  return out;
}

template <class PrepareResponse>
PrepareResponse PrepareResultsToProto(const std::map<std::string, DraPrepareResult>& results) {
  PrepareResponse out;
  for (const auto& [uid, result] : results) {
    auto& claim = (*out.mutable_claims())[uid];
    claim.set_error(result.error);
    for (const auto& d : result.devices) {
      auto* device = claim.add_devices();
      for (const auto& r : d.request_names) device->add_request_names(r);
      device->set_pool_name(d.pool_name);
      device->set_device_name(d.device_name);
      for (const auto& id : d.cdi_device_ids) device->add_cdi_device_ids(id);
      if constexpr (requires { device->set_share_id(d.share_id); }) {
        if (!d.share_id.empty()) device->set_share_id(d.share_id);
      }
    }
  }
  return out;
}

template <class PrepareResponse>
std::map<std::string, DraPrepareResult> PrepareResultsFromProto(const PrepareResponse& response) {
  std::map<std::string, DraPrepareResult> out;
  for (const auto& [uid, claim] : response.claims()) {
    DraPrepareResult& result = out[uid];
    result.error = claim.error();
    for (const auto& d : claim.devices()) {
      DraPreparedDevice device;
      device.request_names.assign(d.request_names().begin(), d.request_names().end());
      device.pool_name = d.pool_name();
      device.device_name = d.device_name();
      device.cdi_device_ids.assign(d.cdi_device_ids().begin(), d.cdi_device_ids().end());
      if constexpr (requires { d.share_id(); }) device.share_id = d.share_id();
      result.devices.push_back(std::move(device));
    }
  }
  return out;
}

template <class UnprepareResponse>
UnprepareResponse UnprepareResultsToProto(const std::map<std::string, std::string>& errors) {
  UnprepareResponse out;
  for (const auto& [uid, error] : errors) (*out.mutable_claims())[uid].set_error(error);
  return out;
}

template <class UnprepareResponse>
std::map<std::string, std::string> UnprepareResultsFromProto(const UnprepareResponse& response) {
  std::map<std::string, std::string> out;
  for (const auto& [uid, claim] : response.claims()) out[uid] = claim.error();
  return out;
}

#define GPUOP_DRA_CONVERSIONS(ns)                                                           \
  template std::vector<DraClaim> ClaimsFromProto(const ns::NodePrepareResourcesRequest&);   \
  template std::vector<DraClaim> ClaimsFromProto(const ns::NodeUnprepareResourcesRequest&); \
  template ns::NodePrepareResourcesRequest ClaimsToProto(const std::vector<DraClaim>&);     \
  template ns::NodeUnprepareResourcesRequest ClaimsToProto(const std::vector<DraClaim>&);   \
  template ns::NodePrepareResourcesResponse PrepareResultsToProto(                          \
      const std::map<std::string, DraPrepareResult>&);                                      \
  template std::map<std::string, DraPrepareResult> PrepareResultsFromProto(                 \
      const ns::NodePrepareResourcesResponse&);                                             \
  template ns::NodeUnprepareResourcesResponse UnprepareResultsToProto(                      \
      const std::map<std::string, std::string>&);                                           \
  template std::map<std::string, std::string> UnprepareResultsFromProto(                    \
      const ns::NodeUnprepareResourcesResponse&);

GPUOP_DRA_CONVERSIONS(drav1)
GPUOP_DRA_CONVERSIONS(drav1beta1)
#undef GPUOP_DRA_CONVERSIONS

}  // namespace gpuop::kubelet
