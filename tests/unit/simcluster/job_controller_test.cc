#include "sim/cluster/job_controller.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "tests/unit/simcluster/controllers_testing.h"

namespace gpuop::simcluster {
namespace {

using ::gpuop::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;
namespace res = kube::resources;
using Clock = std::chrono::system_clock;

constexpr const char* kUidLabel = "batch.kubernetes.io/controller-uid";

Json Job(const std::string& name, const std::string& restart_policy = "Never") {
  Json job = Json::parse(R"({
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"namespace": "default", "annotations": {"helm.sh/hook": "pre-upgrade"}},
    "spec": {
      "template": {
        "metadata": {"labels": {"app": "hook"}, "annotations": {"note": "from the template"}},
        "spec": {"containers": [{"name": "main", "image": "gpuop:dev", "args": ["upgrade-crd"]}]}
      }
    }})");
  job["metadata"]["name"] = name;
  job["spec"]["template"]["spec"]["restartPolicy"] = restart_policy;
  return job;
}

Json PodWithStatus(Json status) { return {{"status", std::move(status)}}; }

// (type, status, reason, message) of each condition, in order.
using ConditionRow = std::tuple<std::string, std::string, std::string, std::string>;
std::vector<ConditionRow> Conditions(const Json& job) {
  std::vector<ConditionRow> out;
  for (const auto& c : job.value("status", Json::object()).value("conditions", Json::array())) {
    out.emplace_back(c.value("type", ""), c.value("status", ""), c.value("reason", ""),
                     c.value("message", ""));
  }
  return out;
}

// --- Pure pieces ---

TEST(JobCoreTest, SpecDefaultsAreTheApiServers) {
  JobSpec spec = ReadJobSpec(Job("j"));
  EXPECT_EQ(spec.completions, 1);
  EXPECT_EQ(spec.parallelism, 1);
  EXPECT_EQ(spec.backoff_limit, 6);
  EXPECT_EQ(spec.restart_policy, "Never");
  Json work_queue = Job("j");
  work_queue["spec"]["parallelism"] = 3;  // parallelism alone: no completion count
  spec = ReadJobSpec(work_queue);
  EXPECT_FALSE(spec.completions.has_value());
  EXPECT_EQ(spec.parallelism, 3);
}

TEST(JobCoreTest, WantActiveNeverExceedsTheCompletionsLeft) {
  JobSpec spec;
  spec.completions = 5;
  spec.parallelism = 2;
  EXPECT_EQ(WantActive(spec, 0, 0), 2);
  EXPECT_EQ(WantActive(spec, 4, 1), 1);
  EXPECT_EQ(WantActive(spec, 6, 0), 0);
  spec.completions.reset();  // a work queue: once one succeeded, no new pods
  EXPECT_EQ(WantActive(spec, 0, 0), 2);
  EXPECT_EQ(WantActive(spec, 1, 1), 1);
}

TEST(JobCoreTest, BackoffDoublesPerFailureUpToTheCapAndASuccessResetsIt) {
  const Clock::time_point now = Clock::now();
  const milliseconds base = seconds(10), max = seconds(600);
  BackoffRecord r{1, now};
  EXPECT_EQ(BackoffRemaining(r, now, base, max), seconds(10));
  r = {3, now - seconds(5)};
  EXPECT_EQ(BackoffRemaining(r, now, base, max), seconds(35));  // 40 s after the last failure
  r = {12, now};
  EXPECT_EQ(BackoffRemaining(r, now, base, max), seconds(600));
  r = {1, now - seconds(11)};
  EXPECT_EQ(BackoffRemaining(r, now, base, max), milliseconds::zero());

  auto finished = [](Clock::time_point at) {
    return PodWithStatus(
        {{"containerStatuses",
          Json::array({{{"state", {{"terminated", {{"finishedAt", kube::Rfc3339(at)}}}}}}})}});
  };
  const Json failed_early = finished(now - seconds(30)), succeeded = finished(now - seconds(20)),
             failed_late = finished(now - seconds(10));
  BackoffRecord next = NextBackoffRecord({2, now - seconds(40)}, {}, {&failed_early});
  EXPECT_EQ(next.failures_after_last_success, 3);
  next = NextBackoffRecord(next, {&succeeded}, {&failed_early, &failed_late});
  EXPECT_EQ(next.failures_after_last_success, 1);  // only the failure after the success
  EXPECT_EQ(next.last_failure, PodFinishedTime(failed_late));
}

