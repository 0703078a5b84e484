#include "sim/kube/store.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "sim/kube/json_patch.h"
#include "tests/unit/simkube/store_testing.h"

namespace gpuop::simkube {
namespace {

using nlohmann::json;
using namespace gpuop::simkube::testing;  // NOLINT

TEST(ApiErrorTest, StatusBodiesMatchTheRealServer) {
  json nf = NotFoundError({"", "nodes"}, "n1").ToStatusJson();
  EXPECT_EQ(nf, json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"nodes \"n1\" not found","reason":"NotFound",
      "details":{"name":"n1","kind":"nodes"},"code":404})"));
  json ds = NotFoundError({"apps", "daemonsets"}, "x").ToStatusJson();
  EXPECT_EQ(ds["message"], "daemonsets.apps \"x\" not found");
  EXPECT_EQ(ds["details"]["group"], "apps");
  ApiError conflict = ConflictError({"", "nodes"}, "n1", kOptimisticLockErrorMsg);
  EXPECT_EQ(conflict.code, 409);
  EXPECT_EQ(conflict.message,
            "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; "
            "please apply your changes to the latest version and try again");
  ApiError invalid = InvalidError(
      "", "Node", "", {FieldError::Required("metadata.name", "name or generateName is required")});
  EXPECT_EQ(invalid.code, 422);
  EXPECT_EQ(invalid.message,
            "Node \"\" is invalid: metadata.name: Required value: name or generateName is "
            "required");
  json ij = invalid.ToStatusJson();
  EXPECT_EQ(
      ij["details"]["causes"][0],
      json::parse(
          R"({"reason":"FieldValueRequired","message":"Required value: name or generateName is required","field":"metadata.name"})"));
  ApiError two = InvalidError("apps", "DaemonSet", "d",
                              {FieldError::Invalid("spec.x", "a", "bad"),
                               FieldError::TypeInvalid("spec.y", 3, "must be a string")});
  EXPECT_EQ(two.message,
            "DaemonSet.apps \"d\" is invalid: [spec.x: Invalid value: \"a\": bad, spec.y: Invalid "
            "value: 3: must be a string]");
  ApiError tmr = TooManyRequestsError("slow down", 2);
  EXPECT_EQ(tmr.ToStatusJson()["details"]["retryAfterSeconds"], 2);
  ApiError round = ApiError::FromStatusJson(invalid.ToStatusJson());
  EXPECT_EQ(round.ToStatusJson(), invalid.ToStatusJson());
  EXPECT_EQ(ResourceExpiredError("too old").reason, "Expired");
  EXPECT_EQ(ResourceExpiredError("too old").code, 410);
  EXPECT_EQ(NotFoundError({"", "nodes"}, "n").ToStatus().code(), StatusCode::kNotFound);
}

TEST(StoreTest, InitialNamespaces) {
  Store store(ManualGc());
  auto list = store.List(NamespaceResource(), "");
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const auto& o : list->items) names.push_back((*o)["metadata"]["name"]);
  EXPECT_EQ(names,
            (std::vector<std::string>{"default", "kube-node-lease", "kube-public", "kube-system"}));
  auto ns = store.Get(NamespaceResource(), "", "default");
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ((**ns)["status"]["phase"], "Active");
  EXPECT_EQ((**ns)["spec"]["finalizers"], json::array({"kubernetes"}));
  EXPECT_EQ((**ns)["kind"], "Namespace");
}

