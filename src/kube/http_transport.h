// HttpTransport: one HTTP(S) exchange at a time per call, for the Kubernetes
// client (client.cc). Private to src/kube.
//
// HTTP/1.1 over POSIX sockets, TLS by OpenSSL (libssl is mapped by every
// gpuop process anyway, for gRPC). It owns what connections need: the TLS
// trust and client credentials (PEM in memory, never written to disk) and a
// pool of kept-alive connections that later requests reuse. Lists come
// gzip-compressed when the server offers it; TCP keepalive finds dead peers
// of long watches. (It replaced libcurl, whose dependency tree cost every
// gpuop process about 5 MiB of resident memory; see docs/performance.md.)
//
// It does not retry, rate-limit or interpret bodies: the client does. Every
// failure comes back in the HttpResponse as a value, classified so the caller
// can tell whether the request can have reached the server. The one retry it
// makes itself: a request on a kept-alive connection that the server had
// closed gets one new connection.
//
// Thread-safety: Perform and Stream may be called from any thread at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop::kube {

struct TransportOptions {
  std::string ca_pem;  // empty: the system's trust store
  bool insecure_skip_tls_verify = false;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string user_agent;
  // Connections kept open for reuse.
  size_t max_idle_connections = 16;
};

// What went wrong below HTTP.
enum class TransportError {
  kNone,
  kConnect,            // no connection (refused, unreachable, DNS): nothing was sent
  kTlsVerify,          // the server's certificate is not trusted (or names another host)
  kTlsHandshake,       // the TLS handshake failed otherwise
  kClientCertificate,  // our certificate or key could not be loaded
  kTimeout,            // the whole exchange took longer than the request's timeout
  kConnectionLost,     // the connection broke mid-exchange
  kCancelled,          // the stop token was requested (Stream only)
  kStoppedByCaller,    // on_data returned false (Stream only)
  kOther,
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::string content_type;  // for a body
  std::string bearer_token;  // empty: no Authorization header
  // The whole exchange; zero: no limit (a watch relies on the server's end).
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds connect_timeout{10000};
};

struct HttpResponse {
  int status = 0;  // 0: no HTTP answer
  std::string body;
  std::optional<int> retry_after_seconds;  // from a Retry-After header
  TransportError error = TransportError::kNone;
  std::string error_message;  // what went wrong, for messages
  // False when no byte of the request left this process: repeating it is
  // safe whatever the verb.
  bool request_sent = false;

  bool ok() const { return error == TransportError::kNone && status >= 200 && status < 300; }
};

class HttpTransport {
 public:
  // Loads the TLS material; a problem with it fails each TLS request.
  static Result<std::unique_ptr<HttpTransport>> New(TransportOptions options);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // One request; the whole body is collected.
  HttpResponse Perform(const HttpRequest& request);

  // A streaming request (a watch). A 2xx body is handed to `on_data` in the
  // pieces it arrives in; on_data returning false ends the exchange
  // (kStoppedByCaller). Another status's body is collected in the response.
  // `stop` ends it too (kCancelled), noticed within a few milliseconds even
  // when no data flows. The end of the stream by the server is kNone.
  HttpResponse Stream(const HttpRequest& request,
                      const std::function<bool(std::string_view)>& on_data,
                      std::stop_token stop = {});

  struct State;

 private:
  explicit HttpTransport(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gpuop::kube
