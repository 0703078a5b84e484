// The kubelet API's device values (kubelet/device_plugin_types.h) by the names
// the device plugin's cores use.
#pragma once

#include "kubelet/device_plugin_types.h"

namespace gpuop::deviceplugin {

using kubelet::ContainerAllocation;
using kubelet::DeviceSpec;
using kubelet::Mount;
using kubelet::PluginDevice;

}  // namespace gpuop::deviceplugin
