#include "driver_manager/manager.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "driver_manager/core.h"
#include "host/driver_files.h"
#include "kube/gpu_pods.h"
#include "kube/object.h"
#include "nvml/client.h"

namespace gpuop::driver_manager {
namespace {

namespace res = kube::resources;
// A stop token that fires at `deadline` or when `outer` does.
class Deadline {
 public:
  Deadline(const Clock& clock, Clock::SteadyTime deadline, std::stop_token outer)
      : on_outer_(outer, [this] { source_.request_stop(); }),
        timer_([this, &clock, deadline](std::stop_token own) {
          clock.SleepUntil(deadline, own);
          source_.request_stop();
        }) {}
  std::stop_token token() const { return source_.get_token(); }
  bool expired() const { return source_.stop_requested(); }

 private:
  std::stop_source source_;
  std::stop_callback<std::function<void()>> on_outer_;
  std::jthread timer_;  // last: uses source_
};

std::string Seconds(std::chrono::seconds s) { return std::to_string(s.count()) + "s"; }

class Run {
 public:
  Run(const Options& o, Dependencies deps, std::stop_token stop)
      : o_(o), deps_(deps), clock_(ClockOrReal(deps.clock)), stop_(std::move(stop)) {
    restore_labels_ = kube::PausableLabelsAndDra(o.custom_pause_label);
  }

  Status Execute() {
    auto node = GetNode();
    if (!node.ok()) return node.status();
    node_ref_ = kube::ReferenceTo(*node, &res::kNodes);
    policy_ = PolicyFor(o_.enable_gpu_pod_eviction, o_.enable_auto_drain,
                        kube::Annotation(*node, kUpgradeEnabledAnnotation));

    NodeState state;
    state.host_driver = HostDriverInstalled(o_.host_root);
    auto modules = deps_.kernel.List();
    if (!modules.ok()) {
      return Fail(modules.status().Annotate("reading the loaded kernel modules"), kReasonFailed);
    }
    state.nvidia_loaded = host::FindModule(*modules, "nvidia") != nullptr;
    const std::string state_file = JoinRoot(o_.run_dir, std::string("/") + kDriverStateFile);
    if (auto digest = ReadFile(state_file); digest.ok()) {
      state.loaded_digest = std::string(Trim(*digest));
    }
    const Decision decision = Decide(state, o_.driver_config_digest, o_.force_reinstall);
    LogInfo("driver manager", {{"node", o_.node_name},
                               {"decision", DecisionName(decision)},
                               {"evict", policy_.evict},
                               {"drain", policy_.drain},
                               {"upgrade_controller_owns", policy_.upgrade_controller_owns}});

    switch (decision) {
      case Decision::kHostDriver:
        return HostDriver();
      case Decision::kNoDriver:
        return Finish(kReasonNoDriver,
                      "no NVIDIA driver is loaded on this node: nothing to unload; the driver "
                      "container loads its driver");
      case Decision::kDriverCurrent:
        return Finish(kReasonDriverCurrent,
                      "the loaded NVIDIA driver has this configuration (digest " +
                          o_.driver_config_digest +
                          "): nothing to unload; set FORCE_REINSTALL=true to reload it anyway");
      case Decision::kReload:
        return Reload(*modules);
    }
    return Internal("unknown decision");
  }

 private:
  // ---- Steps ----

  Status HostDriver() {
    const std::string label = kube::OperandDeployLabel("driver");
    auto patched = deps_.client.Patch(res::kNodes, "", o_.node_name, kube::PatchType::kStrategic,
                                      kube::LabelPatch({{label, std::string(kPreInstalled)}}));
    if (!patched.ok()) return patched.status().Annotate("labelling " + label + "=pre-installed");
    RestoreAfterCrash();
    const std::string msg =
        "an NVIDIA driver is installed on the host of node " + o_.node_name + ": labelled it " +
        label +
        "=pre-installed so the driver DaemonSet leaves it; to use the driver container instead, "
        "uninstall the host driver, reboot and remove the label";
    Record(kube::EventType::kWarning, kReasonHostDriver, msg);
    if (!o_.pod_name.empty()) {
      // The DaemonSet controller deletes this pod now that it no longer
      // matches; exiting earlier would only restart this container.
      const std::string ns = o_.operator_namespace, name = o_.pod_name;
      auto left = WaitPodsGone(
          [&](const Json& p) { return kube::Namespace(p) == ns && kube::Name(p) == name; },
          o_.host_driver_wait);
      if (left.ok() && !left->empty()) {
        LogInfo("this pod was not deleted in time; exiting",
                {{"pod", ns + "/" + name}, {"waited", Seconds(o_.host_driver_wait)}});
      }
    }
    return FailedPrecondition(msg);
  }

