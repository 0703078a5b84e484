#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

#include "base/clock.h"
#include "base/strings.h"

namespace gpuop {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::atomic<int> g_fd{2};

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}

// Text values are quoted only when they need it, so logs stay greppable.
void AppendTextValue(std::string& out, std::string_view v) {
  bool plain = !v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      plain = false;
      break;
    }
  }
  if (plain) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
}

std::string Timestamp(int64_t unix_ms) {
  std::time_t secs = unix_ms / 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(unix_ms % 1000));
  return out;
}

}  // namespace

bool ParseLogLevel(std::string_view s, LogLevel* out) {
  if (s == "debug") *out = LogLevel::kDebug;
  else if (s == "info") *out = LogLevel::kInfo;
  else if (s == "warn" || s == "warning") *out = LogLevel::kWarn;
  else if (s == "error") *out = LogLevel::kError;
  else return false;
  return true;
}

bool ParseLogFormat(std::string_view s, LogFormat* out) {
  if (s == "text") *out = LogFormat::kText;
  else if (s == "json") *out = LogFormat::kJson;
  else return false;
  return true;
}

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }
void SetLogFd(int fd) { g_fd = fd; }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

std::string FormatLogLine(LogFormat format, LogLevel level, std::string_view msg,
                          std::initializer_list<LogField> fields, int64_t unix_ms) {
  std::string line;
  line.reserve(128);
  if (format == LogFormat::kJson) {
    line += "{\"ts\":";
    line += JsonQuote(Timestamp(unix_ms));
    line += ",\"level\":";
    line += JsonQuote(LevelName(level));
    line += ",\"msg\":";
    line += JsonQuote(msg);
    for (const auto& f : fields) {
      line += ',';
      line += JsonQuote(f.key);
      line += ':';
      line += JsonQuote(f.value);
    }
    line += "}\n";
    return line;
  }
  line += "ts=";
  line += Timestamp(unix_ms);
  line += " level=";
  line += LevelName(level);
  line += " msg=";
  AppendTextValue(line, msg);
  for (const auto& f : fields) {
    line += ' ';
    line += f.key;
    line += '=';
    AppendTextValue(line, f.value);
  }
  line += '\n';
  return line;
}

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  const int64_t now = NowUnixMillis();
  std::string line =
      FormatLogLine(static_cast<LogFormat>(g_format.load()), level, msg, fields, now);
  // One write per line: concurrent loggers never interleave within a line.
  ssize_t n = ::write(g_fd.load(), line.data(), line.size());
  (void)n;
}

}  // namespace gpuop
