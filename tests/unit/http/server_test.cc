// The HTTP server over real loopback sockets, driven by a small blocking
// client written here (raw bytes in, parsed answers out), so the tests see
// exactly what a scraper sees: framing, keep-alive, pipelining, closes.
#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/wait.h"

namespace gpuop::http {
namespace {

using gpuop::testing::WaitFor;

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// A blocking HTTP/1.x client on one TCP connection; reads time out after 30 s
// so a server that never answers fails the test instead of hanging it.
class Client {
 public:
  // rcvbuf > 0: a small receive buffer, for a slow reader.
  explicit Client(int port, int rcvbuf = 0, bool ipv6 = false) {
    fd_ = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    timeval tv{.tv_sec = 30, .tv_usec = 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (ipv6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      a.sin6_addr = in6addr_loopback;
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    }
    connect_errno_ = connected_ ? 0 : errno;
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  int connect_errno() const { return connect_errno_; }
  int fd() const { return fd_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // The next answer; `head` for an answer to HEAD (no body follows).
  std::optional<Reply> Read(bool head = false) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return std::nullopt;
    }
    Reply r;
    std::string_view text(buf_.data(), end);
    size_t eol = text.find("\r\n");
    std::string_view status_line = text.substr(0, eol);
    if (!status_line.starts_with("HTTP/1.1 ") || status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(std::string(status_line.substr(9, 3)));
    while (eol != std::string_view::npos) {
      text.remove_prefix(eol + 2);
      eol = text.find("\r\n");
      std::string_view line = text.substr(0, eol);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) return std::nullopt;
      std::string name(line.substr(0, colon));
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      r.headers[name] = std::string(value);
    }
    buf_.erase(0, end + 4);
    if (head) return r;
    if (!r.headers.contains("content-length")) return std::nullopt;
    const size_t length = std::stoul(r.headers["content-length"]);
    while (buf_.size() < length) {
      if (!Fill()) return std::nullopt;
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  std::optional<Reply> Get(const std::string& path) {
    if (!Send("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")) return std::nullopt;
    return Read();
  }

  // Whether the server has closed the connection (EOF or reset), without
  // waiting: false while it is open and silent.
  bool ClosedNow() {
    char c;
    ssize_t n = ::recv(fd_, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }

  // Whether the server closed the connection with nothing more to say.
  bool AtEof() {
    if (!buf_.empty()) return false;
    char c;
    ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  bool Fill() {
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  int connect_errno_ = 0;
  std::string buf_;
};

Response Text(std::string body) { return Response{.body = std::move(body)}; }

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(std::map<std::string, Handler> routes, ServerOptions options = {}) {
    auto s = Server::Start("127.0.0.1:0", "--listen", std::move(routes), options);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
  }
  int port() const { return server_->port(); }

  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, GetAndHead) {
  StartServer({{"/a", [] { return Text("hello\n"); }}});
  Client c(port());
  ASSERT_TRUE(c.connected());
  auto r = c.Get("/a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello\n");
  EXPECT_EQ(r->Header("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r->Header("content-length"), "6");
  EXPECT_FALSE(r->headers.contains("connection"));

  ASSERT_TRUE(c.Send("HEAD /a HTTP/1.1\r\nHost: test\r\n\r\n"));
  auto h = c.Read(/*head=*/true);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->Header("content-length"), "6");
  // No body followed the HEAD answer: the next answer starts right away.
  auto again = c.Get("/a");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(again->body, "hello\n");
}

TEST_F(ServerTest, StatusAndContentTypeComeFromTheHandler) {
  StartServer({{"/ready", [] {
                  return Response{.status = 503, .content_type = "application/json", .body = "{}"};
                }}});
  Client c(port());
  auto r = c.Get("/ready");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->Header("content-type"), "application/json");
  EXPECT_EQ(r->body, "{}");
}

TEST_F(ServerTest, UnknownPathIs404AndTheConnectionStaysOpen) {
  StartServer({{"/a", [] { return Text("a"); }}});
  Client c(port());
  auto r = c.Get("/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  auto prefix = c.Get("/a/");  // exact paths only
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->status, 404);
  auto ok = c.Get("/a");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerTest, OtherMethodsAre405WithAllow) {
  StartServer({{"/a", [] { return Text("a"); }}});
  Client c(port());
  ASSERT_TRUE(c.Send("POST /a HTTP/1.1\r\nHost: test\r\n\r\n"));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->Header("allow"), "GET, HEAD");
  auto ok = c.Get("/a");  // no body was sent: the connection goes on
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);

  Client with_body(port());
  ASSERT_TRUE(with_body.Send("PUT /a HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc"));
  auto put = with_body.Read();
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->Header("connection"), "close");
  EXPECT_TRUE(with_body.AtEof());
}

TEST_F(ServerTest, RequestWithABodyIs400AndCloses) {
  StartServer({{"/a", [] { return Text("a"); }}});
  for (std::string framing : {"Content-Length: 4\r\n", "Transfer-Encoding: chunked\r\n"}) {
    Client c(port());
    ASSERT_TRUE(c.Send("GET /a HTTP/1.1\r\nHost: test\r\n" + framing + "\r\nbody"));
    auto r = c.Read();
    ASSERT_TRUE(r) << framing;
    EXPECT_EQ(r->status, 400) << framing;
    EXPECT_EQ(r->Header("connection"), "close");
    EXPECT_TRUE(c.AtEof()) << framing;
  }
  Client zero(port());  // Content-Length: 0 is no body
  ASSERT_TRUE(zero.Send("GET /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
  auto r = zero.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, MalformedRequestIs400AndCloses) {
  StartServer({{"/a", [] { return Text("a"); }}});
  for (std::string bad :
       {"GARBAGE\r\n\r\n", "GET /a HTTP/2.0\r\n\r\n", "GET /a HTTP/1.1\r\nNoColon\r\n\r\n"}) {
    Client c(port());
    ASSERT_TRUE(c.Send(bad));
    auto r = c.Read();
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_TRUE(c.AtEof()) << bad;
  }
}

TEST_F(ServerTest, QueryStringIsNotPartOfThePath) {
  std::atomic<int> calls{0};
  StartServer({{"/metrics", [&] {
                  ++calls;
                  return Text("m");
                }}});
  Client c(port());
  auto r = c.Get("/metrics?x=1&y=2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "m");
  auto absolute = c.Get("http://127.0.0.1/metrics?x=1");
  ASSERT_TRUE(absolute);
  EXPECT_EQ(absolute->status, 200);
  EXPECT_EQ(calls, 2);
}

// A multi-megabyte shared page to a client that does not read: another client
// is answered meanwhile, and the page (held by the server until written) then
// arrives whole, followed by the per-request body.
TEST_F(ServerTest, SharedBodyGoesFirstAndASlowReaderBlocksNoOne) {
  auto page = std::make_shared<std::string>();
  page->reserve(16 << 20);
  for (size_t i = 0; page->size() < (16u << 20); ++i) {
    *page += "line " + std::to_string(i) + "\n";
  }
  std::shared_ptr<const std::string> shared = page;
  const long held_here = shared.use_count();  // page and shared
  std::atomic<int> big_calls{0};
  StartServer({{"/big",
                [&] {
                  ++big_calls;
                  return Response{.body = "tail\n", .shared_body = shared};
                }},
               {"/small", [] { return Text("small"); }}});

  Client slow(port(), /*rcvbuf=*/4096);
  ASSERT_TRUE(slow.Send("GET /big HTTP/1.1\r\nHost: test\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return big_calls == 1; }));

  Client fast(port());
  auto small = fast.Get("/small");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->body, "small");
  // The slow answer is still in flight: the server holds the page.
  EXPECT_GT(shared.use_count(), held_here);

  auto big = slow.Read();
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 200);
  EXPECT_EQ(big->Header("content-length"), std::to_string(page->size() + 5));
  ASSERT_EQ(big->body.size(), page->size() + 5);
  EXPECT_TRUE(big->body.compare(0, page->size(), *page) == 0);
  EXPECT_TRUE(big->body.ends_with("tail\n"));
  // Written whole: the server let go of the page.
  EXPECT_TRUE(WaitFor([&] { return shared.use_count() == held_here; }));
  // The connection still serves.
  auto after = slow.Get("/small");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->body, "small");
}

TEST_F(ServerTest, KeepAliveHasNoRequestCap) {
  std::atomic<int> n{0};
  StartServer({{"/n", [&] { return Text(std::to_string(++n)); }}});
  Client c(port());
  for (int i = 1; i <= 1000; ++i) {
    auto r = c.Get("/n");
    ASSERT_TRUE(r) << "request " << i;
    ASSERT_EQ(r->body, std::to_string(i));
    ASSERT_FALSE(r->headers.contains("connection")) << "request " << i;
  }
}

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer({{"/a", [] { return Text("first"); }}, {"/b", [] { return Text("second!"); }}});
  Client c(port());
  ASSERT_TRUE(
      c.Send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n"
             "HEAD /b HTTP/1.1\r\nHost: t\r\n\r\n"
             "GET /b?q HTTP/1.1\r\nHost: t\r\n\r\n"));
  auto r1 = c.Read();
  auto r2 = c.Read(/*head=*/true);
  auto r3 = c.Read();
  ASSERT_TRUE(r1 && r2 && r3);
  EXPECT_EQ(r1->body, "first");
  EXPECT_EQ(r2->Header("content-length"), "7");
  EXPECT_EQ(r3->body, "second!");
}

TEST_F(ServerTest, ConnectionCloseIsHonoured) {
  StartServer({{"/a", [] { return Text("a"); }}});
  Client c(port());
  // The request after the closing one is never answered.
  ASSERT_TRUE(
      c.Send("GET /a HTTP/1.1\r\nConnection: close\r\n\r\n"
             "GET /a HTTP/1.1\r\n\r\n"));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.AtEof());
}

TEST_F(ServerTest, Http10ClosesUnlessKeepAliveIsAsked) {
  StartServer({{"/a", [] { return Text("a"); }}});
  Client plain(port());
  ASSERT_TRUE(plain.Send("GET /a HTTP/1.0\r\n\r\n"));
  auto r = plain.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "a");
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(plain.AtEof());