  Status Reload(const std::vector<host::KernelModule>& modules) {
    // 3. Operands.
    GPUOP_RETURN_IF_ERROR(PauseLabels(kube::PausableLabels(o_.custom_pause_label)));
    const std::string ns = o_.operator_namespace;
    auto operands = WaitPodsGone([&](const Json& p) { return kube::IsOperandPod(p, ns); },
                                 o_.operand_wait_timeout);
    if (!operands.ok()) return Fail(operands.status(), kReasonFailed);
    if (!operands->empty()) {
      return Fail(DeadlineExceeded(
                      "the paused GPU operand pods did not leave node " + o_.node_name +
                      " within " + Seconds(o_.operand_wait_timeout) + ": " + PodList(*operands) +
                      "; check why they do not terminate (kubectl describe pod), or raise "
                      "GPUOP_OPERAND_WAIT_TIMEOUT"),
                  kReasonOperandsTimeout);
    }
    Record(kube::EventType::kNormal, kReasonOperandsGone,
           "the GPU operand pods left node " + o_.node_name);

    // 4. GPU pods.
    if (policy_.evict || policy_.drain) {
      GPUOP_RETURN_IF_ERROR(Cordon());
    }
    if (policy_.evict) {
      Status s = EvictGpuPods();
      if (!s.ok() && !policy_.drain) return Fail(s, kReasonEvictionFailed);
      if (!s.ok()) {
        Record(kube::EventType::kWarning, kReasonEvictionFailed,
               s.message() + "; draining the node instead (ENABLE_AUTO_DRAIN)");
        GPUOP_RETURN_IF_ERROR(DrainOrFail());
      }
    } else if (policy_.drain) {
      GPUOP_RETURN_IF_ERROR(DrainOrFail());
    }

    // No pod may still use a GPU through a DRA claim (NVIDIA's step 7):
    // pausing the DRA driver would pull the devices from under it.
    GPUOP_RETURN_IF_ERROR(NoLivePodsWithGpuClaims());

    // 5. The DRA driver's kubelet plugin, once no GPU pod needs its claims.
    GPUOP_RETURN_IF_ERROR(PauseLabels({kube::OperandDeployLabel(kube::kDraDriverComponent)}));
    auto dra = WaitPodsGone([&](const Json& p) { return kube::IsDraPluginPod(p, ns); },
                            o_.operand_wait_timeout);
    if (!dra.ok()) return Fail(dra.status(), kReasonFailed);
    if (!dra->empty()) {
      return Fail(
          DeadlineExceeded("the DRA driver's kubelet plugin did not leave node " + o_.node_name +
                           " within " + Seconds(o_.operand_wait_timeout) + ": " + PodList(*dra)),
          kReasonOperandsTimeout);
    }

    // 6. Modules.
    auto unloaded = UnloadModules(modules);
    if (!unloaded.ok() && policy_.drain && !drained_) {
      LogWarn("unloading failed; draining the node and trying once more",
              {{"error", unloaded.status()}});
      GPUOP_RETURN_IF_ERROR(DrainOrFail());
      auto again = deps_.kernel.List();
      unloaded =
          again.ok() ? UnloadModules(*again) : Result<std::vector<std::string>>(again.status());
    }
    if (!unloaded.ok()) return Fail(unloaded.status(), kReasonUnloadFailed);
    RemovePidFile();

    // 7. Done.
    Status restored = RestoreLabels();
    Status uncordoned = UndoOwnCordon();
    if (!restored.ok() || !uncordoned.ok()) {
      return Fail(!restored.ok() ? restored : uncordoned, kReasonFailed);
    }
    Record(kube::EventType::kNormal, kReasonUnloaded,
           "unloaded the NVIDIA driver (" + Join(*unloaded, ", ") + ") on node " + o_.node_name +
               ", GPU operands restored; the driver container loads the new driver");
    return Status::Ok();
  }

