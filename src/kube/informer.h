// Informer: a local, always-current cache of one kind of object (one
// Resource, namespace and label/field selector), kept by list + watch, with
// event handlers and indexes; and SharedInformerFactory, which hands out one
// informer per (resource, namespace, selectors) so a process watches each
// collection once. The client-go / controller-runtime design, lighter.
//
// How the cache is kept:
//   1. List every page (InformerOptions::page_size) and replace the cache. The
//      differences against the previous cache reach the handlers as Add,
//      Update and Delete, so a re-list after a gap delivers the deletes of
//      objects that vanished meanwhile. Objects whose resourceVersion did not
//      change produce no event.
//   2. Watch from the list's resourceVersion with bookmarks; apply each event
//      to the cache and remember its resourceVersion (bookmarks move it too).
//   3. A stream the server ends normally is re-watched from the last version.
//      A 410 (Gone / Expired, as an ERROR event or as the answer) or any other
//      ERROR event re-lists; a broken stream is re-watched, and re-listed
//      after a few consecutive failures. Repeated failures back off
//      exponentially with jitter, capped (InformerOptions::max_backoff).
//
// Objects are immutable snapshots (std::shared_ptr<const Json>): readers never
// see a half-written object; an update replaces the snapshot. By default the
// cache keeps the trees and readers share them without copying; an informer
// with Storage::kCompact keeps each object's bytes instead and every read
// decodes a fresh snapshot (a json tree costs about five times its JSON, so a
// cache of thousands of objects trades a parse per read for most of its
// memory). Keys are KeyOf(obj): "ns/name" or "name".
//
// Handlers run on the informer's thread (the periodic resync, when enabled,
// runs on a second thread), one call at a time across all handlers of an
// informer, in event order, outside the cache lock: they may read the cache
// (Get, List, ByIndex) but must not add or remove handlers, or apply events,
// on the informer that called them. A handler added to an informer that
// already holds objects gets a synthetic Add for each of them first, on the
// calling thread, before AddEventHandler returns; no event is missed or
// delivered twice across that boundary.
//
// Thread-safety: every public method may be called from any thread.
// REQUIRES: the Client outlives the informer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/backoff.h"
#include "base/mutex.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/resource.h"

namespace gpuop::kube {

// An immutable cached object.
using ObjectPtr = std::shared_ptr<const Json>;

// The values an object is filed under in an index (none: not indexed).
using IndexFunc = std::function<std::vector<std::string>(const Json& obj)>;

// The one built-in index: a pod informer files its pods under spec.nodeName.
// Every other index is added by its reader (AddIndex): each costs memory per
// cached object (10,000 pods filed under their namespace too held 1.4 MB).
inline constexpr std::string_view kNodeNameIndex = "nodeName";
// A name for IndexByNamespace, for readers that add it.
inline constexpr std::string_view kNamespaceIndex = "namespace";

// metadata.namespace (nothing for cluster-scoped objects).
std::vector<std::string> IndexByNamespace(const Json& obj);
// spec.nodeName: the node a pod is bound to (nothing when unscheduled).
std::vector<std::string> IndexBySpecNodeName(const Json& obj);
// metadata.name.
std::vector<std::string> IndexByName(const Json& obj);

// Drops metadata.managedFields, which no controller reads and which often
// doubles an object's size (controller-runtime's default cache transform).
void StripManagedFields(Json& obj);

// Handlers; any may be empty. `old` is the cached object before the change.
// On a delete the object is the last state known (the watch event's object,
// or after a re-list the last cached one).
struct EventHandler {
  std::function<void(const ObjectPtr& obj)> on_add;
  std::function<void(const ObjectPtr& old, const ObjectPtr& obj)> on_update;
  std::function<void(const ObjectPtr& obj)> on_delete;
};

// How an informer keeps its objects (the file comment).
enum class Storage {
  kTree,     // json trees, shared with readers
  kCompact,  // CBOR bytes, decoded on each read (a few microseconds per KB)
};

struct InformerOptions {
  Resource resource;
  std::string ns;  // "" = all namespaces (ignored for cluster-scoped resources)
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;  // list page size; 0: one page
  // Re-deliver every cached object as Update(obj, obj) this often; 0: never.
  std::chrono::milliseconds resync_period{0};
  // The server ends a watch after watch_timeout..2*watch_timeout (jittered,
  // like client-go's 5-10 minutes); the informer then re-watches.
  std::chrono::seconds watch_timeout{300};
  // Backoff between failed attempts (list errors, broken watches): doubles
  // from initial_backoff up to max_backoff, with jitter; reset by a success.
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{30000};
  // Consecutive failed watches after which the informer re-lists.
  int watch_failures_before_relist = 3;
  // Applied to every object before it is cached (and before handlers see it):
  // drop what no reader needs to keep memory down. Default: StripManagedFields.
  // Readers must then never write a cached object back whole (patch instead).
  std::function<void(Json&)> transform = StripManagedFields;
  Storage storage = Storage::kTree;
};

// Counters, for tests, benches and metrics.
struct InformerStats {
  uint64_t lists = 0;         // successful (re-)lists
  uint64_t list_errors = 0;   // failed list attempts
  uint64_t watches = 0;       // watch streams opened (attempted)
  uint64_t watch_errors = 0;  // streams that failed or broke
  uint64_t gone = 0;          // 410s that forced a re-list
  uint64_t events = 0;        // watch events applied (bookmarks included)
};

class Informer {
 public:
  using HandlerId = uint64_t;

