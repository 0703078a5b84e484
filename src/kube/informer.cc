#include "kube/informer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <utility>

#include "base/clock.h"
#include "base/log.h"
#include "base/memory.h"
#include "kube/object.h"

namespace gpuop::kube {
namespace {

// "group/version/resource": the factory's key for a resource.
std::string ResourceKey(const Resource& r) { return r.group + "/" + r.version + "/" + r.resource; }

using SteadyClock = std::chrono::steady_clock;

// Waits longer than this are treated as "no deadline" (now() + max overflows).
constexpr auto kForever = std::chrono::hours(24 * 365);

std::string InformerName(const InformerOptions& o) {
  std::string name = o.resource.QualifiedName();
  if (o.resource.namespaced && !o.ns.empty()) name += " in " + o.ns;
  if (!o.label_selector.empty()) name += " labels " + o.label_selector;
  if (!o.field_selector.empty()) name += " fields " + o.field_selector;
  return name;
}

// Calls a handler, keeping an exception in user code from ending the informer.
template <typename Fn>
void CallHandler(const std::string& informer, std::string_view what, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    LogError("informer event handler threw",
             {{"informer", informer}, {"event", what}, {"error", e.what()}});
  } catch (...) {
    LogError("informer event handler threw", {{"informer", informer}, {"event", what}});
  }
}

// Where `key` goes among keys in key order.
std::vector<const std::string*>::iterator KeyPosition(std::vector<const std::string*>& keys,
                                                      const std::string& key) {
  return std::lower_bound(
      keys.begin(), keys.end(), key,
      [](const std::string* filed, const std::string& k) { return *filed < k; });
}

}  // namespace

std::vector<std::string> IndexByNamespace(const Json& obj) {
  std::string ns = Namespace(obj);
  if (ns.empty()) return {};
  return {std::move(ns)};
}

std::vector<std::string> IndexBySpecNodeName(const Json& obj) {
  auto spec = obj.find("spec");
  if (spec == obj.end() || !spec->is_object()) return {};
  auto node = spec->find("nodeName");
  if (node == spec->end() || !node->is_string() || node->get_ref<const std::string&>().empty()) {
    return {};
  }
  return {node->get<std::string>()};
}

std::vector<std::string> IndexByName(const Json& obj) {
  std::string name = Name(obj);
  if (name.empty()) return {};
  return {std::move(name)};
}

void StripManagedFields(Json& obj) {
  auto meta = obj.find("metadata");
  if (meta != obj.end() && meta->is_object()) meta->erase("managedFields");
}

// --- Informer ---

Informer::Informer(Client* client, InformerOptions options)
    : client_(client),
      options_(std::move(options)),
      name_(InformerName(options_)),
      backoff_(options_.initial_backoff, options_.max_backoff) {
  if (options_.resource.group.empty() && options_.resource.resource == "pods") {
    indexes_.emplace(std::string(kNodeNameIndex), Index{IndexBySpecNodeName, {}});
  }
  if (options_.storage == Storage::kCompact) {
    heap_compactor_ = AddHeapCompactor([this] { Compact(); });
  }
}

Informer::~Informer() {
  if (heap_compactor_ != 0) RemoveHeapCompactor(heap_compactor_);
  Stop();
}

void Informer::Start(std::stop_token stop) {
  MutexLock lock(thread_mu_);
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token own) {
    Status s = Run(own);
    if (!s.ok()) LogError("informer cannot run", {{"informer", name_}, {"error", s}});
  });
  if (stop.stop_possible()) {
    parent_stop_.emplace(stop,
                         [source = thread_.get_stop_source()]() mutable { source.request_stop(); });
  }
}

void Informer::Stop() {
  std::jthread thread;
  {
    MutexLock lock(thread_mu_);
    parent_stop_.reset();  // waits for a callback already running
    thread = std::move(thread_);
  }
  if (thread.joinable()) {
    thread.request_stop();
    thread.join();
  }
}

