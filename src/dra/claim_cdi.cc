#include "dra/claim_cdi.h"

#include <algorithm>
#include <map>

namespace gpuop::dra {

std::string ClaimCdiFileName(std::string_view claim_uid) {
  return std::string(kClaimCdiVendor) + "-" + kClaimCdiClass + "_" + std::string(claim_uid) +
         ".yaml";
}

std::string ClaimCdiDeviceId(std::string_view claim_uid, std::string_view device_name) {
  return std::string(kClaimCdiVendor) + "/" + kClaimCdiClass + "=" + std::string(claim_uid) + "-" +
         std::string(device_name);
}

Result<toolkit::cdi::Spec> BuildClaimCdiSpec(std::string_view claim_uid,
                                             const std::vector<ResolvedDevice>& devices,
                                             const toolkit::CdiInputs& inputs,
                                             toolkit::CdiBuildOptions options) {
  // BuildSpec names each device by its UUID alone; that UUID is then renamed.
  std::map<std::string, std::string> name_by_uuid;
  toolkit::CdiInputs narrowed = inputs;
  narrowed.gpus.clear();
  for (const toolkit::CdiGpuInput& gpu : inputs.gpus) {
    auto on_gpu = [&](const ResolvedDevice& d) { return d.gpu_uuid == gpu.uuid; };
    if (std::none_of(devices.begin(), devices.end(), on_gpu)) continue;
    toolkit::CdiGpuInput kept = gpu;
    kept.migs.clear();
    for (const ResolvedDevice& d : devices) {
      if (!on_gpu(d)) continue;
      if (d.type == DeviceType::kGpu) {
        kept.mig_enabled = false;
        name_by_uuid[gpu.uuid] = d.name;
        continue;
      }
      auto mig = std::find_if(gpu.migs.begin(), gpu.migs.end(),
                              [&](const toolkit::CdiMigInput& m) { return m.uuid == d.mig_uuid; });
      if (mig == gpu.migs.end()) {
        return FailedPrecondition("device " + d.name + ": MIG device " + d.mig_uuid +
                                  " is not among the MIG devices found for the CDI spec of GPU " +
                                  gpu.uuid + "; the MIG layout changed while preparing, retry");
      }
      kept.mig_enabled = true;
      kept.migs.push_back(*mig);
      name_by_uuid[d.mig_uuid] = d.name;
    }
    narrowed.gpus.push_back(std::move(kept));
  }
  for (const ResolvedDevice& d : devices) {
    if (!name_by_uuid.count(d.type == DeviceType::kGpu ? d.gpu_uuid : d.mig_uuid)) {
      return FailedPrecondition("device " + d.name + ": GPU " + d.gpu_uuid +
                                " is not among the GPUs found for the CDI spec; the GPUs changed "
                                "while preparing, retry");
    }
  }

  options.vendor = kClaimCdiVendor;
  options.device_class = kClaimCdiClass;
  options.name_strategies = {toolkit::DeviceNameStrategy::kUuid};
  options.no_all_device = true;
  GPUOP_ASSIGN_OR_RETURN(toolkit::cdi::Spec spec, toolkit::BuildSpec(narrowed, options));
  for (toolkit::cdi::Device& dev : spec.devices) {
    dev.name = std::string(claim_uid) + "-" + name_by_uuid.at(dev.name);
  }
  spec.cdi_version = toolkit::cdi::MinimumVersion(spec);  // a name may now start with a digit
  GPUOP_RETURN_IF_ERROR(toolkit::cdi::Validate(spec));
  return spec;
}

}  // namespace gpuop::dra
