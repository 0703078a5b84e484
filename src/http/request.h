// The HTTP/1.1 request-head parser of the component server (server.h): the
// request line and the headers the server acts on (Connection,
// Content-Length, Transfer-Encoding). Split out of the server so it can be
// fuzzed and tested on bytes alone (tests/fuzz/http_request_fuzz.cc).
//
// Pure function over bytes; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpuop::http {

// One parsed request head. Views point into the parsed buffer.
struct Request {
  std::string_view method;
  std::string_view path;  // without query string or fragment
  bool http10 = false;
  bool keep_alive = true;
  bool has_body = false;
};

enum class ParseResult { kIncomplete, kRequest, kBad };

// Parses the request head at the start of `in`; on kRequest `*consumed` is
// its length including the blank line.
ParseResult ParseRequest(std::string_view in, Request* req, size_t* consumed);

}  // namespace gpuop::http
