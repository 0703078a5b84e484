#include "sim/kubelet/dra_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "kubelet/dra_server.h"
#include "kubelet/proto_convert.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace gpuop::sim {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace reg = ::pluginregistration;
using kubelet::DraClaim;
using kubelet::DraPrepareResult;

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

std::string BracketList(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return "[" + s + "]";
}

// A claim the plugin was asked for but did not answer: the kubelet counts
// the call as failed and asks again.
template <class Map>
Status CheckEveryClaimAnswered(const std::vector<DraClaim>& claims, const Map& answers,
                               std::string_view method, const std::string& driver) {
  for (const auto& c : claims) {
    if (answers.contains(c.uid)) continue;
    return Internal("DRA driver " + driver + " answered " + std::string(method) +
                    " without claim " + c.ns + "/" + c.name + " (UID " + c.uid +
                    "); every claim asked for needs an entry, the kubelet asks again");
  }
  return Status::Ok();
}

}  // namespace

std::string_view DraApiVersionName(DraApiVersion version) {
  return version == DraApiVersion::kV1 ? kubelet::kDraV1Version : kubelet::kDraV1beta1Version;
}

Result<DraPluginRegistration> ValidateDraPluginInfo(const DraPluginInfo& info,
                                                    const std::string& registration_socket) {
  const std::string what = "plugin at " + registration_socket;
  if (info.type != kubelet::kDraPluginType) {
    return InvalidArgument(what + " has type \"" + info.type + "\"; a DRA driver must say \"" +
                           std::string(kubelet::kDraPluginType) + "\"");
  }
  if (info.name.empty()) {
    return InvalidArgument(what + " gave no driver name; it must name its DRA driver (e.g. " +
                           "gpu.nvidia.com)");
  }
  DraPluginRegistration out;
  out.driver_name = info.name;
  out.endpoint = info.endpoint.empty() ? registration_socket : info.endpoint;
  if (!StartsWith(out.endpoint, "/")) {
    return InvalidArgument(what + " (driver " + info.name + ") has endpoint \"" + out.endpoint +
                           "\"; it must be the absolute path of its DRA socket");
  }
  for (const auto& v : info.supported_versions) {
    if (v == kubelet::kDraV1Version || v == kubelet::kDraV1beta1Version) {
      out.version = v == kubelet::kDraV1Version ? DraApiVersion::kV1 : DraApiVersion::kV1beta1;
      return out;
    }
  }
  return InvalidArgument(what + " (driver " + info.name + ") supports " +
                         BracketList(info.supported_versions) + "; this kubelet speaks " +
                         std::string(kubelet::kDraV1Version) + " and " +
                         std::string(kubelet::kDraV1beta1Version));
}

// The chosen service's stub; the other stays null.
class DraKubeletClient::Stubs {
 public:
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<drav1::DRAPlugin::Stub> v1;
  std::unique_ptr<drav1beta1::DRAPlugin::Stub> v1beta1;
};

DraKubeletClient::DraKubeletClient(DraPluginRegistration registration, DraKubeletOptions options)
    : registration_(std::move(registration)), options_(options), stubs_(std::make_unique<Stubs>()) {
  // Lazy, like the kubelet's: it connects on the first call.
  stubs_->channel =
      grpc::CreateChannel("unix:" + registration_.dial_path, grpc::InsecureChannelCredentials());
  if (registration_.version == DraApiVersion::kV1) {
    stubs_->v1 = drav1::DRAPlugin::NewStub(stubs_->channel);
  } else {
    stubs_->v1beta1 = drav1beta1::DRAPlugin::NewStub(stubs_->channel);
  }
}

DraKubeletClient::~DraKubeletClient() = default;

