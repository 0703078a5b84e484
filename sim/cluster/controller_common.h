// What the cluster simulator's controllers (scheduler, DaemonSet, Deployment
// and ReplicaSet controllers) share: pure functions over Kubernetes objects,
// written after kube-scheduler's and kube-controller-manager's own helpers so
// the decisions match a real cluster's:
//   - resource quantities ("100m", "1Gi") and a pod's effective requests;
//   - node selection: nodeSelector, required node affinity (matchExpressions
//     and matchFields), taints against tolerations;
//   - template hashes (pod-template-hash, controller-revision-hash), intOrString
//     percentages, pod readiness and availability;
//   - Expectations: the writes a controller made that its informer cache has
//     not shown yet (kube's ControllerExpectations), so a reconcile never acts
//     twice on a stale cache.
//
// Thread-safety: the functions are pure. Expectations may be called from any
// thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resource.h"

namespace gpuop::simcluster {

using kube::Json;

// The apps/v1 collections gpuop's own client does not name.
extern const kube::Resource kReplicaSets;
extern const kube::Resource kControllerRevisions;

// obj[key] when obj is an object holding key, else a null (never throws).
const Json& Member(const Json& obj, const char* key);

// --- Quantities and requests ---

// A resource quantity in thousandths ("100m" -> 100, "2" -> 2000, "1Gi" ->
// 1073741824000); nullopt when it does not parse. Numbers are accepted too.
std::optional<int64_t> ParseQuantityMilli(const Json& quantity);
// Formats thousandths back as kube prints them in messages ("100m", "2").
std::string FormatQuantityMilli(int64_t milli);

// Resource name -> amount in thousandths.
using ResourceList = std::map<std::string, int64_t>;

// What the scheduler counts for a pod (kube's resource.PodRequests): for each
// resource, the larger of the sum over regular containers and the largest
// init container, plus spec.overhead. A resource with limits and no requests
// requests its limit (the API server's defaulting).
ResourceList PodRequests(const Json& pod);

// --- Node selection ---

// One NodeSelectorTerm: every matchExpressions (on labels) and matchFields
// (metadata.name) requirement holds. An empty term matches nothing.
bool NodeSelectorTermMatches(const Json& term, const Json& node);
// spec.nodeSelector and required node affinity (terms ORed) both hold.
bool PodMatchesNodeSelectorAndAffinity(const Json& pod_spec, const Json& node);

// Whether `tolerations` (spec.tolerations) tolerate `taint`.
bool ToleratesTaint(const Json& tolerations, const kube::Taint& taint);
// The first taint with an effect in `effects` that is not tolerated.
std::optional<kube::Taint> FirstUntoleratedTaint(const Json& tolerations,
                                                 const std::vector<kube::Taint>& taints,
                                                 const std::set<std::string>& effects);

// --- Templates ---

// A short hash of `object` (and a collision count, when set), spelt with
// kube's safe alphabet ("5d8b9c7f4f"): pod-template-hash and
// controller-revision-hash. Stable across runs and processes.
std::string ComputeHash(const Json& object, std::optional<int64_t> collision_count);

// An intOrString (2, "25%") against `total`; percentages round up or down.
// Absent or malformed: `fallback`.
int64_t ResolveIntOrPercent(const Json& value, int64_t total, bool round_up, int64_t fallback);

// Ready and (min_ready_seconds == 0 or ready for longer than that).
bool IsPodAvailable(const Json& pod, int64_t min_ready_seconds,
                    std::chrono::system_clock::time_point now);
// Not Succeeded/Failed and not being deleted.
bool IsPodActive(const Json& pod);

// The uid of the object's controller owner reference ("" when none).
std::string ControllerUid(const Json& obj);
// An informer index of objects by that uid (kControllerUidIndex).
inline constexpr const char* kControllerUidIndex = "controller-uid";
std::vector<std::string> IndexByControllerUid(const Json& obj);
// A controller owner reference to `owner`, an object of `api_version`/`kind`.
Json ControllerRef(const Json& owner, const char* api_version, const char* kind);
// metadata.creationTimestamp for ordering (epoch when absent).
std::chrono::system_clock::time_point CreationTime(const Json& obj);

// --- Expectations ---

// The creations and deletions a controller made for one key that its cache
// has not reflected yet. A reconcile that finds them unsatisfied waits (the
// events of those very objects enqueue the key again). Entries expire after
// `timeout` (a watch event that never came must not wedge the controller).
class Expectations {
 public:
  explicit Expectations(std::chrono::seconds timeout = std::chrono::seconds(30))
      : timeout_(timeout) {}

  // `created_key` / `deleted_key` are informer keys ("ns/name") of the objects.
  void ExpectCreation(const std::string& key, const std::string& created_key);
  void ExpectDeletion(const std::string& key, const std::string& deleted_key,
                      const std::string& uid);
  // True when every expectation of `key` shows in `cache` (created objects
  // present; deleted ones absent, replaced or being deleted), or expired.
  bool Satisfied(const std::string& key, const kube::Informer& cache);
  void Forget(const std::string& key);

 private:
  struct Entry {
    std::set<std::string> creations;
    std::map<std::string, std::string> deletions;  // object key -> uid
    std::chrono::steady_clock::time_point since;
  };
  const std::chrono::seconds timeout_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // GUARDED_BY(mu_)
};

}  // namespace gpuop::simcluster
