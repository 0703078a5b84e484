#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "sim/kube/store.h"
#include "tests/unit/simkube/store_testing.h"

namespace gpuop::simkube {
namespace {

using nlohmann::json;
using namespace gpuop::simkube::testing;  // NOLINT
using Type = WatchEvent::Type;

constexpr auto kWait = std::chrono::seconds(30);

std::unique_ptr<Watcher> MustWatch(Store& store, const ResourceInfo& r, std::string_view ns,
                                   WatchOptions opts = {}) {
  auto w = store.Watch(r, ns, opts);
  EXPECT_TRUE(w.ok()) << w.error().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

WatchEvent MustNext(Watcher& w) {
  auto ev = w.Next(kWait);
  EXPECT_TRUE(ev.has_value()) << "no event; closed=" << w.closed() << " " << w.close_reason();
  return ev.value_or(WatchEvent{Type::kError, nullptr, 0});
}

std::string NameOf(const WatchEvent& ev) {
  return ev.object ? (*ev.object)["metadata"].value("name", "") : "";
}

TEST(WatchTest, FromEmptyVersionSendsCurrentObjectsFirst) {
  Store store(ManualGc());
  ASSERT_TRUE(store.Create(Nodes(), "", Named("b")).ok());
  ASSERT_TRUE(store.Create(Nodes(), "", Named("a")).ok());
  auto w = MustWatch(store, Nodes(), "");
  WatchEvent e1 = MustNext(*w);
  WatchEvent e2 = MustNext(*w);
  EXPECT_EQ(e1.type, Type::kAdded);
  EXPECT_EQ(NameOf(e1), "a");
  EXPECT_EQ(NameOf(e2), "b");
  EXPECT_FALSE(w->Next(std::chrono::milliseconds(1)).has_value());
  EXPECT_FALSE(w->closed());

  ASSERT_TRUE(store
                  .Patch(Nodes(), "", "a", json{{"metadata", {{"labels", {{"x", "1"}}}}}},
                         PatchOptions{PatchType::kMerge})
                  .ok());
  ASSERT_TRUE(store.Delete(Nodes(), "", "b").ok());
  ASSERT_TRUE(store.Create(Nodes(), "", Named("c")).ok());
  WatchEvent m = MustNext(*w);
  EXPECT_EQ(m.type, Type::kModified);
  EXPECT_EQ((*m.object)["metadata"]["labels"]["x"], "1");
  WatchEvent d = MustNext(*w);
  EXPECT_EQ(d.type, Type::kDeleted);
  EXPECT_EQ(NameOf(d), "b");
  EXPECT_EQ((*d.object)["metadata"]["resourceVersion"], std::to_string(d.resource_version));
  WatchEvent a = MustNext(*w);
  EXPECT_EQ(a.type, Type::kAdded);
  EXPECT_EQ(NameOf(a), "c");
  EXPECT_LT(m.resource_version, d.resource_version);
  EXPECT_LT(d.resource_version, a.resource_version);
  EXPECT_EQ(a.ToJson()["type"], "ADDED");
  EXPECT_EQ(a.ToJson()["object"]["metadata"]["name"], "c");
}

TEST(WatchTest, FromVersionReplaysLaterEventsOnly) {
  Store store(ManualGc());
  auto n1 = store.Create(Nodes(), "", Named("n1"));
  ASSERT_TRUE(n1.ok());
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("other")).ok());  // other resource
  ASSERT_TRUE(store.Create(Nodes(), "", Named("n2")).ok());
  WatchOptions opts;
  opts.resource_version = Rv(*n1);
  auto w = MustWatch(store, Nodes(), "", opts);
  WatchEvent e = MustNext(*w);
  EXPECT_EQ(e.type, Type::kAdded);
  EXPECT_EQ(NameOf(e), "n2");
  EXPECT_FALSE(w->Next(std::chrono::milliseconds(1)).has_value());
  // Initial events can be switched off for "" too.
  WatchOptions none;
  none.send_initial_events = false;
  auto w2 = MustWatch(store, Nodes(), "", none);
  EXPECT_FALSE(w2->Next(std::chrono::milliseconds(1)).has_value());
  ASSERT_TRUE(store.Create(Nodes(), "", Named("n3")).ok());
  EXPECT_EQ(NameOf(MustNext(*w2)), "n3");
}

TEST(WatchTest, TooOldResourceVersionGets410) {
  StoreOptions o = ManualGc();
  o.history_size = 5;
  Store store(o);
  auto first = store.Create(ConfigMaps(), "default", Named("c0"));
  ASSERT_TRUE(first.ok());
  for (int i = 1; i < 10; ++i) {
    ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("c" + std::to_string(i))).ok());
  }
  WatchOptions opts;
  opts.resource_version = Rv(*first);
  auto w = MustWatch(store, ConfigMaps(), "default", opts);
  WatchEvent e = MustNext(*w);
  ASSERT_EQ(e.type, Type::kError);
  EXPECT_EQ((*e.object)["kind"], "Status");
  EXPECT_EQ((*e.object)["code"], 410);
  EXPECT_EQ((*e.object)["reason"], "Expired");
  EXPECT_NE((*e.object)["message"].get<std::string>().find("too old resource version"),
            std::string::npos);
  EXPECT_FALSE(w->Next(std::chrono::milliseconds(1)).has_value());
  EXPECT_TRUE(w->closed());
  EXPECT_EQ(e.ToJson()["type"], "ERROR");

  // Within the window it works.
  WatchOptions recent;
  recent.resource_version = std::to_string(store.CurrentResourceVersion() - 2);
  auto ok = MustWatch(store, ConfigMaps(), "default", recent);
  EXPECT_EQ(MustNext(*ok).type, Type::kAdded);
  EXPECT_EQ(MustNext(*ok).type, Type::kAdded);

  // ForceCompaction makes everything older expire.
  store.ForceCompaction(store.CurrentResourceVersion());
  auto gone = MustWatch(store, ConfigMaps(), "default", recent);
  EXPECT_EQ(MustNext(*gone).type, Type::kError);

  WatchOptions bad;
  bad.resource_version = "abc";
  auto r = store.Watch(ConfigMaps(), "default", bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 400);
}

