// Leader election (src/kube/leader_election.h): the pure decision core with
// hand-made times, and two LeaderElectors with separate Clients contending
// for one Lease on the in-process API emulator: never two leaders at once
// (sampled, from the callbacks' intervals, and from the Lease's history),
// takeover after a crash only once the lease expired as the follower saw it,
// fast takeover after a release, and a leader that cannot renew stepping
// down before its lease could expire.
#include "kube/leader_election.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/object.h"
#include "sim/kube/server.h"
#include "tests/testing/wait.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using std::chrono::system_clock;
using ::testing::HasSubstr;

// Conditions that normally hold within milliseconds get this long (loaded CI).
constexpr seconds kDeadline{20};

using gpuop::testing::WaitFor;

// --- The core ------------------------------------------------------------------

LeaderElectionConfig CoreConfig() {
  LeaderElectionConfig c;
  c.lease_namespace = "ns";
  c.lease_name = "lease";
  c.identity = "me";
  c.lease_duration = seconds(15);
  c.renew_deadline = seconds(10);
  c.retry_period = seconds(2);
  return c;
}

// A fixed origin for both clocks; the wall clock is deliberately unrelated
// to the monotonic one, as on a real host.
ElectionTime At(milliseconds since_start) {
  const system_clock::time_point wall0 = system_clock::time_point{} + std::chrono::hours(490000);
  const steady_clock::time_point mono0 = steady_clock::time_point{} + std::chrono::hours(3);
  return {wall0 + since_start, mono0 + since_start};
}

Json LeaseHeldBy(const std::string& holder, system_clock::time_point renew, int64_t transitions,
                 int64_t duration_seconds = 15) {
  Json lease{{"metadata", {{"name", "lease"}, {"namespace", "ns"}, {"resourceVersion", "5"}}}};
  SetLeaseSpec(lease, {holder, duration_seconds, renew - seconds(100), renew, transitions});
  return lease;
}

TEST(LeaderElectionCoreTest, CreatesAMissingLease) {
  ElectionDecision d = DecideElection(CoreConfig(), std::nullopt, {}, At(milliseconds(0)));
  EXPECT_EQ(d.action, ElectionAction::kCreate);
  EXPECT_EQ(d.spec.holder_identity, "me");
  EXPECT_EQ(d.spec.lease_duration_seconds, 15);
  EXPECT_EQ(d.spec.acquire_time, At(milliseconds(0)).wall);
  EXPECT_EQ(d.spec.renew_time, At(milliseconds(0)).wall);
  EXPECT_EQ(d.spec.lease_transitions, 0);
  EXPECT_EQ(d.holder, "");
}

TEST(LeaderElectionCoreTest, WaitsALeaseDurationFromItsOwnObservation) {
  const LeaderElectionConfig config = CoreConfig();
  // The other host's clock is an hour behind: its renewTime looks ancient.
  // Expiry must still count from when we saw the record, not from renewTime.
  const Json lease = LeaseHeldBy("other", At(milliseconds(0)).wall - std::chrono::hours(1), 3);
  ElectionDecision first = DecideElection(config, lease, {}, At(milliseconds(1000)));
  EXPECT_EQ(first.action, ElectionAction::kWait);
  EXPECT_EQ(first.holder, "other");
  EXPECT_EQ(first.observed.observed_at, At(milliseconds(1000)).mono);
  EXPECT_EQ(first.expires_at, At(milliseconds(16000)).mono);

  // The same record again, just before it expires: still waiting, and the
  // observation time does not move.
  ElectionDecision later = DecideElection(config, lease, first.observed, At(milliseconds(15999)));
  EXPECT_EQ(later.action, ElectionAction::kWait);
  EXPECT_EQ(later.observed.observed_at, At(milliseconds(1000)).mono);

  // Expired: take it over, a new term.
  ElectionDecision take = DecideElection(config, lease, later.observed, At(milliseconds(16000)));
  EXPECT_EQ(take.action, ElectionAction::kAcquire);
  EXPECT_EQ(take.spec.holder_identity, "me");
  EXPECT_EQ(take.spec.acquire_time, At(milliseconds(16000)).wall);
  EXPECT_EQ(take.spec.renew_time, At(milliseconds(16000)).wall);
  EXPECT_EQ(take.spec.lease_transitions, 4);
}

