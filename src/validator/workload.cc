#include "validator/workload.h"

#include <chrono>

#include "base/clock.h"
#include "base/json_field.h"
#include "base/log.h"
#include "kube/object.h"
#include "validator/checks.h"

namespace gpuop::validator {

using Json = nlohmann::json;

Json BuildWorkloadPod(const WorkloadPodSpec& s) {
  Json command = Json::array({"gpuop", "cuda", "vector-add"});
  if (!s.require_cuda.empty()) {
    command.push_back("--require-cuda");
    command.push_back(s.require_cuda);
  }
  Json container{
      {"name", s.check + "-validation"},
      {"image", s.image},
      {"imagePullPolicy", s.image_pull_policy.empty() ? "IfNotPresent" : s.image_pull_policy},
      {"command", command},
      // The error `gpuop cuda vector-add` prints becomes the termination
      // message the validator reports.
      {"terminationMessagePolicy", "FallbackToLogsOnError"},
      {"securityContext", {{"allowPrivilegeEscalation", false}}}};
  if (!s.resource.empty()) {
    // One device, allocated by the device plugin: the check runs on what a
    // user's pod would get.
    container["resources"] = {{"limits", {{s.resource, "1"}}}, {"requests", {{s.resource, "1"}}}};
  } else {
    // No device plugin: every GPU, from the runtime class's runtime.
    container["env"] = Json::array({Json{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}});
  }
  Json spec{{"nodeName", s.node_name},
            {"restartPolicy", "OnFailure"},
            {"serviceAccountName", kValidatorServiceAccount},
            {"tolerations", s.tolerations.is_array() ? s.tolerations : Json::array()},
            {"containers", Json::array({container})}};
  if (!s.runtime_class.empty()) spec["runtimeClassName"] = s.runtime_class;
  if (!s.image_pull_secrets.empty()) {
    Json list = Json::array();
    for (const std::string& x : s.image_pull_secrets) list.push_back(Json{{"name", x}});
    spec["imagePullSecrets"] = std::move(list);
  }
  Json meta{{"generateName", s.name_prefix},
            {"namespace", s.namespace_},
            {"labels", {{"app", s.app}, {"app.kubernetes.io/part-of", "gpu-operator"}}}};
  if (s.owner_references.is_array() && !s.owner_references.empty()) {
    meta["ownerReferences"] = s.owner_references;
  }
  return Json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

namespace {

// "exit code 3: <message or reason>" of a terminated state, "" when it exited 0.
std::string FailedTermination(const Json& terminated) {
  if (!terminated.is_object()) return "";
  int code = terminated.value("exitCode", 0);
  if (code == 0) return "";
  std::string why = terminated.value("message", "");
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  if (why.empty()) why = terminated.value("reason", "");
  return "exit code " + std::to_string(code) + (why.empty() ? "" : ": " + why);
}

}  // namespace

PodOutcome EvaluateWorkloadPod(const Json& pod) {
  PodOutcome out;
  const std::string phase = kube::PodPhase(pod);
  const Json& status = Field(pod, "status");
  std::string failure;
  std::string waiting;
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    const Json& statuses = Field(status, list);
    if (!statuses.is_array()) continue;
    for (const Json& cs : statuses) {
      const std::string name = cs.value("name", "?");
      const Json& state = Field(cs, "state");
      std::string f = FailedTermination(Field(state, "terminated"));
      if (f.empty()) f = FailedTermination(Field(Field(cs, "lastState"), "terminated"));
      if (!f.empty() && failure.empty()) failure = "container " + name + " " + f;
      const Json& w = Field(state, "waiting");
      if (w.is_object() && waiting.empty()) {
        waiting = "container " + name + " waiting: " + w.value("reason", "") +
                  (w.value("message", "").empty() ? "" : " (" + w.value("message", "") + ")");
      }
    }
  }
  if (phase == "Succeeded") {
    out.done = true;
    out.succeeded = true;
    out.message = "succeeded";
    return out;
  }
  if (phase == "Failed") {
    out.done = true;
    std::string reason =
        Field(status, "message").is_string() ? Field(status, "message").get<std::string>() : "";
    out.message = !failure.empty() ? failure : !reason.empty() ? reason : "the pod failed";
    return out;
  }
  if (!failure.empty()) {
    out.done = true;
    out.message = failure;
    return out;
  }
  out.message = !waiting.empty() ? waiting : "phase " + (phase.empty() ? "Pending" : phase);
  return out;
}

Result<std::string> WorkloadImage(kube::Client& client, const Options& o) {
  if (!o.validator_image.empty()) return o.validator_image;
  if (o.pod_name.empty() || o.namespace_.empty()) {
    return InvalidArgument(
        "the workload pod needs an image: set VALIDATOR_IMAGE (the operator does), or POD_NAME "
        "and OPERATOR_NAMESPACE so the validator can read its own");
  }
  auto pod = client.Get(kube::resources::kPods, o.namespace_, o.pod_name);
  if (!pod.ok()) {
    return pod.status().Annotate("reading this pod " + o.namespace_ + "/" + o.pod_name +
                                 " for its image (or set VALIDATOR_IMAGE)");
  }
  for (const char* list : {"initContainers", "containers"}) {
    const Json& cs = Field(Field(*pod, "spec"), list);
    if (!cs.is_array()) continue;
    for (const Json& c : cs) {
      std::string image = c.value("image", "");
      if (!image.empty()) return image;
    }
  }
  return NotFound("pod " + o.namespace_ + "/" + o.pod_name +
                  " names no image; set VALIDATOR_IMAGE");
}

Status RunWorkloadPod(kube::Client& client, const Options& o, WorkloadPodSpec spec, int retries,
                      std::stop_token stop) {
  const std::string check = spec.check + " validation failed";
  // A leftover from an earlier run on this node goes first (grace 0, as NVIDIA).
  kube::ListOptions lo;
  lo.label_selector = "app=" + spec.app;
  auto old = client.List(kube::resources::kPods, spec.namespace_, lo);
  if (!old.ok()) {
    return old.status().Annotate(check + ": listing leftover " + spec.app + " pods in " +
                                 spec.namespace_ + " (the validator's Role needs list on pods)");
  }
  for (const Json& p : old->items) {
    if (kube::PodNodeName(p) != spec.node_name) continue;
    kube::DeleteOptions d;
    d.grace_period_seconds = 0;
    Status s = client.Delete(kube::resources::kPods, spec.namespace_, kube::Name(p), d);
    if (!s.ok() && !kube::IsNotFound(s)) {
      return s.Annotate(check + ": deleting the leftover pod " + kube::Name(p));
    }
  }
  auto created = client.Create(kube::resources::kPods, spec.namespace_, BuildWorkloadPod(spec));
  if (!created.ok()) {
    return created.status().Annotate(check + ": creating the " + spec.app + " pod on node " +
                                     spec.node_name);
  }
  const std::string name = kube::Name(*created);
  LogInfo("workload pod created", {{"pod", name}, {"node", spec.node_name}, {"check", spec.check}});

  const auto budget = std::chrono::seconds(int64_t{retries} * o.sleep_interval_seconds);
  const auto deadline = std::chrono::steady_clock::now() + budget;
  PodOutcome last = EvaluateWorkloadPod(*created);
  std::string rv = kube::ResourceVersion(*created);
  std::string api_error;
  while (!last.done && !stop.stop_requested() && std::chrono::steady_clock::now() < deadline) {
    kube::WatchOptions wo;
    wo.field_selector = "metadata.name=" + name;
    wo.resource_version = rv;
    auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline -
                                                                 std::chrono::steady_clock::now());
    wo.timeout = std::clamp(left, std::chrono::seconds(1), std::chrono::seconds(60));
    bool deleted = false;
    bool gone = false;
    Status s = client.Watch(
        kube::resources::kPods, spec.namespace_, wo,
        [&](kube::WatchEvent&& ev) {
          if (ev.type == kube::WatchEvent::Type::kError) {
            gone = true;
            return false;
          }
          if (ev.type == kube::WatchEvent::Type::kBookmark) {
            rv = kube::ResourceVersion(ev.object);
            return true;
          }
          rv = kube::ResourceVersion(ev.object);
          if (ev.type == kube::WatchEvent::Type::kDeleted) {
            deleted = true;
            return false;
          }
          last = EvaluateWorkloadPod(ev.object);
          return !last.done && std::chrono::steady_clock::now() < deadline;
        },
        stop);
    if (deleted) {
      return Aborted(check + ": the workload pod " + spec.namespace_ + "/" + name +
                     " was deleted before it finished; the check runs again when the "
                     "validator restarts");
    }
    if (!s.ok() || gone) {
      // Re-read and re-watch from the current version.
      if (!s.ok()) api_error = s.message();
      auto cur = client.Get(kube::resources::kPods, spec.namespace_, name);
      if (cur.ok()) {
        last = EvaluateWorkloadPod(*cur);
        rv = kube::ResourceVersion(*cur);
      } else if (!RealClock().SleepFor(std::chrono::seconds(1), stop)) {
        break;
      }
    }
  }
  if (last.done && last.succeeded) {
    LogInfo("workload pod succeeded", {{"pod", name}, {"check", spec.check}});
    return Status::Ok();
  }
  if (last.done) {
    return FailedPrecondition(check + ": pod " + spec.namespace_ + "/" + name + " on node " +
                              spec.node_name + " failed: " + last.message +
                              "; see kubectl logs -n " + spec.namespace_ + " " + name);
  }
  if (stop.stop_requested()) return Aborted(check + ": stopped");
  std::string msg = check + ": pod " + spec.namespace_ + "/" + name + " on node " + spec.node_name +
                    " did not finish within " + std::to_string(budget.count()) + "s (" +
                    last.message + "); check that the device plugin advertises " + spec.resource +
                    " and kubectl describe pod -n " + spec.namespace_ + " " + name;
  if (!api_error.empty()) msg += "; last API error: " + api_error;
  return DeadlineExceeded(msg);
}