TEST(JobCoreTest, OnFailureCountsContainerRestartsOfLivePods) {
  JobSpec spec;
  spec.restart_policy = "OnFailure";
  spec.backoff_limit = 3;
  const Json running =
      PodWithStatus({{"phase", "Running"},
                     {"initContainerStatuses", Json::array({{{"restartCount", 1}}})},
                     {"containerStatuses", Json::array({{{"restartCount", 1}}})}});
  const Json done = PodWithStatus(
      {{"phase", "Succeeded"}, {"containerStatuses", Json::array({{{"restartCount", 5}}})}});
  EXPECT_FALSE(PastBackoffLimitOnFailure(spec, {&running, &done}));  // 2 < 3
  spec.backoff_limit = 2;
  EXPECT_TRUE(PastBackoffLimitOnFailure(spec, {&running}));
  spec.restart_policy = "Never";
  EXPECT_FALSE(PastBackoffLimitOnFailure(spec, {&running}));
}

TEST(JobCoreTest, EnsureJobConditionReplacesOnChangeAndNeverAddsFalse) {
  Json status = Json::object();
  EXPECT_FALSE(EnsureJobCondition(status, "Suspended", "False", "JobResumed", "Job resumed", "t0"));
  EXPECT_FALSE(status.contains("conditions"));
  EXPECT_TRUE(
      EnsureJobCondition(status, "Suspended", "True", "JobSuspended", "Job suspended", "t1"));
  EXPECT_FALSE(
      EnsureJobCondition(status, "Suspended", "True", "JobSuspended", "Job suspended", "t2"));
  EXPECT_EQ(status["conditions"][0]["lastTransitionTime"], "t1");
  EXPECT_TRUE(EnsureJobCondition(status, "Suspended", "False", "JobResumed", "Job resumed", "t3"));
  ASSERT_EQ(status["conditions"].size(), 1u);
  EXPECT_EQ(status["conditions"][0]["status"], "False");
  EXPECT_EQ(status["conditions"][0]["lastProbeTime"], "t3");
}

// --- The API server's Job defaulting ---

class JobDefaultingTest : public testing::EmulatorTest {};