  Client kept(port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(kept.Send("GET /a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    auto k = kept.Read();
    ASSERT_TRUE(k) << i;
    EXPECT_EQ(k->Header("connection"), "keep-alive");
  }
}

TEST_F(ServerTest, HalfClosedPeerStillGetsItsAnswer) {
  StartServer({{"/a", [] { return Text("a"); }}});
  Client c(port());
  ASSERT_TRUE(c.Send("GET /a HTTP/1.1\r\n\r\n"));
  ::shutdown(c.fd(), SHUT_WR);
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "a");
  EXPECT_TRUE(c.AtEof());
}

TEST_F(ServerTest, OversizedHeadersAre431) {
  StartServer({{"/a", [] { return Text("a"); }}});
  Client c(port());
  std::string request = "GET /a HTTP/1.1\r\nX-Big: " + std::string(20000, 'x') + "\r\n\r\n";
  ASSERT_TRUE(c.Send(request));
  auto r = c.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_EQ(r->Header("connection"), "close");
  EXPECT_TRUE(c.AtEof());

  // Headers that never end are cut off too.
  Client endless(port());
  ASSERT_TRUE(endless.Send("GET /a HTTP/1.1\r\n"));
  std::string line = "X-More: " + std::string(1000, 'y') + "\r\n";
  std::optional<Reply> cut;
  for (int i = 0; i < 40 && endless.Send(line); ++i) {
  }
  cut = endless.Read();
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->status, 431);

