// Kubernetes protobuf request bodies (Content-Type
// application/vnd.kubernetes.protobuf), decoded into the JSON the API
// emulator's JSON path reads, so validation, defaulting and the store see no
// difference between the two encodings.
//
// client-go's typed clients (kubectl create namespace|configmap|secret|
// deployment|job|service|..., helm's release storage, kubectl drain's
// evictions) send built-in kinds as protobuf: the magic "k8s\0", then a
// runtime.Unknown message whose typeMeta names the kind and whose raw bytes
// hold the object. The object is decoded by a table per message (field number
// -> JSON name and kind, see ProtoField; the tables are in protobuf_tables.cc),
// so supporting a kind is writing its tables. The JSON is what Kubernetes' JSON
// serializer would write for the same Go object: JSON field names, bytes as
// base64, metav1.Time as RFC 3339, and zero values omitted where the Go field
// is `omitempty`.
//
// Unknown field numbers are skipped by their wire type, as the real server
// does with fields it does not know. So are the few real fields without a row
// (a Volume's cloud-disk and `ephemeral` sources, container statuses): a
// client that sends those must send JSON to keep them. Malformed input (truncated varint, a length
// past the end, a wrong wire type, no magic) is an InvalidArgument naming the field; the decoder
// never reads past its input. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::simkube {

// The media type of a protobuf body.
inline constexpr std::string_view kProtobufMediaType = "application/vnd.kubernetes.protobuf";

// What one field's bytes are and which JSON value they become.
enum class ProtoKind {
  kString,        // JSON string (must be UTF-8)
  kInt32,         // varint, JSON number
  kInt64,         // varint, JSON number
  kBool,          // varint, JSON true/false
  kBytes,         // JSON string, standard base64
  kMessage,       // JSON object, decoded by ProtoField::message
  kTime,          // metav1.Time (Timestamp seconds=1): "2026-12-03T10:00:00Z", null when empty
  kQuantity,      // resource.Quantity (string=1): its string
  kIntOrString,   // intstr.IntOrString (type=1, intVal=2, strVal=3): number or string
  kRawExtension,  // runtime.RawExtension / FieldsV1 (raw=1, JSON text): that JSON value
};

enum class ProtoLabel {
  kSingular,
  kRepeated,  // JSON array; varint kinds may also come packed
  kMap,       // map<string, kind>: JSON object (entries key=1, value=2); a ResourceList
              // is a kMap of kQuantity
};

// When a field appears in the JSON, after Go's encoding/json.
enum class ProtoEmit {
  kUnlessEmpty,  // `json:",omitempty"` on a value: "", 0 and false are left out
  kAlways,       // no omitempty, or a struct value: written even when absent from the
                 // wire, as its zero value (a message: its zero struct; a list or map: null)
  kIfSet,        // a pointer (*bool, *int64, *Time, *Struct): written when on the wire
};

struct ProtoMessage;

// One row of a message table.
struct ProtoField {
  uint32_t number;
  std::string_view json_name;  // empty for an embedded struct (`json:",inline"`, a
                               // kMessage): its fields are written into the parent
  ProtoKind kind;
  ProtoLabel label = ProtoLabel::kSingular;
  ProtoEmit emit = ProtoEmit::kUnlessEmpty;
  const ProtoMessage* message = nullptr;  // kind == kMessage only
};

// A message table; `name` is the Go type, for error messages.
struct ProtoMessage {
  std::string_view name;
  std::span<const ProtoField> fields;
};

// Decodes the bytes of one message by its table into a JSON object.
// InvalidArgument for malformed input, naming the message and field.
Result<nlohmann::json> DecodeProtoMessage(const ProtoMessage& message, std::string_view bytes);

// Decodes a whole request body (magic, runtime.Unknown, object) into the
// object's JSON, apiVersion and kind included. InvalidArgument for malformed
// input; NotSupported for a kind without tables or an encoded raw
// (contentEncoding), with the kinds that are supported.
Result<nlohmann::json> DecodeKubeProtobuf(std::string_view body);

// The kinds DecodeKubeProtobuf decodes, as "apiVersion Kind" ("v1 Secret");
// DeleteOptions, which every group version has, as "DeleteOptions (any apiVersion)".
std::vector<std::string> ProtobufKinds();

}  // namespace gpuop::simkube
