#include "dra/names.h"

#include <cctype>

namespace gpuop::dra {

std::string ProfileForName(std::string_view profile) {
  std::string out;
  for (char c : profile) {
    if (c == '.') continue;
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += (std::isalnum(static_cast<unsigned char>(lower)) != 0) ? lower : '-';
  }
  return out;
}

std::string GpuDeviceName(const nvml::Gpu& gpu) { return "gpu-" + std::to_string(gpu.minor); }

std::string MigDeviceName(const nvml::Gpu& parent, const nvml::MigDevice& mig) {
  // An unprivileged reader does not learn the placement; the GI id is as unique.
  const std::string where =
      mig.placement ? std::to_string(mig.placement->start) : "gi" + std::to_string(mig.gi_id);
  return GpuDeviceName(parent) + "-mig-" + ProfileForName(mig.profile) + "-" +
         std::to_string(mig.gi_profile_id) + "-" + where;
}

}  // namespace gpuop::dra
