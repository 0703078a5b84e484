#include "operator/status.h"

#include <algorithm>

#include "base/json_field.h"
#include "base/strings.h"
#include "kube/object.h"

namespace gpuop::op {
namespace {

using Json = nlohmann::json;

int64_t IntAt(const Json& obj, const char* a, const char* b) {
  if (!obj.is_object() || !obj.contains(a) || !obj[a].is_object()) return 0;
  const Json& v = obj[a].value(b, Json());
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

// Sets a condition on a bare {"conditions": [...]} holder, via the object helper.
void SetStatusCondition(Json& status, std::string type, std::string value, std::string reason,
                        std::string message, int64_t generation, std::string_view now) {
  kube::Condition c;
  c.type = std::move(type);
  c.status = std::move(value);
  c.reason = std::move(reason);
  c.message = std::move(message);
  c.observed_generation = generation;
  Json holder = {{"status", status}};
  kube::SetCondition(holder, c, now);
  status = holder["status"];
}

Json StripTimes(Json status) {
  if (status.is_object() && status.contains("conditions") && status["conditions"].is_array()) {
    for (Json& c : status["conditions"]) {
      if (c.is_object()) c.erase("lastTransitionTime");
    }
  }
  return status;
}

// The last non-empty line of a termination message (the validator prints
// its error last; FallbackToLogsOnError may bring log lines before it),
// without the command's prefix, at most 300 characters.
std::string LastLine(const std::string& text) {
  std::vector<std::string> lines = Split(text, '\n');
  std::string line;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string t(Trim(*it));
    if (!t.empty()) {
      line = t;
      break;
    }
  }
  const std::string prefix = "gpuop validator: ";
  if (StartsWith(line, prefix)) line = line.substr(prefix.size());
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

// "exit code N: message" of a failed termination, "" otherwise.
std::string Failure(const Json& terminated) {
  if (!terminated.is_object() || terminated.value("exitCode", 0) == 0) return "";
  std::string why = LastLine(terminated.value("message", ""));
  if (why.empty()) why = terminated.value("reason", "");
  if (why.empty()) why = "exit code " + std::to_string(terminated.value("exitCode", 0));
  return why;
}

}  // namespace

bool BlocksValidation(const Json& pod) {
  return !kube::IsPodReady(pod) && !kube::IsBeingDeleted(pod);
}

std::vector<std::string> ValidationBlockers(const std::vector<kube::ObjectPtr>& pods) {
  std::vector<std::string> out;
  for (const kube::ObjectPtr& p : pods) {
    const Json& pod = *p;
    if (!BlocksValidation(pod)) continue;
    std::string node = kube::PodNodeName(pod);
    if (node.empty()) node = "(unscheduled pod " + kube::Name(pod) + ")";
    const Json& inits = Field(Field(pod, "status"), "initContainerStatuses");
    std::string line;
    if (inits.is_array()) {
      for (const Json& cs : inits) {
        const Json& state = Field(cs, "state");
        const Json& done = Field(state, "terminated");
        if (done.is_object() && done.value("exitCode", 1) == 0) continue;
        std::string check = cs.value("name", "?");
        if (check.size() > 11 && check.compare(check.size() - 11, 11, "-validation") == 0) {
          check.resize(check.size() - 11);
        }
        std::string failure = Failure(done);
        if (failure.empty()) failure = Failure(Field(Field(cs, "lastState"), "terminated"));
        // The validator's own message names the check already.
        if (const std::string own = check + " validation failed: "; StartsWith(failure, own)) {
          failure = failure.substr(own.size());
        }
        line = failure.empty() ? "waiting on " + check + " validation"
                               : check + " validation failed: " + failure;
        break;
      }
    }
    const Json& mains = Field(Field(pod, "status"), "containerStatuses");
    const bool main_running = mains.is_array() && !mains.empty() &&
                              Field(Field(mains[0], "state"), "running").is_object();
    if (line.empty() && main_running && Field(mains[0], "started").is_boolean() &&
        mains[0]["started"].get<bool>()) {
      // Validated once; its readiness probe (the driver check) fails now.
      line = "driver validation failing (the validator's readiness probe: kubectl describe pod " +
             kube::Name(pod) + " -n " + kube::Namespace(pod) + ")";
    }
    if (line.empty()) {
      line = inits.is_array() && !inits.empty()
                 ? "validations passed, the validator is not ready yet"
                 : "validator pod " + kube::Name(pod) + " " +
                       (kube::PodPhase(pod).empty() ? std::string("Pending") : kube::PodPhase(pod));
    }
    out.push_back("node " + node + ": " + line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

ComponentState EvaluateComponent(Component c, bool enabled, const std::vector<Json>& daemonsets) {
  ComponentState s;
  s.component = c;
  if (!enabled) {
    s.state = "disabled";
    return s;
  }
  if (daemonsets.empty()) {
    s.state = "notReady";
    s.message = "DaemonSet " + ComponentDaemonSetName(c) + " not created yet";
    return s;
  }
  // By name: the informer's order is arbitrary, and the status must not
  // change (and be written again) just because a restart listed them anew.
  std::vector<const Json*> sorted;
  for (const Json& ds : daemonsets) sorted.push_back(&ds);
  std::sort(sorted.begin(), sorted.end(),
            [](const Json* a, const Json* b) { return kube::Name(*a) < kube::Name(*b); });
  std::vector<std::string> names;
  std::vector<std::string> problems;
  for (const Json* dsp : sorted) {
    const Json& ds = *dsp;
    names.push_back(kube::Name(ds));
    int64_t desired = IntAt(ds, "status", "desiredNumberScheduled");
    int64_t available = IntAt(ds, "status", "numberAvailable");
    int64_t updated = IntAt(ds, "status", "updatedNumberScheduled");
    int64_t unavailable = IntAt(ds, "status", "numberUnavailable");
    int64_t observed = IntAt(ds, "status", "observedGeneration");
    int64_t generation = kube::Generation(ds);
    s.desired += desired;
    s.available += available;
    s.updated += updated;
    if (observed < generation) {
      problems.push_back(kube::Name(ds) + ": the DaemonSet controller has not seen generation " +
                         std::to_string(generation) + " yet");
    } else if (desired == 0) {
      continue;  // no node selected: nothing to wait for
    } else if (unavailable != 0 || available != desired) {
      problems.push_back(kube::Name(ds) + ": " + std::to_string(available) + " of " +
                         std::to_string(desired) + " pods available");
    } else if (updated != desired) {
      problems.push_back(kube::Name(ds) + ": " + std::to_string(updated) + " of " +
                         std::to_string(desired) + " pods run the current template");
    }
  }
  s.daemonset = Join(names, ",");
  s.state = problems.empty() ? "ready" : "notReady";
  s.message = Join(problems, "; ");
  return s;
}

Json BuildStatus(const StatusInput& in, const Json& old_status, std::string_view now) {
  Json status = Json::object();
  if (old_status.is_object() && old_status.contains("conditions")) {
    status["conditions"] = old_status["conditions"];
  }
  std::string reason;
  std::string message;
  bool ready = false;
  std::vector<std::string> not_ready;
  const std::string blockers = Join(in.validation_blockers, "; ");
  for (const ComponentState& c : in.components) {
    if (c.state != "notReady") continue;
    std::string name = ComponentName(c.component);
    if (c.component == Component::kOperatorValidator && !blockers.empty()) {
      name += " (" + blockers + ")";
    }
    not_ready.push_back(name);
  }
  if (!in.reconcile_error.ok()) {
    reason = "ReconcileFailed";
    message = in.reconcile_error.message();
  } else if (in.gpu_nodes == 0) {
    ready = true;
    reason = in.nfd_labels_seen ? "NoGPUNodes" : "NFDLabelsMissing";
    message = in.nfd_labels_seen
                  ? "no node has an NVIDIA GPU (feature.node.kubernetes.io/pci-10de.present=true)"
              : in.node_discovery
                  ? "no node carries PCI feature labels yet: gpuop-node-discovery sets "
                    "them as its pods start (check its DaemonSet)"
                  : "no node carries PCI feature labels: NFD runs (nodes carry its "
                    "annotations) but has not labelled PCI devices; check its "
                    "worker config, or run the operator with --node-discovery=true";
  } else if (!not_ready.empty()) {
    reason = "OperandNotReady";
    message = "not ready: " + Join(not_ready, ", ");
  } else {
    ready = true;
    reason = "Reconciled";
    message = "every component is ready on " + std::to_string(in.gpu_nodes) + " GPU node(s)";
  }
  status["state"] = ready ? "ready" : "notReady";
  status["namespace"] = in.namespace_;
  status["observedGeneration"] = in.generation;
  status["gpuNodes"] = in.gpu_nodes;
  Json components = Json::array();
  for (const ComponentState& c : in.components) {
    Json e = {{"name", ComponentName(c.component)}, {"state", c.state}};
    if (!c.daemonset.empty()) e["daemonSet"] = c.daemonset;
    if (c.state != "disabled") {
      e["desired"] = c.desired;
      e["available"] = c.available;
      e["updated"] = c.updated;
    }
    std::string message = c.message;
    if (c.component == Component::kOperatorValidator && c.state == "notReady" &&
        !blockers.empty()) {
      message = message.empty() ? blockers : message + "; " + blockers;
    }
    if (!message.empty()) e["message"] = message;
    components.push_back(std::move(e));
  }
  status["components"] = std::move(components);
  status["ignoredFields"] = in.ignored_fields;
  bool error = !in.reconcile_error.ok();
  SetStatusCondition(status, "Ready", ready ? "True" : "False", reason, message, in.generation,
                     now);
  SetStatusCondition(status, "Error", error ? "True" : "False", error ? "ReconcileFailed" : reason,
                     error ? message : "the last reconcile succeeded", in.generation, now);
  return status;
}

Json IgnoredStatus(const std::string& active_name, int64_t generation, const Json& old_status,
                   std::string_view now) {
  Json status = Json::object();
  if (old_status.is_object() && old_status.contains("conditions")) {
    status["conditions"] = old_status["conditions"];
  }
  status["state"] = "ignored";
  status["observedGeneration"] = generation;
  std::string message = "ClusterPolicy " + active_name +
                        " is the active one (the oldest); delete this one or that one";
  SetStatusCondition(status, "Ready", "False", "Ignored", message, generation, now);
  SetStatusCondition(status, "Error", "True", "Ignored", message, generation, now);
  return status;
}

bool StatusChanged(const Json& a, const Json& b) { return StripTimes(a) != StripTimes(b); }

}  // namespace gpuop::op
