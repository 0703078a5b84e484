// What the runtime config targets share: a host tree in memory that a Plan
// is applied to, and the options the input's first byte picks. The contract
// each target checks (runtime/plan.h, containerd.h, docker.h): a plan's
// `before` is what the tree holds, configuring twice changes nothing the
// second time, and --revert gives back the original bytes.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "fuzz_util.h"
#include "runtime/plan.h"

namespace gpuop::fuzz {

using Tree = std::map<std::string, std::string>;

inline std::optional<std::string> Get(const Tree& t, const std::string& path) {
  auto it = t.find(path);
  return it == t.end() ? std::nullopt : std::optional<std::string>(it->second);
}

inline std::string Dump(const Tree& t) {
  std::string s;
  for (const auto& [path, bytes] : t) s += "== " + path + "\n" + bytes + "\n";
  return s;
}

// Applies `plan` to `t`; each change's `before` must be what `t` holds.
inline void Apply(const runtime::Plan& plan, Tree* t) {
  for (const runtime::FileChange& c : plan.changes) {
    if (c.directory) continue;  // the tree holds files only
    Check(c.before == Get(*t, c.path), "a plan's `before` is not the file's bytes", c.path);
    if (c.after) {
      (*t)[c.path] = *c.after;
    } else {
      t->erase(c.path);
    }
  }
}

// Bits 0-2 of `bits`: --set-as-default, --cdi-enabled, --revert.
inline runtime::ConfigureOptions Options(runtime::RuntimeKind kind, uint8_t bits) {
  runtime::ConfigureOptions o;
  o.runtime = kind;
  o.set_as_default = (bits & 1) != 0;
  o.cdi_enabled = (bits & 2) != 0;
  o.revert = (bits & 4) != 0;
  return o;
}

// Configures `original` with `opts` through `plan` (a function of a Tree
// and options returning Result<Plan>); when that succeeds, checks that
// `valid` accepts every file written, that a second run changes nothing and
// that --revert restores `original`.
template <typename PlanFn, typename ValidFn>
void CheckConfigureAndRevert(const Tree& original, runtime::ConfigureOptions opts, PlanFn plan,
                             ValidFn valid) {
  opts.revert = false;
  auto configure = plan(original, opts);
  if (!configure.ok()) return;
  Tree t = original;
  Apply(*configure, &t);
  for (const auto& c : configure->changes) {
    if (c.after) Check(valid(c.path, *c.after), "gpuop wrote a file it cannot read", Dump(t));
  }
  auto again = plan(t, opts);
  Check(again.ok() && again->changes.empty(), "configuring twice changes something", Dump(t));
  opts.revert = true;
  auto revert = plan(t, opts);
  Check(revert.ok(), "revert fails after configure",
        Dump(t) + (revert.ok() ? "" : revert.status().ToString()));
  Apply(*revert, &t);
  Check(t == original, "revert does not restore the original bytes",
        "original:\n" + Dump(original) + "reverted:\n" + Dump(t));
}

}  // namespace gpuop::fuzz
