// Informer and SharedInformerFactory (src/kube/informer.h) against the API
// emulator: list + watch, handlers, indexes, selectors, late handlers,
// re-list after 410 with deletes for what vanished in the gap, bookmarks —
// and the property that matters most: under concurrent churn and injected
// list/watch faults, the cache ends up equal to the server's state.
#include "kube/informer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "base/memory.h"
#include "base/strings.h"
#include "kube/client.h"
#include "kube/object.h"
#include "sim/kube/server.h"
#include "tests/testing/wait.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Generous: conditions normally met in milliseconds, on a loaded 2-core CI machine under ASan.
constexpr auto kDeadline = seconds(30);

using gpuop::testing::WaitFor;

Json ConfigMap(const std::string& name, const std::map<std::string, std::string>& labels = {},
               const std::string& value = "v") {
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", name}}},
             {"data", {{"k", value}}}};
  if (!labels.empty()) cm["metadata"]["labels"] = labels;
  return cm;
}

Json Pod(const std::string& name, const std::string& node) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

Json Node(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
}

// What handlers saw, and the state they rebuild from the events alone.
class Recorder {
 public:
  EventHandler Handler() {
    EventHandler h;
    h.on_add = [this](const ObjectPtr& obj) {
      std::lock_guard lock(mu_);
      log_.push_back("add " + KeyOf(*obj));
      mirror_[KeyOf(*obj)] = ResourceVersion(*obj);
    };
    h.on_update = [this](const ObjectPtr& old, const ObjectPtr& obj) {
      std::lock_guard lock(mu_);
      log_.push_back("update " + KeyOf(*obj));
      if (KeyOf(*old) != KeyOf(*obj)) bad_updates_++;
      mirror_[KeyOf(*obj)] = ResourceVersion(*obj);
    };
    h.on_delete = [this](const ObjectPtr& obj) {
      std::lock_guard lock(mu_);
      log_.push_back("delete " + KeyOf(*obj));
      mirror_.erase(KeyOf(*obj));
    };
    return h;
  }
  bool Saw(const std::string& entry) const {
    std::lock_guard lock(mu_);
    return std::find(log_.begin(), log_.end(), entry) != log_.end();
  }
  size_t Count(const std::string& entry) const {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(std::count(log_.begin(), log_.end(), entry));
  }
  std::map<std::string, std::string> Mirror() const {
    std::lock_guard lock(mu_);
    return mirror_;
  }
  int bad_updates() const {
    std::lock_guard lock(mu_);
    return bad_updates_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> log_;
  std::map<std::string, std::string> mirror_;
  int bad_updates_ = 0;
};

std::map<std::string, std::string> CacheState(const Informer& informer) {
  std::map<std::string, std::string> out;
  for (const ObjectPtr& obj : informer.List()) out[KeyOf(*obj)] = ResourceVersion(*obj);
  return out;
}

std::set<std::string> Names(const std::vector<ObjectPtr>& objects) {
  std::set<std::string> out;
  for (const ObjectPtr& obj : objects) out.insert(Name(*obj));
  return out;
}

// Starting the emulator costs seconds under ASan (it loads the OpenAPI
// documents), so the suite shares one; each test works in namespaces of its
// own and gives its cluster-scoped objects names of its own.
class InformerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    simkube::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    o.threads = 32;
    auto server = simkube::ApiServer::Start(std::move(o));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    RestConfig config;
    config.server = server_->url();
    config.qps = 0;  // no client-side limit: the tests drive the pace
    config.timeout = seconds(20);
    RetryPolicy retry;
    retry.initial_backoff = milliseconds(5);
    retry.max_backoff = milliseconds(50);
    auto client = Client::New(config, retry);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
    configmaps_ = server_->registry().Find("", "v1", "configmaps")->info;
    static int test_number = 0;
    prefix_ = "t" + std::to_string(++test_number);
    ns_ = prefix_ + "-a";
    other_ns_ = prefix_ + "-b";
    for (const std::string& ns : {ns_, other_ns_}) {
      Create(resources::kNamespaces, "",
             {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    }
  }
  void TearDown() override {
    server_->faults().Clear();
    client_.reset();  // closes its connections before the next test
  }

  InformerOptions Options(const Resource& resource, const std::string& ns = "") {
    InformerOptions o;
    o.resource = resource;
    o.ns = ns;
    o.page_size = 50;
    o.initial_backoff = milliseconds(5);
    o.max_backoff = milliseconds(100);
    return o;
  }

  void Create(const Resource& r, const std::string& ns, const Json& obj) {
    auto created = client_->Create(r, ns, obj);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }

  // The server's configmaps in this test's namespaces: key -> resourceVersion.
  std::map<std::string, std::string> ServerState() {
    std::map<std::string, std::string> out;
    for (const std::string& ns : {ns_, other_ns_}) {
      auto list = server_->store().List(configmaps_, ns);
      EXPECT_TRUE(list.ok());
      if (!list.ok()) continue;
      for (const auto& obj : list->items) out[KeyOf(*obj)] = ResourceVersion(*obj);
    }
    return out;
  }
  // The same for a cache or handler mirror, leaving out other tests' objects.
  std::map<std::string, std::string> Ours(std::map<std::string, std::string> state) {
    std::erase_if(state,
                  [&](const auto& entry) { return !StartsWith(entry.first, prefix_ + "-"); });
    return state;
  }
  std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

  static simkube::ApiServer* server_;
  std::unique_ptr<Client> client_;
  simkube::ResourceInfo configmaps_;
  std::string prefix_, ns_, other_ns_;
};

simkube::ApiServer* InformerTest::server_ = nullptr;

TEST_F(InformerTest, ListsWatchesAndDeliversAddUpdateDelete) {
  Create(resources::kConfigMaps, ns_, ConfigMap("a"));
  Create(resources::kConfigMaps, ns_, ConfigMap("b"));
  Create(resources::kConfigMaps, other_ns_, ConfigMap("c"));

  Recorder recorder;  // outlives the informer's thread
  Informer informer(client_.get(), Options(resources::kConfigMaps));
  informer.AddEventHandler(recorder.Handler());
  EXPECT_FALSE(informer.HasSynced());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kDeadline));
  EXPECT_TRUE(recorder.Saw("add " + Key(ns_, "a")));
  EXPECT_TRUE(recorder.Saw("add " + Key(ns_, "b")));
  EXPECT_TRUE(recorder.Saw("add " + Key(other_ns_, "c")));
  ASSERT_NE(informer.Get(Key(ns_, "a")), nullptr);
  EXPECT_EQ(informer.Get(Key(ns_, "a"))->at("data").at("k"), "v");
  EXPECT_EQ(informer.Get(Key(ns_, "zzz")), nullptr);

  // Changes after the list arrive through the watch.
  ObjectPtr before = informer.Get(Key(ns_, "a"));
  auto updated = client_->Patch(resources::kConfigMaps, ns_, "a", PatchType::kMerge,
                                {{"data", {{"k", "changed"}}}});
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  ASSERT_TRUE(client_->Delete(resources::kConfigMaps, ns_, "b").ok());
  Create(resources::kConfigMaps, ns_, ConfigMap("d"));

  ASSERT_TRUE(WaitFor([&] { return recorder.Saw("add " + Key(ns_, "d")); }));
  EXPECT_TRUE(recorder.Saw("update " + Key(ns_, "a")));
  EXPECT_TRUE(recorder.Saw("delete " + Key(ns_, "b")));
  EXPECT_EQ(informer.Get(Key(ns_, "b")), nullptr);
  EXPECT_EQ(informer.Get(Key(ns_, "a"))->at("data").at("k"), "changed");
  // The snapshot a reader held is untouched by the update.
  EXPECT_EQ(before->at("data").at("k"), "v");
  EXPECT_EQ(informer.LastResourceVersion(), ResourceVersion(*informer.Get(Key(ns_, "d"))));
  EXPECT_EQ(Ours(CacheState(informer)), ServerState());
  EXPECT_EQ(Ours(recorder.Mirror()), ServerState());
  EXPECT_EQ(recorder.bad_updates(), 0);
  EXPECT_EQ(informer.stats().lists, 1u);
  informer.Stop();
}

