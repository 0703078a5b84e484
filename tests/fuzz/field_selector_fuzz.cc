// Field selectors (?fieldSelector=) as the API emulator parses them from any
// client. Invariant: String() (with its escapes) parses back to the same
// requirements.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "sim/kube/selector.h"

using gpuop::fuzz::Check;
using gpuop::simkube::FieldSelector;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto sel = FieldSelector::Parse(gpuop::fuzz::AsText(data, size));
  if (!sel.ok()) return 0;
  std::string canon = sel->String();
  auto again = FieldSelector::Parse(canon);
  Check(again.ok(), "a field selector's String() does not parse",
        canon + "\n" + (again.ok() ? "" : again.status().ToString()));
  const auto& a = sel->requirements();
  const auto& b = again->requirements();
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) {
    same = a[i].field == b[i].field && a[i].equals == b[i].equals && a[i].value == b[i].value;
  }
  Check(same, "a field selector changes through String()", canon);
  nlohmann::json obj = {{"metadata", {{"name", "n"}, {"namespace", "ns"}}},
                        {"spec", {{"nodeName", "node-1"}}}};
  for (const auto& r : a) (void)sel->RequiredValue(r.field);
  (void)sel->Matches(obj);
  return 0;
}
