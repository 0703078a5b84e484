// ClusterPolicy objects (the CRD users and Helm write) as the operator reads
// them: YAML or JSON documents, each read by ParsePolicy, all of them by
// ActivePolicyIndex.
#include <nlohmann/json.hpp>

#include "base/yaml_json.h"
#include "fuzz_util.h"
#include "operator/policy.h"

using namespace gpuop::op;
using gpuop::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto docs = gpuop::ParseYamlDocuments(gpuop::fuzz::AsText(data, size));
  if (!docs.ok()) return 0;
  OperatorEnv env;
  env.gpuop_image = "ghcr.io/gpuop/gpuop:0.1.0";
  env.driver_image_fallback = "nvcr.io/nvidia/driver:570.172.08";
  for (const Json& doc : *docs) {
    auto policy = ParsePolicy(doc, env);
    if (!policy.ok()) continue;
    for (Component c : kAllComponents) {
      Check(policy->Get(c).component == c, "a policy lists a component out of place",
            ComponentName(c));
    }
  }
  int active = ActivePolicyIndex(*docs);
  Check(active >= -1 && active < static_cast<int>(docs->size()),
        "ActivePolicyIndex is out of range", std::to_string(active));
  return 0;
}