TEST_F(InformerTest, IndexesByNamespaceNodeNameAndCustomFunctions) {
  Create(resources::kConfigMaps, ns_, ConfigMap("a", {{"app", "x"}}));
  Create(resources::kConfigMaps, ns_, ConfigMap("b", {{"app", "y"}}));
  Create(resources::kConfigMaps, other_ns_, ConfigMap("c", {{"app", "x"}}));

  Informer configmaps(client_.get(), Options(resources::kConfigMaps));
  // A custom index added before start...
  ASSERT_TRUE(configmaps
                  .AddIndex("app",
                            [](const Json& obj) {
                              auto app = Label(obj, "app");
                              return app ? std::vector<std::string>{*app}
                                         : std::vector<std::string>{};
                            })
                  .ok());
  EXPECT_EQ(configmaps.AddIndex("app", IndexByName).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(configmaps.AddIndex(std::string(kNamespaceIndex), IndexByNamespace).ok());
  // A config map informer has no node-name index until one is added.
  EXPECT_TRUE(configmaps.ByIndex(kNodeNameIndex, "").empty());
  configmaps.Start();
  ASSERT_TRUE(configmaps.WaitForSync(kDeadline));
  EXPECT_EQ(Names(configmaps.ByIndex(kNamespaceIndex, ns_)), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(Names(configmaps.ByIndex(kNamespaceIndex, other_ns_)), (std::set<std::string>{"c"}));
  EXPECT_EQ(configmaps.IndexKeys("app", "x"),
            (std::vector<std::string>{Key(ns_, "a"), Key(other_ns_, "c")}));
  EXPECT_TRUE(configmaps.ByIndex("no-such-index", "x").empty());

  // ...and one added after the cache is full is built over it at once.
  ASSERT_TRUE(configmaps
                  .AddIndex("data",
                            [](const Json& obj) {
                              return std::vector<std::string>{
                                  obj.at("data").at("k").get<std::string>()};
                            })
                  .ok());
  size_t ours = 0;
  for (const ObjectPtr& obj : configmaps.ByIndex("data", "v")) {
    if (StartsWith(KeyOf(*obj), prefix_ + "-")) ++ours;  // other tests' objects are there too
  }
  EXPECT_EQ(ours, 3u);

  // Index entries follow updates and deletes.
  ASSERT_TRUE(client_
                  ->Patch(resources::kConfigMaps, ns_, "b", PatchType::kMerge,
                          {{"metadata", {{"labels", {{"app", "x"}}}}}})
                  .ok());
  ASSERT_TRUE(client_->Delete(resources::kConfigMaps, other_ns_, "c").ok());
  ASSERT_TRUE(WaitFor([&] {
    return configmaps.IndexKeys("app", "x") ==
           std::vector<std::string>{Key(ns_, "a"), Key(ns_, "b")};
  }));
  EXPECT_TRUE(configmaps.ByIndex("app", "y").empty());
  EXPECT_TRUE(configmaps.ByIndex(kNamespaceIndex, other_ns_).empty());

  // The node-name index: spec.nodeName for pods, the node's own name for nodes.
  const std::string node1 = prefix_ + "-node-1", node2 = prefix_ + "-node-2";
  Create(resources::kNodes, "", Node(node1));
  Create(resources::kNodes, "", Node(node2));
  Create(resources::kPods, ns_, Pod("p1", node1));
  Create(resources::kPods, ns_, Pod("p2", node1));
  Create(resources::kPods, ns_, Pod("p3", node2));
  Create(resources::kPods, ns_, Pod("pending", ""));
  Informer pods(client_.get(), Options(resources::kPods, ns_));
  Informer nodes(client_.get(), Options(resources::kNodes));
  pods.Start();
  nodes.Start();
  ASSERT_TRUE(pods.WaitForSync(kDeadline));
  ASSERT_TRUE(nodes.WaitForSync(kDeadline));
  EXPECT_EQ(Names(pods.ByIndex(kNodeNameIndex, node1)), (std::set<std::string>{"p1", "p2"}));
  EXPECT_EQ(Names(pods.ByIndex(kNodeNameIndex, node2)), (std::set<std::string>{"p3"}));
  EXPECT_EQ(pods.Size(), 4u);
  EXPECT_EQ(pods.AddIndex(std::string(kNodeNameIndex), IndexByName).code(),
            StatusCode::kAlreadyExists);
  // Nodes have no built-in index (Get finds a node by its name).
  EXPECT_TRUE(nodes.ByIndex(kNodeNameIndex, node2).empty());
  EXPECT_EQ(nodes.Get(node2)->at("metadata").at("name"), node2);
}

TEST_F(InformerTest, LateHandlerGetsTheCacheAsAddsThenEvents) {
  for (const char* name : {"a", "b", "c"}) Create(resources::kConfigMaps, ns_, ConfigMap(name));
  Recorder late;  // outlives the informer's thread
  Informer informer(client_.get(), Options(resources::kConfigMaps, ns_));
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kDeadline));

  Informer::HandlerId id = informer.AddEventHandler(late.Handler());
  // The replay happens before AddEventHandler returns.
  EXPECT_EQ(late.Mirror(), CacheState(informer));
  EXPECT_EQ(late.Mirror().size(), 3u);

  Create(resources::kConfigMaps, ns_, ConfigMap("d"));
  ASSERT_TRUE(WaitFor([&] { return late.Saw("add " + Key(ns_, "d")); }));
  EXPECT_EQ(late.Count("add " + Key(ns_, "a")), 1u);

  // A removed handler hears nothing more.
  informer.RemoveEventHandler(id);
  Create(resources::kConfigMaps, ns_, ConfigMap("e"));
  ASSERT_TRUE(WaitFor([&] { return informer.Get(Key(ns_, "e")) != nullptr; }));
  EXPECT_FALSE(late.Saw("add " + Key(ns_, "e")));
}

