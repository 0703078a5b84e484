// The API emulator's audit trail: one JSON line per API request (verb,
// resource, namespace, name, response code, user) to a file, and request
// counters per verb and per code that tests and benchmarks read through
// GET /gpuop-sim/audit.
//
// Lines are written with one write(2) each on an O_APPEND file, so a test can
// read the file while the server runs and never sees a torn line.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace gpuop::simkube {

struct AuditEntry {
  std::string verb;  // get list watch create update patch delete deletecollection
  std::string group;
  std::string resource;
  std::string subresource;
  std::string namespace_;
  std::string name;
  std::string user;
  int code = 0;
  std::string path;  // a non-resource request's path ("/version")
};

class AuditLog {
 public:
  AuditLog() = default;
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;
  ~AuditLog();

  // Starts writing lines to `path` (appending). Without it only counters are kept.
  Status Open(const std::string& path);

  void Record(const AuditEntry& e);

  // {"total": N, "verbs": {"get": N, ...}, "codes": {"200": N, ...}}
  nlohmann::json Counters() const;
  void ResetCounters();

  // The JSON line for one entry, without the newline.
  static std::string FormatLine(const AuditEntry& e, int64_t unix_ms);

 private:
  mutable std::mutex mu_;
  int fd_ = -1;                            // GUARDED_BY(mu_)
  uint64_t total_ = 0;                     // GUARDED_BY(mu_)
  std::map<std::string, uint64_t> verbs_;  // GUARDED_BY(mu_)
  std::map<int, uint64_t> codes_;          // GUARDED_BY(mu_)
};

}  // namespace gpuop::simkube
