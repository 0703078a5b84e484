// A test's temporary directory: a fresh /tmp/gpuop-<prefix>-XXXXXX (short,
// for unix socket paths), removed with everything in it on destruction.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace gpuop::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "test") {
    std::string tmpl = "/tmp/gpuop-" + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
    } else {
      path_ = tmpl;
    }
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory (empty when it could not be made).
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gpuop::testing