TEST_F(InformerTest, SelectorsNarrowTheCache) {
  Create(resources::kConfigMaps, ns_, ConfigMap("in", {{"app", "x"}}));
  Create(resources::kConfigMaps, ns_, ConfigMap("out", {{"app", "y"}}));
  Create(resources::kConfigMaps, other_ns_, ConfigMap("other-ns", {{"app", "x"}}));

  InformerOptions options = Options(resources::kConfigMaps, ns_);
  options.label_selector = "app=x";
  Recorder recorder;  // outlives the informer's thread
  Informer informer(client_.get(), options);
  informer.AddEventHandler(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kDeadline));
  EXPECT_EQ(informer.ListKeys(), std::vector<std::string>{Key(ns_, "in")});

  // An object that starts matching arrives; one that stops matching leaves.
  ASSERT_TRUE(client_
                  ->Patch(resources::kConfigMaps, ns_, "out", PatchType::kMerge,
                          {{"metadata", {{"labels", {{"app", "x"}}}}}})
                  .ok());
  ASSERT_TRUE(client_
                  ->Patch(resources::kConfigMaps, ns_, "in", PatchType::kMerge,
                          {{"metadata", {{"labels", {{"app", "z"}}}}}})
                  .ok());
  ASSERT_TRUE(WaitFor([&] {
    return informer.ListKeys() == std::vector<std::string>{Key(ns_, "out")};
  })) << informer.Size();
  EXPECT_TRUE(recorder.Saw("delete " + Key(ns_, "in")));

  // A field selector.
  InformerOptions by_name = Options(resources::kConfigMaps);
  by_name.field_selector = "metadata.name=other-ns";
  Informer named(client_.get(), by_name);
  named.Start();
  ASSERT_TRUE(named.WaitForSync(kDeadline));
  EXPECT_EQ(named.ListKeys(), std::vector<std::string>{Key(other_ns_, "other-ns")});
}

