#include "kubelet/socket_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>

#include "base/log.h"

namespace gpuop::kubelet {
namespace {

constexpr uint32_t kWatchMask = IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;

}  // namespace

Result<std::unique_ptr<KubeletSocketWatcher>> KubeletSocketWatcher::Start(
    std::string dir, std::function<void()> on_created, std::string socket_name) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFound("kubelet device plugin directory " + dir +
                    " does not exist: is the kubelet running? is " + dir +
                    " mounted into this container?");
  }
  int ifd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (ifd < 0) {
    return Internal(std::string("inotify_init1: ") + std::strerror(errno) +
                    " (raise fs.inotify.max_user_instances?)");
  }
  if (::inotify_add_watch(ifd, dir.c_str(), kWatchMask) < 0) {
    int e = errno;
    ::close(ifd);
    return Internal("watching " + dir + " with inotify: " + std::strerror(e) +
                    (e == ENOSPC ? " (raise fs.inotify.max_user_watches)" : ""));
  }
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) {
    int e = errno;
    ::close(ifd);
    return Internal(std::string("eventfd: ") + std::strerror(e));
  }
  std::unique_ptr<KubeletSocketWatcher> w(new KubeletSocketWatcher(
      std::move(dir), std::move(socket_name), std::move(on_created), ifd, efd));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

KubeletSocketWatcher::KubeletSocketWatcher(std::string dir, std::string socket_name,
                                           std::function<void()> on_created, int inotify_fd,
                                           int stop_fd)
    : dir_(std::move(dir)),
      socket_name_(std::move(socket_name)),
      on_created_(std::move(on_created)),
      inotify_fd_(inotify_fd),
      stop_fd_(stop_fd) {}

KubeletSocketWatcher::~KubeletSocketWatcher() {
  Stop();
  ::close(inotify_fd_);
  ::close(stop_fd_);
}

void KubeletSocketWatcher::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  // Cannot fail short of a counter overflow; the loop exits on any wake-up.
  [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof one);
  thread_.join();
  watching_.store(false);
}

void KubeletSocketWatcher::Run() {
  // Room for many events at once; each is a header plus a NUL-padded name.
  alignas(inotify_event) char buf[16 * (sizeof(inotify_event) + NAME_MAX + 1)];
  pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  while (true) {
    int r = ::poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      LogError("kubelet socket watcher: poll failed; no longer watching",
               {{"dir", dir_}, {"error", std::strerror(errno)}});
      break;
    }
    if (fds[1].revents != 0) break;  // Stop()
    if ((fds[0].revents & POLLIN) == 0) continue;
    bool created = false, gone = false;
    while (true) {
      ssize_t len = ::read(inotify_fd_, buf, sizeof buf);
      if (len <= 0) break;  // EAGAIN: drained
      for (char* p = buf; p < buf + len;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        p += sizeof(inotify_event) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
          // Events were dropped: the socket may have been recreated.
          if (::access((dir_ + "/" + socket_name_).c_str(), F_OK) == 0) created = true;
        } else if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
          gone = true;
        } else if (ev->len > 0 && (ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
                   socket_name_ == ev->name) {
          created = true;
        }
      }
    }
    if (created) {
      creations_.fetch_add(1);
      LogInfo("kubelet socket created", {{"dir", dir_}, {"socket", socket_name_}});
      try {
        on_created_();
      } catch (const std::exception& e) {
        LogError("kubelet socket watcher: callback threw", {{"error", e.what()}});
      }
    }
    if (gone) {
      LogError("kubelet device plugin directory was removed or moved; no longer watching it",
               {{"dir", dir_}});
      break;
    }
  }
  watching_.store(false);
}

}  // namespace gpuop::kubelet
