#include "http/request.h"

#include "base/strings.h"

namespace gpuop::http {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] + 32) : a[i];
    char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] + 32) : b[i];
    if (x != y) return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Whether the comma-separated header value holds `token` (case-insensitive).
bool HasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    if (EqualsIgnoreCase(TrimSpaces(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

ParseResult ParseRequest(std::string_view in, Request* req, size_t* consumed) {
  // A blank line ends the head; bare LF line ends are tolerated.
  size_t end = std::string_view::npos;
  size_t head_len = 0;
  for (size_t i = in.find('\n'); i != std::string_view::npos; i = in.find('\n', i + 1)) {
    if (i + 1 < in.size() && in[i + 1] == '\n') {
      end = i;
      head_len = i + 2;
      break;
    }
    if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') {
      end = i;
      head_len = i + 3;
      break;
    }
  }
  if (end == std::string_view::npos) return ParseResult::kIncomplete;
  *consumed = head_len;
  std::string_view head = in.substr(0, end);

  size_t eol = head.find('\n');
  std::string_view line = TrimSpaces(head.substr(0, eol));
  head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 1);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || sp2 == sp1 + 1) return ParseResult::kBad;
  req->method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (version == "HTTP/1.1") {
    req->keep_alive = true;
  } else if (version == "HTTP/1.0") {
    req->http10 = true;
    req->keep_alive = false;
  } else {
    return ParseResult::kBad;
  }
  // absolute-form ("http://host/path") names the same resource.
  if (size_t scheme = target.find("://"); scheme != std::string_view::npos && target[0] != '/') {
    size_t slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  req->path = target.substr(0, target.find_first_of("?#"));

  bool close = false;
  bool keep_alive = false;
  while (!head.empty()) {
    eol = head.find('\n');
    std::string_view field = head.substr(0, eol);
    head = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 1);
    if (!field.empty() && field.back() == '\r') field.remove_suffix(1);
    if (field.empty()) continue;
    size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return ParseResult::kBad;
    std::string_view name = field.substr(0, colon);
    std::string_view value = TrimSpaces(field.substr(colon + 1));
    if (EqualsIgnoreCase(name, "connection")) {
      close = close || HasToken(value, "close");
      keep_alive = keep_alive || HasToken(value, "keep-alive");
    } else if (EqualsIgnoreCase(name, "content-length")) {
      auto n = ParseUint(value);
      if (!n) return ParseResult::kBad;
      if (*n > 0) req->has_body = true;
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      req->has_body = true;
    }
  }
  if (close) req->keep_alive = false;
  if (keep_alive && !close) req->keep_alive = true;
  return ParseResult::kRequest;
}

}  // namespace gpuop::http