TEST(StoreTest, CreateFillsSystemFields) {
  Store store(ManualGc());
  const uint64_t before = store.CurrentResourceVersion();
  auto r = store.Create(Nodes(), "", Named("n1", {{"metadata", {{"labels", {{"a", "b"}}}}}}));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const json& o = **r;
  EXPECT_EQ(o["apiVersion"], "v1");
  EXPECT_EQ(o["kind"], "Node");
  EXPECT_EQ(o["metadata"]["resourceVersion"], std::to_string(before + 1));
  EXPECT_TRUE(std::regex_match(o["metadata"]["uid"].get<std::string>(),
                               std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                                          "[0-9a-f]{12}")))
      << o["metadata"]["uid"];
  EXPECT_TRUE(std::regex_match(o["metadata"]["creationTimestamp"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_FALSE(o["metadata"].contains("generation"));  // nodes do not track it
  EXPECT_FALSE(o["metadata"].contains("namespace"));

  auto dup = store.Create(Nodes(), "", Named("n1"));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, 409);
  EXPECT_EQ(dup.error().reason, "AlreadyExists");
  EXPECT_EQ(dup.error().message, "nodes \"n1\" already exists");

  auto got = store.Get(Nodes(), "", "n1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(**got, o);
  auto missing = store.Get(Nodes(), "", "n2");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, 404);
}

TEST(StoreTest, GenerateNameAndNameValidation) {
  Store store(ManualGc());
  json obj = {{"metadata", {{"generateName", "gpu-pod-"}}}};
  auto r = store.Create(Pods(), "default", obj);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  std::string name = (**r)["metadata"]["name"];
  EXPECT_TRUE(std::regex_match(name, std::regex("gpu-pod-[bcdfghjklmnpqrstvwxz2456789]{5}")))
      << name;
  auto none = store.Create(Pods(), "default", json{{"metadata", json::object()}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, 422);
  EXPECT_EQ(none.error().message,
            "Pod \"\" is invalid: metadata.name: Required value: name or generateName is "
            "required");
  auto upper = store.Create(Pods(), "default", Named("Bad_Name"));
  ASSERT_FALSE(upper.ok());
  EXPECT_EQ(upper.error().code, 422);
  auto label = store.Create(ConfigMaps(), "default",
                            Named("c", {{"metadata", {{"labels", {{"a", "not valid"}}}}}}));
  ASSERT_FALSE(label.ok());
  EXPECT_EQ(label.error().code, 422);
  auto with_rv =
      store.Create(ConfigMaps(), "default", Named("c", {{"metadata", {{"resourceVersion", "5"}}}}));
  ASSERT_FALSE(with_rv.ok());
  EXPECT_EQ(with_rv.error().code, 500);
  EXPECT_EQ(with_rv.error().message, "resourceVersion should not be set on objects to be created");
  // RBAC names are path segments.
  ResourceInfo roles;
  roles.group = "rbac.authorization.k8s.io";
  roles.version = "v1";
  roles.kind = "ClusterRole";
  roles.plural = "clusterroles";
  roles.list_kind = "ClusterRoleList";
  roles.namespaced = false;
  EXPECT_TRUE(store.Create(roles, "", Named("system:gpuop:operator")).ok());
}

TEST(StoreTest, NamespaceMustExist) {
  Store store(ManualGc());
  auto r = store.Create(ConfigMaps(), "nope", Named("c"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 404);
  EXPECT_EQ(r.error().message, "namespaces \"nope\" not found");
  EXPECT_EQ(r.error().ToStatusJson()["details"]["kind"], "namespaces");
  auto mismatch = store.Create(ConfigMaps(), "default",
                               Named("c", {{"metadata", {{"namespace", "kube-system"}}}}));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error().code, 400);
  ASSERT_TRUE(store.Create(NamespaceResource(), "", Named("gpu-operator")).ok());
  auto ok = store.Create(ConfigMaps(), "gpu-operator", Named("c"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((**ok)["metadata"]["namespace"], "gpu-operator");
}

TEST(StoreTest, ResourceVersionIsOneGlobalCounter) {
  Store store(ManualGc());
  uint64_t last = store.CurrentResourceVersion();
  for (int i = 0; i < 5; ++i) {
    auto a = store.Create(Nodes(), "", Named("n" + std::to_string(i)));
    auto b = store.Create(ConfigMaps(), "default", Named("c" + std::to_string(i)));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(std::stoull(Rv(*a)), last + 1);
    EXPECT_EQ(std::stoull(Rv(*b)), last + 2);
    last += 2;
  }
  EXPECT_EQ(store.CurrentResourceVersion(), last);
  auto list = store.List(Nodes(), "");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->resource_version, std::to_string(last));
}

TEST(StoreTest, ListSortedScopedAndSelected) {
  Store store(ManualGc());
  ASSERT_TRUE(store.Create(NamespaceResource(), "", Named("a")).ok());
  ASSERT_TRUE(store.Create(NamespaceResource(), "", Named("b")).ok());
  for (const char* ns : {"b", "a"}) {
    for (const char* name : {"p2", "p1", "p3"}) {
      json pod = Named(name, {{"metadata", {{"labels", {{"app", name}}}}},
                              {"spec", {{"nodeName", std::string(name) == "p1" ? "n1" : "n2"}}}});
      ASSERT_TRUE(store.Create(Pods(), ns, pod).ok());
    }
  }
  auto all = store.List(Pods(), "");
  ASSERT_TRUE(all.ok());
  std::vector<std::string> keys;
  for (const auto& o : all->items) {
    keys.push_back((*o)["metadata"]["namespace"].get<std::string>() + "/" +
                   (*o)["metadata"]["name"].get<std::string>());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a/p1", "a/p2", "a/p3", "b/p1", "b/p2", "b/p3"}));
  auto in_a = store.List(Pods(), "a");
  ASSERT_TRUE(in_a.ok());
  EXPECT_EQ(in_a->items.size(), 3u);

  ListOptions opts;
  opts.label_selector = "app in (p1,p3)";
  auto sel = store.List(Pods(), "b", opts);
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel->items.size(), 2u);

  opts = {};
  opts.field_selector = "spec.nodeName=n1";
  auto fs = store.List(Pods(), "", opts);
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(fs->items.size(), 2u);
  opts.field_selector = "metadata.name=p2,metadata.namespace=a";
  fs = store.List(Pods(), "", opts);
  ASSERT_TRUE(fs.ok());
  ASSERT_EQ(fs->items.size(), 1u);
  EXPECT_EQ((*fs->items[0])["metadata"]["namespace"], "a");
  opts.field_selector = "status.phase!=Running";
  fs = store.List(Pods(), "", opts);
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(fs->items.size(), 6u);  // all Pending

  opts.field_selector = "spec.bogus=x";
  auto bad = store.List(Pods(), "", opts);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 400);
  EXPECT_EQ(bad.error().message, "field label not supported: spec.bogus");
  opts = {};
  opts.label_selector = "a in b";
  bad = store.List(Pods(), "", opts);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 400);

  json list_json = all->ToJson(Pods());
  EXPECT_EQ(list_json["kind"], "PodList");
  EXPECT_EQ(list_json["apiVersion"], "v1");
  EXPECT_EQ(list_json["metadata"]["resourceVersion"], all->resource_version);
  EXPECT_EQ(list_json["items"].size(), 6u);
  // An unknown resource lists empty.
  auto empty = store.List(DaemonSets(), "");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->items.empty());
}