TEST(WatchTest, Bookmarks) {
  StoreOptions o;
  o.seed = 3;
  o.bookmark_interval = std::chrono::milliseconds(20);
  Store store(o);
  WatchOptions opts;
  opts.allow_bookmarks = true;
  opts.send_initial_events = false;
  auto w = MustWatch(store, Nodes(), "", opts);
  WatchOptions plain;
  plain.send_initial_events = false;
  auto no_bm = MustWatch(store, Nodes(), "", plain);
  ASSERT_TRUE(store.Create(Nodes(), "", Named("n1")).ok());
  EXPECT_EQ(MustNext(*w).type, Type::kAdded);
  // A periodic bookmark arrives, carrying the current resourceVersion.
  WatchEvent bm = MustNext(*w);
  ASSERT_EQ(bm.type, Type::kBookmark);
  EXPECT_EQ((*bm.object)["kind"], "Node");
  EXPECT_EQ((*bm.object)["apiVersion"], "v1");
  EXPECT_EQ((*bm.object)["metadata"]["resourceVersion"],
            std::to_string(store.CurrentResourceVersion()));
  EXPECT_EQ(bm.ToJson()["type"], "BOOKMARK");
  // A watcher that did not ask gets none.
  EXPECT_EQ(MustNext(*no_bm).type, Type::kAdded);
  EXPECT_FALSE(no_bm->Next(std::chrono::milliseconds(100)).has_value());
}

