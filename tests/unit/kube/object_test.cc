// The typed object view (src/kube/object.h): readers that never throw on
// missing or mistyped fields, writers that report whether they changed
// anything and keep fields they do not know, conditions, RFC 3339 times,
// taints, readiness of nodes, pods and DaemonSets, and Lease specs.
#include "kube/object.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gpuop::kube {
namespace {

using std::chrono::system_clock;

// Every shape a field could wrongly have; readers must shrug them all off.
std::vector<Json> MistypedObjects() {
  return {Json(),
          Json(42),
          Json("text"),
          Json::array({1, 2}),
          Json::object(),
          Json{{"metadata", "x"}, {"spec", 1}, {"status", Json::array()}},
          Json{{"metadata",
                {{"name", 7},
                 {"namespace", Json::array()},
                 {"labels", "a=b"},
                 {"annotations", 3},
                 {"finalizers", "f"},
                 {"ownerReferences", Json::object()},
                 {"generation", "2"},
                 {"deletionTimestamp", nullptr}}},
               {"spec", {{"taints", "t"}, {"unschedulable", "true"}, {"holderIdentity", 1}}},
               {"status",
                {{"conditions", {1, "x", Json::array()}},
                 {"capacity", "8"},
                 {"phase", 2},
                 {"desiredNumberScheduled", "3"}}}}};
}

TEST(ObjectTest, ReadersNeverThrowOnMissingOrMistypedFields) {
  for (const Json& obj : MistypedObjects()) {
    SCOPED_TRACE(obj.dump());
    EXPECT_EQ(Name(obj), "");
    EXPECT_EQ(Namespace(obj), "");
    EXPECT_EQ(Uid(obj), "");
    EXPECT_EQ(ResourceVersion(obj), "");
    EXPECT_EQ(Generation(obj), 0);
    EXPECT_FALSE(IsBeingDeleted(obj));
    EXPECT_EQ(KeyOf(obj), "");
    EXPECT_TRUE(Labels(obj).empty());
    EXPECT_EQ(Label(obj, "a"), std::nullopt);
    EXPECT_TRUE(Annotations(obj).empty());
    EXPECT_EQ(Annotation(obj, "a"), std::nullopt);
    EXPECT_FALSE(HasFinalizer(obj, "f"));
    EXPECT_TRUE(OwnerReferences(obj).empty());
    EXPECT_FALSE(IsOwnedBy(obj, ""));
    EXPECT_EQ(FindCondition(obj, "Ready"), std::nullopt);
    EXPECT_EQ(FindCondition(obj, ""), std::nullopt);
    EXPECT_TRUE(Taints(obj).empty());
    EXPECT_FALSE(HasTaint(obj, "t"));
    EXPECT_FALSE(IsNodeReady(obj));
    EXPECT_FALSE(IsUnschedulable(obj));
    EXPECT_EQ(Capacity(obj, "cpu"), std::nullopt);
    EXPECT_EQ(Allocatable(obj, "cpu"), std::nullopt);
    EXPECT_EQ(PodNodeName(obj), "");
    EXPECT_EQ(PodPhase(obj), "");
    EXPECT_FALSE(IsPodReady(obj));
    EXPECT_FALSE(IsPodTerminal(obj));
    EXPECT_EQ(GetDaemonSetStatus(obj).desired, 0);
    EXPECT_EQ(GetLeaseSpec(obj), LeaseSpec{});
  }
}

TEST(ObjectTest, WritersRepairMistypedContainersWithoutThrowing) {
  for (const Json& original : MistypedObjects()) {
    SCOPED_TRACE(original.dump());
    Json obj = original;
    EXPECT_TRUE(SetLabel(obj, "a", "b"));
    EXPECT_EQ(Label(obj, "a"), "b");
    EXPECT_TRUE(SetAnnotation(obj, "a", "b"));
    EXPECT_TRUE(AddFinalizer(obj, "f"));
    EXPECT_TRUE(HasFinalizer(obj, "f"));
    EXPECT_TRUE(SetOwnerReference(obj, Json{{"metadata", {{"uid", "u1"}}}}));
    EXPECT_TRUE(IsOwnedBy(obj, "u1"));
    EXPECT_TRUE(AddTaint(obj, {"k", "v", "NoSchedule"}));
    EXPECT_TRUE(HasTaint(obj, "k", "NoSchedule"));
    EXPECT_TRUE(SetCondition(obj, {"Ready", "True", "Ok", "", "", 0}, "2026-01-01T00:00:00Z"));
    EXPECT_TRUE(IsNodeReady(obj));
    Json lease = original;
    SetLeaseSpec(lease, {"me", 15, std::nullopt, std::nullopt, 1});
    EXPECT_EQ(GetLeaseSpec(lease).holder_identity, "me");
  }
}

TEST(ObjectTest, MetadataAndKeys) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "12",
                 "generation": 3, "deletionTimestamp": "2026-01-01T00:00:00Z"}})");
  EXPECT_EQ(Name(pod), "p");
  EXPECT_EQ(Namespace(pod), "ns");
  EXPECT_EQ(Uid(pod), "u");
  EXPECT_EQ(ResourceVersion(pod), "12");
  EXPECT_EQ(Generation(pod), 3);
  EXPECT_TRUE(IsBeingDeleted(pod));
  EXPECT_EQ(KeyOf(pod), "ns/p");
  EXPECT_EQ(KeyOf(Json{{"metadata", {{"name", "node-1"}}}}), "node-1");
  EXPECT_EQ(MakeKey("", "n"), "n");
  EXPECT_EQ(MakeKey("a", "b"), "a/b");
  EXPECT_EQ(SplitKey("a/b"), (std::pair<std::string, std::string>{"a", "b"}));
  EXPECT_EQ(SplitKey("node-1"), (std::pair<std::string, std::string>{"", "node-1"}));
  EXPECT_EQ(SplitKey(""), (std::pair<std::string, std::string>{"", ""}));
}