TEST(StoreTest, Pagination) {
  Store store(ManualGc());
  for (int i = 0; i < 25; ++i) {
    char name[16];
    std::snprintf(name, sizeof(name), "n%02d", i);
    json node = Named(name, {{"metadata", {{"labels", {{"even", i % 2 == 0 ? "y" : "n"}}}}}});
    ASSERT_TRUE(store.Create(Nodes(), "", node).ok());
  }
  ListOptions opts;
  opts.limit = 10;
  std::vector<std::string> seen;
  std::string first_rv;
  std::vector<int64_t> remaining;
  int pages = 0;
  while (true) {
    auto page = store.List(Nodes(), "", opts);
    ASSERT_TRUE(page.ok()) << page.error().ToString();
    ++pages;
    if (first_rv.empty()) first_rv = page->resource_version;
    EXPECT_EQ(page->resource_version, first_rv);  // one snapshot RV for all pages
    for (const auto& o : page->items) seen.push_back((*o)["metadata"]["name"]);
    if (page->remaining_item_count) remaining.push_back(*page->remaining_item_count);
    if (page->continue_token.empty()) break;
    // Writes between pages do not disturb the walk.
    ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("c" + std::to_string(pages))).ok());
    opts.continue_token = page->continue_token;
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 25u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(remaining, (std::vector<int64_t>{15, 5}));

  // Same token, same page (stable).
  opts = {};
  opts.limit = 10;
  auto p1 = store.List(Nodes(), "", opts);
  ASSERT_TRUE(p1.ok());
  opts.continue_token = p1->continue_token;
  auto a = store.List(Nodes(), "", opts);
  auto b = store.List(Nodes(), "", opts);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->items.size(), b->items.size());
  EXPECT_EQ((*a->items[0])["metadata"]["name"], "n10");

  // Pagination with a selector: exact pages, no remaining count.
  opts = {};
  opts.limit = 5;
  opts.label_selector = "even=y";
  auto s1 = store.List(Nodes(), "", opts);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->items.size(), 5u);
  EXPECT_FALSE(s1->remaining_item_count.has_value());
  opts.continue_token = s1->continue_token;
  auto s2 = store.List(Nodes(), "", opts);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->items.size(), 5u);
  opts.continue_token = s2->continue_token;
  auto s3 = store.List(Nodes(), "", opts);
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->items.size(), 3u);  // 13 even numbers in 0..24
  EXPECT_TRUE(s3->continue_token.empty());

  // A garbage token is a 400; a compacted one a 410 Expired.
  opts = {};
  opts.continue_token = "not-a-token!";
  auto bad = store.List(Nodes(), "", opts);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 400);
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("later")).ok());
  store.ForceCompaction(store.CurrentResourceVersion());
  opts.continue_token = p1->continue_token;
  auto expired = store.List(Nodes(), "", opts);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.error().code, 410);
  EXPECT_EQ(expired.error().reason, "Expired");
}

