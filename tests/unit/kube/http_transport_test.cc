// The Kubernetes client's HTTP/1.1 transport against a scripted server: a
// socket that answers each request with bytes the test chooses, so framing,
// compression and connection reuse are checked byte for byte.
#include "kube/http_transport.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuop::kube {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Answers the n-th request (counted over all connections) with answers[n];
// an answer of "" closes the connection without a byte. After the answer the
// connection stays open for the next request unless `close_after` says so.
class ScriptedServer {
 public:
  struct Answer {
    std::string bytes;
    bool close_after = false;
  };

  explicit ScriptedServer(std::vector<Answer> answers) : answers_(std::move(answers)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listen_fd_, 16);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    thread_.join();
  }

  std::string url(const std::string& path = "/api/v1/nodes") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int connections() const { return connections_; }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    size_t next = 0;
    for (;;) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      std::string buf;
      bool open = true;
      while (open && next < answers_.size()) {
        // One request: the head, then Content-Length bytes of body.
        size_t end;
        char chunk[4096];
        while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
          ssize_t n = recv(fd, chunk, sizeof chunk, 0);
          if (n <= 0) {
            open = false;
            break;
          }
          buf.append(chunk, static_cast<size_t>(n));
        }
        if (!open) break;
        size_t body = 0;
        if (size_t cl = buf.find("Content-Length: "); cl != std::string::npos && cl < end) {
          body = std::stoul(buf.substr(cl + 16));
        }
        while (buf.size() < end + 4 + body) {
          ssize_t n = recv(fd, chunk, sizeof chunk, 0);
          if (n <= 0) break;
          buf.append(chunk, static_cast<size_t>(n));
        }
        {
          std::lock_guard lock(mu_);
          requests_.push_back(buf.substr(0, end + 4 + body));
        }
        buf.erase(0, end + 4 + body);
        const Answer& a = answers_[next++];
        if (a.bytes.empty()) break;
        send(fd, a.bytes.data(), a.bytes.size(), MSG_NOSIGNAL);
        if (a.close_after) break;
      }
      close(fd);
    }
  }

  std::vector<Answer> answers_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

