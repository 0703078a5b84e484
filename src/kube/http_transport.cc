#include "kube/http_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/mutex.h"
#include "base/no_sigpipe.h"
#include "base/strings.h"

namespace gpuop::kube {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A response body bigger than this is refused rather than exhausting memory.
constexpr size_t kMaxBodyBytes = size_t{1} << 30;
// A status line and headers bigger than this are not an API server's.
constexpr size_t kMaxHeadBytes = size_t{1} << 20;
constexpr size_t kReadChunk = 64 * 1024;

std::string Errno(int err) { return std::strerror(err); }

// The last OpenSSL error of this thread, in words.
std::string OpenSslError() {
  unsigned long e = ERR_peek_last_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (e == 0) return "unknown TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

struct Url {
  bool tls = false;
  std::string host;  // without IPv6 brackets
  std::string port;
  std::string target;       // path and query
  std::string host_header;  // host[:port] as the Host header carries it
  std::string Key() const { return (tls ? "https://" : "http://") + host_header; }
};

std::optional<Url> ParseUrl(std::string_view url) {
  Url u;
  if (StartsWith(url, "https://")) {
    u.tls = true;
    url.remove_prefix(8);
  } else if (StartsWith(url, "http://")) {
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  std::string_view host = authority, port;
  if (StartsWith(authority, "[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (StartsWith(rest, ":")) port = rest.substr(1);
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  u.host = std::string(host);
  u.port = port.empty() ? (u.tls ? "443" : "80") : std::string(port);
  u.host_header = std::string(authority);
  return u;
}

bool IsIpLiteral(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

// When an exchange must be over (none: never).
class Deadline {
 public:
  Deadline() = default;
  explicit Deadline(std::chrono::milliseconds in) {
    if (in.count() > 0) at_ = SteadyClock::now() + in;
  }
  Deadline Sooner(const Deadline& other) const {
    if (!at_) return other;
    if (!other.at_) return *this;
    return *at_ < *other.at_ ? *this : other;
  }
  // Milliseconds to wait in poll(): -1 without a deadline.
  int PollMs() const {
    if (!at_) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*at_ - SteadyClock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
  }
  bool Passed() const { return at_ && SteadyClock::now() >= *at_; }

 private:
  std::optional<SteadyClock::time_point> at_;
};

// What an I/O step came to.
enum class Io { kOk, kTimeout, kCancelled, kClosed, kError };

// Waits until `fd` is ready for `events`. A readable `wake_fd` (a stop
// request) cancels the wait.
Io WaitFor(int fd, short events, const Deadline& deadline, int wake_fd) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    int n = poll(fds, wake_fd >= 0 ? 2 : 1, deadline.PollMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Io::kError;
    }
    if (wake_fd >= 0 && (fds[1].revents & POLLIN)) return Io::kCancelled;
    if (n == 0) return Io::kTimeout;
    return Io::kOk;  // ready, or an error the next read/write reports
  }
}

// One TCP (and maybe TLS) connection to a server.
struct Connection {
  int fd = -1;
  SSL* ssl = nullptr;
  std::string key;    // Url::Key of the server
  bool used = false;  // has served an exchange (a kept-alive connection)

  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }

  // Writes all of `data`.
  Io Write(std::string_view data, const Deadline& deadline, int wake_fd, std::string* error) {
    while (!data.empty()) {
      size_t n = 0;
      short want = POLLOUT;
      if (ssl != nullptr) {
        ERR_clear_error();
        // OpenSSL writes with write(2): a peer that has gone would raise SIGPIPE.
        ScopedNoSigpipe no_sigpipe;
        int rc = SSL_write_ex(ssl, data.data(), data.size(), &n);
        if (rc <= 0) {
          int e = SSL_get_error(ssl, rc);
          if (e == SSL_ERROR_WANT_READ) {
            want = POLLIN;
          } else if (e != SSL_ERROR_WANT_WRITE) {
            *error = "sending the request: " + OpenSslError();
            return Io::kError;
          }
          n = 0;
        }
      } else {
        ssize_t rc = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (rc < 0) {
          if (errno == EINTR) continue;
          if (errno != EAGAIN) {
            *error = "sending the request: " + Errno(errno);
            return Io::kError;
          }
        } else {
          n = static_cast<size_t>(rc);
        }
      }
      data.remove_prefix(n);
      if (n == 0) {
        if (Io w = WaitFor(fd, want, deadline, wake_fd); w != Io::kOk) return w;
      }
    }
    return Io::kOk;
  }

  // Reads what is there (at least one byte) into `out`.
  Io Read(std::string& out, const Deadline& deadline, int wake_fd, std::string* error) {
    char buf[kReadChunk];
    for (;;) {
      short want = POLLIN;
      if (ssl != nullptr) {
        ERR_clear_error();
        size_t n = 0;
        ScopedNoSigpipe no_sigpipe;  // a read may write (a TLS 1.3 key update)
        int rc = SSL_read_ex(ssl, buf, sizeof buf, &n);
        if (rc > 0) {
          out.append(buf, n);
          return Io::kOk;
        }
        int e = SSL_get_error(ssl, rc);
        if (e == SSL_ERROR_ZERO_RETURN) return Io::kClosed;
        if (e == SSL_ERROR_WANT_WRITE) {
          want = POLLOUT;
        } else if (e != SSL_ERROR_WANT_READ) {
          if (e == SSL_ERROR_SYSCALL && errno == 0) return Io::kClosed;
          *error = "reading the response: " +
                   (e == SSL_ERROR_SYSCALL ? Errno(errno) : OpenSslError());
          return Io::kError;
        }
      } else {
        ssize_t rc = recv(fd, buf, sizeof buf, 0);
        if (rc > 0) {
          out.append(buf, static_cast<size_t>(rc));
          return Io::kOk;
        }
        if (rc == 0) return Io::kClosed;
        if (errno == EINTR) continue;
        if (errno != EAGAIN) {
          *error = "reading the response: " + Errno(errno);
          return Io::kError;
        }
      }
      if (Io w = WaitFor(fd, want, deadline, wake_fd); w != Io::kOk) return w;
    }
  }

  // A kept-alive connection the server has closed (or sent something
  // unasked on) reads as ready: it must not carry a request.
  bool LooksAlive() const {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 0 && (ssl == nullptr || SSL_pending(ssl) == 0);
  }
};

// Where a response body goes: decoded (gzip) and then to the caller's
// streaming callback or into the response.
class BodySink {
 public:
  BodySink(HttpResponse& resp, const std::function<bool(std::string_view)>* on_data)
      : resp_(resp), on_data_(on_data) {}
  ~BodySink() {
    if (gzip_) inflateEnd(&z_);
  }
  BodySink(const BodySink&) = delete;
  BodySink& operator=(const BodySink&) = delete;

  bool StartGzip() {
    z_ = z_stream{};
    gzip_ = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK;
    return gzip_;
  }

  // False when the exchange must end: the caller said so, the body is too
  // large, or the compressed data is corrupt (error() says which).
  bool Put(std::string_view data) {
    if (!gzip_) return Deliver(data);
    if (gzip_done_) return true;  // anything after the gzip stream's end is ignored
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z_.avail_in = static_cast<uInt>(data.size());
    char out[kReadChunk];
    do {  // until inflate leaves room in `out`: then all it can give is given
      z_.next_out = reinterpret_cast<Bytef*>(out);
      z_.avail_out = sizeof out;
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        error_ = TransportError::kOther;
        message_ = "the gzip-encoded response body is corrupt";
        return false;
      }
      if (!Deliver(std::string_view(out, sizeof out - z_.avail_out))) return false;
      if (rc == Z_STREAM_END) {
        gzip_done_ = true;
        break;
      }
    } while (z_.avail_out == 0);
    return true;
  }

  TransportError error() const { return error_; }
  const std::string& message() const { return message_; }

 private:
  bool Deliver(std::string_view data) {
    if (data.empty()) return true;
    if (on_data_ != nullptr) {
      if (!(*on_data_)(data)) {
        error_ = TransportError::kStoppedByCaller;
        return false;
      }
      return true;
    }
    if (resp_.body.size() + data.size() > kMaxBodyBytes) {
      error_ = TransportError::kOther;
      message_ = "the response body is larger than 1 GiB";
      return false;
    }
    resp_.body.append(data);
    return true;
  }

  HttpResponse& resp_;
  const std::function<bool(std::string_view)>* on_data_;
  bool gzip_ = false;
  bool gzip_done_ = false;
  z_stream z_{};
  TransportError error_ = TransportError::kNone;
  std::string message_;
};

// The parts of a response head the transport acts on.
struct Head {
  int status = 0;
  bool http10 = false;
  bool chunked = false;
  std::optional<uint64_t> content_length;
  bool gzip = false;
  bool close = false;
  std::optional<int> retry_after;
};

std::optional<Head> ParseHead(std::string_view text) {
  Head h;
  size_t eol = text.find("\r\n");
  std::string_view status_line = text.substr(0, eol);
  // "HTTP/1.1 200 OK"
  if (!StartsWith(status_line, "HTTP/1.") || status_line.size() < 12) return std::nullopt;
  h.http10 = status_line[7] == '0';
  auto code = ParseUint(status_line.substr(9, 3));
  if (!code || *code < 100 || *code > 999) return std::nullopt;
  h.status = static_cast<int>(*code);
  h.close = h.http10;
  while (eol != std::string_view::npos) {
    text.remove_prefix(eol + 2);
    eol = text.find("\r\n");
    std::string_view line = text.substr(0, eol);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name = ToLower(Trim(line.substr(0, colon)));
    std::string_view value = Trim(line.substr(colon + 1));
    if (name == "content-length") {
      h.content_length = ParseUint(value);
      if (!h.content_length) return std::nullopt;
    } else if (name == "transfer-encoding") {
      h.chunked = ToLower(value).find("chunked") != std::string::npos;
    } else if (name == "content-encoding") {
      h.gzip = ToLower(value) == "gzip";
    } else if (name == "connection") {
      std::string v = ToLower(value);
      if (v.find("close") != std::string::npos) h.close = true;
      if (v.find("keep-alive") != std::string::npos) h.close = false;
    } else if (name == "retry-after") {
      // Seconds only: the API server never sends the HTTP-date form.
      if (auto secs = ParseUint(value); secs && *secs < 86400) {
        h.retry_after = static_cast<int>(*secs);
      }
    }
  }
  return h;
}

// Reads one response from a connection: the head, then the body into a sink.
class ResponseReader {
 public:
  ResponseReader(Connection& c, const Deadline& deadline, int wake_fd)
      : c_(c), deadline_(deadline), wake_fd_(wake_fd) {}

  bool got_bytes() const { return got_bytes_; }
  const std::string& error() const { return error_; }

  // The head of the final response (1xx answers are skipped).
  Io ReadHead(Head* head) {
    for (;;) {
      size_t end;
      while ((end = buf_.find("\r\n\r\n", pos_)) == std::string::npos) {
        if (buf_.size() - pos_ > kMaxHeadBytes) {
          error_ = "the response head is larger than 1 MiB";
          return Io::kError;
        }
        if (Io io = Fill(); io != Io::kOk) return io;
      }
      auto h = ParseHead(std::string_view(buf_).substr(pos_, end + 2 - pos_));
      pos_ = end + 4;
      if (!h) {
        error_ = "the server's answer is not HTTP/1.1";
        return Io::kError;
      }
      if (h->status >= 200 || h->status == 101) {
        *head = *h;
        return Io::kOk;
      }
    }
  }

  // The body as the head describes it. `*clean_end`: the body ended where the
  // head said, so the connection can carry another request.
  Io ReadBody(const Head& head, bool no_body, BodySink& sink, bool* clean_end) {
    *clean_end = false;
    if (no_body) {
      *clean_end = true;
      return Io::kOk;
    }
    if (head.chunked) {
      for (;;) {
        std::string line;
        if (Io io = ReadLine(&line); io != Io::kOk) return io;
        size_t semi = line.find(';');
        auto size = ParseHex(Trim(std::string_view(line).substr(0, semi)));
        if (!size) {
          error_ = "the server's chunked body is malformed";
          return Io::kError;
        }
        if (*size == 0) break;
        if (Io io = Copy(*size, sink); io != Io::kOk) return io;
        if (Io io = ReadLine(&line); io != Io::kOk) return io;
      }
      for (;;) {  // trailers, up to the empty line
        std::string line;
        if (Io io = ReadLine(&line); io != Io::kOk) return io;
        if (line.empty()) break;
      }
      *clean_end = pos_ == buf_.size();
      return Io::kOk;
    }
    if (head.content_length) {
      if (Io io = Copy(*head.content_length, sink); io != Io::kOk) return io;
      *clean_end = pos_ == buf_.size();
      return Io::kOk;
    }
    // Neither: the body runs until the server closes the connection.
    for (;;) {
      if (pos_ < buf_.size()) {
        if (!sink.Put(std::string_view(buf_).substr(pos_))) return Io::kCancelled;
        buf_.clear();
        pos_ = 0;
      }
      Io io = Fill();
      if (io == Io::kClosed) return Io::kOk;
      if (io != Io::kOk) return io;
    }
  }

 private:
  Io Fill() {
    if (pos_ > 0 && pos_ == buf_.size()) {
      buf_.clear();
      pos_ = 0;
    }
    Io io = c_.Read(buf_, deadline_, wake_fd_, &error_);
    if (io == Io::kOk) got_bytes_ = true;
    return io;
  }

  Io ReadLine(std::string* line) {
    size_t eol;
    while ((eol = buf_.find("\r\n", pos_)) == std::string::npos) {
      if (buf_.size() - pos_ > 4096) {
        error_ = "the server's chunked body is malformed";
        return Io::kError;
      }
      if (Io io = Fill(); io != Io::kOk) return io == Io::kClosed ? Truncated() : io;
    }
    line->assign(buf_, pos_, eol - pos_);
    pos_ = eol + 2;
    return Io::kOk;
  }

  // Hands `n` body bytes to the sink as they arrive. kCancelled here means
  // the sink refused them.
  Io Copy(uint64_t n, BodySink& sink) {
    while (n > 0) {
      if (pos_ == buf_.size()) {
        if (Io io = Fill(); io != Io::kOk) return io == Io::kClosed ? Truncated() : io;
      }
      size_t take = static_cast<size_t>(std::min<uint64_t>(n, buf_.size() - pos_));
      if (!sink.Put(std::string_view(buf_).substr(pos_, take))) return Io::kCancelled;
      pos_ += take;
      n -= take;
    }
    return Io::kOk;
  }

  Io Truncated() {
    error_ = "the server closed the connection before the end of the response";
    return Io::kError;
  }

  static std::optional<uint64_t> ParseHex(std::string_view s) {
    if (s.empty() || s.size() > 15) return std::nullopt;
    uint64_t v = 0;
    for (char ch : s) {
      int d = ch >= '0' && ch <= '9'   ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                       : -1;
      if (d < 0) return std::nullopt;
      v = v * 16 + static_cast<uint64_t>(d);
    }
    return v;
  }

  Connection& c_;
  const Deadline& deadline_;
  int wake_fd_;
  std::string buf_;
  size_t pos_ = 0;
  bool got_bytes_ = false;
  std::string error_;
};

// Reads PEM certificates from memory.
std::vector<X509*> ReadCertificates(const std::string& pem) {
  std::vector<X509*> certs;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return certs;
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) certs.push_back(x);
  BIO_free(bio);
  ERR_clear_error();  // the end of the input reads as an error
  return certs;
}

}  // namespace

