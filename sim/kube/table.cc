#include "sim/kube/table.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <functional>
#include <optional>
#include <string>

#include "base/strings.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::system_clock;
using Cell = std::function<Json(const Json& obj, Clock::time_point now)>;

struct Column {
  std::string name;
  std::string type = "string";
  std::string format;
  std::string description;
  int priority = 0;
  Cell cell;
};

const Json& FieldAt(const Json& obj, std::initializer_list<const char*> path) {
  static const Json kNull;
  const Json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return kNull;
    auto it = cur->find(key);
    if (it == cur->end()) return kNull;
    cur = &*it;
  }
  return *cur;
}

std::string Str(const Json& v, std::string fallback = "") {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return fallback;
  return v.dump();
}

int64_t Int(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) return static_cast<int64_t>(v.get<uint64_t>());
  return 0;
}

std::optional<Clock::time_point> ParseTime(const Json& v) {
  if (!v.is_string()) return std::nullopt;
  std::string s = v.get<std::string>();
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  return Clock::from_time_t(timegm(&tm));
}

std::string Age(const Json& timestamp, Clock::time_point now) {
  auto t = ParseTime(timestamp);
  if (!t) return "<unknown>";
  return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *t));
}

Column NameColumn() {
  return {"Name",
          "string",
          "name",
          "Name must be unique within a namespace. Is required when creating resources, although "
          "some resources may allow a client to request the generation of an appropriate name "
          "automatically. Name is primarily intended for creation idempotence and configuration "
          "definition. Cannot be updated.",
          0,
          [](const Json& o, Clock::time_point) {
            return FieldAt(o, {"metadata", "name"});
          }};
}

Column AgeColumn() {
  return {"Age",
          "string",
          "",
          "CreationTimestamp is a timestamp representing the server time when this object was "
          "created.",
          0,
          [](const Json& o, Clock::time_point now) {
            return Json(Age(FieldAt(o, {"metadata", "creationTimestamp"}), now));
          }};
}

Column CreatedAtColumn() {
  return {"Created At",
          "date",
          "",
          "CreationTimestamp is a timestamp representing the server time when this object was "
          "created.",
          0,
          [](const Json& o, Clock::time_point) {
            return FieldAt(o, {"metadata", "creationTimestamp"});
          }};
}

Column Simple(std::string name, std::string description, Cell cell, int priority = 0,
              std::string type = "string") {
  return {std::move(name), std::move(type), "", std::move(description), priority, std::move(cell)};
}

Column IntColumn(std::string name, std::string description,
                 std::initializer_list<const char*> path) {
  std::vector<const char*> p(path);
  return {std::move(name),
          "integer",
          "",
          std::move(description),
          0,
          [p](const Json& o, Clock::time_point) {
            const Json* cur = &o;
            for (const char* k : p) {
              if (!cur->is_object() || !cur->contains(k)) return Json(0);
              cur = &(*cur)[k];
            }
            return Json(Int(*cur));
          }};
}

std::string NodeStatus(const Json& node) {
  std::string ready = "Unknown";
  const Json& conds = FieldAt(node, {"status", "conditions"});
  if (conds.is_array()) {
    for (const auto& c : conds) {
      if (Str(FieldAt(c, {"type"})) == "Ready") {
        ready = Str(FieldAt(c, {"status"})) == "True" ? "Ready" : "NotReady";
      }
    }
  }
  if (FieldAt(node, {"spec", "unschedulable"}) == Json(true)) ready += ",SchedulingDisabled";
  return ready;
}

std::string NodeRoles(const Json& node) {
  std::vector<std::string> roles;
  const Json& labels = FieldAt(node, {"metadata", "labels"});
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      if (StartsWith(k, "node-role.kubernetes.io/")) {
        std::string role = k.substr(std::string("node-role.kubernetes.io/").size());
        if (!role.empty()) roles.push_back(role);
      } else if (k == "kubernetes.io/role" && v.is_string()) {
        roles.push_back(v.get<std::string>());
      }
    }
  }
  return roles.empty() ? "<none>" : Join(roles, ",");
}