TEST_F(JobDefaultingTest, GeneratesTheSelectorAndLabelsLikeKubeApiserver) {
  auto created = client().Create(kJobs, "default", Job("hook"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string uid = kube::Uid(*created);
  const Json& spec = (*created)["spec"];
  EXPECT_EQ(spec["selector"], Json({{"matchLabels", {{kUidLabel, uid}}}}));
  const Json want_labels = {{"app", "hook"},
                            {"batch.kubernetes.io/job-name", "hook"},
                            {"job-name", "hook"},
                            {kUidLabel, uid},
                            {"controller-uid", uid}};
  EXPECT_EQ(spec["template"]["metadata"]["labels"], want_labels);
  EXPECT_EQ((*created)["metadata"]["labels"], want_labels);  // it had none of its own
  EXPECT_EQ(spec["completions"], 1);
  EXPECT_EQ(spec["parallelism"], 1);
  EXPECT_EQ(spec["backoffLimit"], 6);
  EXPECT_EQ(spec["completionMode"], "NonIndexed");
  EXPECT_EQ(spec["suspend"], false);
  EXPECT_EQ(spec["manualSelector"], false);
  EXPECT_EQ(spec["podReplacementPolicy"], "TerminatingOrFailed");
  EXPECT_EQ(client().Get(kJobs, "default", "hook")->at("spec"), spec);
}

TEST_F(JobDefaultingTest, ManualSelectorAndOwnLabelsAreKept) {
  Json job = Job("manual");
  job["metadata"]["labels"] = {{"team", "gpu"}};
  job["spec"]["manualSelector"] = true;
  job["spec"]["selector"] = {{"matchLabels", {{"app", "hook"}}}};
  job["spec"]["parallelism"] = 2;
  auto created = client().Create(kJobs, "default", job);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ((*created)["spec"]["selector"], job["spec"]["selector"]);
  EXPECT_EQ((*created)["spec"]["template"]["metadata"]["labels"], Json({{"app", "hook"}}));
  EXPECT_EQ((*created)["metadata"]["labels"], Json({{"team", "gpu"}}));
  EXPECT_FALSE((*created)["spec"].contains("completions"));  // parallelism alone: none
}

// --- The controller against the API emulator ---

class JobTest : public testing::EmulatorTest {
 protected:
  void SetUp() override {
    EmulatorTest::SetUp();
    if (HasFatalFailure()) return;
    JobControllerOptions o;
    o.pod_failure_backoff = milliseconds(20);
    o.max_pod_failure_backoff = milliseconds(100);
    auto c = JobController::Start(client(), o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    jobs_ = std::move(c).value();
    ASSERT_TRUE(jobs_->WaitForSync(seconds(30)));
  }
  void TearDown() override { jobs_.reset(); }

  std::string Create(const Json& job) {
    auto created = client().Create(kJobs, "default", job);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? kube::Uid(*created) : "";
  }
  Json Get(const std::string& name) {
    auto j = client().Get(kJobs, "default", name);
    return j.ok() ? *j : Json();
  }
  std::vector<Json> Pods(const std::string& name) {
    return testing::ListPods(client(), "default", "batch.kubernetes.io/job-name=" + name);
  }
  std::vector<Json> ActivePods(const std::string& name) {
    std::vector<Json> out;
    for (auto& p : Pods(name)) {
      if (!kube::IsBeingDeleted(p) && !kube::IsPodTerminal(p)) out.push_back(std::move(p));
    }
    return out;
  }
  bool HasCondition(const std::string& name, const std::string& type) {
    auto c = kube::FindCondition(Get(name), type);
    return c && c->status == "True";
  }
  // Reasons and messages of the Events about `name`.
  std::set<std::pair<std::string, std::string>> Events(const std::string& name) {
    std::set<std::pair<std::string, std::string>> out;
    auto list = client().List(res::kEvents, "default");
    if (!list.ok()) return out;
    for (const auto& e : list->items) {
      if (e["involvedObject"].value("name", "") == name && e["involvedObject"]["kind"] == "Job") {
        out.emplace(e.value("reason", ""), e.value("message", ""));
      }
    }
    return out;
  }
  void SetPhase(const Json& pod, const std::string& phase) {
    ASSERT_TRUE(testing::SetPodPhase(client(), pod, phase).ok());
  }

  std::unique_ptr<JobController> jobs_;
};

TEST_F(JobTest, RunsOnePodToCompletionWithKubesStatusConditionsAndEvents) {
  const std::string uid = Create(Job("hook"));
  ASSERT_TRUE(WaitFor([&] { return ActivePods("hook").size() == 1; }));
  const Json pod = ActivePods("hook")[0];
  EXPECT_EQ(kube::Name(pod).rfind("hook-", 0), 0u) << kube::Name(pod);
  EXPECT_EQ(kube::Label(pod, "batch.kubernetes.io/job-name"), "hook");
  EXPECT_EQ(kube::Label(pod, "job-name"), "hook");
  EXPECT_EQ(kube::Label(pod, kUidLabel), uid);
  EXPECT_EQ(kube::Label(pod, "controller-uid"), uid);
  EXPECT_EQ(kube::Annotation(pod, "note"), "from the template");
  EXPECT_EQ(pod["spec"]["containers"][0]["args"][0], "upgrade-crd");
  EXPECT_TRUE(kube::HasFinalizer(pod, kJobTrackingFinalizer));
  const auto refs = kube::OwnerReferences(pod);
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].api_version, "batch/v1");
  EXPECT_EQ(refs[0].kind, "Job");
  EXPECT_EQ(refs[0].uid, uid);
  EXPECT_TRUE(refs[0].controller);
  EXPECT_TRUE(refs[0].block_owner_deletion);

  ASSERT_TRUE(testing::MarkPodReady(client(), pod).ok());
  ASSERT_TRUE(WaitFor([&] {
    return testing::StatusHas(Get("hook"), {{"active", 1}, {"ready", 1}, {"terminating", 0}});
  })) << Get("hook").dump(2);
  EXPECT_TRUE(Get("hook")["status"].contains("startTime"));
  EXPECT_TRUE(Conditions(Get("hook")).empty());

  SetPhase(pod, "Succeeded");
  ASSERT_TRUE(WaitFor([&] { return HasCondition("hook", "Complete"); })) << Get("hook").dump(2);
  const Json job = Get("hook");
  const std::string msg = "Reached expected number of succeeded pods";
  EXPECT_EQ(Conditions(job),
            (std::vector<ConditionRow>{{"SuccessCriteriaMet", "True", "CompletionsReached", msg},
                                       {"Complete", "True", "CompletionsReached", msg}}));
  const Json& status = job["status"];
  EXPECT_EQ(status["succeeded"], 1);
  EXPECT_FALSE(status.contains("active"));
  EXPECT_FALSE(status.contains("failed"));
  EXPECT_EQ(status["ready"], 0);
  EXPECT_EQ(status["terminating"], 0);
  EXPECT_EQ(status["uncountedTerminatedPods"], Json::object());
  EXPECT_EQ(status["completionTime"], status["conditions"][1]["lastTransitionTime"]);
  EXPECT_FALSE(kube::HasFinalizer(Pods("hook")[0], kJobTrackingFinalizer));
  ASSERT_TRUE(WaitFor([&] {
    auto events = Events("hook");
    return events.count({"SuccessfulCreate", "Created pod: " + kube::Name(pod)}) > 0 &&
           events.count({"Completed", "Job completed"}) > 0;
  })) << ::testing::PrintToString(Events("hook"));
  EXPECT_EQ(Pods("hook").size(), 1u);
}

TEST_F(JobTest, NeverReplacesFailedPodsUntilTheBackoffLimitThenFails) {
  Json job = Job("flaky");
  job["spec"]["backoffLimit"] = 2;
  Create(job);
  std::set<std::string> failed;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitFor([&] { return ActivePods("flaky").size() == 1; }))
        << "attempt " << i << ": " << Get("flaky").dump(2);
    EXPECT_FALSE(HasCondition("flaky", "FailureTarget")) << "attempt " << i;
    const Json pod = ActivePods("flaky")[0];
    failed.insert(kube::Name(pod));
    SetPhase(pod, "Failed");
  }
  ASSERT_TRUE(WaitFor([&] { return HasCondition("flaky", "Failed"); })) << Get("flaky").dump(2);
  const std::string msg = "Job has reached the specified backoff limit";
  EXPECT_EQ(Conditions(Get("flaky")),
            (std::vector<ConditionRow>{{"FailureTarget", "True", "BackoffLimitExceeded", msg},
                                       {"Failed", "True", "BackoffLimitExceeded", msg}}));
  const Json status = Get("flaky")["status"];
  EXPECT_EQ(status["failed"], 3);
  EXPECT_FALSE(status.contains("succeeded"));
  EXPECT_FALSE(status.contains("completionTime"));
  EXPECT_EQ(failed.size(), 3u);  // a new pod each time
  EXPECT_EQ(Pods("flaky").size(), 3u);
  EXPECT_TRUE(ActivePods("flaky").empty());
  ASSERT_TRUE(WaitFor([&] { return Events("flaky").count({"BackoffLimitExceeded", msg}) > 0; }));
}