TEST(LeaderElectionCoreTest, ARenewalSeenRestartsTheWait) {
  const LeaderElectionConfig config = CoreConfig();
  // The other host's clock runs an hour ahead: a renewTime in the future
  // must not make the lease look longer-lived either.
  const auto skew = std::chrono::hours(1);
  Json lease = LeaseHeldBy("other", At(milliseconds(0)).wall + skew, 0);
  ElectionDecision d = DecideElection(config, lease, {}, At(milliseconds(0)));
  ASSERT_EQ(d.action, ElectionAction::kWait);
  lease = LeaseHeldBy("other", At(milliseconds(10000)).wall + skew, 0);
  d = DecideElection(config, lease, d.observed, At(milliseconds(12000)));
  EXPECT_EQ(d.action, ElectionAction::kWait);
  EXPECT_EQ(d.observed.observed_at, At(milliseconds(12000)).mono);
  EXPECT_EQ(DecideElection(config, lease, d.observed, At(milliseconds(26999))).action,
            ElectionAction::kWait);
  EXPECT_EQ(DecideElection(config, lease, d.observed, At(milliseconds(27000))).action,
            ElectionAction::kAcquire);
}

TEST(LeaderElectionCoreTest, UsesTheLeaseDurationTheHolderWrote) {
  const Json lease = LeaseHeldBy("other", At(milliseconds(0)).wall, 0, /*duration_seconds=*/40);
  ElectionDecision d = DecideElection(CoreConfig(), lease, {}, At(milliseconds(0)));
  EXPECT_EQ(d.expires_at, At(milliseconds(40000)).mono);
  EXPECT_EQ(DecideElection(CoreConfig(), lease, d.observed, At(milliseconds(20000))).action,
            ElectionAction::kWait);
}

TEST(LeaderElectionCoreTest, RenewsItsOwnLeaseKeepingTheTerm) {
  const Json lease = LeaseHeldBy("me", At(milliseconds(0)).wall, 7);
  const LeaseSpec held = GetLeaseSpec(lease);
  ElectionDecision d = DecideElection(CoreConfig(), lease, {}, At(milliseconds(2000)));
  EXPECT_EQ(d.action, ElectionAction::kRenew);
  EXPECT_EQ(d.spec.acquire_time, held.acquire_time);
  EXPECT_EQ(d.spec.renew_time, At(milliseconds(2000)).wall);
  EXPECT_EQ(d.spec.lease_transitions, 7);
  EXPECT_EQ(d.holder, "me");
}

TEST(LeaderElectionCoreTest, AReleasedLeaseIsTakenAtOnce) {
  Json lease = LeaseHeldBy("other", At(milliseconds(0)).wall, 2);
  ElectionDecision d = DecideElection(CoreConfig(), lease, {}, At(milliseconds(0)));
  ASSERT_EQ(d.action, ElectionAction::kWait);
  const LeaseSpec released = ReleasedLeaseSpec(GetLeaseSpec(lease), At(milliseconds(500)).wall);
  EXPECT_EQ(released.holder_identity, "");
  EXPECT_EQ(released.lease_duration_seconds, 1);
  EXPECT_EQ(released.lease_transitions, 2);
  SetLeaseSpec(lease, released);
  d = DecideElection(CoreConfig(), lease, d.observed, At(milliseconds(600)));
  EXPECT_EQ(d.action, ElectionAction::kAcquire);
  EXPECT_EQ(d.spec.lease_transitions, 3);
  EXPECT_EQ(d.holder, "");
}

