// containerd's config.toml (version 1, 2 or 3) as `gpuop runtime configure`
// reads it from the host. Input: a byte of options (runtime_fuzz.h), then
// the main config. Invariants: runtime_fuzz.h's contract, and every file
// written parses as TOML.
#include "runtime/containerd.h"
#include "runtime/toml_util.h"
#include "runtime_fuzz.h"

using namespace gpuop::runtime;
using gpuop::fuzz::Tree;

namespace {

const std::string kMain(kContainerdConfigPath);
const std::string kDropIn(kContainerdDropInPath);

gpuop::Result<Plan> PlanTree(const Tree& t, const ConfigureOptions& opts) {
  ContainerdInputs in;
  in.config_path = kMain;
  in.drop_in_path = kDropIn;
  in.main = gpuop::fuzz::Get(t, kMain);
  in.drop_in = gpuop::fuzz::Get(t, kDropIn);
  return PlanContainerd(in, opts);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string main(gpuop::fuzz::AsText(data + 1, size - 1));
  (void)ContainerdImports(kMain, main);
  ConfigureOptions opts = gpuop::fuzz::Options(RuntimeKind::kContainerd, data[0]);
  Tree original{{kMain, main}};
  (void)PlanTree(original, opts);
  // The main config as gpuop's drop-in (what a revert reads back).
  (void)PlanTree(Tree{{kMain, "version = 2\n"}, {kDropIn, main}}, opts);
  // A main config that already imports the drop-in by name loses that entry
  // on revert, by design (containerd does not start with a plain import
  // missing): not checked.
  if (main.find(kDropIn) != std::string::npos) return 0;
  // Nor does a line carrying gpuop's import marker: it is taken for the line
  // an earlier gpuop added (its drop-in since deleted), and revert cleans it
  // up with the rest.
  if (main.find(kImportMarker) != std::string::npos) return 0;
  gpuop::fuzz::CheckConfigureAndRevert(
      original, opts, PlanTree,
      [](const std::string& path, const std::string& text) { return ParseToml(path, text).ok(); });
  return 0;
}
