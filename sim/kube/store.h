// Store: the API emulator's object storage, the part of kube-apiserver + etcd
// that gives objects their semantics: uid, creationTimestamp, generation, one
// global resourceVersion counter, optimistic concurrency, finalizers and
// deletionTimestamp, ownerReference garbage collection, namespace lifecycle,
// label/field-selected and paginated lists, and watches with a kept history
// window (410 Expired beyond it) and bookmarks.
//
// Objects are nlohmann::json, stored as immutable snapshots
// (std::shared_ptr<const json>): reads hand out the snapshot, writes replace
// it. Each snapshot's compact JSON is made once, when first needed, and kept
// beside it (ObjectJson), so lists and watch events are written by
// concatenating those bytes instead of dumping the trees per request. Every
// write gets the next global resourceVersion and is appended to an event
// history ring shared by all resources.
//
// Thread-safety: every public method may be called from any thread
// concurrently. Reads take a shared lock; a write prepares the new object
// (patches, hooks) without the lock and commits under an exclusive lock,
// retrying if the object changed meanwhile (like etcd's GuaranteedUpdate).
// Watch events are handed to watchers under that lock as shared pointers into
// bounded per-watcher queues, so writers never wait on a slow watcher: a
// watcher whose queue is full is closed (the client re-watches). Hooks are
// called without the store lock held and may call the store's read methods.
//
// Garbage collection is asynchronous, like the real garbage collector: a
// store-owned background thread (std::jthread) runs it (ownerReferences,
// foregroundDeletion/orphan finalizers, terminating namespaces) after each
// delete and after each write of an object with ownerReferences, and sends
// periodic bookmarks. With StoreOptions::gc_thread == false nothing runs in
// the background and tests call CollectGarbage() / SendBookmarks() themselves.
//
// Known differences from kube-apiserver + etcd: pages after the first of a
// paginated list read the current state (not a snapshot at the first page's
// resourceVersion), though they report that resourceVersion; the watch history
// is one window for all resources (a busy resource shortens a quiet one's);
// managedFields are left to the apply hook.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sim/kube/api_error.h"
#include "sim/kube/resource.h"
#include "sim/kube/selector.h"

namespace gpuop::simkube {

using Object = std::shared_ptr<const nlohmann::json>;
// A committed object's compact JSON text: what dump() gives, invalid UTF-8
// replaced. Made on first use, on the reader's thread (outside the store
// lock), then shared by every list and watch event that writes the object.
// Empty for objects the store did not commit (dry runs, synthesised events):
// those are dumped where they are written. Thread-safe.
class ObjectJson {
 public:
  ObjectJson() = default;
  explicit operator bool() const { return snapshot_ != nullptr; }
  // REQUIRES: not empty.
  const std::string& text() const;

 private:
  friend class Store;
  struct Snapshot;  // the object and its text, in one allocation
  explicit ObjectJson(std::shared_ptr<const Snapshot> s) : snapshot_(std::move(s)) {}
  std::shared_ptr<const Snapshot> snapshot_;
};

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386), done here
  kJson,            // application/json-patch+json (RFC 6902), done here
  kStrategicMerge,  // application/strategic-merge-patch+json, StoreHooks::strategic_merge
  kApply,           // application/apply-patch+yaml (server-side apply), StoreHooks::apply
};

struct Preconditions {
  std::optional<std::string> uid;
  std::optional<std::string> resource_version;
};

struct PatchOptions {
  PatchType type = PatchType::kMerge;
  std::string subresource;    // "" or "status"
  std::string field_manager;  // required by apply (the HTTP layer checks)
  bool force = false;         // apply: take ownership of conflicting fields
  bool dry_run = false;
};

// Strategic merge patch / server-side apply, provided by the schema engine.
// `current` is null when the object does not exist (apply then creates it;
// strategic merge is never called without an object). Returns the whole new
// object; the store then treats it like an update (preconditions, immutable
// fields, generation, admit hook). Errors are returned as is (422, 409 apply
// conflicts, 400 bad patch).
using PatchHook = std::function<ApiResult<nlohmann::json>(
    const nlohmann::json& current, const nlohmann::json& patch, const ResourceInfo& resource,
    const PatchOptions& options)>;