std::string NodeAddress(const Json& node, std::string_view type) {
  const Json& addrs = FieldAt(node, {"status", "addresses"});
  if (addrs.is_array()) {
    for (const auto& a : addrs) {
      if (Str(FieldAt(a, {"type"})) == type) return Str(FieldAt(a, {"address"}));
    }
  }
  return "<none>";
}

std::string PodReady(const Json& pod) {
  const Json& containers = FieldAt(pod, {"spec", "containers"});
  size_t total = containers.is_array() ? containers.size() : 0, ready = 0;
  const Json& statuses = FieldAt(pod, {"status", "containerStatuses"});
  if (statuses.is_array()) {
    for (const auto& s : statuses) {
      if (FieldAt(s, {"ready"}) == Json(true)) ++ready;
    }
  }
  return std::to_string(ready) + "/" + std::to_string(total);
}

std::string PodStatus(const Json& pod) {
  std::string reason = Str(FieldAt(pod, {"status", "reason"}));
  if (reason.empty()) reason = Str(FieldAt(pod, {"status", "phase"}), "Pending");
  const Json& statuses = FieldAt(pod, {"status", "containerStatuses"});
  if (statuses.is_array()) {
    for (const auto& s : statuses) {
      std::string waiting = Str(FieldAt(s, {"state", "waiting", "reason"}));
      std::string terminated = Str(FieldAt(s, {"state", "terminated", "reason"}));
      if (!waiting.empty())
        reason = waiting;
      else if (!terminated.empty() && reason != "Running")
        reason = terminated;
    }
  }
  if (!FieldAt(pod, {"metadata", "deletionTimestamp"}).is_null()) reason = "Terminating";
  return reason;
}

int64_t PodRestarts(const Json& pod) {
  int64_t n = 0;
  const Json& statuses = FieldAt(pod, {"status", "containerStatuses"});
  if (statuses.is_array()) {
    for (const auto& s : statuses) n += Int(FieldAt(s, {"restartCount"}));
  }
  return n;
}

std::string ServicePorts(const Json& svc) {
  std::vector<std::string> out;
  const Json& ports = FieldAt(svc, {"spec", "ports"});
  if (ports.is_array()) {
    for (const auto& p : ports) {
      std::string s = std::to_string(Int(FieldAt(p, {"port"})));
      if (!FieldAt(p, {"nodePort"}).is_null())
        s += ":" + std::to_string(Int(FieldAt(p, {"nodePort"})));
      s += "/" + Str(FieldAt(p, {"protocol"}), "TCP");
      out.push_back(s);
    }
  }
  return out.empty() ? "<none>" : Join(out, ",");
}

std::string MapSelector(const Json& m) {
  if (!m.is_object() || m.empty()) return "<none>";
  std::vector<std::string> parts;
  for (const auto& [k, v] : m.items()) parts.push_back(k + "=" + Str(v));
  return Join(parts, ",");
}

size_t DataCount(const Json& obj) {
  size_t n = 0;
  for (const char* field : {"data", "binaryData"}) {
    const Json& d = FieldAt(obj, {field});
    if (d.is_object()) n += d.size();
  }
  return n;
}

