#include "manager/manager.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/wait.h"

namespace gpuop::manager {
namespace {

using testing::WaitFor;

// A runnable that works until stopped and notes when it started and stopped.
struct Journal {
  std::mutex mu;
  std::vector<std::string> lines;
  void Note(const std::string& line) {
    std::lock_guard lock(mu);
    lines.push_back(line);
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mu);
    return lines;
  }
  bool Has(const std::string& line) {
    for (const auto& l : Lines()) {
      if (l == line) return true;
    }
    return false;
  }
  RunFunction Until(const std::string& name) {
    return [this, name](std::stop_token stop) {
      Note("start " + name);
      WaitForStop(stop);
      Note("stop " + name);
      return Status::Ok();
    };
  }
};

int Port(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

TEST(ManagerTest, StopsTheRunnablesLastAddedFirst) {
  Journal journal;
  Manager m({.name = "test"});
  for (const char* name : {"cache", "controller", "server"}) m.Add(name, journal.Until(name));
  std::stop_source stop;
  auto code = std::async(std::launch::async, [&] { return m.Run(stop.get_token()); });
  ASSERT_TRUE(WaitFor([&] { return journal.Lines().size() == 3; }));
  EXPECT_TRUE(m.Leading());  // no election: this process leads
  stop.request_stop();
  EXPECT_EQ(code.get(), 0);
  const auto lines = journal.Lines();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(lines.begin() + 3, lines.end()),
            (std::vector<std::string>{"stop server", "stop controller", "stop cache"}));
  EXPECT_FALSE(m.Leading());
}

TEST(ManagerTest, ARunnableThatFailsStopsTheOthersAndTheProcessExitsOne) {
  Journal journal;
  Manager m({.name = "test"});
  m.Add("cache", journal.Until("cache"));
  m.Add("finished", [](std::stop_token) { return Status::Ok(); });  // ends only itself
  m.Add("controller", [&](std::stop_token) {
    EXPECT_TRUE(WaitFor([&] { return journal.Has("start cache"); }));
    return Unavailable("the CRD is gone");
  });
  EXPECT_EQ(m.Run(std::stop_token{}), 1);  // nobody asked it to stop
  EXPECT_TRUE(journal.Has("stop cache"));
}

TEST(ManagerTest, HealthAndReadinessAnswerFromTheChecks) {
  std::atomic<bool> synced{false};
  Manager m({.name = "test", .health_addr = "127.0.0.1:0"});
  m.AddHealthCheck("nvml", [] { return Status::Ok(); });
  m.AddReadyCheck("caches",
                  [&] { return synced ? Status::Ok() : Unavailable("caches not synced yet"); });
  m.AddRoute("/debug/thing", [] { return http::Response{.body = "thing"}; });
  std::stop_source stop;
  auto code = std::async(std::launch::async, [&] { return m.Run(stop.get_token()); });
  ASSERT_TRUE(WaitFor([&] { return !m.health_address().empty(); }));
  httplib::Client c("127.0.0.1", Port(m.health_address()));
  auto healthz = c.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  EXPECT_EQ(healthz->body, "ok");
  auto readyz = c.Get("/readyz");
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 503);
  EXPECT_EQ(readyz->body, "caches: caches not synced yet");
  synced = true;
  EXPECT_EQ(c.Get("/readyz")->status, 200);
  EXPECT_EQ(c.Get("/debug/thing")->body, "thing");
  stop.request_stop();
  EXPECT_EQ(code.get(), 0);
}