TEST(ObjectTest, LabelsAndAnnotationsReportChangesAndKeepOtherFields) {
  Json obj = Json::parse(R"({"kind": "Node", "metadata": {"name": "n", "labels": {"a": "1",
      "odd": 5}, "x-unknown": [1]}, "spec": {"future": true}})");
  EXPECT_EQ(Labels(obj), (std::map<std::string, std::string>{{"a", "1"}}));
  EXPECT_FALSE(SetLabel(obj, "a", "1"));
  EXPECT_TRUE(SetLabel(obj, "a", "2"));
  EXPECT_TRUE(SetLabel(obj, "b", ""));
  EXPECT_EQ(Label(obj, "b"), "");
  EXPECT_FALSE(SetLabel(obj, "missing", std::nullopt));
  EXPECT_TRUE(SetLabel(obj, "b", std::nullopt));
  EXPECT_EQ(Label(obj, "b"), std::nullopt);
  EXPECT_TRUE(SetLabel(obj, "odd", std::nullopt));  // a mistyped value is still removable
  EXPECT_TRUE(SetLabel(obj, "a", std::nullopt));
  EXPECT_FALSE(obj["metadata"].contains("labels"));  // no empty map left behind
  EXPECT_EQ(obj["metadata"]["x-unknown"], Json::array({1}));
  EXPECT_EQ(obj["spec"]["future"], true);
  EXPECT_EQ(obj["kind"], "Node");

  EXPECT_TRUE(SetAnnotation(obj, "gpuop/x", "y"));
  EXPECT_FALSE(SetAnnotation(obj, "gpuop/x", "y"));
  EXPECT_EQ(Annotations(obj), (std::map<std::string, std::string>{{"gpuop/x", "y"}}));
  EXPECT_TRUE(SetAnnotation(obj, "gpuop/x", std::nullopt));
  EXPECT_EQ(Annotation(obj, "gpuop/x"), std::nullopt);
}

TEST(ObjectTest, Finalizers) {
  Json obj = Json::parse(R"({"metadata": {"finalizers": ["other", 3]}})");
  EXPECT_FALSE(HasFinalizer(obj, "gpuop"));
  EXPECT_TRUE(AddFinalizer(obj, "gpuop"));
  EXPECT_FALSE(AddFinalizer(obj, "gpuop"));
  EXPECT_TRUE(HasFinalizer(obj, "gpuop"));
  EXPECT_TRUE(RemoveFinalizer(obj, "gpuop"));
  EXPECT_FALSE(RemoveFinalizer(obj, "gpuop"));
  EXPECT_EQ(obj["metadata"]["finalizers"], Json::parse(R"(["other", 3])"));
  Json single = Json::parse(R"({"metadata": {"finalizers": ["gpuop"]}})");
  EXPECT_TRUE(RemoveFinalizer(single, "gpuop"));
  EXPECT_FALSE(single["metadata"].contains("finalizers"));
}

