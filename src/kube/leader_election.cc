// Leader election on a Lease (leader_election.h): the pure decision of one
// round, and the loop that reads and writes the Lease and keeps the
// renew-deadline timer.
#include "kube/leader_election.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <random>

#include "base/log.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using std::chrono::system_clock;

std::string Millis(milliseconds d) { return std::to_string(d.count()) + "ms"; }

}  // namespace

Status ValidateLeaderElectionConfig(const LeaderElectionConfig& config) {
  const std::string where =
      "leader election on lease " + MakeKey(config.lease_namespace, config.lease_name) + ": ";
  if (config.lease_namespace.empty() || config.lease_name.empty()) {
    return InvalidArgument(where + "the lease namespace and name are required");
  }
  if (config.retry_period <= milliseconds::zero()) {
    return InvalidArgument(where + "retry_period must be positive");
  }
  if (config.renew_deadline >= config.lease_duration) {
    return InvalidArgument(where + "renew_deadline (" + Millis(config.renew_deadline) +
                           ") must be shorter than lease_duration (" +
                           Millis(config.lease_duration) +
                           "), or a stalled leader could still act after others took over");
  }
  if (config.retry_period >= config.renew_deadline) {
    return InvalidArgument(where + "retry_period (" + Millis(config.retry_period) +
                           ") must be shorter than renew_deadline (" +
                           Millis(config.renew_deadline) + "), or the leader never gets a retry");
  }
  return Status::Ok();
}

std::string DefaultIdentity() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "gpuop");
  }
  std::random_device rd;
  const uint64_t random = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, "_%016llx", static_cast<unsigned long long>(random));
  return std::string(host) + suffix;
}

int64_t LeaseDurationSeconds(milliseconds lease_duration) {
  const int64_t seconds = (lease_duration.count() + 999) / 1000;
  return seconds < 1 ? 1 : seconds;
}

std::string_view ElectionActionName(ElectionAction action) {
  switch (action) {
    case ElectionAction::kCreate:
      return "create";
    case ElectionAction::kAcquire:
      return "acquire";
    case ElectionAction::kRenew:
      return "renew";
    case ElectionAction::kWait:
      return "wait";
  }
  return "unknown";
}

ElectionDecision DecideElection(const LeaderElectionConfig& config,
                                const std::optional<Json>& lease, const ObservedLease& observed,
                                const ElectionTime& now) {
  ElectionDecision d;
  d.observed = observed;
  LeaseSpec mine;
  mine.holder_identity = config.identity;
  mine.lease_duration_seconds = LeaseDurationSeconds(config.lease_duration);
  mine.renew_time = now.wall;
  if (!lease.has_value()) {
    d.action = ElectionAction::kCreate;
    mine.acquire_time = now.wall;
    d.spec = std::move(mine);
    return d;
  }

  const LeaseSpec current = GetLeaseSpec(*lease);
  // The observed-time rule: expiry counts from when WE saw the record change.
  if (!observed.spec.has_value() || *observed.spec != current) {
    d.observed.spec = current;
    d.observed.observed_at = now.mono;
  }
  d.holder = current.holder_identity;
  const bool held_by_other = !d.holder.empty() && d.holder != config.identity;
  const auto expires_at =
      d.observed.observed_at + std::chrono::seconds(current.lease_duration_seconds);
  if (held_by_other && expires_at > now.mono) {
    d.action = ElectionAction::kWait;
    d.expires_at = expires_at;
    return d;
  }
  if (d.holder == config.identity) {
    d.action = ElectionAction::kRenew;
    mine.acquire_time = current.acquire_time.value_or(now.wall);
    mine.lease_transitions = current.lease_transitions;
  } else {
    // Free (released) or expired: a new term begins.
    d.action = ElectionAction::kAcquire;
    mine.acquire_time = now.wall;
    mine.lease_transitions = current.lease_transitions + 1;
  }
  d.spec = std::move(mine);
  return d;
}

LeaseSpec ReleasedLeaseSpec(const LeaseSpec& held, system_clock::time_point now) {
  LeaseSpec released;
  released.holder_identity = "";
  released.lease_duration_seconds = 1;
  released.acquire_time = now;
  released.renew_time = now;
  released.lease_transitions = held.lease_transitions;
  return released;
}

