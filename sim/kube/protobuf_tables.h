// The message tables of the protobuf body decoder (sim/kube/protobuf.h),
// internal to sim/kube/protobuf*.cc: one ProtoMessage per Kubernetes message,
// field numbers from k8s.io/api's and k8s.io/apimachinery's generated.proto,
// JSON names and omitempty from the Go types' json tags. The decoder in
// protobuf.cc knows nothing of any kind; everything kind-specific is here.
// Constant data; thread-safe.
#pragma once

#include <span>
#include <string_view>

#include "sim/kube/protobuf.h"

namespace gpuop::simkube::protobuf_tables {

// A kind DecodeKubeProtobuf decodes, by the typeMeta of its envelope.
struct ProtobufType {
  std::string_view api_version;  // empty: any (options kinds are in every group version)
  std::string_view kind;
  const ProtoMessage* message;
};

// Every kind with tables, in the order ProtobufKinds() lists them.
std::span<const ProtobufType> Types();

// The wrappers with a JSON form of their own, which the decoder reads by
// these tables before writing that form: google.protobuf.Timestamp (for
// ProtoKind::kTime) and intstr.IntOrString (ProtoKind::kIntOrString).
const ProtoMessage& TimestampMessage();
const ProtoMessage& IntOrStringMessage();

// runtime.Unknown, the envelope after the magic; its raw=2 is read apart.
const ProtoMessage& UnknownMessage();

}  // namespace gpuop::simkube::protobuf_tables