TEST(StoreTest, UpdateOptimisticConcurrency) {
  Store store(ManualGc());
  auto created = store.Create(Nodes(), "", Named("n1", {{"spec", {{"unschedulable", false}}}}));
  ASSERT_TRUE(created.ok());
  json obj = **created;
  obj["metadata"]["labels"]["x"] = "1";
  auto updated = store.Update(Nodes(), "", "n1", obj);
  ASSERT_TRUE(updated.ok()) << updated.error().ToString();
  EXPECT_GT(std::stoull(Rv(*updated)), std::stoull(Rv(*created)));
  EXPECT_EQ((**updated)["metadata"]["uid"], (**created)["metadata"]["uid"]);

  // Same (now stale) resourceVersion again: 409 with the real message.
  obj["metadata"]["labels"]["x"] = "2";
  auto stale = store.Update(Nodes(), "", "n1", obj);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, 409);
  EXPECT_EQ(stale.error().reason, "Conflict");
  EXPECT_EQ(stale.error().message,
            "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please "
            "apply your changes to the latest version and try again");

  // No resourceVersion: unconditional for built-ins.
  obj["metadata"].erase("resourceVersion");
  auto uncond = store.Update(Nodes(), "", "n1", obj);
  ASSERT_TRUE(uncond.ok()) << uncond.error().ToString();
  EXPECT_EQ((**uncond)["metadata"]["labels"]["x"], "2");

  // ...but not for custom resources.
  ASSERT_TRUE(store.Create(ClusterPolicies(), "", Named("cp", {{"spec", {{"a", 1}}}})).ok());
  auto cr = store.Update(ClusterPolicies(), "", "cp", Named("cp", {{"spec", {{"a", 2}}}}));
  ASSERT_FALSE(cr.ok());
  EXPECT_EQ(cr.error().code, 422);

  // Immutable and system fields.
  json bad_uid = **uncond;
  bad_uid["metadata"]["uid"] = "00000000-0000-4000-8000-000000000000";
  auto immutable = store.Update(Nodes(), "", "n1", bad_uid);
  ASSERT_FALSE(immutable.ok());
  EXPECT_EQ(immutable.error().code, 422);
  json ts = **uncond;
  ts["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z";
  ts["metadata"]["labels"]["y"] = "1";
  auto kept = store.Update(Nodes(), "", "n1", ts);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ((**kept)["metadata"]["creationTimestamp"],
            (**created)["metadata"]["creationTimestamp"]);
  json renamed = **kept;
  renamed["metadata"]["name"] = "other";
  auto rn = store.Update(Nodes(), "", "n1", renamed);
  ASSERT_FALSE(rn.ok());
  EXPECT_EQ(rn.error().code, 400);
  auto missing = store.Update(Nodes(), "", "zz", Named("zz"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, 404);
}

TEST(StoreTest, NoOpUpdateDoesNotWrite) {
  Store store(ManualGc());
  auto created = store.Create(ConfigMaps(), "default", Named("c", {{"data", {{"k", "v"}}}}));
  ASSERT_TRUE(created.ok());
  const uint64_t rv = store.CurrentResourceVersion();
  auto same = store.Update(ConfigMaps(), "default", "c", **created);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(Rv(*same), Rv(*created));
  auto patched = store.Patch(ConfigMaps(), "default", "c", json{{"data", {{"k", "v"}}}},
                             PatchOptions{PatchType::kMerge});
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ(store.CurrentResourceVersion(), rv);
}

TEST(StoreTest, StatusSubresourceAndGeneration) {
  Store store(ManualGc());
  json ds = Named("gpu-operator",
                  {{"spec", {{"template", {{"x", 1}}}}}, {"status", {{"numberReady", 5}}}});
  auto created = store.Create(DaemonSets(), "default", ds);
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  EXPECT_EQ((**created)["metadata"]["generation"], 1);
  EXPECT_EQ((**created)["status"], json::object());  // reset on create

  // Status through the main resource is ignored; metadata changes keep generation.
  json obj = **created;
  obj["status"] = {{"numberReady", 3}};
  obj["metadata"]["labels"]["a"] = "b";
  auto u1 = store.Update(DaemonSets(), "default", "gpu-operator", obj);
  ASSERT_TRUE(u1.ok()) << u1.error().ToString();
  EXPECT_EQ((**u1)["status"], json::object());
  EXPECT_EQ((**u1)["metadata"]["generation"], 1);
  EXPECT_EQ((**u1)["metadata"]["labels"]["a"], "b");

  // A spec change bumps generation.
  obj = **u1;
  obj["spec"]["template"]["x"] = 2;
  auto u2 = store.Update(DaemonSets(), "default", "gpu-operator", obj);
  ASSERT_TRUE(u2.ok());
  EXPECT_EQ((**u2)["metadata"]["generation"], 2);

  // The status subresource changes only status, bumps RV, not generation.
  obj = **u2;
  obj["status"] = {{"numberReady", 7}, {"observedGeneration", 2}};
  obj["spec"]["template"]["x"] = 99;
  obj["metadata"]["labels"]["ignored"] = "yes";
  auto s = store.Update(DaemonSets(), "default", "gpu-operator", obj, {"status"});
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ((**s)["status"]["numberReady"], 7);
  EXPECT_EQ((**s)["spec"]["template"]["x"], 2);
  EXPECT_FALSE((**s)["metadata"]["labels"].contains("ignored"));
  EXPECT_EQ((**s)["metadata"]["generation"], 2);
  EXPECT_GT(std::stoull(Rv(*s)), std::stoull(Rv(*u2)));

  // Status patch.
  PatchOptions po{PatchType::kMerge};
  po.subresource = "status";
  auto sp = store.Patch(DaemonSets(), "default", "gpu-operator",
                        json{{"status", {{"numberReady", 8}}}}, po);
  ASSERT_TRUE(sp.ok());
  EXPECT_EQ((**sp)["status"]["numberReady"], 8);
  EXPECT_EQ((**sp)["status"]["observedGeneration"], 2);

  // Nodes have no generation; CRs track it and drop status on create.
  auto cr = store.Create(ClusterPolicies(), "",
                         Named("cp", {{"spec", {{"a", 1}}}, {"status", {{"state", "ready"}}}}));
  ASSERT_TRUE(cr.ok());
  EXPECT_EQ((**cr)["metadata"]["generation"], 1);
  EXPECT_FALSE((**cr).contains("status"));
  auto crp = store.Patch(ClusterPolicies(), "", "cp", json{{"spec", {{"a", 2}}}},
                         PatchOptions{PatchType::kMerge});
  ASSERT_TRUE(crp.ok());
  EXPECT_EQ((**crp)["metadata"]["generation"], 2);
  auto crl =
      store.Patch(ClusterPolicies(), "", "cp", json{{"metadata", {{"labels", {{"x", "y"}}}}}},
                  PatchOptions{PatchType::kMerge});
  ASSERT_TRUE(crl.ok());
  EXPECT_EQ((**crl)["metadata"]["generation"], 2);

  // A resource without a status subresource has no /status.
  auto no = store.Update(ConfigMaps(), "default", "x", Named("x"), {"status"});
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().code, 404);
}

