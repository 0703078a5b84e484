// sim/kube/connection.h: finding a request's socket by its endpoints, and
// seeing its peer go away; and the emulator freeing a watch's thread when
// the watching client dies without an event to write.
#include "sim/kube/connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "sim/kube/server.h"

namespace gpuop::simkube {
namespace {

int Port(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return rc == 0 ? ntohs(a.sin_port) : -1;
}

// A loopback listener, a client connected to it, and the accepted socket.
struct Loopback {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  int accepted = -1;
  Loopback() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    a.sin_port = htons(static_cast<uint16_t>(Port(listener, false)));
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    accepted = accept(listener, nullptr, nullptr);
  }
  ~Loopback() {
    close(accepted);
    if (client >= 0) close(client);
    close(listener);
  }
};

TEST(ConnectionTest, FindsTheAcceptedSocketByItsEndpoints) {
  Loopback l;
  ASSERT_GE(l.accepted, 0);
  int server_port = Port(l.listener, false);
  int client_port = Port(l.client, false);
  EXPECT_EQ(FindConnectionSocket(server_port, "127.0.0.1", client_port), l.accepted);
  EXPECT_EQ(FindConnectionSocket(server_port, "127.0.0.2", client_port), -1);
  EXPECT_EQ(FindConnectionSocket(server_port, "127.0.0.1", client_port + 1), -1);
}

TEST(ConnectionTest, SeesTheHangUpEvenBehindUnreadBytes) {
  Loopback l;
  ASSERT_GE(l.accepted, 0);
  EXPECT_FALSE(PeerHungUp(l.accepted));
  ASSERT_EQ(write(l.client, "x", 1), 1);  // pending, unread: still connected
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(PeerHungUp(l.accepted));
  close(l.client);
  l.client = -1;
  bool hung_up = false;
  for (int i = 0; i < 100 && !hung_up; ++i) {
    hung_up = PeerHungUp(l.accepted);
    if (!hung_up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(hung_up);
  char c = 0;
  EXPECT_EQ(read(l.accepted, &c, 1), 1);  // nothing was consumed
  EXPECT_EQ(c, 'x');
}

// Opens a watch on a raw socket and returns once its response headers came.
int OpenWatch(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string req =
      "GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) return -1;
  std::string got;
  char buf[512];
  while (got.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) {
      close(fd);
      return -1;  // no answer in 5 s: no thread took the request
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return fd;
}

TEST(ConnectionTest, AWatchWhoseClientDiedFreesItsThread) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  o.threads = 4;
  auto s = ApiServer::Start(std::move(o));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Three times the pool: each watch is answered only if the dead ones left.
  for (int i = 0; i < 12; ++i) {
    int fd = OpenWatch((*s)->port());
    ASSERT_GE(fd, 0) << "watch " << i << " was not answered: dead watches hold the pool";
    close(fd);
  }
  httplib::Client c((*s)->host(), (*s)->port());
  int watchers = -1;
  for (int i = 0; i < 50 && watchers != 0; ++i) {
    auto r = c.Get("/gpuop-sim/audit");
    ASSERT_TRUE(r);
    watchers = nlohmann::json::parse(r->body)["store"]["watchers"].get<int>();
    if (watchers != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(watchers, 0);
}

}  // namespace
}  // namespace gpuop::simkube