  // Nothing to unload: undo what a crashed run left, then succeed.
  Status Finish(const char* reason, const std::string& message) {
    RemovePidFile();
    GPUOP_RETURN_IF_ERROR(RestoreLabels());
    GPUOP_RETURN_IF_ERROR(UndoOwnCordon());
    Record(kube::EventType::kNormal, reason, message);
    return Status::Ok();
  }

  // ---- Labels ----

  Status PauseLabels(const std::vector<std::string>& labels) {
    auto node = GetNode();
    if (!node.ok()) return Fail(node.status(), kReasonFailed);
    auto changes = kube::PauseChanges(kube::Labels(*node), labels);
    if (changes.empty()) return Status::Ok();
    auto patched = deps_.client.Patch(res::kNodes, "", o_.node_name, kube::PatchType::kStrategic,
                                      kube::LabelPatch(changes));
    if (!patched.ok()) {
      return Fail(patched.status().Annotate("pausing the GPU operands' deploy labels"),
                  kReasonFailed);
    }
    std::vector<std::string> names;
    for (const auto& [k, v] : changes) names.push_back(k + "=" + v);
    Record(kube::EventType::kNormal, kReasonOperandsPaused,
           "paused GPU operands on node " + o_.node_name + ": " + Join(names, ", "));
    return Status::Ok();
  }

  Status RestoreLabels() {
    auto node = GetNode();
    if (!node.ok()) return node.status().Annotate("restoring the GPU operands' deploy labels");
    auto changes = kube::RestoreChanges(kube::Labels(*node), restore_labels_);
    if (changes.empty()) return Status::Ok();
    auto patched = deps_.client.Patch(res::kNodes, "", o_.node_name, kube::PatchType::kStrategic,
                                      kube::LabelPatch(changes));
    if (!patched.ok()) {
      return patched.status().Annotate("restoring the GPU operands' deploy labels");
    }
    std::vector<std::string> names;
    for (const auto& [k, v] : changes) names.push_back(k + "=" + v);
    LogInfo("deploy labels restored", {{"node", o_.node_name}, {"labels", Join(names, ",")}});
    return Status::Ok();
  }

  // Best effort, on paths that end in an error anyway.
  void RestoreAfterCrash() {
    if (Status s = RestoreLabels(); !s.ok()) LogWarn("restoring labels", {{"error", s}});
    if (Status s = UndoOwnCordon(); !s.ok()) LogWarn("uncordoning", {{"error", s}});
  }

  // ---- Cordon ----

  // Conditional on the version read; a concurrent change makes it re-read.
  Status PatchNodeWith(const std::function<std::optional<Json>(const Json&)>& make, bool* changed) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto node = GetNode();
      if (!node.ok()) return node.status();
      auto patch = make(*node);
      if (!patch) return Status::Ok();
      auto patched =
          deps_.client.Patch(res::kNodes, "", o_.node_name, kube::PatchType::kMerge, *patch);
      if (patched.ok()) {
        *changed = true;
        return Status::Ok();
      }
      if (!kube::IsConflict(patched.status())) return patched.status();
    }
    return Aborted("node " + o_.node_name + " kept changing; try again");
  }

  Status Cordon() {
    auto node = GetNode();
    if (!node.ok()) return Fail(node.status(), kReasonFailed);
    if (CordonStateOf(*node) == CordonState::kCordonedByOther) {
      LogInfo("node already cordoned by someone else; it stays cordoned", {{"node", o_.node_name}});
      return Status::Ok();
    }
    bool changed = false;
    if (Status s = PatchNodeWith(CordonPatch, &changed); !s.ok()) {
      return Fail(s.Annotate("cordoning node " + o_.node_name), kReasonFailed);
    }
    if (changed) {
      Record(kube::EventType::kNormal, kReasonCordoned,
             "cordoned node " + o_.node_name + " for the driver reload (annotation " +
                 std::string(kCordonAnnotation) + "); uncordoned when the driver is unloaded");
    }
    return Status::Ok();
  }

  Status UndoOwnCordon() {
    bool changed = false;
    Status s = PatchNodeWith(UncordonPatch, &changed);
    if (!s.ok()) return s.Annotate("uncordoning node " + o_.node_name);
    if (changed) LogInfo("uncordoned (our own cordon)", {{"node", o_.node_name}});
    return Status::Ok();
  }

  // ---- Pods ----

