// FakePodResources: the kubelet's pod-resources API (/v1.PodResourcesLister)
// for tests and the simulator. It serves List, Get and
// GetAllocatableResources over real gRPC on a unix socket, answering from
// in-memory tables the caller sets: which containers hold which devices
// (SetAssignments) and what the node can allocate (SetAllocatable).
//
//   auto fake = FakePodResources::Start(kubelet_dir + "/pod-resources/kubelet.sock");
//   (*fake)->SetAssignments({{"train-0", "ml", "worker", "nvidia.com/gpu", {"GPU-a"}}});
//   ... kubelet::ListPodResources((*fake)->socket_path(), 1s) ...
//   EXPECT_EQ((*fake)->ListCalls(), 1);   // e.g. proving a caller caches
//
// List groups assignments like the kubelet does: one PodResources per
// (namespace, pod), one ContainerResources per container, in order of first
// appearance. An assignment with no device IDs still lists its container, with
// no devices (as the kubelet lists containers that hold none).
// SetStalled(true) makes every call wait, without answering, until unstalled,
// stopped or given up by the client: a hung kubelet, for timeout tests.
//
// Like DevicePluginServer it removes a stale socket first and binds a private
// name that it renames into place, so a predecessor stopping late never takes
// the successor's socket with it.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kubelet/pod_resources.h"

namespace gpuop::sim {

class FakePodResources {
 public:
  // Creates the socket's directory if needed and serves on socket_path (at
  // most 107 bytes: use a short /tmp directory in tests).
  // `on_call`, when given, runs at each List or Get call (on a gRPC thread,
  // outside the fake's locks; it should return quickly).
  static Result<std::unique_ptr<FakePodResources>> Start(std::string socket_path,
                                                         std::function<void()> on_call = {});

  ~FakePodResources();  // Stop()
  FakePodResources(const FakePodResources&) = delete;
  FakePodResources& operator=(const FakePodResources&) = delete;

  // Replaces the table List and Get answer from.
  void SetAssignments(std::vector<kubelet::ContainerDevices> assignments);
  std::vector<kubelet::ContainerDevices> Assignments() const;
  // Replaces what GetAllocatableResources answers: device IDs per resource.
  void SetAllocatable(std::map<std::string, std::vector<std::string>> devices_by_resource);

  void SetStalled(bool stalled);

  // Calls served (or stalled) so far.
  uint64_t ListCalls() const;
  uint64_t GetCalls() const;
  uint64_t AllocatableCalls() const;

  // Stops serving (stalled calls are released unanswered) and removes the
  // socket if it is still ours. Idempotent.
  void Stop();
  const std::string& socket_path() const;

 private:
  class Impl;
  explicit FakePodResources(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The assignments file of `gpuop sim kubelet --pod-resources FILE`: a JSON
// array of {"pod", "namespace", "container", "resource", "devices": [ids]}
// objects. Strict: a missing or unknown key, or a value of the wrong type, is
// an error naming `source` and the entry's index. "namespace" may be left out
// ("default"); "devices" may be empty (a container holding none).
Result<std::vector<kubelet::ContainerDevices>> ParsePodResourcesJson(std::string_view text,
                                                                     std::string_view source);
// Reads and parses `path` (errors name it).
Result<std::vector<kubelet::ContainerDevices>> LoadPodResourcesFile(const std::string& path);

}  // namespace gpuop::sim