Result<std::unique_ptr<DraKubeletClient>> DraKubeletClient::Register(
    const std::string& registration_socket, DraKubeletOptions options) {
  const std::string what = "registering the DRA plugin at " + registration_socket;
  if (!PathExists(registration_socket)) {
    return Unavailable(what + ": the socket does not exist; is the plugin running?");
  }
  auto channel =
      grpc::CreateChannel("unix:" + registration_socket, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(Deadline(options.dial_timeout))) {
    return Unavailable(what + ": no connection within " +
                       std::to_string(options.dial_timeout.count()) +
                       " ms; a socket left by a plugin that is gone?");
  }
  auto stub = reg::Registration::NewStub(channel);

  DraPluginInfo info;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(options.get_info_timeout));
    reg::PluginInfo reply;
    grpc::Status s = stub->GetInfo(&ctx, reg::InfoRequest(), &reply);
    if (!s.ok()) return kubelet::FromGrpcStatus(s, what + ": GetInfo");
    info = {reply.type(),
            reply.name(),
            reply.endpoint(),
            {reply.supported_versions().begin(), reply.supported_versions().end()}};
  }

  auto notify = [&](bool registered, const std::string& error) -> Status {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(options.notify_timeout));
    reg::RegistrationStatus status;
    status.set_plugin_registered(registered);
    status.set_error(error);
    reg::RegistrationStatusResponse reply;
    grpc::Status s = stub->NotifyRegistrationStatus(&ctx, status, &reply);
    if (!s.ok()) return kubelet::FromGrpcStatus(s, what + ": NotifyRegistrationStatus");
    return Status::Ok();
  };

  Result<DraPluginRegistration> accepted = ValidateDraPluginInfo(info, registration_socket);
  if (!accepted.ok()) {
    Status told = notify(false, accepted.status().message());
    if (!told.ok()) LogWarn("telling a refused DRA plugin why failed", {{"error", told}});
    return accepted.status();
  }
  accepted->dial_path =
      info.endpoint.empty() ? registration_socket : options.node_root + accepted->endpoint;
  GPUOP_RETURN_IF_ERROR(notify(true, ""));
  LogInfo("DRA plugin registered", {{"driver", accepted->driver_name},
                                    {"endpoint", accepted->endpoint},
                                    {"api", DraApiVersionName(accepted->version)}});
  return std::unique_ptr<DraKubeletClient>(new DraKubeletClient(std::move(*accepted), options));
}

namespace {

template <class Request, class Response, class Stub, class Method>
Result<Response> Call(Stub* stub, Method method, const std::vector<DraClaim>& claims,
                      std::chrono::milliseconds timeout, const std::string& context) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  const Request request = kubelet::ClaimsToProto<Request>(claims);
  Response response;
  grpc::Status s = (stub->*method)(&ctx, request, &response);
  if (!s.ok()) return kubelet::FromGrpcStatus(s, context);
  return response;
}

}  // namespace

Result<std::map<std::string, DraPrepareResult>> DraKubeletClient::Prepare(
    const std::vector<DraClaim>& claims) {
  const std::string context = "NodePrepareResources to DRA driver " + registration_.driver_name +
                              " at " + registration_.endpoint;
  std::map<std::string, DraPrepareResult> results;
  if (stubs_->v1) {
    GPUOP_ASSIGN_OR_RETURN(
        auto response,
        (Call<drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse>(
            stubs_->v1.get(), &drav1::DRAPlugin::Stub::NodePrepareResources, claims,
            options_.call_timeout, context)));
    results = kubelet::PrepareResultsFromProto(response);
  } else {
    GPUOP_ASSIGN_OR_RETURN(
        auto response,
        (Call<drav1beta1::NodePrepareResourcesRequest, drav1beta1::NodePrepareResourcesResponse>(
            stubs_->v1beta1.get(), &drav1beta1::DRAPlugin::Stub::NodePrepareResources, claims,
            options_.call_timeout, context)));
    results = kubelet::PrepareResultsFromProto(response);
  }
  GPUOP_RETURN_IF_ERROR(
      CheckEveryClaimAnswered(claims, results, "NodePrepareResources", registration_.driver_name));
  return results;
}

Result<std::map<std::string, std::string>> DraKubeletClient::Unprepare(
    const std::vector<DraClaim>& claims) {
  const std::string context = "NodeUnprepareResources to DRA driver " + registration_.driver_name +
                              " at " + registration_.endpoint;
  std::map<std::string, std::string> errors;
  if (stubs_->v1) {
    GPUOP_ASSIGN_OR_RETURN(
        auto response,
        (Call<drav1::NodeUnprepareResourcesRequest, drav1::NodeUnprepareResourcesResponse>(
            stubs_->v1.get(), &drav1::DRAPlugin::Stub::NodeUnprepareResources, claims,
            options_.call_timeout, context)));
    errors = kubelet::UnprepareResultsFromProto(response);
  } else {
    GPUOP_ASSIGN_OR_RETURN(auto response, (Call<drav1beta1::NodeUnprepareResourcesRequest,
                                                drav1beta1::NodeUnprepareResourcesResponse>(
                                              stubs_->v1beta1.get(),
                                              &drav1beta1::DRAPlugin::Stub::NodeUnprepareResources,
                                              claims, options_.call_timeout, context)));
    errors = kubelet::UnprepareResultsFromProto(response);
  }
  GPUOP_RETURN_IF_ERROR(
      CheckEveryClaimAnswered(claims, errors, "NodeUnprepareResources", registration_.driver_name));
  return errors;
}

std::vector<std::string> ListDraRegistrationSockets(const std::string& registry_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(registry_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (StartsWith(name, ".") || !EndsWith(name, "-reg.sock")) continue;
    if (!entry.is_socket(ec)) continue;
    out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpuop::sim
