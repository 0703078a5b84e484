// `gpuop cdi list`: the fully-qualified CDI device names ("vendor/class=name")
// that a container runtime would find in the spec directories, like
// `nvidia-ctk cdi list`, with every broken spec reported by file and reason.
//
// ListCdiDevices is the pure core: given the files' contents it parses each
// one strictly (cdi::Parse), validates it (cdi::Validate) and merges the
// names. A broken spec is reported and skipped; the others are still listed.
// As in the CDI registry, a spec in a later directory overrides one in an
// earlier directory for the same device name (/var/run/cdi over /etc/cdi),
// and the same name defined twice in one directory is a conflict reported
// against both files (neither definition is listed for that name).
// ReadCdiSpecDirs is the thin adapter that reads the directories. Both are
// thread-safe: no shared state.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace gpuop::toolkit {

// The default spec directories, in increasing priority.
inline constexpr const char* kCdiStaticDir = "/etc/cdi";
inline constexpr const char* kCdiDynamicDir = "/var/run/cdi";

struct CdiSpecFile {
  std::string path;
  int priority = 0;     // index of its directory; higher wins
  std::string content;  // empty and read_error set when it could not be read
  std::string read_error;
};

struct CdiSpecProblem {
  std::string path;
  std::string reason;
};

struct CdiListing {
  std::vector<std::string> devices;      // "vendor/class=name", sorted, unique
  std::vector<CdiSpecProblem> problems;  // in file order
  bool ok() const { return problems.empty(); }
};

// True for the file names a CDI registry loads: *.yaml, *.yml, *.json.
bool IsCdiSpecFileName(const std::string& name);

CdiListing ListCdiDevices(const std::vector<CdiSpecFile>& files);

// Reads every spec file (by IsCdiSpecFileName, sorted by name) in `dirs`; a
// directory that does not exist is skipped, as runtimes do. The priority of a
// file is its directory's index in `dirs`.
std::vector<CdiSpecFile> ReadCdiSpecDirs(const std::vector<std::string>& dirs);

}  // namespace gpuop::toolkit
