// The event recorder (src/kube/event_recorder.h) against the in-process API
// emulator: the Event written and its fields, aggregation into one Event
// with a count (in the queue and by PATCH), separate Events per reason and
// type, cluster-scoped objects in "default", a full queue dropping and
// counting, the aggregation window and the spam filter on a fake clock.
#include "kube/event_recorder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>

#include "kube/client.h"
#include "kube/object.h"
#include "sim/kube/server.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::system_clock;
using ::testing::StartsWith;

constexpr milliseconds kFlush{20000};

// Events' times near the real time: the fake clock starts at this second.
Clock::WallTime ThisSecond() { return std::chrono::floor<seconds>(system_clock::now()); }

class EventRecorderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    simkube::ServerOptions o;
    o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    o.threads = 16;
    auto s = simkube::ApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    server_->faults().Clear();
    RestConfig c;
    c.server = server_->url();
    c.qps = 0;
    auto client = Client::New(c, RetryPolicy{3, milliseconds(10), milliseconds(100)});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
    // A namespace of the test's own, so Events of other tests never count.
    ns_ = "ev-";
    for (char ch : std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
      if (std::isalnum(static_cast<unsigned char>(ch))) {
        ns_ += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      }
    }
    ns_ = ns_.substr(0, 60);
    auto created = client_->Create(resources::kNamespaces, "", {{"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  void TearDown() override {
    if (server_ != nullptr) server_->faults().Clear();
  }

  EventRecorderOptions Options() const {
    EventRecorderOptions o;
    o.component = "gpuop-operator";
    o.host = "node-a";
    return o;
  }

  // A ConfigMap stored in the test's namespace: a real uid and resourceVersion.
  Json StoredObject(const std::string& name) {
    Json cm{{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", name}, {"namespace", ns_}}}};
    auto created = client_->Create(resources::kConfigMaps, ns_, cm);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : cm;
  }

  std::vector<Json> EventsIn(const std::string& ns) {
    auto list = client_->List(resources::kEvents, ns);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() ? list->items : std::vector<Json>{};
  }

  static simkube::ApiServer* server_;
  std::unique_ptr<Client> client_;
  std::string ns_;
};

simkube::ApiServer* EventRecorderTest::server_ = nullptr;

TEST_F(EventRecorderTest, OneEventCreatesAnEventWithTheFieldsKubectlShows) {
  const Json cm = StoredObject("driver-config");
  EventRecorder recorder(*client_, Options());
  recorder.Eventf(cm, EventType::kWarning, "DriverFailed", "GPU %d (%s) lost", 3, "NVIDIA L40S");
  ASSERT_TRUE(recorder.Flush(kFlush));

  std::vector<Json> events = EventsIn(ns_);
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0];
  EXPECT_THAT(Name(e), StartsWith("driver-config."));
  EXPECT_EQ(Name(e).substr(14).find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(Namespace(e), ns_);
  EXPECT_EQ(e["involvedObject"], (Json{{"apiVersion", "v1"},
                                       {"kind", "ConfigMap"},
                                       {"name", "driver-config"},
                                       {"namespace", ns_},
                                       {"uid", Uid(cm)},
                                       {"resourceVersion", ResourceVersion(cm)}}));
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["reason"], "DriverFailed");
  EXPECT_EQ(e["message"], "GPU 3 (NVIDIA L40S) lost");
  EXPECT_EQ(e["source"], (Json{{"component", "gpuop-operator"}, {"host", "node-a"}}));
  EXPECT_EQ(e["reportingComponent"], "gpuop-operator");
  EXPECT_EQ(e["reportingInstance"], "node-a");
  EXPECT_EQ(e["count"], 1);
  auto first = ParseRfc3339(e.value("firstTimestamp", ""));
  auto last = ParseRfc3339(e.value("lastTimestamp", ""));
  ASSERT_TRUE(first && last);
  EXPECT_EQ(*first, *last);
  EXPECT_LT(system_clock::now() - *first, std::chrono::minutes(1));

  const EventRecorder::Stats stats = recorder.stats();
  EXPECT_EQ(stats.recorded, 1u);
  EXPECT_EQ(stats.created, 1u);
  EXPECT_EQ(stats.failed, 0u);
}

TEST_F(EventRecorderTest, TenIdenticalEventsBecomeOneEventWithCountTen) {
  const Json cm = StoredObject("cm");
  FakeClock clock(ThisSecond());
  EventRecorderOptions options = Options();
  options.clock = &clock;
  EventRecorder recorder(*client_, options);
  // 1 creates; 4 and then 5 more aggregate (by PATCH, or folded in the queue).
  for (int batch : {1, 4, 5}) {
    for (int i = 0; i < batch; ++i) {
      recorder.Event(cm, EventType::kNormal, "Reconciled", "all components ready");
      clock.Advance(seconds(1));
    }
    ASSERT_TRUE(recorder.Flush(kFlush));
  }
  std::vector<Json> events = EventsIn(ns_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 10);
  auto first = ParseRfc3339(events[0].value("firstTimestamp", ""));
  auto last = ParseRfc3339(events[0].value("lastTimestamp", ""));
  ASSERT_TRUE(first && last);
  EXPECT_EQ(*last - *first, seconds(9));
  const EventRecorder::Stats stats = recorder.stats();
  EXPECT_EQ(stats.recorded, 10u);
  EXPECT_EQ(stats.created, 1u);
  EXPECT_GE(stats.patched, 2u);  // at least one per later batch
  EXPECT_EQ(stats.failed, 0u);
}

TEST_F(EventRecorderTest, DifferentReasonsTypesAndObjectsAreDifferentEvents) {
  const Json a = StoredObject("a");
  const Json b = StoredObject("b");
  EventRecorder recorder(*client_, Options());
  recorder.Event(a, EventType::kNormal, "Started", "x");
  recorder.Event(a, EventType::kNormal, "Stopped", "x");
  recorder.Event(a, EventType::kWarning, "Stopped", "x");
  recorder.Event(a, EventType::kWarning, "Stopped", "y");
  recorder.Event(b, EventType::kNormal, "Started", "x");
  recorder.Event(b, EventType::kNormal, "Started", "x");
  ASSERT_TRUE(recorder.Flush(kFlush));
  std::vector<Json> events = EventsIn(ns_);
  ASSERT_EQ(events.size(), 5u);
  std::multiset<std::string> seen;
  for (const Json& e : events) {
    seen.insert(e["involvedObject"].value("name", "") + "/" + e.value("type", "") + "/" +
                e.value("reason", "") + "/" + e.value("message", "") + "/" +
                std::to_string(e.value("count", 0)));
  }
  EXPECT_EQ(seen, (std::multiset<std::string>{"a/Normal/Started/x/1", "a/Normal/Stopped/x/1",
                                              "a/Warning/Stopped/x/1", "a/Warning/Stopped/y/1",
                                              "b/Normal/Started/x/2"}));
}

TEST_F(EventRecorderTest, ClusterScopedNodeEventsGoToTheDefaultNamespace) {
  const std::string node_name = ns_ + "-node";
  auto node = client_->Create(
      resources::kNodes, "",
      {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node_name}}}});
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EventRecorder recorder(*client_, Options());
  recorder.Event(*node, EventType::kWarning, "GPUUnhealthy", "GPU 0 has XID 79");
  ASSERT_TRUE(recorder.Flush(kFlush));
  int found = 0;
  for (const Json& e : EventsIn("default")) {
    if (e["involvedObject"].value("name", "") != node_name) continue;
    ++found;
    EXPECT_EQ(Namespace(e), "default");
    EXPECT_EQ(e["involvedObject"]["kind"], "Node");
    EXPECT_FALSE(e["involvedObject"].contains("namespace"));
    EXPECT_EQ(e["involvedObject"]["uid"], Uid(*node));
  }
  EXPECT_EQ(found, 1);
  EXPECT_TRUE(EventsIn(ns_).empty());
}