  // `client` may be null for an informer fed only through Replace and
  // ApplyEvent (tests, benches); Run then fails.
  Informer(Client* client, InformerOptions options);
  ~Informer();  // Stop()
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  const InformerOptions& options() const { return options_; }
  // "nodes", "pods in gpu-operator", "pods label=app=x": for logs.
  const std::string& name() const { return name_; }

  // Runs list + watch on a thread the informer owns, until Stop() or until
  // `stop` is requested. A second Start is a no-op.
  void Start(std::stop_token stop = {});
  // Stops the thread started by Start and waits for it. Idempotent.
  void Stop();
  // The list + watch loop on the caller's thread, until `stop` is requested.
  // Returns OK on stop; an error only when it cannot run at all (no client).
  Status Run(std::stop_token stop);

  // True once the first list has been applied; stays true.
  bool HasSynced() const { return synced_.load(std::memory_order_acquire); }
  // Waits for HasSynced(); false on timeout or when `stop` is requested.
  bool WaitForSync(std::chrono::milliseconds timeout, std::stop_token stop = {}) const;
  // The resourceVersion of the last list, event or bookmark applied.
  std::string LastResourceVersion() const;

  // --- The cache ---
  ObjectPtr Get(std::string_view key) const;  // null when absent
  std::vector<ObjectPtr> List() const;        // in no particular order
  std::vector<std::string> ListKeys() const;
  size_t Size() const;
  // Adds an index, built at once over the cached objects. AlreadyExists when
  // the name is taken (kNodeNameIndex on a pod informer included).
  Status AddIndex(std::string name, IndexFunc index);
  // Objects filed under `value` in `index` (empty for an unknown index).
  std::vector<ObjectPtr> ByIndex(std::string_view index, std::string_view value) const;
  std::vector<std::string> IndexKeys(std::string_view index, std::string_view value) const;

  // --- Handlers ---
  HandlerId AddEventHandler(EventHandler handler);
  // After it returns, the handler is not running and will not be called.
  void RemoveEventHandler(HandlerId id);

  // --- What list and watch feed the cache with (public for tests and benches) ---
  // Replaces the whole cache with `items` (a list's objects) and dispatches
  // the differences.
  void Replace(std::vector<Json> items, std::string resource_version);
  // Applies one ADDED / MODIFIED / DELETED / BOOKMARK event and dispatches it.
  // ERROR events are the watch loop's business and are ignored here.
  void ApplyEvent(WatchEvent event);
  // Delivers Update(obj, obj) for every cached object (periodic resync).
  void Resync();

