// SimKubelet: what `gpuop sim kubelet` runs. The fake kubelet
// (fake_kubelet.h) on <dir>/kubelet.sock, optionally the fake pod-resources
// server (fake_pod_resources.h) answering from a file, and a reporter that
// prints one JSON line per change: serving, each RegisterRequest, each device
// list a plugin streams, the pod-resources table, restarts, and (with
// log_list_calls) the pod-resources call counts. The fakes call back at each
// change, so a line is printed when something happened, never by polling.
//
// Thread-safety: Start, then ReloadPodResources, Restart and Stop from one
// thread (the command's signal loop).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "base/status.h"

namespace gpuop::sim {

struct SimKubeletOptions {
  std::string dir;                   // the device-plugins directory
  std::string pod_resources_file;    // empty: no pod-resources API
  std::string pod_resources_socket;  // empty: <dir's parent>/pod-resources/kubelet.sock
  bool log_list_calls = false;       // print pod-resources call counts as they change
  std::FILE* out = stdout;           // where the JSON lines go
};

class SimKubelet {
 public:
  // Serves, reports "serving" and starts reporting. Errors: the socket
  // cannot be served, a bad pod-resources file.
  static Result<std::unique_ptr<SimKubelet>> Start(SimKubeletOptions options);
  ~SimKubelet();  // Stop()
  SimKubelet(const SimKubelet&) = delete;
  SimKubelet& operator=(const SimKubelet&) = delete;

  // Re-reads the pod-resources file; a bad one keeps the previous table.
  void ReloadPodResources();
  // A kubelet restart: every socket in the directory removed, kubelet.sock
  // (and the pod-resources socket) made anew, the file re-read.
  void Restart();
  // Stops serving and reports "stopped".
  void Stop();

  struct Impl;

 private:
  explicit SimKubelet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuop::sim