// Called on every create and update (incl. patches and status updates) after
// the store has prepared the object (metadata filled, status rules applied),
// before it is committed. `old` is null on create. May default fields of
// `obj` (not metadata.resourceVersion/uid); an error rejects the write.
using AdmitHook = std::function<ApiStatus(const ResourceInfo& resource, nlohmann::json& obj,
                                          const nlohmann::json* old)>;

struct StoreHooks {
  PatchHook strategic_merge;
  PatchHook apply;
  AdmitHook admit;
};

struct StoreOptions {
  // Events kept for watches from an older resourceVersion (all resources together).
  size_t history_size = 10000;
  // Events a watcher may have queued before it is closed as too slow.
  size_t watcher_queue_size = 10000;
  // Bookmarks for watchers that asked for them (allowWatchBookmarks).
  std::chrono::milliseconds bookmark_interval{std::chrono::seconds(60)};
  // Run garbage collection and bookmarks on a store-owned thread.
  bool gc_thread = true;
  // Create default, kube-system, kube-public, kube-node-lease at start.
  bool initial_namespaces = true;
  // Wall clock for creationTimestamp/deletionTimestamp; default system_clock.
  std::function<std::chrono::system_clock::time_point()> now;
  // Seed for uids and generated names; 0 = random_device.
  uint64_t seed = 0;
  StoreHooks hooks;
};

struct CreateOptions {
  bool dry_run = false;
};

struct UpdateOptions {
  // "" or "status"; or "binding", the binding registry's own write (pods/
  // binding only): spec.nodeName and the PodScheduled condition together, so
  // no reader sees a bound pod that is not scheduled.
  std::string subresource;
  bool dry_run = false;
};

enum class PropagationPolicy { kBackground, kForeground, kOrphan };

struct DeleteOptions {
  std::optional<PropagationPolicy> propagation;  // default Background
  Preconditions preconditions;
  std::optional<int64_t> grace_period_seconds;  // graceful_deletion resources only
  bool dry_run = false;
};

struct DeleteResult {
  Object object;         // the deleted object, or the object now being deleted
  bool deleted = false;  // true: gone now; false: kept with a deletionTimestamp (finalizers/grace)
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;           // 0 = all
  std::string continue_token;  // from a previous page's metadata.continue
  // resourceVersion / resourceVersionMatch are accepted for compatibility;
  // lists always serve the latest state (the real server's "" semantics).
  std::string resource_version;
  std::string resource_version_match;
};

struct ListResult {
  std::string resource_version;                 // list metadata.resourceVersion
  std::string continue_token;                   // "" on the last page
  std::optional<int64_t> remaining_item_count;  // set when paginating without selectors
  std::vector<Object> items;                    // sorted by namespace/name
  std::vector<ObjectJson> item_json;            // item_json[i]: items[i]'s JSON, when known

  // {"kind":"NodeList","apiVersion":"v1","metadata":{...},"items":[...]}
  nlohmann::json ToJson(const ResourceInfo& resource) const;
  // ToJson(resource).dump(), built from item_json without dumping the items.
  std::string Dump(const ResourceInfo& resource) const;
};

struct WatchOptions {
  // "" or "0": synthetic ADDED events for the current objects first, then
  // changes. "N": every change after N (410 Expired as an ERROR event when N
  // is older than the kept history).
  std::string resource_version;
  std::string label_selector;
  std::string field_selector;
  bool allow_bookmarks = false;
  // sendInitialEvents: true = initial ADDED events (whatever the
  // resourceVersion) then, with allow_bookmarks, a BOOKMARK annotated
  // k8s.io/initial-events-end=true; false = no initial events even for "".
  std::optional<bool> send_initial_events;
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  Object object;  // the object; the Status for kError
  uint64_t resource_version = 0;
  ObjectJson object_json;  // object's JSON, when known

  static std::string_view TypeName(Type t);  // "ADDED", ...
  // {"type":"ADDED","object":{...}}
  nlohmann::json ToJson() const;
  // ToJson().dump(), built from object_json when set.
  std::string Dump() const;
};

class Store;

