// kubeconfig files (--kubeconfig, $KUBECONFIG). Read by path, so each input
// goes through a scratch file.
#include "fuzz_util.h"
#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = gpuop::fuzz::ScratchFile(gpuop::fuzz::AsText(data, size), "kubeconfig");
  (void)gpuop::kube::LoadKubeconfig(path);
  (void)gpuop::kube::LoadKubeconfig(path, "ctx");
  return 0;
}
