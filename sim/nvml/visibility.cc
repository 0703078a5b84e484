#include "sim/nvml/visibility.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace gpuop::sim {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

}  // namespace

VisibilityConfig VisibilityFromEnv() {
  VisibilityConfig c;
  const char* mode = std::getenv("GPUOP_SIM_VISIBLE");
  c.devnodes = mode != nullptr && std::string_view(mode) == "devnodes";
  const char* dir = std::getenv("GPUOP_SIM_DEV_DIR");
  if (dir != nullptr && *dir != '\0') c.dev_dir = dir;
  return c;
}

std::vector<unsigned> VisibleGpus(const Machine& m, const VisibilityConfig& config,
                                  const std::function<bool(const std::string&)>& exists) {
  std::vector<unsigned> out;
  for (unsigned i = 0; i < m.gpus.size(); ++i) {
    if (!config.devnodes || exists(config.dev_dir + "/nvidia" + std::to_string(m.gpus[i].minor))) {
      out.push_back(i);
    }
  }
  return out;
}

std::vector<unsigned> VisibleGpusFromEnv(const Machine& m) {
  return VisibleGpus(m, VisibilityFromEnv(), [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
  });
}

std::vector<unsigned> ApplyCudaVisibleDevices(const Machine& m,
                                              const std::vector<unsigned>& visible,
                                              std::string_view value) {
  std::vector<unsigned> out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view entry = Trim(value.substr(pos, comma - pos));
    pos = comma + 1;
    if (entry.empty()) break;
    int found = -1;
    if (AllDigits(entry)) {
      unsigned long ordinal = std::strtoul(std::string(entry).c_str(), nullptr, 10);
      if (ordinal < visible.size()) found = static_cast<int>(visible[ordinal]);
    } else if (entry.substr(0, 4) == "GPU-") {
      int matches = 0;
      for (unsigned index : visible) {
        if (m.gpus[index].uuid.compare(0, entry.size(), entry) == 0) {
          found = static_cast<int>(index);
          ++matches;
        }
      }
      if (matches != 1) found = -1;
    }
    if (found < 0) break;
    if (std::find(out.begin(), out.end(), static_cast<unsigned>(found)) != out.end()) break;
    out.push_back(static_cast<unsigned>(found));
  }
  return out;
}

}  // namespace gpuop::sim
