#include "sim/kube/resource.h"

#include <algorithm>
#include <set>
#include <utility>

namespace gpuop::simkube {

std::string GroupResource::String() const {
  return group.empty() ? resource : resource + "." + group;
}

std::vector<std::string> ResourceInfo::DefaultVerbs() {
  return {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
}

std::string ResourceInfo::ApiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

bool ResourceInfo::HasVerb(std::string_view verb) const {
  return std::find(verbs.begin(), verbs.end(), verb) != verbs.end();
}

namespace {

using Key = std::pair<std::string_view, std::string_view>;

bool In(const std::set<Key>& set, std::string_view group, std::string_view plural) {
  return set.count({group, plural}) > 0;
}

}  // namespace

bool DefaultTracksGeneration(std::string_view group, std::string_view plural) {
  static const std::set<Key> kTracked = {
      {"", "pods"},
      {"", "replicationcontrollers"},
      {"apps", "deployments"},
      {"apps", "daemonsets"},
      {"apps", "statefulsets"},
      {"apps", "replicasets"},
      {"batch", "jobs"},
      {"batch", "cronjobs"},
      {"policy", "poddisruptionbudgets"},
      {"networking.k8s.io", "ingresses"},
      {"networking.k8s.io", "networkpolicies"},
      {"apiextensions.k8s.io", "customresourcedefinitions"},
      {"resource.k8s.io", "resourceslices"},
      {"resource.k8s.io", "deviceclasses"},
      {"flowcontrol.apiserver.k8s.io", "flowschemas"},
      {"flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"},
      {"admissionregistration.k8s.io", "validatingwebhookconfigurations"},
      {"admissionregistration.k8s.io", "mutatingwebhookconfigurations"},
      {"admissionregistration.k8s.io", "validatingadmissionpolicies"},
      {"admissionregistration.k8s.io", "validatingadmissionpolicybindings"},
  };
  return In(kTracked, group, plural);
}

std::vector<std::string> DefaultFieldSelectors(std::string_view group, std::string_view plural) {
  if (group.empty()) {
    if (plural == "pods") {
      return {"spec.nodeName",
              "spec.restartPolicy",
              "spec.schedulerName",
              "spec.serviceAccountName",
              "spec.hostNetwork",
              "status.phase",
              "status.podIP",
              "status.podIPs",
              "status.nominatedNodeName"};
    }
    if (plural == "nodes") return {"spec.unschedulable"};
    if (plural == "namespaces") return {"status.phase"};
    if (plural == "secrets") return {"type"};
    if (plural == "services") return {"spec.clusterIP", "spec.type"};
    if (plural == "replicationcontrollers") return {"status.replicas"};
    if (plural == "events") {
      return {"involvedObject.kind",
              "involvedObject.namespace",
              "involvedObject.name",
              "involvedObject.uid",
              "involvedObject.apiVersion",
              "involvedObject.resourceVersion",
              "involvedObject.fieldPath",
              "reason",
              "reportingComponent",
              "source",
              "type"};
    }
  }
  if (group == "apps" && plural == "replicasets") return {"status.replicas"};
  if (group == "batch" && plural == "jobs") return {"status.successful"};
  if (group == "events.k8s.io" && plural == "events") {
    return {"regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "reportingController",
            "type"};
  }
  if (group == "resource.k8s.io" && plural == "resourceslices") {
    return {"spec.nodeName", "spec.driver"};
  }
  if (group == "certificates.k8s.io" && plural == "certificatesigningrequests") {
    return {"spec.signerName"};
  }
  return {};
}

void ApplyDefaultBehaviour(ResourceInfo& info) {
  if (info.custom) {
    info.tracks_generation = true;
    info.allow_unconditional_update = false;
    info.reset_status_on_create = info.subresources.status;
    info.graceful_deletion = false;
    return;
  }
  info.tracks_generation = DefaultTracksGeneration(info.group, info.plural);
  info.field_selectors = DefaultFieldSelectors(info.group, info.plural);
  info.graceful_deletion = info.group.empty() && info.plural == "pods";
  static const std::set<Key> kResetStatus = {
      {"apps", "deployments"},
      {"apps", "daemonsets"},
      {"apps", "statefulsets"},
      {"apps", "replicasets"},
      {"batch", "jobs"},
      {"batch", "cronjobs"},
      {"", "services"},
      {"", "replicationcontrollers"},
      {"policy", "poddisruptionbudgets"},
      {"apiextensions.k8s.io", "customresourcedefinitions"},
      {"resource.k8s.io", "resourceclaims"},
  };
  info.reset_status_on_create = In(kResetStatus, info.group, info.plural);
  // CRDs need a resourceVersion on PUT like custom resources.
  info.allow_unconditional_update =
      !(info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions");
}

const ResourceInfo& NamespaceResource() {
  static const ResourceInfo kInfo = [] {
    ResourceInfo r;
    r.group = "";
    r.version = "v1";
    r.kind = "Namespace";
    r.plural = "namespaces";
    r.singular = "namespace";
    r.list_kind = "NamespaceList";
    r.namespaced = false;
    r.short_names = {"ns"};
    r.subresources.status = true;
    r.verbs = {"create", "delete", "get", "list", "patch", "update", "watch"};
    ApplyDefaultBehaviour(r);
    return r;
  }();
  return kInfo;
}

}  // namespace gpuop::simkube
