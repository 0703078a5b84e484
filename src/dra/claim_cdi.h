// The CDI spec of one prepared claim, as NVIDIA's driver writes it
// (25.12 and later): kind k8s.gpu.nvidia.com/claim in the file
// <cdi-root>/k8s.gpu.nvidia.com-claim_<claimUID>.yaml, one device per prepared
// device named <claimUID>-<deviceName>, so a container asks for
// "k8s.gpu.nvidia.com/claim=<claimUID>-gpu-0".
//
// The edits are the toolkit's (toolkit/cdi_build.h BuildSpec) for exactly the
// claim's GPUs and MIG devices: a whole GPU gets /dev/nvidia<minor> (and its
// DRI nodes), a MIG device its parent's node plus its GI and CI capability
// nodes; the spec-level edits are the driver's control nodes, libraries and
// hooks. This file only narrows the inputs and renames the devices.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "dra/claims.h"
#include "toolkit/cdi_build.h"
#include "toolkit/cdi_spec.h"

namespace gpuop::dra {

inline constexpr char kClaimCdiVendor[] = "k8s.gpu.nvidia.com";
inline constexpr char kClaimCdiClass[] = "claim";

// "k8s.gpu.nvidia.com-claim_<uid>.yaml"
std::string ClaimCdiFileName(std::string_view claim_uid);
// "k8s.gpu.nvidia.com/claim=<uid>-<device>"
std::string ClaimCdiDeviceId(std::string_view claim_uid, std::string_view device_name);

// The spec for `devices` of claim `claim_uid`. `inputs` describe the whole
// node (toolkit DiscoverCdiInputs); `options` carry the hook path and the
// driver and dev roots (vendor, class, name strategies and the "all" device
// are set here). Errors are BuildSpec's (a missing node, no libraries), or
// FailedPrecondition when a device's GPU is not in `inputs`.
Result<toolkit::cdi::Spec> BuildClaimCdiSpec(std::string_view claim_uid,
                                             const std::vector<ResolvedDevice>& devices,
                                             const toolkit::CdiInputs& inputs,
                                             toolkit::CdiBuildOptions options);

}  // namespace gpuop::dra