std::string Gzip(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Chunked(const std::vector<std::string>& chunks) {
  std::string out;
  char size[32];
  for (const auto& c : chunks) {
    snprintf(size, sizeof size, "%zx\r\n", c.size());
    out += size + c + "\r\n";
  }
  return out + "0\r\n\r\n";
}

std::unique_ptr<HttpTransport> NewTransport() {
  auto t = HttpTransport::New({});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

TEST(HttpTransportTest, ChunkedGzipBodyIsDecodedAndTheConnectionKept) {
  std::string json = "{\"kind\":\"NodeList\",\"items\":[" + std::string(200000, ' ') + "]}";
  std::string gz = Gzip(json);
  std::string answer =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
      "Transfer-Encoding: chunked\r\n\r\n" +
      Chunked({gz.substr(0, 10), gz.substr(10, 100), gz.substr(110)});
  ScriptedServer server({{answer}, {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url();
  req.bearer_token = "tok";
  HttpResponse r = t->Perform(req);
  ASSERT_EQ(r.error, TransportError::kNone) << r.error_message;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, json);
  r = t->Perform(req);
  EXPECT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(r.body, "{}");
  EXPECT_EQ(server.connections(), 1);  // the second request reused the first connection
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_THAT(requests[0], HasSubstr("GET /api/v1/nodes HTTP/1.1\r\n"));
  EXPECT_THAT(requests[0], HasSubstr("Host: 127.0.0.1:"));
  EXPECT_THAT(requests[0], HasSubstr("Authorization: Bearer tok\r\n"));
  EXPECT_THAT(requests[0], HasSubstr("Accept-Encoding: gzip\r\n"));
}

TEST(HttpTransportTest, KeptAliveConnectionClosedByTheServerIsReplacedOnce) {
  // The server answers once, then drops the connection when the next request
  // arrives (as one closing an idle keep-alive connection does): the request
  // goes out again on a new connection.
  ScriptedServer server({{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"},
                         {""},
                         {"HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade"}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url();
  ASSERT_TRUE(t->Perform(req).ok());
  req.method = "POST";
  req.body = "{\"a\":1}";
  req.content_type = "application/json";
  HttpResponse r = t->Perform(req);
  ASSERT_EQ(r.error, TransportError::kNone) << r.error_message;
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, "made");
  EXPECT_EQ(server.connections(), 2);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_THAT(requests[2], HasSubstr("Content-Length: 7\r\n\r\n{\"a\":1}"));
}

TEST(HttpTransportTest, NewConnectionClosedWithoutAnswerIsConnectionLost) {
  ScriptedServer server({{""}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url();
  HttpResponse r = t->Perform(req);
  EXPECT_EQ(r.error, TransportError::kConnectionLost);
  EXPECT_TRUE(r.request_sent);  // it may have reached the server
  EXPECT_THAT(r.error_message, HasSubstr("without answering"));
}

TEST(HttpTransportTest, TruncatedBodyIsConnectionLost) {
  ScriptedServer server({{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"kind\":", true}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url();
  HttpResponse r = t->Perform(req);
  EXPECT_EQ(r.error, TransportError::kConnectionLost);
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.error_message, HasSubstr("before the end of the response"));
}

TEST(HttpTransportTest, RefusedConnectionWasNotSent) {
  int port;
  {
    ScriptedServer gone({});
    port = std::stoi(gone.url().substr(17));
  }
  auto t = NewTransport();
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(port) + "/";
  HttpResponse r = t->Perform(req);
  EXPECT_EQ(r.error, TransportError::kConnect);
  EXPECT_FALSE(r.request_sent);
  EXPECT_THAT(r.error_message, HasSubstr("Connection refused"));
}

TEST(HttpTransportTest, RetryAfterAndErrorBodiesAreKept) {
  ScriptedServer server(
      {{"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 6\r\n\r\nslow!\n"}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url();
  HttpResponse r = t->Perform(req);
  EXPECT_EQ(r.error, TransportError::kNone);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.retry_after_seconds, 3);
  EXPECT_EQ(r.body, "slow!\n");
}

TEST(HttpTransportTest, StreamHandsOverChunksUntilTheCallerStops) {
  std::string events = Chunked({"{\"type\":\"ADDED\"}\n", "{\"type\":\"MODIFIED\"}\n"});
  events.resize(events.size() - 5);  // no last chunk: the stream stays open
  ScriptedServer server({{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + events}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url("/api/v1/nodes?watch=true");
  std::string seen;
  HttpResponse r = t->Stream(req, [&seen](std::string_view data) {
    seen += data;
    return seen.find("MODIFIED") == std::string::npos;
  });
  EXPECT_EQ(r.error, TransportError::kStoppedByCaller);
  EXPECT_EQ(seen, "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n");
  EXPECT_THAT(server.requests().at(0), Not(HasSubstr("Accept-Encoding")));
}

TEST(HttpTransportTest, StopTokenEndsAQuietStreamAtOnce) {
  // (The second answer keeps the server reading: the stream stays open.)
  ScriptedServer server({{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"}, {"unused"}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url("/api/v1/nodes?watch=true");
  std::stop_source stop;
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop.request_stop();
  });
  auto start = std::chrono::steady_clock::now();
  HttpResponse r = t->Stream(
      req, [](std::string_view) { return true; }, stop.get_token());
  auto took = std::chrono::steady_clock::now() - start;
  stopper.join();
  EXPECT_EQ(r.error, TransportError::kCancelled);
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(HttpTransportTest, TimeoutEndsASilentServer) {
  ScriptedServer server({{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"}, {"unused"}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url();
  req.timeout = std::chrono::milliseconds(300);
  HttpResponse r = t->Perform(req);
  EXPECT_EQ(r.error, TransportError::kTimeout);
  EXPECT_THAT(r.error_message, HasSubstr("300 ms"));
}

TEST(HttpTransportTest, CorruptGzipIsAnError) {
  ScriptedServer server(
      {{"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"}});
  auto t = NewTransport();
  HttpRequest req;
  req.url = server.url();
  HttpResponse r = t->Perform(req);
  EXPECT_EQ(r.error, TransportError::kOther);
  EXPECT_THAT(r.error_message, HasSubstr("gzip"));
}

}  // namespace
}  // namespace gpuop::kube
