#include "kubelet/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <utility>

#include "kubelet/proto_convert.h"
#include "podresources/v1/api.grpc.pb.h"

namespace gpuop::kubelet {
namespace {

// The kubelet's own pod-resources clients allow 16 MiB answers: a node with
// hundreds of pods outgrows gRPC's 4 MiB default.
constexpr int kMaxAnswerBytes = 16 * 1024 * 1024;

std::string SocketContext(const std::string& socket_path) {
  return "kubelet pod-resources socket " + socket_path;
}

// "unix:///abs/path" for absolute paths; "unix:rel/path" is gRPC's only form
// for relative ones (after "unix://" the next word would be an authority).
std::string ChannelTarget(const std::string& socket_path) {
  if (!socket_path.empty() && socket_path.front() == '/') return "unix://" + socket_path;
  return "unix:" + socket_path;
}

// A fresh channel per call: callers poll every few seconds at most, and a
// fresh channel never carries a broken connection over a kubelet restart.
std::unique_ptr<v1::PodResourcesLister::Stub> Dial(const std::string& socket_path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxAnswerBytes);
  return v1::PodResourcesLister::NewStub(grpc::CreateCustomChannel(
      ChannelTarget(socket_path), grpc::InsecureChannelCredentials(), args));
}

// One call of `rpc` on a fresh channel, `response` filled when it succeeds.
template <typename Request, typename Response>
grpc::Status Call(const std::string& socket_path, std::chrono::milliseconds timeout,
                  grpc::Status (v1::PodResourcesLister::Stub::*rpc)(grpc::ClientContext*,
                                                                    const Request&, Response*),
                  const Request& request, Response* response) {
  auto stub = Dial(socket_path);
  grpc::ClientContext ctx;
  // Fail fast rather than queue when the kubelet is down: the deadline then
  // bounds only a kubelet that accepted the call and is slow to answer.
  ctx.set_wait_for_ready(false);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  return ((*stub).*rpc)(&ctx, request, response);
}

Status CallError(const grpc::Status& s, const std::string& socket_path, std::string_view method,
                 std::chrono::milliseconds timeout) {
  const std::string where = SocketContext(socket_path);
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable(where +
                         ": unavailable (is the kubelet running? does --kubelet-dir name its "
                         "root directory?): " +
                         s.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return DeadlineExceeded(where + ": " + std::string(method) + " got no answer within " +
                              std::to_string(timeout.count()) + " ms");
    case grpc::StatusCode::UNIMPLEMENTED:
      return NotSupported(where + ": this kubelet does not serve v1.PodResourcesLister/" +
                          std::string(method) + " (" + s.error_message() +
                          "); pod attribution needs kubelet 1.20+ (Get: 1.27+)");
    default:
      return FromGrpcStatus(s, where + ": " + std::string(method));
  }
}

void AppendFlattened(const v1::PodResources& pod, std::vector<ContainerDevices>* out) {
  for (const v1::ContainerResources& container : pod.containers()) {
    for (const v1::ContainerDevices& devices : container.devices()) {
      if (devices.device_ids().empty()) continue;
      ContainerDevices entry;
      entry.pod = pod.name();
      entry.namespace_ = pod.namespace_();
      entry.container = container.name();
      entry.resource_name = devices.resource_name();
      entry.device_ids.assign(devices.device_ids().begin(), devices.device_ids().end());
      out->push_back(std::move(entry));
    }
  }
}

}  // namespace

std::string PodResourcesSocket(const std::string& kubelet_dir) {
  std::string dir = kubelet_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir == "/") dir.clear();
  return dir + "/pod-resources/kubelet.sock";
}

Result<std::vector<ContainerDevices>> ListPodResources(const std::string& socket_path,
                                                       std::chrono::milliseconds timeout) {
  v1::ListPodResourcesResponse response;
  grpc::Status s = Call(socket_path, timeout, &v1::PodResourcesLister::Stub::List,
                        v1::ListPodResourcesRequest(), &response);
  if (!s.ok()) return CallError(s, socket_path, "List", timeout);
  std::vector<ContainerDevices> out;
  for (const v1::PodResources& pod : response.pod_resources()) AppendFlattened(pod, &out);
  return out;
}

Result<std::vector<ContainerDevices>> GetPodResources(const std::string& socket_path,
                                                      const std::string& namespace_,
                                                      const std::string& pod,
                                                      std::chrono::milliseconds timeout) {
  v1::GetPodResourcesRequest request;
  request.set_pod_name(pod);
  request.set_pod_namespace(namespace_);
  v1::GetPodResourcesResponse response;
  grpc::Status s =
      Call(socket_path, timeout, &v1::PodResourcesLister::Stub::Get, request, &response);
  // The kubelet reports an unknown pod as a plain error (gRPC UNKNOWN).
  if (s.error_code() == grpc::StatusCode::NOT_FOUND ||
      (s.error_code() == grpc::StatusCode::UNKNOWN &&
       s.error_message().find("not found") != std::string::npos)) {
    return NotFound(SocketContext(socket_path) + ": Get: pod " + namespace_ + "/" + pod +
                    " not found on this node (" + s.error_message() + ")");
  }
  if (!s.ok()) return CallError(s, socket_path, "Get", timeout);
  std::vector<ContainerDevices> out;
  AppendFlattened(response.pod_resources(), &out);
  return out;
}

Result<std::vector<ContainerDevices>> GetAllocatableDevices(const std::string& socket_path,
                                                            std::chrono::milliseconds timeout) {
  v1::AllocatableResourcesResponse response;
  grpc::Status s =
      Call(socket_path, timeout, &v1::PodResourcesLister::Stub::GetAllocatableResources,
           v1::AllocatableResourcesRequest(), &response);
  if (!s.ok()) return CallError(s, socket_path, "GetAllocatableResources", timeout);
  std::vector<ContainerDevices> out;
  for (const v1::ContainerDevices& devices : response.devices()) {
    ContainerDevices entry;
    entry.resource_name = devices.resource_name();
    entry.device_ids.assign(devices.device_ids().begin(), devices.device_ids().end());
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace gpuop::kubelet
