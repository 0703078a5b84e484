// Helpers for the kubelet tests: a short temporary directory (unix socket
// paths must stay under 108 bytes) and the shared condition wait.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "tests/testing/wait.h"

namespace gpuop::kubelet::testing {

class ShortTempDir {
 public:
  ShortTempDir() {
    char tmpl[] = "/tmp/gk-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    path_ = p ? p : "";
  }
  ~ShortTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

using gpuop::testing::WaitFor;

}  // namespace gpuop::kubelet::testing
