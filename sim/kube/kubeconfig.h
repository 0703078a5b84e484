// A kubeconfig for the API emulator: what `gpuop sim apiserver
// --kubeconfig-out FILE` writes so kubectl and gpuop reach the emulator as is.
//
// One cluster, one user and one context, all named "gpuop-sim": the server
// URL, the CA certificate (certificate-authority-data) when the emulator
// serves TLS, and a bearer token when it requires one. The file is written
// atomically with mode 0600 (it may hold a token). Thread-safety: pure
// functions, safe from any thread.
#pragma once

#include <string>

#include "base/status.h"

namespace gpuop::simkube {

struct KubeconfigParams {
  std::string server;       // https://127.0.0.1:6443 or http://...
  std::string ca_cert_pem;  // empty: no certificate-authority-data
  std::string token;        // empty: no user credentials
  std::string name = "gpuop-sim";
  std::string namespace_ = "default";  // the context's namespace
};

// The kubeconfig YAML text.
std::string RenderKubeconfig(const KubeconfigParams& p);

// Renders and writes it atomically (mode 0600), creating the directory.
Status WriteKubeconfig(const std::string& path, const KubeconfigParams& p);

}  // namespace gpuop::simkube
