// Fault injection for the API emulator: the failures a real API server shows
// under load or trouble, on demand, so clients' retry and re-list paths get
// tested (`--faults SPEC`, or PUT /gpuop-sim/faults at run time).
//
// A spec is rules separated by ';'. Each rule is comma-separated tokens; the
// first names the fault, the others narrow it:
//
//   error=CODE        answer with CODE (500, 429, 503, ...) and a Status body;
//                     429 and 503 carry Retry-After (retry-after=SECONDS, default 1)
//   latency=DURATION  wait before answering (250ms, 2s)
//   drop-watch[=N]    close a watch stream after N events (default 0: at once,
//                     after the headers), without a final chunk
//   gone              watch: an ERROR event with a 410 Status at once;
//                     list with a continue token: 410 Expired
//   pause             hold every API request until the rule is removed
//
//   verb=V[|V...]     get list watch create update patch delete deletecollection
//                     (default: all)
//   resource=R[|R...] plural, optionally with its group: pods, deployments.apps
//                     (default: all)
//   rate=F            fraction of matching requests hit, 0..1 (default 1)
//   count=N           fire at most N times, then the rule is spent (default: no limit)
//   after=N           let the first N matching requests through untouched, then
//                     fire (with verb=create|update|patch|delete this stops a
//                     client between its Nth and next write: a crash point)
//
// Example: "error=429,verb=list,resource=pods,rate=0.5,retry-after=2;latency=100ms,verb=get"
//
// Which requests a rate hits is drawn from a generator seeded at construction,
// so a run with the same seed and request order hits the same requests.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::simkube {

enum class FaultKind { kError, kLatency, kDropWatch, kGone, kPause };

struct FaultRule {
  FaultKind kind = FaultKind::kError;
  std::vector<std::string> verbs;      // empty: every verb
  std::vector<std::string> resources;  // empty: every resource
  int code = 500;
  int retry_after_s = 1;
  double rate = 1.0;
  std::chrono::milliseconds latency{0};
  int after_events = 0;
  int64_t remaining = -1;  // -1: unlimited
  int64_t pass_first = 0;  // matching requests still to let through (after=N)
  int64_t fired = 0;       // times the rule has fired
  std::string text;        // the rule as written, for GET /gpuop-sim/faults
};

// Parses a spec; an error names the bad rule and token.
Result<std::vector<FaultRule>> ParseFaultSpec(std::string_view spec);

// What the injector decided for one request.
struct FaultDecision {
  std::chrono::milliseconds latency{0};
  std::optional<int> error_code;
  int retry_after_s = 0;
  bool gone = false;
  std::optional<int> drop_watch_after;  // events before the stream is dropped
};

class FaultInjector {
 public:
  explicit FaultInjector(uint64_t seed = 1) : rng_(seed) {}

  // Replaces the active rules. A bad spec changes nothing.
  Status Set(std::string_view spec);
  void Clear();
  // The rules still active, as {"spec": "...", "rules": [...]}.
  nlohmann::json ToJson() const;

  // Decides the faults for one request. `resource` is the plural and `group`
  // its API group ("" for the core group).
  FaultDecision Decide(std::string_view verb, std::string_view resource, std::string_view group);

  // Blocks while a pause rule is active, until it is removed or Shutdown().
  void WaitWhilePaused();
  bool paused() const;
  // Wakes every waiter for good (server stop).
  void Shutdown();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<FaultRule> rules_;  // GUARDED_BY(mu_)
  std::mt19937_64 rng_;           // GUARDED_BY(mu_)
  bool shutdown_ = false;         // GUARDED_BY(mu_)
};

}  // namespace gpuop::simkube
