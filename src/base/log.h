// Structured logging: one line per event, `key=value` text or JSON.
//
//   Log(LogLevel::kInfo, "gpu lost", {{"gpu", 3}, {"uuid", uuid}});
//   → ts=2026-12-02T08:00:00.123Z level=info msg="gpu lost" gpu=3 uuid=GPU-...
//
// The level and format are process-wide and set once at start-up (SetLogLevel,
// SetLogFormat) before threads start; Log() itself may be called from any
// thread: each line is written with one write(2) so lines never interleave.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"

namespace gpuop {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kText, kJson };

struct LogField {
  std::string_view key;
  std::string value;

  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v ? v : "") {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  template <typename N, typename = std::enable_if_t<std::is_arithmetic_v<N>>>
  LogField(std::string_view k, N v) : key(k), value(std::to_string(v)) {}
  LogField(std::string_view k, const Status& s) : key(k), value(s.ToString()) {}
};

// Parses "debug|info|warn|error" and "text|json"; false on anything else.
bool ParseLogLevel(std::string_view s, LogLevel* out);
bool ParseLogFormat(std::string_view s, LogFormat* out);

void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
// Where lines go (default 2, stderr). Tests point it at a pipe or file.
void SetLogFd(int fd);
bool LogEnabled(LogLevel level);

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

// Formats one line without writing it (used by Log and by tests).
std::string FormatLogLine(LogFormat format, LogLevel level, std::string_view msg,
                          std::initializer_list<LogField> fields, int64_t unix_ms);

inline void LogDebug(std::string_view m, std::initializer_list<LogField> f = {}) {
  if (LogEnabled(LogLevel::kDebug)) Log(LogLevel::kDebug, m, f);
}
inline void LogInfo(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarn(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarn, m, f);
}
inline void LogError(std::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}

}  // namespace gpuop
