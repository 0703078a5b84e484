#include "kubelet/proto_convert.h"

#include <string>

namespace gpuop::kubelet {

void ToProto(const PluginDevice& in, v1beta1::Device* out) {
  out->set_id(in.id);
  out->set_health(std::string(in.healthy ? kHealthy : kUnhealthy));
  if (in.numa_node >= 0) out->mutable_topology()->add_nodes()->set_id(in.numa_node);
}

PluginDevice FromProto(const v1beta1::Device& in) {
  PluginDevice d;
  d.id = in.id();
  d.healthy = in.health() == kHealthy;
  if (in.has_topology() && in.topology().nodes_size() > 0) {
    d.numa_node = static_cast<int>(in.topology().nodes(0).id());
  }
  return d;
}

void ToProto(const ContainerAllocation& in, v1beta1::ContainerAllocateResponse* out) {
  for (const auto& [k, v] : in.envs) (*out->mutable_envs())[k] = v;
  for (const auto& m : in.mounts) {
    auto* pm = out->add_mounts();
    pm->set_container_path(m.container_path);
    pm->set_host_path(m.host_path);
    pm->set_read_only(m.read_only);
  }
  for (const auto& d : in.devices) {
    auto* pd = out->add_devices();
    pd->set_container_path(d.container_path);
    pd->set_host_path(d.host_path);
    pd->set_permissions(d.permissions);
  }
  for (const auto& [k, v] : in.annotations) (*out->mutable_annotations())[k] = v;
  for (const auto& name : in.cdi_devices) out->add_cdi_devices()->set_name(name);
}

ContainerAllocation FromProto(const v1beta1::ContainerAllocateResponse& in) {
  ContainerAllocation a;
  for (const auto& [k, v] : in.envs()) a.envs[k] = v;
  for (const auto& pm : in.mounts()) {
    a.mounts.push_back({pm.container_path(), pm.host_path(), pm.read_only()});
  }
  for (const auto& pd : in.devices()) {
    a.devices.push_back({pd.container_path(), pd.host_path(), pd.permissions()});
  }
  for (const auto& [k, v] : in.annotations()) a.annotations[k] = v;
  for (const auto& c : in.cdi_devices()) a.cdi_devices.push_back(c.name());
  return a;
}

v1beta1::ListAndWatchResponse ToListAndWatchResponse(const std::vector<PluginDevice>& devices) {
  v1beta1::ListAndWatchResponse r;
  for (const auto& d : devices) ToProto(d, r.add_devices());
  return r;
}

std::vector<PluginDevice> FromListAndWatchResponse(const v1beta1::ListAndWatchResponse& in) {
  std::vector<PluginDevice> out;
  out.reserve(static_cast<size_t>(in.devices_size()));
  for (const auto& d : in.devices()) out.push_back(FromProto(d));
  return out;
}

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case StatusCode::kOk:
      break;
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kNotSupported:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kAborted:
      code = grpc::StatusCode::ABORTED;
      break;
    case StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
  }
  std::string message = status.message();
  if (message.empty()) message = std::string(StatusCodeName(status.code())) + " (no message)";
  return {code, message};
}

std::string_view GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

Status FromGrpcStatus(const grpc::Status& status, std::string_view context) {
  StatusCode code = StatusCode::kInternal;
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      code = StatusCode::kInvalidArgument;
      break;
    case grpc::StatusCode::NOT_FOUND:
      code = StatusCode::kNotFound;
      break;
    case grpc::StatusCode::ALREADY_EXISTS:
      code = StatusCode::kAlreadyExists;
      break;
    case grpc::StatusCode::FAILED_PRECONDITION:
      code = StatusCode::kFailedPrecondition;
      break;
    case grpc::StatusCode::UNIMPLEMENTED:
      code = StatusCode::kNotSupported;
      break;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      code = StatusCode::kPermissionDenied;
      break;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      code = StatusCode::kUnavailable;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = StatusCode::kDeadlineExceeded;
      break;
    case grpc::StatusCode::ABORTED:
      code = StatusCode::kAborted;
      break;
    default:
      code = StatusCode::kInternal;
      break;
  }
  std::string message(context);
  message += ": ";
  message += status.error_message().empty() ? "(no message)" : status.error_message();
  message += " (gRPC ";
  message += GrpcCodeName(status.error_code());
  message += ")";
  return {code, message};
}

}  // namespace gpuop::kubelet
