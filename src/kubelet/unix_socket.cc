#include "kubelet/unix_socket.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "base/files.h"
#include "kubelet/proto_convert.h"

namespace gpuop::kubelet {
namespace {

std::optional<SocketFileId> StatId(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return SocketFileId{st.st_dev, st.st_ino};
}

// A name in `socket_path`'s directory no other server binds; `socket_path`
// itself when that name would not fit a unix socket address.
std::string PrivateBindPath(const std::string& socket_path) {
  static std::atomic<unsigned> counter{0};
  std::string bind_path = DirName(socket_path) + "/.gpuop-" + std::to_string(::getpid()) + "-" +
                          std::to_string(counter.fetch_add(1));
  return bind_path.size() > kMaxUnixSocketPath ? socket_path : bind_path;
}

}  // namespace

Status CheckUnixSocketPath(const std::string& socket_path, const std::string& what) {
  if (socket_path.empty() || socket_path.size() > kMaxUnixSocketPath) {
    return InvalidArgument(what + " path \"" + socket_path + "\" must be 1 to " +
                           std::to_string(kMaxUnixSocketPath) +
                           " bytes long (a unix socket limit); use a shorter directory");
  }
  return Status::Ok();
}

Result<UnixSocketServer> ServeOnUnixSocket(grpc::ServerBuilder& builder,
                                           const std::string& socket_path,
                                           const std::string& what) {
  // A socket left by a previous run would make bind fail (or, worse, be
  // dialled): remove it first, as the kubelet expects plugins to do.
  if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
    return PermissionDenied("removing the stale " + what + " " + socket_path + ": " +
                            std::strerror(errno));
  }
  const std::string bind_path = PrivateBindPath(socket_path);
  builder.AddListeningPort("unix:" + bind_path, grpc::InsecureServerCredentials());
  UnixSocketServer out;
  out.server = builder.BuildAndStart();
  if (!out.server) {
    return Unavailable(what + " " + socket_path +
                       ": gRPC could not listen on it; is the directory writable by this "
                       "process?");
  }
  if (bind_path != socket_path && ::rename(bind_path.c_str(), socket_path.c_str()) != 0) {
    Status err = Internal(what + " " + socket_path + ": renaming " + bind_path +
                          " into place: " + std::strerror(errno));
    ::unlink(bind_path.c_str());
    out.server->Shutdown(std::chrono::system_clock::now());  // no call can have come in
    out.server->Wait();
    return err;
  }
  out.socket_id = StatId(socket_path);
  return out;
}

void RemoveOwnUnixSocket(const std::string& socket_path,
                         const std::optional<SocketFileId>& socket_id) {
  if (socket_id && StatId(socket_path) == socket_id) ::unlink(socket_path.c_str());
}

Status CheckAnswers(const std::string& socket_path, std::chrono::milliseconds timeout,
                    const std::string& what,
                    const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&,
                                                     grpc::ClientContext*)>& call) {
  auto channel = grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials());
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  grpc::Status s = call(channel, &ctx);
  if (!s.ok()) {
    return FromGrpcStatus(s, what + " " + socket_path + " does not answer after starting to serve");
  }
  return Status::Ok();
}

}  // namespace gpuop::kubelet