struct HttpTransport::State {
  TransportOptions options;
  // Set up by the first https:// connection (Connect): a client of an
  // http:// server, or one trusting the system's authorities that never
  // connects, does not load them (1 MB for Debian's bundle).
  std::once_flag tls_once;
  SSL_CTX* tls = nullptr;
  // Set when the trust material or the client certificate cannot be used:
  // every TLS request fails with it (the error belongs to the request, as the
  // caller reports it with the request).
  TransportError tls_setup_error = TransportError::kNone;
  std::string tls_setup_message;

  Mutex pool_mu;
  std::vector<std::unique_ptr<Connection>> idle GPUOP_GUARDED_BY(pool_mu);

  ~State() {
    idle.clear();
    if (tls != nullptr) SSL_CTX_free(tls);
  }

  void SetUpTls() {
    tls = SSL_CTX_new(TLS_client_method());
    if (tls == nullptr) {
      tls_setup_error = TransportError::kOther;
      tls_setup_message = "cannot create a TLS context: " + OpenSslError();
      return;
    }
    SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION);
    // Servers close without close_notify; that is the end of the stream.
    SSL_CTX_set_options(tls, SSL_OP_IGNORE_UNEXPECTED_EOF);
    static const unsigned char kAlpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(tls, kAlpn, sizeof kAlpn - 1);
    SSL_CTX_set_verify(tls, options.insecure_skip_tls_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                       nullptr);
    if (!options.ca_pem.empty()) {
      std::vector<X509*> cas = ReadCertificates(options.ca_pem);
      X509_STORE* store = SSL_CTX_get_cert_store(tls);
      for (X509* ca : cas) {
        X509_STORE_add_cert(store, ca);
        X509_free(ca);
      }
      if (cas.empty() && !options.insecure_skip_tls_verify) {
        tls_setup_error = TransportError::kTlsVerify;
        tls_setup_message = "the certificate authority data holds no PEM certificate";
      }
    } else if (!options.insecure_skip_tls_verify) {
      SSL_CTX_set_default_verify_paths(tls);
    }
    if (!options.client_cert_pem.empty()) SetUpClientCertificate();
  }

  void SetUpClientCertificate() {
    std::vector<X509*> chain = ReadCertificates(options.client_cert_pem);
    BIO* bio = BIO_new_mem_buf(options.client_key_pem.data(),
                               static_cast<int>(options.client_key_pem.size()));
    EVP_PKEY* key = bio ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
    if (bio != nullptr) BIO_free(bio);
    std::string problem;
    if (chain.empty()) {
      problem = "the client certificate is not a PEM certificate";
    } else if (key == nullptr) {
      problem = "the client key is not a PEM private key: " + OpenSslError();
    } else if (SSL_CTX_use_certificate(tls, chain[0]) != 1 ||
               SSL_CTX_use_PrivateKey(tls, key) != 1 || SSL_CTX_check_private_key(tls) != 1) {
      problem = "unable to use the client certificate and key: " + OpenSslError();
    } else {
      for (size_t i = 1; i < chain.size(); ++i) SSL_CTX_add1_chain_cert(tls, chain[i]);
    }
    for (X509* x : chain) X509_free(x);
    if (key != nullptr) EVP_PKEY_free(key);
    if (!problem.empty()) {
      tls_setup_error = TransportError::kClientCertificate;
      tls_setup_message = problem;
    }
  }

  std::unique_ptr<Connection> TakeIdle(const std::string& key) {
    MutexLock lock(pool_mu);
    for (size_t i = idle.size(); i-- > 0;) {
      if (idle[i]->key != key) continue;
      std::unique_ptr<Connection> c = std::move(idle[i]);
      idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(i));
      if (c->LooksAlive()) return c;
    }
    return nullptr;
  }

  void GiveBack(std::unique_ptr<Connection> c) {
    c->used = true;
    MutexLock lock(pool_mu);
    if (idle.size() >= options.max_idle_connections) idle.erase(idle.begin());
    idle.push_back(std::move(c));
  }

  // A new connection to the server, TLS handshake done.
  std::unique_ptr<Connection> Connect(const Url& url, const Deadline& deadline, int wake_fd,
                                      HttpResponse& resp) {
    auto fail = [&resp](TransportError e, std::string message) {
      resp.error = e;
      resp.error_message = std::move(message);
      return nullptr;
    };
    if (url.tls) std::call_once(tls_once, [this] { SetUpTls(); });
    if (url.tls && tls_setup_error != TransportError::kNone) {
      return fail(tls_setup_error, tls_setup_message);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addrs = nullptr;
    if (int rc = getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &addrs); rc != 0) {
      return fail(TransportError::kConnect,
                  "cannot resolve host " + url.host + ": " + gai_strerror(rc));
    }
    auto c = std::make_unique<Connection>();
    c->key = url.Key();
    std::string last = "no address";
    for (addrinfo* a = addrs; a != nullptr && c->fd < 0; a = a->ai_next) {
      int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        last = Errno(errno);
        continue;
      }
      int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        Io io = WaitFor(fd, POLLOUT, deadline, wake_fd);
        if (io != Io::kOk) {
          close(fd);
          freeaddrinfo(addrs);
          if (io == Io::kCancelled) return fail(TransportError::kCancelled, "cancelled");
          return fail(TransportError::kConnect, "connecting to " + url.host_header + " timed out");
        }
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
      if (err != 0) {
        last = Errno(err);
        close(fd);
        continue;
      }
      c->fd = fd;
    }
    freeaddrinfo(addrs);
    if (c->fd < 0) {
      return fail(TransportError::kConnect, "cannot connect to " + url.host_header + ": " + last);
    }
    int one = 1, idle_s = 30, interval_s = 10;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // Keepalive probes find a dead peer of a long, quiet watch.
    setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(c->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
    setsockopt(c->fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
    if (url.tls && !Handshake(*c, url, deadline, wake_fd, resp)) return nullptr;
    return c;
  }

  bool Handshake(Connection& c, const Url& url, const Deadline& deadline, int wake_fd,
                 HttpResponse& resp) {
    ERR_clear_error();
    c.ssl = SSL_new(tls);
    if (c.ssl == nullptr || SSL_set_fd(c.ssl, c.fd) != 1) {
      resp.error = TransportError::kOther;
      resp.error_message = "cannot start TLS: " + OpenSslError();
      return false;
    }
    if (IsIpLiteral(url.host)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.ssl), url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(c.ssl, url.host.c_str());
      SSL_set1_host(c.ssl, url.host.c_str());
    }
    for (;;) {
      ScopedNoSigpipe no_sigpipe;
      int rc = SSL_connect(c.ssl);
      if (rc == 1) return true;
      int e = SSL_get_error(c.ssl, rc);
      short want = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
      if (want == 0) break;
      Io io = WaitFor(c.fd, want, deadline, wake_fd);
      if (io == Io::kOk) continue;
      resp.error = io == Io::kCancelled ? TransportError::kCancelled : TransportError::kConnect;
      resp.error_message = io == Io::kCancelled ? "cancelled" : "the TLS handshake timed out";
      return false;
    }
    if (long v = SSL_get_verify_result(c.ssl);  // NOLINT(runtime/int)
        !options.insecure_skip_tls_verify && v != X509_V_OK) {
      ERR_clear_error();
      resp.error = TransportError::kTlsVerify;
      resp.error_message = std::string("the server certificate is not trusted: ") +
                           X509_verify_cert_error_string(v);
      return false;
    }
    resp.error = TransportError::kTlsHandshake;
    resp.error_message = OpenSslError();
    return false;
  }

  std::string RequestHead(const Url& url, const HttpRequest& req, bool streaming) const {
    std::string head = req.method + " " + url.target + " HTTP/1.1\r\nHost: " + url.host_header +
                       "\r\nAccept: application/json\r\n";
    if (!options.user_agent.empty()) head += "User-Agent: " + options.user_agent + "\r\n";
    // Big lists come gzip-compressed when the server offers it (as client-go
    // asks); a watch stays uncompressed so each event arrives as it is sent.
    if (!streaming) head += "Accept-Encoding: gzip\r\n";
    if (!req.content_type.empty()) head += "Content-Type: " + req.content_type + "\r\n";
    if (!req.bearer_token.empty()) head += "Authorization: Bearer " + req.bearer_token + "\r\n";
    if (!req.body.empty() || (req.method != "GET" && req.method != "HEAD")) {
      head += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
    }
    head += "\r\n";
    return head;
  }

  // One exchange, on a kept-alive connection when there is one (and, when
  // that one turns out dead before answering, once more on a new one).
  HttpResponse Exchange(const HttpRequest& req,
                        const std::function<bool(std::string_view)>* on_data, int wake_fd) {
    HttpResponse resp;
    auto url = ParseUrl(req.url);
    if (!url) {
      resp.error = TransportError::kOther;
      resp.error_message = "not an http:// or https:// URL: " + req.url;
      return resp;
    }
    const bool streaming = on_data != nullptr;
    const Deadline deadline(req.timeout);
    const std::string head = RequestHead(*url, req, streaming);
    for (int attempt = 0;; ++attempt) {
      resp = HttpResponse{};
      std::unique_ptr<Connection> c = streaming ? nullptr : TakeIdle(url->Key());
      if (c == nullptr) {
        c = Connect(*url, deadline.Sooner(Deadline(req.connect_timeout)), wake_fd, resp);
        if (c == nullptr) {
          if (resp.error == TransportError::kConnect && deadline.Passed()) {
            resp.error = TransportError::kTimeout;
          }
          return resp;
        }
      }
      const bool reused = c->used;
      bool dead_keepalive = false;
      if (RunOn(*c, req, head, on_data, deadline, wake_fd, resp, &dead_keepalive)) {
        GiveBack(std::move(c));
      }
      // A server may close a kept-alive connection just as a request leaves;
      // it never saw that request, so sending it again is safe.
      if (reused && dead_keepalive && attempt == 0) continue;
      return resp;
    }
  }

  // Sends the request on `c` and reads the answer into `resp`. Returns true
  // when the connection may carry another request.
  bool RunOn(Connection& c, const HttpRequest& req, const std::string& head,
             const std::function<bool(std::string_view)>* on_data, const Deadline& deadline,
             int wake_fd, HttpResponse& resp, bool* dead_keepalive) {
    auto end = [&](Io io, const std::string& message) {
      switch (io) {
        case Io::kTimeout:
          resp.error = TransportError::kTimeout;
          resp.error_message = "no complete answer within " + std::to_string(req.timeout.count()) +
                               " ms";
          break;
        case Io::kCancelled:
          resp.error = TransportError::kCancelled;
          resp.error_message = "cancelled";
          break;
        default:
          resp.error = TransportError::kConnectionLost;
          resp.error_message = message.empty() ? "the server closed the connection" : message;
      }
      return false;
    };
    std::string error;
    resp.request_sent = true;
    Io io = c.Write(head, deadline, wake_fd, &error);
    if (io == Io::kOk && !req.body.empty()) io = c.Write(req.body, deadline, wake_fd, &error);
    ResponseReader reader(c, deadline, wake_fd);
    Head h;
    if (io == Io::kOk) io = reader.ReadHead(&h);
    if (io != Io::kOk) {
      *dead_keepalive = io != Io::kTimeout && io != Io::kCancelled && !reader.got_bytes();
      if (io == Io::kClosed && !reader.got_bytes()) {
        error = "the server closed the connection without answering";
      }
      return end(io, error.empty() ? reader.error() : error);
    }
    resp.status = h.status;
    resp.retry_after_seconds = h.retry_after;
    const bool success = h.status >= 200 && h.status < 300;
    // A streamed 2xx body goes to the caller; any other body is collected.
    BodySink sink(resp, success ? on_data : nullptr);
    if (h.gzip && !sink.StartGzip()) return end(Io::kError, "cannot start gzip decoding");
    const bool no_body = req.method == "HEAD" || h.status == 204 || h.status == 304;
    bool clean_end = false;
    io = reader.ReadBody(h, no_body, sink, &clean_end);
    if (io == Io::kCancelled && sink.error() != TransportError::kNone) {
      resp.error = sink.error();
      resp.error_message = sink.message();
      return false;
    }
    if (io != Io::kOk) return end(io, reader.error());
    return clean_end && !h.close && !on_data;
  }
};

HttpTransport::HttpTransport(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpTransport::~HttpTransport() = default;

Result<std::unique_ptr<HttpTransport>> HttpTransport::New(TransportOptions options) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  return std::unique_ptr<HttpTransport>(new HttpTransport(std::move(state)));
}

HttpResponse HttpTransport::Perform(const HttpRequest& request) {
  return state_->Exchange(request, nullptr, -1);
}

HttpResponse HttpTransport::Stream(const HttpRequest& request,
                                   const std::function<bool(std::string_view)>& on_data,
                                   std::stop_token stop) {
  // A stop request wakes the stream's waits at once through an eventfd.
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    HttpResponse resp;
    resp.error = TransportError::kOther;
    resp.error_message = "eventfd: " + Errno(errno);
    return resp;
  }
  HttpResponse resp;
  {
    std::stop_callback wake_up(stop, [wake] {
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = write(wake, &one, sizeof one);
    });
    resp = state_->Exchange(request, &on_data, wake);
  }
  close(wake);
  return resp;
}

}  // namespace gpuop::kube