// One watch stream. The HTTP layer calls Next() in a loop and writes each
// event; Next() returns nullopt on timeout (closed() false) or when the watch
// is over (closed() true: store shut down, watcher too slow, 410 sent, Stop()).
// Next/closed/Stop may be called from any thread; events are delivered in
// resourceVersion order, gap-free for the watched resource.
class Watcher {
 public:
  ~Watcher();
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  std::optional<WatchEvent> Next(std::chrono::milliseconds timeout);
  bool closed() const;
  // Why it closed: "stopped", "too slow", "expired", "store shut down".
  std::string close_reason() const;
  void Stop();

  struct Channel;  // shared with the store; defined in store.cc

 private:
  friend class Store;
  explicit Watcher(std::shared_ptr<Channel> channel) : channel_(std::move(channel)) {}
  std::shared_ptr<Channel> channel_;
};

struct StoreCounters {
  // requests[verb][qualified resource] = count; verbs: create, get, list,
  // update, patch, delete, deletecollection, watch.
  std::map<std::string, std::map<std::string, uint64_t>> requests;
  std::map<std::string, uint64_t> objects;  // per qualified resource
  uint64_t object_count = 0;
  uint64_t approx_bytes = 0;  // sum of the objects' compact JSON sizes (estimated)
  uint64_t resource_version = 0;
  uint64_t watchers = 0;
  uint64_t watchers_closed_slow = 0;
};

class Store {
 public:
  explicit Store(StoreOptions options = {});
  ~Store();  // stops the background thread and closes all watchers
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // REQUIRES: not concurrent with other calls (set before serving).
  void SetHooks(StoreHooks hooks);

  // POST. `ns` is the request namespace ("" for cluster-scoped resources).
  ApiResult<Object> Create(const ResourceInfo& r, std::string_view ns, nlohmann::json obj,
                           const CreateOptions& options = {});
  ApiResult<Object> Get(const ResourceInfo& r, std::string_view ns, std::string_view name);
  // `ns` "" lists all namespaces.
  ApiResult<ListResult> List(const ResourceInfo& r, std::string_view ns,
                             const ListOptions& options = {});
  // PUT (or PUT .../status with options.subresource == "status").
  ApiResult<Object> Update(const ResourceInfo& r, std::string_view ns, std::string_view name,
                           nlohmann::json obj, const UpdateOptions& options = {});
  // PATCH. metadata.resourceVersion in a merge/strategic patch body is a precondition.
  ApiResult<Object> Patch(const ResourceInfo& r, std::string_view ns, std::string_view name,
                          const nlohmann::json& patch, const PatchOptions& options);
  ApiResult<DeleteResult> Delete(const ResourceInfo& r, std::string_view ns, std::string_view name,
                                 const DeleteOptions& options = {});
  // DELETE on the collection: deletes every listed object; returns them.
  ApiResult<ListResult> DeleteCollection(const ResourceInfo& r, std::string_view ns,
                                         const ListOptions& list, const DeleteOptions& options);
  ApiResult<std::unique_ptr<Watcher>> Watch(const ResourceInfo& r, std::string_view ns,
                                            const WatchOptions& options);

  // The global resourceVersion (last committed write).
  uint64_t CurrentResourceVersion() const;
  // Forgets history up to `rv`: watches from an older version and continue
  // tokens issued before it get 410 Expired.
  void ForceCompaction(uint64_t rv);
  // One garbage collection pass to a fixed point (ownerReferences,
  // foregroundDeletion/orphan finalizers, terminating namespaces).
  void CollectGarbage();
  // Queues a bookmark now for every watcher that allows bookmarks.
  void SendBookmarks();
  StoreCounters Counters() const;

 private:
  struct Entry {
    Object obj;
    ObjectJson json;  // obj's
    uint64_t rv = 0;
    size_t bytes = 0;
    // obj's metadata.labels (null: none), so selectors skip two map lookups.
    const nlohmann::json* labels = nullptr;
  };
  struct Bucket {
    ResourceInfo info;
    std::map<std::string, Entry> objects;  // key "ns/name" or "name"
  };
  struct HistoryEvent {
    WatchEvent::Type type;
    std::string bucket;  // qualified resource
    std::string ns;
    uint64_t rv;
    Object obj;
    ObjectJson json;
    Object prev;
  };
  using Mutator = std::function<ApiResult<nlohmann::json>(const Object& current)>;

