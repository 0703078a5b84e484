// The in-process Kubernetes API emulator (sim/kube) for tests, with the
// repository's OpenAPI schemas, on 127.0.0.1 port 0, and a client with no
// rate limit. Header-only; the test binary links gpuop_simkube.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "base/status.h"
#include "kube/client.h"
#include "sim/kube/server.h"

namespace gpuop::testing {

struct ApiEmulator {
  std::unique_ptr<simkube::ApiServer> server;
  std::unique_ptr<kube::Client> client;  // declared last: goes before the server
};

// `threads`: the emulator's request threads (each open watch holds one).
inline Result<ApiEmulator> StartApiEmulator(size_t threads = simkube::ServerOptions().threads) {
  simkube::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  so.threads = threads;
  auto server = simkube::ApiServer::Start(std::move(so));
  if (!server.ok()) return server.status();
  kube::RestConfig rc;
  rc.server = (*server)->url();
  rc.qps = 0;
  auto client = kube::Client::New(rc);
  if (!client.ok()) return client.status();
  ApiEmulator api;
  api.server = std::move(server).value();
  api.client = std::move(client).value();
  return api;
}

}  // namespace gpuop::testing