TEST(WatchTest, SendInitialEventsEndsWithAnnotatedBookmark) {
  Store store(ManualGc());
  ASSERT_TRUE(store.Create(Nodes(), "", Named("n1")).ok());
  WatchOptions opts;
  opts.send_initial_events = true;
  opts.allow_bookmarks = true;
  auto w = MustWatch(store, Nodes(), "", opts);
  EXPECT_EQ(MustNext(*w).type, Type::kAdded);
  WatchEvent end = MustNext(*w);
  ASSERT_EQ(end.type, Type::kBookmark);
  EXPECT_EQ((*end.object)["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  store.SendBookmarks();
  WatchEvent bm = MustNext(*w);
  EXPECT_EQ(bm.type, Type::kBookmark);
  EXPECT_FALSE((*bm.object)["metadata"].contains("annotations"));
}

TEST(WatchTest, SelectorsTurnTransitionsIntoAddedAndDeleted) {
  Store store(ManualGc());
  WatchOptions opts;
  opts.label_selector = "gpu=true";
  auto w = MustWatch(store, Nodes(), "", opts);
  ASSERT_TRUE(store.Create(Nodes(), "", Named("cpu")).ok());  // never matches
  ASSERT_TRUE(store
                  .Patch(Nodes(), "", "cpu", json{{"metadata", {{"labels", {{"gpu", "true"}}}}}},
                         PatchOptions{PatchType::kMerge})
                  .ok());
  auto off = store.Patch(Nodes(), "", "cpu", json{{"metadata", {{"labels", {{"gpu", "false"}}}}}},
                         PatchOptions{PatchType::kMerge});
  ASSERT_TRUE(off.ok());
  WatchEvent added = MustNext(*w);
  EXPECT_EQ(added.type, Type::kAdded);
  EXPECT_EQ((*added.object)["metadata"]["labels"]["gpu"], "true");
  WatchEvent deleted = MustNext(*w);
  EXPECT_EQ(deleted.type, Type::kDeleted);
  // The previous content (that matched), with the event's resourceVersion.
  EXPECT_EQ((*deleted.object)["metadata"]["labels"]["gpu"], "true");
  EXPECT_EQ((*deleted.object)["metadata"]["resourceVersion"], Rv(*off));
  ASSERT_TRUE(store.Delete(Nodes(), "", "cpu").ok());  // no longer matching: no event
  EXPECT_FALSE(w->Next(std::chrono::milliseconds(20)).has_value());

  WatchOptions fopts;
  fopts.field_selector = "metadata.name=p1";
  auto fw = MustWatch(store, Pods(), "default", fopts);
  ASSERT_TRUE(store.Create(Pods(), "default", Named("p0")).ok());
  ASSERT_TRUE(store.Create(Pods(), "default", Named("p1")).ok());
  EXPECT_EQ(NameOf(MustNext(*fw)), "p1");
  fopts.field_selector = "spec.bogus=1";
  EXPECT_FALSE(store.Watch(Pods(), "default", fopts).ok());
}

TEST(WatchTest, NamespaceScope) {
  Store store(ManualGc());
  WatchOptions opts;
  opts.send_initial_events = false;
  auto w = MustWatch(store, ConfigMaps(), "kube-system", opts);
  auto all = MustWatch(store, ConfigMaps(), "", opts);
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("a")).ok());
  ASSERT_TRUE(store.Create(ConfigMaps(), "kube-system", Named("b")).ok());
  EXPECT_EQ(NameOf(MustNext(*w)), "b");
  EXPECT_EQ(NameOf(MustNext(*all)), "a");
  EXPECT_EQ(NameOf(MustNext(*all)), "b");
}

TEST(WatchTest, SlowWatcherIsClosed) {
  StoreOptions o = ManualGc();
  o.watcher_queue_size = 5;
  Store store(o);
  WatchOptions opts;
  opts.send_initial_events = false;
  auto w = MustWatch(store, ConfigMaps(), "default", opts);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("c" + std::to_string(i))).ok());
  }
  // What was queued is still delivered, then the stream ends.
  int delivered = 0;
  while (auto ev = w->Next(std::chrono::seconds(5))) ++delivered;
  EXPECT_EQ(delivered, 5);
  EXPECT_TRUE(w->closed());
  EXPECT_EQ(w->close_reason(), "too slow");
  EXPECT_EQ(store.Counters().watchers_closed_slow, 1u);
  // Writers were never blocked, and new watchers work.
  auto again = MustWatch(store, ConfigMaps(), "default", {});
  EXPECT_EQ(MustNext(*again).type, Type::kAdded);
}

