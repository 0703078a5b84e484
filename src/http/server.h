// A small HTTP/1.1 server for a component's own endpoints (/metrics,
// /healthz, /readyz): GET and HEAD routes answered from callbacks on one
// event-loop thread of its own (epoll, non-blocking sockets). Keep-alive and
// pipelining are supported; a slow reader never holds up other connections.
// Not for the Kubernetes API (that is the client's side).
//
// Addresses are written like Go's: ":8080" (every interface), "127.0.0.1:0"
// (port 0: the kernel picks one; port() tells which), "[::1]:9400".
//
// Thread-safety: handlers run on the server's one loop thread, one at a time,
// so they need not be reentrant, but they must be quick and must not block
// (they return prebuilt strings or snapshots): while one runs, no other
// connection is served. A handler that throws answers 500. Stop may be called
// from any thread, a handler included; destroying the Server from a handler
// is not allowed.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace gpuop::http {

// host and port of "HOST:PORT", ":PORT" or "[IPv6]:PORT". `flag` names the
// option in errors ("--metrics-addr :x is not HOST:PORT ...").
Result<std::pair<std::string, int>> ParseListen(std::string_view listen, std::string_view flag);

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Optional: sent before `body` without being copied (a pre-rendered page
  // shared by every request, e.g. the exporter's snapshot).
  std::shared_ptr<const std::string> shared_body;
};
using Handler = std::function<Response()>;

class Server {
 public:
  // Binds and starts serving `routes` (exact paths, GET and HEAD). Errors: a
  // bad address, a port in use.
  static Result<std::unique_ptr<Server>> Start(std::string_view listen, std::string_view flag,
                                               std::map<std::string, Handler> routes);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // "127.0.0.1:34567".
  std::string address() const;
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuop::http
