// HttpTransport: one HTTP(S) exchange at a time per call, over libcurl, for
// the Kubernetes client (client.cc). Private to src/kube.
//
// It owns what connections need: the TLS trust and client credentials (PEM
// in memory, never written to disk), a pool of curl easy handles (each keeps
// its connections alive between requests, so requests reuse them), and a
// curl share of DNS answers and TLS sessions across handles, guarded by lock
// callbacks. HTTP/2 is negotiated by ALPN on TLS, HTTP/1.1 otherwise; TCP
// keepalive finds dead peers of long watches.
//
// It does not retry, rate-limit or interpret bodies: the client does. Every
// failure comes back in the HttpResponse as a value, classified so the caller
// can tell whether the request can have reached the server.
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
  // Easy handles kept idle for reuse (each with its live connections).
  size_t max_idle_handles = 16;
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
  std::string error_message;  // curl's words, for messages
  // False when no byte of the request left this process: repeating it is
  // safe whatever the verb.
  bool request_sent = false;

  bool ok() const { return error == TransportError::kNone && status >= 200 && status < 300; }
};

class HttpTransport {
 public:
  // Initialises libcurl (once per process) and the shared caches.
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
