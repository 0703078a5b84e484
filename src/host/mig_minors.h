// The MIG capability table of the NVIDIA kernel module:
// /proc/driver/nvidia-caps/mig-minors maps each GPU instance and compute
// instance to the minor of its capability device /dev/nvidia-caps/nvidia-cap<N>
// ("gpu0/gi1/access 12", "gpu0/gi1/ci0/access 13"); a container needs the GI
// and CI capability nodes of its MIG device.
//
// ParseMigMinors is pure (the text in, the table out); MigMinors is a plain
// value. Thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "base/status.h"

namespace gpuop::host {

class MigMinors {
 public:
  // The minor of gpu<gpu_minor>/gi<gi>/access, or nullopt.
  std::optional<unsigned> Gi(unsigned gpu_minor, unsigned gi) const;
  // The minor of gpu<gpu_minor>/gi<gi>/ci<ci>/access, or nullopt.
  std::optional<unsigned> Ci(unsigned gpu_minor, unsigned gi, unsigned ci) const;
  size_t size() const { return minors_.size(); }

  // Adds one entry; ci < 0 for a GI entry.
  void Add(unsigned gpu_minor, unsigned gi, int ci, unsigned minor) {
    minors_[{gpu_minor, gi, ci}] = minor;
  }

 private:
  std::map<std::tuple<unsigned, unsigned, int>, unsigned> minors_;
};

// Parses the file's text. Lines that name no GI ("config 1", "monitor 2",
// "fabric-imex-mgmt 0") are skipped; a malformed gpu line is InvalidArgument
// naming `origin` and the line number.
Result<MigMinors> ParseMigMinors(std::string_view text, const std::string& origin);

}  // namespace gpuop::host
