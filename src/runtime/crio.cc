#include "runtime/crio.h"

#include "base/files.h"
#include "base/strings.h"
#include "runtime/toml_util.h"

namespace gpuop::runtime {
namespace {

constexpr std::string_view kFallbackRunc = "/usr/bin/runc";
constexpr std::string_view kReloadNote =
    "reload CRI-O to apply: systemctl reload crio (SIGHUP reloads runtimes and default_runtime; "
    "CRI-O releases without live reload need systemctl restart crio)";

// The directories an earlier configure created, deepest first, as recorded
// in its drop-in.
std::vector<std::string> CreatedDirs(const std::string& drop_in) {
  std::vector<std::string> dirs;
  for (size_t at = drop_in.find(kCrioCreatedDirLine); at != std::string::npos;
       at = drop_in.find(kCrioCreatedDirLine, at + 1)) {
    size_t begin = at + kCrioCreatedDirLine.size();
    size_t end = drop_in.find('\n', begin);
    std::string dir = drop_in.substr(begin, end == std::string::npos ? end : end - begin);
    if (!dir.empty()) dirs.push_back(dir);
  }
  return dirs;
}

}  // namespace

Result<Plan> PlanCrio(const CrioInputs& in, const ConfigureOptions& opts) {
  if (!ValidRuntimeName(opts.runtime_name)) {
    return InvalidArgument("runtime name '" + opts.runtime_name +
                           "' is not a valid handler name (letters, digits, '-', '_', '.')");
  }
  bool ours = in.drop_in && StartsWith(*in.drop_in, kCrioMarker);
  Plan plan;
  if (opts.revert) {
    if (in.drop_in && !ours) {
      plan.notes.push_back("left " + in.drop_in_path + " in place: it was not written by gpuop");
    }
    if (!ours) {
      plan.notes.push_back("nothing to revert: gpuop has not configured CRI-O");
      return plan;
    }
    plan.changes.push_back({in.drop_in_path, in.drop_in, std::nullopt});
    for (const std::string& dir : CreatedDirs(*in.drop_in)) {
      plan.changes.push_back({dir, std::nullopt, std::nullopt, /*directory=*/true});
    }
    plan.notes.push_back("removed CRI-O runtime handler '" + opts.runtime_name + "'");
    plan.notes.push_back(std::string(kReloadNote));
    return plan;
  }
  if (in.drop_in && !ours) {
    return FailedPrecondition(in.drop_in_path +
                              " exists and was not written by gpuop; move it away, then run "
                              "gpuop runtime configure again");
  }
  std::string runc = in.runc_path.empty() ? std::string(kFallbackRunc) : in.runc_path;

  toml::table handler{
      {"runtime_path", runc}, {"runtime_type", "oci"}, {"runtime_root", "/run/runc"}};
  toml::table runtime;
  if (opts.set_as_default) runtime.insert("default_runtime", opts.runtime_name);
  runtime.insert("runtimes", toml::table{{opts.runtime_name, std::move(handler)}});
  toml::table root{{"crio", toml::table{{"runtime", std::move(runtime)}}}};

  std::string text = std::string(kCrioMarker) + ": the CRI runtime handler \"" + opts.runtime_name +
                     "\"\n# (the RuntimeClass handler name). CRI-O applies crio.conf.d files in "
                     "name order\n# over crio.conf, key by key. `gpuop runtime configure "
                     "--runtime crio --revert`\n# deletes this file. CRI-O reads CDI specs from "
                     "/etc/cdi and /var/run/cdi by default.\n";
  // Keep the record of the directories an earlier run created across re-runs.
  for (const std::string& dir : ours ? CreatedDirs(*in.drop_in) : in.missing_dirs) {
    text += std::string(kCrioCreatedDirLine) + dir + "\n";
  }
  text += "\n" + FormatToml(root);
  GPUOP_RETURN_IF_ERROR(ParseToml(in.drop_in_path, text).status());

  if (in.drop_in != text) plan.changes.push_back({in.drop_in_path, in.drop_in, text});
  plan.notes.push_back("configured CRI-O runtime handler '" + opts.runtime_name +
                       "' (RuntimeClass handler: " + opts.runtime_name + ")");
  if (in.runc_path.empty()) {
    plan.notes.push_back("runc was not found on the host; runtime_path assumes " + runc);
  }
  if (opts.cdi_enabled) {
    plan.notes.push_back("CDI: CRI-O reads specs from /etc/cdi and /var/run/cdi by default");
  }
  if (plan.changes.empty()) {
    plan.notes.push_back("nothing to change: " + in.drop_in_path + " is up to date");
  } else {
    plan.notes.push_back(std::string(kReloadNote));
  }
  return plan;
}

}  // namespace gpuop::runtime
