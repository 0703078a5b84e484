// EventRecorder (event_recorder.h): the bounded queue callers fill, the spam
// filter, and the sender thread that creates or patches Events.
#include "kube/event_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>

#include "base/log.h"

namespace gpuop::kube {
namespace {

using std::chrono::system_clock;

std::string Hostname() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "unknown";
  return host;
}

// Fields joined with a separator no Kubernetes name or reason contains.
std::string JoinKey(std::initializer_list<std::string_view> parts) {
  std::string key;
  for (std::string_view p : parts) {
    key.append(p);
    key.push_back('\x1f');
  }
  return key;
}

Json InvolvedObject(const ObjectReference& ref) {
  Json j = Json::object();
  auto put = [&](const char* field, const std::string& value) {
    if (!value.empty()) j[field] = value;
  };
  put("apiVersion", ref.api_version);
  put("kind", ref.kind);
  put("namespace", ref.namespace_);
  put("name", ref.name);
  put("uid", ref.uid);
  put("resourceVersion", ref.resource_version);
  return j;
}

std::string EventNamespace(const ObjectReference& ref) {
  return ref.namespace_.empty() ? "default" : ref.namespace_;
}

}  // namespace

std::string_view EventTypeName(EventType type) {
  return type == EventType::kWarning ? "Warning" : "Normal";
}

