#include "kube/controller.h"

#include <exception>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "kube/object.h"

namespace gpuop::kube {
namespace {

// A key that keeps failing is reported once at warn, after this many tries in a row.
constexpr int kWarnAfterFailures = 5;

}  // namespace

Controller::Controller(std::string name, WorkQueueOptions queue_options, int workers,
                       ReconcileFunc reconcile)
    : name_(std::move(name)),
      workers_(workers < 1 ? 1 : workers),
      reconcile_(std::move(reconcile)),
      queue_([&] {
        if (queue_options.name.empty()) queue_options.name = name_;
        return std::move(queue_options);
      }()) {}

Controller::~Controller() {
  std::vector<std::pair<Informer*, Informer::HandlerId>> handlers;
  {
    MutexLock lock(mu_);
    handlers.swap(handlers_);
  }
  for (auto& [informer, id] : handlers) informer->RemoveEventHandler(id);
  queue_.ShutDown();
}

void Controller::Watch(Informer& informer, MapFunc map) {
  auto enqueue = [this, map = std::move(map)](const Json& obj) {
    if (!map) {
      std::string key = KeyOf(obj);
      if (!key.empty()) queue_.Add(key);
      return;
    }
    for (const std::string& key : map(obj)) {
      if (!key.empty()) queue_.Add(key);
    }
  };
  EventHandler handler;
  handler.on_add = [enqueue](const ObjectPtr& obj) { enqueue(*obj); };
  handler.on_update = [enqueue](const ObjectPtr& old, const ObjectPtr& obj) {
    // Both: a pod that moved nodes concerns the node it left and the new one.
    if (old != obj) enqueue(*old);
    enqueue(*obj);
  };
  handler.on_delete = [enqueue](const ObjectPtr& obj) { enqueue(*obj); };
  {
    MutexLock lock(mu_);
    sync_on_.push_back(&informer);
  }
  Informer::HandlerId id = informer.AddEventHandler(std::move(handler));
  MutexLock lock(mu_);
  handlers_.emplace_back(&informer, id);
}

void Controller::RequireSynced(const Informer& informer) {
  MutexLock lock(mu_);
  sync_on_.push_back(&informer);
}

Status Controller::Run(std::stop_token stop) {
  std::vector<const Informer*> informers;
  {
    MutexLock lock(mu_);
    informers = sync_on_;
  }
  for (const Informer* informer : informers) {
    if (!informer->WaitForSync(std::chrono::milliseconds::max(), stop)) {
      queue_.ShutDown();
      return Aborted("controller " + name_ + " stopped before the cache of " + informer->name() +
                     " synced");
    }
  }
  LogDebug("controller started", {{"controller", name_}, {"workers", workers_}});
  {
    std::vector<std::jthread> workers;
    workers.reserve(static_cast<size_t>(workers_));
    for (int i = 0; i < workers_; ++i) {
      workers.emplace_back([this] {
        while (ProcessNextItem()) {
        }
      });
    }
    WaitForStop(stop);
    queue_.ShutDown();
    // Leaving the scope joins the workers once their current reconcile ends.
  }
  LogDebug("controller stopped", {{"controller", name_}});
  return Status::Ok();
}

ReconcileResult Controller::SafeReconcile(const std::string& key) {
  ++reconciles_;
  try {
    return reconcile_(key);
  } catch (const std::exception& e) {
    ++exceptions_;
    LogError("reconcile threw; retrying with backoff",
             {{"controller", name_}, {"key", key}, {"error", e.what()}});
    return ReconcileResult::Error(Internal("reconcile of " + key + " threw: " + e.what()));
  } catch (...) {
    ++exceptions_;
    LogError("reconcile threw; retrying with backoff", {{"controller", name_}, {"key", key}});
    return ReconcileResult::Error(
        Internal("reconcile of " + key + " threw a non-standard exception"));
  }
}

bool Controller::ProcessNextItem() {
  std::optional<std::string> key = queue_.Get();
  if (!key) return false;
  ReconcileResult result = SafeReconcile(*key);
  if (!result.status.ok()) {
    ++errors_;
    const int failures = queue_.NumRequeues(*key) + 1;
    if (failures == kWarnAfterFailures) {
      LogWarn(
          "reconcile keeps failing; retrying with backoff",
          {{"controller", name_}, {"key", *key}, {"failures", failures}, {"error", result.status}});
    } else {
      LogDebug(
          "reconcile failed; retrying with backoff",
          {{"controller", name_}, {"key", *key}, {"failures", failures}, {"error", result.status}});
    }
    queue_.AddRateLimited(*key);
  } else if (result.requeue_after > std::chrono::milliseconds::zero()) {
    ++requeue_after_;
    queue_.Forget(*key);
    queue_.AddAfter(*key, result.requeue_after);
  } else if (result.requeue) {
    queue_.AddRateLimited(*key);
  } else {
    queue_.Forget(*key);
  }
  queue_.Done(*key);
  return true;
}

ControllerStats Controller::stats() const {
  ControllerStats s;
  s.reconciles = reconciles_.load();
  s.errors = errors_.load();
  s.exceptions = exceptions_.load();
  s.requeue_after = requeue_after_.load();
  return s;
}

}  // namespace gpuop::kube
