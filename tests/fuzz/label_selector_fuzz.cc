// Label selectors (?labelSelector=, and metav1.LabelSelector objects) as the
// API emulator parses them from any client. Invariants: String() is
// canonical (it parses to a selector with the same String()), and the
// re-parsed selector matches the same label sets.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "sim/kube/selector.h"

using gpuop::fuzz::Check;
using gpuop::simkube::LabelSelector;
using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = gpuop::fuzz::AsText(data, size);
  if (json j = json::parse(text, nullptr, false); !j.is_discarded()) {
    (void)LabelSelector::FromJson(j);
  }
  auto sel = LabelSelector::Parse(text);
  if (!sel.ok()) return 0;
  std::string canon = sel->String();
  auto again = LabelSelector::Parse(canon);
  Check(again.ok(), "a selector's String() does not parse",
        canon + "\n" + (again.ok() ? "" : again.status().ToString()));
  Check(again->String() == canon, "a selector's String() is not canonical", canon);
  // Label sets built from the selector's own keys and values.
  json labels = json::object();
  for (const auto& r : sel->requirements()) {
    labels[r.key] = r.values.empty() ? "" : r.values.front();
    for (json l : {json(nullptr), json::object(), labels}) {
      Check(sel->Matches(l) == again->Matches(l), "a re-parsed selector matches differently",
            canon + " on " + l.dump());
    }
  }
  return 0;
}