Status Informer::Run(std::stop_token stop) {
  if (client_ == nullptr) {
    return FailedPrecondition("informer for " + name_ +
                              " has no API client to list and watch with");
  }
  std::jthread resync;
  if (options_.resync_period.count() > 0) {
    resync = std::jthread([this, stop](std::stop_token) { ResyncLoop(stop); });
  }
  LogDebug("informer starting", {{"informer", name_}});

  bool need_list = true;
  // Consecutive attempts that made no progress (a failed list, a watch that
  // failed or ended before delivering anything); a watch that delivers
  // events resets it. It sizes the backoff.
  int failures = 0;
  int watch_failures = 0;  // consecutive failed watches since the last list
  while (!stop.stop_requested()) {
    if (need_list) {
      if (!ListAndReplace()) {
        BackOff(++failures, stop);
        continue;
      }
      need_list = false;
      watch_failures = 0;
    }
    uint64_t events = 0;
    const auto started = SteadyClock::now();
    const WatchEnd end = WatchOnce(stop, &events);
    const bool progressed = events > 0;
    if (progressed) failures = 0;
    switch (end) {
      case WatchEnd::kStopped:
        break;
      case WatchEnd::kEnded:
        // The server's timeout: re-watch from the last version at once,
        // unless it keeps ending streams before anything happens.
        watch_failures = 0;
        if (!progressed && SteadyClock::now() - started < std::chrono::seconds(1)) {
          BackOff(++failures, stop);
        }
        break;
      case WatchEnd::kRelist:
        // The first 410 re-lists at once; 410s in a row back off.
        need_list = true;
        if (!progressed && ++failures > 1) BackOff(failures - 1, stop);
        break;
      case WatchEnd::kFailed:
        if (progressed) {
          watch_failures = 0;  // broke after progress: pick up where it stopped
          break;
        }
        if (++watch_failures >= options_.watch_failures_before_relist) {
          LogDebug("informer re-lists after failed watches",
                   {{"informer", name_}, {"failures", watch_failures}});
          need_list = true;
        }
        BackOff(++failures, stop);
        break;
    }
  }
  LogDebug("informer stopped", {{"informer", name_}});
  return Status::Ok();
}

bool Informer::ListAndReplace() {
  // Page by page rather than Client::ListAll: each page's objects are
  // transformed and made snapshots before the next page is read, so the peak
  // is the cache plus one page, and what the transform drops (managedFields:
  // often half a node) is freed while its memory can still be reused.
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  list_options.limit = options_.page_size;
  std::vector<std::pair<std::string, Entry>> objects;
  std::string resource_version;
  bool restarted = false;
  while (true) {
    auto page = client_->List(options_.resource, options_.ns, list_options);
    if (!page.ok()) {
      if (IsGone(page.status()) && !list_options.continue_token.empty() && !restarted) {
        // The snapshot behind the continue token expired: start over, once.
        LogDebug("informer list snapshot expired; listing again", {{"informer", name_}});
        restarted = true;
        objects.clear();
        list_options.continue_token.clear();
        continue;
      }
      const uint64_t errors = ++list_errors_;
      LogDebug("informer list failed", {{"informer", name_}, {"error", page.status()}});
      if (errors == 5) {
        LogWarn("informer cannot list; retrying with backoff",
                {{"informer", name_}, {"error", page.status()}});
      }
      return false;
    }
    // Every page reports the resourceVersion of the list's snapshot.
    if (list_options.continue_token.empty()) resource_version = page->resource_version;
    StoreAll(std::move(page->items), &objects);
    list_options.continue_token = std::move(page->continue_token);
    if (list_options.continue_token.empty()) break;
  }
  const size_t count = objects.size();
  ReplaceObjects(std::move(objects), std::move(resource_version));
  ++lists_;
  // The pages' bodies and parse buffers were freed; hand free pages back so
  // the footprint is what the cache holds.
  ReleaseFreeHeap();
  LogDebug("informer listed",
           {{"informer", name_}, {"objects", count}, {"resourceVersion", LastResourceVersion()}});
  return true;
}

