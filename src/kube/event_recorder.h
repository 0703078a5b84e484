// EventRecorder: core/v1 Events about objects ("kubectl describe" shows
// them), recorded without ever blocking the caller, aggregated like
// client-go's recorder so a repeating condition is one Event with a count.
//
//   recorder.Eventf(node, EventType::kWarning, "DriverFailed", "GPU %d lost", 3);
//
// What is written: an Event named "<object name>.<hex of the unix time in
// ns>" in the object's namespace ("default" for cluster-scoped objects such
// as Nodes, as client-go does), with involvedObject (apiVersion, kind, name,
// namespace, uid, resourceVersion), type, reason, message, source
// {component, host}, reportingComponent/reportingInstance, count and
// first/lastTimestamp.
//
// Aggregation: an Event with the same object, type, reason and message as one
// recorded within `aggregation_window` (counted from the last occurrence)
// becomes a merge PATCH of count and lastTimestamp on the existing Event
// instead of a new Event. Identical events still waiting in the queue are
// folded into one entry with a count, so a storm costs one request.
//
// Spam filter (simpler than client-go's, same numbers): per object and reason
// a token bucket of `spam_burst` tokens, refilled one per
// `spam_refill_interval`; an event that finds the bucket empty is dropped and
// counted. Defaults: 25 events, then one per 5 minutes.
//
// Delivery: Event() puts the event on a bounded queue (at most `queue_size`
// distinct pending events) and returns; one background thread sends them.
// When the queue is full the event is dropped and counted. A failed request
// is logged and counted, not retried beyond what the Client does.
//
// Objects from a List lack apiVersion and kind; pass an ObjectReference built
// with the Resource (ReferenceTo) for those.
//
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "base/clock.h"
#include "base/mutex.h"
#include "kube/client.h"
#include "kube/object.h"
#include "kube/resource.h"

namespace gpuop::kube {

enum class EventType { kNormal, kWarning };
std::string_view EventTypeName(EventType type);  // "Normal", "Warning"

// What an Event's involvedObject holds.
struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
};
// From the object's own apiVersion and kind, or, where it lacks them (list
// items), from `resource`.
ObjectReference ReferenceTo(const Json& object, const Resource* resource = nullptr);

struct EventRecorderOptions {
  std::string component = "gpuop";  // source.component, reportingComponent
  std::string host;                 // source.host; "": this machine's hostname
  std::string instance;             // reportingInstance; "": the host
  size_t queue_size = 1000;         // distinct pending events
  std::chrono::seconds aggregation_window{600};
  int spam_burst = 25;
  std::chrono::seconds spam_refill_interval{300};
  size_t cache_size = 4096;  // events remembered for aggregation and spam buckets
  // The wall clock (its Now()); tests pass a FakeClock. Null: RealClock().
  const Clock* clock = nullptr;
};

class EventRecorder {
 public:
  // Starts the sender thread. `client` must outlive the recorder.
  EventRecorder(Client& client, EventRecorderOptions options);
  // Stops the sender: the request in flight finishes, events still queued are
  // dropped (call Flush first to send them).
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void Event(const Json& object, EventType type, std::string_view reason, std::string_view message);
  void Event(const ObjectReference& object, EventType type, std::string_view reason,
             std::string_view message);
  // printf-style message.
  void Eventf(const Json& object, EventType type, std::string_view reason, const char* format, ...)
      __attribute__((format(printf, 5, 6)));

  // Waits until every event recorded so far has been sent (or failed).
  // Returns false if that did not happen within `timeout`.
  bool Flush(std::chrono::milliseconds timeout);

  struct Stats {
    uint64_t recorded = 0;  // accepted onto the queue (folded ones too)
    uint64_t created = 0;   // Events created
    uint64_t patched = 0;   // aggregated into an existing Event
    uint64_t dropped_queue_full = 0;
    uint64_t dropped_spam = 0;
    uint64_t failed = 0;  // requests that failed
  };
  Stats stats() const;

 private:
  struct Pending {
    ObjectReference object;
    std::string type;
    std::string reason;
    std::string message;
    int64_t count = 0;
    std::chrono::system_clock::time_point first;
    std::chrono::system_clock::time_point last;
  };
  struct Sent {  // an Event that exists on the server
    std::string namespace_;
    std::string name;
    int64_t count = 0;
    std::chrono::system_clock::time_point first;
    std::chrono::system_clock::time_point last;
  };
  struct Bucket {
    double tokens = 0;
    std::chrono::system_clock::time_point refilled;
  };

  bool AllowBySpamFilter(const std::string& key, std::chrono::system_clock::time_point now)
      GPUOP_REQUIRES(mu_);
  void SenderLoop(std::stop_token stop);
  void Send(const std::string& key, const Pending& pending);
  bool CreateEvent(const Pending& pending, int64_t count,
                   std::chrono::system_clock::time_point first, Sent* sent);
  std::string NewEventName(const std::string& object_name);

  Client& client_;
  const EventRecorderOptions options_;
  std::string host_;
  std::string instance_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::string> order_ GPUOP_GUARDED_BY(mu_);  // keys, oldest first
  std::unordered_map<std::string, Pending> pending_ GPUOP_GUARDED_BY(mu_);
  std::unordered_map<std::string, Bucket> buckets_ GPUOP_GUARDED_BY(mu_);
  bool sending_ GPUOP_GUARDED_BY(mu_) = false;
  Stats stats_ GPUOP_GUARDED_BY(mu_);

  // Sender thread only.
  std::unordered_map<std::string, Sent> sent_;
  int64_t last_name_nanos_ = 0;

  std::jthread sender_;  // last: starts after everything above exists
};

}  // namespace gpuop::kube