  InformerStats stats() const;

  // Allocates a compact cache's entries, keys and indexes anew, together, and
  // frees the old ones, when watch events changed a quarter of it or more
  // since it was listed or last compacted: each event is parsed whole before
  // its bytes are kept, so after a burst (thousands of pods created) those
  // bytes lie between the burst's freed temporaries, and every page holding
  // one stays resident. Readers' snapshots stay valid. The bytes copied; 0
  // when it did nothing (a tree cache, or too little changed). The heap
  // scavenger calls it before it trims (base/memory.h AddHeapCompactor).
  size_t Compact();

  // What this cache holds, to check it against the server (the operator's
  // /debug/informers): {"name", "resource": "apps/v1/daemonsets", "path" (the
  // collection to list), "namespace", "labelSelector", "fieldSelector",
  // "synced", "resourceVersion": LastResourceVersion(), "objects": {key:
  // metadata.resourceVersion}, "storage": "tree" or "compact", and for a
  // compact cache "compactBytes": the size of its objects' bytes}. Objects
  // and resourceVersion are one snapshot; no object is copied.
  Json Describe() const;

 private:
  // One cached object: its tree (Storage::kTree) or its CBOR bytes
  // (kCompact: one allocation, shared with the readers decoding them).
  struct Entry {
    ObjectPtr tree;
    std::shared_ptr<const uint8_t[]> bytes;
    size_t size = 0;
  };
  struct Index {
    IndexFunc func;
    // value -> the keys filed under it, in key order (ByIndex answers in key
    // order). Each points at its key in objects_, whose nodes never move.
    std::unordered_map<std::string, std::vector<const std::string*>> entries;
  };
  struct Handler {
    HandlerId id;
    EventHandler handler;
  };
  // How a watch stream ended: stop requested; the server ended it; a 410 or
  // ERROR event (re-list); broken or not established (re-watch).
  enum class WatchEnd { kStopped, kEnded, kRelist, kFailed };

  // One list (page by page) + replace; false on failure (stats and logs done).
  bool ListAndReplace();
  // One watch stream from LastResourceVersion(); how it ended.
  WatchEnd WatchOnce(std::stop_token stop, uint64_t* events);
  // Sleeps for the backoff of the `failures`-th consecutive failure; false on stop.
  bool BackOff(int failures, std::stop_token stop);
  void ResyncLoop(std::stop_token stop);
  // Replace, with objects already transformed into snapshots.
  void ReplaceObjects(std::vector<std::pair<std::string, Entry>> objects,
                      std::string resource_version);

  ObjectPtr Intern(Json obj) const;
  // What the cache keeps of a transformed object, and the object back.
  Entry Store(const ObjectPtr& obj) const;
  // Intern and Store each of a list's items, appended to `out` with its key.
  void StoreAll(std::vector<Json> items, std::vector<std::pair<std::string, Entry>>* out) const;
  static ObjectPtr Load(const Entry& entry);
  // Index maintenance. `key` is a key of objects_: the indexes keep its address.
  void IndexAddLocked(const std::string& key, const Json& obj) GPUOP_REQUIRES(cache_mu_);
  void IndexRemoveLocked(const std::string& key, const Json& obj) GPUOP_REQUIRES(cache_mu_);
  // Files every cached object in `index` anew.
  void RebuildIndexLocked(Index& index) GPUOP_REQUIRES(cache_mu_);
  // Calls every handler.
  void DispatchAdd(const ObjectPtr& obj) GPUOP_REQUIRES(dispatch_mu_);
  void DispatchUpdate(const ObjectPtr& old, const ObjectPtr& obj) GPUOP_REQUIRES(dispatch_mu_);
  void DispatchDelete(const ObjectPtr& obj) GPUOP_REQUIRES(dispatch_mu_);
  void SetSynced();