TEST(WatchTest, StopAndStoreShutdownEndWatches) {
  auto store = std::make_unique<Store>(ManualGc());
  auto w = MustWatch(*store, Nodes(), "", {});
  auto w2 = MustWatch(*store, Nodes(), "", {});
  w2->Stop();
  EXPECT_TRUE(w2->closed());
  EXPECT_EQ(store->Counters().watchers, 1u);
  std::thread waiter([&] { EXPECT_FALSE(w->Next(kWait).has_value()); });
  store.reset();
  waiter.join();
  EXPECT_TRUE(w->closed());
  EXPECT_EQ(w->close_reason(), "store shut down");
}

// Many writers and watchers: every watcher sees every write to the resource,
// in resourceVersion order, without gaps.
TEST(WatchTest, ConcurrentWritersAndWatchersSeeGapFreeOrderedHistory) {
  StoreOptions o;
  o.seed = 9;
  Store store(o);
  constexpr int kObjects = 8;
  constexpr int kWriters = 4;
  constexpr int kUpdatesPerWriter = 150;
  constexpr int kWatchers = 6;
  for (int i = 0; i < kObjects; ++i) {
    ASSERT_TRUE(store.Create(Nodes(), "", Named("n" + std::to_string(i))).ok());
  }
  const uint64_t start = store.CurrentResourceVersion();
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    WatchOptions opts;
    opts.resource_version = std::to_string(start);
    opts.allow_bookmarks = i % 2 == 0;
    watchers.push_back(MustWatch(store, Nodes(), "", opts));
  }
  const uint64_t total = kWriters * kUpdatesPerWriter;
  std::vector<std::vector<uint64_t>> seen(kWatchers);
  std::vector<std::thread> readers;
  for (int i = 0; i < kWatchers; ++i) {
    readers.emplace_back([&, i] {
      while (seen[i].size() < total) {
        auto ev = watchers[i]->Next(kWait);
        if (!ev) return;
        if (ev->type == Type::kBookmark) continue;
        seen[i].push_back(ev->resource_version);
      }
    });
  }
  std::atomic<int> conflicts{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kUpdatesPerWriter; ++i) {
        std::string name = "n" + std::to_string((w + i) % kObjects);
        if (i % 3 == 0) {
          // Read-modify-write with conflicts, retried like a client would.
          while (true) {
            auto cur = store.Get(Nodes(), "", name);
            ASSERT_TRUE(cur.ok());
            json obj = **cur;
            obj["metadata"]["annotations"]["w" + std::to_string(w)] = std::to_string(i);
            auto u = store.Update(Nodes(), "", name, obj);
            if (u.ok()) break;
            ASSERT_EQ(u.error().code, 409);
            ++conflicts;
          }
        } else {
          auto p = store.Patch(
              Nodes(), "", name,
              json{{"metadata", {{"labels", {{"w" + std::to_string(w), std::to_string(i)}}}}}},
              PatchOptions{PatchType::kMerge});
          ASSERT_TRUE(p.ok()) << p.error().ToString();
        }
        if (i % 50 == 0) store.SendBookmarks();
      }
    });
  }
  for (auto& t : writers) t.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(store.CurrentResourceVersion(), start + total);
  for (int i = 0; i < kWatchers; ++i) {
    ASSERT_EQ(seen[i].size(), total) << "watcher " << i;
    for (uint64_t k = 0; k < total; ++k) {
      ASSERT_EQ(seen[i][k], start + 1 + k) << "watcher " << i << " event " << k;
    }
  }
  // Final state agrees with the last event each watcher saw.
  auto list = store.List(Nodes(), "");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->resource_version, std::to_string(start + total));
}

}  // namespace
}  // namespace gpuop::simkube