namespace {

Result<WorkloadPodSpec> BaseSpec(kube::Client& client, const Options& o) {
  if (o.node_name.empty() || o.namespace_.empty()) {
    return InvalidArgument(
        "the workload pod needs NODE_NAME and OPERATOR_NAMESPACE (the operator sets both)");
  }
  WorkloadPodSpec s;
  s.node_name = o.node_name;
  s.namespace_ = o.namespace_;
  GPUOP_ASSIGN_OR_RETURN(s.image, WorkloadImage(client, o));
  s.image_pull_policy = o.validator_image_pull_policy;
  s.image_pull_secrets = o.validator_image_pull_secrets;
  s.runtime_class = o.validator_runtime_class;
  s.require_cuda = o.require_cuda;
  auto ds = client.Get(kube::resources::kDaemonSets, o.namespace_, kValidatorDaemonSet);
  if (ds.ok()) {
    s.owner_references = Field(Field(*ds, "metadata"), "ownerReferences");
    if (!s.owner_references.is_array()) s.owner_references = Json::array();
    s.tolerations = Field(Field(Field(Field(*ds, "spec"), "template"), "spec"), "tolerations");
    if (!s.tolerations.is_array()) s.tolerations = Json::array();
  } else if (!kube::IsNotFound(ds.status())) {
    return ds.status().Annotate("reading DaemonSet " + o.namespace_ + "/" + kValidatorDaemonSet +
                                " for the workload pod's owner and tolerations");
  }
  return s;
}

}  // namespace

Status RunCudaWorkload(kube::Client& client, const Options& o, std::stop_token stop) {
  auto s = BaseSpec(client, o);
  if (!s.ok()) return s.status().Annotate("cuda validation failed");
  s->name_prefix = kCudaPodPrefix;
  s->app = kCudaPodApp;
  s->check = "cuda";
  if (!o.device_plugin) s->resource.clear();
  return RunWorkloadPod(client, o, std::move(s).value(), o.cuda_retries, stop);
}

Status RunPluginWorkload(kube::Client& client, const Options& o, const std::string& resource,
                         std::stop_token stop) {
  auto s = BaseSpec(client, o);
  if (!s.ok()) return s.status().Annotate("plugin validation failed");
  s->name_prefix = kPluginPodPrefix;
  s->app = kPluginPodApp;
  s->check = "plugin";
  s->resource = resource;
  return RunWorkloadPod(client, o, std::move(s).value(), o.plugin_retries, stop);
}

}  // namespace gpuop::validator