TEST_F(InformerTest, RelistAfterGoneDeliversWhatChangedInTheGap) {
  for (const char* name : {"keep", "change", "remove"}) {
    Create(resources::kConfigMaps, ns_, ConfigMap(name));
  }
  InformerOptions options = Options(resources::kConfigMaps, ns_);
  options.watch_timeout = seconds(1);              // streams end every 1-2 s
  options.watch_failures_before_relist = 1000000;  // only a 410 may re-list here
  Recorder recorder;                               // outlives the informer's thread
  Informer informer(client_.get(), options);
  informer.AddEventHandler(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kDeadline));
  const ObjectPtr kept = informer.Get(Key(ns_, "keep"));

  // Open a gap: new watches fail, so once the current stream times out the
  // informer sees nothing until the faults are lifted.
  ASSERT_TRUE(server_->faults().Set("error=500,verb=watch").ok());
  const uint64_t errors_before = informer.stats().watch_errors;
  ASSERT_TRUE(WaitFor([&] { return informer.stats().watch_errors > errors_before; }));

  ASSERT_TRUE(client_->Delete(resources::kConfigMaps, ns_, "remove").ok());
  ASSERT_TRUE(client_
                  ->Patch(resources::kConfigMaps, ns_, "change", PatchType::kMerge,
                          {{"data", {{"k", "new"}}}})
                  .ok());
  Create(resources::kConfigMaps, ns_, ConfigMap("added"));
  // Forget the history: the informer's resourceVersion is now too old.
  auto compacted = client_->Raw("POST", "/gpuop-sim/compact");
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  const uint64_t lists_before = informer.stats().lists;
  EXPECT_TRUE(recorder.Saw("delete " + Key(ns_, "remove")) == false);
  server_->faults().Clear();

  ASSERT_TRUE(WaitFor([&] { return informer.stats().lists > lists_before; }));
  EXPECT_GE(informer.stats().gone, 1u);
  ASSERT_TRUE(WaitFor([&] { return CacheState(informer) == ServerState(); }));
  EXPECT_TRUE(recorder.Saw("delete " + Key(ns_, "remove")));
  EXPECT_TRUE(recorder.Saw("update " + Key(ns_, "change")));
  EXPECT_TRUE(recorder.Saw("add " + Key(ns_, "added")));
  EXPECT_EQ(recorder.Count("update " + Key(ns_, "keep")), 0u);  // unchanged: no event
  EXPECT_EQ(informer.Get(Key(ns_, "keep")), kept);              // and the same snapshot
  EXPECT_EQ(recorder.Mirror(), ServerState());

  // An injected 410 on the watch (the "gone" fault) re-lists as well.
  const uint64_t gone_before = informer.stats().gone;
  ASSERT_TRUE(server_->faults().Set("gone,verb=watch,count=1").ok());
  ASSERT_TRUE(WaitFor([&] { return informer.stats().gone > gone_before; }));
  Create(resources::kConfigMaps, ns_, ConfigMap("after-gone"));
  ASSERT_TRUE(WaitFor([&] { return informer.Get(Key(ns_, "after-gone")) != nullptr; }));
  EXPECT_EQ(CacheState(informer), ServerState());
}

TEST_F(InformerTest, BookmarksKeepTheResourceVersionFresh) {
  Create(resources::kConfigMaps, ns_, ConfigMap("a"));
  Informer informer(client_.get(), Options(resources::kConfigMaps, ns_));
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kDeadline));
  const std::string listed = informer.LastResourceVersion();

  // Writes elsewhere move the server's resourceVersion; the informer's
  // namespace sees no event, only bookmarks tell it.
  for (int i = 0; i < 3; ++i) {
    Create(resources::kConfigMaps, other_ns_, ConfigMap("elsewhere-" + std::to_string(i)));
  }
  const std::string current = std::to_string(server_->store().CurrentResourceVersion());
  ASSERT_NE(listed, current);
  EXPECT_EQ(informer.LastResourceVersion(), listed);
  // The watch may not be open yet at the first request: ask until it lands.
  ASSERT_TRUE(WaitFor([&] {
    EXPECT_TRUE(client_->Raw("POST", "/gpuop-sim/bookmarks").ok());
    return informer.LastResourceVersion() == current;
  }));
  EXPECT_EQ(informer.Size(), 1u);
}

// THE property: 1,000 objects churned by concurrent writers while the server
// drops watches, answers 410, 500 and 429 on lists and watches and compacts
// its history; once writers and faults stop, the cache (and the state the
// handlers rebuilt from events alone) equals the server's, key for key and
// resourceVersion for resourceVersion.
std::string StorageName(const ::testing::TestParamInfo<Storage>& info) {
  return info.param == Storage::kTree ? "Tree" : "Compact";
}

// Either way of keeping the cache (a compact one re-encodes every page of
// every re-list) goes through the same churn and faults.
class InformerChurnTest : public InformerTest, public ::testing::WithParamInterface<Storage> {};

INSTANTIATE_TEST_SUITE_P(Storage, InformerChurnTest,
                         ::testing::Values(Storage::kTree, Storage::kCompact), StorageName);

