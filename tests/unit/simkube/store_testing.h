// Resource descriptors and helpers shared by the store tests.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "sim/kube/store.h"
#include "tests/testing/wait.h"

namespace gpuop::simkube::testing {

inline ResourceInfo Nodes() {
  ResourceInfo r;
  r.version = "v1";
  r.kind = "Node";
  r.plural = "nodes";
  r.singular = "node";
  r.list_kind = "NodeList";
  r.namespaced = false;
  r.short_names = {"no"};
  r.subresources.status = true;
  ApplyDefaultBehaviour(r);
  return r;
}

inline ResourceInfo Pods() {
  ResourceInfo r;
  r.version = "v1";
  r.kind = "Pod";
  r.plural = "pods";
  r.singular = "pod";
  r.list_kind = "PodList";
  r.subresources.status = true;
  r.subresources.eviction = true;
  ApplyDefaultBehaviour(r);
  return r;
}

inline ResourceInfo ConfigMaps() {
  ResourceInfo r;
  r.version = "v1";
  r.kind = "ConfigMap";
  r.plural = "configmaps";
  r.singular = "configmap";
  r.list_kind = "ConfigMapList";
  ApplyDefaultBehaviour(r);
  return r;
}

inline ResourceInfo DaemonSets() {
  ResourceInfo r;
  r.group = "apps";
  r.version = "v1";
  r.kind = "DaemonSet";
  r.plural = "daemonsets";
  r.singular = "daemonset";
  r.list_kind = "DaemonSetList";
  r.subresources.status = true;
  ApplyDefaultBehaviour(r);
  return r;
}

inline ResourceInfo ClusterPolicies() {
  ResourceInfo r;
  r.group = "nvidia.com";
  r.version = "v1";
  r.kind = "ClusterPolicy";
  r.plural = "clusterpolicies";
  r.singular = "clusterpolicy";
  r.list_kind = "ClusterPolicyList";
  r.namespaced = false;
  r.subresources.status = true;
  r.custom = true;
  ApplyDefaultBehaviour(r);
  return r;
}

inline nlohmann::json Named(std::string name, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json obj = std::move(extra);
  obj["metadata"]["name"] = std::move(name);
  return obj;
}

inline StoreOptions ManualGc() {
  StoreOptions o;
  o.gc_thread = false;
  o.seed = 42;
  return o;
}

using gpuop::testing::WaitFor;

inline std::string Rv(const Object& o) { return (*o)["metadata"]["resourceVersion"]; }

}  // namespace gpuop::simkube::testing
