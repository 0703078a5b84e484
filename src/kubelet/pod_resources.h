// The client side of the kubelet's pod-resources API v1
// (/v1.PodResourcesLister over <kubelet-dir>/pod-resources/kubelet.sock):
// which containers hold which devices. The exporter uses it to put pod,
// namespace and container labels on a GPU's metrics.
//
// Thread-safety: the free functions are thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpuop::kubelet {

// The kubelet's pod-resources socket under a kubelet dir
// ("/var/lib/kubelet" -> "/var/lib/kubelet/pod-resources/kubelet.sock").
std::string PodResourcesSocket(const std::string& kubelet_dir);

// One container's devices of one resource, as List returns them. Device IDs
// are what the device plugin advertised: GPU or MIG UUIDs, or "<uuid>::<n>"
// replicas of a shared GPU.
struct ContainerDevices {
  std::string pod;
  std::string namespace_;
  std::string container;
  std::string resource_name;  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  std::vector<std::string> device_ids;
  bool operator==(const ContainerDevices&) const = default;
};

// PodResourcesLister.List over the unix socket `socket_path`, flattened to
// one entry per (pod, container, resource) that has devices. Errors name the
// socket and say whether the kubelet was unreachable or the call failed;
// `timeout` bounds the whole call (connect included).
Result<std::vector<ContainerDevices>> ListPodResources(const std::string& socket_path,
                                                       std::chrono::milliseconds timeout);

// PodResourcesLister.Get for one pod (kubelet 1.27+; an older kubelet
// answers NotSupported), flattened like ListPodResources. NotFound when the
// kubelet runs no such pod.
Result<std::vector<ContainerDevices>> GetPodResources(const std::string& socket_path,
                                                      const std::string& namespace_,
                                                      const std::string& pod,
                                                      std::chrono::milliseconds timeout);

// PodResourcesLister.GetAllocatableResources: every device the node can hand
// out, one entry per resource (pod, namespace_ and container empty).
Result<std::vector<ContainerDevices>> GetAllocatableDevices(const std::string& socket_path,
                                                            std::chrono::milliseconds timeout);

}  // namespace gpuop::kubelet