Result<std::unique_ptr<LeaderElector>> LeaderElector::New(Client& client,
                                                          LeaderElectionConfig config,
                                                          LeaderCallbacks callbacks) {
  if (config.identity.empty()) config.identity = DefaultIdentity();
  GPUOP_RETURN_IF_ERROR(ValidateLeaderElectionConfig(config));
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(client, std::move(config), std::move(callbacks)));
}

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config, LeaderCallbacks callbacks)
    : client_(client), config_(std::move(config)), callbacks_(std::move(callbacks)) {
  std::random_device rd;
  jitter_state_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;
}

LeaderElector::~LeaderElector() {
  if (lead_thread_.joinable()) {
    lead_thread_.request_stop();
    lead_thread_.join();
  }
}

bool LeaderElector::IsLeader() const {
  MutexLock lk(mu_);
  return leading_;
}

std::string LeaderElector::GetLeader() const {
  MutexLock lk(mu_);
  return holder_;
}

void LeaderElector::Run(std::stop_token stop) {
  LogInfo("leader election starting",
          {{"lease", MakeKey(config_.lease_namespace, config_.lease_name)},
           {"identity", config_.identity}});
  std::jthread timer([this](std::stop_token st) { RenewDeadlineTimer(st); });
  while (!stop.stop_requested()) {
    const bool holding = TryAcquireOrRenew();
    MutexLock lk(mu_);
    cv_.wait_for(lk.native(), stop, NextWait(holding), [] { return false; });
  }
  StepDown("stopping");
  if (lead_thread_.joinable()) lead_thread_.join();
  if (config_.release_on_cancel) Release();
  timer.request_stop();
}

std::chrono::milliseconds LeaderElector::NextWait(bool leading) {
  if (leading) return config_.retry_period;
  // Candidates spread their reads over up to 20% more than the retry period
  // so that a crowd started together does not stay in step.
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  const int64_t spread = config_.retry_period.count() / 5;
  const int64_t extra = spread > 0 ? static_cast<int64_t>(jitter_state_ % (spread + 1)) : 0;
  return config_.retry_period + milliseconds(extra);
}

bool LeaderElector::TryAcquireOrRenew() {
  const ElectionTime now{system_clock::now(), steady_clock::now()};
  const std::string lease_key = MakeKey(config_.lease_namespace, config_.lease_name);
  std::optional<Json> lease;
  Result<Json> got = client_.Get(resources::kLeases, config_.lease_namespace, config_.lease_name);
  if (got.ok()) {
    lease = std::move(got).value();
  } else if (!IsNotFound(got.status())) {
    ReportApiError("read", lease_key, got.status());
    return false;
  }

  ElectionDecision decision = DecideElection(config_, lease, observed_, now);
  observed_ = decision.observed;
  ReportHolder(decision.holder);
  if (decision.action == ElectionAction::kWait) {
    StepDown("the lease is held by " + decision.holder);
    return false;
  }

  Result<Json> written = Status(StatusCode::kInternal, "unset");
  if (decision.action == ElectionAction::kCreate) {
    Json obj{{"apiVersion", resources::kLeases.ApiVersion()},
             {"kind", resources::kLeases.kind},
             {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}}};
    SetLeaseSpec(obj, decision.spec);
    written = client_.Create(resources::kLeases, config_.lease_namespace, obj);
  } else {
    Json obj = *lease;  // keeps resourceVersion: the update is conditional
    SetLeaseSpec(obj, decision.spec);
    written = client_.Update(resources::kLeases, obj);
  }
  if (!written.ok()) {
    if (IsConflict(written.status()) || IsAlreadyExists(written.status())) {
      // Someone else wrote the Lease since we read it: they won this round.
      LogDebug("leader election: lost a race for the lease",
               {{"lease", lease_key}, {"action", ElectionActionName(decision.action)}});
    } else {
      ReportApiError(ElectionActionName(decision.action), lease_key, written.status());
    }
    return false;
  }
  if (api_failures_ > 0) {
    LogInfo("leader election: the lease can be written again",
            {{"lease", lease_key}, {"failures", api_failures_}});
    api_failures_ = 0;
  }

  const LeaseSpec stored = GetLeaseSpec(*written);
  observed_ = {stored, now.mono};
  last_written_ = std::move(written).value();
  ReportHolder(stored.holder_identity);
  {
    MutexLock lk(mu_);
    if (leading_) {
      last_renew_ = now.mono;
      cv_.notify_all();
      return true;
    }
  }
  // A write that took longer than the renew deadline is too old to lead on.
  if (steady_clock::now() - now.mono >= config_.renew_deadline) {
    LogWarn("leader election: the lease write took longer than the renew deadline",
            {{"lease", lease_key}});
    return true;
  }
  BecomeLeader(now.mono);
  return true;
}

