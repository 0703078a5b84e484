#include "mig/manager.h"

#include <algorithm>

#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "mig/apply.h"
#include "mig/config.h"
#include "toolkit/cdi_spec.h"

namespace gpuop::mig {
namespace {

using Json = nlohmann::json;

constexpr char kSelectedConfigFile[] = "selected-config";  // the wanted name
constexpr char kConfigCopyFile[] = "config.yaml";          // the file it came from

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty() || a == "/") return b.front() == '/' ? b : "/" + b;
  std::string left = a;
  while (left.size() > 1 && left.back() == '/') left.pop_back();
  return b.front() == '/' ? left + b : left + "/" + b;
}

}  // namespace

Labels ClientLabelsToPause(const Labels& node_labels) {
  Labels out;
  for (const char* key : kGpuClientDeployLabels) {
    auto it = node_labels.find(key);
    if (it == node_labels.end() || it->second == "false") continue;
    out[key] = it->second == kPausedForMigChange ? "true" : it->second;
  }
  return out;
}

Json NodeMetadataPatch(const LabelEdits& labels, const LabelEdits& annotations) {
  Json meta = Json::object();
  auto fill = [](const LabelEdits& edits) {
    Json out = Json::object();
    for (const auto& [k, v] : edits) out[k] = v ? Json(*v) : Json(nullptr);
    return out;
  };
  if (!labels.empty()) meta["labels"] = fill(labels);
  if (!annotations.empty()) meta["annotations"] = fill(annotations);
  return Json{{"metadata", meta}};
}

std::string GpuClientPodSelector() {
  std::vector<std::string> apps(std::begin(kGpuClientApps), std::end(kGpuClientApps));
  return "app in (" + Join(apps, ",") + ")";
}

Status ValidateManagerOptions(const ManagerOptions& o) {
  if (o.node_name.empty()) return InvalidArgument("no node name: set NODE_NAME or --node-name");
  if (o.client == nullptr) return InvalidArgument("the MIG manager needs an API server client");
  if (o.config_file.empty()) {
    return InvalidArgument("no MIG config file: set CONFIG_FILE or --config-file");
  }
  if (!o.open_nvml) return InvalidArgument("no way to open NVML");
  if (o.with_reboot && !o.reboot) return InvalidArgument("WITH_REBOOT=true needs a reboot command");
  if (!o.cdi_output.empty() && o.cdi.hook_path.empty()) {
    return InvalidArgument("regenerating the CDI spec needs the hook path (--cdi-hook-path)");
  }
  return Status::Ok();
}

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {}
Manager::~Manager() = default;

Status Manager::PatchNode(const LabelEdits& labels, const LabelEdits& annotations) {
  auto r = options_.client->Patch(kube::resources::kNodes, "", options_.node_name,
                                  kube::PatchType::kMerge, NodeMetadataPatch(labels, annotations));
  if (!r.ok()) return r.status().Annotate("patching node " + options_.node_name);
  return Status::Ok();
}

void Manager::Notify(bool warning, const std::string& reason, const std::string& message) {
  if (options_.events == nullptr) return;
  kube::ObjectReference ref;
  ref.api_version = "v1";
  ref.kind = "Node";
  ref.name = options_.node_name;
  ref.uid = options_.node_name;  // kubectl describe node matches Node events by name
  options_.events->Event(ref, warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                         reason, message);
}

Status Manager::Persist(const std::string& name, const std::string& config_text) {
  const std::string dir = JoinPath(options_.host_root, options_.state_dir);
  GPUOP_RETURN_IF_ERROR(MakeDirs(dir));
  GPUOP_RETURN_IF_ERROR(WriteFileAtomic(dir + "/" + kConfigCopyFile, config_text));
  return WriteFileAtomic(dir + "/" + kSelectedConfigFile, name + "\n");
}

std::optional<std::string> Manager::PersistedName() const {
  auto text =
      ReadFile(JoinPath(options_.host_root, options_.state_dir) + "/" + kSelectedConfigFile);
  if (!text.ok()) return std::nullopt;
  std::string name = std::string(Trim(*text));
  if (name.empty()) return std::nullopt;
  return name;
}

