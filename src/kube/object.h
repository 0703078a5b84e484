// A small typed view over the JSON objects gpuop reads and writes: metadata
// (names, labels, annotations, owner references, finalizers), and the few
// fields of Node, Pod, DaemonSet and Lease that components act on, plus
// conditions in the usual {type, status, reason, message,
// lastTransitionTime} shape. The JSON stays the source of truth, so fields
// this view does not know survive a read-modify-write untouched.
//
// Accessors never throw: a missing or mistyped field reads as empty.
// Thread-safety: plain functions over values.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuop::kube {

using Json = nlohmann::json;

// metadata.*
std::string Name(const Json& obj);
std::string Namespace(const Json& obj);
std::string Uid(const Json& obj);
std::string ResourceVersion(const Json& obj);
int64_t Generation(const Json& obj);
bool IsBeingDeleted(const Json& obj);  // deletionTimestamp set
// "ns/name", or "name" for cluster-scoped objects: the cache and queue key.
std::string KeyOf(const Json& obj);
std::string MakeKey(std::string_view ns, std::string_view name);
// Splits a key back; returns {"", key} for cluster-scoped keys.
std::pair<std::string, std::string> SplitKey(std::string_view key);

std::map<std::string, std::string> Labels(const Json& obj);
std::optional<std::string> Label(const Json& obj, std::string_view key);
// Sets (or with nullopt removes) a label; returns true when that changed the object.
bool SetLabel(Json& obj, std::string_view key, std::optional<std::string_view> value);
std::map<std::string, std::string> Annotations(const Json& obj);
std::optional<std::string> Annotation(const Json& obj, std::string_view key);
bool SetAnnotation(Json& obj, std::string_view key, std::optional<std::string_view> value);

bool HasFinalizer(const Json& obj, std::string_view finalizer);
bool AddFinalizer(Json& obj, std::string_view finalizer);
bool RemoveFinalizer(Json& obj, std::string_view finalizer);

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
  bool block_owner_deletion = false;
};
std::vector<OwnerReference> OwnerReferences(const Json& obj);
// The owner reference that makes `owner` the controller of an object.
Json ControllerReference(const Json& owner);
// Adds or replaces the reference to `owner` (matched by uid).
bool SetOwnerReference(Json& obj, const Json& owner, bool controller = true);
bool IsOwnedBy(const Json& obj, std::string_view owner_uid);

// status.conditions[] (Node, Pod, and custom resources alike).
struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;  // RFC 3339
  int64_t observed_generation = 0;
};
std::optional<Condition> FindCondition(const Json& obj, std::string_view type);
// Sets a condition, keeping lastTransitionTime unless the status changes;
// returns true when anything changed. `now` is RFC 3339 (see Rfc3339).
bool SetCondition(Json& obj, const Condition& condition, std::string_view now);

// RFC 3339 with seconds ("2026-12-02T11:38:42Z") and with microseconds
// ("...42.123456Z", what Leases use), both in UTC.
std::string Rfc3339(std::chrono::system_clock::time_point t);
std::string Rfc3339Micro(std::chrono::system_clock::time_point t);
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s);

// Node
struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  bool operator==(const Taint&) const = default;
};
std::vector<Taint> Taints(const Json& node);
bool HasTaint(const Json& node, std::string_view key, std::string_view effect = "");
bool AddTaint(Json& node, const Taint& taint);  // replaces one with the same key+effect
bool RemoveTaint(Json& node, std::string_view key, std::string_view effect = "");
bool IsNodeReady(const Json& node);
bool IsUnschedulable(const Json& node);
// status.capacity / status.allocatable quantity as written ("8", "1Gi").
std::optional<std::string> Capacity(const Json& node, std::string_view resource);
std::optional<std::string> Allocatable(const Json& node, std::string_view resource);

// Pod
std::string PodNodeName(const Json& pod);
std::string PodPhase(const Json& pod);
bool IsPodReady(const Json& pod);
bool IsPodTerminal(const Json& pod);  // Succeeded or Failed

// DaemonSet: ready when every scheduled pod runs the current template.
struct DaemonSetStatus {
  int64_t desired = 0;
  int64_t current = 0;
  int64_t ready = 0;
  int64_t updated = 0;
  int64_t available = 0;
  int64_t observed_generation = 0;
};
DaemonSetStatus GetDaemonSetStatus(const Json& ds);
bool IsDaemonSetRolledOut(const Json& ds);

// coordination.k8s.io/v1 Lease spec.
struct LeaseSpec {
  std::string holder_identity;
  int64_t lease_duration_seconds = 0;
  std::optional<std::chrono::system_clock::time_point> acquire_time;
  std::optional<std::chrono::system_clock::time_point> renew_time;
  int64_t lease_transitions = 0;
  bool operator==(const LeaseSpec&) const = default;
};
LeaseSpec GetLeaseSpec(const Json& lease);
void SetLeaseSpec(Json& lease, const LeaseSpec& spec);

}  // namespace gpuop::kube