std::vector<Column> BuiltinColumns(const ResourceInfo& info) {
  const std::string& g = info.group;
  const std::string& p = info.plural;
  std::vector<Column> cols{NameColumn()};
  auto age = AgeColumn();
  if (g.empty() && p == "namespaces") {
    cols.push_back(Simple("Status", "The status of the namespace", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"status", "phase"}), "Active"));
    }));
    cols.push_back(age);
  } else if (g.empty() && p == "nodes") {
    cols.push_back(Simple("Status", "The status of the node",
                          [](const Json& o, auto) { return Json(NodeStatus(o)); }));
    cols.push_back(Simple("Roles", "The roles of the node",
                          [](const Json& o, auto) { return Json(NodeRoles(o)); }));
    cols.push_back(age);
    cols.push_back(
        Simple("Version", "Kubelet Version reported by the node.", [](const Json& o, auto) {
          return Json(Str(FieldAt(o, {"status", "nodeInfo", "kubeletVersion"})));
        }));
    cols.push_back(Simple(
        "Internal-IP", "List of addresses reachable to the node.",
        [](const Json& o, auto) { return Json(NodeAddress(o, "InternalIP")); }, 1));
    cols.push_back(Simple(
        "OS-Image", "OS Image reported by the node.",
        [](const Json& o, auto) {
          return Json(Str(FieldAt(o, {"status", "nodeInfo", "osImage"}), "<unknown>"));
        },
        1));
    cols.push_back(Simple(
        "Container-Runtime", "Container runtime reported by the node.",
        [](const Json& o, auto) {
          return Json(
              Str(FieldAt(o, {"status", "nodeInfo", "containerRuntimeVersion"}), "<unknown>"));
        },
        1));
  } else if (g.empty() && p == "pods") {
    cols.push_back(Simple("Ready",
                          "The aggregate readiness state of this pod for accepting traffic.",
                          [](const Json& o, auto) { return Json(PodReady(o)); }));
    cols.push_back(Simple("Status", "The aggregate status of the containers in this pod.",
                          [](const Json& o, auto) { return Json(PodStatus(o)); }));
    cols.push_back(
        Simple("Restarts", "The number of times the containers in this pod have been restarted.",
               [](const Json& o, auto) { return Json(std::to_string(PodRestarts(o))); }));
    cols.push_back(age);
    cols.push_back(Simple(
        "IP", "IP address allocated to the pod.",
        [](const Json& o, auto) {
          return Json(Str(FieldAt(o, {"status", "podIP"}), "<none>"));
        },
        1));
    cols.push_back(Simple(
        "Node", "Name of the Node this pod runs on.",
        [](const Json& o, auto) {
          return Json(Str(FieldAt(o, {"spec", "nodeName"}), "<none>"));
        },
        1));
  } else if (g.empty() && p == "services") {
    cols.push_back(Simple("Type", "The type of the service.", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"spec", "type"}), "ClusterIP"));
    }));
    cols.push_back(Simple("Cluster-IP", "The IP address of the service.", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"spec", "clusterIP"}), "<none>"));
    }));
    cols.push_back(Simple("External-IP", "The external IP address of the service.",
                          [](const Json&, auto) { return Json("<none>"); }));
    cols.push_back(Simple("Port(s)", "The ports of the service.",
                          [](const Json& o, auto) { return Json(ServicePorts(o)); }));
    cols.push_back(age);
    cols.push_back(Simple(
        "Selector", "The label selector of the service.",
        [](const Json& o, auto) {
          return Json(MapSelector(FieldAt(o, {"spec", "selector"})));
        },
        1));
  } else if (g.empty() && p == "configmaps") {
    cols.push_back(Simple(
        "Data", "Number of data entries.", [](const Json& o, auto) { return Json(DataCount(o)); },
        0, "integer"));
    cols.push_back(age);
  } else if (g.empty() && p == "secrets") {
    cols.push_back(Simple("Type", "The type of the secret.", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"type"}), "Opaque"));
    }));
    cols.push_back(Simple(
        "Data", "Number of data entries.", [](const Json& o, auto) { return Json(DataCount(o)); },
        0, "integer"));
    cols.push_back(age);
  } else if (g.empty() && p == "serviceaccounts") {
    cols.push_back(Simple(
        "Secrets", "Number of secrets.",
        [](const Json& o, auto) {
          const Json& s = FieldAt(o, {"secrets"});
          return Json(s.is_array() ? s.size() : 0);
        },
        0, "integer"));
    cols.push_back(age);
  } else if (g == "apps" && p == "daemonsets") {
    cols.push_back(
        IntColumn("Desired", "The desired number of pods.", {"status", "desiredNumberScheduled"}));
    cols.push_back(
        IntColumn("Current", "The current number of pods.", {"status", "currentNumberScheduled"}));
    cols.push_back(IntColumn("Ready", "The number of ready pods.", {"status", "numberReady"}));
    cols.push_back(IntColumn("Up-to-date", "The number of pods updated.",
                             {"status", "updatedNumberScheduled"}));
    cols.push_back(
        IntColumn("Available", "The number of available pods.", {"status", "numberAvailable"}));
    cols.push_back(Simple("Node Selector", "Which nodes the pods run on.", [](const Json& o, auto) {
      return Json(MapSelector(FieldAt(o, {"spec", "template", "spec", "nodeSelector"})));
    }));
    cols.push_back(age);
  } else if (g == "apps" && p == "deployments") {
    cols.push_back(Simple("Ready", "Number of the pod with ready state", [](const Json& o, auto) {
      int64_t want =
          FieldAt(o, {"spec", "replicas"}).is_null() ? 1 : Int(FieldAt(o, {"spec", "replicas"}));
      return Json(std::to_string(Int(FieldAt(o, {"status", "readyReplicas"}))) + "/" +
                  std::to_string(want));
    }));
    cols.push_back(IntColumn("Up-to-date",
                             "Total number of non-terminated pods targeted by this "
                             "deployment that have the desired template spec.",
                             {"status", "updatedReplicas"}));
    cols.push_back(IntColumn("Available",
                             "Total number of available pods (ready for at least "
                             "minReadySeconds) targeted by this deployment.",
                             {"status", "availableReplicas"}));
    cols.push_back(age);
  } else if (p == "events" && (g.empty() || g == "events.k8s.io")) {
    bool core = g.empty();
    cols = {
        Simple("Last Seen", "Time since the event was last seen.",
               [](const Json& o, Clock::time_point now) {
                 for (const char* f : {"lastTimestamp", "eventTime", "deprecatedLastTimestamp"}) {
                   if (ParseTime(FieldAt(o, {f}))) return Json(Age(FieldAt(o, {f}), now));
                 }
                 return Json(Age(FieldAt(o, {"metadata", "creationTimestamp"}), now));
               }),
        Simple("Type", "The type of the event.",
               [](const Json& o, auto) { return Json(Str(FieldAt(o, {"type"}))); }),
        Simple("Reason", "The reason of the event.",
               [](const Json& o, auto) { return Json(Str(FieldAt(o, {"reason"}))); }),
        Simple(
            "Object", "The object the event is about.",
            [core](const Json& o, auto) {
              const Json& ref = core ? FieldAt(o, {"involvedObject"}) : FieldAt(o, {"regarding"});
              return Json(ToLower(Str(FieldAt(ref, {"kind"}))) + "/" + Str(FieldAt(ref, {"name"})));
            }),
        Simple("Message", "The message of the event.", [core](const Json& o, auto) {
          return Json(Str(FieldAt(o, {core ? "message" : "note"})));
        })};
  } else if (g == "apps" && p == "controllerrevisions") {
    cols.push_back(IntColumn("Revision", "The revision number.", {"revision"}));
    cols.push_back(age);
  } else if (g == "rbac.authorization.k8s.io" && (p == "roles" || p == "clusterroles")) {
    cols.push_back(CreatedAtColumn());
  } else if (g == "rbac.authorization.k8s.io") {
    cols.push_back(Simple("Role", "The role the binding refers to.", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"roleRef", "kind"})) + "/" +
                  Str(FieldAt(o, {"roleRef", "name"})));
    }));
    cols.push_back(age);
  } else if (g == "coordination.k8s.io" && p == "leases") {
    cols.push_back(Simple("Holder", "The holder of the lease.", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"spec", "holderIdentity"})));
    }));
    cols.push_back(age);
  } else if (g == "node.k8s.io" && p == "runtimeclasses") {
    cols.push_back(Simple("Handler", "The runtime handler.",
                          [](const Json& o, auto) { return Json(Str(FieldAt(o, {"handler"}))); }));
    cols.push_back(age);
  } else if (g == "apiextensions.k8s.io") {
    cols.push_back(CreatedAtColumn());
  } else if (g == "resource.k8s.io" && p == "resourceslices") {
    cols.push_back(Simple("Node", "The node the slice is for.", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"spec", "nodeName"}), "<none>"));
    }));
    cols.push_back(
        Simple("Driver", "The driver that publishes the slice.", [](const Json& o, auto) {
          return Json(Str(FieldAt(o, {"spec", "driver"})));
        }));
    cols.push_back(Simple("Pool", "The pool of the slice.", [](const Json& o, auto) {
      return Json(Str(FieldAt(o, {"spec", "pool", "name"})));
    }));
    cols.push_back(age);
  } else if (g == "resource.k8s.io" && p == "resourceclaims") {
    cols.push_back(
        Simple("State", "Whether the claim is allocated and reserved.", [](const Json& o, auto) {
          std::vector<std::string> s;
          s.push_back(FieldAt(o, {"status", "allocation"}).is_null() ? "pending" : "allocated");
          const Json& r = FieldAt(o, {"status", "reservedFor"});
          if (r.is_array() && !r.empty()) s.push_back("reserved");
          return Json(Join(s, ","));
        }));
    cols.push_back(age);
  } else {
    cols.push_back(age);
  }
  return cols;
}

