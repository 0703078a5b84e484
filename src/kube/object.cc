// The typed view over Kubernetes JSON objects (object.h). Every reader walks
// the JSON with find() and type checks, never at()/get<>() on an unchecked
// value, so a missing or mistyped field reads as empty instead of throwing.
// Writers replace a mistyped container (say, "labels": "x") with an empty
// object or array of the right type, and leave every other field alone.
#include "kube/object.h"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "base/json_field.h"

namespace gpuop::kube {
namespace {

// The member `key` of `j`, or nullptr when `j` is not an object or lacks it.
const Json* Member(const Json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

const Json* Path(const Json& j, std::initializer_list<std::string_view> keys) {
  const Json* at = &j;
  for (std::string_view key : keys) {
    at = Member(*at, key);
    if (at == nullptr) return nullptr;
  }
  return at;
}

std::string StringAt(const Json& j, std::initializer_list<std::string_view> keys) {
  const Json* v = Path(j, keys);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t IntAt(const Json& j, std::initializer_list<std::string_view> keys) {
  const Json* v = Path(j, keys);
  if (v == nullptr) return 0;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) return static_cast<int64_t>(v->get<double>());
  return 0;
}

bool BoolAt(const Json& j, std::initializer_list<std::string_view> keys) {
  const Json* v = Path(j, keys);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

// The member `key` of `parent` as an object, creating it (or replacing a
// mistyped value) as needed. `parent` itself becomes an object if it is not.
Json& ObjectMember(Json& parent, std::string_view key) {
  if (!parent.is_object()) parent = Json::object();
  Json& member = parent[std::string(key)];
  if (!member.is_object()) member = Json::object();
  return member;
}

Json& ArrayMember(Json& parent, std::string_view key) {
  if (!parent.is_object()) parent = Json::object();
  Json& member = parent[std::string(key)];
  if (!member.is_array()) member = Json::array();
  return member;
}

// Removes `key` from the object at `parent` when that holds an empty
// object or array, so removing the last label leaves no "labels": {}.
void EraseIfEmpty(Json& parent, std::string_view key) {
  if (!parent.is_object()) return;
  auto it = parent.find(key);
  if (it != parent.end() && (it->is_object() || it->is_array()) && it->empty()) parent.erase(it);
}

std::optional<std::string> StringEntry(const Json* j, std::string_view key) {
  const Json* v = j == nullptr ? nullptr : Member(*j, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

bool SetStringEntry(Json& obj, std::string_view map_name, std::string_view key,
                    std::optional<std::string_view> value) {
  const Json* map = Path(obj, {"metadata", map_name});
  std::optional<std::string> old = StringEntry(map, key);
  if (!value.has_value()) {
    if (map == nullptr || Member(*map, key) == nullptr) return false;
    Json& metadata = obj["metadata"];
    metadata[std::string(map_name)].erase(std::string(key));
    EraseIfEmpty(metadata, map_name);
    return true;
  }
  if (old.has_value() && *old == *value) return false;
  ObjectMember(ObjectMember(obj, "metadata"), map_name)[std::string(key)] = std::string(*value);
  return true;
}

// Quantities are strings in the API; tolerate a bare number too.
std::optional<std::string> QuantityAt(const Json& node, std::string_view field,
                                      std::string_view resource) {
  const Json* v = Path(node, {"status", field, resource});
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number()) return v->dump();
  return std::nullopt;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil), so parsing needs neither timegm nor the TZ database.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool IsLeapYear(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeapYear(y) ? 29 : kDays[m - 1];
}

// Reads exactly `n` digits at `*pos`.
std::optional<int> Digits(std::string_view s, size_t* pos, size_t n) {
  if (*pos + n > s.size()) return std::nullopt;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  return v;
}

bool Expect(std::string_view s, size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

std::string FormatUtc(std::chrono::system_clock::time_point t, bool micro) {
  using namespace std::chrono;
  const auto us = floor<microseconds>(t);
  const auto secs = floor<seconds>(us);
  const std::time_t tt = system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (micro) {
    char frac[32];  // room for any long long: no -Wformat-truncation
    std::snprintf(frac, sizeof frac, ".%06lld", static_cast<long long>((us - secs).count()));
    out += frac;
  }
  out += 'Z';
  return out;
}

std::optional<std::chrono::system_clock::time_point> TimeAt(const Json& j, std::string_view key) {
  const Json* v = Member(j, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return ParseRfc3339(v->get<std::string>());
}

Json* FindConditionJson(Json& obj, std::string_view type) {
  Json* status = obj.is_object() && obj.contains("status") ? &obj["status"] : nullptr;
  if (status == nullptr || !status->is_object()) return nullptr;
  auto it = status->find("conditions");
  if (it == status->end() || !it->is_array()) return nullptr;
  for (Json& c : *it) {
    if (c.is_object() && StringAt(c, {"type"}) == type) return &c;
  }
  return nullptr;
}

bool ConditionIsTrue(const Json& obj, std::string_view type) {
  std::optional<Condition> c = FindCondition(obj, type);
  return c.has_value() && c->status == "True";
}

// Sets obj[key] = value, returning whether that changed anything.
bool Assign(Json& obj, std::string_view key, Json value) {
  auto it = obj.find(key);
  if (it != obj.end() && *it == value) return false;
  obj[std::string(key)] = std::move(value);
  return true;
}

// Like Assign for an optional string field: empty removes it.
bool AssignString(Json& obj, std::string_view key, const std::string& value) {
  if (!value.empty()) return Assign(obj, key, value);
  auto it = obj.find(key);
  if (it == obj.end()) return false;
  obj.erase(it);
  return true;
}

}  // namespace

std::string Name(const Json& obj) { return StringAt(obj, {"metadata", "name"}); }
std::string Namespace(const Json& obj) { return StringAt(obj, {"metadata", "namespace"}); }
std::string Uid(const Json& obj) { return StringAt(obj, {"metadata", "uid"}); }
std::string ResourceVersion(const Json& obj) {
  return StringAt(obj, {"metadata", "resourceVersion"});
}
int64_t Generation(const Json& obj) { return IntAt(obj, {"metadata", "generation"}); }

bool IsBeingDeleted(const Json& obj) {
  const Json* v = Path(obj, {"metadata", "deletionTimestamp"});
  return v != nullptr && v->is_string() && !v->get<std::string>().empty();
}

std::string KeyOf(const Json& obj) { return MakeKey(Namespace(obj), Name(obj)); }

std::string MakeKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key;
  key.reserve(ns.size() + 1 + name.size());
  key.append(ns).append("/").append(name);
  return key;
}

std::pair<std::string, std::string> SplitKey(std::string_view key) {
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

std::map<std::string, std::string> Labels(const Json& obj) {
  return StringMap(Field(Field(obj, "metadata"), "labels"));
}
std::optional<std::string> Label(const Json& obj, std::string_view key) {
  return StringEntry(Path(obj, {"metadata", "labels"}), key);
}
bool SetLabel(Json& obj, std::string_view key, std::optional<std::string_view> value) {
  return SetStringEntry(obj, "labels", key, value);
}
std::map<std::string, std::string> Annotations(const Json& obj) {
  return StringMap(Field(Field(obj, "metadata"), "annotations"));
}
std::optional<std::string> Annotation(const Json& obj, std::string_view key) {
  return StringEntry(Path(obj, {"metadata", "annotations"}), key);
}
bool SetAnnotation(Json& obj, std::string_view key, std::optional<std::string_view> value) {
  return SetStringEntry(obj, "annotations", key, value);
}

bool HasFinalizer(const Json& obj, std::string_view finalizer) {
  const Json* list = Path(obj, {"metadata", "finalizers"});
  if (list == nullptr || !list->is_array()) return false;
  return std::any_of(list->begin(), list->end(), [&](const Json& f) {
    return f.is_string() && f.get<std::string>() == finalizer;
  });
}

bool AddFinalizer(Json& obj, std::string_view finalizer) {
  if (HasFinalizer(obj, finalizer)) return false;
  ArrayMember(ObjectMember(obj, "metadata"), "finalizers").push_back(std::string(finalizer));
  return true;
}

bool RemoveFinalizer(Json& obj, std::string_view finalizer) {
  if (!HasFinalizer(obj, finalizer)) return false;
  Json& metadata = obj["metadata"];
  Json& list = metadata["finalizers"];
  Json kept = Json::array();
  for (Json& f : list) {
    if (!(f.is_string() && f.get<std::string>() == finalizer)) kept.push_back(std::move(f));
  }
  list = std::move(kept);
  EraseIfEmpty(metadata, "finalizers");
  return true;
}

std::vector<OwnerReference> OwnerReferences(const Json& obj) {
  std::vector<OwnerReference> out;
  const Json* refs = Path(obj, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return out;
  for (const Json& r : *refs) {
    if (!r.is_object()) continue;
    out.push_back({StringAt(r, {"apiVersion"}), StringAt(r, {"kind"}), StringAt(r, {"name"}),
                   StringAt(r, {"uid"}), BoolAt(r, {"controller"}),
                   BoolAt(r, {"blockOwnerDeletion"})});
  }
  return out;
}

Json ControllerReference(const Json& owner) {
  return Json{{"apiVersion", StringAt(owner, {"apiVersion"})},
              {"kind", StringAt(owner, {"kind"})},
              {"name", Name(owner)},
              {"uid", Uid(owner)},
              {"controller", true},
              {"blockOwnerDeletion", true}};
}

bool SetOwnerReference(Json& obj, const Json& owner, bool controller) {
  Json ref = ControllerReference(owner);
  ref["controller"] = controller;
  ref["blockOwnerDeletion"] = controller;
  Json& refs = ArrayMember(ObjectMember(obj, "metadata"), "ownerReferences");
  const std::string uid = Uid(owner);
  for (Json& existing : refs) {
    if (StringAt(existing, {"uid"}) != uid) continue;
    if (existing == ref) return false;
    existing = std::move(ref);
    return true;
  }
  refs.push_back(std::move(ref));
  return true;
}

bool IsOwnedBy(const Json& obj, std::string_view owner_uid) {
  for (const OwnerReference& r : OwnerReferences(obj)) {
    if (r.uid == owner_uid) return true;
  }
  return false;
}

std::optional<Condition> FindCondition(const Json& obj, std::string_view type) {
  const Json* list = Path(obj, {"status", "conditions"});
  if (list == nullptr || !list->is_array()) return std::nullopt;
  for (const Json& c : *list) {
    if (!c.is_object() || StringAt(c, {"type"}) != type) continue;
    return Condition{StringAt(c, {"type"}),
                     StringAt(c, {"status"}),
                     StringAt(c, {"reason"}),
                     StringAt(c, {"message"}),
                     StringAt(c, {"lastTransitionTime"}),
                     IntAt(c, {"observedGeneration"})};
  }
  return std::nullopt;
}

bool SetCondition(Json& obj, const Condition& condition, std::string_view now) {
  Json* existing = FindConditionJson(obj, condition.type);
  if (existing == nullptr) {
    Json c{{"type", condition.type},
           {"status", condition.status},
           {"lastTransitionTime", std::string(now)}};
    if (!condition.reason.empty()) c["reason"] = condition.reason;
    if (!condition.message.empty()) c["message"] = condition.message;
    if (condition.observed_generation != 0) c["observedGeneration"] = condition.observed_generation;
    ArrayMember(ObjectMember(obj, "status"), "conditions").push_back(std::move(c));
    return true;
  }
  Json& c = *existing;
  bool changed = false;
  const bool transition = StringAt(c, {"status"}) != condition.status;
  if (transition || StringAt(c, {"lastTransitionTime"}).empty()) {
    changed |= Assign(c, "lastTransitionTime", std::string(now));
  }
  changed |= Assign(c, "status", condition.status);
  changed |= AssignString(c, "reason", condition.reason);
  changed |= AssignString(c, "message", condition.message);
  if (condition.observed_generation != 0) {
    changed |= Assign(c, "observedGeneration", condition.observed_generation);
  }
  return changed;
}

std::string Rfc3339(std::chrono::system_clock::time_point t) { return FormatUtc(t, false); }
std::string Rfc3339Micro(std::chrono::system_clock::time_point t) { return FormatUtc(t, true); }

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s) {
  using namespace std::chrono;
  size_t pos = 0;
  auto year = Digits(s, &pos, 4);
  if (!year || !Expect(s, &pos, '-')) return std::nullopt;
  auto month = Digits(s, &pos, 2);
  if (!month || !Expect(s, &pos, '-')) return std::nullopt;
  auto day = Digits(s, &pos, 2);
  if (!day || pos >= s.size() || (s[pos] != 'T' && s[pos] != 't' && s[pos] != ' ')) {
    return std::nullopt;
  }
  ++pos;
  auto hour = Digits(s, &pos, 2);
  if (!hour || !Expect(s, &pos, ':')) return std::nullopt;
  auto minute = Digits(s, &pos, 2);
  if (!minute || !Expect(s, &pos, ':')) return std::nullopt;
  auto second = Digits(s, &pos, 2);
  if (!second) return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 ||
      static_cast<unsigned>(*day) > DaysInMonth(*year, static_cast<unsigned>(*month)) ||
      *hour > 23 || *minute > 59 || *second > 60) {
    return std::nullopt;
  }
  // Fractional seconds: any number of digits, kept to nanoseconds.
  int64_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t start = pos;
    int64_t scale = 100000000;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      nanos += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return std::nullopt;
  }
  int64_t offset_minutes = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    auto off_hour = Digits(s, &pos, 2);
    if (!off_hour || !Expect(s, &pos, ':')) return std::nullopt;
    auto off_minute = Digits(s, &pos, 2);
    if (!off_minute || *off_hour > 23 || *off_minute > 59) return std::nullopt;
    offset_minutes = sign * (*off_hour * 60 + *off_minute);
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  // A leap second (:60) reads as the first instant of the next minute.
  const int64_t days =
      DaysFromCivil(*year, static_cast<unsigned>(*month), static_cast<unsigned>(*day));
  const int64_t local_seconds = days * 86400 + *hour * 3600 + *minute * 60 + *second;
  const int64_t utc_seconds = local_seconds - offset_minutes * 60;
  return system_clock::time_point(
      duration_cast<system_clock::duration>(seconds(utc_seconds) + nanoseconds(nanos)));
}

std::vector<Taint> Taints(const Json& node) {
  std::vector<Taint> out;
  const Json* list = Path(node, {"spec", "taints"});
  if (list == nullptr || !list->is_array()) return out;
  for (const Json& t : *list) {
    if (!t.is_object()) continue;
    out.push_back({StringAt(t, {"key"}), StringAt(t, {"value"}), StringAt(t, {"effect"})});
  }
  return out;
}

bool HasTaint(const Json& node, std::string_view key, std::string_view effect) {
  for (const Taint& t : Taints(node)) {
    if (t.key == key && (effect.empty() || t.effect == effect)) return true;
  }
  return false;
}

bool AddTaint(Json& node, const Taint& taint) {
  Json& list = ArrayMember(ObjectMember(node, "spec"), "taints");
  for (Json& t : list) {
    if (!t.is_object()) continue;
    if (StringAt(t, {"key"}) != taint.key || StringAt(t, {"effect"}) != taint.effect) continue;
    if (StringAt(t, {"value"}) == taint.value) return false;
    // Same key and effect, new value: replace, keeping any other field (timeAdded).
    if (taint.value.empty()) {
      t.erase("value");
    } else {
      t["value"] = taint.value;
    }
    return true;
  }
  Json t{{"key", taint.key}, {"effect", taint.effect}};
  if (!taint.value.empty()) t["value"] = taint.value;
  list.push_back(std::move(t));
  return true;
}

bool RemoveTaint(Json& node, std::string_view key, std::string_view effect) {
  if (!HasTaint(node, key, effect)) return false;
  Json& spec = node["spec"];
  Json kept = Json::array();
  for (Json& t : spec["taints"]) {
    const bool match = t.is_object() && StringAt(t, {"key"}) == key &&
                       (effect.empty() || StringAt(t, {"effect"}) == effect);
    if (!match) kept.push_back(std::move(t));
  }
  spec["taints"] = std::move(kept);
  EraseIfEmpty(spec, "taints");
  return true;
}

bool IsNodeReady(const Json& node) { return ConditionIsTrue(node, "Ready"); }
bool IsUnschedulable(const Json& node) { return BoolAt(node, {"spec", "unschedulable"}); }

std::optional<std::string> Capacity(const Json& node, std::string_view resource) {
  return QuantityAt(node, "capacity", resource);
}
std::optional<std::string> Allocatable(const Json& node, std::string_view resource) {
  return QuantityAt(node, "allocatable", resource);
}

std::string PodNodeName(const Json& pod) { return StringAt(pod, {"spec", "nodeName"}); }
std::string PodPhase(const Json& pod) { return StringAt(pod, {"status", "phase"}); }
bool IsPodReady(const Json& pod) { return ConditionIsTrue(pod, "Ready"); }
bool IsPodTerminal(const Json& pod) {
  const std::string phase = PodPhase(pod);
  return phase == "Succeeded" || phase == "Failed";
}

DaemonSetStatus GetDaemonSetStatus(const Json& ds) {
  DaemonSetStatus s;
  s.desired = IntAt(ds, {"status", "desiredNumberScheduled"});
  s.current = IntAt(ds, {"status", "currentNumberScheduled"});
  s.ready = IntAt(ds, {"status", "numberReady"});
  s.updated = IntAt(ds, {"status", "updatedNumberScheduled"});
  s.available = IntAt(ds, {"status", "numberAvailable"});
  s.observed_generation = IntAt(ds, {"status", "observedGeneration"});
  return s;
}

bool IsDaemonSetRolledOut(const Json& ds) {
  // As `kubectl rollout status` judges it: the controller has seen the
  // current spec, and every node that should run a pod runs an updated,
  // available one.
  const DaemonSetStatus s = GetDaemonSetStatus(ds);
  return s.observed_generation >= Generation(ds) && s.updated == s.desired &&
         s.available == s.desired && s.ready == s.desired;
}

LeaseSpec GetLeaseSpec(const Json& lease) {
  LeaseSpec spec;
  const Json* json = Member(lease, "spec");
  if (json == nullptr) return spec;
  spec.holder_identity = StringAt(*json, {"holderIdentity"});
  spec.lease_duration_seconds = IntAt(*json, {"leaseDurationSeconds"});
  spec.acquire_time = TimeAt(*json, "acquireTime");
  spec.renew_time = TimeAt(*json, "renewTime");
  spec.lease_transitions = IntAt(*json, {"leaseTransitions"});
  return spec;
}

void SetLeaseSpec(Json& lease, const LeaseSpec& spec) {
  Json& json = ObjectMember(lease, "spec");
  // An empty holder is written as "", as client-go does when it releases.
  json["holderIdentity"] = spec.holder_identity;
  json["leaseDurationSeconds"] = spec.lease_duration_seconds;
  if (spec.acquire_time.has_value()) {
    json["acquireTime"] = Rfc3339Micro(*spec.acquire_time);
  } else {
    json.erase("acquireTime");
  }
  if (spec.renew_time.has_value()) {
    json["renewTime"] = Rfc3339Micro(*spec.renew_time);
  } else {
    json.erase("renewTime");
  }
  json["leaseTransitions"] = spec.lease_transitions;
}

}  // namespace gpuop::kube
