#include "kube/http_transport.h"

#include <curl/curl.h>

#include <array>
#include <mutex>
#include <vector>

#include "base/strings.h"

namespace gpuop::kube {
namespace {

// A response body bigger than this is refused rather than exhausting memory.
constexpr size_t kMaxBodyBytes = size_t{1} << 30;
// How often a streaming transfer with no traffic looks at its stop token, at
// the latest (a stop request also wakes it at once).
constexpr int kStreamPollMs = 100;

// What curl's callbacks write into for one transfer.
struct Transfer {
  CURL* easy = nullptr;
  HttpResponse* response = nullptr;
  const std::function<bool(std::string_view)>* on_data = nullptr;  // streaming only
  const std::stop_token* stop = nullptr;
  bool stopped_by_caller = false;
  bool too_large = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  if (t->stop != nullptr && t->stop->stop_requested()) return 0;
  long code = 0;  // NOLINT(runtime/int): curl's type
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
  if (t->on_data != nullptr && code >= 200 && code < 300) {
    if (!(*t->on_data)(std::string_view(data, n))) {
      t->stopped_by_caller = true;
      return 0;  // makes curl end the transfer with CURLE_WRITE_ERROR
    }
    return n;
  }
  if (t->response->body.size() + n > kMaxBodyBytes) {
    t->too_large = true;
    return 0;
  }
  t->response->body.append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  if (StartsWith(line, "HTTP/")) {
    // A new response (after a 100 Continue or an internal retry): forget the last one's headers.
    t->response->retry_after_seconds.reset();
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  if (ToLower(Trim(line.substr(0, colon))) == "retry-after") {
    // Seconds only: the API server never sends the HTTP-date form.
    if (auto secs = ParseUint(Trim(line.substr(colon + 1))); secs && *secs < 86400) {
      t->response->retry_after_seconds = static_cast<int>(*secs);
    }
  }
  return n;
}

TransportError Classify(CURLcode rc, const Transfer& t) {
  switch (rc) {
    case CURLE_OK:
      return TransportError::kNone;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
      return TransportError::kConnect;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
      return TransportError::kTlsVerify;
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CLIENTCERT:
      return TransportError::kClientCertificate;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CIPHER:
      return TransportError::kTlsHandshake;
    case CURLE_OPERATION_TIMEDOUT:
      return TransportError::kTimeout;
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return TransportError::kConnectionLost;
    case CURLE_WRITE_ERROR:
      if (t.stopped_by_caller) return TransportError::kStoppedByCaller;
      if (t.stop != nullptr && t.stop->stop_requested()) return TransportError::kCancelled;
      return TransportError::kOther;
    default:
      return TransportError::kOther;
  }
}

bool FailsBeforeSending(TransportError e) {
  return e == TransportError::kConnect || e == TransportError::kTlsVerify ||
         e == TransportError::kTlsHandshake || e == TransportError::kClientCertificate;
}

}  // namespace

struct HttpTransport::State {
  TransportOptions options;
  CURLSH* share = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> share_locks;

  std::mutex pool_mu;
  std::vector<CURL*> idle;  // GUARDED_BY(pool_mu)

  ~State() {
    for (CURL* h : idle) curl_easy_cleanup(h);
    if (share != nullptr) curl_share_cleanup(share);
  }

  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* user) {
    static_cast<State*>(user)->share_locks[data].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* user) {
    static_cast<State*>(user)->share_locks[data].unlock();
  }

  CURL* Acquire() {
    {
      std::lock_guard lock(pool_mu);
      if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }

  void Release(CURL* h) {
    // Reset forgets the options but keeps the live connections and caches.
    curl_easy_reset(h);
    std::lock_guard lock(pool_mu);
    if (idle.size() < options.max_idle_handles) {
      idle.push_back(h);
      return;
    }
    curl_easy_cleanup(h);
  }

  // Sets every option of one exchange. `headers` and `error_buffer` must
  // outlive the transfer.
  void Configure(CURL* h, const HttpRequest& req, Transfer& t, curl_slist** headers,
                 char* error_buffer, bool streaming) {
    curl_easy_setopt(h, CURLOPT_SHARE, share);
    curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
    if (!options.user_agent.empty()) {
      curl_easy_setopt(h, CURLOPT_USERAGENT, options.user_agent.c_str());
    }
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout.count()));
    if (req.timeout.count() > 0) {
      curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));
    }
    // Big lists come gzip-compressed when the server offers it (what
    // kube-apiserver speaks; brotli at a slow setting made 10 MB lists 5x
    // slower); a watch stays uncompressed so each event arrives as it is sent.
    if (!streaming) curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "gzip");

    // TLS. The PEM strings live in `options`, which outlives every handle.
    if (!options.ca_pem.empty()) {
      curl_blob ca{options.ca_pem.data(), options.ca_pem.size(), CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &ca);
    }
    long verify = options.insecure_skip_tls_verify ? 0L : 1L;  // NOLINT(runtime/int)
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, verify);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, verify * 2);
    if (!options.client_cert_pem.empty()) {
      curl_blob cert{options.client_cert_pem.data(), options.client_cert_pem.size(),
                     CURL_BLOB_NOCOPY};
      curl_blob key{options.client_key_pem.data(), options.client_key_pem.size(), CURL_BLOB_NOCOPY};
      curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
      curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
      curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }

    // Method and body.
    if (req.method == "GET") {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (req.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
    } else {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }
    if (req.method != "GET" && (!req.body.empty() || req.method == "POST")) {
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    }

    curl_slist* list = curl_slist_append(nullptr, "Accept: application/json");
    // No "Expect: 100-continue" round trip for bigger bodies.
    list = curl_slist_append(list, "Expect:");
    if (!req.content_type.empty()) {
      list = curl_slist_append(list, ("Content-Type: " + req.content_type).c_str());
    }
    if (!req.bearer_token.empty()) {
      list = curl_slist_append(list, ("Authorization: Bearer " + req.bearer_token).c_str());
    }
    *headers = list;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);

    t.easy = h;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  }

  // Fills the response from a finished transfer.
  static void Finish(CURL* h, CURLcode rc, const Transfer& t, const char* error_buffer,
                     HttpResponse& resp) {
    long code = 0;  // NOLINT(runtime/int): curl's type
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    resp.status = static_cast<int>(code);
    resp.error = Classify(rc, t);
    if (t.too_large) {
      resp.error = TransportError::kOther;
      resp.error_message = "the response body is larger than 1 GiB";
    } else if (rc != CURLE_OK) {
      resp.error_message = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);
    }
    curl_off_t pretransfer = 0;
    curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
    // The request leaves right after "pretransfer"; before it, nothing was sent.
    resp.request_sent = resp.status != 0 || (!FailsBeforeSending(resp.error) && pretransfer > 0);
  }
};