  Client ok(port());  // others are unaffected
  auto fine = ok.Get("/a");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->status, 200);
}

TEST_F(ServerTest, ManyConcurrentConnections) {
  const std::string page(4096, 'p');
  std::atomic<int> calls{0};
  StartServer({{"/p", [&] {
                  ++calls;
                  return Response{.body = page};
                }}});
  constexpr int kClients = 100;
  constexpr int kRequests = 50;
  std::atomic<int> good{0};
  {
    std::vector<std::jthread> clients;
    for (int i = 0; i < kClients; ++i) {
      clients.emplace_back([&] {
        Client c(port());
        for (int j = 0; j < kRequests; ++j) {
          auto r = c.Get("/p");
          if (r && r->status == 200 && r->body == page) ++good;
        }
      });
    }
  }
  EXPECT_EQ(good, kClients * kRequests);
  EXPECT_EQ(calls, kClients * kRequests);
}

TEST_F(ServerTest, HandlerExceptionIs500) {
  StartServer({{"/throws", []() -> Response { throw std::runtime_error("boom"); }},
               {"/throws-int", []() -> Response { throw 42; }},
               {"/a", [] { return Text("a"); }}});
  Client c(port());
  auto r = c.Get("/throws");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  auto r2 = c.Get("/throws-int");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 500);
  auto ok = c.Get("/a");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerTest, StopClosesIdleConnectionsAndThePort) {
  StartServer({{"/a", [] { return Text("a"); }}});
  const int p = port();
  Client used(p);
  ASSERT_TRUE(used.Get("/a"));
  Client idle(p);
  ASSERT_TRUE(idle.connected());
  Client partial(p);
  ASSERT_TRUE(partial.Send("GET /a HTTP/1.1\r\n"));  // a request never finished

  server_->Stop();
  server_->Stop();  // idempotent
  EXPECT_TRUE(used.AtEof());
  EXPECT_TRUE(idle.AtEof());
  EXPECT_TRUE(partial.AtEof());
  Client late(p);
  EXPECT_FALSE(late.connected());
  EXPECT_EQ(late.connect_errno(), ECONNREFUSED);
  server_.reset();  // the destructor stops again: harmless
}