  static std::string Key(std::string_view ns, std::string_view name);
  Bucket& BucketFor(const ResourceInfo& r);               // REQUIRES: mu_ held exclusively
  const Bucket* FindBucket(const ResourceInfo& r) const;  // REQUIRES: mu_ held
  Object Lookup(const ResourceInfo& r, const std::string& key) const;  // takes mu_ shared
  ApiStatus CheckNamespace(const ResourceInfo& r, std::string_view ns, std::string_view name);

  // Prepares and commits a create; `obj` has passed the request checks.
  ApiResult<Object> DoCreate(const ResourceInfo& r, std::string ns, nlohmann::json obj,
                             bool dry_run);
  // The update loop: reads the current object, applies `mutate`, prepares the
  // result as an update and commits it if nothing changed meanwhile (retrying
  // otherwise when `retry`). create_if_missing: apply on a missing object.
  ApiResult<Object> GuaranteedUpdate(const ResourceInfo& r, std::string_view ns,
                                     std::string_view name, const std::string& subresource,
                                     bool dry_run, bool retry, const Mutator& mutate,
                                     bool create_if_missing = false);
  ApiResult<nlohmann::json> PrepareUpdate(const ResourceInfo& r, const nlohmann::json& old,
                                          nlohmann::json obj, const std::string& subresource);
  // The snapshot of obj to commit at rv, with its (lazy) JSON; bytes unset.
  static Entry Freeze(nlohmann::json obj, uint64_t rv);
  // Commit primitives. REQUIRES: mu_ held exclusively.
  Object CommitPut(Bucket& b, const std::string& key, nlohmann::json obj, bool is_create);
  Object CommitRemove(Bucket& b, const std::string& key);
  void RecordEvent(WatchEvent::Type type, const Bucket& b, const Entry& cur, Object prev);
  uint64_t NextRv() { return ++rv_; }
  // Deletes under mu_ (GC and namespace cleanup). REQUIRES: mu_ held exclusively.
  bool DeleteLocked(Bucket& b, const std::string& key, PropagationPolicy policy);
  bool GcPassLocked();
  void RemoveFinalizerLocked(Bucket& b, const std::string& key, std::string_view finalizer);
  void Count(std::string_view verb, const ResourceInfo& r);
  std::string NowString() const;
  std::string NewUid();
  std::string RandomSuffix();
  void BackgroundLoop(std::stop_token stop);
  void WakeBackground();

  StoreOptions options_;
  StoreHooks hooks_;

  mutable std::shared_mutex mu_;
  uint64_t rv_ = 0;                        // GUARDED_BY(mu_)
  uint64_t compacted_rv_ = 0;              // GUARDED_BY(mu_): watch history horizon
  uint64_t forced_compaction_rv_ = 0;      // GUARDED_BY(mu_): continue token horizon
  std::map<std::string, Bucket> buckets_;  // GUARDED_BY(mu_)
  std::deque<HistoryEvent> history_;       // GUARDED_BY(mu_)
  // Open watch channels by qualified resource.
  std::map<std::string, std::vector<std::shared_ptr<Watcher::Channel>>>
      channels_;              // GUARDED_BY(mu_)
  uint64_t total_bytes_ = 0;  // GUARDED_BY(mu_)
  uint64_t closed_slow_ = 0;  // GUARDED_BY(mu_)

  mutable std::mutex counters_mu_;
  std::map<std::string, std::map<std::string, uint64_t>> requests_;  // GUARDED_BY(counters_mu_)

  std::mutex rand_mu_;
  std::mt19937_64 rand_;  // GUARDED_BY(rand_mu_)

  std::mutex bg_mu_;
  std::condition_variable_any bg_cv_;
  bool gc_pending_ = false;  // GUARDED_BY(bg_mu_)
  std::jthread bg_;
};

// RFC 3339 UTC with second precision ("2026-01-02T03:04:05Z").
std::string FormatTimestamp(std::chrono::system_clock::time_point t);
// Decimal resourceVersion; nullopt when not a non-negative integer.
std::optional<uint64_t> ParseResourceVersion(std::string_view rv);

}  // namespace gpuop::simkube