TEST_F(JobTest, OnFailureCountsContainerRestartsTowardTheBackoffLimit) {
  Json job = Job("restarts", "OnFailure");
  job["spec"]["backoffLimit"] = 2;
  Create(job);
  ASSERT_TRUE(WaitFor([&] { return ActivePods("restarts").size() == 1; }));
  const Json pod = ActivePods("restarts")[0];
  auto restarted = [&](int count) {
    return kube::UpdateWithRetry(
               client(), res::kPods, "default", kube::Name(pod),
               [&](Json& p) {
                 p["status"]["phase"] = "Running";
                 p["status"]["containerStatuses"] =
                     Json::array({{{"name", "main"}, {"restartCount", count}}});
                 return true;
               },
               /*status_subresource=*/true)
        .ok();
  };
  ASSERT_TRUE(restarted(2));  // the kubelet restarted it in place twice
  ASSERT_TRUE(WaitFor([&] { return HasCondition("restarts", "Failed"); }))
      << Get("restarts").dump(2);
  EXPECT_EQ(std::get<2>(Conditions(Get("restarts")).back()), "BackoffLimitExceeded");
  EXPECT_EQ(Get("restarts")["status"]["failed"], 1);  // the pod it deleted
  ASSERT_TRUE(WaitFor([&] { return Pods("restarts").empty(); }));
  EXPECT_EQ(ActivePods("restarts").size(), 0u);
}