TEST(ObjectTest, OwnerReferences) {
  Json owner = Json::parse(R"({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
      "metadata": {"name": "cluster-policy", "uid": "u-1"}})");
  Json ref = ControllerReference(owner);
  EXPECT_EQ(ref, Json::parse(R"({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
      "name": "cluster-policy", "uid": "u-1", "controller": true, "blockOwnerDeletion": true})"));

  Json ds = Json::parse(R"({"metadata": {"ownerReferences": [
      {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "u-0"}]}})");
  EXPECT_FALSE(IsOwnedBy(ds, "u-1"));
  EXPECT_TRUE(SetOwnerReference(ds, owner));
  EXPECT_FALSE(SetOwnerReference(ds, owner));
  EXPECT_TRUE(IsOwnedBy(ds, "u-1"));
  EXPECT_TRUE(IsOwnedBy(ds, "u-0"));
  std::vector<OwnerReference> refs = OwnerReferences(ds);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].kind, "Other");
  EXPECT_FALSE(refs[0].controller);
  EXPECT_EQ(refs[1].api_version, "nvidia.com/v1");
  EXPECT_EQ(refs[1].name, "cluster-policy");
  EXPECT_TRUE(refs[1].controller);
  EXPECT_TRUE(refs[1].block_owner_deletion);
  // The same owner as a plain (non-controller) owner replaces the reference.
  EXPECT_TRUE(SetOwnerReference(ds, owner, /*controller=*/false));
  refs = OwnerReferences(ds);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_FALSE(refs[1].controller);
}

TEST(ObjectTest, SetConditionKeepsTransitionTimeUnlessStatusChanges) {
  Json obj = Json::parse(R"({"status": {"conditions": [
      {"type": "Other", "status": "True", "lastHeartbeatTime": "x"}]}})");
  const std::string t1 = "2026-01-01T00:00:00Z";
  const std::string t2 = "2026-01-01T00:05:00Z";
  const std::string t3 = "2026-01-01T00:10:00Z";
  EXPECT_TRUE(SetCondition(obj, {"Ready", "False", "Starting", "driver loading", "", 0}, t1));
  std::optional<Condition> c = FindCondition(obj, "Ready");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, "False");
  EXPECT_EQ(c->reason, "Starting");
  EXPECT_EQ(c->message, "driver loading");
  EXPECT_EQ(c->last_transition_time, t1);

  // Same status, same text: nothing changes, not even the time.
  EXPECT_FALSE(SetCondition(obj, {"Ready", "False", "Starting", "driver loading", "", 0}, t2));
  // Same status, new message: the message changes, the time stays.
  EXPECT_TRUE(SetCondition(obj, {"Ready", "False", "Starting", "still loading", "", 0}, t2));
  EXPECT_EQ(FindCondition(obj, "Ready")->last_transition_time, t1);
  EXPECT_EQ(FindCondition(obj, "Ready")->message, "still loading");
  // New status: the time moves; an empty message removes the field.
  EXPECT_TRUE(SetCondition(obj, {"Ready", "True", "Ready", "", "", 4}, t3));
  c = FindCondition(obj, "Ready");
  EXPECT_EQ(c->status, "True");
  EXPECT_EQ(c->last_transition_time, t3);
  EXPECT_EQ(c->observed_generation, 4);
  EXPECT_EQ(c->message, "");
  const Json& conditions = obj["status"]["conditions"];
  ASSERT_EQ(conditions.size(), 2u);
  EXPECT_FALSE(conditions[1].contains("message"));
  // The other condition, and its unknown field, are untouched.
  EXPECT_EQ(conditions[0], Json::parse(R"({"type": "Other", "status": "True",
      "lastHeartbeatTime": "x"})"));
  EXPECT_TRUE(IsNodeReady(obj));
  EXPECT_TRUE(IsPodReady(obj));
}