Status Manager::WaitForClientsGone(std::stop_token stop) {
  kube::ListOptions lo;
  lo.label_selector = GpuClientPodSelector();
  lo.field_selector = "spec.nodeName=" + options_.node_name;
  const auto deadline = std::chrono::steady_clock::now() + options_.clients_timeout;
  std::vector<std::string> left;
  while (true) {
    auto pods = options_.client->List(kube::resources::kPods, options_.clients_namespace, lo);
    if (pods.ok()) {
      left.clear();
      for (const Json& p : pods->items) left.push_back(kube::Name(p));
      if (left.empty()) return Status::Ok();
    } else {
      LogWarn("listing the GPU client pods failed; retrying", {{"error", pods.status()}});
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (!RealClock().SleepFor(options_.poll_interval, stop)) {
      return Aborted("stopping while waiting for the GPU clients to leave");
    }
  }
  return DeadlineExceeded("GPU client pods still on node " + options_.node_name + " after " +
                          std::to_string(options_.clients_timeout.count()) +
                          " ms: " + Join(left, ", ") +
                          " (are their DaemonSets selecting on nvidia.com/gpu.deploy.*?)");
}

Status Manager::RegenerateCdi(const nvml::Client& nvml) {
  if (options_.cdi_output.empty()) return Status::Ok();
  auto spec = toolkit::GenerateCdiSpec(nvml, options_.cdi);
  if (!spec.ok()) return spec.status().Annotate("regenerating the CDI spec");
  const std::string path = JoinPath(options_.host_root, options_.cdi_output);
  const bool json = path.size() > 5 && path.substr(path.size() - 5) == ".json";
  std::string text = json ? toolkit::cdi::ToJson(*spec) : toolkit::cdi::ToYaml(*spec);
  auto old = ReadFile(path);
  if (old.ok() && *old == text) return Status::Ok();
  GPUOP_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  if (Status s = WriteFileAtomic(path, text); !s.ok()) {
    return s.Annotate("writing the CDI spec " + path);
  }
  return Status::Ok();
}

ReconcileOutcome Manager::Fail(const std::string& name, const std::string& reason) {
  LogError("MIG config not applied",
           {{"config", name}, {"node", options_.node_name}, {"reason", reason}});
  if (Status s = PatchNode({{kStateLabel, "failed"}}, {{kFailureAnnotation, reason}}); !s.ok()) {
    // The API server is away: nobody can see this outcome; try again later.
    LogError("setting mig.config.state=failed; retrying the config later", {{"error", s}});
    return {"", reason, false, /*retry=*/true};
  }
  Notify(true, "MigConfigFailed", "mig.config=" + name + ": " + reason);
  return {"failed", reason, false};
}

ReconcileOutcome Manager::Reconcile(const std::string& name, std::stop_token stop) {
  ++reconciles_;
  auto text = ReadFile(options_.config_file);
  if (!text.ok()) {
    return Fail(name, "reading the MIG config file: " + text.status().message());
  }
  auto file = ParseConfig(*text, options_.config_file);
  if (!file.ok()) return Fail(name, file.status().message());
  auto nvml = options_.open_nvml();
  if (!nvml.ok()) {
    // No driver yet (a driver container loading, a driver upgrade under
    // way): nothing is wrong with the config; apply it once the driver is.
    if (!waiting_for_driver_) {
      LogWarn("waiting for the NVIDIA driver to apply the MIG config",
              {{"config", name}, {"error", nvml.status()}});
      waiting_for_driver_ = true;
    }
    return {"", "NVML: " + nvml.status().message(), false, /*retry=*/true};
  }
  if (waiting_for_driver_) LogInfo("the NVIDIA driver is back", {{"config", name}});
  waiting_for_driver_ = false;
  const nvml::Client& gpus = **nvml;
  // A name the file lacks may be one of the layouts generated for these GPUs
  // (all-1g.10gb, all-balanced, ...), as upstream does without CONFIG_FILE.
  if (!file->configs.contains(name)) {
    auto state = ReadState(gpus);
    if (!state.ok()) return Fail(name, "NVML: " + state.status().message());
    ConfigFile defaults = DefaultConfigs(*state);
    auto it = defaults.configs.find(name);
    if (it == defaults.configs.end()) {
      std::vector<std::string> in_file, generated;
      for (const auto& [n, _] : file->configs) in_file.push_back(n);
      for (const auto& [n, _] : defaults.configs) generated.push_back(n);
      return Fail(name, "mig-config \"" + name + "\" is neither in " + options_.config_file + " (" +
                            Join(in_file, ", ") +
                            ") nor among the layouts generated for these GPUs (" +
                            Join(generated, ", ") + ")");
    }
    file->configs[name] = it->second;
  }
  auto prepared = Prepare(gpus, *file, name, false);
  if (!prepared.ok()) return Fail(name, prepared.status().message());

  if (prepared->plan.gpus.empty()) {
    // Already so: nothing to pause; keep the name for the next boot.
    if (Status s = Persist(name, *text); !s.ok()) {
      LogWarn("keeping the selected MIG config failed", {{"error", s}});
    }
    // Clients a manager paused before a reboot come back.
    LabelEdits edits{{kStateLabel, "success"}};
    if (auto node = options_.client->Get(kube::resources::kNodes, "", options_.node_name);
        node.ok()) {
      const Labels labels = kube::Labels(*node);
      for (const auto& [k, v] : ClientLabelsToPause(labels)) {
        if (labels.at(k) == kPausedForMigChange) edits[k] = v;
      }
    }
    if (Status s = PatchNode(edits, {{kFailureAnnotation, std::nullopt}}); !s.ok()) {
      return {"", s.message(), false, /*retry=*/true};
    }
    LogInfo("MIG config already applied", {{"config", name}});
    return {"success", "already applied", false};
  }

  LogInfo("applying MIG config", {{"config", name}, {"plan", prepared->plan.Describe()}});
  if (Status s = Persist(name, *text); !s.ok()) {
    return Fail(name, "keeping the selected config under the host root: " + s.message());
  }
  // Nothing is touched yet: an API server that cannot be reached (after a
  // reboot, say) means trying again later, not a failed config.
  if (Status s = PatchNode({{kStateLabel, "pending"}}); !s.ok()) {
    LogWarn("cannot report mig.config.state=pending; retrying", {{"error", s}});
    return {"", s.message(), false, /*retry=*/true};
  }
  auto previous = Export(gpus, "gpuop-previous-layout");
  if (!previous.ok())
    return Fail(name, "reading the current layout: " + previous.status().message());

  // Pause the GPU clients; their previous values come back whatever happens.
  auto node = options_.client->Get(kube::resources::kNodes, "", options_.node_name);
  if (!node.ok()) return {"", node.status().message(), false, /*retry=*/true};
  const Labels restore = ClientLabelsToPause(kube::Labels(*node));
  LabelEdits pause, unpause;
  for (const auto& [k, v] : restore) {
    pause[k] = kPausedForMigChange;
    unpause[k] = v;
  }
  auto rollback = [&](const std::string& reason) {
    ApplyOptions ro;
    ro.reset_gpu = [&](unsigned gpu) { return ResetGpu(gpus, gpu); };
    auto back = ApplyConfig(gpus, *previous, "gpuop-previous-layout", ro);
    std::string why = reason;
    if (!back.ok()) {
      why += "; putting the previous layout back also failed: " + back.status().message();
    } else if (!back->ResetRequired().empty()) {
      why += "; the previous MIG mode waits for a GPU reset";
    } else {
      why += "; the previous layout is back";
    }
    if (!unpause.empty()) {
      if (Status s = PatchNode(unpause); !s.ok())
        why += "; restoring the client labels: " + s.message();
    }
    return Fail(name, why);
  };
  if (!pause.empty()) {
    if (Status s = PatchNode(pause); !s.ok())
      return rollback("pausing the GPU clients: " + s.message());
    if (Status s = WaitForClientsGone(stop); !s.ok()) return rollback(s.message());
  }

  // A GPU whose new mode waits for a reset is reset; when that cannot be
  // done, WITH_REBOOT reboots the node instead.
  std::vector<unsigned> unreset;
  ApplyOptions ao;
  if (options_.gpu_reset) {
    ao.reset_gpu = [&](unsigned gpu) {
      Status s = ResetGpu(gpus, gpu);
      if (!s.ok()) unreset.push_back(gpu);
      return s;
    };
  }
  auto report = Execute(gpus, *prepared, ao);
  if (!report.ok() && !(options_.with_reboot && !unreset.empty())) {
    ReconcileOutcome out = rollback(report.status().message());
    // A GPU still in use (or another transient state): no reset, try again later.
    out.busy = report.status().code() == StatusCode::kUnavailable;
    return out;
  }
  if (report.ok()) {
    for (unsigned g : report->ResetRequired()) unreset.push_back(g);
  }
  if (!unreset.empty()) {
    std::vector<std::string> which;
    for (unsigned g : unreset) which.push_back(std::to_string(g));
    const std::string need = "GPU(s) " + Join(which, ", ") +
                             " need a reset for their new MIG mode and none could be done";
    if (options_.with_reboot) {
      // The kept selected-config is applied again at the next start.
      LogWarn("rebooting the node for a MIG mode change", {{"gpus", Join(which, ",")}});
      if (Status s = PatchNode({{kStateLabel, "rebooting"}}); !s.ok()) return rollback(s.message());
      Notify(false, "MigConfigRebooting", "mig.config=" + name + ": " + need + "; rebooting");
      if (Status s = options_.reboot(); !s.ok()) return rollback(need + "; reboot: " + s.message());
      return {"rebooting", need, true};
    }
    return rollback(need + " (set WITH_REBOOT=true to reboot, or give a GPU reset command)");
  }
  if (Status s = RegenerateCdi(gpus); !s.ok()) return rollback(s.message());

  if (Status s = PatchNode(unpause); !s.ok()) return Fail(name, s.message());
  const std::string summary = report->Summary();
  if (Status s = PatchNode({{kStateLabel, "success"}}, {{kFailureAnnotation, std::nullopt}});
      !s.ok()) {
    return {"", s.message(), true, /*retry=*/true};
  }
  LogInfo("MIG config applied", {{"config", name}, {"summary", summary}});
  std::string one_line = summary;  // kubectl describe shows one line of a message
  std::replace(one_line.begin(), one_line.end(), '\n', ';');
  Notify(false, "MigConfigApplied", "mig.config=" + name + ": " + one_line);
  return {"success", summary, true};
}

Status Manager::ResetGpu(const nvml::Client& gpus, unsigned gpu) {
  if (!options_.gpu_reset) return FailedPrecondition("no GPU reset command");
  auto g = gpus.GpuByIndex(gpu);
  const std::string bus_id = g.ok() ? g->pci.bus_id : "";
  LogInfo("resetting GPU for its MIG mode", {{"gpu", gpu}, {"bus_id", bus_id}});
  return options_.gpu_reset(gpu, bus_id);
}

void Manager::RequestReconcile() {
  MutexLock lock(mu_);
  forced_ = true;
  wake_ = true;
  cv_.notify_all();
}

Status Manager::Run(std::stop_token stop) {
  GPUOP_RETURN_IF_ERROR(ValidateManagerOptions(options_));
  kube::InformerOptions io;
  io.resource = kube::resources::kNodes;
  io.field_selector = "metadata.name=" + options_.node_name;
  kube::Informer node(options_.client, io);
  auto on_node = [this](const kube::ObjectPtr& obj) {
    std::optional<std::string> value = kube::Label(*obj, kConfigLabel);
    if (value && value->empty()) value.reset();
    MutexLock lock(mu_);
    if (label_seen_ && value == label_) return;
    label_ = value;
    label_seen_ = true;
    wake_ = true;
    cv_.notify_all();
  };
  kube::EventHandler h;
  h.on_add = on_node;
  h.on_update = [on_node](const kube::ObjectPtr&, const kube::ObjectPtr& obj) { on_node(obj); };
  node.AddEventHandler(std::move(h));
  node.Start(stop);

  std::optional<std::string> wanted;
  if (node.WaitForSync(options_.node_sync_timeout, stop)) {
    MutexLock lock(mu_);
    wanted = label_;
  }
  if (!wanted) {
    wanted = PersistedName();
    if (wanted)
      LogInfo("node label not read yet; applying the kept MIG config", {{"config", *wanted}});
  }

  std::optional<std::string> done_name;  // what the last reconcile was for
  std::string done_config;               // and the config file it read
  // When a reconcile that failed on a busy GPU is due again.
  std::optional<std::chrono::steady_clock::time_point> busy_retry_at;
  bool first = true;
  while (!stop.stop_requested()) {
    bool forced = false;
    {
      MutexLock lock(mu_);
      if (!first) {
        cv_.wait_for(lock.native(), stop, options_.config_check_interval,
                     [this]() GPUOP_REQUIRES(mu_) { return wake_; });
      }
      wake_ = false;
      std::swap(forced, forced_);
      if (label_seen_) wanted = label_;
    }
    first = false;
    if (stop.stop_requested()) break;
    if (!wanted) continue;
    auto text = ReadFile(options_.config_file);
    const std::string config = text.ok() ? *text : "";
    const bool busy_due = std::chrono::steady_clock::now() >=
                          busy_retry_at.value_or(std::chrono::steady_clock::time_point::max());
    if (!forced && !busy_due && done_name == wanted && done_config == config) continue;
    ReconcileOutcome out = Reconcile(*wanted, stop);
    busy_retry_at.reset();
    // An outcome the API server did not take is tried again at the next
    // check; a busy GPU after busy_retry_interval; anything else waits for a
    // new label, config or SIGHUP.
    if (out.retry) continue;
    done_name = wanted;
    done_config = config;
    if (out.busy) {
      busy_retry_at = std::chrono::steady_clock::now() + options_.busy_retry_interval;
      LogWarn("a GPU is in use; trying the MIG config again later",
              {{"config", *wanted},
               {"retry_in_ms", static_cast<int64_t>(options_.busy_retry_interval.count())}});
    }
    if (out.state == "rebooting") LogInfo("waiting for the reboot");
  }
  node.Stop();
  return Status::Ok();
}

}  // namespace gpuop::mig
