// CDI specs (YAML or JSON) as a container runtime or `gpuop cdi` reads them
// from /etc/cdi and /var/run/cdi. Invariant: what gpuop renders from a parsed
// spec parses back to a spec that renders the same (in both formats).
#include "fuzz_util.h"
#include "toolkit/cdi_spec.h"

using namespace gpuop::toolkit::cdi;
using gpuop::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = Parse(gpuop::fuzz::AsText(data, size));
  if (!spec.ok()) return 0;
  (void)Validate(*spec);
  (void)MinimumVersion(*spec);
  for (auto render : {&ToYaml, &ToJson}) {
    std::string text = render(*spec);
    auto again = Parse(text);
    Check(again.ok(), "a rendered spec does not parse",
          text + "\n" + (again.ok() ? "" : again.status().ToString()));
    Check(render(*again) == text, "a rendered spec renders differently after a parse", text);
  }
  return 0;
}