TEST_P(InformerChurnTest, CacheConvergesUnderChurnAndFaults) {
  constexpr int kInitial = 1000;
  constexpr int kNameSpace = 1200;
  constexpr int kWriters = 4;
  constexpr int kOpsPerWriter = 200;
  simkube::Store& store = server_->store();
  for (int i = 0; i < kInitial; ++i) {
    ASSERT_TRUE(store.Create(configmaps_, ns_, ConfigMap("cm-" + std::to_string(i))).ok());
  }

  InformerOptions options = Options(resources::kConfigMaps, ns_);
  options.page_size = 100;
  options.watch_timeout = seconds(1);  // streams also end normally, every 1-2 s
  options.storage = GetParam();
  Recorder recorder;                   // outlives the informer's thread
  Informer informer(client_.get(), options);
  informer.AddEventHandler(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kDeadline));
  // From here every watch (streams end every 1-2 s, or are dropped) and every
  // re-list is exposed to the faults. The first two watches surely get a 410.
  ASSERT_TRUE(server_->faults()
                  .Set("gone,verb=watch,count=2;"
                       "drop-watch=5,verb=watch,rate=0.7;"
                       "gone,verb=watch,rate=0.05;"
                       "error=500,verb=list|watch,rate=0.1;"
                       "error=429,verb=list|watch,rate=0.1,retry-after=0;"
                       "gone,verb=list,rate=0.03")
                  .ok());

  std::atomic<bool> writing{true};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w + 1));
      std::uniform_int_distribution<int> pick(0, kNameSpace - 1);
      for (int op = 0; op < kOpsPerWriter; ++op) {
        const std::string name = "cm-" + std::to_string(pick(rng));
        if (!store.Get(configmaps_, ns_, name).ok()) {
          (void)store.Create(configmaps_, ns_, ConfigMap(name));
        } else if (rng() % 10 < 7) {
          simkube::PatchOptions patch;
          patch.type = simkube::PatchType::kMerge;
          (void)store.Patch(configmaps_, ns_, name,
                            {{"data", {{"k", std::to_string(w) + "-" + std::to_string(op)}}}},
                            patch);
        } else {
          (void)store.Delete(configmaps_, ns_, name);
        }
        // Spread the churn over a second or so, so faults hit it throughout.
        if (op % 10 == 0) std::this_thread::sleep_for(milliseconds(25));
      }
    });
  }
  // Compaction now and then: re-watches from an old version get real 410s.
  // It trails the head by about a second: compacted to the very head every
  // 300 ms, a paged list that took longer (ASan, the faults' retries) found
  // its version gone at every watch, and the informer re-listed for ever
  // without a stream that lived to break.
  std::thread compactor([&] {
    std::deque<uint64_t> recent;
    while (writing.load()) {
      std::this_thread::sleep_for(milliseconds(300));
      recent.push_back(store.CurrentResourceVersion());
      if (recent.size() > 3) {
        store.ForceCompaction(recent.front());
        recent.pop_front();
      }
    }
  });
  for (auto& t : writers) t.join();
  // However fast the churn went, the faults stay until they have been met: a
  // 410 that forced a re-list, and a stream that broke. A stream breaks only
  // while events flow (drop-watch counts them), so a trickle of updates goes
  // on until then; on a fast machine the churn alone can end first.
  std::thread trickle([&] {
    for (int i = 0; writing.load(); ++i) {
      (void)store.Create(configmaps_, ns_, ConfigMap("trickle-" + std::to_string(i)));
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  EXPECT_TRUE(WaitFor([&] {
    const InformerStats s = informer.stats();
    return s.gone >= 1 && s.lists >= 2 && s.watch_errors >= 1;
  })) << "gone "
      << informer.stats().gone << ", lists " << informer.stats().lists << ", watch errors "
      << informer.stats().watch_errors;
  writing = false;
  trickle.join();
  compactor.join();
  server_->faults().Clear();

  const auto server_state = ServerState();
  ASSERT_GT(server_state.size(), 100u);
  const bool converged = WaitFor(
      [&] { return CacheState(informer) == server_state && recorder.Mirror() == server_state; },
      kDeadline, milliseconds(50));
  const InformerStats stats = informer.stats();
  ASSERT_TRUE(converged) << "cache " << CacheState(informer).size() << " handlers "
                         << recorder.Mirror().size() << " server " << server_state.size()
                         << " lists " << stats.lists << " gone " << stats.gone << " watch errors "
                         << stats.watch_errors;
  EXPECT_EQ(recorder.bad_updates(), 0);
  EXPECT_EQ(informer.LastResourceVersion().empty(), false);
}

TEST_F(InformerTest, FactorySharesOneInformerPerCollection) {
  Create(resources::kConfigMaps, ns_, ConfigMap("a"));
  const std::string node = prefix_ + "-n1";
  Create(resources::kNodes, "", Node(node));
  SharedInformerFactory factory(client_.get(), Options(resources::kConfigMaps));
  Informer& configmaps = factory.For(resources::kConfigMaps);
  EXPECT_EQ(&configmaps, &factory.For(resources::kConfigMaps));
  EXPECT_EQ(&configmaps, &factory.For(resources::kConfigMaps, ""));
  EXPECT_NE(&configmaps, &factory.For(resources::kConfigMaps, ns_));
  EXPECT_NE(&configmaps, &factory.For(resources::kConfigMaps, "", "app=x"));
  // A namespace means nothing for a cluster-scoped resource.
  Informer& nodes = factory.For(resources::kNodes);
  EXPECT_EQ(&nodes, &factory.For(resources::kNodes, ns_));
  EXPECT_EQ(configmaps.options().page_size, 50);  // the factory's defaults apply

  std::stop_source stop;
  factory.Start(stop.get_token());
  ASSERT_TRUE(factory.WaitForCacheSync(kDeadline));
  EXPECT_NE(configmaps.Get(Key(ns_, "a")), nullptr);
  EXPECT_NE(nodes.Get(node), nullptr);
  // One made after Start starts at once.
  Informer& late = factory.For(resources::kConfigMaps, other_ns_);
  ASSERT_TRUE(late.WaitForSync(kDeadline));

  // The stop token ends every informer's thread; Stop then has nothing left to join.
  stop.request_stop();
  factory.Stop();
  EXPECT_TRUE(configmaps.HasSynced());  // the cache stays readable after stop
}

// Replace and ApplyEvent, the steps list and watch feed the cache with,
// without a server: both ways of keeping the cache give the same answers and
// events.
class InformerStorageTest : public ::testing::TestWithParam<Storage> {
 protected:
  // A pod cache of the storage under test.
  InformerOptions PodCache() const {
    InformerOptions options;
    options.resource = resources::kPods;
    options.storage = GetParam();
    return options;
  }
  // Pod NAME in namespace "ns" on NODE, each with the next resourceVersion.
  Json NsPod(const std::string& name, const std::string& node) {
    Json p = Pod(name, node);
    p["metadata"]["namespace"] = "ns";
    p["metadata"]["resourceVersion"] = std::to_string(++version_);
    return p;
  }

 private:
  int version_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Storage, InformerStorageTest,
                         ::testing::Values(Storage::kTree, Storage::kCompact), StorageName);

TEST_P(InformerStorageTest, ReplaceDiffsAgainstTheCacheAndEventsApplyInOrder) {
  InformerOptions options;
  options.resource = resources::kConfigMaps;
  options.storage = GetParam();
  Recorder recorder;  // outlives the informer's thread
  Informer informer(nullptr, options);
  EXPECT_EQ(informer.Run(std::stop_token()).code(), StatusCode::kFailedPrecondition);
  informer.AddEventHandler(recorder.Handler());
  ASSERT_TRUE(informer.AddIndex(std::string(kNamespaceIndex), IndexByNamespace).ok());
  auto cm = [](const std::string& name, const std::string& rv) {
    Json obj = ConfigMap(name);
    obj["metadata"]["namespace"] = "ns";
    obj["metadata"]["resourceVersion"] = rv;
    obj["metadata"]["managedFields"] = Json::array({{{"manager", "kubectl"}}});
    return obj;
  };
  informer.Replace({cm("a", "1"), cm("b", "2"), cm("c", "3")}, "3");
  EXPECT_TRUE(informer.HasSynced());
  EXPECT_TRUE(informer.WaitForSync(milliseconds(0)));
  EXPECT_EQ(informer.LastResourceVersion(), "3");
  EXPECT_EQ(informer.Size(), 3u);
  // The default transform drops managedFields.
  EXPECT_FALSE(informer.Get("ns/a")->at("metadata").contains("managedFields"));

  // A re-list: b changed, c vanished, d is new, a is the same.
  ObjectPtr a = informer.Get("ns/a");
  informer.Replace({cm("a", "1"), cm("b", "5"), cm("d", "6")}, "7");
  EXPECT_EQ(*informer.Get("ns/a"), *a);
  if (GetParam() == Storage::kTree) {
    EXPECT_EQ(informer.Get("ns/a"), a);  // the very snapshot readers hold
  } else {
    EXPECT_NE(informer.Get("ns/a"), a);  // decoded again on each read
  }
  EXPECT_TRUE(recorder.Saw("update ns/b"));
  EXPECT_TRUE(recorder.Saw("delete ns/c"));
  EXPECT_TRUE(recorder.Saw("add ns/d"));
  EXPECT_EQ(recorder.Count("update ns/a"), 0u);
  EXPECT_EQ(informer.LastResourceVersion(), "7");

  informer.ApplyEvent({WatchEvent::Type::kModified, cm("a", "8")});
  informer.ApplyEvent({WatchEvent::Type::kAdded, cm("e", "9")});
  informer.ApplyEvent({WatchEvent::Type::kDeleted, cm("d", "10")});
  informer.ApplyEvent({WatchEvent::Type::kDeleted, cm("never-seen", "11")});
  informer.ApplyEvent({WatchEvent::Type::kBookmark,
                       {{"kind", "ConfigMap"}, {"metadata", {{"resourceVersion", "12"}}}}});
  EXPECT_TRUE(recorder.Saw("update ns/a"));
  EXPECT_TRUE(recorder.Saw("add ns/e"));
  EXPECT_TRUE(recorder.Saw("delete ns/d"));
  EXPECT_FALSE(recorder.Saw("delete ns/never-seen"));
  EXPECT_EQ(informer.LastResourceVersion(), "12");
  EXPECT_EQ(recorder.Mirror(), CacheState(informer));
  EXPECT_EQ(recorder.bad_updates(), 0);
  EXPECT_EQ(informer.IndexKeys(kNamespaceIndex, "ns"),
            (std::vector<std::string>{"ns/a", "ns/b", "ns/e"}));
  EXPECT_EQ(Names(informer.ByIndex(kNamespaceIndex, "ns")), (std::set<std::string>{"a", "b", "e"}));
  EXPECT_EQ(informer.Get("ns/e")->at("metadata").at("resourceVersion"), "9");
  EXPECT_EQ(informer.Describe().at("objects"), Json::parse(R"({"ns/a": "8", "ns/b": "5",
                                                               "ns/e": "9"})"));

  // Resync re-delivers every object as an update of itself.
  informer.Resync();
  EXPECT_EQ(recorder.Count("update ns/e"), 1u);

  // A throwing handler does not stop the others.
  informer.AddEventHandler({.on_add = [](const ObjectPtr&) { throw std::runtime_error("boom"); }});
  informer.ApplyEvent({WatchEvent::Type::kAdded, cm("f", "13")});
  EXPECT_TRUE(recorder.Saw("add ns/f"));
}

// An index follows adds, value changes, deletes and re-lists, in key order,
// for both storages; one added late is built over the cache.
TEST_P(InformerStorageTest, IndexesFollowEventsAndRelists) {
  Informer pods(nullptr, PodCache());
  auto pod = [this](const std::string& name, const std::string& node, const std::string& app) {
    Json p = NsPod(name, node);
    p["metadata"]["labels"] = {{"app", app}};
    return p;
  };
  auto app = [](const Json& obj) {
    auto value = Label(obj, "app");
    return value ? std::vector<std::string>{*value} : std::vector<std::string>{};
  };
  ASSERT_TRUE(pods.AddIndex("app", app).ok());
  pods.Replace({pod("c", "n1", "x"), pod("a", "n1", "x"), pod("b", "n2", "y")}, "1");
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n1"), (std::vector<std::string>{"ns/a", "ns/c"}));
  EXPECT_EQ(pods.IndexKeys("app", "x"), (std::vector<std::string>{"ns/a", "ns/c"}));

  pods.ApplyEvent({WatchEvent::Type::kAdded, pod("aa", "n1", "y")});
  pods.ApplyEvent({WatchEvent::Type::kModified, pod("c", "n2", "x")});  // moved to n2
  pods.ApplyEvent({WatchEvent::Type::kModified, pod("a", "n1", "x")});  // no index changes
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n1"), (std::vector<std::string>{"ns/a", "ns/aa"}));
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n2"), (std::vector<std::string>{"ns/b", "ns/c"}));
  EXPECT_EQ(pods.IndexKeys("app", "y"), (std::vector<std::string>{"ns/aa", "ns/b"}));
  EXPECT_EQ(Names(pods.ByIndex(kNodeNameIndex, "n2")), (std::set<std::string>{"b", "c"}));

  pods.ApplyEvent({WatchEvent::Type::kDeleted, pod("b", "n2", "y")});
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n2"), (std::vector<std::string>{"ns/c"}));
  EXPECT_EQ(pods.IndexKeys("app", "y"), (std::vector<std::string>{"ns/aa"}));
  pods.ApplyEvent({WatchEvent::Type::kDeleted, pod("c", "n2", "x")});
  EXPECT_TRUE(pods.IndexKeys(kNodeNameIndex, "n2").empty());

  // A re-list files the new cache anew; the old one's keys are gone.
  pods.Replace({pod("z", "n3", "x"), pod("a", "n3", "x")}, "9");
  EXPECT_TRUE(pods.IndexKeys(kNodeNameIndex, "n1").empty());
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n3"), (std::vector<std::string>{"ns/a", "ns/z"}));
  ASSERT_TRUE(pods.AddIndex("late", app).ok());
  EXPECT_EQ(pods.IndexKeys("late", "x"), (std::vector<std::string>{"ns/a", "ns/z"}));
  pods.ApplyEvent({WatchEvent::Type::kAdded, pod("m", "n3", "x")});
  EXPECT_EQ(pods.IndexKeys("late", "x"), (std::vector<std::string>{"ns/a", "ns/m", "ns/z"}));
  EXPECT_EQ(pods.ByIndex("late", "x").size(), 3u);
}

// A compaction after a burst of events: the same answers from fresh
// allocations, old snapshots still readable, events after it filed right.
TEST_P(InformerStorageTest, CompactKeepsEveryAnswer) {
  Informer pods(nullptr, PodCache());
  auto pod = [this](const std::string& name, const std::string& node) { return NsPod(name, node); };
  pods.Replace({pod("a", "n1"), pod("b", "n2")}, "1");
  EXPECT_EQ(pods.Compact(), 0u) << "just listed: nothing to compact";
  for (int i = 0; i < 20; ++i) {
    pods.ApplyEvent({WatchEvent::Type::kAdded, pod("p" + std::to_string(i), i % 2 ? "n1" : "n2")});
  }
  pods.ApplyEvent({WatchEvent::Type::kDeleted, pod("b", "n2")});
  const ObjectPtr before = pods.Get("ns/p3");
  ASSERT_NE(before, nullptr);
  const std::vector<std::string> listed = pods.ListKeys();
  const std::set<std::string> keys(listed.begin(), listed.end());
  const std::vector<std::string> on_n1 = pods.IndexKeys(kNodeNameIndex, "n1");
  ASSERT_EQ(on_n1.size(), 11u);

  const size_t copied = pods.Compact();
  if (GetParam() == Storage::kTree) {
    EXPECT_EQ(copied, 0u) << "a tree cache has no bytes to copy";
  } else {
    EXPECT_GT(copied, 21u * 50) << "21 pods' bytes";
  }
  EXPECT_EQ(pods.Compact(), 0u) << "nothing changed since";
  const std::vector<std::string> after = pods.ListKeys();
  EXPECT_EQ(std::set<std::string>(after.begin(), after.end()), keys);
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n1"), on_n1);
  EXPECT_EQ(pods.ByIndex(kNodeNameIndex, "n2").size(), 10u);
  EXPECT_EQ((*pods.Get("ns/p3"))["spec"]["nodeName"], "n1");
  EXPECT_EQ((*before)["metadata"]["name"], "p3") << "a reader's snapshot outlives the compaction";

  // The indexes point at the new keys: events after the compaction re-file them.
  pods.ApplyEvent({WatchEvent::Type::kModified, pod("p1", "n2")});
  pods.ApplyEvent({WatchEvent::Type::kDeleted, pod("p3", "n1")});
  pods.ApplyEvent({WatchEvent::Type::kAdded, pod("a0", "n1")});
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n1").size(), 10u);
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n1").front(), "ns/a");
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n1")[1], "ns/a0");
  EXPECT_EQ(pods.IndexKeys(kNodeNameIndex, "n2").size(), 11u);
  EXPECT_EQ(pods.Get("ns/p3"), nullptr);
}

// A compact cache registers with the heap scavenger for as long as it lives.
TEST(InformerFeedTest, CompactCachesRegisterWithTheHeapScavenger) {
  InformerOptions options;
  options.resource = resources::kPods;
  options.storage = Storage::kCompact;
  {
    Informer pods(nullptr, options);
    pods.Replace({}, "1");
    for (int i = 0; i < 8; ++i) {
      Json p = Pod("p" + std::to_string(i), "n1");
      p["metadata"]["namespace"] = "ns";
      pods.ApplyEvent({WatchEvent::Type::kAdded, p});
    }
    RunHeapCompactors();
    EXPECT_EQ(pods.Compact(), 0u) << "the scavenger's run compacted it already";
    EXPECT_EQ(pods.ListKeys().size(), 8u);
  }
  RunHeapCompactors();  // the destroyed cache is no longer called (ASan would say)
}

// What /debug/informers serves: each cache's keys and resourceVersions.
TEST(InformerFeedTest, FactoryDescribesEveryCache) {
  SharedInformerFactory factory(nullptr);
  EXPECT_EQ(factory.Describe(), Json::array());
  Informer& pods = factory.For(resources::kPods, "ns", "app=x", "spec.nodeName=n1");
  Informer& nodes = factory.For(resources::kNodes);
  Informer& daemonsets = factory.For(resources::kDaemonSets, "ns");
  Json pod = Pod("p1", "n1");
  pod["metadata"]["namespace"] = "ns";
  pod["metadata"]["resourceVersion"] = "4";
  pods.Replace({pod}, "5");
  Json node = Node("n1");
  node["metadata"]["resourceVersion"] = "2";
  nodes.Replace({node}, "3");
  node["metadata"]["resourceVersion"] = "6";
  nodes.ApplyEvent({WatchEvent::Type::kModified, node});
  nodes.ApplyEvent({WatchEvent::Type::kAdded, Json::parse(R"({"metadata":
                        {"name": "n2", "resourceVersion": "7"}})")});

  std::map<std::string, Json> by_resource;
  for (const Json& d : factory.Describe()) by_resource[d.at("resource")] = d;
  ASSERT_EQ(by_resource.size(), 3u);
  EXPECT_EQ(by_resource["v1/pods"], Json::parse(R"({
    "name": "pods in ns labels app=x fields spec.nodeName=n1", "resource": "v1/pods",
    "path": "/api/v1/namespaces/ns/pods", "namespace": "ns", "labelSelector": "app=x",
    "fieldSelector": "spec.nodeName=n1", "synced": true, "resourceVersion": "5",
    "objects": {"ns/p1": "4"}, "storage": "tree"})"));
  EXPECT_EQ(by_resource["v1/nodes"], Json::parse(R"({
    "name": "nodes", "resource": "v1/nodes", "path": "/api/v1/nodes", "namespace": "",
    "labelSelector": "", "fieldSelector": "", "synced": true, "resourceVersion": "7",
    "objects": {"n1": "6", "n2": "7"}, "storage": "tree"})"));
  // Not listed yet: unsynced and empty.
  const Json& ds = by_resource["apps/v1/daemonsets"];
  EXPECT_EQ(ds.at("path"), "/apis/apps/v1/namespaces/ns/daemonsets");
  EXPECT_EQ(ds.at("synced"), false);
  EXPECT_EQ(ds.at("resourceVersion"), "");
  EXPECT_EQ(ds.at("objects"), Json::object());
  EXPECT_EQ(daemonsets.Describe(), ds);
}

// A per-resource transform reaches the informers of that resource made after
// it, and no other: the operator keeps its pods projected, its DaemonSets whole.
TEST(InformerFeedTest, FactoryTransformsOneResourceItsOwnWay) {
  SharedInformerFactory factory(nullptr);
  Informer& before = factory.For(resources::kPods, "ns", "app=before");
  factory.SetTransform(resources::kPods, [](Json& obj) { obj.erase("spec"); });
  Informer& pods = factory.For(resources::kPods, "ns", "app=x");
  Informer& nodes = factory.For(resources::kNodes);
  Json pod = Pod("p1", "n1");
  pod["metadata"]["namespace"] = "ns";
  pod["metadata"]["managedFields"] = Json::array({{{"manager", "kubelet"}}});
  ASSERT_TRUE(pod.contains("spec"));
  pods.Replace({pod}, "1");
  before.Replace({pod}, "1");
  EXPECT_FALSE(pods.Get("ns/p1")->contains("spec"));
  // The transform replaces the default (which drops managedFields) whole.
  EXPECT_TRUE(pods.Get("ns/p1")->at("metadata").contains("managedFields"));
  EXPECT_TRUE(before.Get("ns/p1")->contains("spec"));
  Json node = Node("n1");
  node["spec"] = {{"unschedulable", true}};
  nodes.Replace({node}, "2");
  EXPECT_TRUE(nodes.Get("n1")->contains("spec"));
}

// SetStorage reaches the informers of that resource made after it, and no
// other; a compact cache keeps what the transform left, byte for byte.
TEST(InformerFeedTest, FactoryKeepsOneResourceCompact) {
  SharedInformerFactory factory(nullptr);
  Informer& before = factory.For(resources::kPods, "ns", "app=before");
  factory.SetStorage(resources::kPods, Storage::kCompact);
  Informer& pods = factory.For(resources::kPods, "ns", "app=x");
  Informer& nodes = factory.For(resources::kNodes);
  EXPECT_EQ(before.options().storage, Storage::kTree);
  EXPECT_EQ(pods.options().storage, Storage::kCompact);
  EXPECT_EQ(nodes.options().storage, Storage::kTree);

  Json pod = Pod("p1", "n1");
  pod["metadata"]["namespace"] = "ns";
  pod["metadata"]["labels"] = {{"app", "x"}, {"unicode", "gr\u00fc\u00df"}};
  pod["spec"]["priority"] = -7;
  pod["spec"]["overhead"] = {{"ratio", 0.25}, {"none", nullptr}, {"list", Json::array()}};
  pod["metadata"]["managedFields"] = Json::array({{{"manager", "kubelet"}}});
  pods.Replace({pod}, "1");
  Json expected = pod;
  expected["metadata"].erase("managedFields");  // the default transform ran first
  EXPECT_EQ(*pods.Get("ns/p1"), expected);
  EXPECT_EQ(pods.ByIndex(kNodeNameIndex, "n1").size(), 1u);
  EXPECT_EQ(*pods.List().at(0), expected);
  const Json described = pods.Describe();
  EXPECT_EQ(described.at("storage"), "compact");
  EXPECT_EQ(described.at("compactBytes"), Json::to_cbor(expected).size());
}

TEST_F(InformerTest, PeriodicResyncRedeliversUpdates) {
  Create(resources::kConfigMaps, ns_, ConfigMap("a"));
  InformerOptions options = Options(resources::kConfigMaps, ns_);
  options.resync_period = milliseconds(50);
  Recorder recorder;  // outlives the informer's thread
  Informer informer(client_.get(), options);
  informer.AddEventHandler(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kDeadline));
  ASSERT_TRUE(WaitFor([&] { return recorder.Count("update " + Key(ns_, "a")) >= 2; }));
}

}  // namespace
}  // namespace gpuop::kube