TEST(LeaderElectionCoreTest, ValidatesTheConfig) {
  EXPECT_TRUE(ValidateLeaderElectionConfig(CoreConfig()).ok());
  LeaderElectionConfig c = CoreConfig();
  c.lease_name = "";
  EXPECT_THAT(ValidateLeaderElectionConfig(c).message(), HasSubstr("name"));
  c = CoreConfig();
  c.renew_deadline = c.lease_duration;
  EXPECT_THAT(ValidateLeaderElectionConfig(c).message(), HasSubstr("renew_deadline"));
  c = CoreConfig();
  c.retry_period = c.renew_deadline;
  EXPECT_THAT(ValidateLeaderElectionConfig(c).message(), HasSubstr("retry_period"));
  c = CoreConfig();
  c.retry_period = milliseconds(0);
  EXPECT_EQ(ValidateLeaderElectionConfig(c).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LeaseDurationSeconds(milliseconds(1500)), 2);
  EXPECT_EQ(LeaseDurationSeconds(milliseconds(15000)), 15);
  EXPECT_EQ(LeaseDurationSeconds(milliseconds(10)), 1);
}

TEST(LeaderElectionCoreTest, DefaultIdentityIsHostnameAndRandomSuffix) {
  const std::string a = DefaultIdentity();
  const std::string b = DefaultIdentity();
  EXPECT_NE(a, b);
  ASSERT_GT(a.size(), 17u);
  EXPECT_EQ(a[a.size() - 17], '_');
  EXPECT_EQ(a.substr(a.size() - 16).find_first_not_of("0123456789abcdef"), std::string::npos);
}

// --- Against the emulator ----------------------------------------------------

class LeaderElectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    audit_path_ =
        ::testing::TempDir() + "/leader_election_audit_" + std::to_string(::getpid()) + ".jsonl";
    simkube::ServerOptions o;
    o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    o.threads = 32;
    o.audit_log = audit_path_;
    auto s = simkube::ApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::remove(audit_path_.c_str());
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    server_->faults().Clear();
    lease_name_ = "gpuop-";
    for (char c : std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
      lease_name_ += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    client_ = NewClient();
  }
  void TearDown() override {
    if (server_ != nullptr) server_->faults().Clear();
  }

  static std::unique_ptr<Client> NewClient() {
    RestConfig c;
    c.server = server_->url();
    c.qps = 0;
    auto client = Client::New(c, RetryPolicy{3, milliseconds(20), milliseconds(100)});
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // A term as the callbacks saw it.
  struct Term {
    steady_clock::time_point started;
    system_clock::time_point started_wall;
    std::optional<steady_clock::time_point> stopped;
    std::optional<system_clock::time_point> stopped_wall;
    std::optional<steady_clock::time_point> work_ended;  // OnStartedLeading returned
  };

  // One replica: its own Client, elector and Run thread.
  struct Contender {
    std::string identity;
    std::unique_ptr<Client> client;
    std::unique_ptr<LeaderElector> elector;
    std::stop_source stop;
    std::thread runner;
    mutable std::mutex mu;
    std::vector<Term> terms;
    std::vector<std::string> new_leaders;

    std::vector<Term> Terms() const {
      std::lock_guard<std::mutex> lk(mu);
      return terms;
    }
    size_t TermCount() const { return Terms().size(); }
    // Stops Run and waits for it to return.
    void Stop() {
      stop.request_stop();
      if (runner.joinable()) runner.join();
    }
    ~Contender() { Stop(); }
  };

  std::unique_ptr<Contender> StartContender(const std::string& identity,
                                            LeaderElectionConfig config) {
    auto c = std::make_unique<Contender>();
    c->identity = identity;
    c->client = NewClient();
    config.identity = identity;
    Contender* raw = c.get();
    LeaderCallbacks callbacks;
    callbacks.on_started_leading = [raw](std::stop_token stop) {
      {
        std::lock_guard<std::mutex> lk(raw->mu);
        raw->terms.push_back({steady_clock::now(), system_clock::now(), {}, {}, {}});
      }
      // The leader's "work": wait for the lead context to end.
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock<std::mutex> lk(m);
      cv.wait(lk, stop, [] { return false; });
      std::lock_guard<std::mutex> g(raw->mu);
      raw->terms.back().work_ended = steady_clock::now();
    };
    callbacks.on_stopped_leading = [raw] {
      std::lock_guard<std::mutex> lk(raw->mu);
      if (!raw->terms.empty() && !raw->terms.back().stopped) {
        raw->terms.back().stopped = steady_clock::now();
        raw->terms.back().stopped_wall = system_clock::now();
      }
    };
    callbacks.on_new_leader = [raw](const std::string& id) {
      std::lock_guard<std::mutex> lk(raw->mu);
      raw->new_leaders.push_back(id);
    };
    auto elector = LeaderElector::New(*c->client, config, callbacks);
    EXPECT_TRUE(elector.ok()) << elector.status().ToString();
    if (!elector.ok()) return nullptr;
    c->elector = std::move(elector).value();
    c->runner = std::thread([raw] { raw->elector->Run(raw->stop.get_token()); });
    return c;
  }

  LeaderElectionConfig Config(milliseconds lease, milliseconds renew, milliseconds retry,
                              bool release) const {
    LeaderElectionConfig c;
    c.lease_namespace = "default";
    c.lease_name = lease_name_;
    c.lease_duration = lease;
    c.renew_deadline = renew;
    c.retry_period = retry;
    c.release_on_cancel = release;
    return c;
  }

  // Checks IsLeader() of both contenders every millisecond. A reading counts
  // as two leaders only if `a` leads before and after `b` is read.
  class Sampler {
   public:
    Sampler(const Contender& a, const Contender& b)
        : thread_([this, &a, &b](std::stop_token stop) {
            while (!stop.stop_requested()) {
              for (auto [x, y] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
                const bool x1 = x->elector->IsLeader();
                const bool y1 = y->elector->IsLeader();
                const bool x2 = x->elector->IsLeader();
                if (x1 && y1 && x2) ++both_;
                if (x1 || y1) ++some_;
              }
              std::this_thread::sleep_for(milliseconds(1));
            }
          }) {}
    int both() const { return both_; }
    int some() const { return some_; }

   private:
    std::atomic<int> both_{0};
    std::atomic<int> some_{0};
    std::jthread thread_;  // last: starts once the counters exist
  };

  // Every version of the Lease, from a watch that starts before it exists.
  class LeaseHistory {
   public:
    LeaseHistory(Client& client, std::string name) : name_(std::move(name)) {
      auto list = client.List(resources::kLeases, "default");
      EXPECT_TRUE(list.ok()) << list.status().ToString();
      WatchOptions options;
      options.resource_version = list.ok() ? list->resource_version : "";
      options.allow_bookmarks = false;
      thread_ = std::jthread([this, &client, options](std::stop_token stop) {
        while (!stop.stop_requested()) {
          WatchOptions o = options;
          o.resource_version = last_version_.empty() ? options.resource_version : last_version_;
          Status s = client.Watch(
              resources::kLeases, "default", o,
              [this](WatchEvent&& e) {
                if (e.type == WatchEvent::Type::kAdded || e.type == WatchEvent::Type::kModified) {
                  last_version_ = ResourceVersion(e.object);
                  if (Name(e.object) != name_) return true;
                  std::lock_guard<std::mutex> lk(mu_);
                  specs_.push_back(GetLeaseSpec(e.object));
                }
                return true;
              },
              stop);
          if (!s.ok()) std::this_thread::sleep_for(milliseconds(50));
        }
      });
    }
    std::vector<LeaseSpec> Specs() const {
      std::lock_guard<std::mutex> lk(mu_);
      return specs_;
    }

   private:
    std::string name_;
    std::string last_version_;  // watch thread only
    mutable std::mutex mu_;
    std::vector<LeaseSpec> specs_;
    std::jthread thread_;
  };

  // The safety checks every scenario ends with.
  static void ExpectNoOverlap(const std::vector<const Contender*>& contenders,
                              const std::vector<LeaseSpec>& history) {
    struct Interval {
      std::string who;
      Term term;
    };
    std::vector<Interval> all;
    for (const Contender* c : contenders) {
      for (const Term& t : c->Terms()) all.push_back({c->identity, t});
    }
    std::sort(all.begin(), all.end(),
              [](const Interval& x, const Interval& y) { return x.term.started < y.term.started; });
    for (size_t i = 0; i + 1 < all.size(); ++i) {
      ASSERT_TRUE(all[i].term.stopped.has_value())
          << all[i].who << " started a term before " << all[i + 1].who << " and never ended it";
      EXPECT_LE(*all[i].term.stopped, all[i + 1].term.started)
          << all[i].who << " still led when " << all[i + 1].who << " started";
    }
    // Each term began with a write naming its leader, made before it started.
    for (const Interval& in : all) {
      bool found = false;
      for (const LeaseSpec& s : history) {
        if (s.holder_identity == in.who && s.acquire_time.has_value() &&
            *s.acquire_time <= in.term.started_wall + milliseconds(1)) {
          found = true;
        }
      }
      EXPECT_TRUE(found) << in.who << " led without a Lease naming it";
    }
    // In the history, a renewal keeps the term; a new holder starts the next one.
    for (size_t i = 0; i + 1 < history.size(); ++i) {
      const LeaseSpec& prev = history[i];
      const LeaseSpec& next = history[i + 1];
      if (next.holder_identity.empty()) continue;  // released
      if (next.holder_identity == prev.holder_identity) {
        EXPECT_EQ(next.acquire_time, prev.acquire_time) << "renewal " << i + 1;
        EXPECT_EQ(next.lease_transitions, prev.lease_transitions) << "renewal " << i + 1;
      } else {
        EXPECT_EQ(next.lease_transitions, prev.lease_transitions + 1) << "takeover " << i + 1;
      }
    }
  }

  // The Lease as stored now ({} after a failed read, which fails the test).
  LeaseSpec ReadLease() const {
    auto lease = client_->Get(resources::kLeases, "default", lease_name_);
    EXPECT_TRUE(lease.ok()) << lease.status().ToString();
    return lease.ok() ? GetLeaseSpec(*lease) : LeaseSpec{};
  }

  // Update answers for this test's Lease with `code`, from the audit log.
  int AuditedLeaseUpdates(int code) const {
    std::ifstream in(audit_path_);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("resource", "") == "leases" && j.value("verb", "") == "update" &&
          j.value("name", "") == lease_name_ && j.value("code", 0) == code) {
        ++n;
      }
    }
    return n;
  }

  static simkube::ApiServer* server_;
  static std::string audit_path_;
  std::string lease_name_;
  std::unique_ptr<Client> client_;
};