Json RenderCustomCell(const Json& column, const Json& obj, Clock::time_point now) {
  std::vector<Json> values = EvalJsonPath(obj, Str(FieldAt(column, {"jsonPath"})));
  if (values.empty()) return nullptr;
  std::string type = Str(FieldAt(column, {"type"}));
  if (type == "date") return Json(Age(values[0], now));
  if (values.size() == 1) {
    const Json& v = values[0];
    if (v.is_object() || v.is_array()) return Json(v.dump());
    return v;
  }
  std::vector<std::string> parts;
  for (const auto& v : values) parts.push_back(Str(v));
  return Json(Join(parts, ","));
}

std::vector<Column> CustomColumns(const ServedResource& r) {
  std::vector<Column> cols{NameColumn()};
  if (!r.printer_columns.is_array() || r.printer_columns.empty()) {
    cols.push_back(AgeColumn());
    return cols;
  }
  for (const auto& c : r.printer_columns) {
    Column col;
    col.name = Str(FieldAt(c, {"name"}));
    col.type = Str(FieldAt(c, {"type"}), "string");
    col.format = Str(FieldAt(c, {"format"}));
    col.description = Str(FieldAt(c, {"description"}));
    col.priority = static_cast<int>(Int(FieldAt(c, {"priority"})));
    Json def = c;
    col.cell = [def](const Json& o, Clock::time_point now) {
      return RenderCustomCell(def, o, now);
    };
    if (col.type == "date") col.type = "date";
    cols.push_back(std::move(col));
  }
  return cols;
}

