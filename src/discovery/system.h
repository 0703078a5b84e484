// The system labels Node Feature Discovery's system and kernel sources set,
// which the operator reads to name the driver image (gpu-operator's
// resolveDriverTag: the image tag's OS suffix from system-os_release.ID and
// VERSION_ID; a precompiled driver's kernel from kernel-version.full). gpuop
// node-discovery sets them too, so a cluster without NFD gets the right driver
// image:
//
//   feature.node.kubernetes.io/system-os_release.ID            ubuntu
//   feature.node.kubernetes.io/system-os_release.VERSION_ID    22.04
//   feature.node.kubernetes.io/system-os_release.VERSION_ID.major / .minor
//   feature.node.kubernetes.io/kernel-version.full             5.15.0-105-generic
//   feature.node.kubernetes.io/kernel-version.major / .minor / .revision
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "discovery/pci.h"

namespace gpuop::discovery {

// The labels for an /etc/os-release's content and the kernel release the
// kubelet reports (status.nodeInfo.kernelVersion). Values that are not valid
// label values are left out, as NFD leaves them out.
Labels SystemLabels(std::string_view os_release, std::string_view kernel_version);

// Whether `key` is one SystemLabels can produce.
bool IsSystemLabel(std::string_view key);

}  // namespace gpuop::discovery