  Result<std::vector<Json>> PodsOnNode(const std::string& label_selector = "") {
    kube::ListOptions lo;
    lo.field_selector = "spec.nodeName=" + o_.node_name;
    lo.label_selector = label_selector;
    auto list = deps_.client.ListAll(res::kPods, "", lo);
    if (!list.ok()) return list.status().Annotate("listing the pods on node " + o_.node_name);
    return std::move(list->items);
  }

  // Waits until no pod on this node satisfies `match`; returns those still
  // there when `timeout` (or a stop) ends the wait. Watches, re-listing when
  // a stream ends.
  Result<std::vector<Json>> WaitPodsGone(const std::function<bool(const Json&)>& match,
                                         std::chrono::seconds timeout) {
    Deadline deadline(clock_, clock_.SteadyNow() + timeout, stop_);
    std::map<std::string, Json> present;
    Status last_error;
    while (true) {
      kube::ListOptions lo;
      lo.field_selector = "spec.nodeName=" + o_.node_name;
      auto list = deps_.client.ListAll(res::kPods, "", lo);
      if (list.ok()) {
        present.clear();
        for (Json& p : list->items) {
          if (!match(p)) continue;
          std::string key = PodKey(p);  // before the move below
          present[key] = std::move(p);
        }
        if (present.empty()) return std::vector<Json>{};
      } else {
        last_error = list.status();
      }
      if (deadline.expired()) break;
      if (!list.ok()) {
        clock_.SleepFor(std::chrono::seconds(1), deadline.token());
        continue;
      }
      kube::WatchOptions wo;
      wo.field_selector = lo.field_selector;
      wo.resource_version = list->resource_version;
      wo.timeout = std::chrono::seconds(60);
      Status s = deps_.client.Watch(
          res::kPods, "", wo,
          [&](kube::WatchEvent&& ev) {
            using Type = kube::WatchEvent::Type;
            if (ev.type == Type::kError) return false;  // re-list
            if (ev.type == Type::kBookmark) return true;
            const std::string key = PodKey(ev.object);
            if (ev.type == Type::kDeleted || !match(ev.object)) {
              present.erase(key);
            } else {
              present[key] = std::move(ev.object);
            }
            return !present.empty();
          },
          deadline.token());
      if (present.empty()) return std::vector<Json>{};
      if (!s.ok()) last_error = s;
      if (deadline.expired()) break;
    }
    if (present.empty() && !last_error.ok()) {
      return last_error.Annotate("watching the pods on node " + o_.node_name);
    }
    if (stop_.stop_requested()) return Aborted("stopped while waiting for pods to leave");
    std::vector<Json> left;
    for (auto& [_, p] : present) left.push_back(std::move(p));
    return left;
  }

  // Evicts `pods` (PodDisruptionBudget refusals retried until the drain
  // timeout) and waits, within the same timeout, until they are gone.
  Status EvictAndWait(const std::vector<Json>& pods, const std::string& what) {
    const std::chrono::seconds timeout = o_.EffectiveDrainTimeout();
    const auto until = clock_.SteadyNow() + timeout;
    std::set<std::string> evicted;
    for (const Json& pod : pods) {
      while (true) {
        Status s = deps_.client.Evict(kube::Namespace(pod), kube::Name(pod));
        if (s.ok() || kube::IsNotFound(s)) break;
        if (s.http_status() != 429) {
          return s.Annotate("evicting " + what + " " + PodKey(pod));
        }
        if (clock_.SteadyNow() >= until ||
            !clock_.SleepUntil(std::min(clock_.SteadyNow() + std::chrono::seconds(2), until),
                               stop_)) {
          return DeadlineExceeded("evicting " + what + " " + PodKey(pod) +
                                  ": still refused after " + Seconds(timeout) + " (" + s.message() +
                                  "); check its PodDisruptionBudget, or raise "
                                  "DRAIN_TIMEOUT_SECONDS");
        }
      }
      evicted.insert(PodKey(pod));
      LogInfo("evicted", {{"pod", PodKey(pod)}, {"node", o_.node_name}});
    }
    const auto left_time =
        std::chrono::duration_cast<std::chrono::seconds>(until - clock_.SteadyNow());
    auto left = WaitPodsGone([&](const Json& p) { return evicted.contains(PodKey(p)); },
                             std::max(left_time, std::chrono::seconds(1)));
    if (!left.ok()) return left.status();
    if (!left->empty()) {
      return DeadlineExceeded("evicted " + what + " still on node " + o_.node_name + " after " +
                              Seconds(timeout) + ": " + PodList(*left) +
                              "; check why they do not terminate (kubectl describe pod), or "
                              "raise DRAIN_TIMEOUT_SECONDS");
    }
    return Status::Ok();
  }

