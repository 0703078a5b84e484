// gRPC servers on unix sockets in directories other processes also serve in
// (the kubelet's device-plugins directory, a pod-resources directory): the
// path limit, the socket an earlier run left behind, a bind that a stopping
// predecessor cannot undo, and removal of only the socket this server put
// there.
//
// Thread-safety: the functions are thread-safe (a process-wide counter names
// the private sockets).
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>
#include <sys/un.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"

namespace gpuop::kubelet {

// How long a server's in-flight calls get once its Stop() has begun.
inline constexpr auto kShutdownGrace = std::chrono::milliseconds(200);

// sun_path holds 108 bytes including the terminating NUL.
inline constexpr size_t kMaxUnixSocketPath = sizeof(sockaddr_un::sun_path) - 1;

// Which file a socket path named when a server put its socket there.
struct SocketFileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const SocketFileId&) const = default;
};

struct UnixSocketServer {
  std::unique_ptr<grpc::Server> server;
  std::optional<SocketFileId> socket_id;  // the socket it put at the path
};

// InvalidArgument unless `socket_path` fits a unix socket address. `what`
// names the socket in the error ("device plugin socket").
Status CheckUnixSocketPath(const std::string& socket_path, const std::string& what);

// Starts `builder` (its services registered) serving on `socket_path`, first
// removing a socket an earlier run left there. gRPC unlinks the path it bound
// when it shuts down, whoever owns that path by then: an old server stopped
// after its successor started (the usual order on a kubelet restart) would
// delete the successor's socket. So it binds a private name in the same
// directory and renames it into place; gRPC later unlinks only the private
// name, which is gone. REQUIRES: CheckUnixSocketPath(socket_path) is OK.
Result<UnixSocketServer> ServeOnUnixSocket(grpc::ServerBuilder& builder,
                                           const std::string& socket_path, const std::string& what);

// Removes `socket_path` only while it is still the socket `socket_id` names:
// a successor may already serve on this path. Call after the server stopped.
void RemoveOwnUnixSocket(const std::string& socket_path,
                         const std::optional<SocketFileId>& socket_id);

// Dials `socket_path` and makes one call (`call`, on a stub of its choice,
// waiting for the channel up to `timeout`): a server that just started must
// answer before a kubelet is told to connect, as NVIDIA's plugins check.
// Unavailable (or the call's error) naming `what` when it does not.
Status CheckAnswers(const std::string& socket_path, std::chrono::milliseconds timeout,
                    const std::string& what,
                    const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&,
                                                     grpc::ClientContext*)>& call);

}  // namespace gpuop::kubelet