TEST(ObjectTest, Rfc3339FormatsInUtc) {
  using namespace std::chrono;
  auto t = sys_days{year{2026} / 12 / 2} + hours{11} + minutes{38} + seconds{42} +
           microseconds{123456} + nanoseconds{789};
  auto tp = time_point_cast<system_clock::duration>(t);
  EXPECT_EQ(Rfc3339(tp), "2026-12-02T11:38:42Z");
  EXPECT_EQ(Rfc3339Micro(tp), "2026-12-02T11:38:42.123456Z");
  EXPECT_EQ(Rfc3339Micro(system_clock::time_point{}), "1970-01-01T00:00:00.000000Z");
  auto before_epoch = system_clock::time_point{} - milliseconds{1500};
  EXPECT_EQ(Rfc3339Micro(before_epoch), "1969-12-31T23:59:58.500000Z");
}

TEST(ObjectTest, ParseRfc3339AcceptsOffsetsAndFractions) {
  using namespace std::chrono;
  const auto base = system_clock::time_point{sys_days{year{2026} / 12 / 2}.time_since_epoch() +
                                             hours{11} + minutes{38} + seconds{42}};
  EXPECT_EQ(ParseRfc3339("2026-12-02T11:38:42Z"), base);
  EXPECT_EQ(ParseRfc3339("2026-12-02t11:38:42z"), base);
  EXPECT_EQ(ParseRfc3339("2026-12-02T13:38:42+02:00"), base);
  EXPECT_EQ(ParseRfc3339("2026-12-02T06:08:42-05:30"), base);
  EXPECT_EQ(ParseRfc3339("2026-12-03T00:38:42+13:00"), base);
  EXPECT_EQ(ParseRfc3339("2026-12-02T11:38:42.5Z"), base + milliseconds{500});
  EXPECT_EQ(ParseRfc3339("2026-12-02T11:38:42.123456Z"), base + microseconds{123456});
  EXPECT_EQ(ParseRfc3339("2026-12-02T11:38:42.123456789Z"),
            base + duration_cast<system_clock::duration>(nanoseconds{123456789}));
  EXPECT_EQ(ParseRfc3339("2024-02-29T00:00:00Z"),
            system_clock::time_point{sys_days{year{2024} / 2 / 29}.time_since_epoch()});
  EXPECT_EQ(ParseRfc3339("1969-12-31T23:59:59Z"), system_clock::time_point{} - seconds{1});
  for (const char* bad :
       {"", "2026-12-02", "2026-12-02T11:38:42", "2026-12-02T11:38Z", "2026-13-02T11:38:42Z",
        "2026-02-30T11:38:42Z", "2025-02-29T00:00:00Z", "2026-12-02T24:00:00Z",
        "2026-12-02T11:38:42.Z", "2026-12-02T11:38:42+0200", "2026-12-02T11:38:42Zjunk",
        "2026-12-02 11:38:42 UTC", "26-12-02T11:38:42Z", "2026-12-02T11:38:42+2:00"}) {
    EXPECT_EQ(ParseRfc3339(bad), std::nullopt) << bad;
  }
  // Round trips.
  const auto now = system_clock::now();
  EXPECT_EQ(ParseRfc3339(Rfc3339Micro(now)), floor<microseconds>(now));
  EXPECT_EQ(ParseRfc3339(Rfc3339(now)), floor<seconds>(now));
}