simkube::ApiServer* LeaderElectionTest::server_ = nullptr;
std::string LeaderElectionTest::audit_path_;

TEST_F(LeaderElectionTest, CrashedLeaderIsReplacedOnlyAfterTheLeaseExpires) {
  LeaseHistory history(*client_, lease_name_);
  const auto config = Config(milliseconds(2000), milliseconds(1000), milliseconds(200),
                             /*release=*/false);
  auto a = StartContender("contender-a", config);
  auto b = StartContender("contender-b", config);
  ASSERT_TRUE(a && b);
  Sampler sampler(*a, *b);

  ASSERT_TRUE(WaitFor([&] { return a->elector->IsLeader() || b->elector->IsLeader(); }));
  Contender* leader = a->elector->IsLeader() ? a.get() : b.get();
  Contender* follower = leader == a.get() ? b.get() : a.get();
  ASSERT_TRUE(WaitFor([&] { return leader->TermCount() == 1; }));  // its work has started
  // The leader keeps its lease through several renewals; the follower waits.
  ASSERT_TRUE(WaitFor([&] {
    int renewals = 0;
    for (const LeaseSpec& s : history.Specs()) renewals += s.holder_identity == leader->identity;
    return renewals >= 5;
  }));
  EXPECT_EQ(follower->TermCount(), 0u);
  EXPECT_EQ(follower->elector->GetLeader(), leader->identity);
  {
    std::lock_guard<std::mutex> lk(follower->mu);
    EXPECT_THAT(follower->new_leaders, ::testing::Contains(leader->identity));
  }

  // Crash: the loop stops without releasing the Lease.
  leader->Stop();
  const steady_clock::time_point crashed = steady_clock::now();
  EXPECT_FALSE(leader->elector->IsLeader());
  ASSERT_EQ(leader->TermCount(), 1u);
  EXPECT_TRUE(leader->Terms()[0].stopped.has_value());
  EXPECT_EQ(ReadLease().holder_identity, leader->identity);

  ASSERT_TRUE(WaitFor([&] { return follower->elector->IsLeader(); }));
  // Within lease duration + retry period, plus slack for a loaded machine.
  EXPECT_LT(steady_clock::now() - crashed, milliseconds(2000 + 200) + seconds(8));
  // ...and not before the lease expired as the follower saw it: its
  // acquireTime is at least a lease duration after the leader's last renewal.
  ASSERT_TRUE(WaitFor([&] {
    auto specs = history.Specs();
    return !specs.empty() && specs.back().holder_identity == follower->identity;
  }));
  const std::vector<LeaseSpec> specs = history.Specs();
  std::optional<system_clock::time_point> last_renewal;
  std::optional<system_clock::time_point> takeover;
  for (const LeaseSpec& s : specs) {
    if (s.holder_identity == leader->identity) last_renewal = s.renew_time;
    if (s.holder_identity == follower->identity && !takeover) takeover = s.acquire_time;
  }
  ASSERT_TRUE(last_renewal && takeover);
  EXPECT_GE(*takeover - *last_renewal, milliseconds(2000 - 20));
  EXPECT_EQ(specs.back().lease_transitions, specs.front().lease_transitions + 1);

  follower->Stop();
  EXPECT_EQ(sampler.both(), 0);
  EXPECT_GT(sampler.some(), 0);
  ExpectNoOverlap({a.get(), b.get()}, history.Specs());
}