TEST_F(EventRecorderTest, ListItemsGetTheirKindFromTheResource) {
  StoredObject("listed");
  auto list = client_->List(resources::kConfigMaps, ns_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->items.size(), 1u);
  Json item = list->items[0];
  item.erase("kind");
  item.erase("apiVersion");
  const ObjectReference ref = ReferenceTo(item, &resources::kConfigMaps);
  EXPECT_EQ(ref.api_version, "v1");
  EXPECT_EQ(ref.kind, "ConfigMap");
  EXPECT_EQ(ref.name, "listed");
  EXPECT_EQ(ref.namespace_, ns_);
  EXPECT_EQ(ref.uid, Uid(item));
  EXPECT_EQ(ReferenceTo(item).kind, "");
  EventRecorder recorder(*client_, Options());
  recorder.Event(ref, EventType::kNormal, "Seen", "from a list");
  ASSERT_TRUE(recorder.Flush(kFlush));
  std::vector<Json> events = EventsIn(ns_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "ConfigMap");
}

TEST_F(EventRecorderTest, FullQueueDropsAndCountsWithoutBlocking) {
  const Json cm = StoredObject("busy");
  EventRecorderOptions options = Options();
  options.queue_size = 3;
  EventRecorder recorder(*client_, options);
  // Hold every API request: the sender blocks on its first Event, the queue fills.
  ASSERT_TRUE(server_->faults().Set("pause").ok());
  for (int i = 0; i < 10; ++i) {
    recorder.Event(cm, EventType::kNormal, "Tick", "tick " + std::to_string(i));
  }
  EventRecorder::Stats stats = recorder.stats();
  // At most one in flight and three queued; the rest are dropped and counted.
  EXPECT_GE(stats.dropped_queue_full, 6u);
  EXPECT_LE(stats.dropped_queue_full, 7u);
  EXPECT_EQ(stats.recorded + stats.dropped_queue_full, 10u);
  EXPECT_FALSE(recorder.Flush(milliseconds(50)));  // still held

  server_->faults().Clear();
  ASSERT_TRUE(recorder.Flush(kFlush));
  stats = recorder.stats();
  EXPECT_EQ(stats.created, stats.recorded);
  EXPECT_EQ(EventsIn(ns_).size(), stats.recorded);
}

