#include "sim/kube/connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace gpuop::simkube {
namespace {

// The numeric host and port of a socket address, as httplib formats them.
bool HostPort(const sockaddr_storage& sa, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST];
  char p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, h, sizeof(h), p, sizeof(p),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = h;
  port = std::atoi(p);
  return true;
}

}  // namespace

int FindConnectionSocket(int local_port, const std::string& remote_addr, int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage sa{};
    socklen_t len = sizeof(sa);
    std::string host;
    int port = -1;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
        !HostPort(sa, len, host, port) || port != local_port) {
      continue;
    }
    len = sizeof(sa);
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
        !HostPort(sa, len, host, port) || port != remote_port || host != remote_addr) {
      continue;
    }
    found = static_cast<int>(fd);
    break;
  }
  closedir(dir);
  return found;
}

bool PeerHungUp(int fd) {
  // POLLRDHUP sees the peer's FIN even behind unread bytes (a TLS close_notify).
  pollfd p{fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace gpuop::simkube