TEST(ObjectTest, Taints) {
  Json node = Json::parse(R"({"spec": {"taints": [
      {"key": "a", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}]}})");
  EXPECT_TRUE(HasTaint(node, "a"));
  EXPECT_TRUE(HasTaint(node, "a", "NoSchedule"));
  EXPECT_FALSE(HasTaint(node, "a", "NoExecute"));
  EXPECT_FALSE(AddTaint(node, {"a", "", "NoSchedule"}));
  // Same key and effect with a new value replaces it, keeping timeAdded.
  EXPECT_TRUE(AddTaint(node, {"a", "v", "NoSchedule"}));
  EXPECT_EQ(node["spec"]["taints"].size(), 1u);
  EXPECT_EQ(node["spec"]["taints"][0]["timeAdded"], "2026-01-01T00:00:00Z");
  EXPECT_TRUE(AddTaint(node, {"a", "v", "NoExecute"}));
  EXPECT_TRUE(AddTaint(node, {"gpu", "", "PreferNoSchedule"}));
  EXPECT_EQ(Taints(node), (std::vector<Taint>{{"a", "v", "NoSchedule"},
                                              {"a", "v", "NoExecute"},
                                              {"gpu", "", "PreferNoSchedule"}}));
  EXPECT_FALSE(node["spec"]["taints"][2].contains("value"));
  EXPECT_TRUE(RemoveTaint(node, "a", "NoExecute"));
  EXPECT_TRUE(HasTaint(node, "a", "NoSchedule"));
  EXPECT_FALSE(RemoveTaint(node, "a", "NoExecute"));
  EXPECT_TRUE(RemoveTaint(node, "a"));  // any effect
  EXPECT_TRUE(RemoveTaint(node, "gpu"));
  EXPECT_FALSE(node["spec"].contains("taints"));
}

TEST(ObjectTest, NodeFields) {
  Json node = Json::parse(R"({"spec": {"unschedulable": true},
      "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": 64},
                 "allocatable": {"nvidia.com/gpu": "7"},
                 "conditions": [{"type": "MemoryPressure", "status": "True"},
                                {"type": "Ready", "status": "Unknown"}]}})");
  EXPECT_TRUE(IsUnschedulable(node));
  EXPECT_FALSE(IsNodeReady(node));
  EXPECT_EQ(Capacity(node, "nvidia.com/gpu"), "8");
  EXPECT_EQ(Capacity(node, "cpu"), "64");
  EXPECT_EQ(Capacity(node, "memory"), std::nullopt);
  EXPECT_EQ(Allocatable(node, "nvidia.com/gpu"), "7");
  node["status"]["conditions"][1]["status"] = "True";
  EXPECT_TRUE(IsNodeReady(node));
}

TEST(ObjectTest, PodFields) {
  Json pod = Json::parse(R"({"spec": {"nodeName": "worker-1"},
      "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})");
  EXPECT_EQ(PodNodeName(pod), "worker-1");
  EXPECT_EQ(PodPhase(pod), "Running");
  EXPECT_TRUE(IsPodReady(pod));
  EXPECT_FALSE(IsPodTerminal(pod));
  for (const char* phase : {"Succeeded", "Failed"}) {
    pod["status"]["phase"] = phase;
    EXPECT_TRUE(IsPodTerminal(pod)) << phase;
  }
  pod["status"]["phase"] = "Pending";
  EXPECT_FALSE(IsPodTerminal(pod));
}

TEST(ObjectTest, DaemonSetRolledOut) {
  Json ds = Json::parse(R"({"metadata": {"generation": 2}, "status": {
      "desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 3,
      "updatedNumberScheduled": 3, "numberAvailable": 3, "observedGeneration": 2}})");
  DaemonSetStatus s = GetDaemonSetStatus(ds);
  EXPECT_EQ(s.desired, 3);
  EXPECT_EQ(s.current, 3);
  EXPECT_EQ(s.ready, 3);
  EXPECT_EQ(s.updated, 3);
  EXPECT_EQ(s.available, 3);
  EXPECT_EQ(s.observed_generation, 2);
  EXPECT_TRUE(IsDaemonSetRolledOut(ds));

  Json stale = ds;
  stale["metadata"]["generation"] = 3;  // the controller has not seen the new spec
  EXPECT_FALSE(IsDaemonSetRolledOut(stale));
  Json updating = ds;
  updating["status"]["updatedNumberScheduled"] = 2;
  EXPECT_FALSE(IsDaemonSetRolledOut(updating));
  Json unavailable = ds;
  unavailable["status"]["numberAvailable"] = 2;
  EXPECT_FALSE(IsDaemonSetRolledOut(unavailable));
  Json unready = ds;
  unready["status"]["numberReady"] = 2;
  EXPECT_FALSE(IsDaemonSetRolledOut(unready));
  // A brand-new DaemonSet with no status yet is not rolled out.
  EXPECT_FALSE(IsDaemonSetRolledOut(Json::parse(R"({"metadata": {"generation": 1}})")));
  // Nothing to schedule, and seen: rolled out.
  EXPECT_TRUE(IsDaemonSetRolledOut(
      Json::parse(R"({"metadata": {"generation": 1}, "status": {"observedGeneration": 1}})")));
}

