// Docker's /etc/docker/daemon.json as `gpuop runtime configure --runtime
// docker` edits it. Input: a byte of options (runtime_fuzz.h; bit 3: the
// rest is gpuop's record daemon.json.gpuop-backup instead), then the bytes.
// Invariants: runtime_fuzz.h's contract, and daemon.json stays valid JSON.
#include <nlohmann/json.hpp>

#include "runtime/docker.h"
#include "runtime_fuzz.h"

using namespace gpuop::runtime;
using gpuop::fuzz::Tree;

namespace {

const std::string kDaemon(kDockerConfigPath);
const std::string kRecord = kDaemon + std::string(kDockerRecordSuffix);

gpuop::Result<Plan> PlanTree(const Tree& t, const ConfigureOptions& opts) {
  return PlanDocker(
      {kDaemon, gpuop::fuzz::Get(t, kDaemon), gpuop::fuzz::Get(t, kRecord), "/usr/bin/runc"}, opts);
}

bool ValidJson(const std::string& path, const std::string& text) {
  return path != kDaemon || nlohmann::json::accept(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(gpuop::fuzz::AsText(data + 1, size - 1));
  ConfigureOptions opts = gpuop::fuzz::Options(RuntimeKind::kDocker, data[0]);
  if ((data[0] & 8) != 0) {
    (void)PlanTree(Tree{{kDaemon, "{\"runtimes\": {}}"}, {kRecord, bytes}}, opts);
    return 0;
  }
  Tree original{{kDaemon, bytes}};
  (void)PlanTree(original, opts);
  gpuop::fuzz::CheckConfigureAndRevert(original, opts, PlanTree, ValidJson);
  return 0;
}