TEST(StoreTest, PodCreateSetsPendingStatus) {
  Store store(ManualGc());
  json pod = Named("p", {{"spec", {{"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}},
                         {"status", {{"phase", "Running"}}}});
  auto r = store.Create(Pods(), "default", pod);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((**r)["status"]["phase"], "Pending");
  EXPECT_EQ((**r)["status"]["qosClass"], "BestEffort");
  EXPECT_EQ((**r)["metadata"]["generation"], 1);
}

TEST(StoreTest, PatchTypes) {
  Store store(ManualGc());
  ASSERT_TRUE(
      store.Create(Nodes(), "", Named("n1", {{"metadata", {{"labels", {{"a", "1"}, {"b", "2"}}}}}}))
          .ok());
  auto m =
      store.Patch(Nodes(), "", "n1", json{{"metadata", {{"labels", {{"a", nullptr}, {"c", "3"}}}}}},
                  PatchOptions{PatchType::kMerge});
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ((**m)["metadata"]["labels"], json({{"b", "2"}, {"c", "3"}}));

  auto j = store.Patch(
      Nodes(), "", "n1",
      json::parse(R"([{"op":"add","path":"/metadata/labels/nvidia.com~1gpu.present","value":"true"},
                      {"op":"remove","path":"/metadata/labels/b"}])"),
      PatchOptions{PatchType::kJson});
  ASSERT_TRUE(j.ok()) << j.error().ToString();
  EXPECT_EQ((**j)["metadata"]["labels"], json({{"c", "3"}, {"nvidia.com/gpu.present", "true"}}));

  auto bad = store.Patch(Nodes(), "", "n1",
                         json::parse(R"([{"op":"remove","path":"/metadata/labels/zzz"}])"),
                         PatchOptions{PatchType::kJson});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 422);

  // resourceVersion in the patch body is a precondition.
  auto stale = store.Patch(Nodes(), "", "n1",
                           json{{"metadata", {{"resourceVersion", "1"}, {"labels", {{"d", "4"}}}}}},
                           PatchOptions{PatchType::kMerge});
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, 409);
  auto fresh =
      store.Patch(Nodes(), "", "n1",
                  json{{"metadata", {{"resourceVersion", Rv(*j)}, {"labels", {{"d", "4"}}}}}},
                  PatchOptions{PatchType::kMerge});
  ASSERT_TRUE(fresh.ok()) << fresh.error().ToString();

  // Strategic merge and apply go through hooks; without them: 415.
  auto sm =
      store.Patch(Nodes(), "", "n1", json::object(), PatchOptions{PatchType::kStrategicMerge});
  ASSERT_FALSE(sm.ok());
  EXPECT_EQ(sm.error().code, 415);
  auto missing = store.Patch(Nodes(), "", "zz", json::object(), PatchOptions{PatchType::kMerge});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, 404);
}

TEST(StoreTest, PatchHooksAndApplyCreates) {
  Store store(ManualGc());
  int smp_calls = 0;
  StoreHooks hooks;
  hooks.strategic_merge = [&](const json& cur, const json& patch, const ResourceInfo&,
                              const PatchOptions&) -> ApiResult<json> {
    ++smp_calls;
    return MergePatch(cur, patch);
  };
  hooks.apply = [&](const json& cur, const json& patch, const ResourceInfo&,
                    const PatchOptions& o) -> ApiResult<json> {
    if (o.field_manager.empty()) return BadRequestError("fieldManager is required");
    return cur.is_null() ? patch : MergePatch(cur, patch);
  };
  hooks.admit = [](const ResourceInfo& r, json& obj, const json*) -> ApiStatus {
    if (obj.contains("data") && obj["data"].contains("bad")) {
      return InvalidError(r.group, r.kind, obj["metadata"]["name"].get<std::string>(),
                          {FieldError::Invalid("data.bad", "x", "not allowed")});
    }
    return {};
  };
  store.SetHooks(hooks);
  PatchOptions apply{PatchType::kApply};
  apply.field_manager = "kubectl";
  auto created = store.Patch(ConfigMaps(), "default", "cfg",
                             json{{"apiVersion", "v1"},
                                  {"kind", "ConfigMap"},
                                  {"metadata", {{"name", "cfg"}}},
                                  {"data", {{"a", "1"}}}},
                             apply);
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  EXPECT_EQ((**created)["data"]["a"], "1");
  EXPECT_EQ((**created)["metadata"]["namespace"], "default");
  auto again = store.Patch(ConfigMaps(), "default", "cfg", json{{"data", {{"b", "2"}}}}, apply);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((**again)["data"], json({{"a", "1"}, {"b", "2"}}));
  auto smp = store.Patch(ConfigMaps(), "default", "cfg", json{{"data", {{"c", "3"}}}},
                         PatchOptions{PatchType::kStrategicMerge});
  ASSERT_TRUE(smp.ok());
  EXPECT_EQ(smp_calls, 1);
  auto rejected = store.Patch(ConfigMaps(), "default", "cfg", json{{"data", {{"bad", "1"}}}},
                              PatchOptions{PatchType::kMerge});
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.error().code, 422);
  auto create_rejected =
      store.Create(ConfigMaps(), "default", Named("x", {{"data", {{"bad", "1"}}}}));
  ASSERT_FALSE(create_rejected.ok());
  EXPECT_EQ(create_rejected.error().code, 422);
}

