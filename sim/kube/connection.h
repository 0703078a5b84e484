// The TCP connection under an HTTP request, for handlers that outlive it.
//
// cpp-httplib (0.11) gives a handler the request's two endpoints but not its
// socket, and its stream is "writable" after the peer has gone. A watch that
// sees no event would then hold its pool thread forever after the client
// died; kube-apiserver notices the closed connection and ends the watch.
#pragma once

#include <string>

namespace gpuop::simkube {

// The accepted socket whose local port is `local_port` and whose peer is
// `remote_addr`:`remote_port` (as httplib::Request reports them), or -1.
// Valid while the request is being served: the socket is the server's.
int FindConnectionSocket(int local_port, const std::string& remote_addr, int remote_port);

// True when the peer of `fd` has closed or reset its side. Does not block and
// does not consume anything the peer sent.
bool PeerHungUp(int fd);

}  // namespace gpuop::simkube
