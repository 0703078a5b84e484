// ScopedEnv: one environment variable set for the life of the object, the
// previous value (or its absence) restored after. Not thread-safe (setenv):
// for tests that set a variable before the code under test reads it.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace gpuop::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace gpuop::testing
