#include "sim/cluster/job_controller.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "base/log.h"
#include "kube/object.h"

namespace gpuop::simcluster {

const kube::Resource kJobs{"batch", "v1", "jobs", "Job", true};

namespace {

namespace res = kube::resources;
using WallClock = std::chrono::system_clock;
using std::chrono::milliseconds;

constexpr const char* kJobIndex = "job";
// Condition types, reasons and messages as kube-controller-manager writes them.
constexpr std::string_view kSuccessCriteriaMet = "SuccessCriteriaMet";
constexpr std::string_view kFailureTarget = "FailureTarget";
constexpr std::string_view kComplete = "Complete";
constexpr std::string_view kFailed = "Failed";
constexpr std::string_view kCompletionsReached = "CompletionsReached";
constexpr std::string_view kCompletionsReachedMessage = "Reached expected number of succeeded pods";
constexpr std::string_view kBackoffLimitExceeded = "BackoffLimitExceeded";
constexpr std::string_view kBackoffLimitMessage = "Job has reached the specified backoff limit";
constexpr std::string_view kDeadlineExceeded = "DeadlineExceeded";
constexpr std::string_view kDeadlineMessage = "Job was active longer than specified deadline";

std::optional<int64_t> OptInt(const Json& v) {
  return v.is_number_integer() ? std::optional<int64_t>(v.get<int64_t>()) : std::nullopt;
}

std::string StrOf(const Json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

std::optional<WallClock::time_point> TimeOf(const Json& v) {
  return v.is_string() ? kube::ParseRfc3339(v.get<std::string>()) : std::nullopt;
}

// The key of the batch/v1 Job that controls `obj`, if one does.
std::vector<std::string> ControllingJob(const Json& obj) {
  for (const auto& ref : kube::OwnerReferences(obj)) {
    if (ref.controller && ref.kind == "Job" && ref.api_version == "batch/v1") {
      return {kube::MakeKey(kube::Namespace(obj), ref.name)};
    }
  }
  return {};
}

int64_t RestartCount(const Json& pod, bool with_init) {
  int64_t n = 0;
  for (const char* field : {"containerStatuses", "initContainerStatuses"}) {
    if (!with_init && std::string_view(field) == "initContainerStatuses") continue;
    const Json& statuses = Member(Member(pod, "status"), field);
    if (!statuses.is_array()) continue;
    for (const auto& s : statuses) n += OptInt(Member(s, "restartCount")).value_or(0);
  }
  return n;
}

// Counted as a failure: Failed, or (unless only failed pods are replaced)
// deleted before it succeeded.
bool IsPodFailed(const JobSpec& spec, const Json& pod) {
  const std::string phase = kube::PodPhase(pod);
  if (phase == "Failed") return true;
  if (spec.replace_only_failed) return false;
  return kube::IsBeingDeleted(pod) && phase != "Succeeded";
}

bool IsPodTerminating(const Json& pod) {
  return kube::IsBeingDeleted(pod) && !kube::IsPodTerminal(pod);
}

// kube's controller.ActivePods order: the pods to remove first come first
// (unbound, pending, not ready, most restarted, newest).
void SortForRemoval(std::vector<const Json*>& pods) {
  auto phase_rank = [](const Json& p) {
    const std::string phase = kube::PodPhase(p);
    return phase == "Pending" ? 0 : phase == "Running" ? 2 : 1;
  };
  std::stable_sort(pods.begin(), pods.end(), [&](const Json* a, const Json* b) {
    const bool ab = !kube::PodNodeName(*a).empty(), bb = !kube::PodNodeName(*b).empty();
    if (ab != bb) return !ab;
    if (phase_rank(*a) != phase_rank(*b)) return phase_rank(*a) < phase_rank(*b);
    if (kube::IsPodReady(*a) != kube::IsPodReady(*b)) return !kube::IsPodReady(*a);
    if (RestartCount(*a, false) != RestartCount(*b, false)) {
      return RestartCount(*a, false) > RestartCount(*b, false);
    }
    return CreationTime(*a) > CreationTime(*b);
  });
}

Json NewCondition(std::string_view type, std::string_view status, std::string_view reason,
                  std::string_view message, std::string_view now) {
  Json c = {
      {"type", type}, {"status", status}, {"lastProbeTime", now}, {"lastTransitionTime", now}};
  if (!reason.empty()) c["reason"] = reason;
  if (!message.empty()) c["message"] = message;
  return c;
}

std::optional<kube::Condition> TrueCondition(const Json& job, std::string_view type) {
  auto c = kube::FindCondition(job, type);
  if (!c || c->status != "True") return std::nullopt;
  return c;
}

// Pod uids the controller saw finish and is removing the finalizer of.
struct Uncounted {
  std::vector<std::string> succeeded, failed;

  static bool Has(const std::vector<std::string>& list, const std::string& uid) {
    return std::find(list.begin(), list.end(), uid) != list.end();
  }
  bool empty() const { return succeeded.empty() && failed.empty(); }
};

Uncounted ReadUncounted(const Json& status) {
  Uncounted u;
  const Json& v = Member(status, "uncountedTerminatedPods");
  for (auto [field, list] : {std::pair{"succeeded", &u.succeeded}, {"failed", &u.failed}}) {
    const Json& uids = Member(v, field);
    if (!uids.is_array()) continue;
    for (const auto& uid : uids) {
      if (uid.is_string()) list->push_back(uid.get<std::string>());
    }
  }
  return u;
}

// What the condition is that a finishing Job heads for.
struct Finish {
  std::string type;  // SuccessCriteriaMet, FailureTarget, Complete or Failed
  std::string reason;
  std::string message;
};

kube::ReconcileResult Outcome(const Status& st, milliseconds requeue_after) {
  if (!st.ok()) {
    // A write from a stale cache: the Job's own update event follows.
    if (kube::IsConflict(st)) return {Status::Ok(), true};
    return kube::ReconcileResult::Error(st);
  }
  if (requeue_after > milliseconds::zero())
    return kube::ReconcileResult::RequeueAfter(requeue_after);
  return kube::ReconcileResult::Ok();
}

milliseconds Until(WallClock::time_point when, WallClock::time_point now) {
  return std::chrono::ceil<milliseconds>(when - now);
}

// The shorter of two pending requeues (zero: none).
milliseconds Sooner(milliseconds a, milliseconds b) {
  if (a <= milliseconds::zero()) return b;
  if (b <= milliseconds::zero()) return a;
  return std::min(a, b);
}

}  // namespace

// --- Pure pieces ---

JobSpec ReadJobSpec(const Json& job) {
  const Json& spec = Member(job, "spec");
  JobSpec out;
  out.completions = OptInt(Member(spec, "completions"));
  const std::optional<int64_t> parallelism = OptInt(Member(spec, "parallelism"));
  if (!out.completions && !parallelism) out.completions = 1;
  out.parallelism = parallelism.value_or(1);
  out.backoff_limit = OptInt(Member(spec, "backoffLimit")).value_or(6);
  out.active_deadline_seconds = OptInt(Member(spec, "activeDeadlineSeconds"));
  out.ttl_seconds_after_finished = OptInt(Member(spec, "ttlSecondsAfterFinished"));
  out.suspend = Member(spec, "suspend") == true;
  out.indexed = StrOf(Member(spec, "completionMode")) == "Indexed";
  out.replace_only_failed = StrOf(Member(spec, "podReplacementPolicy")) == "Failed" ||
                            Member(spec, "podFailurePolicy").is_object();
  out.restart_policy = StrOf(Member(Member(Member(spec, "template"), "spec"), "restartPolicy"));
  return out;
}

int64_t WantActive(const JobSpec& spec, int64_t succeeded, int64_t active) {
  if (!spec.completions) return succeeded > 0 ? active : spec.parallelism;
  return std::max<int64_t>(0, std::min(*spec.completions - succeeded, spec.parallelism));
}

bool PastBackoffLimitOnFailure(const JobSpec& spec, const std::vector<const Json*>& pods) {
  if (spec.restart_policy != "OnFailure") return false;
  int64_t restarts = 0;
  for (const Json* p : pods) {
    const std::string phase = kube::PodPhase(*p);
    if (phase == "Running" || phase == "Pending") restarts += RestartCount(*p, true);
  }
  return spec.backoff_limit == 0 ? restarts > 0 : restarts >= spec.backoff_limit;
}

WallClock::time_point PodFinishedTime(const Json& pod) {
  const Json& statuses = Member(Member(pod, "status"), "containerStatuses");
  std::optional<WallClock::time_point> latest;
  bool all_finished = statuses.is_array() && !statuses.empty();
  if (all_finished) {
    for (const auto& s : statuses) {
      auto at = TimeOf(Member(Member(Member(s, "state"), "terminated"), "finishedAt"));
      if (!at) {
        all_finished = false;
        break;
      }
      if (!latest || *latest < *at) latest = at;
    }
  }
  if (all_finished && latest) return *latest;
  if (auto ready = kube::FindCondition(pod, "Ready"); ready && ready->status == "False") {
    if (auto at = kube::ParseRfc3339(ready->last_transition_time)) return *at;
  }
  const Json& meta = Member(pod, "metadata");
  if (auto deleted = TimeOf(Member(meta, "deletionTimestamp"))) {
    return *deleted -
           std::chrono::seconds(OptInt(Member(meta, "deletionGracePeriodSeconds")).value_or(0));
  }
  return CreationTime(pod);
}

BackoffRecord NextBackoffRecord(BackoffRecord record, std::vector<const Json*> succeeded,
                                std::vector<const Json*> failed) {
  auto by_finish = [](const Json* a, const Json* b) {
    return PodFinishedTime(*a) < PodFinishedTime(*b);
  };
  std::sort(succeeded.begin(), succeeded.end(), by_finish);
  std::sort(failed.begin(), failed.end(), by_finish);
  if (succeeded.empty()) {
    if (failed.empty()) return record;
    record.failures_after_last_success += static_cast<int64_t>(failed.size());
    record.last_failure = PodFinishedTime(*failed.back());
    return record;
  }
  // A success resets the count; only failures after the last one count.
  record = {};
  const WallClock::time_point last_success = PodFinishedTime(*succeeded.back());
  for (auto it = failed.rbegin(); it != failed.rend(); ++it) {
    const WallClock::time_point at = PodFinishedTime(**it);
    if (at <= last_success) break;
    if (!record.last_failure) record.last_failure = at;
    ++record.failures_after_last_success;
  }
  return record;
}

milliseconds BackoffRemaining(const BackoffRecord& record, WallClock::time_point now,
                              milliseconds base, milliseconds max) {
  if (record.failures_after_last_success == 0 || !record.last_failure) return milliseconds::zero();
  milliseconds backoff = base;
  for (int64_t i = 1; i < record.failures_after_last_success; ++i) {
    backoff *= 2;
    if (backoff >= max) {
      backoff = max;
      break;
    }
  }
  const milliseconds left = Until(*record.last_failure + backoff, now);
  return std::max(left, milliseconds::zero());
}

bool EnsureJobCondition(Json& status, std::string_view type, std::string_view condition_status,
                        std::string_view reason, std::string_view message, std::string_view now) {
  Json& conditions = status["conditions"];
  if (!conditions.is_array()) conditions = Json::array();
  for (Json& c : conditions) {
    if (StrOf(Member(c, "type")) != type) continue;
    if (StrOf(Member(c, "status")) == condition_status && StrOf(Member(c, "reason")) == reason &&
        StrOf(Member(c, "message")) == message) {
      return false;
    }
    c = NewCondition(type, condition_status, reason, message, now);
    return true;
  }
  if (condition_status == "False") {
    if (conditions.empty()) status.erase("conditions");
    return false;
  }
  conditions.push_back(NewCondition(type, condition_status, reason, message, now));
  return true;
}

bool IsJobFinished(const Json& job) {
  return TrueCondition(job, kComplete).has_value() || TrueCondition(job, kFailed).has_value();
}

// --- JobController ---

// One reconcile's view of a Job: the object as last read or written (its
// status is built in place), its pods, and the counts kube's syncJob keeps.
struct JobController::Sync {
  std::string key;
  Json job;
  JobSpec spec;
  WallClock::time_point now;
  std::vector<kube::ObjectPtr> pods;  // controlled by the Job
  std::set<std::string> releasing;    // pod uids whose finalizer removal is not cached yet
  std::vector<const Json*> active_pods;
  int64_t active = 0, ready = 0, terminating = 0;
  int64_t succeeded = 0, failed = 0;                  // counted, uncounted and new
  int64_t counted_succeeded = 0, counted_failed = 0;  // status.succeeded, status.failed
  Uncounted uncounted;
  bool satisfied = true;  // no creation or deletion the cache has not shown
  BackoffRecord backoff;
  std::optional<Finish> finished;
  bool needs_flush = false;
  milliseconds requeue_after{0};