Informer::WatchEnd Informer::WatchOnce(std::stop_token stop, uint64_t* events) {
  WatchOptions watch_options;
  watch_options.label_selector = options_.label_selector;
  watch_options.field_selector = options_.field_selector;
  watch_options.resource_version = LastResourceVersion();
  watch_options.allow_bookmarks = true;
  watch_options.timeout = std::chrono::seconds(static_cast<int64_t>(
      static_cast<double>(options_.watch_timeout.count()) * (1.0 + backoff_.Uniform())));
  ++watches_;

  bool relist = false;
  uint64_t applied = 0;
  Status s = client_->Watch(
      options_.resource, options_.ns, watch_options,
      [&](WatchEvent&& event) {
        if (event.type == WatchEvent::Type::kError) {
          const int code = event.object.is_object() ? event.object.value("code", 0) : 0;
          if (code == 410) {
            ++gone_;
          } else {
            ++watch_errors_;
          }
          LogDebug("informer watch error event; re-listing",
                   {{"informer", name_}, {"code", code}, {"status", event.object.dump()}});
          relist = true;
          return false;
        }
        ApplyEvent(std::move(event));
        ++applied;
        return true;
      },
      stop);
  *events = applied;
  if (stop.stop_requested()) return WatchEnd::kStopped;
  if (relist) return WatchEnd::kRelist;
  if (IsGone(s)) {
    ++gone_;
    LogDebug("informer watch expired; re-listing", {{"informer", name_}, {"error", s}});
    return WatchEnd::kRelist;
  }
  if (!s.ok()) {
    ++watch_errors_;
    LogDebug("informer watch failed", {{"informer", name_}, {"events", applied}, {"error", s}});
    return WatchEnd::kFailed;
  }
  return WatchEnd::kEnded;
}

bool Informer::BackOff(int failures, std::stop_token stop) {
  // Equal jitter: between half and all of the doubled delay.
  const auto cap = BackoffDelay(failures, options_.initial_backoff, options_.max_backoff, 1.0);
  const auto delay = std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(cap.count()) * (0.5 + 0.5 * backoff_.Uniform())));
  return RealClock().SleepFor(delay, std::move(stop));
}

void Informer::ResyncLoop(std::stop_token stop) {
  while (RealClock().SleepFor(options_.resync_period, stop)) {
    if (HasSynced()) Resync();
  }
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout, std::stop_token stop) const {
  std::unique_lock lock(sync_mu_);
  auto synced = [this] { return synced_.load(std::memory_order_acquire); };
  if (timeout >= kForever) return sync_cv_.wait(lock, stop, synced);
  return sync_cv_.wait_for(lock, stop, timeout, synced);
}

void Informer::SetSynced() {
  if (synced_.load(std::memory_order_acquire)) return;
  {
    std::lock_guard lock(sync_mu_);
    synced_.store(true, std::memory_order_release);
  }
  sync_cv_.notify_all();
  LogDebug("informer synced", {{"informer", name_}});
}

std::string Informer::LastResourceVersion() const {
  ReaderMutexLock lock(cache_mu_);
  return last_resource_version_;
}

ObjectPtr Informer::Get(std::string_view key) const {
  Entry entry;
  {
    ReaderMutexLock lock(cache_mu_);
    auto it = objects_.find(std::string(key));
    if (it == objects_.end()) return nullptr;
    entry = it->second;
  }
  return Load(entry);  // outside the lock: decoding takes microseconds
}

std::vector<ObjectPtr> Informer::List() const {
  std::vector<Entry> entries;
  {
    ReaderMutexLock lock(cache_mu_);
    entries.reserve(objects_.size());
    for (const auto& [key, entry] : objects_) entries.push_back(entry);
  }
  std::vector<ObjectPtr> out;
  out.reserve(entries.size());
  for (const Entry& entry : entries) out.push_back(Load(entry));
  return out;
}

