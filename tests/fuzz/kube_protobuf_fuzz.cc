// Kubernetes protobuf request bodies (Content-Type
// application/vnd.kubernetes.protobuf) as the API emulator decodes them from
// any client. The input is the whole body: the magic "k8s\0", the
// runtime.Unknown envelope and the object. Invariants: decoding never crashes
// nor reads past the input (ASan); a body that decodes is a JSON object with
// the envelope's apiVersion and kind, which nlohmann can serialise (valid
// UTF-8); a failure is InvalidArgument or NotSupported; decoding is
// deterministic.
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_util.h"
#include "sim/kube/protobuf.h"

using gpuop::fuzz::Check;
using gpuop::simkube::DecodeKubeProtobuf;
using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body = gpuop::fuzz::AsText(data, size);
  auto first = DecodeKubeProtobuf(body);
  auto again = DecodeKubeProtobuf(body);
  Check(first.ok() == again.ok(), "decoding is not deterministic");
  if (!first.ok()) {
    auto code = first.status().code();
    Check(code == gpuop::StatusCode::kInvalidArgument || code == gpuop::StatusCode::kNotSupported,
          "an unexpected error code", first.status().ToString());
    Check(first.status().ToString() == again.status().ToString(), "the error is not deterministic",
          first.status().ToString());
    return 0;
  }
  const json& object = first.value();
  Check(object.is_object(), "the decoded object is not a JSON object", object.dump());
  Check(object.contains("apiVersion") && object["apiVersion"].is_string(),
        "the decoded object has no apiVersion", object.dump());
  Check(object.contains("kind") && object["kind"].is_string() &&
            !object["kind"].get<std::string>().empty(),
        "the decoded object has no kind", object.dump());
  // dump() throws on a string that is not UTF-8; the server writes this JSON.
  std::string text;
  try {
    text = object.dump();
  } catch (const json::exception& e) {
    Check(false, "the decoded object cannot be serialised", e.what());
  }
  Check(text == again.value().dump(), "decoding is not deterministic", text);
  return 0;
}