TEST_F(LeaderElectionTest, ReleasedLeaseIsTakenOverWithinARetryPeriod) {
  LeaseHistory history(*client_, lease_name_);
  // A long lease: a takeover well before it could expire proves the release.
  const auto config = Config(seconds(10), seconds(5), milliseconds(200), /*release=*/true);
  auto a = StartContender("contender-a", config);
  ASSERT_TRUE(a);
  ASSERT_TRUE(WaitFor([&] { return a->elector->IsLeader() && a->TermCount() == 1; }));
  auto b = StartContender("contender-b", config);
  ASSERT_TRUE(b);
  Sampler sampler(*a, *b);
  ASSERT_TRUE(WaitFor([&] { return b->elector->GetLeader() == "contender-a"; }));

  a->Stop();  // clean shutdown: stop the work, then release
  const steady_clock::time_point stopped = steady_clock::now();
  ASSERT_EQ(a->TermCount(), 1u);
  const Term term = a->Terms()[0];
  ASSERT_TRUE(term.stopped && term.work_ended);
  const LeaseSpec released = ReadLease();
  if (released.holder_identity != "contender-b") {
    EXPECT_EQ(released.holder_identity, "");
    EXPECT_EQ(released.lease_duration_seconds, 1);
  }

  ASSERT_TRUE(WaitFor([&] { return b->elector->IsLeader(); }));
  EXPECT_LT(steady_clock::now() - stopped, seconds(5));
  ASSERT_TRUE(WaitFor([&] { return b->TermCount() == 1; }));
  // The old leader's work had ended before the new leader started.
  EXPECT_LE(*term.work_ended, b->Terms()[0].started);
  b->Stop();
  EXPECT_EQ(sampler.both(), 0);
  ExpectNoOverlap({a.get(), b.get()}, history.Specs());
}

