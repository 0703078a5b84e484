// Controller (src/kube/controller.h): informer events become keys, workers
// reconcile them from the cache, and the requeue policy: errors and
// exceptions back off, requeue_after is honoured, success forgets; a key is
// never reconciled by two workers at once; Run waits for the caches.
#include "kube/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "kube/client.h"
#include "kube/object.h"
#include "sim/kube/server.h"
#include "tests/testing/wait.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kDeadline = seconds(30);

using gpuop::testing::WaitFor;

WorkQueueOptions FastQueue() {
  WorkQueueOptions o;
  o.rate_limiter.base_delay = milliseconds(1);
  o.rate_limiter.max_delay = milliseconds(50);
  return o;
}

// Runs a controller on its own thread until the end of the scope.
class Running {
 public:
  explicit Running(Controller& c)
      : thread_([this, &c](std::stop_token stop) { status_ = c.Run(stop); }) {}
  ~Running() { (void)Stop(); }
  Status Stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
    return status_;
  }

 private:
  Status status_;
  std::jthread thread_;
};

// Calls per key, thread-safe.
class Calls {
 public:
  int Add(const std::string& key) {
    std::lock_guard lock(mu_);
    return ++calls_[key];
  }
  int Of(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto it = calls_.find(key);
    return it == calls_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
};

TEST(ControllerTest, ReconcilesChangedObjectsFromTheCache) {
  simkube::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  so.threads = 16;
  auto server = simkube::ApiServer::Start(std::move(so));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  RestConfig config;
  config.server = (*server)->url();
  config.qps = 0;
  auto client = Client::New(config);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto create = [&](const std::string& name, const std::string& value) {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", name}}},
               {"data", {{"k", value}}}};
    ASSERT_TRUE((*client)->Create(resources::kConfigMaps, "default", cm).ok());
  };
  create("a", "1");

  InformerOptions io;
  io.resource = resources::kConfigMaps;
  io.ns = "default";
  Informer informer(client->get(), io);
  std::mutex mu;
  std::map<std::string, std::string> seen;  // key -> data.k read from the cache
  Controller controller("configmaps", FastQueue(), 2, [&](const std::string& key) {
    ObjectPtr obj = informer.Get(key);
    std::lock_guard lock(mu);
    seen[key] = obj ? obj->at("data").at("k").get<std::string>() : "<gone>";
    return ReconcileResult::Ok();
  });
  controller.Watch(informer);
  informer.Start();
  Running running(controller);

  auto seen_as = [&](const std::string& key, const std::string& value) {
    return WaitFor([&] {
      std::lock_guard lock(mu);
      auto it = seen.find(key);
      return it != seen.end() && it->second == value;
    });
  };
  ASSERT_TRUE(seen_as("default/a", "1"));
  create("b", "2");
  ASSERT_TRUE(seen_as("default/b", "2"));
  ASSERT_TRUE((*client)
                  ->Patch(resources::kConfigMaps, "default", "a", PatchType::kMerge,
                          {{"data", {{"k", "3"}}}})
                  .ok());
  ASSERT_TRUE(seen_as("default/a", "3"));
  ASSERT_TRUE((*client)->Delete(resources::kConfigMaps, "default", "b").ok());
  ASSERT_TRUE(seen_as("default/b", "<gone>"));
  EXPECT_TRUE(running.Stop().ok());
  EXPECT_EQ(controller.stats().errors, 0u);
}

TEST(ControllerTest, ErrorsAreRetriedWithBackoffAndSuccessForgets) {
  Calls calls;
  Controller controller("retry", FastQueue(), 1, [&](const std::string& key) {
    if (calls.Add(key) <= 3) return ReconcileResult::Error(Unavailable("not yet"));
    return ReconcileResult::Ok();
  });
  Running running(controller);
  controller.Enqueue("k");
  ASSERT_TRUE(WaitFor([&] { return calls.Of("k") == 4; }));
  ASSERT_TRUE(WaitFor([&] { return controller.queue().NumRequeues("k") == 0; }));
  EXPECT_EQ(controller.stats().errors, 3u);
  // Success is final: nothing is queued or delayed any more.
  EXPECT_EQ(controller.queue().DelayedLen(), 0u);
  EXPECT_EQ(controller.queue().Len(), 0u);
}

TEST(ControllerTest, BackoffGrowsWhileAKeyKeepsFailing) {
  Calls calls;
  WorkQueueOptions queue = FastQueue();
  queue.rate_limiter.max_delay = seconds(1000);
  Controller controller("failing", queue, 1, [&](const std::string& key) {
    calls.Add(key);
    return ReconcileResult::Error(Internal("always"));
  });
  Running running(controller);
  controller.Enqueue("k");
  // 1 + 2 + 4 + ... ms: 6 tries take at least 31 ms, the 12th waits 1 s.
  ASSERT_TRUE(WaitFor([&] { return controller.queue().NumRequeues("k") >= 6; }));
  EXPECT_GE(controller.queue().NumRequeues("k"), calls.Of("k") - 1);
  EXPECT_EQ(controller.queue().DelayedLen() + controller.queue().Len() <= 1, true);
}

