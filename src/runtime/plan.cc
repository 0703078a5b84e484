#include "runtime/plan.h"

#include "runtime/diff.h"

namespace gpuop::runtime {

std::string_view RuntimeKindName(RuntimeKind kind) {
  switch (kind) {
    case RuntimeKind::kContainerd:
      return "containerd";
    case RuntimeKind::kCrio:
      return "crio";
    case RuntimeKind::kDocker:
      return "docker";
  }
  return "unknown";
}

std::string RenderPlanDiff(const Plan& plan) {
  std::string out;
  for (const FileChange& c : plan.changes) {
    if (c.directory) continue;
    std::string before_label = c.before ? c.path : "/dev/null";
    std::string after_label = c.after ? c.path : "/dev/null";
    out += UnifiedDiff(before_label, after_label, c.before.value_or(""), c.after.value_or(""));
  }
  return out;
}

bool ValidRuntimeName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace gpuop::runtime
