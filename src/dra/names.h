// The names NVIDIA's GPU DRA driver gives its devices, so claims and
// DeviceClass selectors written for it select the same devices:
//   a whole GPU   gpu-<minor>                          (the /dev/nvidia minor)
//   a MIG device  gpu-<parent minor>-mig-<profile>-<GI profile id>-<placement start>
// where <profile> is the MIG profile lowercased with dots removed and any
// other character outside [a-z0-9] turned into '-' ("1g.10gb+me" →
// "1g10gb-me"). Pure.
#pragma once

#include <string>
#include <string_view>

#include "kube/gpu_pods.h"
#include "nvml/device.h"

namespace gpuop::dra {

inline constexpr const char* kDriverName = kube::kGpuDraDriver;

std::string GpuDeviceName(const nvml::Gpu& gpu);
std::string MigDeviceName(const nvml::Gpu& parent, const nvml::MigDevice& mig);
// The <profile> part of a MIG device name.
std::string ProfileForName(std::string_view profile);

}  // namespace gpuop::dra