std::vector<Column> ColumnsFor(const ServedResource& r) {
  return r.info.custom ? CustomColumns(r) : BuiltinColumns(r.info);
}

Json Definitions(const std::vector<Column>& cols) {
  Json defs = Json::array();
  for (const auto& c : cols) {
    defs.push_back({{"name", c.name},
                    {"type", c.type},
                    {"format", c.format},
                    {"description", c.description},
                    {"priority", c.priority}});
  }
  return defs;
}

// One JSONPath step applied to every current match.
void Step(const std::vector<Json>& in, std::string_view step, std::vector<Json>& out) {
  for (const auto& v : in) {
    if (step == "*") {
      if (v.is_array())
        out.insert(out.end(), v.begin(), v.end());
      else if (v.is_object())
        for (const auto& [k, x] : v.items()) out.push_back(x);
      continue;
    }
    if (!step.empty() && step[0] == '?') {
      // ?(@.key=="value") or ?(@.key)
      std::string_view expr = step.substr(1);
      if (expr.size() < 2 || expr.front() != '(' || expr.back() != ')') continue;
      expr = expr.substr(1, expr.size() - 2);
      if (!StartsWith(expr, "@.")) continue;
      expr.remove_prefix(2);
      size_t eq = expr.find("==");
      std::string key(Trim(expr.substr(0, eq)));
      std::optional<std::string> want;
      if (eq != std::string_view::npos) {
        std::string_view val = Trim(expr.substr(eq + 2));
        if (val.size() >= 2 && (val.front() == '"' || val.front() == '\'')) {
          val = val.substr(1, val.size() - 2);
        }
        want = std::string(val);
      }
      if (!v.is_array()) continue;
      for (const auto& item : v) {
        if (!item.is_object() || !item.contains(key)) continue;
        if (!want || Str(item[key]) == *want) out.push_back(item);
      }
      continue;
    }
    bool numeric = !step.empty() && std::all_of(step.begin(), step.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (numeric && v.is_array()) {
      size_t i = std::stoul(std::string(step));
      if (i < v.size()) out.push_back(v[i]);
    } else if (v.is_object()) {
      auto it = v.find(std::string(step));
      if (it != v.end()) out.push_back(*it);
    }
  }
}

}  // namespace