TEST(ObjectTest, LeaseSpecRoundTripKeepsUnknownFields) {
  Json lease = Json::parse(R"({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
      "metadata": {"name": "gpuop", "namespace": "gpu-operator", "resourceVersion": "7"},
      "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
               "acquireTime": "2026-12-02T11:38:42.000001Z",
               "renewTime": "2026-12-02T11:39:00.250000Z", "leaseTransitions": 2,
               "preferredHolder": "b", "strategy": "OldestEmulationVersion"}})");
  LeaseSpec spec = GetLeaseSpec(lease);
  EXPECT_EQ(spec.holder_identity, "a");
  EXPECT_EQ(spec.lease_duration_seconds, 15);
  EXPECT_EQ(spec.lease_transitions, 2);
  ASSERT_TRUE(spec.acquire_time.has_value());
  ASSERT_TRUE(spec.renew_time.has_value());
  EXPECT_EQ(Rfc3339Micro(*spec.acquire_time), "2026-12-02T11:38:42.000001Z");
  EXPECT_EQ(*spec.renew_time - *spec.acquire_time, std::chrono::microseconds(18249999));

  // Writing back what was read changes nothing.
  Json copy = lease;
  SetLeaseSpec(copy, spec);
  EXPECT_EQ(copy, lease);

  spec.holder_identity = "";
  spec.lease_duration_seconds = 1;
  spec.renew_time = spec.acquire_time;
  spec.acquire_time.reset();
  SetLeaseSpec(lease, spec);
  EXPECT_EQ(lease["spec"]["holderIdentity"], "");
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-12-02T11:38:42.000001Z");
  EXPECT_FALSE(lease["spec"].contains("acquireTime"));
  EXPECT_EQ(lease["spec"]["preferredHolder"], "b");
  EXPECT_EQ(lease["spec"]["strategy"], "OldestEmulationVersion");
  EXPECT_EQ(lease["metadata"]["resourceVersion"], "7");
  EXPECT_EQ(GetLeaseSpec(lease), spec);
}

TEST(ObjectTest, ReadModifyWriteKeepsEveryUnknownField) {
  const Json original = Json::parse(R"({
    "apiVersion": "v1", "kind": "Node", "x-top": {"deep": [1, {"a": null}]},
    "metadata": {"name": "n", "labels": {"keep": "1"}, "managedFields": [{"manager": "m"}]},
    "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}]},
    "status": {"nodeInfo": {"kubeletVersion": "v1.31.0"},
               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                               "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})");
  Json obj = original;
  EXPECT_TRUE(SetLabel(obj, "nvidia.com/gpu.present", "true"));
  EXPECT_TRUE(AddTaint(obj, {"nvidia.com/gpu", "", "NoSchedule"}));
  EXPECT_TRUE(
      SetCondition(obj, {"Ready", "True", "KubeletReady", "ok", "", 0}, "2026-06-01T00:00:00Z"));
  EXPECT_EQ(obj["x-top"], original["x-top"]);
  EXPECT_EQ(obj["metadata"]["managedFields"], original["metadata"]["managedFields"]);
  EXPECT_EQ(obj["metadata"]["labels"]["keep"], "1");
  EXPECT_EQ(obj["spec"]["podCIDR"], "10.0.0.0/24");
  EXPECT_EQ(obj["status"]["nodeInfo"], original["status"]["nodeInfo"]);
  const Json& ready = obj["status"]["conditions"][0];
  EXPECT_EQ(ready["lastHeartbeatTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(ready["lastTransitionTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(ready["message"], "ok");
  // Undoing every change gives back the original, byte for byte.
  EXPECT_TRUE(SetLabel(obj, "nvidia.com/gpu.present", std::nullopt));
  EXPECT_TRUE(RemoveTaint(obj, "nvidia.com/gpu"));
  EXPECT_TRUE(
      SetCondition(obj, {"Ready", "True", "KubeletReady", "", "", 0}, "2026-06-01T00:00:00Z"));
  EXPECT_EQ(obj.dump(), original.dump());
}

}  // namespace
}  // namespace gpuop::kube
