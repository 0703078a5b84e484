// Strategic merge patch bodies of PATCH requests to the API emulator
// (kubectl's default patch type). The input is a JSON array [object, patch];
// the object's apiVersion and kind pick the schema (Kubernetes 1.35 OpenAPI,
// loaded once) that drives the merge, as in the emulator.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "sim/kube/strategic_merge.h"

using namespace gpuop::simkube;
using gpuop::fuzz::Check;

namespace {

const SchemaSet& Schemas() {
  static std::shared_ptr<const SchemaSet> set = [] {
    auto r = SchemaSet::LoadDirectory(GPUOP_OPENAPI_DIR);
    Check(r.ok(), "cannot load the OpenAPI schemas", r.ok() ? "" : r.status().ToString());
    return *r;
  }();
  return *set;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto in = gpuop::fuzz::ObjectAndPatch(data, size);
  if (!in) return 0;
  const auto& [object, patch] = *in;
  const Schema* schema = nullptr;
  if (object.is_object() && object.value("apiVersion", Json()).is_string() &&
      object.value("kind", Json()).is_string()) {
    schema = Schemas().ForKind(GroupVersionKind::FromApiVersion(
        object["apiVersion"].get<std::string>(), object["kind"].get<std::string>()));
  }
  (void)StrategicMergePatch(object, patch, schema);
  if (schema != nullptr) (void)StrategicMergePatch(object, patch, nullptr);
  return 0;
}