TEST(StoreTest, DryRunChangesNothing) {
  Store store(ManualGc());
  const uint64_t rv = store.CurrentResourceVersion();
  CreateOptions co;
  co.dry_run = true;
  auto c = store.Create(ConfigMaps(), "default", Named("c"), co);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(store.Get(ConfigMaps(), "default", "c").ok());
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("d")).ok());
  PatchOptions po{PatchType::kMerge};
  po.dry_run = true;
  auto p = store.Patch(ConfigMaps(), "default", "d", json{{"data", {{"a", "b"}}}}, po);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((**p)["data"]["a"], "b");
  DeleteOptions dopt;
  dopt.dry_run = true;
  ASSERT_TRUE(store.Delete(ConfigMaps(), "default", "d", dopt).ok());
  auto d = store.Get(ConfigMaps(), "default", "d");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE((**d).contains("data"));
  EXPECT_EQ(store.CurrentResourceVersion(), rv + 1);
}

TEST(StoreTest, DeletePreconditions) {
  Store store(ManualGc());
  auto c = store.Create(ConfigMaps(), "default", Named("c"));
  ASSERT_TRUE(c.ok());
  DeleteOptions opts;
  opts.preconditions.uid = "wrong";
  auto r = store.Delete(ConfigMaps(), "default", "c", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 409);
  EXPECT_EQ(r.error().message,
            "Operation cannot be fulfilled on configmaps \"c\": Precondition failed: UID in "
            "precondition: wrong, UID in object meta: " +
                (**c)["metadata"]["uid"].get<std::string>());
  opts = {};
  opts.preconditions.resource_version = "1";
  r = store.Delete(ConfigMaps(), "default", "c", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, 409);
  opts.preconditions.resource_version = Rv(*c);
  opts.preconditions.uid = (**c)["metadata"]["uid"].get<std::string>();
  r = store.Delete(ConfigMaps(), "default", "c", opts);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_TRUE(r->deleted);
  EXPECT_GT(std::stoull(Rv(r->object)), std::stoull(Rv(*c)));
  auto again = store.Delete(ConfigMaps(), "default", "c");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, 404);
}

TEST(StoreTest, FinalizersKeepObjectUntilRemoved) {
  Store store(ManualGc());
  auto c = store.Create(ConfigMaps(), "default",
                        Named("c", {{"metadata", {{"finalizers", {"example.com/hold"}}}}}));
  ASSERT_TRUE(c.ok());
  auto d = store.Delete(ConfigMaps(), "default", "c");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->deleted);
  EXPECT_TRUE((*d->object)["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ((*d->object)["metadata"]["deletionGracePeriodSeconds"], 0);
  // A second delete changes nothing.
  auto d2 = store.Delete(ConfigMaps(), "default", "c");
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(Rv(d2->object), Rv(d->object));
  // No new finalizers while being deleted.
  json obj = *d->object;
  obj["metadata"]["finalizers"].push_back("example.com/another");
  auto add = store.Update(ConfigMaps(), "default", "c", obj);
  ASSERT_FALSE(add.ok());
  EXPECT_EQ(add.error().code, 422);
  // deletionTimestamp cannot be removed by an update.
  obj = *d->object;
  obj["metadata"].erase("deletionTimestamp");
  obj["data"] = {{"k", "v"}};
  auto keep = store.Update(ConfigMaps(), "default", "c", obj);
  ASSERT_TRUE(keep.ok());
  EXPECT_TRUE((**keep)["metadata"].contains("deletionTimestamp"));
  // Removing the last finalizer deletes the object.
  auto fin =
      store.Patch(ConfigMaps(), "default", "c", json{{"metadata", {{"finalizers", nullptr}}}},
                  PatchOptions{PatchType::kMerge});
  ASSERT_TRUE(fin.ok()) << fin.error().ToString();
  EXPECT_FALSE(store.Get(ConfigMaps(), "default", "c").ok());
}

TEST(StoreTest, GracefulPodDeletion) {
  Store store(ManualGc());
  ASSERT_TRUE(store.Create(Pods(), "default", Named("unbound")).ok());
  auto d = store.Delete(Pods(), "default", "unbound");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->deleted);  // not on a node: immediate

  ASSERT_TRUE(
      store
          .Create(Pods(), "default",
                  Named("bound",
                        {{"spec", {{"nodeName", "n1"}, {"terminationGracePeriodSeconds", 10}}}}))
          .ok());
  d = store.Delete(Pods(), "default", "bound");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->deleted);
  EXPECT_EQ((*d->object)["metadata"]["deletionGracePeriodSeconds"], 10);
  store.CollectGarbage();
  EXPECT_TRUE(store.Get(Pods(), "default", "bound").ok());  // waits for the kubelet
  DeleteOptions now;
  now.grace_period_seconds = 0;
  d = store.Delete(Pods(), "default", "bound", now);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->deleted);
}

