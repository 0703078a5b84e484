#include "sim/kube/audit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/clock.h"

namespace gpuop::simkube {

AuditLog::~AuditLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status AuditLog::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Internal("cannot open audit log " + path + ": " + std::strerror(errno) +
                    "; check that its directory exists and is writable");
  }
  std::lock_guard lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  return Status::Ok();
}

std::string AuditLog::FormatLine(const AuditEntry& e, int64_t unix_ms) {
  nlohmann::json j{{"ts", unix_ms},
                   {"verb", e.verb},
                   {"group", e.group},
                   {"resource", e.resource},
                   {"namespace", e.namespace_},
                   {"name", e.name},
                   {"code", e.code},
                   {"user", e.user}};
  if (!e.subresource.empty()) j["subresource"] = e.subresource;
  if (!e.path.empty()) j["path"] = e.path;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AuditLog::Record(const AuditEntry& e) {
  const int64_t now = NowUnixMillis();
  std::lock_guard lock(mu_);
  ++total_;
  ++verbs_[e.verb];
  ++codes_[e.code];
  if (fd_ < 0) return;
  std::string line = FormatLine(e, now) + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // a full disk loses audit lines, never requests
    off += static_cast<size_t>(n);
  }
}

nlohmann::json AuditLog::Counters() const {
  std::lock_guard lock(mu_);
  nlohmann::json verbs = nlohmann::json::object(), codes = nlohmann::json::object();
  for (const auto& [v, n] : verbs_) verbs[v] = n;
  for (const auto& [c, n] : codes_) codes[std::to_string(c)] = n;
  return {{"total", total_}, {"verbs", std::move(verbs)}, {"codes", std::move(codes)}};
}

void AuditLog::ResetCounters() {
  std::lock_guard lock(mu_);
  total_ = 0;
  verbs_.clear();
  codes_.clear();
}

}  // namespace gpuop::simkube
