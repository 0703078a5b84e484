// mig-parted config files (`version: v1`, `mig-configs`), from a ConfigMap or
// --config-file. Invariant: SerializeConfig writes what ParseConfig reads back
// to the same value.
#include "fuzz_util.h"
#include "mig/config.h"

using namespace gpuop::mig;
using gpuop::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = gpuop::fuzz::AsText(data, size);
  if (size < 64) (void)ParseProfileName(text);
  auto file = ParseConfig(text, "fuzz.yaml");
  if (!file.ok()) return 0;
  std::string out = SerializeConfig(*file);
  auto again = ParseConfig(out, "serialized.yaml");
  Check(again.ok(), "a serialized mig config does not parse",
        out + "\n" + (again.ok() ? "" : again.status().ToString()));
  Check(again->configs == file->configs, "a mig config changes through SerializeConfig", out);
  for (const auto& [name, entries] : file->configs) (void)file->Select(name);
  return 0;
}