bool WantsTable(std::string_view accept) {
  for (const auto& part : Split(accept, ',')) {
    std::string p;
    for (char c : part) {
      if (c != ' ') p += c;
    }
    if (p.find("as=Table") != std::string::npos && p.find("g=meta.k8s.io") != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string HumanDuration(std::chrono::seconds d) {
  int64_t seconds = d.count();
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return std::to_string(seconds) + "s";
  int64_t minutes = seconds / 60;
  if (minutes < 10) {
    int64_t s = seconds % 60;
    return std::to_string(minutes) + "m" + (s == 0 ? "" : std::to_string(s) + "s");
  }
  if (minutes < 60 * 3) return std::to_string(minutes) + "m";
  int64_t hours = seconds / 3600;
  if (hours < 8) {
    int64_t m = minutes % 60;
    return std::to_string(hours) + "h" + (m == 0 ? "" : std::to_string(m) + "m");
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    int64_t h = hours % 24;
    return std::to_string(hours / 24) + "d" + (h == 0 ? "" : std::to_string(h) + "h");
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    int64_t dy = (hours / 24) % 365;
    return std::to_string(hours / 24 / 365) + "y" + (dy == 0 ? "" : std::to_string(dy) + "d");
  }
  return std::to_string(hours / 24 / 365) + "y";
}

std::vector<Json> EvalJsonPath(const Json& obj, std::string_view path) {
  std::string_view p = Trim(path);
  if (p.size() >= 2 && p.front() == '{' && p.back() == '}') p = p.substr(1, p.size() - 2);
  std::vector<Json> cur{obj};
  size_t i = 0;
  while (i < p.size()) {
    std::string step;
    if (p[i] == '.') {
      ++i;
      size_t j = i;
      while (j < p.size() && p[j] != '.' && p[j] != '[') ++j;
      step = std::string(p.substr(i, j - i));
      i = j;
      if (step.empty()) continue;
    } else if (p[i] == '[') {
      size_t j = p.find(']', i);
      // A filter may hold ']' only inside quotes; the subset here has none.
      if (j == std::string_view::npos) return {};
      step = std::string(p.substr(i + 1, j - i - 1));
      i = j + 1;
      if (step.size() >= 2 && (step.front() == '\'' || step.front() == '"')) {
        step = step.substr(1, step.size() - 2);
      }
    } else if (p[i] == '$' || p[i] == '@') {
      ++i;
      continue;
    } else {
      size_t j = i;
      while (j < p.size() && p[j] != '.' && p[j] != '[') ++j;
      step = std::string(p.substr(i, j - i));
      i = j;
    }
    std::vector<Json> next;
    Step(cur, step, next);
    cur = std::move(next);
    if (cur.empty()) return {};
  }
  return cur;
}

Json ColumnDefinitions(const ServedResource& r) { return Definitions(ColumnsFor(r)); }

Json ToTable(const ServedResource& r, const std::vector<Json>& objects,
             const TableOptions& options) {
  std::vector<Column> cols = ColumnsFor(r);
  Json rows = Json::array();
  for (const auto& obj : objects) {
    Json cells = Json::array();
    for (const auto& c : cols) cells.push_back(c.cell(obj, options.now));
    Json row{{"cells", std::move(cells)}};
    if (options.include_object == "Object") {
      row["object"] = obj;
    } else if (options.include_object != "None") {
      Json meta = obj.contains("metadata") ? obj["metadata"] : Json::object();
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/v1"},
                       {"metadata", std::move(meta)}};
    }
    rows.push_back(std::move(row));
  }
  Json meta = Json::object();
  if (!options.resource_version.empty()) meta["resourceVersion"] = options.resource_version;
  if (!options.continue_token.empty()) meta["continue"] = options.continue_token;
  if (options.remaining_item_count) meta["remainingItemCount"] = *options.remaining_item_count;
  Json table{{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", std::move(meta)}};
  table["columnDefinitions"] = options.include_headers ? Definitions(cols) : Json::array();
  table["rows"] = std::move(rows);
  return table;
}

}  // namespace gpuop::simkube