void LeaderElector::BecomeLeader(steady_clock::time_point renewed_at) {
  MutexLock transition(transition_mu_);
  // The previous term's work has been told to stop; wait until it has.
  if (lead_thread_.joinable()) lead_thread_.join();
  std::stop_token lead_token;
  {
    MutexLock lk(mu_);
    leading_ = true;
    last_renew_ = renewed_at;
    lead_stop_ = std::stop_source();
    lead_token = lead_stop_.get_token();
  }
  cv_.notify_all();
  LogInfo("leader election: became leader",
          {{"lease", MakeKey(config_.lease_namespace, config_.lease_name)},
           {"identity", config_.identity}});
  if (callbacks_.on_started_leading) {
    lead_thread_ = std::jthread(
        [this, lead_token](std::stop_token) { callbacks_.on_started_leading(lead_token); });
  }
}

void LeaderElector::StepDown(std::string_view why) {
  MutexLock transition(transition_mu_);
  {
    MutexLock lk(mu_);
    if (!leading_) return;
    leading_ = false;
    lead_stop_.request_stop();
  }
  cv_.notify_all();
  LogInfo("leader election: stopped leading",
          {{"lease", MakeKey(config_.lease_namespace, config_.lease_name)},
           {"identity", config_.identity},
           {"reason", why}});
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
}

void LeaderElector::RenewDeadlineTimer(std::stop_token stop) {
  MutexLock lk(mu_);
  while (!stop.stop_requested()) {
    if (!leading_) {
      cv_.wait(lk.native(), stop, [this]() GPUOP_REQUIRES(mu_) { return leading_; });
      continue;
    }
    const steady_clock::time_point deadline = last_renew_ + config_.renew_deadline;
    if (steady_clock::now() >= deadline) {
      lk.Unlock();
      StepDown("no successful renewal within the renew deadline of " +
               Millis(config_.renew_deadline));
      lk.Lock();
      continue;
    }
    cv_.wait_until(lk.native(), stop, deadline, [&]() GPUOP_REQUIRES(mu_) {
      return !leading_ || last_renew_ + config_.renew_deadline != deadline;
    });
  }
}

void LeaderElector::Release() {
  if (!last_written_.has_value()) return;
  const LeaseSpec held = GetLeaseSpec(*last_written_);
  // Only a Lease that still names us, as far as we know, is ours to give up.
  if (held.holder_identity != config_.identity || !observed_.spec.has_value() ||
      *observed_.spec != held) {
    return;
  }
  Json obj = *last_written_;
  SetLeaseSpec(obj, ReleasedLeaseSpec(held, system_clock::now()));
  Result<Json> written = client_.Update(resources::kLeases, obj);
  const std::string lease_key = MakeKey(config_.lease_namespace, config_.lease_name);
  if (!written.ok()) {
    LogWarn("leader election: cannot release the lease; others take over when it expires",
            {{"lease", lease_key}, {"error", written.status()}});
    return;
  }
  last_written_ = std::move(written).value();
  observed_ = {GetLeaseSpec(*last_written_), steady_clock::now()};
  ReportHolder("");
  LogInfo("leader election: released the lease", {{"lease", lease_key}});
}

void LeaderElector::ReportApiError(std::string_view action, const std::string& lease_key,
                                   const Status& error) {
  // The first failure of a run of them is a warning; the rest, every retry
  // period while the API server is unreachable, would only repeat it.
  const bool first = api_failures_++ == 0;
  if (first || LogEnabled(LogLevel::kDebug)) {
    Log(first ? LogLevel::kWarn : LogLevel::kDebug, "leader election: lease request failed",
        {{"lease", lease_key}, {"action", action}, {"error", error}});
  }
}

void LeaderElector::ReportHolder(const std::string& holder) {
  {
    MutexLock lk(mu_);
    holder_ = holder;
  }
  if (holder == reported_holder_) return;
  reported_holder_ = holder;
  if (!holder.empty() && callbacks_.on_new_leader) callbacks_.on_new_leader(holder);
}

}  // namespace gpuop::kube