  EvictionFlags Flags() const {
    return {.force = o_.drain_use_force, .delete_emptydir_data = o_.drain_delete_emptydir_data};
  }

  // "ns/name" of the claims gpu.nvidia.com allocated (none without DRA).
  Result<std::set<std::string>> GpuClaims() {
    return kube::ListClaimsAllocatedBy(deps_.client, kube::kGpuDraDriver);
  }

  Status EvictGpuPods() {
    GPUOP_ASSIGN_OR_RETURN(std::set<std::string> claims, GpuClaims());
    GPUOP_ASSIGN_OR_RETURN(std::vector<Json> pods, PodsOnNode());
    EvictionPlan plan = PlanEviction(pods, Flags(), /*only_gpu_pods=*/true, claims);
    if (!plan.refused.empty()) {
      return FailedPrecondition("cannot evict all GPU pods from node " + o_.node_name +
                                ", so none was evicted: " + Join(plan.refused, "; "));
    }
    if (plan.evict.empty()) return Status::Ok();
    GPUOP_RETURN_IF_ERROR(EvictAndWait(plan.evict, "GPU pod"));
    Record(kube::EventType::kNormal, kReasonGpuPodsEvicted,
           "evicted " + std::to_string(plan.evict.size()) + " GPU pod(s) from node " +
               o_.node_name + ": " + PodList(plan.evict));
    return Status::Ok();
  }

  Status NoLivePodsWithGpuClaims() {
    auto claims = GpuClaims();
    if (!claims.ok()) return Fail(claims.status(), kReasonFailed);
    if (claims->empty()) return Status::Ok();
    auto pods = PodsOnNode();
    if (!pods.ok()) return Fail(pods.status(), kReasonFailed);
    std::vector<Json> holding = LivePodsWithClaims(*pods, *claims);
    if (holding.empty()) return Status::Ok();
    const std::string fix = policy_.upgrade_controller_owns || policy_.evict
                                ? "delete them"
                                : "delete them, or set ENABLE_GPU_POD_EVICTION=true so they are "
                                  "evicted";
    return Fail(FailedPrecondition("pods on node " + o_.node_name + " still hold GPUs through " +
                                   std::string(kube::kGpuDraDriver) +
                                   " ResourceClaims: " + PodList(holding) + "; " + fix),
                kReasonDraClaimsHeld);
  }

  Status DrainOrFail() {
    drained_ = true;
    auto pods = PodsOnNode(o_.drain_pod_selector);
    if (!pods.ok()) return Fail(pods.status(), kReasonDrainFailed);
    EvictionPlan plan = PlanEviction(*pods, Flags(), /*only_gpu_pods=*/false);
    if (!plan.refused.empty()) {
      return Fail(FailedPrecondition("cannot drain node " + o_.node_name +
                                     ", so no pod was evicted: " + Join(plan.refused, "; ")),
                  kReasonDrainFailed);
    }
    if (Status s = EvictAndWait(plan.evict, "pod"); !s.ok()) {
      return Fail(s.Annotate("draining node " + o_.node_name), kReasonDrainFailed);
    }
    Record(kube::EventType::kNormal, kReasonDrained,
           "drained node " + o_.node_name + ": evicted " + std::to_string(plan.evict.size()) +
               " pod(s)");
    return Status::Ok();
  }

  // ---- Modules ----

  Result<std::vector<std::string>> UnloadModules(const std::vector<host::KernelModule>& loaded) {
    std::vector<std::string> unloaded;
    for (const char* name : host::kNvidiaModulesUnloadOrder) {
      if (host::FindModule(loaded, name) == nullptr) continue;
      Status s = deps_.kernel.Unload(name);
      if (s.code() == StatusCode::kNotFound) continue;
      if (!s.ok()) return s.Annotate("unloading the NVIDIA driver: " + Holders());
      unloaded.push_back(name);
      LogInfo("kernel module unloaded", {{"module", name}, {"node", o_.node_name}});
    }
    return unloaded;
  }

