// Allocate: what one container that was granted devices of a resource gets,
// as upstream's NvidiaDevicePlugin.getAllocateResponse does it.
//
//   - Device IDs lose their "::<n>" replica suffix and are de-duplicated; an
//     ID the resource does not have is an error naming it and the resource
//     (never an empty answer), as is a request for more than one replica
//     when fail_requests_greater_than_one is set (upstream's text).
//   - The runtime sees UUIDs or indexes ("i", "i:j") per the ID strategy.
//   - envvar: NVIDIA_VISIBLE_DEVICES=<id,id>; volume-mounts:
//     NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices plus a /dev/null
//     mount per device; cdi-annotations: one annotation
//     "<prefix>nvidia-device-plugin_<uuid4>" = "<kind>=<UUID>,..."; cdi-cri:
//     the same names as cdi_devices. With only CDI strategies there is no env,
//     no mount and no device spec.
//   - CDI names are the ones gpuop's toolkit writes to /var/run/cdi/nvidia.yaml
//     (kind Config::cdi_kind, "nvidia.com/gpu"): always the UUID name
//     ("nvidia.com/gpu=GPU-…", "nvidia.com/gpu=MIG-…"), which the toolkit emits
//     under its default name strategies (index,uuid) and which does not move
//     when GPUs are renumbered. Upstream names its own spec's devices
//     (k8s.device-plugin.nvidia.com/gpu=<id>); gpuop has one spec.
//   - pass_device_specs: rw DeviceSpecs for Config::control_device_nodes and
//     each unit's device_nodes, host paths under Config::DevRoot().
//   - MPS resources: CUDA_MPS_PIPE_DIRECTORY=/mps/<resource>/pipe with mounts
//     <mps_root>/<resource>/pipe and <mps_root>/shm (→ /dev/shm).
//   - NVIDIA_GDRCOPY / NVIDIA_GDS / NVIDIA_MOFED=enabled when configured;
//     NVIDIA_IMEX_CHANNELS with envvar when IMEX channels are configured.
// Pure: `new_uuid` supplies the annotation's random part (called only with
// cdi-annotations). Thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "deviceplugin/config.h"
#include "deviceplugin/resources.h"
#include "deviceplugin/types.h"

namespace gpuop::deviceplugin {

inline constexpr char kVolumeMountsDir[] = "/var/run/nvidia-container-devices";

Result<ContainerAllocation> Allocate(const Resource& r, const std::vector<std::string>& device_ids,
                                     const Config& c, const std::function<std::string()>& new_uuid);

// The CDI annotation key for one allocation (pkg/cdi annotations.go rules:
// "<plugin>_<id>" with '/' → '_', at most 63 characters, alphanumeric at both
// ends, [A-Za-z0-9_.-] inside), under `prefix`.
Result<std::string> CdiAnnotationKey(std::string_view prefix, std::string_view plugin,
                                     std::string_view id);

}  // namespace gpuop::deviceplugin
