#include "kubelet/registration.h"

#include <grpcpp/grpcpp.h>

#include "base/files.h"
#include "base/log.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "kubelet/proto_convert.h"

namespace gpuop::kubelet {

Status RegisterWithKubelet(const std::string& kubelet_socket, const std::string& endpoint_basename,
                           const std::string& resource_name, bool preferred_allocation,
                           std::chrono::milliseconds timeout, std::stop_token stop) {
  const std::string what = "registering " + resource_name + " (endpoint " + endpoint_basename +
                           ") with the kubelet at " + kubelet_socket;
  const std::string dir = DirName(kubelet_socket);
  if (endpoint_basename.empty() || endpoint_basename.find('/') != std::string::npos) {
    return InvalidArgument(what + ": the endpoint must be a socket file name in " + dir +
                           ", not a path");
  }
  // Fail at once with the likely cause rather than after `timeout`.
  if (!PathExists(kubelet_socket)) {
    return Unavailable(what + ": " + kubelet_socket +
                       " does not exist; is the kubelet running? is " + dir +
                       " mounted into this container?");
  }

  auto channel = grpc::CreateChannel("unix:" + kubelet_socket, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);  // a kubelet that is just starting gets `timeout` to accept
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1beta1::RegisterRequest request;
  request.set_version(std::string(kDevicePluginApiVersion));
  request.set_endpoint(endpoint_basename);
  request.set_resource_name(resource_name);
  request.mutable_options()->set_get_preferred_allocation_available(preferred_allocation);
  v1beta1::Empty reply;
  std::stop_callback cancel(stop, [&ctx] { ctx.TryCancel(); });
  if (stop.stop_requested()) return Unavailable(what + ": cancelled, stopping");
  grpc::Status s = stub->Register(&ctx, request, &reply);
  if (!s.ok()) {
    Status err = FromGrpcStatus(s, what);
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
        s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return Status(err.code(), err.message() + "; is the kubelet running? is " + dir +
                                    " mounted into this container?");
    }
    return err;  // the kubelet answered and said no: its message says why
  }
  LogInfo("registered with the kubelet", {{"resource", resource_name},
                                          {"endpoint", endpoint_basename},
                                          {"kubelet_socket", kubelet_socket}});
  return Status::Ok();
}

}  // namespace gpuop::kubelet