TEST_F(ServerTest, StopFromAHandlerDoesNotDeadlock) {
  Server* self = nullptr;
  StartServer({{"/stop", [&] {
                  self->Stop();
                  return Text("stopping");
                }}});
  self = server_.get();
  Client c(port());
  ASSERT_TRUE(c.Send("GET /stop HTTP/1.1\r\n\r\n"));
  c.Read();  // may or may not arrive before the loop closes the connection
  server_->Stop();
  Client late(port());
  EXPECT_FALSE(late.connected());
}

// Bounds for the tests below: the one under test short, the others far away.
ServerOptions Bounds(std::chrono::milliseconds header, std::chrono::milliseconds idle,
                     std::chrono::milliseconds write) {
  return ServerOptions{.header_timeout = header, .idle_timeout = idle, .write_timeout = write};
}
constexpr std::chrono::milliseconds kShort(200);
constexpr std::chrono::milliseconds kLong(std::chrono::minutes(10));

// A flood of silent connections cannot lock a scraper out: beyond the limit
// the least recently active idle connections are closed, never the newcomer.
TEST_F(ServerTest, IdleConnectionsBeyondTheLimitAreShedForANewcomer) {
  ServerOptions options;
  options.max_connections = 8;
  StartServer({{"/metrics", [] { return Text("up 1\n"); }}}, options);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<Client>(port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  const ConnectionCounters& counters = server_->counters();
  ASSERT_TRUE(WaitFor([&] { return counters.shed == 12; })) << counters.shed;

  Client scraper(port());
  auto r = scraper.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "up 1\n");
  EXPECT_EQ(counters.shed, 13);
  EXPECT_EQ(counters.refused, 0);
  EXPECT_EQ(counters.open, 8);
  // Oldest first: the first 13 are gone, the last 7 still open.
  for (int i = 0; i < 13; ++i) EXPECT_TRUE(idle[i]->AtEof()) << i;
  for (int i = 13; i < 20; ++i) EXPECT_FALSE(idle[i]->ClosedNow()) << i;
}

// A connection with a request head under way is shed only when no idle one is
// left, even when it is the least recently active.
TEST_F(ServerTest, IdleConnectionsAreShedBeforeHalfSentRequests) {
  ServerOptions options;
  options.max_connections = 2;
  StartServer({{"/a", [] { return Text("a"); }}}, options);
  Client half(port());
  // One answer read means the server has read the whole send, so it holds the
  // second request's first line.
  ASSERT_TRUE(half.Send("GET /a HTTP/1.1\r\n\r\nGET /a HTTP/1.1\r\n"));
  ASSERT_TRUE(half.Read());
  Client idle(port());
  ASSERT_TRUE(idle.connected());
  Client newcomer(port());
  auto r = newcomer.Get("/a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(idle.AtEof());
  ASSERT_TRUE(half.Send("\r\n"));
  auto finished = half.Read();
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->status, 200);
  EXPECT_EQ(server_->counters().shed, 1);
}

