#include "nvml/device.h"

#include <algorithm>
#include <map>

#include "nvml/nvml_abi.h"

namespace gpuop::nvml {
namespace {

uint64_t CeilDiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

}  // namespace

unsigned MigMemoryGb(uint64_t memory_mib, uint64_t total_memory_bytes) {
  if (total_memory_bytes == 0) return 0;
  // In eighths of the GPU, rounded up, then scaled by the GPU's size in whole
  // GiB. Integers throughout: (x + 4) / 8 rounds half up like math.Round.
  uint64_t eighths = CeilDiv(8 * memory_mib * (uint64_t{1} << 20), total_memory_bytes);
  uint64_t gib = CeilDiv(total_memory_bytes, uint64_t{1} << 30);
  return static_cast<unsigned>((eighths * gib + 4) / 8);
}

std::string MigProfileName(unsigned ci_slices, unsigned gi_slices, uint64_t memory_mib,
                           uint64_t total_memory_bytes, unsigned gi_profile_index) {
  std::string name;
  if (ci_slices != gi_slices) name = std::to_string(ci_slices) + "c.";
  name += std::to_string(gi_slices) + "g." +
          std::to_string(MigMemoryGb(memory_mib, total_memory_bytes)) + "gb";
  switch (gi_profile_index) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
      return name + "+me";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
      return name + "+me.all";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
      return name + "-me";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX:
      return name + "+gfx";
    default:
      return name;
  }
}

std::string DescribeProcesses(const std::vector<GpuProcess>& processes) {
  std::string out;
  for (const GpuProcess& p : processes) {
    if (!out.empty()) out += ", ";
    out += std::to_string(p.pid);
    if (!p.name.empty()) out += " (" + p.name + ")";
  }
  return out;
}

std::optional<unsigned> CiProfileIndexForSlices(unsigned slices) {
  switch (slices) {
    case 1:
      return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2:
      return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3:
      return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4:
      return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6:
      return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 7:
      return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
    case 8:
      return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default:
      return std::nullopt;
  }
}

std::string ArchitectureName(unsigned arch) {
  switch (arch) {
    case NVML_DEVICE_ARCH_KEPLER:
      return "Kepler";
    case NVML_DEVICE_ARCH_MAXWELL:
      return "Maxwell";
    case NVML_DEVICE_ARCH_PASCAL:
      return "Pascal";
    case NVML_DEVICE_ARCH_VOLTA:
      return "Volta";
    case NVML_DEVICE_ARCH_TURING:
      return "Turing";
    case NVML_DEVICE_ARCH_AMPERE:
      return "Ampere";
    case NVML_DEVICE_ARCH_ADA:
      return "Ada Lovelace";
    case NVML_DEVICE_ARCH_HOPPER:
      return "Hopper";
    case NVML_DEVICE_ARCH_BLACKWELL:
      return "Blackwell";
    case NVML_DEVICE_ARCH_RUBIN:
      return "Rubin";
    default:
      return "Unknown";
  }
}

std::string BrandName(unsigned brand) {
  switch (brand) {
    case NVML_BRAND_QUADRO:
      return "Quadro";
    case NVML_BRAND_TESLA:
      return "Tesla";
    case NVML_BRAND_NVS:
      return "NVS";
    case NVML_BRAND_GRID:
      return "Grid";
    case NVML_BRAND_GEFORCE:
      return "GeForce";
    case NVML_BRAND_TITAN:
      return "Titan";
    case NVML_BRAND_NVIDIA_VAPPS:
      return "NVIDIA Virtual Applications";
    case NVML_BRAND_NVIDIA_VPC:
      return "NVIDIA Virtual PC";
    case NVML_BRAND_NVIDIA_VCS:
      return "NVIDIA Virtual Compute Server";
    case NVML_BRAND_NVIDIA_VWS:
      return "NVIDIA RTX Virtual Workstation";
    case NVML_BRAND_NVIDIA_CLOUD_GAMING:
      return "NVIDIA Cloud Gaming";
    case NVML_BRAND_QUADRO_RTX:
      return "Quadro RTX";
    case NVML_BRAND_NVIDIA_RTX:
      return "NVIDIA RTX";
    case NVML_BRAND_NVIDIA:
      return "NVIDIA";
    case NVML_BRAND_GEFORCE_RTX:
      return "GeForce RTX";
    case NVML_BRAND_TITAN_RTX:
      return "Titan RTX";
    default:
      return "Unknown";
  }
}

std::string CudaVersionString(int v) {
  if (v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::vector<NvLinkPeer> NvLinkPeersFromLinks(unsigned gpu,
                                             const std::vector<std::vector<NvLink>>& links_by_gpu) {
  std::vector<NvLinkPeer> out;
  if (gpu >= links_by_gpu.size()) return out;
  // Links of one GPU to each GPU and to each switch.
  auto tally = [](const std::vector<NvLink>& links, std::map<unsigned, unsigned>* to_gpu,
                  std::map<std::string, unsigned>* to_switch) {
    for (const NvLink& l : links) {
      if (l.remote == NvLink::Remote::kGpu && l.remote_gpu) ++(*to_gpu)[*l.remote_gpu];
      if (l.remote == NvLink::Remote::kSwitch) ++(*to_switch)[l.remote_bus_id];
    }
  };
  std::map<unsigned, unsigned> mine_gpu;
  std::map<std::string, unsigned> mine_switch;
  tally(links_by_gpu[gpu], &mine_gpu, &mine_switch);
  for (unsigned other = 0; other < links_by_gpu.size(); ++other) {
    if (other == gpu) continue;
    NvLinkPeer p;
    p.gpu = other;
    if (auto it = mine_gpu.find(other); it != mine_gpu.end()) p.links = it->second;
    if (!mine_switch.empty()) {
      std::map<unsigned, unsigned> theirs_gpu;
      std::map<std::string, unsigned> theirs_switch;
      tally(links_by_gpu[other], &theirs_gpu, &theirs_switch);
      unsigned shared = 0;
      for (const auto& [sw, n] : mine_switch) {
        auto it = theirs_switch.find(sw);
        if (it != theirs_switch.end()) shared += std::min(n, it->second);
      }
      if (shared > 0) {
        p.links += shared;
        p.via_switch = true;
      }
    }
    if (p.links > 0) out.push_back(p);
  }
  return out;
}

}  // namespace gpuop::nvml