TEST_F(JobTest, CompletionsRunAtMostParallelismPodsAtOnce) {
  Json job = Job("batch");
  job["spec"]["completions"] = 4;
  job["spec"]["parallelism"] = 2;
  Create(job);
  ASSERT_TRUE(WaitFor([&] { return ActivePods("batch").size() == 2; }));
  size_t most_active = 0;
  std::set<std::string> seen;
  ASSERT_TRUE(WaitFor([&] {
    auto active = ActivePods("batch");
    most_active = std::max(most_active, active.size());
    for (const auto& p : active) seen.insert(kube::Name(p));
    if (!active.empty()) SetPhase(active[0], "Succeeded");
    return HasCondition("batch", "Complete");
  })) << Get("batch").dump(2);
  EXPECT_LE(most_active, 2u);
  EXPECT_EQ(Get("batch")["status"]["succeeded"], 4);
  EXPECT_EQ(Pods("batch").size(), 4u);
  EXPECT_EQ(seen.size(), 4u);
}

TEST_F(JobTest, ActiveDeadlineFailsTheJobAndDeletesItsPods) {
  Json job = Job("slow");
  job["spec"]["activeDeadlineSeconds"] = 1;
  job["spec"]["completions"] = 2;
  job["spec"]["parallelism"] = 2;
  Create(job);
  ASSERT_TRUE(WaitFor([&] { return ActivePods("slow").size() == 2; }));
  ASSERT_TRUE(WaitFor([&] { return HasCondition("slow", "Failed"); })) << Get("slow").dump(2);
  const std::string msg = "Job was active longer than specified deadline";
  EXPECT_EQ(Conditions(Get("slow")),
            (std::vector<ConditionRow>{{"FailureTarget", "True", "DeadlineExceeded", msg},
                                       {"Failed", "True", "DeadlineExceeded", msg}}));
  EXPECT_TRUE(Pods("slow").empty());  // the terminal condition waits for them to go
  EXPECT_EQ(Get("slow")["status"]["failed"], 2);
  EXPECT_EQ(Get("slow")["status"]["terminating"], 0);
  ASSERT_TRUE(WaitFor([&] { return Events("slow").count({"DeadlineExceeded", msg}) > 0; }));
}

TEST_F(JobTest, SuspendDeletesThePodsAndResumeStartsAgain) {
  Json job = Job("paused");
  job["spec"]["suspend"] = true;
  Create(job);
  ASSERT_TRUE(WaitFor([&] { return HasCondition("paused", "Suspended"); }));
  EXPECT_TRUE(Pods("paused").empty());
  EXPECT_FALSE(Get("paused")["status"].contains("startTime"));
  auto resumed = kube::UpdateWithRetry(client(), kJobs, "default", "paused", [](Json& j) {
    j["spec"]["suspend"] = false;
    return true;
  });
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return ActivePods("paused").size() == 1; }));
  ASSERT_TRUE(WaitFor([&] {
    auto c = kube::FindCondition(Get("paused"), "Suspended");
    return c && c->status == "False" && c->reason == "JobResumed";
  })) << Get("paused").dump(2);
  EXPECT_TRUE(Get("paused")["status"].contains("startTime"));
}

TEST_F(JobTest, TtlAfterFinishedDeletesTheJobAndItsPods) {
  Json job = Job("once");
  job["spec"]["ttlSecondsAfterFinished"] = 0;
  Create(job);
  ASSERT_TRUE(WaitFor([&] { return ActivePods("once").size() == 1; }));
  SetPhase(ActivePods("once")[0], "Succeeded");
  ASSERT_TRUE(WaitFor([&] {
    return !client().Get(kJobs, "default", "once").ok() && Pods("once").empty();
  })) << Get("once").dump(2);
  EXPECT_TRUE(kube::IsNotFound(client().Get(kJobs, "default", "once").status()));
}

TEST_F(JobTest, DeletingTheJobDeletesItsRunningPods) {
  Json job = Job("doomed");
  job["spec"]["completions"] = 2;
  job["spec"]["parallelism"] = 2;
  Create(job);
  ASSERT_TRUE(WaitFor([&] { return ActivePods("doomed").size() == 2; }));
  ASSERT_TRUE(client().Delete(kJobs, "default", "doomed").ok());
  // The garbage collector deletes them; the controller lets go of their finalizer.
  ASSERT_TRUE(WaitFor([&] { return Pods("doomed").empty(); }))
      << ::testing::PrintToString(Pods("doomed").size());
}

}  // namespace
}  // namespace gpuop::simcluster