  Client* const client_;
  const InformerOptions options_;
  const std::string name_;

  // Serialises cache changes with the handler calls that report them, and
  // handler registration, so handlers see events in order and exactly once.
  Mutex dispatch_mu_;
  std::vector<Handler> handlers_ GPUOP_GUARDED_BY(dispatch_mu_);
  HandlerId next_handler_id_ GPUOP_GUARDED_BY(dispatch_mu_) = 1;

  // Written with dispatch_mu_ and cache_mu_ (exclusive) held; read with either.
  mutable SharedMutex cache_mu_;
  std::unordered_map<std::string, Entry> objects_;
  std::map<std::string, Index, std::less<>> indexes_ GPUOP_GUARDED_BY(cache_mu_);
  std::string last_resource_version_ GPUOP_GUARDED_BY(cache_mu_);

  Backoff backoff_;  // jitter for retries and watch timeouts
  // events_ when objects_ was last allocated whole (a list, Compact).
  uint64_t events_at_compaction_ GPUOP_GUARDED_BY(dispatch_mu_) = 0;
  int heap_compactor_ = 0;  // the scavenger's handle on Compact (compact caches)

  std::atomic<bool> synced_{false};
  mutable std::mutex sync_mu_;
  mutable std::condition_variable_any sync_cv_;

  std::atomic<uint64_t> lists_{0}, list_errors_{0}, watches_{0}, watch_errors_{0}, gone_{0},
      events_{0};

  Mutex thread_mu_;
  std::jthread thread_ GPUOP_GUARDED_BY(thread_mu_);
  std::optional<std::stop_callback<std::function<void()>>> parent_stop_
      GPUOP_GUARDED_BY(thread_mu_);
};

// One informer per (resource, namespace, selectors) for the whole process.
// Informers live as long as the factory; references stay valid.
// Thread-safety: every method may be called from any thread.
class SharedInformerFactory {
 public:
  // `defaults` gives every informer's options but resource, ns and selectors.
  explicit SharedInformerFactory(Client* client, InformerOptions defaults = {});
  ~SharedInformerFactory();  // Stop()
  SharedInformerFactory(const SharedInformerFactory&) = delete;
  SharedInformerFactory& operator=(const SharedInformerFactory&) = delete;

  // Informers of `resource` made after this call keep their objects through
  // `transform` instead of the defaults' (a projection of what the process
  // reads, as the operator's pod caches: cluster-scale caches of whole
  // objects cost tens of KB per object as json trees).
  void SetTransform(const Resource& resource, std::function<void(Json&)> transform);
  // Informers of `resource` made after this call keep their objects as
  // `storage` says (kCompact: caches of thousands of objects).
  void SetStorage(const Resource& resource, Storage storage);

  // The informer for this collection, made on first use. After Start, a new
  // informer starts at once.
  Informer& For(const Resource& resource, std::string_view ns = "",
                std::string_view label_selector = "", std::string_view field_selector = "");
  // Starts every informer (each on its own thread) until Stop or `stop`.
  void Start(std::stop_token stop = {});
  // True when every informer made so far has synced within `timeout`.
  bool WaitForCacheSync(std::chrono::milliseconds timeout, std::stop_token stop = {});
  void Stop();
  // An array of Informer::Describe() for every informer made so far.
  Json Describe() const;

 private:
  // Every informer made so far; they live as long as the factory.
  std::vector<Informer*> All() const;

  Client* const client_;
  const InformerOptions defaults_;
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Informer>> informers_ GPUOP_GUARDED_BY(mu_);
  // "group/version/resource" -> transform (SetTransform).
  std::map<std::string, std::function<void(Json&)>> transforms_ GPUOP_GUARDED_BY(mu_);
  std::map<std::string, Storage> storages_ GPUOP_GUARDED_BY(mu_);
  bool started_ GPUOP_GUARDED_BY(mu_) = false;
  std::stop_token stop_ GPUOP_GUARDED_BY(mu_);
};

}  // namespace gpuop::kube
