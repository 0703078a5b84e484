// Self-signed TLS material for the API emulator (`gpuop sim apiserver --tls`).
//
// At start the emulator makes a fresh certificate authority (ECDSA P-256) and
// a serving certificate signed by it, for 127.0.0.1, ::1, localhost and the
// host it listens on. The CA certificate goes into the kubeconfig as
// certificate-authority-data, so kubectl verifies the server like a real one;
// nothing is written to disk here and no key outlives the process.
// Thread-safety: GenerateServingCert is a pure function, safe from any thread.
#pragma once

#include <string>

#include "base/status.h"

namespace gpuop::simkube {

struct TlsMaterial {
  std::string ca_cert_pem;  // the CA certificate clients trust
  std::string cert_pem;     // the serving certificate, signed by the CA
  std::string key_pem;      // the serving certificate's private key (PKCS#8)
};

// Makes a CA and a serving certificate valid for `host` (an IP address or a
// DNS name) as well as 127.0.0.1, ::1 and localhost. Valid from an hour ago
// for one year.
Result<TlsMaterial> GenerateServingCert(const std::string& host);

// Standard base64 (RFC 4648, with padding), as kubeconfig's *-data fields use.
std::string Base64Encode(const std::string& data);

}  // namespace gpuop::simkube
