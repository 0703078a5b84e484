#include "sim/cluster/hw_control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"

namespace gpuop::simcluster {

std::string HandleHardwareRequest(const std::string& line, sim::StateStore& store) {
  std::vector<std::string> words = Split(Trim(line), ' ');
  if (words.size() != 2 || words[0] != "reset") {
    return "error unknown request \"" + std::string(Trim(line)) + "\" (there is: reset ID)";
  }
  const std::string& id = words[1];
  const auto& gpus = store.machine().gpus;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (id != std::to_string(i) && ToLower(id) != ToLower(gpus[i].bus_id)) continue;
    Status s = sim::ResetGpu(store, static_cast<unsigned>(i));
    if (!s.ok()) return "error " + s.message();
    LogInfo("simulated hardware: GPU reset",
            {{"gpu", std::to_string(i)}, {"bus_id", gpus[i].bus_id}});
    return "ok " + gpus[i].bus_id;
  }
  return "error no GPU " + id + " on this node (" + std::to_string(gpus.size()) +
         " GPUs: give an index or a PCI bus id)";
}

Result<std::unique_ptr<HardwareControl>> HardwareControl::Start(const std::string& node_root,
                                                                const std::string& machine,
                                                                const std::string& seed,
                                                                const std::string& state_dir) {
  GPUOP_ASSIGN_OR_RETURN(sim::Machine m, sim::LoadMachine(machine, seed));
  const int64_t now_ms = NowUnixMillis();
  GPUOP_ASSIGN_OR_RETURN(std::unique_ptr<sim::StateStore> store,
                         sim::StateStore::Open(m, state_dir, now_ms));
  const std::string path = node_root + kHardwareSocket;
  GPUOP_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return InvalidArgument("hardware control socket path " + path + " is too long for a socket");
  }
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ::unlink(path.c_str());  // a crashed run's
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal("socket: " + std::string(std::strerror(errno)));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 8) != 0) {
    Status s = Internal("serving " + path + ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  return std::unique_ptr<HardwareControl>(new HardwareControl(fd, path, std::move(store)));
}

HardwareControl::HardwareControl(int fd, std::string path, std::unique_ptr<sim::StateStore> store)
    : fd_(fd), path_(std::move(path)), store_(std::move(store)) {
  thread_ = std::jthread([this](std::stop_token st) { Serve(st); });
}

HardwareControl::~HardwareControl() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  ::unlink(path_.c_str());
}

void HardwareControl::Serve(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;  // wakes to see a stop request
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // One line, within a second: the stand-in writes it at once.
    std::string line;
    char buf[256];
    while (line.find('\n') == std::string::npos && line.size() < 4096) {
      pollfd cp{c, POLLIN, 0};
      if (::poll(&cp, 1, 1000) <= 0) break;
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    std::string answer = HandleHardwareRequest(line.substr(0, line.find('\n')), *store_) + "\n";
    (void)!::write(c, answer.data(), answer.size());
    ::close(c);
  }
}

}  // namespace gpuop::simcluster