TEST(ControllerTest, RequeueAfterIsHonoured) {
  Calls calls;
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> at;
  Controller controller("periodic", FastQueue(), 1, [&](const std::string& key) {
    {
      std::lock_guard lock(mu);
      at.push_back(std::chrono::steady_clock::now());
    }
    if (calls.Add(key) == 1) return ReconcileResult::RequeueAfter(milliseconds(100));
    return ReconcileResult::Ok();
  });
  Running running(controller);
  controller.Enqueue("k");
  ASSERT_TRUE(WaitFor([&] { return calls.Of("k") == 2; }));
  std::lock_guard lock(mu);
  ASSERT_EQ(at.size(), 2u);
  EXPECT_GE(at[1] - at[0], milliseconds(100));  // not before it was due
  EXPECT_EQ(controller.stats().requeue_after, 1u);
  EXPECT_EQ(controller.stats().errors, 0u);
  EXPECT_EQ(controller.queue().NumRequeues("k"), 0);
}

TEST(ControllerTest, RequeueWithoutDelayUsesTheRateLimiter) {
  Calls calls;
  Controller controller("requeue", FastQueue(), 1, [&](const std::string& key) {
    ReconcileResult r;
    r.requeue = calls.Add(key) < 3;
    return r;
  });
  Running running(controller);
  controller.Enqueue("k");
  ASSERT_TRUE(WaitFor([&] { return calls.Of("k") == 3; }));
  ASSERT_TRUE(WaitFor([&] { return controller.queue().NumRequeues("k") == 0; }));
  EXPECT_EQ(controller.stats().errors, 0u);
}

TEST(ControllerTest, ExceptionsAreCaughtAndRetried) {
  Calls calls;
  Controller controller("throws", FastQueue(), 1, [&](const std::string& key) {
    const int n = calls.Add(key);
    if (n == 1) throw std::runtime_error("bad state");
    if (n == 2) throw 42;  // not even a std::exception
    return ReconcileResult::Ok();
  });
  Running running(controller);
  controller.Enqueue("k");
  ASSERT_TRUE(WaitFor([&] { return calls.Of("k") == 3; }));
  EXPECT_EQ(controller.stats().exceptions, 2u);
  EXPECT_EQ(controller.stats().errors, 2u);
  EXPECT_TRUE(running.Stop().ok());
}

TEST(ControllerTest, TwoWorkersNeverReconcileTheSameKeyAtOnce) {
  std::mutex mu;
  std::set<std::string> in_flight;
  std::atomic<int> overlaps{0};
  std::atomic<int> concurrent_distinct{0};
  std::atomic<int> total{0};
  Controller controller("exclusive", FastQueue(), 2, [&](const std::string& key) {
    {
      std::lock_guard lock(mu);
      if (!in_flight.insert(key).second) ++overlaps;
      if (in_flight.size() > 1) ++concurrent_distinct;
    }
    std::this_thread::sleep_for(milliseconds(1));
    {
      std::lock_guard lock(mu);
      in_flight.erase(key);
    }
    ++total;
    return ReconcileResult::Ok();
  });
  Running running(controller);
  for (int i = 0; i < 2000 && total.load() < 300; ++i) {
    controller.Enqueue("k" + std::to_string(i % 3));
    if (i % 4 == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_TRUE(WaitFor([&] { return controller.queue().Len() == 0; }));
  EXPECT_TRUE(running.Stop().ok());
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(total.load(), 3);
}

TEST(ControllerTest, RunWaitsForTheCachesAndMapsEventsToKeys) {
  // An informer fed by hand: pods whose events enqueue their node's name.
  InformerOptions io;
  io.resource = resources::kPods;
  Informer pods(nullptr, io);
  Calls calls;
  Controller controller("nodes-from-pods", FastQueue(), 1, [&](const std::string& key) {
    calls.Add(key);
    return ReconcileResult::Ok();
  });
  controller.Watch(pods, [](const Json& pod) {
    std::string node = PodNodeName(pod);
    return node.empty() ? std::vector<std::string>{} : std::vector<std::string>{node};
  });
  auto pod = [](const std::string& name, const std::string& node, const std::string& rv) {
    return Json{{"metadata", {{"name", name}, {"namespace", "ns"}, {"resourceVersion", rv}}},
                {"spec", {{"nodeName", node}}}};
  };

  // Not synced: Run waits, and gives up when stopped first.
  {
    std::stop_source stop;
    Status s;
    std::thread run([&] { s = controller.Run(stop.get_token()); });
    stop.request_stop();
    run.join();
    EXPECT_EQ(s.code(), StatusCode::kAborted);
    EXPECT_EQ(calls.Of("node-1"), 0);
  }

  Controller mapped("mapped", FastQueue(), 1, [&](const std::string& key) {
    calls.Add(key);
    return ReconcileResult::Ok();
  });
  mapped.Watch(pods, [](const Json& pod) {
    std::string node = PodNodeName(pod);
    return node.empty() ? std::vector<std::string>{} : std::vector<std::string>{node};
  });
  Running running(mapped);
  pods.Replace({pod("p1", "node-1", "1"), pod("p2", "node-1", "2")}, "2");
  ASSERT_TRUE(WaitFor([&] { return calls.Of("node-1") >= 1; }));
  // A pod moving nodes concerns both.
  pods.ApplyEvent({WatchEvent::Type::kModified, pod("p2", "node-2", "3")});
  ASSERT_TRUE(WaitFor([&] { return calls.Of("node-2") == 1 && calls.Of("node-1") >= 2; }));
  pods.ApplyEvent({WatchEvent::Type::kDeleted, pod("p1", "node-3", "4")});
  ASSERT_TRUE(WaitFor([&] { return calls.Of("node-3") == 1; }));
}

}  // namespace
}  // namespace gpuop::kube
