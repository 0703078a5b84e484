// JobController: the cluster simulator's batch/v1 Job controller, after
// kube-controller-manager's (pkg/controller/job) and its TTL-after-finished
// controller, talking to the API only through the kube client and informers.
// It is what runs Helm's hook Jobs (pre-upgrade, pre-delete) in the
// simulated cluster.
//
// For each Job (spec.completionMode NonIndexed):
//   - pods from spec.template (labels, annotations, finalizers), generateName
//     "<job>-", owned by the Job (controller, blockOwnerDeletion), carrying
//     the batch.kubernetes.io/job-tracking finalizer until they are counted;
//     the selector labels come from the API server's defaulting;
//   - spec.parallelism pods at once, never more than the completions left;
//     spec.completions unset: done once any pod succeeded and none is active;
//   - failures: restartPolicy Never counts each failed (or deleted) pod and
//     replaces it after kube's back-off (10 s doubling to 10 min, reset by a
//     success); OnFailure counts the container restarts the kubelet reports;
//     past spec.backoffLimit the Job fails (BackoffLimitExceeded), as it does
//     past spec.activeDeadlineSeconds (DeadlineExceeded); its active pods
//     are deleted and counted as failed;
//   - spec.suspend deletes the active pods (Suspended condition, events
//     Suspended / Resumed; resuming restarts startTime);
//   - status as kube 1.35 writes it: startTime, active, ready, terminating,
//     succeeded, failed, uncountedTerminatedPods, completionTime; conditions
//     SuccessCriteriaMet then Complete (reason CompletionsReached), or
//     FailureTarget then Failed (the terminal condition once no pod is
//     terminating); events SuccessfulCreate, SuccessfulDelete, FailedCreate,
//     Completed and the failure reason;
//   - spec.ttlSecondsAfterFinished: the finished Job is deleted (foreground)
//     that long after its Complete/Failed condition.
// Not done: Indexed completion mode, podFailurePolicy, successPolicy,
// backoffLimitPerIndex, managedBy, adoption of orphan pods.
//
// Pure pieces (ReadJobSpec, WantActive, the back-off, PastBackoffLimitOnFailure,
// EnsureJobCondition) are exposed for tests; the class is the adapter.
//
// Thread-safety: the functions are pure; Start, Stop and WaitForSync may be
// called from any thread. REQUIRES: the client outlives the controller.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "sim/cluster/controller_common.h"

namespace gpuop::simcluster {

extern const kube::Resource kJobs;  // batch/v1

inline constexpr std::string_view kJobTrackingFinalizer = "batch.kubernetes.io/job-tracking";

// A Job's spec with the API server's defaults where a field is unset.
struct JobSpec {
  std::optional<int64_t> completions;
  int64_t parallelism = 1;
  int64_t backoff_limit = 6;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int64_t> ttl_seconds_after_finished;
  bool suspend = false;
  bool indexed = false;
  bool replace_only_failed = false;  // podReplacementPolicy Failed
  std::string restart_policy;        // the template's
};
JobSpec ReadJobSpec(const Json& job);

// How many pods should be active (kube's manageJob).
int64_t WantActive(const JobSpec& spec, int64_t succeeded, int64_t active);

// restartPolicy OnFailure: the container restarts of the pending and running
// pods reached backoffLimit (any restart when it is 0).
bool PastBackoffLimitOnFailure(const JobSpec& spec, const std::vector<const Json*>& pods);

// When a pod finished: its containers' last finishedAt, else its Ready=False
// transition, else its deletion, else its creation.
std::chrono::system_clock::time_point PodFinishedTime(const Json& pod);

// Consecutive pod failures since the last success, which delay the next pod.
struct BackoffRecord {
  int64_t failures_after_last_success = 0;
  std::optional<std::chrono::system_clock::time_point> last_failure;
  bool operator==(const BackoffRecord&) const = default;
};
// The record after pods newly seen succeeded and failed.
BackoffRecord NextBackoffRecord(BackoffRecord record, std::vector<const Json*> succeeded,
                                std::vector<const Json*> failed);
// How long the next pod still waits: `base` doubled per failure after the
// first, capped at `max`, counted from the last failure.
std::chrono::milliseconds BackoffRemaining(const BackoffRecord& record,
                                           std::chrono::system_clock::time_point now,
                                           std::chrono::milliseconds base,
                                           std::chrono::milliseconds max);

// kube's ensureJobConditionStatus on status.conditions: an existing condition
// of `type` is replaced when status, reason or message differ; a missing one
// is appended unless `condition_status` is "False". True when that changed
// `status`.
bool EnsureJobCondition(Json& status, std::string_view type, std::string_view condition_status,
                        std::string_view reason, std::string_view message, std::string_view now);

// Complete or Failed is True.
bool IsJobFinished(const Json& job);

struct JobControllerOptions {
  // One worker: kube::WorkQueue::Get waits on a reference into its delayed
  // heap, which a second worker's AddAfter may reallocate.
  int workers = 1;
  // kube's DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff.
  std::chrono::milliseconds pod_failure_backoff{std::chrono::seconds(10)};
  std::chrono::milliseconds max_pod_failure_backoff{std::chrono::minutes(10)};
};

class JobController {
 public:
  static Result<std::unique_ptr<JobController>> Start(kube::Client& client,
                                                      JobControllerOptions options = {});
  ~JobController();  // Stop()
  JobController(const JobController&) = delete;
  JobController& operator=(const JobController&) = delete;

  void Stop();
  bool WaitForSync(std::chrono::milliseconds timeout);

 private:
  struct Sync;  // one reconcile's view of a Job and its pods

  JobController(kube::Client& client, JobControllerOptions options);
  kube::ReconcileResult Reconcile(const std::string& key);
  // A finished Job is deleted once its ttlSecondsAfterFinished has passed.
  kube::ReconcileResult SyncFinished(const Json& job);
  // Creates or deletes pods toward WantActive (kube's manageJob).
  Status ManageJob(Sync& sync);
  Status DeletePods(Sync& sync, const std::vector<const Json*>& pods);
  // Counts finished pods through uncountedTerminatedPods, removes their
  // finalizers, writes the status and, when it is time, the terminal condition.
  Status TrackStatus(Sync& sync);
  Status WriteStatus(Sync& sync);
  // Removes the tracking finalizer (a pod already gone is fine).
  Status ReleasePod(const Json& pod);
  Status ReleasePods(const std::vector<kube::ObjectPtr>& pods);
  // Pod uids of `key` whose finalizer removal the cache does not show yet.
  std::set<std::string> PendingReleases(const std::string& key,
                                        const std::vector<kube::ObjectPtr>& pods);
  void Event(const Json& job, kube::EventType type, std::string_view reason,
             std::string_view message);

  kube::Client& client_;
  const JobControllerOptions options_;
  std::unique_ptr<kube::SharedInformerFactory> factory_;
  kube::Informer* jobs_ = nullptr;
  kube::Informer* pods_ = nullptr;
  std::unique_ptr<kube::EventRecorder> events_;
  std::unique_ptr<kube::Controller> controller_;
  Expectations expectations_;
  std::mutex mu_;
  std::map<std::string, BackoffRecord> backoff_;            // GUARDED_BY(mu_)
  std::map<std::string, std::set<std::string>> releasing_;  // GUARDED_BY(mu_)
  std::jthread thread_;
};

}  // namespace gpuop::simcluster