  // Who still holds the GPUs: GPU pods on the node and processes with
  // /dev/nvidia* open.
  std::string Holders() {
    std::vector<std::string> parts;
    const std::set<std::string> claims = GpuClaims().value_or({});
    if (auto pods = PodsOnNode(); pods.ok()) {
      std::vector<Json> gpu_pods;
      for (const Json& p : *pods) {
        if (kube::IsGpuPod(p, claims)) gpu_pods.push_back(p);
      }
      if (!gpu_pods.empty()) parts.push_back("GPU pods still on the node: " + PodList(gpu_pods));
    }
    std::vector<std::string> procs = ProcessesHoldingGpus();
    if (!procs.empty()) {
      if (procs.size() > 10) procs.resize(10);
      parts.push_back("processes holding /dev/nvidia*: " + Join(procs, ", "));
    }
    if (parts.empty()) return "no GPU pod or process found holding the GPUs";
    return Join(parts, "; ");
  }

  void RemovePidFile() {
    const std::string pidfile = JoinRoot(o_.run_dir, std::string("/") + kDriverPidFile);
    if (::unlink(pidfile.c_str()) == 0) LogInfo("stale pidfile removed", {{"path", pidfile}});
  }

  // ---- Reporting ----

  Result<Json> GetNode() {
    auto node = deps_.client.Get(res::kNodes, "", o_.node_name);
    if (!node.ok()) return node.status().Annotate("reading node " + o_.node_name);
    return node;
  }

  void Record(kube::EventType type, const char* reason, const std::string& message) {
    if (type == kube::EventType::kWarning) {
      LogWarn(message, {{"reason", reason}, {"node", o_.node_name}});
    } else {
      LogInfo(message, {{"reason", reason}, {"node", o_.node_name}});
    }
    deps_.events.Event(node_ref_, type, reason, message);
  }

  // Any failure: restore labels, undo gpuop's own cordon, say what to do.
  Status Fail(const Status& cause, const char* reason) {
    RestoreAfterCrash();
    std::string what_next =
        policy_.upgrade_controller_owns
            ? "the upgrade controller owns eviction on this node: fix the cause, then label the "
              "node nvidia.com/gpu-driver-upgrade-state=upgrade-required to retry"
            : "the driver pod retries (Init:CrashLoopBackOff) once the cause is fixed";
    Status out(cause.code(), cause.message() + "; GPU operand labels restored; " + what_next);
    Record(kube::EventType::kWarning, reason, out.message());
    return out;
  }

  const Options& o_;
  Dependencies deps_;
  const Clock& clock_;
  std::stop_token stop_;
  kube::ObjectReference node_ref_;
  EvictionPolicy policy_;
  std::vector<std::string> restore_labels_;
  bool drained_ = false;
};

}  // namespace

Status UninstallDriver(const Options& o, Dependencies deps, std::stop_token stop) {
  return Run(o, deps, std::move(stop)).Execute();
}

bool HostDriverInstalled(const std::string& host_root) {
  auto lib = host::FindLibraryBySoname(host_root, "libnvidia-ml.so.1");
  if (!lib.ok()) return false;
  auto nvml = nvml::Client::Open(JoinRoot(host_root, *lib));
  if (!nvml.ok()) {
    LogInfo("NVML on the host does not start: no host driver",
            {{"library", *lib}, {"error", nvml.status()}});
    return false;
  }
  return true;
}

std::vector<std::string> ProcessesHoldingGpus(const std::string& proc_root) {
  std::vector<std::string> out;
  const std::string proc = JoinRoot(proc_root, "/proc");
  DIR* d = ::opendir(proc.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string pid = e->d_name;
    if (!ParseUint(pid)) continue;
    const std::string fd_dir = proc + "/" + pid + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    bool holds = false;
    while (dirent* f = ::readdir(fds)) {
      char target[256];
      const std::string link = fd_dir + "/" + f->d_name;
      ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      if (StartsWith(std::string_view(target, static_cast<size_t>(n)), "/dev/nvidia")) {
        holds = true;
        break;
      }
    }
    ::closedir(fds);
    if (!holds) continue;
    std::string comm = "?";
    if (auto c = ReadFile(proc + "/" + pid + "/comm"); c.ok()) comm = std::string(Trim(*c));
    out.push_back("pid " + pid + " (" + comm + ")");
  }
  ::closedir(d);
  return out;
}

}  // namespace gpuop::driver_manager
