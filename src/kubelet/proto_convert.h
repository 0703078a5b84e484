// Conversions between the kubelet's v1beta1 protos and gpuop's plain device
// plugin values (kubelet/device_plugin_types.h), and between gRPC and gpuop statuses.
// The rest of gpuop never sees a proto: only src/kubelet and sim/kubelet do.
// Pure functions; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include <string_view>
#include <vector>

#include "base/status.h"
#include "deviceplugin/v1beta1/api.pb.h"
#include "kubelet/device_plugin_types.h"

namespace gpuop::kubelet {

// Device.health values.
inline constexpr std::string_view kHealthy = "Healthy";
inline constexpr std::string_view kUnhealthy = "Unhealthy";

// A device with numa_node < 0 carries no topology.
void ToProto(const PluginDevice& in, v1beta1::Device* out);
// Any health other than "Healthy" reads as unhealthy; the first NUMA node wins.
PluginDevice FromProto(const v1beta1::Device& in);

void ToProto(const ContainerAllocation& in, v1beta1::ContainerAllocateResponse* out);
ContainerAllocation FromProto(const v1beta1::ContainerAllocateResponse& in);

v1beta1::ListAndWatchResponse ToListAndWatchResponse(const std::vector<PluginDevice>& devices);
std::vector<PluginDevice> FromListAndWatchResponse(const v1beta1::ListAndWatchResponse& in);

// The gRPC status a failed callback becomes: same message (never empty), the
// nearest code (InvalidArgument → INVALID_ARGUMENT, Internal → INTERNAL, ...).
grpc::Status ToGrpcStatus(const Status& status);
// A failed RPC as a Status: "<context>: <gRPC message> (gRPC <CODE>)".
// REQUIRES: !status.ok().
Status FromGrpcStatus(const grpc::Status& status, std::string_view context);
std::string_view GrpcCodeName(grpc::StatusCode code);

}  // namespace gpuop::kubelet
