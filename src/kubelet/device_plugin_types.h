// The device plugin API's values without their protos: what a plugin
// advertises to the kubelet (PluginDevice) and what one container gets
// (ContainerAllocation). The gRPC adapter (device_plugin_server.h,
// proto_convert.h) converts them to and from the v1beta1 messages, so the
// device plugin's pure cores (src/deviceplugin) never see a proto. All types
// are copyable values, safe to pass between threads.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpuop::kubelet {

// One device as ListAndWatch advertises it.
struct PluginDevice {
  std::string id;       // GPU/MIG UUID, "<uuid>::<n>" for a replica, or "i"/"i:j" (index IDs)
  bool healthy = true;  // "Healthy" / "Unhealthy"
  int numa_node = -1;   // TopologyInfo; -1: none sent
  bool operator==(const PluginDevice&) const = default;
};

struct Mount {
  std::string container_path, host_path;
  bool read_only = true;
  bool operator==(const Mount&) const = default;
};

struct DeviceSpec {
  std::string container_path, host_path;
  std::string permissions = "rw";
  bool operator==(const DeviceSpec&) const = default;
};

// ContainerAllocateResponse, field for field.
struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::vector<DeviceSpec> devices;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
  bool operator==(const ContainerAllocation&) const = default;
};

}  // namespace gpuop::kubelet