// --- Garbage collection ---

json Owned(std::string name, const Object& owner, bool block = false) {
  json ref = {{"apiVersion", (*owner)["apiVersion"]},
              {"kind", (*owner)["kind"]},
              {"name", (*owner)["metadata"]["name"]},
              {"uid", (*owner)["metadata"]["uid"]}};
  if (block) ref["blockOwnerDeletion"] = true;
  return Named(std::move(name), {{"metadata", {{"ownerReferences", json::array({ref})}}}});
}

TEST(GarbageCollectionTest, BackgroundCascade) {
  Store store(ManualGc());
  auto ds = store.Create(DaemonSets(), "default", Named("ds"));
  ASSERT_TRUE(ds.ok());
  auto pod = store.Create(Pods(), "default", Owned("ds-pod", *ds));
  ASSERT_TRUE(pod.ok());
  auto cm = store.Create(ConfigMaps(), "default", Owned("pod-cm", *pod));  // grandchild
  ASSERT_TRUE(cm.ok());
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("unrelated")).ok());
  auto d = store.Delete(DaemonSets(), "default", "ds");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->deleted);  // the owner goes first
  EXPECT_TRUE(store.Get(Pods(), "default", "ds-pod").ok());
  store.CollectGarbage();
  EXPECT_FALSE(store.Get(Pods(), "default", "ds-pod").ok());
  EXPECT_FALSE(store.Get(ConfigMaps(), "default", "pod-cm").ok());
  EXPECT_TRUE(store.Get(ConfigMaps(), "default", "unrelated").ok());
}

