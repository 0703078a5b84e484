// ResourceInfo: what the API emulator knows about one served resource (one
// group/version/plural), the descriptor shared by the registry, the schema
// engine and the store. It carries the discovery facts (kind, plural, short
// names, verbs, subresources) and the few per-resource behaviours the real
// kube-apiserver keeps in each resource's "strategy" (does it track
// metadata.generation, which field selectors it supports, graceful deletion).
//
// A ResourceInfo is a plain value: copy it freely, share it read-only between
// threads. The helpers below are pure functions.
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <vector>

namespace gpuop::simkube {

// The identity of a resource in storage: group ("" for the core group) and
// plural resource name. Versions of one resource share storage.
struct GroupResource {
  std::string group;
  std::string resource;

  // "nodes" for the core group, "daemonsets.apps" otherwise: the form the real
  // server uses in error messages ("daemonsets.apps \"x\" not found").
  std::string String() const;
  auto operator<=>(const GroupResource&) const = default;
};

// Where the scale subresource reads and writes: dotted paths into the object
// (a CRD's specReplicasPath, statusReplicasPath, labelSelectorPath). The
// selector is a metav1.LabelSelector object (the apps workloads) or a string
// (custom resources); empty: the Scale has no status.selector.
struct ScalePaths {
  std::string spec_replicas = ".spec.replicas";
  std::string status_replicas = ".status.replicas";
  std::string label_selector;
};

struct Subresources {
  bool status = false;    // /status: spec and status written separately
  bool scale = false;     // /scale (scale.h), reading and writing scale_paths
  bool eviction = false;  // pods/eviction
  ScalePaths scale_paths;
};

struct ResourceInfo {
  std::string group;      // "" for the core group, "apps", "nvidia.com", ...
  std::string version;    // "v1"
  std::string kind;       // "Node"
  std::string plural;     // "nodes"
  std::string singular;   // "node"
  std::string list_kind;  // "NodeList"
  bool namespaced = true;
  std::vector<std::string> short_names;  // {"no"}
  std::vector<std::string> categories;   // {"all"}
  Subresources subresources;
  // Discovery verbs: "create","delete","deletecollection","get","list","patch","update","watch".
  std::vector<std::string> verbs = DefaultVerbs();

  // --- Behaviour (what the real server keeps in each resource's strategy) ---
  // A custom resource (served from a CRD): generation always tracked, status
  // dropped on create when the status subresource is on, PUT needs a resourceVersion.
  bool custom = false;
  // metadata.generation is 1 on create and bumped when anything but metadata
  // (and status, when the status subresource is on) changes, and when a
  // deletionTimestamp is set. Built-ins: see DefaultTracksGeneration.
  bool tracks_generation = false;
  // PUT without metadata.resourceVersion is allowed (unconditional update).
  // True for built-ins, false for custom resources and CRDs.
  bool allow_unconditional_update = true;
  // PUT of a missing object creates it instead of 404 (false for what gpuop serves).
  bool allow_create_on_update = false;
  // Status is reset on create (the status subresource owns it): custom
  // resources with a status subresource and e.g. Deployments, DaemonSets.
  bool reset_status_on_create = false;
  // Pods: delete of an object bound to a node (spec.nodeName set) sets
  // deletionTimestamp + deletionGracePeriodSeconds and keeps it until a delete
  // with grace 0 (the kubelet's). Grace comes from the request or
  // spec.terminationGracePeriodSeconds (default 30).
  bool graceful_deletion = false;
  // Field selector keys besides metadata.name and metadata.namespace,
  // e.g. pods: spec.nodeName, status.phase. Others are rejected with 400.
  std::vector<std::string> field_selectors;

  static std::vector<std::string> DefaultVerbs();

  // "v1" or "apps/v1".
  std::string ApiVersion() const;
  GroupResource Resource() const { return {group, plural}; }
  // "nodes" / "daemonsets.apps", as in error messages.
  std::string QualifiedResource() const { return Resource().String(); }
  bool HasVerb(std::string_view verb) const;
};

// Which built-in resources track metadata.generation (their strategy sets it
// to 1 on create): deployments, daemonsets, statefulsets, replicasets, jobs,
// cronjobs, replicationcontrollers, poddisruptionbudgets, ingresses,
// networkpolicies, customresourcedefinitions, pods (1.35), resourceslices,
// deviceclasses, flowcontrol, admission policies, ...
bool DefaultTracksGeneration(std::string_view group, std::string_view plural);
// Field selector keys the real server supports for a built-in resource,
// besides metadata.name and metadata.namespace.
std::vector<std::string> DefaultFieldSelectors(std::string_view group, std::string_view plural);

// Fills the behaviour fields above for a built-in (tracks_generation,
// field_selectors, graceful_deletion, reset_status_on_create,
// allow_unconditional_update) from group/plural; for custom == true applies
// the custom-resource rules instead.
void ApplyDefaultBehaviour(ResourceInfo& info);

// The core/v1 namespaces resource (the store creates the initial namespaces
// and checks namespace existence with it).
const ResourceInfo& NamespaceResource();

}  // namespace gpuop::simkube