HttpTransport::HttpTransport(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpTransport::~HttpTransport() = default;

Result<std::unique_ptr<HttpTransport>> HttpTransport::New(TransportOptions options) {
  static std::once_flag init_once;
  static CURLcode init_result = CURLE_OK;
  std::call_once(init_once, [] { init_result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init_result != CURLE_OK) {
    return Internal(std::string("libcurl failed to initialise: ") +
                    curl_easy_strerror(init_result));
  }
  const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
  if (info->version_num < 0x075500) {  // 7.85: CURLOPT_PROTOCOLS_STR; blobs need 7.77
    return NotSupported(std::string("libcurl ") + info->version +
                        " is too old for the Kubernetes client; it needs 7.85 or newer");
  }
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  state->share = curl_share_init();
  if (state->share == nullptr) return Internal("curl_share_init failed");
  curl_share_setopt(state->share, CURLSHOPT_LOCKFUNC, &State::Lock);
  curl_share_setopt(state->share, CURLSHOPT_UNLOCKFUNC, &State::Unlock);
  curl_share_setopt(state->share, CURLSHOPT_USERDATA, state.get());
  curl_share_setopt(state->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(state->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  return std::unique_ptr<HttpTransport>(new HttpTransport(std::move(state)));
}

HttpResponse HttpTransport::Perform(const HttpRequest& request) {
  HttpResponse resp;
  CURL* h = state_->Acquire();
  if (h == nullptr) {
    resp.error = TransportError::kOther;
    resp.error_message = "curl_easy_init failed";
    return resp;
  }
  Transfer t;
  t.response = &resp;
  curl_slist* headers = nullptr;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  state_->Configure(h, request, t, &headers, error_buffer, /*streaming=*/false);
  CURLcode rc = curl_easy_perform(h);
  State::Finish(h, rc, t, error_buffer, resp);
  state_->Release(h);
  curl_slist_free_all(headers);
  return resp;
}

HttpResponse HttpTransport::Stream(const HttpRequest& request,
                                   const std::function<bool(std::string_view)>& on_data,
                                   std::stop_token stop) {
  HttpResponse resp;
  // A stream gets a handle and a multi of its own: the multi lets a stop
  // request wake the wait for data at once (curl_multi_wakeup).
  CURL* h = curl_easy_init();
  CURLM* multi = curl_multi_init();
  if (h == nullptr || multi == nullptr) {
    if (h != nullptr) curl_easy_cleanup(h);
    if (multi != nullptr) curl_multi_cleanup(multi);
    resp.error = TransportError::kOther;
    resp.error_message = "curl_easy_init or curl_multi_init failed";
    return resp;
  }
  Transfer t;
  t.response = &resp;
  t.on_data = &on_data;
  t.stop = &stop;
  curl_slist* headers = nullptr;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  state_->Configure(h, request, t, &headers, error_buffer, /*streaming=*/true);
  curl_multi_add_handle(multi, h);

  bool cancelled = false;
  std::optional<CURLcode> result;
  {
    std::stop_callback wake(stop, [multi] { curl_multi_wakeup(multi); });
    for (;;) {
      int running = 0;
      CURLMcode mc = curl_multi_perform(multi, &running);
      if (mc != CURLM_OK) {
        resp.error = TransportError::kOther;
        resp.error_message = curl_multi_strerror(mc);
        break;
      }
      if (running == 0) break;
      if (stop.stop_requested()) {
        cancelled = true;
        break;
      }
      mc = curl_multi_poll(multi, nullptr, 0, kStreamPollMs, nullptr);
      if (mc != CURLM_OK) {
        resp.error = TransportError::kOther;
        resp.error_message = curl_multi_strerror(mc);
        break;
      }
    }
  }
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) result = msg->data.result;
  }
  if (cancelled) {
    State::Finish(h, CURLE_OK, t, error_buffer, resp);
    resp.error = TransportError::kCancelled;
  } else if (result) {
    State::Finish(h, *result, t, error_buffer, resp);
    if (resp.error == TransportError::kNone && stop.stop_requested() && *result != CURLE_OK) {
      resp.error = TransportError::kCancelled;
    }
  } else if (resp.error == TransportError::kNone) {
    resp.error = TransportError::kOther;
    resp.error_message = "the transfer ended without a result";
  }
  curl_multi_remove_handle(multi, h);
  curl_easy_cleanup(h);
  curl_multi_cleanup(multi);
  curl_slist_free_all(headers);
  return resp;
}

}  // namespace gpuop::kube