TEST(GarbageCollectionTest, DanglingReferenceRemovedWhenAnotherOwnerLives) {
  Store store(ManualGc());
  auto a = store.Create(ConfigMaps(), "default", Named("a"));
  auto b = store.Create(ConfigMaps(), "default", Named("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  json dep = Owned("dep", *a);
  dep["metadata"]["ownerReferences"].push_back({{"apiVersion", "v1"},
                                                {"kind", "ConfigMap"},
                                                {"name", "b"},
                                                {"uid", (**b)["metadata"]["uid"]}});
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", dep).ok());
  ASSERT_TRUE(store.Delete(ConfigMaps(), "default", "a").ok());
  store.CollectGarbage();
  auto got = store.Get(ConfigMaps(), "default", "dep");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ((**got)["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ((**got)["metadata"]["ownerReferences"][0]["name"], "b");
}

TEST(GarbageCollectionTest, ForegroundWaitsForBlockingDependents) {
  Store store(ManualGc());
  auto ds = store.Create(DaemonSets(), "default", Named("ds"));
  ASSERT_TRUE(ds.ok());
  // The dependent has its own finalizer, so it lingers while being deleted.
  json pod = Owned("p", *ds, /*block=*/true);
  pod["metadata"]["finalizers"] = {"example.com/hold"};
  ASSERT_TRUE(store.Create(Pods(), "default", pod).ok());
  DeleteOptions fg;
  fg.propagation = PropagationPolicy::kForeground;
  auto d = store.Delete(DaemonSets(), "default", "ds", fg);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->deleted);
  EXPECT_EQ((*d->object)["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  EXPECT_TRUE((*d->object)["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ((*d->object)["metadata"]["generation"], 2);  // bumped with the deletionTimestamp
  store.CollectGarbage();
  auto p = store.Get(Pods(), "default", "p");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((**p)["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(store.Get(DaemonSets(), "default", "ds").ok());  // still waiting
  // The dependent's finalizer goes; then the owner goes.
  ASSERT_TRUE(store
                  .Patch(Pods(), "default", "p", json{{"metadata", {{"finalizers", nullptr}}}},
                         PatchOptions{PatchType::kMerge})
                  .ok());
  store.CollectGarbage();
  EXPECT_FALSE(store.Get(Pods(), "default", "p").ok());
  EXPECT_FALSE(store.Get(DaemonSets(), "default", "ds").ok());
}

TEST(GarbageCollectionTest, OrphanKeepsDependents) {
  Store store(ManualGc());
  auto ds = store.Create(DaemonSets(), "default", Named("ds"));
  ASSERT_TRUE(ds.ok());
  ASSERT_TRUE(store.Create(Pods(), "default", Owned("p", *ds)).ok());
  DeleteOptions orphan;
  orphan.propagation = PropagationPolicy::kOrphan;
  auto d = store.Delete(DaemonSets(), "default", "ds", orphan);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->deleted);
  EXPECT_EQ((*d->object)["metadata"]["finalizers"], json::array({"orphan"}));
  store.CollectGarbage();
  EXPECT_FALSE(store.Get(DaemonSets(), "default", "ds").ok());
  auto p = store.Get(Pods(), "default", "p");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE((**p)["metadata"].contains("ownerReferences"));
}

TEST(GarbageCollectionTest, BackgroundThreadCollects) {
  StoreOptions opts;
  opts.seed = 1;  // gc_thread on
  Store store(opts);
  auto owner = store.Create(ConfigMaps(), "default", Named("owner"));
  ASSERT_TRUE(owner.ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        store.Create(ConfigMaps(), "default", Owned("dep" + std::to_string(i), *owner)).ok());
  }
  ASSERT_TRUE(store.Delete(ConfigMaps(), "default", "owner").ok());
  EXPECT_TRUE(WaitFor([&] {
    auto l = store.List(ConfigMaps(), "default");
    return l.ok() && l->items.empty();
  }));
}

TEST(GarbageCollectionTest, DanglingOwnerOnCreateIsCollected) {
  StoreOptions opts;
  opts.seed = 2;  // gc_thread on
  Store store(opts);
  json ref = {{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"name", "ghost"},
              {"uid", "00000000-0000-4000-8000-000000000001"}};
  json dep = Named("dep", {{"metadata", {{"ownerReferences", json::array({ref})}}}});
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", dep).ok());
  EXPECT_TRUE(WaitFor([&] { return !store.Get(ConfigMaps(), "default", "dep").ok(); }));
}

TEST(NamespaceTest, DeletionRemovesContentThenNamespace) {
  Store store(ManualGc());
  ASSERT_TRUE(store.Create(NamespaceResource(), "", Named("gone")).ok());
  ASSERT_TRUE(store.Create(ConfigMaps(), "gone", Named("a")).ok());
  ASSERT_TRUE(store
                  .Create(ConfigMaps(), "gone",
                          Named("held", {{"metadata", {{"finalizers", {"example.com/x"}}}}}))
                  .ok());
  ASSERT_TRUE(store.Create(ConfigMaps(), "default", Named("a")).ok());
  auto d = store.Delete(NamespaceResource(), "", "gone");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->deleted);
  EXPECT_EQ((*d->object)["status"]["phase"], "Terminating");
  // No new content in a terminating namespace.
  auto refused = store.Create(ConfigMaps(), "gone", Named("new"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, 403);
  EXPECT_EQ(refused.error().message,
            "configmaps \"new\" is forbidden: unable to create new content in namespace gone "
            "because it is being terminated");
  store.CollectGarbage();
  EXPECT_FALSE(store.Get(ConfigMaps(), "gone", "a").ok());
  EXPECT_TRUE(store.Get(NamespaceResource(), "", "gone").ok());  // "held" still there
  ASSERT_TRUE(store
                  .Patch(ConfigMaps(), "gone", "held",
                         json{{"metadata", {{"finalizers", nullptr}}}},
                         PatchOptions{PatchType::kMerge})
                  .ok());
  store.CollectGarbage();
  EXPECT_FALSE(store.Get(NamespaceResource(), "", "gone").ok());
  EXPECT_TRUE(store.Get(ConfigMaps(), "default", "a").ok());
  auto protected_ns = store.Delete(NamespaceResource(), "", "default");
  ASSERT_FALSE(protected_ns.ok());
  EXPECT_EQ(protected_ns.error().code, 403);
}

TEST(StoreTest, DeleteCollection) {
  Store store(ManualGc());
  for (int i = 0; i < 4; ++i) {
    json cm = Named("c" + std::to_string(i),
                    {{"metadata", {{"labels", {{"keep", i < 2 ? "no" : "yes"}}}}}});
    ASSERT_TRUE(store.Create(ConfigMaps(), "default", cm).ok());
  }
  ListOptions sel;
  sel.label_selector = "keep=no";
  auto r = store.DeleteCollection(ConfigMaps(), "default", sel, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->items.size(), 2u);
  auto left = store.List(ConfigMaps(), "default");
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->items.size(), 2u);
}

TEST(StoreTest, Counters) {
  Store store(ManualGc());
  ASSERT_TRUE(store.Create(Nodes(), "", Named("n1")).ok());
  ASSERT_TRUE(store.Get(Nodes(), "", "n1").ok());
  ASSERT_TRUE(store.Get(Nodes(), "", "n1").ok());
  ASSERT_TRUE(store.List(Nodes(), "").ok());
  ASSERT_TRUE(store.Create(DaemonSets(), "default", Named("d")).ok());
  StoreCounters c = store.Counters();
  EXPECT_EQ(c.requests["create"]["nodes"], 1u);
  EXPECT_EQ(c.requests["get"]["nodes"], 2u);
  EXPECT_EQ(c.requests["list"]["nodes"], 1u);
  EXPECT_EQ(c.requests["create"]["daemonsets.apps"], 1u);
  EXPECT_EQ(c.objects["nodes"], 1u);
  EXPECT_EQ(c.objects["namespaces"], 4u);
  EXPECT_EQ(c.object_count, 6u);
  EXPECT_GT(c.approx_bytes, 100u);
  EXPECT_EQ(c.resource_version, store.CurrentResourceVersion());
}

}  // namespace
}  // namespace gpuop::simkube