TEST_F(EventRecorderTest, RepeatAfterTheAggregationWindowIsANewEvent) {
  const Json cm = StoredObject("cm");
  FakeClock clock(ThisSecond());
  EventRecorderOptions options = Options();
  options.clock = &clock;
  EventRecorder recorder(*client_, options);
  recorder.Event(cm, EventType::kNormal, "Synced", "ok");
  ASSERT_TRUE(recorder.Flush(kFlush));
  clock.Advance(std::chrono::minutes(9));  // within 10 minutes of the last one
  recorder.Event(cm, EventType::kNormal, "Synced", "ok");
  ASSERT_TRUE(recorder.Flush(kFlush));
  ASSERT_EQ(EventsIn(ns_).size(), 1u);
  clock.Advance(std::chrono::minutes(11));
  recorder.Event(cm, EventType::kNormal, "Synced", "ok");
  ASSERT_TRUE(recorder.Flush(kFlush));
  std::vector<Json> events = EventsIn(ns_);
  ASSERT_EQ(events.size(), 2u);
  std::multiset<int> counts{events[0].value("count", 0), events[1].value("count", 0)};
  EXPECT_EQ(counts, (std::multiset<int>{1, 2}));
}

TEST_F(EventRecorderTest, DeletedEventIsCreatedAgainWithTheWholeCount) {
  const Json cm = StoredObject("cm");
  EventRecorder recorder(*client_, Options());
  recorder.Event(cm, EventType::kNormal, "Synced", "ok");
  ASSERT_TRUE(recorder.Flush(kFlush));
  std::vector<Json> events = EventsIn(ns_);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(client_->Delete(resources::kEvents, ns_, Name(events[0])).ok());
  recorder.Event(cm, EventType::kNormal, "Synced", "ok");
  ASSERT_TRUE(recorder.Flush(kFlush));
  events = EventsIn(ns_);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 2);
  EXPECT_EQ(recorder.stats().failed, 0u);
}

TEST_F(EventRecorderTest, SpamFilterCapsEventsPerObjectAndReason) {
  const Json cm = StoredObject("noisy");
  const Json quiet = StoredObject("quiet");
  FakeClock clock(ThisSecond());
  EventRecorderOptions options = Options();
  options.clock = &clock;
  options.spam_burst = 3;
  options.spam_refill_interval = seconds(60);
  EventRecorder recorder(*client_, options);
  for (int i = 0; i < 5; ++i) {
    recorder.Event(cm, EventType::kWarning, "Flapping", "flap " + std::to_string(i));
  }
  EXPECT_EQ(recorder.stats().dropped_spam, 2u);
  // Another reason, or another object, has its own allowance.
  recorder.Event(cm, EventType::kWarning, "Other", "x");
  recorder.Event(quiet, EventType::kWarning, "Flapping", "x");
  EXPECT_EQ(recorder.stats().dropped_spam, 2u);
  // One token comes back per refill interval.
  clock.Advance(seconds(60));
  recorder.Event(cm, EventType::kWarning, "Flapping", "flap 5");
  recorder.Event(cm, EventType::kWarning, "Flapping", "flap 6");
  EXPECT_EQ(recorder.stats().dropped_spam, 3u);
  ASSERT_TRUE(recorder.Flush(kFlush));
  int flapping = 0;
  for (const Json& e : EventsIn(ns_)) flapping += e.value("reason", "") == "Flapping";
  EXPECT_EQ(flapping, 5);  // 3 + 1 for "noisy", 1 for "quiet"
}

}  // namespace
}  // namespace gpuop::kube
