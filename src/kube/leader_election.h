// Leader election on a coordination.k8s.io/v1 Lease, with client-go's
// leaderelection semantics, so one replica of the operator acts at a time.
//
// The protocol: every candidate reads the Lease every retry period. The
// holder renews it (renewTime); a candidate takes it over only when the
// holder has not changed it for leaseDurationSeconds, measured from the time
// the candidate itself last SAW it change, on its own monotonic clock (never
// from renewTime, which another host's clock wrote). Writes are conditional
// on the resourceVersion that was read, so two candidates racing for an
// expired lease cannot both win: the loser gets a conflict.
//
// Safety: a leader that has not renewed for renew_deadline (< lease_duration)
// stops leading: it stops the lead context and calls OnStoppedLeading, on a
// timer of its own, even while a renew request is still hanging. Others
// cannot take over before lease_duration has passed since that renewal, so
// two leaders never act at once (given clocks that run at the same rate).
// On a clean shutdown with release_on_cancel the leader stops its work and
// then clears holderIdentity (leaseDurationSeconds=1) so a candidate takes
// over at its next retry instead of waiting for the lease to expire.
//
// Split in two: DecideElection, a pure function of (Lease or its absence,
// what was observed before, now) that never reads the clock; and
// LeaderElector, the thin loop that reads and writes the Lease through a
// Client and runs the callbacks.
//
// Thread-safety: DecideElection is a pure function. LeaderElector: Run() is
// called once, from one thread, and blocks; IsLeader(), GetLeader() and
// identity() may be called from any thread at any time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/object.h"

namespace gpuop::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  // Who we are in holderIdentity; unique per process. "": DefaultIdentity().
  std::string identity;
  // How long others wait, from the last change they saw, before taking over.
  // Written to the Lease rounded up to whole seconds.
  std::chrono::milliseconds lease_duration{15000};
  // How long the leader keeps leading without a successful renewal.
  std::chrono::milliseconds renew_deadline{10000};
  // How often every candidate reads (and the leader renews) the Lease.
  std::chrono::milliseconds retry_period{2000};
  // On a clean stop, give the Lease up so another replica takes over at once.
  // false leaves it to expire, as a crash would (tests use that).
  bool release_on_cancel = true;
};

// Errors name the bad field: empty names, renew_deadline >= lease_duration,
// retry_period not shorter than renew_deadline.
Status ValidateLeaderElectionConfig(const LeaderElectionConfig& config);

// "<hostname>_<16 random hex digits>", like client-go's hostname + "_" + uuid.
std::string DefaultIdentity();

// lease_duration in whole seconds, rounded up (at least 1): a candidate
// waits at least as long as the holder expects.
int64_t LeaseDurationSeconds(std::chrono::milliseconds lease_duration);

// --- The pure core -----------------------------------------------------------

// Now, as the loop read it: wall time for the timestamps it writes, and
// monotonic time for measuring expiry.
struct ElectionTime {
  std::chrono::system_clock::time_point wall;
  std::chrono::steady_clock::time_point mono;
};

// What a candidate remembers between rounds: the Lease spec it last saw and
// when (on its own clock) it saw that spec change.
struct ObservedLease {
  std::optional<LeaseSpec> spec;
  std::chrono::steady_clock::time_point observed_at{};
};

enum class ElectionAction {
  kCreate,   // no Lease: create it, holding it
  kAcquire,  // the Lease is free or expired: take it over (Update)
  kRenew,    // we hold it: renew it (Update)
  kWait,     // someone else holds a live Lease
};
std::string_view ElectionActionName(ElectionAction action);

struct ElectionDecision {
  ElectionAction action = ElectionAction::kWait;
  LeaseSpec spec;          // what to write, for every action but kWait
  std::string holder;      // the holder the Lease names now ("" when none)
  ObservedLease observed;  // the memory to keep for the next round
  // kWait: when the holder's lease expires as this candidate sees it.
  std::chrono::steady_clock::time_point expires_at{};
};

// One round of client-go's tryAcquireOrRenew. `lease` is the Lease object
// as read (nullopt: it does not exist). REQUIRES: config.identity non-empty.
ElectionDecision DecideElection(const LeaderElectionConfig& config,
                                const std::optional<Json>& lease, const ObservedLease& observed,
                                const ElectionTime& now);

// The spec a leader writes to give the Lease up: no holder, a one-second
// duration, the transition count kept.
LeaseSpec ReleasedLeaseSpec(const LeaseSpec& held, std::chrono::system_clock::time_point now);

// --- The loop ---------------------------------------------------------------

struct LeaderCallbacks {
  // Runs on a thread of its own when this candidate becomes leader; it should
  // do the leader's work until `stop` is requested (leadership lost, or Run
  // stopping) and then return promptly: Run waits for it before it releases
  // the Lease or contends again.
  std::function<void(std::stop_token stop)> on_started_leading;
  // Called once at the end of every term, after the lead `stop` has been
  // requested; from Run's thread or the elector's renew-deadline timer.
  std::function<void()> on_stopped_leading;
  // Called from Run's thread when the observed holder changes (ourselves too).
  std::function<void(const std::string& identity)> on_new_leader;
};

class LeaderElector {
 public:
  // Validates the config (filling in a default identity). Makes no request.
  // `client` must outlive the elector.
  static Result<std::unique_ptr<LeaderElector>> New(Client& client, LeaderElectionConfig config,
                                                    LeaderCallbacks callbacks);
  // REQUIRES: Run has returned (or was never called).
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Contends, leads, and after losing the Lease contends again, until `stop`
  // is requested. Then ends a term in progress (stops the lead work, waits
  // for it, calls OnStoppedLeading) and, with release_on_cancel, releases
  // the Lease. Call once.
  void Run(std::stop_token stop);

  bool IsLeader() const;
  // The holder of the Lease as last observed ("" when none or not yet read).
  std::string GetLeader() const;
  const std::string& identity() const { return config_.identity; }

 private:
  LeaderElector(Client& client, LeaderElectionConfig config, LeaderCallbacks callbacks);

  // One read-decide-write round. Returns true when this round holds the Lease.
  bool TryAcquireOrRenew();
  void BecomeLeader(std::chrono::steady_clock::time_point renewed_at);
  void StepDown(std::string_view why);
  void Release();
  void RenewDeadlineTimer(std::stop_token stop);
  void ReportHolder(const std::string& holder);
  void ReportApiError(std::string_view action, const std::string& lease_key, const Status& error);
  std::chrono::milliseconds NextWait(bool leading);

  Client& client_;
  const LeaderElectionConfig config_;
  const LeaderCallbacks callbacks_;

  // Run's thread only.
  ObservedLease observed_;
  std::optional<Json> last_written_;  // the Lease as our last successful write left it
  std::string reported_holder_;
  int64_t api_failures_ = 0;  // consecutive failed reads and writes, for logs
  std::jthread lead_thread_;
  uint64_t jitter_state_;

  // Serialises the start and end of terms, so callbacks of one term never
  // overlap those of the next.
  Mutex transition_mu_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  bool leading_ GPUOP_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_renew_ GPUOP_GUARDED_BY(mu_){};
  std::stop_source lead_stop_ GPUOP_GUARDED_BY(mu_);
  std::string holder_ GPUOP_GUARDED_BY(mu_);
};

}  // namespace gpuop::kube