// Slowloris: every byte arrives in time, but the head as a whole does not.
TEST_F(ServerTest, HeadersTrickledByteByByteAreCutOffAtTheHeaderTimeout) {
  StartServer({{"/a", [] { return Text("a"); }}}, Bounds(kShort, kLong, kLong));
  Client slow(port());
  const std::string head = "GET /a HTTP/1.1\r\nX-Slow: ";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool closed = false;
  for (size_t i = 0; !closed && std::chrono::steady_clock::now() < give_up; ++i) {
    closed =
        !slow.Send(i < head.size() ? std::string_view(head).substr(i, 1) : "x") || slow.ClosedNow();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(closed);
  EXPECT_EQ(server_->counters().header_timeouts, 1);
  EXPECT_EQ(server_->counters().idle_timeouts, 0);
}

TEST_F(ServerTest, SilentConnectionIsClosedAtTheHeaderTimeout) {
  StartServer({{"/a", [] { return Text("a"); }}}, Bounds(kShort, kLong, kLong));
  Client silent(port());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.AtEof());
  EXPECT_EQ(server_->counters().header_timeouts, 1);
}

TEST_F(ServerTest, IdleKeepAliveIsClosedAtTheIdleTimeout) {
  StartServer({{"/a", [] { return Text("a"); }}}, Bounds(kLong, kShort, kLong));
  Client c(port());
  auto r = c.Get("/a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(c.AtEof());
  EXPECT_EQ(server_->counters().idle_timeouts, 1);
  EXPECT_EQ(server_->counters().header_timeouts, 0);
  EXPECT_TRUE(WaitFor([&] { return server_->counters().open == 0; }));
}

// A reader that does not take its answer is dropped, and the page it held is
// let go.
TEST_F(ServerTest, SlowReaderIsDroppedAtTheWriteTimeout) {
  auto page = std::make_shared<const std::string>(16u << 20, 'm');
  const long held_here = page.use_count();
  StartServer(
      {{"/big", [&] { return Response{.shared_body = page}; }}, {"/a", [] { return Text("a"); }}},
      Bounds(kLong, kLong, kShort));
  Client slow(port(), /*rcvbuf=*/4096);
  ASSERT_TRUE(slow.Send("GET /big HTTP/1.1\r\nHost: test\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return server_->counters().write_timeouts == 1; }));
  EXPECT_TRUE(WaitFor([&] { return page.use_count() == held_here; }));
  EXPECT_FALSE(slow.Read());  // cut short
  Client other(port());
  EXPECT_TRUE(other.Get("/a"));
}

TEST(ServerStartTest, BoundsMustBePositive) {
  auto s = Server::Start("127.0.0.1:0", "--listen", {},
                         Bounds(std::chrono::milliseconds(0), kLong, kLong));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "the HTTP server's header timeout for --listen must be positive");
}

TEST(ServerStartTest, TheConnectionLimitFollowsTheDescriptorLimit) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 4096) {
    GTEST_SKIP() << "the hard descriptor limit is below 4096";
  }
  auto with_soft_limit = [&](rlim_t soft) {
    rlimit lowered = saved;
    lowered.rlim_cur = soft;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
    return DefaultMaxConnections();
  };
  EXPECT_EQ(with_soft_limit(4096), 3072u);
  EXPECT_EQ(with_soft_limit(1024), 768u);
  EXPECT_EQ(with_soft_limit(200), 136u);  // keeps at least 64
  EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
}

