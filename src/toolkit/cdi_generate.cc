#include "toolkit/cdi_generate.h"

#include "toolkit/cdi_build.h"
#include "toolkit/cdi_discover.h"

namespace gpuop::toolkit {

Result<cdi::Spec> GenerateCdiSpec(const nvml::Client& client, const CdiGenerateOptions& options) {
  CdiHostRoots roots;
  roots.host_root = options.host_root.empty() ? "/" : options.host_root;
  roots.driver_root = options.driver_root.empty() ? "/" : options.driver_root;
  roots.dev_root = options.dev_root.empty() ? roots.driver_root : options.dev_root;
  GPUOP_ASSIGN_OR_RETURN(CdiInputs inputs, DiscoverCdiInputs(client, roots));

  CdiBuildOptions build;
  build.vendor = options.vendor;
  build.device_class = options.device_class;
  build.name_strategies = options.name_strategies;
  build.no_all_device = options.no_all_device;
  build.additional_gids = options.additional_gids;
  build.hook_path = options.hook_path;
  build.driver_root = roots.driver_root;
  build.dev_root = roots.dev_root;
  return BuildSpec(inputs, build);
}

}  // namespace gpuop::toolkit