std::vector<std::string> Informer::ListKeys() const {
  ReaderMutexLock lock(cache_mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(key);
  return out;
}

size_t Informer::Size() const {
  ReaderMutexLock lock(cache_mu_);
  return objects_.size();
}

Status Informer::AddIndex(std::string name, IndexFunc index) {
  WriterMutexLock lock(cache_mu_);
  if (indexes_.count(name) > 0) {
    return AlreadyExists("informer for " + name_ + " already has an index named \"" + name + "\"");
  }
  Index& added = indexes_[name];
  added.func = std::move(index);
  RebuildIndexLocked(added);
  return Status::Ok();
}

void Informer::RebuildIndexLocked(Index& index) {
  index.entries.clear();
  for (const auto& [key, entry] : objects_) {
    for (std::string& value : index.func(*Load(entry))) {
      index.entries[std::move(value)].push_back(&key);
    }
  }
  // One sort per value, not an ordered insert per key.
  for (auto& [value, keys] : index.entries) {
    std::sort(keys.begin(), keys.end(),
              [](const std::string* a, const std::string* b) { return *a < *b; });
  }
}

std::vector<std::string> Informer::IndexKeys(std::string_view index, std::string_view value) const {
  ReaderMutexLock lock(cache_mu_);
  auto it = indexes_.find(index);
  if (it == indexes_.end()) return {};
  auto entry = it->second.entries.find(std::string(value));
  if (entry == it->second.entries.end()) return {};
  std::vector<std::string> keys;
  keys.reserve(entry->second.size());
  for (const std::string* key : entry->second) keys.push_back(*key);
  return keys;
}

std::vector<ObjectPtr> Informer::ByIndex(std::string_view index, std::string_view value) const {
  std::vector<Entry> entries;
  {
    ReaderMutexLock lock(cache_mu_);
    auto it = indexes_.find(index);
    if (it == indexes_.end()) return {};
    auto filed = it->second.entries.find(std::string(value));
    if (filed == it->second.entries.end()) return {};
    entries.reserve(filed->second.size());
    for (const std::string* key : filed->second) {
      auto obj = objects_.find(*key);
      if (obj != objects_.end()) entries.push_back(obj->second);
    }
  }
  std::vector<ObjectPtr> out;
  out.reserve(entries.size());
  for (const Entry& entry : entries) out.push_back(Load(entry));
  return out;
}

namespace {

void File(std::unordered_map<std::string, std::vector<const std::string*>>& entries,
          std::string value, const std::string& key) {
  std::vector<const std::string*>& keys = entries[std::move(value)];
  auto at = KeyPosition(keys, key);
  if (at == keys.end() || **at != key) keys.insert(at, &key);
}

void Unfile(std::unordered_map<std::string, std::vector<const std::string*>>& entries,
            const std::string& value, const std::string& key) {
  auto entry = entries.find(value);
  if (entry == entries.end()) return;
  std::vector<const std::string*>& keys = entry->second;
  auto at = KeyPosition(keys, key);
  if (at != keys.end() && **at == key) keys.erase(at);
  if (keys.empty()) entries.erase(entry);
}

}  // namespace

void Informer::IndexAddLocked(const std::string& key, const Json& obj) {
  for (auto& [name, index] : indexes_) {
    for (std::string& value : index.func(obj)) File(index.entries, std::move(value), key);
  }
}

void Informer::IndexRemoveLocked(const std::string& key, const Json& obj) {
  for (auto& [name, index] : indexes_) {
    for (const std::string& value : index.func(obj)) Unfile(index.entries, value, key);
  }
}

ObjectPtr Informer::Intern(Json obj) const {
  if (options_.transform) options_.transform(obj);
  return std::make_shared<const Json>(std::move(obj));
}

namespace {

// `size` bytes from `data` in one allocation with their reference count.
std::shared_ptr<const uint8_t[]> CopyBytes(const char* data, size_t size) {
  auto bytes = std::make_shared_for_overwrite<uint8_t[]>(size);
  std::memcpy(bytes.get(), data, size);
  return bytes;
}

}  // namespace

size_t Informer::Compact() {
  if (options_.storage != Storage::kCompact) return 0;
  // objects_ is only written under dispatch_mu_: copying it needs no other lock.
  MutexLock dispatch(dispatch_mu_);
  const uint64_t events = events_.load();
  if (objects_.empty() || (events - events_at_compaction_) * 4 < objects_.size()) return 0;
  std::unordered_map<std::string, Entry> fresh;
  fresh.reserve(objects_.size());
  size_t copied = 0;
  for (const auto& [key, entry] : objects_) {
    const char* data = reinterpret_cast<const char*>(entry.bytes.get());
    fresh.emplace(std::string(key), Entry{nullptr, CopyBytes(data, entry.size), entry.size});
    copied += entry.size;
  }
  {
    WriterMutexLock lock(cache_mu_);
    // The indexes point at keys of objects_: file each under its copy (no
    // object is decoded), in vectors allocated with the rest.
    for (auto& [name, index] : indexes_) {
      std::unordered_map<std::string, std::vector<const std::string*>> entries;
      entries.reserve(index.entries.size());
      for (const auto& [value, keys] : index.entries) {
        std::vector<const std::string*>& filed = entries[value];
        filed.reserve(keys.size());
        for (const std::string* key : keys) filed.push_back(&fresh.find(*key)->first);
      }
      index.entries.swap(entries);
    }
    objects_.swap(fresh);
  }
  events_at_compaction_ = events;
  return copied;  // the old entries are freed with `fresh` (a reader's snapshot stays)
}

Informer::Entry Informer::Store(const ObjectPtr& obj) const {
  if (options_.storage == Storage::kTree) return {obj, nullptr, 0};
  std::string bytes;
  Json::to_cbor(*obj, bytes);
  // A copy of exactly its size (the encoder grew `bytes` by doubling).
  return {nullptr, CopyBytes(bytes.data(), bytes.size()), bytes.size()};
}

ObjectPtr Informer::Load(const Entry& entry) {
  if (entry.tree) return entry.tree;
  // The bytes were written by Store from a valid object.
  const uint8_t* bytes = entry.bytes.get();
  return std::make_shared<const Json>(Json::from_cbor(bytes, bytes + entry.size));
}

void Informer::ApplyEvent(WatchEvent event) {
  using Type = WatchEvent::Type;
  if (event.type == Type::kError) return;
  if (event.type == Type::kBookmark) {
    std::string rv = ResourceVersion(event.object);
    if (!rv.empty()) {
      WriterMutexLock lock(cache_mu_);
      last_resource_version_ = std::move(rv);
    }
    ++events_;
    return;
  }
  ObjectPtr obj = Intern(std::move(event.object));
  std::string key = KeyOf(*obj);
  if (key.empty()) {
    LogDebug("informer ignores a watch event without a name", {{"informer", name_}});
    return;
  }
  std::string rv = ResourceVersion(*obj);
  const bool deleted = event.type == Type::kDeleted;

  MutexLock dispatch(dispatch_mu_);
  ObjectPtr old;
  {
    WriterMutexLock lock(cache_mu_);
    auto it = objects_.find(key);
    if (it != objects_.end()) {
      old = Load(it->second);
      if (deleted) {
        IndexRemoveLocked(it->first, *old);
        objects_.erase(it);
      } else {
        // Re-file only under the indexes whose values changed.
        for (auto& [name, index] : indexes_) {
          std::vector<std::string> before = index.func(*old);
          std::vector<std::string> after = index.func(*obj);
          if (before == after) continue;
          for (const std::string& value : before) Unfile(index.entries, value, it->first);
          for (std::string& value : after) File(index.entries, std::move(value), it->first);
        }
        it->second = Store(obj);
      }
    } else if (!deleted) {
      auto added = objects_.emplace(std::move(key), Store(obj)).first;
      IndexAddLocked(added->first, *obj);
    }
    if (!rv.empty()) last_resource_version_ = std::move(rv);
  }
  ++events_;
  if (deleted) {
    if (old) DispatchDelete(obj);
  } else if (old) {
    DispatchUpdate(old, obj);
  } else {
    DispatchAdd(obj);
  }
}

void Informer::Replace(std::vector<Json> items, std::string resource_version) {
  std::vector<std::pair<std::string, Entry>> objects;
  StoreAll(std::move(items), &objects);
  ReplaceObjects(std::move(objects), std::move(resource_version));
}

void Informer::StoreAll(std::vector<Json> items,
                        std::vector<std::pair<std::string, Entry>>* out) const {
  out->reserve(out->size() + items.size());
  if (options_.storage == Storage::kTree) {
    for (Json& item : items) {
      ObjectPtr obj = Intern(std::move(item));
      std::string key = KeyOf(*obj);
      if (!key.empty()) out->emplace_back(std::move(key), Store(obj));
    }
    return;
  }
  // Each object's key and bytes go to one scratch buffer first and are copied
  // out once every tree of the page is freed: allocated then, they sit
  // together in the heap rather than each in the hole its own tree leaves,
  // which kept most of the heap's pages resident (5,000 nodes: RSS 36 MiB
  // for 15 MB in use; packed, 23.8 MiB: bench_informer.sh).
  std::string scratch;
  std::vector<std::array<size_t, 2>> ends;  // each object's key end, bytes end
  for (Json& item : items) {
    ObjectPtr obj = Intern(std::move(item));
    std::string key = KeyOf(*obj);
    if (key.empty()) continue;
    scratch += key;
    const size_t key_end = scratch.size();
    Json::to_cbor(*obj, scratch);
    ends.push_back({key_end, scratch.size()});
  }
  items = {};
  size_t begin = 0;
  for (const auto& [key_end, bytes_end] : ends) {
    const size_t size = bytes_end - key_end;
    out->emplace_back(scratch.substr(begin, key_end - begin),
                      Entry{nullptr, CopyBytes(scratch.data() + key_end, size), size});
    begin = bytes_end;
  }
}

void Informer::ReplaceObjects(std::vector<std::pair<std::string, Entry>> objects,
                              std::string resource_version) {
  std::unordered_map<std::string, Entry> fresh;
  fresh.reserve(objects.size());
  for (auto& [key, entry] : objects) fresh.insert_or_assign(std::move(key), std::move(entry));
  objects = {};

  MutexLock dispatch(dispatch_mu_);
  // Entries, not objects: a compact cache decodes each one when it is
  // dispatched. Updated: the key and the old entry.
  std::vector<std::string> added;
  std::vector<std::pair<std::string, Entry>> updated;
  std::vector<Entry> deleted;
  // objects_ is only written under dispatch_mu_, which this thread holds.
  for (auto& [key, entry] : fresh) {
    auto it = objects_.find(key);
    if (it == objects_.end()) {
      added.push_back(key);
    } else if (ResourceVersion(*Load(it->second)) != ResourceVersion(*Load(entry))) {
      updated.emplace_back(key, it->second);
    } else {
      entry = it->second;  // unchanged: keep the snapshot readers may hold
    }
  }
  for (const auto& [key, entry] : objects_) {
    if (fresh.count(key) == 0) deleted.push_back(entry);
  }
  {
    WriterMutexLock lock(cache_mu_);
    objects_.swap(fresh);
    for (auto& [name, index] : indexes_) RebuildIndexLocked(index);
    last_resource_version_ = std::move(resource_version);
  }
  events_at_compaction_ = events_.load();  // a list's entries are allocated together
  fresh = {};  // the previous cache: objects no longer referenced are freed here
  LogDebug("informer replaced its cache", {{"informer", name_},
                                           {"added", added.size()},
                                           {"updated", updated.size()},
                                           {"deleted", deleted.size()}});
  // objects_ changes only under dispatch_mu_, still held: every key is there.
  auto current = [&](const std::string& key) { return Load(objects_.find(key)->second); };
  for (const std::string& key : added) DispatchAdd(current(key));
  for (const auto& [key, old] : updated) DispatchUpdate(Load(old), current(key));
  for (const Entry& entry : deleted) DispatchDelete(Load(entry));
  SetSynced();
}

void Informer::Resync() {
  MutexLock dispatch(dispatch_mu_);
  // objects_ is only written under dispatch_mu_, which this thread holds.
  for (const auto& [key, entry] : objects_) {
    ObjectPtr obj = Load(entry);
    DispatchUpdate(obj, obj);
  }
}

Informer::HandlerId Informer::AddEventHandler(EventHandler handler) {
  MutexLock dispatch(dispatch_mu_);
  if (handler.on_add) {
    // objects_ is only written under dispatch_mu_, which this thread holds.
    // No structured binding: clang 14 cannot capture one in a lambda.
    for (const auto& entry : objects_) {
      const ObjectPtr obj = Load(entry.second);
      CallHandler(name_, "add", [&] { handler.on_add(obj); });
    }
  }
  const HandlerId id = next_handler_id_++;
  handlers_.push_back({id, std::move(handler)});
  return id;
}

void Informer::RemoveEventHandler(HandlerId id) {
  MutexLock dispatch(dispatch_mu_);
  std::erase_if(handlers_, [id](const Handler& h) { return h.id == id; });
}

void Informer::DispatchAdd(const ObjectPtr& obj) {
  for (const Handler& h : handlers_) {
    if (h.handler.on_add) CallHandler(name_, "add", [&] { h.handler.on_add(obj); });
  }
}

void Informer::DispatchUpdate(const ObjectPtr& old, const ObjectPtr& obj) {
  for (const Handler& h : handlers_) {
    if (h.handler.on_update) CallHandler(name_, "update", [&] { h.handler.on_update(old, obj); });
  }
}

void Informer::DispatchDelete(const ObjectPtr& obj) {
  for (const Handler& h : handlers_) {
    if (h.handler.on_delete) CallHandler(name_, "delete", [&] { h.handler.on_delete(obj); });
  }
}

InformerStats Informer::stats() const {
  InformerStats s;
  s.lists = lists_.load();
  s.list_errors = list_errors_.load();
  s.watches = watches_.load();
  s.watch_errors = watch_errors_.load();
  s.gone = gone_.load();
  s.events = events_.load();
  return s;
}

Json Informer::Describe() const {
  Json out = {{"name", name_},
              {"resource", options_.resource.ApiVersion() + "/" + options_.resource.resource},
              {"path", options_.resource.Path(options_.ns)},
              {"namespace", options_.ns},
              {"labelSelector", options_.label_selector},
              {"fieldSelector", options_.field_selector},
              {"synced", HasSynced()}};
  Json objects = Json::object();
  size_t bytes = 0;
  {
    ReaderMutexLock lock(cache_mu_);
    out["resourceVersion"] = last_resource_version_;
    for (const auto& [key, entry] : objects_) {
      objects[key] = ResourceVersion(*Load(entry));
      bytes += entry.size;
    }
  }
  out["objects"] = std::move(objects);
  if (options_.storage == Storage::kCompact) {
    out["storage"] = "compact";
    out["compactBytes"] = bytes;  // what the objects' CBOR adds up to
  } else {
    out["storage"] = "tree";
  }
  return out;
}

// --- SharedInformerFactory ---

SharedInformerFactory::SharedInformerFactory(Client* client, InformerOptions defaults)
    : client_(client), defaults_(std::move(defaults)) {}

SharedInformerFactory::~SharedInformerFactory() { Stop(); }

void SharedInformerFactory::SetTransform(const Resource& resource,
                                         std::function<void(Json&)> transform) {
  MutexLock lock(mu_);
  transforms_[ResourceKey(resource)] = std::move(transform);
}

void SharedInformerFactory::SetStorage(const Resource& resource, Storage storage) {
  MutexLock lock(mu_);
  storages_[ResourceKey(resource)] = storage;
}

Informer& SharedInformerFactory::For(const Resource& resource, std::string_view ns,
                                     std::string_view label_selector,
                                     std::string_view field_selector) {
  const std::string_view effective_ns = resource.namespaced ? ns : std::string_view();
  std::string key = ResourceKey(resource) + "|";
  key.append(effective_ns).append("|").append(label_selector).append("|").append(field_selector);

  MutexLock lock(mu_);
  auto it = informers_.find(key);
  if (it != informers_.end()) return *it->second;
  InformerOptions options = defaults_;
  options.resource = resource;
  options.ns = std::string(effective_ns);
  options.label_selector = std::string(label_selector);
  options.field_selector = std::string(field_selector);
  if (auto t = transforms_.find(ResourceKey(resource)); t != transforms_.end()) {
    options.transform = t->second;
  }
  if (auto st = storages_.find(ResourceKey(resource)); st != storages_.end()) {
    options.storage = st->second;
  }
  auto informer = std::make_unique<Informer>(client_, std::move(options));
  if (started_) informer->Start(stop_);
  return *informers_.emplace(std::move(key), std::move(informer)).first->second;
}

void SharedInformerFactory::Start(std::stop_token stop) {
  MutexLock lock(mu_);
  started_ = true;
  stop_ = stop;
  for (auto& [key, informer] : informers_) informer->Start(stop);
}

std::vector<Informer*> SharedInformerFactory::All() const {
  MutexLock lock(mu_);
  std::vector<Informer*> all;
  all.reserve(informers_.size());
  for (const auto& [key, informer] : informers_) all.push_back(informer.get());
  return all;
}

bool SharedInformerFactory::WaitForCacheSync(std::chrono::milliseconds timeout,
                                             std::stop_token stop) {
  const std::vector<Informer*> all = All();
  const bool forever = timeout >= kForever;
  const auto deadline = forever ? SteadyClock::time_point::max() : SteadyClock::now() + timeout;
  for (Informer* informer : all) {
    auto left = forever ? timeout
                        : std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::max(deadline - SteadyClock::now(), SteadyClock::duration(0)));
    if (!informer->WaitForSync(left, stop)) return false;
  }
  return true;
}

void SharedInformerFactory::Stop() {
  std::vector<Informer*> all;
  {
    MutexLock lock(mu_);
    started_ = false;
    for (auto& [key, informer] : informers_) all.push_back(informer.get());
  }
  for (Informer* informer : all) informer->Stop();
}

Json SharedInformerFactory::Describe() const {
  Json out = Json::array();
  for (const Informer* informer : All()) out.push_back(informer->Describe());
  return out;
}

}  // namespace gpuop::kube
