// Registry: the resources the API emulator serves, what discovery lists and
// what the router looks requests up in.
//
// It starts with the built-in resources gpuop and kubectl touch (core/v1
// namespaces, nodes, pods, services, ...; apps/v1; rbac; coordination; node;
// apiextensions; resource.k8s.io/v1; events.k8s.io/v1) and gains custom
// resources at run time when a CustomResourceDefinition is created (and loses
// them when it is deleted). Each entry is a ServedResource: the ResourceInfo
// the store and schema engine use, plus what only the HTTP layer needs
// (printer columns, the CRD that serves it, whether it is the group's
// preferred version).
//
// Entries are immutable snapshots handed out as shared pointers, so a request
// keeps using the entry it looked up even if the CRD changes meanwhile.
// Thread-safety: every method may be called from any thread (a shared mutex
// guards the table).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/kube/resource.h"

namespace gpuop::simkube {

struct ServedResource {
  ResourceInfo info;
  // A CRD's additionalPrinterColumns for this version ([] for built-ins: their
  // columns are the server's own, table.h).
  nlohmann::json printer_columns = nlohmann::json::array();
  // The CRD serving this resource ("widgets.example.com"); "" for built-ins.
  std::string crd_name;
  // The CRD's whole object (for CR validation and defaulting); null for built-ins.
  std::shared_ptr<const nlohmann::json> crd;
};
using ServedPtr = std::shared_ptr<const ServedResource>;

// A group with its versions, preferred first, as discovery lists them.
struct ServedGroup {
  std::string name;                   // "" for the core group
  std::vector<std::string> versions;  // preferred first
};

class Registry {
 public:
  // A registry holding the built-in resources.
  Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // By group, version and plural; nullptr when not served.
  ServedPtr Find(std::string_view group, std::string_view version, std::string_view plural) const;
  // By group, version and kind; nullptr when not served.
  ServedPtr FindKind(std::string_view group, std::string_view version, std::string_view kind) const;
  // Every version of one group/plural (the CRD's served versions).
  std::vector<ServedPtr> FindAllVersions(std::string_view group, std::string_view plural) const;

  // Groups in discovery order: core, the built-in groups, then custom groups
  // sorted by name.
  std::vector<ServedGroup> Groups() const;
  // The resources of one group/version, sorted by plural.
  std::vector<ServedPtr> Resources(std::string_view group, std::string_view version) const;
  std::vector<ServedPtr> All() const;

  // Serves the resources of a CRD (one per served version), replacing what
  // the CRD served before. A plural already served by a built-in or by
  // another CRD is refused (the CRD's NamesAccepted condition says why).
  Status SetCustom(const std::string& crd_name, std::vector<ServedResource> versions);
  void RemoveCustom(const std::string& crd_name);

  // Bumped on every change; discovery documents use it as an ETag.
  uint64_t generation() const;

 private:
  static std::string Key(std::string_view group, std::string_view version, std::string_view plural);
  void AddLocked(ServedResource r);  // REQUIRES: mu_ held exclusively

  mutable std::shared_mutex mu_;
  std::map<std::string, ServedPtr> by_key_;  // GUARDED_BY(mu_): "group/version/plural"
  std::map<std::string, std::vector<std::string>> crd_keys_;  // GUARDED_BY(mu_)
  std::vector<std::string> builtin_group_order_;              // immutable after construction
  uint64_t generation_ = 1;                                   // GUARDED_BY(mu_)
};

// The built-in resources in the order the table in registry.cc lists them.
std::vector<ResourceInfo> BuiltinResources();

// "v1" and "v1beta1" style version priority, as Kubernetes sorts versions:
// GA before beta before alpha, higher numbers first. True when a sorts first.
bool VersionPriorityLess(std::string_view a, std::string_view b);

}  // namespace gpuop::simkube
