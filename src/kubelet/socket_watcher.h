// KubeletSocketWatcher: notices a kubelet restart. A restarting kubelet
// removes every socket in its device-plugins directory and creates
// kubelet.sock anew; a plugin must then register again (the NVIDIA plugin
// restarts its servers and re-registers on a Create of kubelet.sock). The
// watcher uses inotify on the directory, so the callback runs as soon as the
// kernel reports the creation: no polling.
//
// The directory must exist when Start is called: Start returns NotFound if it
// does not (it is a hostPath mount of the plugin's pod, so a missing one is a
// deployment error to report, not a race to wait out). If the directory is
// removed later, the watcher logs it and stops (Watching() turns false).
//
// Start the watcher before the first registration, so a kubelet restart in
// between is not missed.
//
// Thread-safety: the callback runs on the watcher's own thread, one call at a
// time; it must not call Stop() or destroy the watcher. Stop() may be called
// from any other thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"

namespace gpuop::kubelet {

class KubeletSocketWatcher {
 public:
  // Watches `dir` for (re)creation of `socket_name` (a bind(2), or a rename
  // into the directory) and calls on_created each time.
  static Result<std::unique_ptr<KubeletSocketWatcher>> Start(
      std::string dir, std::function<void()> on_created, std::string socket_name = "kubelet.sock");

  ~KubeletSocketWatcher();  // Stop()
  KubeletSocketWatcher(const KubeletSocketWatcher&) = delete;
  KubeletSocketWatcher& operator=(const KubeletSocketWatcher&) = delete;

  // Ends the watch and joins the thread; returns promptly. Idempotent.
  void Stop();

  bool Watching() const { return watching_.load(); }
  // How many times on_created has been called.
  uint64_t Creations() const { return creations_.load(); }

 private:
  KubeletSocketWatcher(std::string dir, std::string socket_name, std::function<void()> on_created,
                       int inotify_fd, int stop_fd);
  void Run();

  const std::string dir_;
  const std::string socket_name_;
  const std::function<void()> on_created_;
  int inotify_fd_;
  int stop_fd_;  // an eventfd: written by Stop() to wake poll(2)
  std::atomic<bool> watching_{true};
  std::atomic<uint64_t> creations_{0};
  std::thread thread_;
};

}  // namespace gpuop::kubelet