TEST_F(LeaderElectionTest, LeaderThatCannotRenewStepsDownBeforeTheLeaseExpires) {
  LeaseHistory history(*client_, lease_name_);
  // 3 s between the renew deadline and expiry: room for a loaded CI machine.
  const auto config = Config(milliseconds(4000), milliseconds(1000), milliseconds(200),
                             /*release=*/true);
  auto a = StartContender("contender-a", config);
  ASSERT_TRUE(a);
  ASSERT_TRUE(WaitFor([&] { return a->elector->IsLeader() && a->TermCount() == 1; }));
  auto b = StartContender("contender-b", config);
  ASSERT_TRUE(b);
  Sampler sampler(*a, *b);
  ASSERT_TRUE(WaitFor([&] { return b->elector->GetLeader() == "contender-a"; }));

  const int failures_before = AuditedLeaseUpdates(500);
  ASSERT_TRUE(
      server_->faults().Set("error=500,verb=update,resource=leases.coordination.k8s.io").ok());
  // IsLeader() turns false just before OnStoppedLeading runs: wait for the callback.
  ASSERT_TRUE(WaitFor([&] {
    std::vector<Term> terms = a->Terms();
    return !terms.empty() && terms[0].stopped_wall.has_value();
  }));
  EXPECT_FALSE(a->elector->IsLeader());
  ASSERT_EQ(a->TermCount(), 1u);
  const Term term = a->Terms()[0];
  ASSERT_TRUE(term.stopped_wall.has_value());
  const LeaseSpec last = ReadLease();
  ASSERT_EQ(last.holder_identity, "contender-a");
  ASSERT_TRUE(last.renew_time.has_value());
  // It stopped after its renew deadline but before others could see the
  // lease expire (a lease duration after that renewal at the earliest).
  EXPECT_LT(*term.stopped_wall, *last.renew_time + seconds(last.lease_duration_seconds));
  EXPECT_GE(*term.stopped_wall, *last.renew_time + milliseconds(1000 - 20));
  EXPECT_GT(AuditedLeaseUpdates(500), failures_before);
  // Nobody can write the Lease, so nobody leads, even once it has expired
  // and the follower has tried to take it over for a while.
  const auto expired = *last.renew_time + seconds(last.lease_duration_seconds) + seconds(1);
  ASSERT_TRUE(WaitFor([&] {
    return system_clock::now() > expired && AuditedLeaseUpdates(500) > failures_before + 20;
  }));
  EXPECT_EQ(b->TermCount(), 0u);
  EXPECT_FALSE(a->elector->IsLeader());

  server_->faults().Clear();
  ASSERT_TRUE(WaitFor([&] { return a->elector->IsLeader() || b->elector->IsLeader(); }));
  a->Stop();
  b->Stop();
  EXPECT_EQ(sampler.both(), 0);
  ExpectNoOverlap({a.get(), b.get()}, history.Specs());
}

TEST_F(LeaderElectionTest, StaleLeaseOfAnotherHostIsTakenOnlyAfterAFullLeaseDuration) {
  // A Lease left by a host that died long ago, by its clock.
  Json lease{{"apiVersion", "coordination.k8s.io/v1"},
             {"kind", "Lease"},
             {"metadata", {{"name", lease_name_}, {"namespace", "default"}}}};
  const auto long_ago = system_clock::now() - std::chrono::hours(1);
  SetLeaseSpec(lease, {"ghost", 2, long_ago, long_ago, 4});
  ASSERT_TRUE(client_->Create(resources::kLeases, "default", lease).ok());

  const system_clock::time_point started = system_clock::now();
  auto a = StartContender("contender-a", Config(milliseconds(2000), milliseconds(1000),
                                                milliseconds(200), /*release=*/true));
  ASSERT_TRUE(a);
  ASSERT_TRUE(WaitFor([&] { return a->elector->IsLeader(); }));
  const LeaseSpec taken = ReadLease();
  EXPECT_EQ(taken.holder_identity, "contender-a");
  EXPECT_EQ(taken.lease_transitions, 5);
  ASSERT_TRUE(taken.acquire_time.has_value());
  EXPECT_GE(*taken.acquire_time - started, milliseconds(2000 - 20));
  {
    std::lock_guard<std::mutex> lk(a->mu);
    EXPECT_EQ(a->new_leaders, (std::vector<std::string>{"ghost", "contender-a"}));
  }
  a->Stop();
}

}  // namespace
}  // namespace gpuop::kube
