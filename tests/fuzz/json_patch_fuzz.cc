// JSON patch (RFC 6902) and JSON merge patch (RFC 7386) bodies of PATCH
// requests to the API emulator. The input is a JSON array [document, patch].
// Invariants: a merge patch is idempotent, and MergePatch(from,
// CreateMergePatch(from, to)) == to when `to` has no null object member (a
// merge patch cannot express one).
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "sim/kube/json_patch.h"

using gpuop::fuzz::Check;
using nlohmann::json;

namespace {

bool HasNullMember(const json& j) {
  if (!j.is_object()) return false;
  for (const auto& [k, v] : j.items()) {
    if (v.is_null() || HasNullMember(v)) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto in = gpuop::fuzz::ObjectAndPatch(data, size);
  if (!in) return 0;
  const auto& [doc, patch] = *in;
  (void)gpuop::simkube::ApplyJsonPatch(doc, patch);
  json merged = gpuop::simkube::MergePatch(doc, patch);
  Check(gpuop::simkube::MergePatch(merged, patch) == merged, "a merge patch is not idempotent",
        doc.dump() + "\n" + patch.dump());
  if (!HasNullMember(patch)) {
    json diff = gpuop::simkube::CreateMergePatch(doc, patch);
    Check(gpuop::simkube::MergePatch(doc, diff) == patch, "CreateMergePatch does not round-trip",
          doc.dump() + "\n" + patch.dump() + "\n" + diff.dump());
  }
  return 0;
}
