#include "discovery/system.h"

#include "base/strings.h"
#include "kube/names.h"

namespace gpuop::discovery {
namespace {

constexpr const char* kPrefix = "feature.node.kubernetes.io/";
constexpr const char* kKeys[] = {"system-os_release.ID",
                                 "system-os_release.VERSION_ID",
                                 "system-os_release.VERSION_ID.major",
                                 "system-os_release.VERSION_ID.minor",
                                 "kernel-version.full",
                                 "kernel-version.major",
                                 "kernel-version.minor",
                                 "kernel-version.revision"};

// Only values the API server takes as label values, and not empty ones.
void Put(Labels& out, const std::string& key, std::string_view value) {
  if (!value.empty() && kube::IsLabelValue(value).empty()) out[kPrefix + key] = std::string(value);
}

// "major.minor[.more]" → major and minor, as NFD splits versions.
void PutVersionParts(Labels& out, const std::string& key, std::string_view version) {
  std::vector<std::string> parts = Split(version, '.', false);
  if (parts.size() >= 1) Put(out, key + ".major", parts[0]);
  if (parts.size() >= 2) Put(out, key + ".minor", parts[1]);
}

}  // namespace

Labels SystemLabels(std::string_view os_release, std::string_view kernel_version) {
  Labels out;
  for (const std::string& line : Split(os_release, '\n')) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key(Trim(std::string_view(line).substr(0, eq)));
    std::string value(Trim(std::string_view(line).substr(eq + 1)));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "ID") Put(out, "system-os_release.ID", value);
    if (key == "VERSION_ID") {
      Put(out, "system-os_release.VERSION_ID", value);
      PutVersionParts(out, "system-os_release.VERSION_ID", value);
    }
  }
  const std::string_view kernel = Trim(kernel_version);
  if (!kernel.empty()) {
    Put(out, "kernel-version.full", kernel);
    // "5.15.0-105-generic": major 5, minor 15, revision 0.
    std::vector<std::string> parts = Split(kernel.substr(0, kernel.find('-')), '.', false);
    if (parts.size() >= 1) Put(out, "kernel-version.major", parts[0]);
    if (parts.size() >= 2) Put(out, "kernel-version.minor", parts[1]);
    if (parts.size() >= 3) Put(out, "kernel-version.revision", parts[2]);
  }
  return out;
}

bool IsSystemLabel(std::string_view key) {
  if (!StartsWith(key, kPrefix)) return false;
  key.remove_prefix(std::string_view(kPrefix).size());
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace gpuop::discovery