ObjectReference ReferenceTo(const Json& object, const Resource* resource) {
  ObjectReference ref;
  const auto field = [&](const char* key) -> std::string {
    auto it = object.is_object() ? object.find(key) : object.end();
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  ref.api_version = field("apiVersion");
  ref.kind = field("kind");
  if (resource != nullptr) {
    if (ref.api_version.empty()) ref.api_version = resource->ApiVersion();
    if (ref.kind.empty()) ref.kind = resource->kind;
  }
  ref.namespace_ = Namespace(object);
  ref.name = Name(object);
  ref.uid = Uid(object);
  ref.resource_version = ResourceVersion(object);
  return ref;
}

EventRecorder::EventRecorder(Client& client, EventRecorderOptions options)
    : client_(client), options_([&] {
        if (!options.clock) options.clock = &RealClock();
        if (options.queue_size == 0) options.queue_size = 1;
        return std::move(options);
      }()) {
  host_ = options_.host.empty() ? Hostname() : options_.host;
  instance_ = options_.instance.empty() ? host_ : options_.instance;
  sender_ = std::jthread([this](std::stop_token stop) { SenderLoop(stop); });
}

EventRecorder::~EventRecorder() {
  sender_.request_stop();
  if (sender_.joinable()) sender_.join();
}

void EventRecorder::Event(const Json& object, EventType type, std::string_view reason,
                          std::string_view message) {
  Event(ReferenceTo(object), type, reason, message);
}

void EventRecorder::Eventf(const Json& object, EventType type, std::string_view reason,
                           const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string message(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(message.data(), message.size() + 1, format, args);
  va_end(args);
  Event(object, type, reason, message);
}

void EventRecorder::Event(const ObjectReference& object, EventType type, std::string_view reason,
                          std::string_view message) {
  const system_clock::time_point now = options_.clock->Now();
  const std::string_view type_name = EventTypeName(type);
  std::string spam_key = JoinKey(
      {object.api_version, object.kind, object.namespace_, object.name, object.uid, reason});
  std::string key = spam_key + JoinKey({type_name, message});
  MutexLock lk(mu_);
  if (!AllowBySpamFilter(spam_key, now)) {
    ++stats_.dropped_spam;
    return;
  }
  if (auto it = pending_.find(key); it != pending_.end()) {
    // The same event is still waiting: one request will carry both.
    ++it->second.count;
    it->second.last = now;
    ++stats_.recorded;
    return;
  }
  if (pending_.size() >= options_.queue_size) {
    ++stats_.dropped_queue_full;
    return;
  }
  Pending p{object, std::string(type_name), std::string(reason), std::string(message), 1, now, now};
  pending_.emplace(key, std::move(p));
  order_.push_back(std::move(key));
  ++stats_.recorded;
  cv_.notify_all();
}

bool EventRecorder::AllowBySpamFilter(const std::string& key, system_clock::time_point now) {
  if (options_.spam_burst <= 0) return true;  // filter off
  const double burst = options_.spam_burst;
  auto [it, inserted] = buckets_.try_emplace(key, Bucket{burst, now});
  Bucket& b = it->second;
  if (!inserted && now > b.refilled) {
    const double interval = std::chrono::duration<double>(options_.spam_refill_interval).count();
    const double elapsed = std::chrono::duration<double>(now - b.refilled).count();
    b.tokens = interval <= 0 ? burst : std::min(burst, b.tokens + elapsed / interval);
    b.refilled = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  if (buckets_.size() > options_.cache_size) {
    // Forget buckets that would be full by now: they hold no memory worth keeping.
    const auto refill_all = options_.spam_refill_interval * options_.spam_burst;
    std::erase_if(buckets_, [&](const auto& entry) {
      return &entry.second != &b && now - entry.second.refilled >= refill_all;
    });
  }
  return true;
}

bool EventRecorder::Flush(std::chrono::milliseconds timeout) {
  MutexLock lk(mu_);
  return cv_.wait_for(lk.native(), timeout,
                      [this]() GPUOP_REQUIRES(mu_) { return order_.empty() && !sending_; });
}

EventRecorder::Stats EventRecorder::stats() const {
  MutexLock lk(mu_);
  return stats_;
}

void EventRecorder::SenderLoop(std::stop_token stop) {
  MutexLock lk(mu_);
  while (true) {
    if (!cv_.wait(lk.native(), stop, [this]() GPUOP_REQUIRES(mu_) { return !order_.empty(); }))
      break;  // stopping
    std::string key = std::move(order_.front());
    order_.pop_front();
    auto node = pending_.extract(key);
    sending_ = true;
    lk.Unlock();
    Send(key, node.mapped());
    lk.Lock();
    sending_ = false;
    cv_.notify_all();
  }
}

void EventRecorder::Send(const std::string& key, const Pending& pending) {
  auto it = sent_.find(key);
  if (it != sent_.end() && pending.first - it->second.last <= options_.aggregation_window) {
    Sent& sent = it->second;
    const int64_t count = sent.count + pending.count;
    Json patch{{"count", count}, {"lastTimestamp", Rfc3339(pending.last)}};
    Result<Json> patched =
        client_.Patch(resources::kEvents, sent.namespace_, sent.name, PatchType::kMerge, patch);
    if (patched.ok()) {
      sent.count = count;
      sent.last = pending.last;
      MutexLock lk(mu_);
      ++stats_.patched;
      return;
    }
    if (!IsNotFound(patched.status())) {
      LogWarn("cannot update event", {{"event", MakeKey(sent.namespace_, sent.name)},
                                      {"reason", pending.reason},
                                      {"error", patched.status()}});
      MutexLock lk(mu_);
      ++stats_.failed;
      return;
    }
    // The Event expired or was deleted: write it anew with the whole count.
    Sent fresh;
    if (CreateEvent(pending, count, sent.first, &fresh)) sent = fresh;
    return;
  }
  Sent fresh;
  if (!CreateEvent(pending, pending.count, pending.first, &fresh)) return;
  sent_[key] = std::move(fresh);
  if (sent_.size() > options_.cache_size) {
    const system_clock::time_point now = options_.clock->Now();
    std::erase_if(sent_, [&](const auto& entry) {
      return now - entry.second.last > options_.aggregation_window;
    });
    while (sent_.size() > options_.cache_size) {
      auto oldest = std::min_element(sent_.begin(), sent_.end(), [](const auto& a, const auto& b) {
        return a.second.last < b.second.last;
      });
      sent_.erase(oldest);
    }
  }
}

bool EventRecorder::CreateEvent(const Pending& pending, int64_t count,
                                system_clock::time_point first, Sent* sent) {
  const std::string ns = EventNamespace(pending.object);
  Json event{{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"namespace", ns}}},
             {"involvedObject", InvolvedObject(pending.object)},
             {"type", pending.type},
             {"reason", pending.reason},
             {"message", pending.message},
             {"source", {{"component", options_.component}, {"host", host_}}},
             {"reportingComponent", options_.component},
             {"reportingInstance", instance_},
             {"count", count},
             {"firstTimestamp", Rfc3339(first)},
             {"lastTimestamp", Rfc3339(pending.last)}};
  Status error;
  // A name taken by another recorder (same object, same nanosecond) gets one more try.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string name = NewEventName(pending.object.name);
    event["metadata"]["name"] = name;
    Result<Json> created = client_.Create(resources::kEvents, ns, event);
    if (created.ok()) {
      *sent = Sent{ns, name, count, first, pending.last};
      MutexLock lk(mu_);
      ++stats_.created;
      return true;
    }
    error = created.status();
    if (!IsAlreadyExists(error)) break;
  }
  LogWarn("cannot record event",
          {{"object", MakeKey(pending.object.namespace_, pending.object.name)},
           {"reason", pending.reason},
           {"error", error}});
  MutexLock lk(mu_);
  ++stats_.failed;
  return false;
}

std::string EventRecorder::NewEventName(const std::string& object_name) {
  // client-go names Events "<object>.<unix nanoseconds in hex>"; keep names
  // from one recorder distinct even when its clock stands still.
  int64_t nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.clock->Now().time_since_epoch())
          .count();
  if (nanos <= last_name_nanos_) nanos = last_name_nanos_ + 1;
  last_name_nanos_ = nanos;
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".%llx", static_cast<unsigned long long>(nanos));
  return (object_name.empty() ? std::string("gpuop") : object_name) + suffix;
}

}  // namespace gpuop::kube
