// Helpers for the kubelet tests: a short temporary directory (unix socket
// paths must stay under 108 bytes) and a condition wait with a deadline.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

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

// For state with no notification of its own (a file's existence): checks
// `cond` until it holds or `timeout` passes.
inline bool WaitUntil(const std::function<bool()>& cond,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace gpuop::kubelet::testing
