// A small HTTP/1.1 server for a component's own endpoints (/metrics,
// /healthz, /readyz): GET and HEAD routes answered from callbacks on one
// event-loop thread of its own (epoll, non-blocking sockets). Keep-alive and
// pipelining are supported; a slow reader never holds up other connections.
// Not for the Kubernetes API (that is the client's side).
//
// Every connection is bounded in time and number, so idle or slow peers
// cannot take the server away from a scraper or a kubelet probe: a request's
// head must arrive within header_timeout, a keep-alive connection may idle for
// idle_timeout, and each answer must be taken within write_timeout. When all
// connection slots are taken (a limit that follows RLIMIT_NOFILE), a newcomer
// is still served: the least recently active idle connection is closed for it
// ("shed"). ConnectionCounters counts what was refused, shed and timed out.
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

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
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

// What a server did with its connections; written by its loop thread, read by
// any (a /metrics handler).
struct ConnectionCounters {
  std::atomic<uint64_t> open{0};
  // Closed on arrival, or left in the kernel's queue for want of a
  // descriptor, because no connection could be shed for them.
  std::atomic<uint64_t> refused{0};
  // Closed to make room for a newcomer: idle ones first, least recently
  // active first; then ones still sending their request head.
  std::atomic<uint64_t> shed{0};
  std::atomic<uint64_t> header_timeouts{0};
  std::atomic<uint64_t> idle_timeouts{0};
  std::atomic<uint64_t> write_timeouts{0};
};

// Prometheus text for the counters of one or more servers of a process, each
// labelled server="NAME": gpuop_http_connections_open,
// gpuop_http_connections_{refused,shed}_total and
// gpuop_http_connections_timed_out_total{phase="header|idle|write"}.
std::string ConnectionMetrics(
    std::initializer_list<std::pair<std::string_view, const ConnectionCounters*>> servers);

// The connection limit a server takes by default: the process's soft
// RLIMIT_NOFILE less a quarter (at least 64) for its other descriptors.
size_t DefaultMaxConnections();

// The defaults are far beyond what a scraper or probe needs: Prometheus sends
// its request at once, reads the answer within its scrape timeout (10 s by
// default) and comes back every scrape interval.
struct ServerOptions {
  // From accepting a connection, or from the first byte of a request after an
  // idle spell, until the request's blank line.
  std::chrono::milliseconds header_timeout{std::chrono::seconds(30)};
  // A keep-alive connection with no request in progress.
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
  // Each answer must be taken whole within this of being queued first.
  std::chrono::milliseconds write_timeout{std::chrono::seconds(60)};
  // Open connections at most; 0: DefaultMaxConnections().
  size_t max_connections = 0;
  // Where the server counts; null: a set of its own (see counters()). Must
  // outlive the server.
  ConnectionCounters* counters = nullptr;
};

class Server {
 public:
  // Binds and starts serving `routes` (exact paths, GET and HEAD). Errors: a
  // bad address, a port in use.
  static Result<std::unique_ptr<Server>> Start(std::string_view listen, std::string_view flag,
                                               std::map<std::string, Handler> routes,
                                               ServerOptions options = {});
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // "127.0.0.1:34567".
  std::string address() const;
  const ConnectionCounters& counters() const;
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuop::http