TEST(ManagerTest, AnAddressInUseIsAnErrorThatNamesTheFlag) {
  Manager first({.name = "test", .health_addr = "127.0.0.1:0"});
  std::stop_source stop;
  auto code = std::async(std::launch::async, [&] { return first.Run(stop.get_token()); });
  ASSERT_TRUE(WaitFor([&] { return !first.health_address().empty(); }));
  bool ran = false;
  Manager second({.name = "test", .health_addr = first.health_address()});
  second.Add("never", [&](std::stop_token) {
    ran = true;
    return Status::Ok();
  });
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(second.Run(std::stop_token{}), 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  // A line of its own (the first manager's "serving" log line may come
  // first: it is written after health_address() is set).
  EXPECT_NE(("\n" + err).find("\ngpuop test: cannot listen"), std::string::npos) << err;
  EXPECT_NE(err.find("(--health-addr)"), std::string::npos) << err;
  EXPECT_FALSE(ran);
  stop.request_stop();
  EXPECT_EQ(code.get(), 0);
}

TEST(ManagerTest, SighupReloadsAndSigtermStops) {
  // Signals go to this thread only (pthread_kill), which blocks them in
  // StopSignals: no other thread of the test binary can take them.
  StopSignals signals(/*hangup=*/true);
  std::atomic<int> hangups{0};
  Journal journal;
  Manager m({.name = "test", .on_hangup = [&] { ++hangups; }});
  m.Add("component", journal.Until("component"));
  const pthread_t main_thread = pthread_self();
  std::thread sender([&] {
    EXPECT_TRUE(WaitFor([&] { return journal.Has("start component"); }));
    pthread_kill(main_thread, SIGHUP);
    EXPECT_TRUE(WaitFor([&] { return hangups.load() == 1; }));
    EXPECT_FALSE(journal.Has("stop component"));
    pthread_kill(main_thread, SIGTERM);
  });
  EXPECT_EQ(m.Run(signals), 0);
  sender.join();
  EXPECT_EQ(hangups.load(), 1);
  EXPECT_TRUE(journal.Has("stop component"));
}

TEST(ManagerTest, OnlyTheLeaderRunsTheLeaderRunnablesAndAFollowerTakesOver) {
  auto api = testing::StartApiEmulator(16);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto lease_config = [](const std::string& identity) {
    kube::LeaderElectionConfig c;
    c.lease_namespace = "default";
    c.lease_name = "manager-test";
    c.identity = identity;
    c.lease_duration = std::chrono::seconds(2);
    c.renew_deadline = std::chrono::milliseconds(1000);
    c.retry_period = std::chrono::milliseconds(100);
    return c;
  };
  Journal journal;
  auto make = [&](const std::string& id) {
    auto m = std::make_unique<Manager>(ManagerOptions{
        .name = "test", .leader_election = lease_config(id), .lease_client = api->client.get()});
    m->Add("cache-" + id, journal.Until("cache-" + id));
    m->Add("controller-" + id, journal.Until("controller-" + id), /*needs_leader=*/true);
    return m;
  };
  auto a = make("a");
  std::stop_source stop_a;
  auto code_a = std::async(std::launch::async, [&] { return a->Run(stop_a.get_token()); });
  ASSERT_TRUE(WaitFor([&] { return journal.Has("start controller-a"); }));
  EXPECT_TRUE(a->Leading());

  auto b = make("b");
  std::stop_source stop_b;
  auto code_b = std::async(std::launch::async, [&] { return b->Run(stop_b.get_token()); });
  // The follower fills its cache but does not lead while a renews.
  ASSERT_TRUE(WaitFor([&] { return journal.Has("start cache-b"); }));
  EXPECT_FALSE(b->Leading());
  EXPECT_FALSE(journal.Has("start controller-b"));

  // a stops cleanly: its controller stops before its cache, the Lease is
  // released and b takes over at once.
  stop_a.request_stop();
  EXPECT_EQ(code_a.get(), 0);
  const auto lines = journal.Lines();
  auto at = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) - lines.begin();
  };
  EXPECT_LT(at("stop controller-a"), at("stop cache-a"));
  ASSERT_TRUE(WaitFor([&] { return journal.Has("start controller-b"); }));
  EXPECT_TRUE(b->Leading());
  stop_b.request_stop();
  EXPECT_EQ(code_b.get(), 0);
}

}  // namespace
}  // namespace gpuop::manager