  Json& status() { return job["status"]; }
  std::string Now() const { return kube::Rfc3339(now); }
};

JobController::JobController(kube::Client& client, JobControllerOptions options)
    : client_(client), options_(options) {}

JobController::~JobController() { Stop(); }

Result<std::unique_ptr<JobController>> JobController::Start(kube::Client& client,
                                                            JobControllerOptions options) {
  std::unique_ptr<JobController> c(new JobController(client, options));
  c->factory_ = std::make_unique<kube::SharedInformerFactory>(&client);
  c->jobs_ = &c->factory_->For(kJobs);
  c->pods_ = &c->factory_->For(res::kPods);
  GPUOP_RETURN_IF_ERROR(c->pods_->AddIndex(kJobIndex, ControllingJob));
  kube::EventRecorderOptions eo;
  eo.component = "job-controller";
  c->events_ = std::make_unique<kube::EventRecorder>(client, eo);
  JobController* self = c.get();
  c->controller_ = std::make_unique<kube::Controller>(
      "job", kube::WorkQueueOptions{"job", {}}, std::max(1, options.workers),
      [self](const std::string& key) { return self->Reconcile(key); });
  c->controller_->Watch(*c->jobs_);
  c->controller_->Watch(*c->pods_, ControllingJob);
  c->thread_ = std::jthread([self](std::stop_token stop) {
    self->factory_->Start(stop);
    Status st = self->controller_->Run(stop);
    if (!st.ok() && !stop.stop_requested()) LogError("job controller stopped", {{"error", st}});
    self->factory_->Stop();
  });
  LogInfo("job controller started");
  return c;
}

void JobController::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool JobController::WaitForSync(std::chrono::milliseconds timeout) {
  return factory_->WaitForCacheSync(timeout);
}

void JobController::Event(const Json& job, kube::EventType type, std::string_view reason,
                          std::string_view message) {
  events_->Event(kube::ReferenceTo(job, &kJobs), type, reason, message);
}

Status JobController::ReleasePod(const Json& pod) {
  if (!kube::HasFinalizer(pod, kJobTrackingFinalizer)) return Status::Ok();
  const Json patch = {{"metadata",
                       {{"$deleteFromPrimitiveList/finalizers",
                         Json::array({std::string(kJobTrackingFinalizer)})}}}};
  auto patched = client_.Patch(res::kPods, kube::Namespace(pod), kube::Name(pod),
                               kube::PatchType::kStrategic, patch);
  if (!patched.ok() && !kube::IsNotFound(patched.status())) {
    return patched.status().Annotate("removing the Job tracking finalizer of pod " +
                                     kube::KeyOf(pod));
  }
  return Status::Ok();
}

Status JobController::ReleasePods(const std::vector<kube::ObjectPtr>& pods) {
  Status failed = Status::Ok();
  for (const auto& p : pods) {
    Status st = ReleasePod(*p);
    if (!st.ok() && failed.ok()) failed = st;
  }
  return failed;
}

std::set<std::string> JobController::PendingReleases(const std::string& key,
                                                     const std::vector<kube::ObjectPtr>& pods) {
  std::lock_guard lock(mu_);
  auto it = releasing_.find(key);
  if (it == releasing_.end()) return {};
  std::set<std::string>& uids = it->second;
  for (auto uid = uids.begin(); uid != uids.end();) {
    auto pod = std::find_if(pods.begin(), pods.end(),
                            [&](const kube::ObjectPtr& p) { return kube::Uid(*p) == *uid; });
    const bool seen = pod == pods.end() || !kube::HasFinalizer(**pod, kJobTrackingFinalizer);
    uid = seen ? uids.erase(uid) : std::next(uid);
  }
  return uids;
}

kube::ReconcileResult JobController::Reconcile(const std::string& key) {
  const std::vector<kube::ObjectPtr> named = pods_->ByIndex(kJobIndex, key);
  kube::ObjectPtr cached = jobs_->Get(key);
  if (!cached) {
    // Gone: its pods (the garbage collector deletes them) need no counting.
    expectations_.Forget(key);
    {
      std::lock_guard lock(mu_);
      backoff_.erase(key);
      releasing_.erase(key);
    }
    return Outcome(ReleasePods(named), milliseconds::zero());
  }
  std::vector<kube::ObjectPtr> pods, strays;  // strays: of an earlier Job of this name
  for (const auto& p : named)
    (ControllerUid(*p) == kube::Uid(*cached) ? pods : strays).push_back(p);
  Status released = ReleasePods(strays);
  if (IsJobFinished(*cached) || kube::IsBeingDeleted(*cached)) {
    {
      std::lock_guard lock(mu_);
      backoff_.erase(key);
    }
    // A backstop: pods of a finished Job were released when it finished.
    if (Status st = ReleasePods(pods); released.ok()) released = st;
    if (!released.ok()) return Outcome(released, milliseconds::zero());
    return SyncFinished(*cached);
  }

  Sync sync;
  sync.key = key;
  sync.job = *cached;
  sync.spec = ReadJobSpec(sync.job);
  sync.now = WallClock::now();
  sync.pods = pods;
  if (sync.spec.indexed) {
    Event(sync.job, kube::EventType::kWarning, "UnsupportedCompletionMode",
          "Skipped Job sync: the simulated cluster runs NonIndexed Jobs only");
    return Outcome(released, milliseconds::zero());
  }
  // Expectations first: a pod created after this check waits for the next sync.
  sync.satisfied = expectations_.Satisfied(key, *pods_);
  sync.releasing = PendingReleases(key, pods);
  if (!sync.status().is_object()) sync.status() = Json::object();
  sync.counted_succeeded = OptInt(Member(sync.status(), "succeeded")).value_or(0);
  sync.counted_failed = OptInt(Member(sync.status(), "failed")).value_or(0);
  sync.uncounted = ReadUncounted(sync.status());

  std::vector<const Json*> all, new_succeeded, new_failed;
  for (const auto& p : pods) {
    const Json& pod = *p;
    all.push_back(&pod);
    if (IsPodActive(pod)) {
      sync.active_pods.push_back(&pod);
      if (kube::IsPodReady(pod)) ++sync.ready;
    }
    if (IsPodTerminating(pod)) ++sync.terminating;
    const std::string uid = kube::Uid(pod);
    if (!kube::HasFinalizer(pod, kJobTrackingFinalizer) || sync.releasing.count(uid) > 0) continue;
    if (kube::PodPhase(pod) == "Succeeded" && !Uncounted::Has(sync.uncounted.succeeded, uid)) {
      new_succeeded.push_back(&pod);
    } else if (IsPodFailed(sync.spec, pod) && !Uncounted::Has(sync.uncounted.failed, uid)) {
      new_failed.push_back(&pod);
    }
  }
  sync.active = static_cast<int64_t>(sync.active_pods.size());
  sync.succeeded = sync.counted_succeeded + static_cast<int64_t>(new_succeeded.size()) +
                   static_cast<int64_t>(sync.uncounted.succeeded.size());
  sync.failed = sync.counted_failed + static_cast<int64_t>(new_failed.size()) +
                static_cast<int64_t>(sync.uncounted.failed.size());
  if (!Member(sync.status(), "startTime").is_string() && !sync.spec.suspend) {
    sync.status()["startTime"] = sync.Now();
  }
  {
    std::lock_guard lock(mu_);
    sync.backoff = NextBackoffRecord(backoff_[key], new_succeeded, new_failed);
  }

  if (auto c = TrueCondition(sync.job, kSuccessCriteriaMet)) {
    sync.finished = Finish{std::string(kSuccessCriteriaMet), c->reason, c->message};
  } else if (auto t = TrueCondition(sync.job, kFailureTarget)) {
    sync.finished = Finish{std::string(kFailed), t->reason, t->message};
  } else if (sync.failed > sync.spec.backoff_limit || PastBackoffLimitOnFailure(sync.spec, all)) {
    sync.finished = Finish{std::string(kFailureTarget), std::string(kBackoffLimitExceeded),
                           std::string(kBackoffLimitMessage)};
  } else if (sync.spec.active_deadline_seconds && !sync.spec.suspend) {
    if (auto start = TimeOf(Member(sync.status(), "startTime"))) {
      const WallClock::time_point deadline =
          *start + std::chrono::seconds(*sync.spec.active_deadline_seconds);
      if (deadline <= sync.now) {
        sync.finished = Finish{std::string(kFailureTarget), std::string(kDeadlineExceeded),
                               std::string(kDeadlineMessage)};
      } else {
        sync.requeue_after = Until(deadline, sync.now);
      }
    }
  }

  Status managed = Status::Ok();
  if (sync.finished) {
    // The Job is done with its pods; it is finished once none is left.
    managed = DeletePods(sync, sync.active_pods);
    if (sync.active != 0 || !sync.satisfied) sync.finished.reset();
  } else {
    const bool manage = sync.satisfied;
    if (manage) managed = ManageJob(sync);
    const bool complete = sync.spec.completions
                              ? sync.succeeded >= *sync.spec.completions && sync.active == 0
                              : sync.succeeded > 0 && sync.active == 0;
    if (complete) {
      sync.finished = Finish{std::string(kSuccessCriteriaMet), std::string(kCompletionsReached),
                             std::string(kCompletionsReachedMessage)};
    } else if (manage && sync.spec.suspend) {
      if (EnsureJobCondition(sync.status(), "Suspended", "True", "JobSuspended", "Job suspended",
                             sync.Now())) {
        sync.needs_flush = true;
        Event(sync.job, kube::EventType::kNormal, "Suspended", "Job suspended");
      }
    } else if (manage && EnsureJobCondition(sync.status(), "Suspended", "False", "JobResumed",
                                            "Job resumed", sync.Now())) {
      // ActiveDeadlineSeconds counts from the resumption.
      sync.needs_flush = true;
      sync.status()["startTime"] = sync.Now();
      Event(sync.job, kube::EventType::kNormal, "Resumed", "Job resumed");
    }
  }
  const Json& have = sync.status();
  sync.needs_flush = sync.needs_flush ||
                     OptInt(Member(have, "active")).value_or(0) != sync.active ||
                     OptInt(Member(have, "ready")) != sync.ready ||
                     OptInt(Member(have, "terminating")) != sync.terminating;
  Status tracked = TrackStatus(sync);
  for (const Status& st : {tracked, managed, released}) {
    if (!st.ok()) return Outcome(st, milliseconds::zero());
  }
  return Outcome(Status::Ok(), sync.requeue_after);
}

Status JobController::DeletePods(Sync& sync, const std::vector<const Json*>& pods) {
  for (const Json* p : pods) {
    kube::DeleteOptions opts;
    opts.precondition_uid = kube::Uid(*p);
    Status st = client_.Delete(res::kPods, kube::Namespace(*p), kube::Name(*p), opts);
    if (!st.ok() && !kube::IsNotFound(st)) {
      return st.Annotate("deleting pod " + kube::KeyOf(*p) + " of Job " + sync.key);
    }
    expectations_.ExpectDeletion(sync.key, kube::KeyOf(*p), kube::Uid(*p));
    Event(sync.job, kube::EventType::kNormal, "SuccessfulDelete", "Deleted pod: " + kube::Name(*p));
    --sync.active;
    ++sync.terminating;
    if (kube::IsPodReady(*p)) --sync.ready;
  }
  return Status::Ok();
}

Status JobController::ManageJob(Sync& sync) {
  std::vector<const Json*> candidates = sync.active_pods;
  SortForRemoval(candidates);
  if (sync.spec.suspend) return DeletePods(sync, candidates);
  const int64_t want = WantActive(sync.spec, sync.succeeded, sync.active);
  if (sync.active > want) {
    candidates.resize(static_cast<size_t>(sync.active - want));
    return DeletePods(sync, candidates);
  }
  const int64_t missing =
      want - sync.active - (sync.spec.replace_only_failed ? sync.terminating : 0);
  if (missing <= 0) return Status::Ok();
  const milliseconds wait = BackoffRemaining(sync.backoff, sync.now, options_.pod_failure_backoff,
                                             options_.max_pod_failure_backoff);
  if (wait > milliseconds::zero()) {
    sync.requeue_after = Sooner(sync.requeue_after, wait);
    return Status::Ok();
  }
  // A cached status older than this controller's last write under-counts the
  // finished pods and would start one pod too many: create only from the Job
  // as stored (the cache's update event brings the Job back).
  auto stored = client_.Get(kJobs, kube::Namespace(sync.job), kube::Name(sync.job));
  if (!stored.ok()) {
    if (kube::IsNotFound(stored.status())) return Status::Ok();  // its delete event follows
    return stored.status().Annotate("reading Job " + sync.key);
  }
  if (kube::ResourceVersion(*stored) != kube::ResourceVersion(sync.job)) return Status::Ok();
  const Json& tmpl = Member(Member(sync.job, "spec"), "template");
  const Json& tmeta = Member(tmpl, "metadata");
  Json meta = {{"generateName", kube::Name(sync.job) + "-"},
               {"namespace", kube::Namespace(sync.job)},
               {"ownerReferences", Json::array({ControllerRef(sync.job, "batch/v1", "Job")})}};
  for (const char* field : {"labels", "annotations"}) {
    if (Member(tmeta, field).is_object() && !Member(tmeta, field).empty()) {
      meta[field] = Member(tmeta, field);
    }
  }
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", std::move(meta)},
              {"spec", Member(tmpl, "spec")}};
  if (Member(tmeta, "finalizers").is_array())
    pod["metadata"]["finalizers"] = Member(tmeta, "finalizers");
  kube::AddFinalizer(pod, kJobTrackingFinalizer);
  for (int64_t i = 0; i < missing; ++i) {
    auto created = client_.Create(res::kPods, kube::Namespace(sync.job), pod);
    if (!created.ok()) {
      Event(sync.job, kube::EventType::kWarning, "FailedCreate",
            "Error creating: " + created.status().message());
      return created.status().Annotate("creating a pod of Job " + sync.key);
    }
    expectations_.ExpectCreation(sync.key, kube::KeyOf(*created));
    Event(sync.job, kube::EventType::kNormal, "SuccessfulCreate",
          "Created pod: " + kube::Name(*created));
    ++sync.active;
  }
  return Status::Ok();
}

Status JobController::WriteStatus(Sync& sync) {
  Json& st = sync.status();
  auto set_or_omit = [&](const char* field, int64_t v) {
    if (v != 0) {
      st[field] = v;
    } else {
      st.erase(field);
    }
  };
  set_or_omit("active", sync.active);
  set_or_omit("succeeded", sync.counted_succeeded);
  set_or_omit("failed", sync.counted_failed);
  st["ready"] = sync.ready;
  st["terminating"] = sync.terminating;
  Json uncounted = Json::object();
  if (!sync.uncounted.succeeded.empty()) uncounted["succeeded"] = sync.uncounted.succeeded;
  if (!sync.uncounted.failed.empty()) uncounted["failed"] = sync.uncounted.failed;
  st["uncountedTerminatedPods"] = std::move(uncounted);
  auto written = client_.UpdateStatus(kJobs, sync.job);
  if (!written.ok()) return written.status().Annotate("updating the status of Job " + sync.key);
  sync.job = std::move(written).value();
  return Status::Ok();
}

Status JobController::TrackStatus(Sync& sync) {
  std::set<std::string> with_finalizer;
  std::vector<const Json*> tracked;
  for (const auto& p : sync.pods) {
    const std::string uid = kube::Uid(*p);
    if (kube::HasFinalizer(*p, kJobTrackingFinalizer) && sync.releasing.count(uid) == 0) {
      with_finalizer.insert(uid);
      tracked.push_back(p.get());
    }
  }
  // Uncounted pods whose finalizer is gone move to the counters.
  auto count_released = [&] {
    bool moved = false;
    for (auto [list, counter] : {std::pair{&sync.uncounted.succeeded, &sync.counted_succeeded},
                                 {&sync.uncounted.failed, &sync.counted_failed}}) {
      auto kept = std::stable_partition(list->begin(), list->end(), [&](const std::string& uid) {
        return with_finalizer.count(uid) > 0;
      });
      *counter += std::distance(kept, list->end());
      moved |= kept != list->end();
      list->erase(kept, list->end());
    }
    return moved;
  };
  if (count_released()) sync.needs_flush = true;

  std::vector<const Json*> to_release;
  for (const Json* p : tracked) {
    const std::string uid = kube::Uid(*p);
    const bool failed = IsPodFailed(sync.spec, *p);
    const bool succeeded = kube::PodPhase(*p) == "Succeeded";
    if (!sync.finished && !succeeded && !failed) continue;
    to_release.push_back(p);
    if (succeeded && !Uncounted::Has(sync.uncounted.failed, uid)) {
      if (!Uncounted::Has(sync.uncounted.succeeded, uid)) {
        sync.uncounted.succeeded.push_back(uid);
        sync.needs_flush = true;
      }
    } else if (failed || (sync.finished && sync.finished->type != kSuccessCriteriaMet)) {
      // A finishing Job counts every pod it did not see succeed as failed.
      if (!Uncounted::Has(sync.uncounted.failed, uid)) {
        sync.uncounted.failed.push_back(uid);
        sync.needs_flush = true;
      }
    }
  }
  // The interim condition goes first, the terminal one once every pod is counted.
  if (sync.finished && sync.finished->type == kFailureTarget) {
    EnsureJobCondition(sync.status(), kFailureTarget, "True", sync.finished->reason,
                       sync.finished->message, sync.Now());
    sync.needs_flush = true;
    sync.finished->type = kFailed;
  }
  if (sync.finished && sync.finished->type == kSuccessCriteriaMet) {
    if (!TrueCondition(sync.job, kSuccessCriteriaMet)) {
      EnsureJobCondition(sync.status(), kSuccessCriteriaMet, "True", sync.finished->reason,
                         sync.finished->message, sync.Now());
      sync.needs_flush = true;
    }
    sync.finished->type = kComplete;
  }
  if (sync.needs_flush) {
    GPUOP_RETURN_IF_ERROR(WriteStatus(sync));
    std::lock_guard lock(mu_);
    backoff_[sync.key] = sync.backoff;
    sync.needs_flush = false;
  }
  Status released = Status::Ok();
  for (const Json* p : to_release) {
    Status st = ReleasePod(*p);
    if (!st.ok()) {
      if (released.ok()) released = st;
      continue;
    }
    with_finalizer.erase(kube::Uid(*p));
    std::lock_guard lock(mu_);
    releasing_[sync.key].insert(kube::Uid(*p));
  }
  if (count_released()) sync.needs_flush = true;
  const bool job_finished = sync.finished && sync.uncounted.empty() && sync.terminating == 0;
  if (job_finished) {
    const std::string now = sync.Now();
    EnsureJobCondition(sync.status(), sync.finished->type, "True", sync.finished->reason,
                       sync.finished->message, now);
    if (sync.finished->type == kComplete) sync.status()["completionTime"] = now;
    sync.needs_flush = true;
  }
  if (sync.needs_flush) {
    GPUOP_RETURN_IF_ERROR(WriteStatus(sync));
    if (job_finished && sync.finished->type == kComplete) {
      Event(sync.job, kube::EventType::kNormal, "Completed", "Job completed");
    } else if (job_finished) {
      Event(sync.job, kube::EventType::kWarning, sync.finished->reason, sync.finished->message);
    }
    if (job_finished) {
      LogInfo("job finished", {{"job", sync.key},
                               {"condition", sync.finished->type},
                               {"reason", sync.finished->reason}});
    }
  }
  return released;
}

kube::ReconcileResult JobController::SyncFinished(const Json& job) {
  const JobSpec spec = ReadJobSpec(job);
  if (!spec.ttl_seconds_after_finished || kube::IsBeingDeleted(job)) {
    return kube::ReconcileResult::Ok();
  }
  std::optional<WallClock::time_point> finished_at;
  for (std::string_view type : {kComplete, kFailed}) {
    if (auto c = TrueCondition(job, type))
      finished_at = kube::ParseRfc3339(c->last_transition_time);
  }
  if (!finished_at) return kube::ReconcileResult::Ok();
  const WallClock::time_point expires =
      *finished_at + std::chrono::seconds(*spec.ttl_seconds_after_finished);
  const WallClock::time_point now = WallClock::now();
  if (expires > now) return kube::ReconcileResult::RequeueAfter(Until(expires, now));
  // kube's TTL-after-finished controller: a foreground delete of this very Job.
  kube::DeleteOptions opts;
  opts.propagation_policy = "Foreground";
  opts.precondition_uid = kube::Uid(job);
  Status st = client_.Delete(kJobs, kube::Namespace(job), kube::Name(job), opts);
  if (!st.ok() && !kube::IsNotFound(st) && !kube::IsConflict(st)) {
    return kube::ReconcileResult::Error(st.Annotate("deleting finished Job " + kube::KeyOf(job)));
  }
  LogInfo("finished job past its TTL: deleting it", {{"job", kube::KeyOf(job)}});
  return kube::ReconcileResult::Ok();
}

}  // namespace gpuop::simcluster
