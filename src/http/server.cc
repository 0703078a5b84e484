#include "http/server.h"

#include <httplib.h>

#include <algorithm>
#include <thread>

#include "base/strings.h"

namespace gpuop::http {

Result<std::pair<std::string, int>> ParseListen(std::string_view listen, std::string_view flag) {
  const std::string where = std::string(flag) + " " + std::string(listen);
  std::string host;
  std::string port;
  if (!listen.empty() && listen[0] == '[') {
    size_t close = listen.find(']');
    if (close == std::string_view::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return InvalidArgument(where + " is not [IPv6]:PORT, e.g. [::1]:8080");
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgument(where + " is not HOST:PORT, e.g. :8080 or 127.0.0.1:0");
    }
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  if (host.empty()) host = "0.0.0.0";
  auto p = ParseUint(port);
  if (!p || *p > 65535) {
    return InvalidArgument(where + " is not HOST:PORT with a port 0-65535");
  }
  return std::make_pair(host, static_cast<int>(*p));
}

struct Server::Impl {
  httplib::Server http;
  std::string host;
  int port = 0;
  std::thread listener;
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Start(std::string_view listen, std::string_view flag,
                                              std::map<std::string, Handler> routes) {
  GPUOP_ASSIGN_OR_RETURN(auto hostport, ParseListen(listen, flag));
  auto impl = std::make_unique<Impl>();
  impl->host = hostport.first;
  // Endpoints are scraped by one Prometheus and probed by one kubelet: a few
  // threads are plenty, and each idle one costs a stack.
  impl->http.new_task_queue = [] { return new httplib::ThreadPool(4); };
  impl->http.set_tcp_nodelay(true);  // small answers: no 40 ms Nagle delay
  for (auto& [path, handler] : routes) {
    impl->http.Get(path, [h = handler](const httplib::Request&, httplib::Response& res) {
      Response r = h();
      res.status = r.status;
      if (!r.shared_body) {
        res.set_content(r.body, r.content_type);
        return;
      }
      // The shared page, then `body`, streamed from where they are.
      const size_t head = r.shared_body->size();
      const size_t total = head + r.body.size();  // before the lambda takes the body
      res.set_content_provider(
          total, r.content_type,
          [shared = std::move(r.shared_body), tail = std::move(r.body), head](
              size_t offset, size_t length, httplib::DataSink& sink) {
            while (length > 0) {
              const bool in_head = offset < head;
              const char* data = in_head ? shared->data() + offset : tail.data() + (offset - head);
              size_t n = std::min(length, in_head ? head - offset : tail.size() - (offset - head));
              if (!sink.write(data, n)) return false;
              offset += n;
              length -= n;
            }
            return true;
          });
    });
  }
  if (hostport.second == 0) {
    impl->port = impl->http.bind_to_any_port(impl->host);
  } else {
    impl->port = impl->http.bind_to_port(impl->host, hostport.second) ? hostport.second : -1;
  }
  if (impl->port <= 0) {
    return Unavailable("cannot listen on " + std::string(listen) + " (" + std::string(flag) +
                       "): the address is in use or not local; pick another address");
  }
  Impl* raw = impl.get();
  impl->listener = std::thread([raw] { raw->http.listen_after_bind(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port; }

std::string Server::address() const {
  std::string host =
      impl_->host.find(':') != std::string::npos ? "[" + impl_->host + "]" : impl_->host;
  return host + ":" + std::to_string(impl_->port);
}

void Server::Stop() {
  if (!impl_) return;
  impl_->http.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

}  // namespace gpuop::http
