#include "http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <list>
#include <stop_token>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "base/mutex.h"
#include "base/strings.h"
#include "http/request.h"

namespace gpuop::http {

Result<std::pair<std::string, int>> ParseListen(std::string_view listen, std::string_view flag) {
  const std::string where = std::string(flag) + " " + std::string(listen);
  std::string host;
  std::string port;
  if (!listen.empty() && listen[0] == '[') {
    size_t close = listen.find(']');
    if (close == std::string_view::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return InvalidArgument(where + " is not [IPv6]:PORT, e.g. [::1]:8080");
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgument(where + " is not HOST:PORT, e.g. :8080 or 127.0.0.1:0");
    }
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  if (host.empty()) host = "0.0.0.0";
  auto p = ParseUint(port);
  if (!p || *p > 65535) {
    return InvalidArgument(where + " is not HOST:PORT with a port 0-65535");
  }
  return std::make_pair(host, static_cast<int>(*p));
}

size_t DefaultMaxConnections() {
  constexpr size_t kFallback = 1024;  // the usual soft limit
  rlimit limit{};
  size_t fds = kFallback;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    fds = static_cast<size_t>(limit.rlim_cur);
  }
  const size_t reserve = std::max<size_t>(64, fds / 4);
  return fds > reserve + 16 ? fds - reserve : 16;
}

std::string ConnectionMetrics(
    std::initializer_list<std::pair<std::string_view, const ConnectionCounters*>> servers) {
  std::string out;
  auto head = [&](std::string_view name, std::string_view type, std::string_view help) {
    out.append("# HELP gpuop_http_connections_").append(name).append(" ").append(help);
    out.append("\n# TYPE gpuop_http_connections_").append(name).append(" ").append(type);
    out.append("\n");
  };
  auto sample = [&](std::string_view name, std::string_view server, std::string_view phase,
                    uint64_t value) {
    out.append("gpuop_http_connections_").append(name).append("{server=").append(JsonQuote(server));
    if (!phase.empty()) out.append(",phase=\"").append(phase).append("\"");
    out.append("} ").append(std::to_string(value)).append("\n");
  };
  head("open", "gauge", "Connections open now.");
  for (const auto& [server, c] : servers) sample("open", server, "", c->open.load());
  head("refused_total", "counter", "New connections refused: none could be shed to make room.");
  for (const auto& [server, c] : servers) sample("refused_total", server, "", c->refused.load());
  head("shed_total", "counter", "Idle or half-sent connections closed to make room for new ones.");
  for (const auto& [server, c] : servers) sample("shed_total", server, "", c->shed.load());
  head("timed_out_total", "counter",
       "Connections closed for a bound: request head, keep-alive idle, or answer not taken.");
  for (const auto& [server, c] : servers) {
    sample("timed_out_total", server, "header", c->header_timeouts.load());
    sample("timed_out_total", server, "idle", c->idle_timeouts.load());
    sample("timed_out_total", server, "write", c->write_timeouts.load());
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// Request line and headers; a scraper's request is a few hundred bytes.
constexpr size_t kMaxRequestHead = 16 * 1024;
constexpr size_t kReadChunk = 64 * 1024;
// After the last response on a closing connection the server shuts its side
// and reads what the peer still sends (so the kernel does not answer unread
// data with a reset that could destroy the response), for at most this long.
constexpr auto kLingerTimeout = std::chrono::seconds(5);
// Answers queued on one connection before the server stops parsing its
// pipelined requests until the peer reads: bounds memory per connection.
constexpr size_t kMaxQueuedResponses = 32;
// When accept fails for want of descriptors, the listener rests this long
// (level-triggered epoll would otherwise report it again at once).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// Connections accepted per wake-up before the ones already open are served, so
// a flood of newcomers cannot shed a scraper before its request is read.
constexpr int kMaxAcceptsPerWake = 64;
constexpr int kMaxIovecs = 64;

// The status line's reason: the standard phrase, or the class's.
std::string_view Reason(int status) {
  if (std::string_view phrase = HttpReasonPhrase(status); !phrase.empty()) return phrase;
  if (status >= 200 && status < 300) return "OK";
  if (status >= 400 && status < 500) return "Client Error";
  if (status >= 500 && status < 600) return "Server Error";
  return "Unknown";
}

// One queued answer: the head, then the shared page, then the body, written
// from `sent` on. Holding `shared` keeps the page alive until it is written.
struct Outgoing {
  std::string head;
  std::shared_ptr<const std::string> shared;
  std::string body;
  size_t sent = 0;

  size_t size() const { return head.size() + (shared ? shared->size() : 0) + body.size(); }
};

// What a connection waits for; each phase has its own time bound, counted
// from `since`.
enum class Phase {
  kHeader,  // a request head (from accept, or from its first byte)
  kIdle,    // a next request on a keep-alive connection
  kWrite,   // the peer to take the front answer
  kLinger,  // the peer to close after our last answer
};

struct Connection {
  int fd = -1;
  std::string in;  // received, not yet parsed
  std::deque<Outgoing> out;
  Phase phase = Phase::kHeader;
  Clock::time_point since;
  std::list<Connection*>::iterator lru;  // its place in Impl::lru
  uint32_t events = 0;                   // what epoll watches now
  bool close_after = false;              // the last queued answer ends the connection
  bool peer_eof = false;                 // the peer shut its side
  bool lingering = false;                // our side shut; reading until the peer closes
  bool closed = false;                   // for stale events in the same epoll batch
};

}  // namespace

struct Server::Impl {
  std::map<std::string, Handler> routes;
  ServerOptions options;
  ConnectionCounters own_counters;
  ConnectionCounters* counters = &own_counters;
  // How late a deadline may be noticed: scans of every connection are spaced
  // by this, so many deadlines cost one scan.
  Clock::duration scan_slack{};
  std::string host;
  int port = 0;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::unordered_map<int, std::unique_ptr<Connection>> connections;
  // Every open connection, least recently active first: whom to shed.
  std::list<Connection*> lru;
  // Closed in this epoll batch; freed after it so stale events can see `closed`.
  std::vector<std::unique_ptr<Connection>> graveyard;
  Clock::time_point next_scan = Clock::time_point::max();
  Clock::time_point accept_resume = Clock::time_point::min();
  bool accept_paused = false;
  // Serialises Stop()'s join of `loop`. Not GUARDED_BY: Start sets `loop`
  // before the server is shared, without it.
  Mutex stop_mu;
  std::atomic<std::thread::id> loop_id;
  std::stop_source stop;
  std::jthread loop;

  ~Impl() {
    for (int fd : {listen_fd, epoll_fd, wake_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }

  void Run(std::stop_token stop);
  void Accept(Clock::time_point now);
  // Closes a connection to make room; false when none may be shed.
  bool Shed();
  void SetPhase(Connection* c, Phase phase, Clock::time_point now);
  void Touch(Connection* c) { lru.splice(lru.end(), lru, c->lru); }
  Clock::duration Timeout(Phase phase) const;
  void OnEvent(Connection* c, uint32_t events, Clock::time_point now);
  void Progress(Connection* c, Clock::time_point now);
  void Serve(Connection* c, const Request& req);
  void Queue(Connection* c, int status, std::string_view content_type, std::string body,
             std::shared_ptr<const std::string> shared, bool head_only, bool keep_alive,
             bool http10_keep_alive, std::string_view extra_headers = {});
  // false: the connection broke and is closed.
  bool Flush(Connection* c, Clock::time_point now);
  void Watch(Connection* c, uint32_t events);
  void Close(Connection* c);
  void Scan(Clock::time_point now);
  void CloseAll();
};

void Server::Impl::Watch(Connection* c, uint32_t events) {
  if (c->events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = c;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->events = events;
}

Clock::duration Server::Impl::Timeout(Phase phase) const {
  switch (phase) {
    case Phase::kHeader:
      return options.header_timeout;
    case Phase::kIdle:
      return options.idle_timeout;
    case Phase::kWrite:
      return options.write_timeout;
    case Phase::kLinger:
      break;
  }
  return kLingerTimeout;
}

void Server::Impl::SetPhase(Connection* c, Phase phase, Clock::time_point now) {
  c->phase = phase;
  c->since = now;
  next_scan = std::min(next_scan, now + Timeout(phase));
}

void Server::Impl::Close(Connection* c) {
  if (c->closed) return;
  c->closed = true;
  ::close(c->fd);  // also drops it from the epoll set
  lru.erase(c->lru);
  counters->open.fetch_sub(1, std::memory_order_relaxed);
  auto it = connections.find(c->fd);
  if (it != connections.end()) {
    graveyard.push_back(std::move(it->second));
    connections.erase(it);
  }
}

void Server::Impl::CloseAll() {
  for (auto& [fd, c] : connections) {
    c->closed = true;
    ::close(fd);
  }
  counters->open.fetch_sub(connections.size(), std::memory_order_relaxed);
  lru.clear();
  connections.clear();
  graveyard.clear();
}

bool Server::Impl::Shed() {
  // Idle (nothing received or queued) before a half-sent request head; one
  // that is being answered is never shed.
  Connection* victim = nullptr;
  for (Connection* c : lru) {
    if (!c->out.empty()) continue;
    if (c->in.empty()) {
      victim = c;
      break;
    }
    if (victim == nullptr) victim = c;
  }
  if (victim == nullptr) return false;
  Close(victim);
  counters->shed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Server::Impl::Accept(Clock::time_point now) {
  for (int accepted = 0; accepted < kMaxAcceptsPerWake;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (Shed()) continue;  // its descriptor is free now
        counters->refused.fetch_add(1, std::memory_order_relaxed);
        LogWarn("http server: cannot accept a connection, pausing the listener",
                {{"address", host + ":" + std::to_string(port)}, {"error", std::strerror(errno)}});
        epoll_event ev{};
        ev.data.ptr = &listen_fd;
        ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);  // watch nothing for a while
        accept_paused = true;
        accept_resume = now + kAcceptPause;
      }
      return;  // EAGAIN: all taken
    }
    ++accepted;
    if (connections.size() >= options.max_connections && !Shed()) {
      ::close(fd);
      counters->refused.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // small answers: no Nagle delay
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->events = EPOLLIN;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    SetPhase(c.get(), Phase::kHeader, now);
    c->lru = lru.insert(lru.end(), c.get());
    counters->open.fetch_add(1, std::memory_order_relaxed);
    connections.emplace(fd, std::move(c));
  }
}

void Server::Impl::Queue(Connection* c, int status, std::string_view content_type, std::string body,
                         std::shared_ptr<const std::string> shared, bool head_only, bool keep_alive,
                         bool http10_keep_alive, std::string_view extra_headers) {
  Outgoing o;
  const size_t length = body.size() + (shared ? shared->size() : 0);
  o.head.reserve(128 + content_type.size() + extra_headers.size());
  o.head += "HTTP/1.1 ";
  o.head += std::to_string(status);
  o.head += ' ';
  o.head += Reason(status);
  o.head += "\r\nContent-Type: ";
  o.head += content_type;
  o.head += "\r\nContent-Length: ";
  o.head += std::to_string(length);
  o.head += "\r\n";
  o.head += extra_headers;
  if (!keep_alive) {
    o.head += "Connection: close\r\n";
  } else if (http10_keep_alive) {
    o.head += "Connection: keep-alive\r\n";
  }
  o.head += "\r\n";
  if (!head_only) {
    o.shared = std::move(shared);
    o.body = std::move(body);
  }
  c->out.push_back(std::move(o));
  if (!keep_alive) c->close_after = true;
}

void Server::Impl::Serve(Connection* c, const Request& req) {
  const bool is_get = req.method == "GET";
  const bool is_head = req.method == "HEAD";
  // A body cannot be skipped reliably without parsing it: answer and close.
  const bool keep_alive = req.keep_alive && !req.has_body;
  // HTTP/1.0 closes unless both sides say keep-alive.
  const bool ka10 = keep_alive && req.http10;
  const bool head_only = is_head;
  constexpr std::string_view kText = "text/plain; charset=utf-8";
  if (!is_get && !is_head) {
    Queue(c, 405, kText, "method not allowed: only GET and HEAD\n", nullptr, false, keep_alive,
          ka10, "Allow: GET, HEAD\r\n");
    return;
  }
  if (req.has_body) {
    Queue(c, 400, kText, "a GET or HEAD request has no body\n", nullptr, head_only, false, false);
    return;
  }
  auto route = routes.find(std::string(req.path));
  if (route == routes.end()) {
    Queue(c, 404, kText, "404 page not found\n", nullptr, head_only, keep_alive, ka10);
    return;
  }
  Response r;
  try {
    r = route->second();
  } catch (const std::exception& e) {
    LogError("http handler failed", {{"path", route->first}, {"error", e.what()}});
    Queue(c, 500, kText, "internal server error\n", nullptr, head_only, keep_alive, ka10);
    return;
  } catch (...) {
    LogError("http handler failed", {{"path", route->first}, {"error", "unknown exception"}});
    Queue(c, 500, kText, "internal server error\n", nullptr, head_only, keep_alive, ka10);
    return;
  }
  Queue(c, r.status, r.content_type, std::move(r.body), std::move(r.shared_body), head_only,
        keep_alive, ka10);
}

bool Server::Impl::Flush(Connection* c, Clock::time_point now) {
  while (!c->out.empty()) {
    iovec iov[kMaxIovecs];
    int n_iov = 0;
    for (const Outgoing& o : c->out) {
      if (n_iov + 3 > kMaxIovecs) break;
      std::string_view parts[3] = {o.head, o.shared ? std::string_view(*o.shared) : "", o.body};
      size_t skip = o.sent;
      for (std::string_view part : parts) {
        if (skip >= part.size()) {
          skip -= part.size();
          continue;
        }
        iov[n_iov].iov_base = const_cast<char*>(part.data() + skip);
        iov[n_iov].iov_len = part.size() - skip;
        ++n_iov;
        skip = 0;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    ssize_t n = ::sendmsg(c->fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      Close(c);  // the peer went away
      return false;
    }
    size_t written = static_cast<size_t>(n);
    if (written > 0) Touch(c);
    while (written > 0 && !c->out.empty()) {
      Outgoing& o = c->out.front();
      size_t left = o.size() - o.sent;
      if (written < left) {
        o.sent += written;
        written = 0;
      } else {
        written -= left;
        c->out.pop_front();  // releases the shared page
        c->since = now;      // the next answer's time starts
      }
    }
  }
  return true;
}

void Server::Impl::Progress(Connection* c, Clock::time_point now) {
  bool served = false;
  for (;;) {
    // Parse what is buffered, up to the queue bound.
    size_t pos = 0;
    size_t parsed = 0;
    while (!c->close_after && c->out.size() < kMaxQueuedResponses && pos < c->in.size()) {
      std::string_view rest(c->in.data() + pos, c->in.size() - pos);
      // Empty lines between requests are allowed (RFC 9112 §2.2).
      size_t blanks = 0;
      while (blanks < rest.size() && (rest[blanks] == '\r' || rest[blanks] == '\n')) ++blanks;
      pos += blanks;
      rest.remove_prefix(blanks);
      if (rest.empty()) break;
      Request req;
      size_t consumed = 0;
      ParseResult result = ParseRequest(rest, &req, &consumed);
      if (result == ParseResult::kIncomplete) {
        if (rest.size() > kMaxRequestHead) {
          Queue(c, 431, "text/plain; charset=utf-8", "request header fields too large\n", nullptr,
                false, false, false);
          pos = c->in.size();
        }
        break;
      }
      if (result == ParseResult::kBad) {
        Queue(c, 400, "text/plain; charset=utf-8", "malformed request\n", nullptr, false, false,
              false);
        pos = c->in.size();
        break;
      }
      pos += consumed;
      ++parsed;
      if (consumed > kMaxRequestHead) {
        Queue(c, 431, "text/plain; charset=utf-8", "request header fields too large\n", nullptr,
              false, false, false);
        break;
      }
      Serve(c, req);
    }
    if (c->close_after) pos = c->in.size();  // nothing after a closing answer is read
    c->in.erase(0, pos);
    served = served || parsed > 0 || !c->out.empty();

    if (!Flush(c, now)) return;
    if (!c->out.empty()) {
      if (c->phase != Phase::kWrite) SetPhase(c, Phase::kWrite, now);
      Watch(c, EPOLLOUT);  // wait for the peer to read; no more input until then
      return;
    }
    if (c->close_after) {
      if (c->peer_eof) {
        Close(c);
        return;
      }
      // Shut our side and read until the peer closes, so the answer arrives whole.
      ::shutdown(c->fd, SHUT_WR);
      c->lingering = true;
      SetPhase(c, Phase::kLinger, now);
      Watch(c, EPOLLIN);
      return;
    }
    if (parsed == 0 || c->in.empty()) {
      if (c->peer_eof) {
        Close(c);  // answered all it sent; a partial request can never complete
        return;
      }
      // The clock of the next request head starts with its first byte; a
      // connection that never sent one keeps the clock of its accept.
      if (!c->in.empty() && (served || c->phase != Phase::kHeader)) {
        SetPhase(c, Phase::kHeader, now);
      } else if (c->in.empty() && (served || c->phase == Phase::kWrite)) {
        SetPhase(c, Phase::kIdle, now);
      }
      Watch(c, EPOLLIN);
      return;
    }
    // Everything written and requests held back by the queue bound: go on.
  }
}

void Server::Impl::OnEvent(Connection* c, uint32_t events, Clock::time_point now) {
  if (c->closed) return;
  if (c->lingering) {
    char sink[4096];
    for (;;) {
      ssize_t n = ::recv(c->fd, sink, sizeof(sink), 0);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      Close(c);  // EOF or error
      return;
    }
  }
  if ((events & EPOLLIN) && !c->peer_eof) {
    char buf[kReadChunk];
    ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c->in.append(buf, static_cast<size_t>(n));
      Touch(c);
      if (c->phase == Phase::kIdle) SetPhase(c, Phase::kHeader, now);
    } else if (n == 0) {
      c->peer_eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      Close(c);
      return;
    }
  } else if (!(events & EPOLLOUT) && (events & (EPOLLERR | EPOLLHUP))) {
    Close(c);
    return;
  }
  Progress(c, now);
}

void Server::Impl::Scan(Clock::time_point now) {
  next_scan = Clock::time_point::max();
  std::vector<Connection*> expired;
  for (auto& [fd, c] : connections) {
    Clock::time_point deadline = c->since + Timeout(c->phase);
    if (deadline <= now) {
      expired.push_back(c.get());
    } else {
      next_scan = std::min(next_scan, deadline);
    }
  }
  for (Connection* c : expired) {
    switch (c->phase) {
      case Phase::kHeader:
        counters->header_timeouts.fetch_add(1, std::memory_order_relaxed);
        break;
      case Phase::kIdle:
        counters->idle_timeouts.fetch_add(1, std::memory_order_relaxed);
        break;
      case Phase::kWrite:
        counters->write_timeouts.fetch_add(1, std::memory_order_relaxed);
        break;
      case Phase::kLinger:
        break;  // the answer went out; the peer just did not close
    }
    Close(c);
  }
  if (next_scan != Clock::time_point::max()) next_scan = std::max(next_scan, now + scan_slack);
}

void Server::Impl::Run(std::stop_token stop) {
  loop_id.store(std::this_thread::get_id());
  epoll_event events[128];
  while (!stop.stop_requested()) {
    int timeout_ms = -1;
    Clock::time_point wake_at = next_scan;
    if (accept_paused) wake_at = std::min(wake_at, accept_resume);
    if (wake_at != Clock::time_point::max()) {
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake_at - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<decltype(wait)>(wait, 0, 60'000));
    }
    int n = ::epoll_wait(epoll_fd, events, 128, timeout_ms);
    if (n < 0 && errno != EINTR) {
      LogError("http server: epoll_wait failed; the server stops",
               {{"address", host + ":" + std::to_string(port)}, {"error", std::strerror(errno)}});
      break;
    }
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &wake_fd) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = ::read(wake_fd, &count, sizeof(count));
      } else if (tag == &listen_fd) {
        Accept(now);
      } else {
        OnEvent(static_cast<Connection*>(tag), events[i].events, now);
      }
    }
    graveyard.clear();
    if (accept_paused && now >= accept_resume) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &listen_fd;
      ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &ev);
      accept_paused = false;
    }
    if (now >= next_scan) {
      Scan(now);
      graveyard.clear();
    }
  }
  CloseAll();
  ::close(listen_fd);  // the port closes before Stop returns
  listen_fd = -1;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

namespace {

// A listening socket on the first address of host:port that binds.
int Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) {
      int zero = 0;  // "::" also takes IPv4, as before
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) break;
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(std::string_view listen, std::string_view flag,
                                              std::map<std::string, Handler> routes,
                                              ServerOptions options) {
  GPUOP_ASSIGN_OR_RETURN(auto hostport, ParseListen(listen, flag));
  for (auto [name, timeout] : {std::pair{"header", options.header_timeout},
                               {"idle", options.idle_timeout},
                               {"write", options.write_timeout}}) {
    if (timeout <= std::chrono::milliseconds::zero()) {
      return InvalidArgument(std::string("the HTTP server's ") + name + " timeout for " +
                             std::string(flag) + " must be positive");
    }
  }
  if (options.max_connections == 0) options.max_connections = DefaultMaxConnections();
  auto impl = std::make_unique<Impl>();
  impl->host = hostport.first;
  impl->routes = std::move(routes);
  if (options.counters != nullptr) impl->counters = options.counters;
  // An eighth of the shortest bound, within 1 ms .. 1 s.
  impl->scan_slack = std::clamp<Clock::duration>(
      std::min({options.header_timeout, options.idle_timeout, options.write_timeout}) / 8,
      std::chrono::milliseconds(1), std::chrono::seconds(1));
  impl->options = options;
  impl->listen_fd = Listen(impl->host, hostport.second);
  if (impl->listen_fd >= 0) impl->port = BoundPort(impl->listen_fd);
  if (impl->listen_fd < 0 || impl->port <= 0) {
    return Unavailable("cannot listen on " + std::string(listen) + " (" + std::string(flag) +
                       "): the address is in use or not local; pick another address");
  }
  impl->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  impl->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->epoll_fd < 0 || impl->wake_fd < 0) {
    return Unavailable("cannot start the HTTP server for " + std::string(flag) + ": " +
                       std::strerror(errno) + " (out of file descriptors? raise ulimit -n)");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &impl->listen_fd;
  ::epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, impl->listen_fd, &ev);
  ev.data.ptr = &impl->wake_fd;
  ::epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, impl->wake_fd, &ev);
  Impl* raw = impl.get();
  impl->loop = std::jthread([raw](std::stop_token stop) { raw->Run(stop); });
  impl->stop = impl->loop.get_stop_source();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port; }

const ConnectionCounters& Server::counters() const { return *impl_->counters; }

std::string Server::address() const {
  std::string host =
      impl_->host.find(':') != std::string::npos ? "[" + impl_->host + "]" : impl_->host;
  return host + ":" + std::to_string(impl_->port);
}

void Server::Stop() {
  if (!impl_) return;
  impl_->stop.request_stop();
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(impl_->wake_fd, &one, sizeof(one));
  // From a handler (the loop thread itself) the loop ends after this batch;
  // the owner's later Stop or destructor joins it.
  if (impl_->loop_id.load() == std::this_thread::get_id()) return;
  MutexLock lock(impl_->stop_mu);
  if (impl_->loop.joinable()) impl_->loop.join();  // it closes every connection and the port
}

}  // namespace gpuop::http
