// CRI-O's drop-in directory as `gpuop runtime configure --runtime crio`
// finds it: the input (after a byte of options, runtime_fuzz.h) is what
// /etc/crio/crio.conf.d/99-nvidia.conf holds. Invariants: what gpuop writes
// parses as TOML; from no drop-in, runtime_fuzz.h's contract.
#include "runtime/crio.h"
#include "runtime/toml_util.h"
#include "runtime_fuzz.h"

using namespace gpuop::runtime;
using gpuop::fuzz::Check;
using gpuop::fuzz::Tree;

namespace {

const std::string kDropIn(kCrioDropInPath);

gpuop::Result<Plan> PlanTree(const Tree& t, const ConfigureOptions& opts) {
  return PlanCrio({kDropIn, gpuop::fuzz::Get(t, kDropIn), "/usr/bin/runc"}, opts);
}

bool ValidToml(const std::string& path, const std::string& text) {
  return ParseToml(path, text).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ConfigureOptions opts = gpuop::fuzz::Options(RuntimeKind::kCrio, data[0]);
  Tree t{{kDropIn, std::string(gpuop::fuzz::AsText(data + 1, size - 1))}};
  if (auto plan = PlanTree(t, opts); plan.ok()) {
    gpuop::fuzz::Apply(*plan, &t);
    for (const auto& c : plan->changes) {
      if (c.after)
        Check(ValidToml(c.path, *c.after), "gpuop wrote a file it cannot read", *c.after);
    }
  }
  gpuop::fuzz::CheckConfigureAndRevert(Tree{}, opts, PlanTree, ValidToml);
  return 0;
}