TEST(ConnectionMetricsTest, OneFamilyPerCounterAndALabelPerServer) {
  ConnectionCounters metrics, health;
  metrics.open = 3;
  metrics.refused = 1;
  metrics.shed = 7;
  metrics.header_timeouts = 2;
  health.idle_timeouts = 4;
  health.write_timeouts = 5;
  EXPECT_EQ(ConnectionMetrics({{"metrics", &metrics}, {"health", &health}}),
            "# HELP gpuop_http_connections_open Connections open now.\n"
            "# TYPE gpuop_http_connections_open gauge\n"
            "gpuop_http_connections_open{server=\"metrics\"} 3\n"
            "gpuop_http_connections_open{server=\"health\"} 0\n"
            "# HELP gpuop_http_connections_refused_total New connections refused: none could be "
            "shed to make room.\n"
            "# TYPE gpuop_http_connections_refused_total counter\n"
            "gpuop_http_connections_refused_total{server=\"metrics\"} 1\n"
            "gpuop_http_connections_refused_total{server=\"health\"} 0\n"
            "# HELP gpuop_http_connections_shed_total Idle or half-sent connections closed to "
            "make room for new ones.\n"
            "# TYPE gpuop_http_connections_shed_total counter\n"
            "gpuop_http_connections_shed_total{server=\"metrics\"} 7\n"
            "gpuop_http_connections_shed_total{server=\"health\"} 0\n"
            "# HELP gpuop_http_connections_timed_out_total Connections closed for a bound: "
            "request head, keep-alive idle, or answer not taken.\n"
            "# TYPE gpuop_http_connections_timed_out_total counter\n"
            "gpuop_http_connections_timed_out_total{server=\"metrics\",phase=\"header\"} 2\n"
            "gpuop_http_connections_timed_out_total{server=\"metrics\",phase=\"idle\"} 0\n"
            "gpuop_http_connections_timed_out_total{server=\"metrics\",phase=\"write\"} 0\n"
            "gpuop_http_connections_timed_out_total{server=\"health\",phase=\"header\"} 0\n"
            "gpuop_http_connections_timed_out_total{server=\"health\",phase=\"idle\"} 4\n"
            "gpuop_http_connections_timed_out_total{server=\"health\",phase=\"write\"} 5\n");
}

TEST(ServerStartTest, PortZeroTellsThePortAndAddress) {
  auto s = Server::Start("127.0.0.1:0", "--listen", {});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GT((*s)->port(), 0);
  EXPECT_EQ((*s)->address(), "127.0.0.1:" + std::to_string((*s)->port()));
  Client c((*s)->port());
  auto r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

TEST(ServerStartTest, Ipv6Loopback) {
  int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool have_ipv6 =
      probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  if (probe >= 0) ::close(probe);
  if (!have_ipv6) GTEST_SKIP() << "no IPv6 loopback here";
  auto s = Server::Start("[::1]:0", "--listen", {{"/a", [] { return Text("six"); }}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->address(), "[::1]:" + std::to_string((*s)->port()));
  Client c((*s)->port(), 0, /*ipv6=*/true);
  auto r = c.Get("/a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "six");
}

TEST(ServerStartTest, AllInterfacesServesLoopback) {
  auto s = Server::Start(":0", "--listen", {{"/a", [] { return Text("any"); }}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->address(), "0.0.0.0:" + std::to_string((*s)->port()));
  Client c((*s)->port());
  auto r = c.Get("/a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "any");
}

TEST(ServerStartTest, BadAddressesAreNamed) {
  auto no_port = Server::Start("localhost", "--listen", {});
  ASSERT_FALSE(no_port.ok());
  EXPECT_EQ(no_port.status().message(),
            "--listen localhost is not HOST:PORT, e.g. :8080 or 127.0.0.1:0");
  auto big = Server::Start(":70000", "--health-addr", {});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "--health-addr :70000 is not HOST:PORT with a port 0-65535");
  auto v6 = Server::Start("[::1]8080", "--listen", {});
  ASSERT_FALSE(v6.ok());
  EXPECT_EQ(v6.status().message(), "--listen [::1]8080 is not [IPv6]:PORT, e.g. [::1]:8080");

  auto first = Server::Start("127.0.0.1:0", "--listen", {});
  ASSERT_TRUE(first.ok());
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = Server::Start(taken, "--listen", {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            "cannot listen on " + taken +
                " (--listen): the address is in use or not local; pick another address");
  auto foreign = Server::Start("192.0.2.1:0", "--listen", {});  // TEST-NET: not ours
  EXPECT_FALSE(foreign.ok());
}

}  // namespace
}  // namespace gpuop::http
