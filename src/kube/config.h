// Where the API server is and who we are to it: a kubeconfig file (as kubectl
// reads it) or the in-cluster service account.
//
// Resolution order of LoadRestConfig, like client-go's:
//   1. an explicit --kubeconfig path;
//   2. in-cluster, when KUBERNETES_SERVICE_HOST and _PORT are set and no
//      context is asked for (a context only makes sense in a kubeconfig);
//   3. $KUBECONFIG (the first file of a ':'-separated list that exists; the
//      files are not merged like kubectl does);
//   4. ~/.kube/config.
// Errors name the file, the context and the missing piece ("context "x" names
// user "y", which the file does not define").
//
// Thread-safety: pure functions over the environment and files.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"

namespace gpuop::kube {

struct RestConfig {
  std::string server;  // "https://10.0.0.1:443"; no trailing '/'
  // Trust: PEM bundle (certificate-authority-data or the file's contents).
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  // Client certificate authentication (PEM).
  std::string client_cert_pem;
  std::string client_key_pem;
  // Bearer token. With token_file set, the file is re-read when it changes
  // (projected service-account tokens rotate every hour).
  std::string token;
  std::string token_file;
  // The namespace of the context (or of the service account); "default" else.
  std::string namespace_ = "default";
  // Client-side rate limit, like client-go's rest.Config QPS/Burst.
  double qps = 50;
  int burst = 100;
  // Per-request timeout (not for watches, which have their own).
  std::chrono::milliseconds timeout{30000};
  std::string user_agent = "gpuop";
  // Where it came from, for messages: "kubeconfig /root/.kube/config context x".
  std::string source;
};

struct KubeconfigOptions {
  std::string path;     // empty: resolution order above
  std::string context;  // empty: current-context
};

// Reads one kubeconfig file. Relative file paths in it are relative to the
// file's directory, like kubectl. Supports server, certificate-authority(-data),
// insecure-skip-tls-verify, client-certificate(-data), client-key(-data),
// token and tokenFile (token_file is kept so the client re-reads it); exec and
// auth-provider plugins are refused with NotSupported.
Result<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// The in-cluster configuration. `root` prefixes the service-account
// directory (/var/run/secrets/kubernetes.io/serviceaccount), for tests. The
// server is https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (an IPv6
// host in brackets); token_file is set so a rotated token is picked up.
Result<RestConfig> InClusterConfig(const std::string& root = "");

// The resolution order above.
Result<RestConfig> LoadRestConfig(const KubeconfigOptions& options);

}  // namespace gpuop::kube
