// The Kubernetes REST client (src/kube/client.h) against the in-process API
// emulator over TLS with a bearer token: every verb, pagination and
// selectors, delete options, server-side apply, strategic merge, eviction,
// authentication and TLS failures, reconnection after a server restart, the
// retry policy (checked in the emulator's audit counters), optimistic
// concurrency, and watches (order, bookmarks, stop, dropped streams).
#include "kube/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/files.h"
#include "kube/object.h"
#include "sim/kube/server.h"
#include "sim/kube/tls.h"
#include "tests/testing/wait.h"

namespace gpuop::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;
namespace res = resources;

constexpr const char* kToken = "client-test-token";
// Conditions that normally hold within milliseconds get this long (loaded CI).
constexpr seconds kDeadline{20};

using gpuop::testing::WaitFor;

// The emulator's OpenAPI documents, cut down: loading all of them takes
// seconds per emulator under ASan. With none (one empty document) it starts in
// milliseconds and still serves every built-in resource, only without schema
// checks; with the core group's it knows Pod's strategic-merge keys.
enum class Schemas { kNone, kCore };

class QuickOpenApiDir {
 public:
  explicit QuickOpenApiDir(Schemas schemas) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kube-openapi-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
    if (schemas == Schemas::kCore) {
      std::filesystem::create_symlink(GPUOP_SOURCE_DIR "/api/openapi/1.35/api_v1.json",
                                      path_ + "/api_v1.json");
    } else {
      EXPECT_TRUE(WriteFileAtomic(path_ + "/api_v1.json",
                                  R"({"openapi":"3.0.0","paths":{},"components":{"schemas":{}}})")
                      .ok());
    }
  }
  ~QuickOpenApiDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

simkube::ServerOptions EmulatorOptions(bool tls) {
  simkube::ServerOptions o;
  o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  o.threads = 32;
  o.tls = tls;
  o.token = kToken;
  return o;
}

Json ConfigMap(const std::string& name, const Json& data = Json::object()) {
  return {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}, {"data", data}};
}

Json PodObject(const std::string& name, const std::string& node = "") {
  Json pod{{"metadata", {{"name", name}}},
           {"spec",
            {{"containers",
              {{{"name", "main"}, {"image", "busybox:1"}},
               {{"name", "sidecar"}, {"image", "busybox:1"}}}}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { StartServer(Schemas::kNone); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete openapi_;
    openapi_ = nullptr;
  }
  static void StartServer(Schemas schemas) {
    openapi_ = new QuickOpenApiDir(schemas);
    simkube::ServerOptions o = EmulatorOptions(/*tls=*/true);
    o.openapi_dir = openapi_->path();
    auto s = simkube::ApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value().release();
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    server_->faults().Clear();
    client_ = NewClient(Config());
    ASSERT_NE(client_, nullptr);
    // A namespace of the test's own, named after it.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ns_.clear();
    for (char c : name) {
      if (std::isalnum(static_cast<unsigned char>(c))) {
        ns_ += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
    }
    ns_ = ns_.substr(0, 50);
    auto created = client_->Create(res::kNamespaces, "", {{"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok() || IsAlreadyExists(created.status())) << created.status().ToString();
    server_->audit().ResetCounters();
  }
  void TearDown() override {
    if (server_ != nullptr) server_->faults().Clear();
  }

  static RestConfig Config() {
    RestConfig c;
    c.server = server_->url();
    c.ca_pem = server_->ca_cert_pem();
    c.token = kToken;
    c.qps = 0;  // unlimited: these tests count requests, not time
    c.source = "kubeconfig /test/config context \"emulator\"";
    c.user_agent = "gpuop-client-test";
    return c;
  }
  static RetryPolicy FastRetry(int attempts = 5) {
    return RetryPolicy{attempts, milliseconds(5), milliseconds(50)};
  }
  static std::unique_ptr<Client> NewClient(RestConfig c, RetryPolicy r = FastRetry()) {
    auto client = Client::New(std::move(c), r);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }
  static void SetFaults(const std::string& spec) {
    Status s = server_->faults().Set(spec);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Requests the emulator saw for a verb since the test started.
  static int64_t Audited(const std::string& verb) {
    Json c = server_->audit().Counters();
    return c["verbs"].value(verb, int64_t{0});
  }

  static simkube::ApiServer* server_;
  static QuickOpenApiDir* openapi_;
  std::unique_ptr<Client> client_;
  std::string ns_;
};
simkube::ApiServer* ClientTest::server_ = nullptr;
QuickOpenApiDir* ClientTest::openapi_ = nullptr;

// ---------------------------------------------------------------------------
// Resources and paths (no server needed)

TEST(ClientResourceTest, PathsForEveryScope) {
  EXPECT_EQ(res::kNodes.Path("ignored"), "/api/v1/nodes");
  EXPECT_EQ(res::kNodes.Path("", "worker-1", "status"), "/api/v1/nodes/worker-1/status");
  EXPECT_EQ(res::kPods.Path(""), "/api/v1/pods");  // every namespace
  EXPECT_EQ(res::kPods.Path("ns", "p", "eviction"), "/api/v1/namespaces/ns/pods/p/eviction");
  EXPECT_EQ(res::kPods.Path("ns", "", "status"), "/api/v1/namespaces/ns/pods");
  EXPECT_EQ(res::kDaemonSets.Path("gpu-operator", "gfd"),
            "/apis/apps/v1/namespaces/gpu-operator/daemonsets/gfd");
  EXPECT_EQ(res::kClusterPolicies.Path("x", "cluster-policy"),
            "/apis/nvidia.com/v1/clusterpolicies/cluster-policy");
  EXPECT_EQ(res::kNodeFeatures.Path("nfd"),
            "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/nfd/nodefeatures");
  EXPECT_EQ(res::kLeases.ApiVersion(), "coordination.k8s.io/v1");
  EXPECT_EQ(res::kEvents.ApiVersion(), "v1");
  EXPECT_EQ(res::kNodes.QualifiedName(), "nodes");
  EXPECT_EQ(res::kClusterRoleBindings.QualifiedName(),
            "clusterrolebindings.rbac.authorization.k8s.io");
  EXPECT_EQ(res::kCustomResourceDefinitions.Path(""),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
}

TEST(ClientResourceTest, WellKnownScopesAndKinds) {
  struct Want {
    const Resource* r;
    const char* kind;
    bool namespaced;
  };
  for (const Want& w :
       std::vector<Want>{{&res::kNodes, "Node", false},
                         {&res::kPods, "Pod", true},
                         {&res::kNamespaces, "Namespace", false},
                         {&res::kConfigMaps, "ConfigMap", true},
                         {&res::kSecrets, "Secret", true},
                         {&res::kServices, "Service", true},
                         {&res::kServiceAccounts, "ServiceAccount", true},
                         {&res::kEvents, "Event", true},
                         {&res::kDaemonSets, "DaemonSet", true},
                         {&res::kDeployments, "Deployment", true},
                         {&res::kLeases, "Lease", true},
                         {&res::kRoles, "Role", true},
                         {&res::kRoleBindings, "RoleBinding", true},
                         {&res::kClusterRoles, "ClusterRole", false},
                         {&res::kClusterRoleBindings, "ClusterRoleBinding", false},
                         {&res::kCustomResourceDefinitions, "CustomResourceDefinition", false},
                         {&res::kNodeFeatures, "NodeFeature", true},
                         {&res::kClusterPolicies, "ClusterPolicy", false}}) {
    EXPECT_EQ(w.r->kind, w.kind);
    EXPECT_EQ(w.r->namespaced, w.namespaced) << w.kind;
  }
}

TEST(ClientResourceTest, UrlEncodeEscapesSelectorCharacters) {
  EXPECT_EQ(UrlEncode("app=gpu,tier!=cpu"), "app%3Dgpu%2Ctier%21%3Dcpu");
  EXPECT_EQ(UrlEncode("env in (a b)"), "env%20in%20%28a%20b%29");
  EXPECT_EQ(UrlEncode("nvidia.com/gpu.present"), "nvidia.com%2Fgpu.present");
  EXPECT_EQ(UrlEncode("A-z_0.9~"), "A-z_0.9~");
  EXPECT_EQ(UrlEncode("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(UrlEncode(""), "");
}

// ---------------------------------------------------------------------------
// Verbs

TEST_F(ClientTest, CreateGetUpdateDelete) {
  auto created = client_->Create(res::kConfigMaps, ns_, ConfigMap("cm", {{"a", "1"}}));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(Namespace(*created), ns_);
  EXPECT_FALSE(Uid(*created).empty());
  EXPECT_EQ((*created)["kind"], "ConfigMap");

  auto got = client_->Get(res::kConfigMaps, ns_, "cm");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["data"]["a"], "1");
  EXPECT_EQ(ResourceVersion(*got), ResourceVersion(*created));

  Json changed = *got;
  changed["data"]["a"] = "2";
  auto updated = client_->Update(res::kConfigMaps, changed);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ((*updated)["data"]["a"], "2");
  EXPECT_NE(ResourceVersion(*updated), ResourceVersion(*got));

  ASSERT_TRUE(client_->Delete(res::kConfigMaps, ns_, "cm").ok());
  auto gone = client_->Get(res::kConfigMaps, ns_, "cm");
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(IsNotFound(gone.status()));
  EXPECT_EQ(gone.status().http_status(), 404);
  EXPECT_THAT(gone.status().message(),
              HasSubstr("get configmaps/cm in namespace " + ns_ + ": HTTP 404 Not Found: "));
  EXPECT_THAT(gone.status().message(), HasSubstr("not found"));
  // Cluster-scoped resources ignore the namespace.
  EXPECT_TRUE(client_->Get(res::kNamespaces, "ignored", ns_).ok());
}

TEST_F(ClientTest, CreateTakesTheNamespaceFromTheObject) {
  Json cm = ConfigMap("from-object");
  cm["metadata"]["namespace"] = ns_;
  auto created = client_->Create(res::kConfigMaps, "", cm);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(Namespace(*created), ns_);

  auto again = client_->Create(res::kConfigMaps, ns_, cm);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(IsAlreadyExists(again.status()));
  EXPECT_FALSE(IsConflict(again.status()));
  EXPECT_EQ(again.status().http_status(), 409);
}

TEST_F(ClientTest, NamespacedCallsWithoutANamespaceFailBeforeSending) {
  auto got = client_->Get(res::kConfigMaps, "", "x");
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("namespaced"));
  EXPECT_EQ(client_->Create(res::kConfigMaps, "", ConfigMap("x")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Update(res::kConfigMaps, ConfigMap("x")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Delete(res::kPods, "", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Audited("get") + Audited("create") + Audited("update") + Audited("delete"), 0);
}

TEST_F(ClientTest, StaleUpdateIsAConflict) {
  auto created = client_->Create(res::kConfigMaps, ns_, ConfigMap("cm", {{"n", "0"}}));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Json first = *created;
  first["data"]["n"] = "1";
  ASSERT_TRUE(client_->Update(res::kConfigMaps, first).ok());

  Json stale = *created;  // still the old resourceVersion
  stale["data"]["n"] = "stale";
  auto r = client_->Update(res::kConfigMaps, stale);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsConflict(r.status())) << r.status().ToString();
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  EXPECT_EQ(r.status().http_status(), 409);
  EXPECT_THAT(r.status().message(),
              HasSubstr("update configmaps/cm in namespace " + ns_ + ": HTTP 409 Conflict: "));
  EXPECT_THAT(r.status().message(), HasSubstr("the object has been modified"));
  EXPECT_EQ((*client_->Get(res::kConfigMaps, ns_, "cm"))["data"]["n"], "1");
  EXPECT_EQ(Audited("update"), 2);  // a conflict is an answer, not retried
}

TEST_F(ClientTest, UpdateStatusWritesOnlyTheStatus) {
  auto pod = client_->Create(res::kPods, ns_, PodObject("p"));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  Json changed = *pod;
  changed["status"]["phase"] = "Running";
  changed["metadata"]["labels"]["ignored"] = "yes";  // not part of the status
  auto updated = client_->UpdateStatus(res::kPods, changed);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(PodPhase(*updated), "Running");
  EXPECT_FALSE(Label(*updated, "ignored").has_value());
}

TEST_F(ClientTest, ListPaginationAndSelectors) {
  for (int i = 0; i < 7; ++i) {
    Json cm = ConfigMap("cm-" + std::to_string(i));
    cm["metadata"]["labels"]["tier"] = i % 2 == 0 ? "gpu" : "cpu";
    ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, cm).ok());
  }
  // Page by page.
  ListOptions o;
  o.limit = 3;
  std::vector<std::string> names;
  int pages = 0;
  std::string rv;
  do {
    auto page = client_->List(res::kConfigMaps, ns_, o);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->items.size(), 3u);
    for (const auto& item : page->items) {
      names.push_back(Name(item));
      EXPECT_EQ(item["kind"], "ConfigMap");  // filled in for list items
    }
    rv = page->resource_version;
    o.continue_token = page->continue_token;
    ++pages;
  } while (!o.continue_token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names,
            (std::vector<std::string>{"cm-0", "cm-1", "cm-2", "cm-3", "cm-4", "cm-5", "cm-6"}));
  EXPECT_FALSE(rv.empty());

  // Everything at once, following continue tokens.
  ListOptions all_opts;
  all_opts.limit = 2;
  auto all = client_->ListAll(res::kConfigMaps, ns_, all_opts);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->items.size(), 7u);
  EXPECT_TRUE(all->continue_token.empty());
  EXPECT_EQ(Audited("list"), 3 + 4);

  ListOptions gpu;
  gpu.label_selector = "tier=gpu";
  auto g = client_->ListAll(res::kConfigMaps, ns_, gpu);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->items.size(), 4u);
  ListOptions not_gpu;
  not_gpu.label_selector = "tier!=gpu,tier in (cpu)";
  EXPECT_EQ(client_->ListAll(res::kConfigMaps, ns_, not_gpu)->items.size(), 3u);
  ListOptions by_name;
  by_name.field_selector = "metadata.name=cm-5";
  auto one = client_->List(res::kConfigMaps, ns_, by_name);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->items.size(), 1u);
  EXPECT_EQ(Name(one->items[0]), "cm-5");

  // All namespaces: "" lists across them.
  ListOptions everywhere;
  everywhere.field_selector = "metadata.namespace=" + ns_;
  EXPECT_EQ(client_->ListAll(res::kConfigMaps, "", everywhere)->items.size(), 7u);

  ListOptions bad;
  bad.label_selector = "tier in (";
  auto r = client_->List(res::kConfigMaps, ns_, bad);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().http_status(), 400);
}

TEST_F(ClientTest, ListAllRestartsOnceWhenTheSnapshotExpires) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("cm-" + std::to_string(i))).ok());
  }
  // The emulator spends a count on every matching list, so the first page
  // uses one and the second page (with a continue token) gets the 410.
  SetFaults("gone,verb=list,resource=configmaps,count=2");
  ListOptions o;
  o.limit = 2;
  auto all = client_->ListAll(res::kConfigMaps, ns_, o);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->items.size(), 5u);
  EXPECT_EQ(Audited("list"), 2 + 3);  // two pages, then the three again

  // Always expired: one restart, then the 410 goes to the caller.
  SetFaults("gone,verb=list,resource=configmaps");
  server_->audit().ResetCounters();
  auto failed = client_->ListAll(res::kConfigMaps, ns_, o);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(IsGone(failed.status())) << failed.status().ToString();
  EXPECT_EQ(failed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Audited("list"), 4);
}

TEST_F(ClientTest, DeletePreconditions) {
  auto cm = client_->Create(res::kConfigMaps, ns_, ConfigMap("cm"));
  ASSERT_TRUE(cm.ok()) << cm.status().ToString();
  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "00000000-0000-0000-0000-000000000000";
  Status s = client_->Delete(res::kConfigMaps, ns_, "cm", wrong_uid);
  EXPECT_TRUE(IsConflict(s)) << s.ToString();
  EXPECT_EQ(s.http_status(), 409);
  EXPECT_THAT(s.message(), HasSubstr("delete configmaps/cm in namespace " + ns_));
  EXPECT_THAT(s.message(), HasSubstr("Precondition failed"));

  DeleteOptions wrong_version;
  wrong_version.precondition_resource_version = "1";
  EXPECT_TRUE(IsConflict(client_->Delete(res::kConfigMaps, ns_, "cm", wrong_version)));
  ASSERT_TRUE(client_->Get(res::kConfigMaps, ns_, "cm").ok());

  DeleteOptions right;
  right.precondition_uid = Uid(*cm);
  right.precondition_resource_version = ResourceVersion(*cm);
  ASSERT_TRUE(client_->Delete(res::kConfigMaps, ns_, "cm", right).ok());
  EXPECT_TRUE(IsNotFound(client_->Get(res::kConfigMaps, ns_, "cm").status()));
  EXPECT_TRUE(IsNotFound(client_->Delete(res::kConfigMaps, ns_, "cm")));
}

TEST_F(ClientTest, DeleteSendsThePropagationPolicy) {
  auto owner = client_->Create(res::kConfigMaps, ns_, ConfigMap("owner"));
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  // A dependent that blocks its owner's foreground deletion and, with a
  // finalizer of its own, stays visible once deleted.
  Json child = ConfigMap("child");
  child["metadata"]["finalizers"] = {"example.com/hold"};
  child["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                           {"kind", "ConfigMap"},
                                           {"name", "owner"},
                                           {"uid", Uid(*owner)},
                                           {"blockOwnerDeletion", true}}};
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, child).ok());

  DeleteOptions bogus;
  bogus.propagation_policy = "Sideways";
  Status s = client_->Delete(res::kConfigMaps, ns_, "owner", bogus);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.http_status(), 400);
  EXPECT_THAT(s.message(), HasSubstr("Sideways"));

  DeleteOptions foreground;
  foreground.propagation_policy = "Foreground";
  ASSERT_TRUE(client_->Delete(res::kConfigMaps, ns_, "owner", foreground).ok());
  // Foreground: the owner waits, with its finalizer, while the garbage
  // collector deletes the dependent first.
  EXPECT_TRUE(WaitFor([&] {
    auto c = client_->Get(res::kConfigMaps, ns_, "child");
    return c.ok() && IsBeingDeleted(*c);
  }));
  auto got = client_->Get(res::kConfigMaps, ns_, "owner");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(IsBeingDeleted(*got));
  EXPECT_TRUE(HasFinalizer(*got, "foregroundDeletion")) << got->dump();
}

TEST_F(ClientTest, DeleteSendsTheGracePeriod) {
  ASSERT_TRUE(client_->Create(res::kPods, ns_, PodObject("p", "node-1")).ok());
  DeleteOptions grace;
  grace.grace_period_seconds = 7;
  ASSERT_TRUE(client_->Delete(res::kPods, ns_, "p", grace).ok());
  auto got = client_->Get(res::kPods, ns_, "p");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->at("metadata").value("deletionGracePeriodSeconds", -1), 7);

  DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client_->Delete(res::kPods, ns_, "p", now).ok());
  EXPECT_TRUE(IsNotFound(client_->Get(res::kPods, ns_, "p").status()));
}

TEST_F(ClientTest, Patches) {
  ASSERT_TRUE(
      client_->Create(res::kConfigMaps, ns_, ConfigMap("cm", {{"a", "1"}, {"b", "1"}})).ok());
  // Merge patch: null removes a key.
  auto merged = client_->Patch(res::kConfigMaps, ns_, "cm", PatchType::kMerge,
                               {{"data", {{"a", nullptr}, {"c", "3"}}}});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ((*merged)["data"], Json({{"b", "1"}, {"c", "3"}}));

  // JSON patch.
  auto jp = client_->Patch(res::kConfigMaps, ns_, "cm", PatchType::kJson,
                           Json::array({{{"op", "replace"}, {"path", "/data/b"}, {"value", "2"}},
                                        {{"op", "add"}, {"path", "/data/d"}, {"value", "4"}}}));
  ASSERT_TRUE(jp.ok()) << jp.status().ToString();
  EXPECT_EQ((*jp)["data"], Json({{"b", "2"}, {"c", "3"}, {"d", "4"}}));
  auto bad = client_->Patch(res::kConfigMaps, ns_, "cm", PatchType::kJson,
                            Json::array({{{"op", "remove"}, {"path", "/data/nope"}}}));
  EXPECT_FALSE(bad.ok());
  EXPECT_GE(bad.status().http_status(), 400);

  // The status subresource.
  ASSERT_TRUE(client_->Create(res::kPods, ns_, PodObject("p")).ok());
  PatchOptions status;
  status.subresource = "status";
  auto st = client_->Patch(res::kPods, ns_, "p", PatchType::kMerge,
                           {{"status", {{"phase", "Running"}}}}, status);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(PodPhase(*st), "Running");

  auto missing = client_->Patch(res::kConfigMaps, ns_, "nope", PatchType::kMerge, Json::object());
  EXPECT_TRUE(IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("patch configmaps/nope"));
}

// Strategic merge needs Pod's schema (its patch strategies and merge keys).
class ClientSchemaTest : public ClientTest {
 protected:
  static void SetUpTestSuite() { StartServer(Schemas::kCore); }
};

TEST_F(ClientSchemaTest, StrategicMergePatchMergesListsByKey) {
  ASSERT_TRUE(client_->Create(res::kPods, ns_, PodObject("p")).ok());
  // Containers merge by name instead of being replaced.
  auto smp = client_->Patch(res::kPods, ns_, "p", PatchType::kStrategic,
                            {{"spec", {{"containers", {{{"name", "sidecar"}, {"image", "v2"}}}}}}});
  ASSERT_TRUE(smp.ok()) << smp.status().ToString();
  const Json& containers = (*smp)["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u) << containers.dump();
  EXPECT_EQ(containers[0]["image"], "busybox:1");
  EXPECT_EQ(containers[1]["image"], "v2");
}

TEST_F(ClientTest, ServerSideApply) {
  Json cm = ConfigMap("applied", {{"owner", "a"}});
  cm["metadata"]["namespace"] = ns_;
  cm.erase("kind");  // filled in by the client: apply needs it
  auto first = client_->Apply(res::kConfigMaps, cm, "manager-a", /*force=*/false);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)["data"]["owner"], "a");
  bool managed = false;
  for (const auto& f : (*first)["metadata"]["managedFields"]) {
    if (f.value("manager", "") == "manager-a" && f.value("operation", "") == "Apply") {
      managed = true;
    }
  }
  EXPECT_TRUE(managed) << first->dump();

  // Another manager setting the same field conflicts unless it forces.
  Json other = ConfigMap("applied", {{"owner", "b"}});
  other["metadata"]["namespace"] = ns_;
  auto conflict = client_->Apply(res::kConfigMaps, other, "manager-b", /*force=*/false);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.status().http_status(), 409);
  EXPECT_THAT(conflict.status().message(), HasSubstr("apply configmaps/applied"));
  auto forced = client_->Apply(res::kConfigMaps, other, "manager-b", /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ((*forced)["data"]["owner"], "b");

  auto no_manager = client_->Patch(res::kConfigMaps, ns_, "applied", PatchType::kApply, other);
  EXPECT_EQ(no_manager.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_manager.status().message(), HasSubstr("field manager"));
}

TEST_F(ClientTest, Evict) {
  ASSERT_TRUE(client_->Create(res::kPods, ns_, PodObject("victim")).ok());
  DeleteOptions o;
  o.grace_period_seconds = 0;
  Status s = client_->Evict(ns_, "victim", o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(IsNotFound(client_->Get(res::kPods, ns_, "victim").status()));
  Status missing = client_->Evict(ns_, "victim");
  EXPECT_TRUE(IsNotFound(missing)) << missing.ToString();
  EXPECT_THAT(missing.message(), HasSubstr("evict pods/victim in namespace " + ns_));
}

TEST_F(ClientTest, Raw) {
  auto version = client_->Raw("GET", "/version");
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(Json::parse(*version).value("gitVersion", ""), "v1.35.0");
  EXPECT_EQ(*client_->Raw("GET", "/healthz"), "ok");
  auto created =
      client_->Raw("POST", "/api/v1/namespaces/" + ns_ + "/configmaps", ConfigMap("raw").dump());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(client_->Get(res::kConfigMaps, ns_, "raw").ok());
  auto nope = client_->Raw("GET", "/apis/nope.example.com/v1/things");
  EXPECT_TRUE(IsNotFound(nope.status()));
  EXPECT_EQ(client_->Raw("GET", "version").status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Optimistic concurrency

class ClientConcurrencyTest : public ClientTest {};

TEST_F(ClientConcurrencyTest, UpdateWithRetryNeverLosesAConcurrentWrite) {
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("counter")).ok());
  auto increment = [&](Json& obj) {
    int n = std::stoi(Annotation(obj, "count").value_or("0"));
    SetAnnotation(obj, "count", std::to_string(n + 1));
    return true;
  };
  std::atomic<int> failures{0};
  auto writer = [&] {
    for (int i = 0; i < 50; ++i) {
      auto r = UpdateWithRetry(*client_, res::kConfigMaps, ns_, "counter", increment,
                               /*status_subresource=*/false, /*attempts=*/1000);
      if (!r.ok()) ++failures;
    }
  };
  std::thread a(writer);
  std::thread b(writer);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  auto got = client_->Get(res::kConfigMaps, ns_, "counter");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Annotation(*got, "count"), "100");
  // Every conflict cost a fresh read: one get per update, plus the final get.
  EXPECT_EQ(Audited("update"), Audited("get") - 1);
}

TEST_F(ClientConcurrencyTest, UpdateWithRetryStopsWhenNothingChanges) {
  auto created = client_->Create(res::kConfigMaps, ns_, ConfigMap("same"));
  ASSERT_TRUE(created.ok());
  auto r = UpdateWithRetry(*client_, res::kConfigMaps, ns_, "same", [](Json&) { return false; });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ResourceVersion(*r), ResourceVersion(*created));
  EXPECT_EQ(Audited("update"), 0);

  // A mutation that drops the resourceVersion still writes conditionally.
  auto cleared = UpdateWithRetry(*client_, res::kConfigMaps, ns_, "same", [](Json& obj) {
    obj["metadata"].erase("resourceVersion");
    obj["data"]["x"] = "y";
    return true;
  });
  ASSERT_TRUE(cleared.ok()) << cleared.status().ToString();
  EXPECT_EQ((*cleared)["data"]["x"], "y");
  EXPECT_TRUE(IsNotFound(UpdateWithRetry(*client_, res::kConfigMaps, ns_, "absent", [](Json&) {
                           return true;
                         }).status()));
}

// ---------------------------------------------------------------------------
// Authentication, TLS and connections

class ClientAuthTest : public ClientTest {};

TEST_F(ClientAuthTest, WrongTokenIsPermissionDenied) {
  RestConfig c = Config();
  c.token = "wrong";
  auto client = NewClient(c);
  auto r = client->Get(res::kNamespaces, "", "default");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().http_status(), 401);
  EXPECT_THAT(r.status().message(), HasSubstr("get namespaces/default: HTTP 401 Unauthorized"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("check the token or client certificate in kubeconfig /test/config "
                        "context \"emulator\""));
  EXPECT_EQ(server_->audit().Counters()["codes"].value("401", 0), 1);  // not retried
}

TEST_F(ClientAuthTest, UntrustedServerCertificateIsAClearTlsError) {
  auto other_ca = simkube::GenerateServingCert("127.0.0.1");
  ASSERT_TRUE(other_ca.ok());
  RestConfig c = Config();
  c.ca_pem = other_ca->ca_cert_pem;
  auto client = NewClient(c);
  auto r = client->Get(res::kNamespaces, "", "default");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("TLS verification of " + server_->url()));
  EXPECT_THAT(r.status().message(), HasSubstr("check certificate-authority(-data) in kubeconfig"));
  EXPECT_THAT(r.status().message(), Not(HasSubstr("after")));  // not retried
  EXPECT_EQ(server_->audit().Counters().value("total", 0), 0);

  // Without trust material, insecure-skip-tls-verify gets through.
  c.ca_pem.clear();
  c.insecure_skip_tls_verify = true;
  EXPECT_TRUE(NewClient(c)->Get(res::kNamespaces, "", "default").ok());
}

TEST_F(ClientAuthTest, ClientCertificates) {
  auto pair = simkube::GenerateServingCert("127.0.0.1");
  auto other = simkube::GenerateServingCert("127.0.0.1");
  ASSERT_TRUE(pair.ok() && other.ok());
  // The emulator does not ask for client certificates; a loaded pair must
  // still let the handshake through.
  RestConfig c = Config();
  c.client_cert_pem = pair->cert_pem;
  c.client_key_pem = pair->key_pem;
  auto client = NewClient(c);
  auto ok = client->Get(res::kNamespaces, "", "default");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();

  // A key that does not belong to the certificate.
  c.client_key_pem = other->key_pem;
  auto mismatched = NewClient(c)->Get(res::kNamespaces, "", "default");
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(mismatched.status().message(), HasSubstr("client certificate or key"));
  EXPECT_THAT(mismatched.status().message(), HasSubstr("client-key(-data)"));

  // Not PEM at all: refused up front.
  c.client_key_pem = "not a key";
  auto bad = Client::New(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("client-key from kubeconfig /test/config"));
  c.client_key_pem = pair->key_pem;
  c.client_cert_pem = "-----BEGIN CERTIFICATE-----\n";
  EXPECT_THAT(Client::New(c).status().message(), HasSubstr("client-certificate"));
  c.client_cert_pem.clear();
  EXPECT_THAT(Client::New(c).status().message(), HasSubstr("without its certificate"));
  RestConfig bad_ca = Config();
  bad_ca.ca_pem = "garbage";
  EXPECT_THAT(Client::New(bad_ca).status().message(), HasSubstr("certificate-authority"));
}

TEST_F(ClientAuthTest, BadServerUrl) {
  RestConfig c = Config();
  c.server = "10.0.0.1:6443";
  auto r = Client::New(c);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is not an http:// or https:// URL"));
  c.server = "https://";
  EXPECT_THAT(Client::New(c).status().message(), HasSubstr("has no host"));
}

TEST_F(ClientAuthTest, ReconnectsAfterTheServerRestarts) {
  // Plain HTTP: a restarted emulator makes a new CA, which the client would
  // rightly refuse; the connection handling is the same.
  QuickOpenApiDir openapi(Schemas::kNone);
  simkube::ServerOptions o = EmulatorOptions(/*tls=*/false);
  o.openapi_dir = openapi.path();
  auto first = simkube::ApiServer::Start(o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const int port = (*first)->port();
  RestConfig c;
  c.server = (*first)->url();
  c.token = kToken;
  c.qps = 0;
  auto client = NewClient(c, FastRetry(2));
  ASSERT_TRUE(client->Get(res::kNamespaces, "", "default").ok());
  ASSERT_TRUE(client->Get(res::kNamespaces, "", "default").ok());  // on the kept connection

  (*first)->Stop();
  auto down = client->Create(res::kConfigMaps, "default", ConfigMap("x"));
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(down.status().message(), HasSubstr("cannot connect to " + c.server));
  EXPECT_THAT(down.status().message(), HasSubstr("(after 2 attempts)"));  // never sent: retried

  o.listen = "127.0.0.1:" + std::to_string(port);
  auto second = simkube::ApiServer::Start(o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto again = client->Get(res::kNamespaces, "", "default");
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  // Closing the client's connections first lets the server stop at once
  // (it would wait out an idle keep-alive connection).
  client.reset();
}

// ---------------------------------------------------------------------------
// Retries

class ClientRetryTest : public ClientTest {};

TEST_F(ClientRetryTest, TooManyRequestsIsRetriedAfterRetryAfter) {
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("cm")).ok());
  server_->audit().ResetCounters();
  SetFaults("error=429,verb=get,resource=configmaps,count=2,retry-after=1");
  auto got = client_->Get(res::kConfigMaps, ns_, "cm");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Audited("get"), 3);
  EXPECT_EQ(server_->audit().Counters()["codes"].value("429", 0), 2);
}

TEST_F(ClientRetryTest, UnavailableCreateIsRetriedOnce) {
  // 503: the server did not act, so even a create goes again.
  SetFaults("error=503,verb=create,resource=configmaps,count=1,retry-after=1");
  auto created = client_->Create(res::kConfigMaps, ns_, ConfigMap("cm"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(Audited("create"), 2);
}

TEST_F(ClientRetryTest, InternalErrorOnCreateIsNotRetried) {
  SetFaults("error=500,verb=create,resource=configmaps,count=1");
  auto created = client_->Create(res::kConfigMaps, ns_, ConfigMap("cm"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(created.status().http_status(), 500);
  EXPECT_THAT(created.status().message(), HasSubstr("create configmaps/cm in namespace " + ns_ +
                                                    ": HTTP 500 Internal Server Error: "));
  EXPECT_THAT(created.status().message(), HasSubstr("injected fault"));
  EXPECT_EQ(Audited("create"), 1);
  // A JSON patch is not repeated either.
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("cm")).ok());
  SetFaults("error=500,verb=patch,count=1");
  server_->audit().ResetCounters();
  EXPECT_FALSE(client_
                   ->Patch(res::kConfigMaps, ns_, "cm", PatchType::kJson,
                           Json::array({{{"op", "add"}, {"path", "/data"}, {"value", {}}}}))
                   .ok());
  EXPECT_EQ(Audited("patch"), 1);
}

TEST_F(ClientRetryTest, InternalErrorOnIdempotentVerbsIsRetried) {
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("cm")).ok());
  server_->audit().ResetCounters();
  SetFaults("error=500,verb=get,resource=configmaps,count=2");
  auto got = client_->Get(res::kConfigMaps, ns_, "cm");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Audited("get"), 3);

  SetFaults("error=502,verb=patch,count=1");
  auto patched =
      client_->Patch(res::kConfigMaps, ns_, "cm", PatchType::kMerge, {{"data", {{"k", "v"}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ(Audited("patch"), 2);
}

TEST_F(ClientRetryTest, ExhaustedAttemptsGiveUnavailableWithTheStatus) {
  auto client = NewClient(Config(), FastRetry(3));
  SetFaults("error=500,verb=get");
  auto got = client->Get(res::kNamespaces, "", "default");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(got.status().http_status(), 500);
  EXPECT_THAT(got.status().message(), HasSubstr("(after 3 attempts)"));
  EXPECT_EQ(Audited("get"), 3);
}

TEST_F(ClientRetryTest, RateLimitSpacesRequests) {
  // 20 requests at 200 qps with a burst of 1 cannot all be immediate; this
  // checks the limiter is in the path (counted, not timed: each request
  // still arrives).
  RestConfig c = Config();
  c.qps = 200;
  c.burst = 1;
  auto client = NewClient(c);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(client->Get(res::kNamespaces, "", ns_).ok());
  EXPECT_EQ(Audited("get"), 20);
}

// ---------------------------------------------------------------------------
// Watches

// Runs a watch on its own thread and collects what it delivers.
class WatchRecorder {
 public:
  WatchRecorder(Client& client, const Resource& r, std::string ns, WatchOptions options,
                size_t stop_after = SIZE_MAX)
      : thread_([this, &client, r, ns, options, stop_after](std::stop_token stop) {
          Status s = client.Watch(
              r, ns, options,
              [this, stop_after](WatchEvent&& ev) {
                std::lock_guard lock(mu_);
                events_.push_back(std::move(ev));
                cv_.notify_all();
                return events_.size() < stop_after;
              },
              stop);
          std::lock_guard lock(mu_);
          result_ = s;
          done_ = true;
          cv_.notify_all();
        }) {}

  bool WaitForEvents(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return events_.size() >= n || done_; }) &&
           events_.size() >= n;
  }
  bool WaitDone() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return done_; });
  }
  std::vector<WatchEvent> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  Status result() {
    std::lock_guard lock(mu_);
    return result_;
  }
  void Stop() { thread_.request_stop(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WatchEvent> events_;
  Status result_;
  bool done_ = false;
  std::jthread thread_;  // last: stopped and joined before the rest goes
};

class ClientWatchTest : public ClientTest {};

std::string ListVersion(Client& client, const Resource& r, const std::string& ns) {
  auto list = client.List(r, ns);
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  return list.ok() ? list->resource_version : "";
}

TEST_F(ClientWatchTest, EventsArriveInOrder) {
  WatchOptions o;
  o.resource_version = ListVersion(*client_, res::kConfigMaps, ns_);
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, o, /*stop_after=*/6);
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("a")).ok());
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("b")).ok());
  // An event far bigger than one network read: it arrives in many pieces.
  std::string big(200 * 1024, 'x');
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("big", {{"blob", big}})).ok());
  ASSERT_TRUE(
      client_->Patch(res::kConfigMaps, ns_, "a", PatchType::kMerge, {{"data", {{"k", "v"}}}}).ok());
  ASSERT_TRUE(client_->Delete(res::kConfigMaps, ns_, "b").ok());
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("c")).ok());

  ASSERT_TRUE(rec.WaitForEvents(6));
  ASSERT_TRUE(rec.WaitDone());
  EXPECT_TRUE(rec.result().ok()) << rec.result().ToString();  // on_event said stop
  std::vector<std::string> seen;
  for (const auto& ev : rec.events()) {
    seen.push_back(std::string(WatchEventTypeName(ev.type)) + " " + Name(ev.object));
    EXPECT_EQ(ev.object["kind"], "ConfigMap");
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED a", "ADDED b", "ADDED big", "MODIFIED a",
                                            "DELETED b", "ADDED c"}));
  EXPECT_EQ(rec.events()[2].object["data"]["blob"], big);
  EXPECT_EQ(rec.events()[3].object["data"]["k"], "v");
}

TEST_F(ClientWatchTest, SelectorsNarrowTheWatch) {
  WatchOptions o;
  o.resource_version = ListVersion(*client_, res::kConfigMaps, ns_);
  o.label_selector = "watch=me";
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, o, /*stop_after=*/1);
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("ignored")).ok());
  Json cm = ConfigMap("wanted");
  cm["metadata"]["labels"]["watch"] = "me";
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, cm).ok());
  ASSERT_TRUE(rec.WaitDone());
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_EQ(Name(rec.events()[0].object), "wanted");
}

TEST_F(ClientWatchTest, BookmarksArriveWhenTheServerSendsThem) {
  WatchOptions o;
  o.resource_version = ListVersion(*client_, res::kConfigMaps, ns_);
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, o, /*stop_after=*/1);
  // The watch may not be registered yet: ask for bookmarks until one comes.
  EXPECT_TRUE(WaitFor([&] {
    EXPECT_TRUE(client_->Raw("POST", "/gpuop-sim/bookmarks").ok());
    return !rec.events().empty();
  }));
  ASSERT_TRUE(rec.WaitDone());
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_EQ(rec.events()[0].type, WatchEvent::Type::kBookmark);
  EXPECT_FALSE(ResourceVersion(rec.events()[0].object).empty());
}

TEST_F(ClientWatchTest, StopTokenEndsAQuietWatch) {
  WatchOptions o;
  o.timeout = std::chrono::minutes(10);  // the server will not end it soon
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, o);
  ASSERT_TRUE(WaitFor([&] { return server_->store().Counters().watchers >= 1; }));
  rec.Stop();
  // Ends well before the server would (10+ minutes), with OK.
  ASSERT_TRUE(rec.WaitDone());
  EXPECT_TRUE(rec.result().ok()) << rec.result().ToString();
  EXPECT_TRUE(rec.events().empty());
}

TEST_F(ClientWatchTest, ServerEndingTheStreamIsOk) {
  WatchOptions o;
  o.timeout = seconds(1);  // the server ends it after 1-2 s
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, o);
  ASSERT_TRUE(rec.WaitDone());
  EXPECT_TRUE(rec.result().ok()) << rec.result().ToString();
}

TEST_F(ClientWatchTest, DroppedStreamIsUnavailable) {
  // Documented in client.h: a stream that breaks (here: closed without its
  // final chunk after one event) ends the watch with Unavailable, so the
  // caller re-watches from the last version it saw.
  std::string rv = ListVersion(*client_, res::kConfigMaps, ns_);
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("one")).ok());
  ASSERT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("two")).ok());
  SetFaults("drop-watch=1,verb=watch,count=1");
  WatchOptions o;
  o.resource_version = rv;
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, o);
  ASSERT_TRUE(rec.WaitDone());
  Status s = rec.result();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("re-watch"));
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_EQ(Audited("watch"), 1);  // a broken stream is not retried

  // Re-watching from the last version seen picks up the rest.
  o.resource_version = ResourceVersion(rec.events()[0].object);
  WatchRecorder again(*client_, res::kConfigMaps, ns_, o, /*stop_after=*/1);
  ASSERT_TRUE(again.WaitForEvents(1));
  EXPECT_EQ(Name(again.events()[0].object), "two");
}

TEST_F(ClientWatchTest, ExpiredVersionIsAnErrorEvent) {
  SetFaults("gone,verb=watch,count=1");
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, WatchOptions{});
  ASSERT_TRUE(rec.WaitDone());
  EXPECT_TRUE(rec.result().ok()) << rec.result().ToString();
  ASSERT_EQ(rec.events().size(), 1u);
  EXPECT_EQ(rec.events()[0].type, WatchEvent::Type::kError);
  EXPECT_EQ(rec.events()[0].object.value("code", 0), 410);
}

TEST_F(ClientWatchTest, EstablishingIsRetriedLikeAGet) {
  SetFaults("error=500,verb=watch,count=1");
  WatchOptions o;
  o.resource_version = ListVersion(*client_, res::kConfigMaps, ns_);
  WatchRecorder rec(*client_, res::kConfigMaps, ns_, o, /*stop_after=*/1);
  // Create until the (retried) watch sees one: it may start after the first.
  int n = 0;
  EXPECT_TRUE(WaitFor([&] {
    EXPECT_TRUE(client_->Create(res::kConfigMaps, ns_, ConfigMap("w" + std::to_string(n++))).ok());
    return !rec.events().empty();
  }));
  ASSERT_TRUE(rec.WaitDone());
  EXPECT_TRUE(rec.result().ok()) << rec.result().ToString();
  EXPECT_EQ(Audited("watch"), 2);
}

TEST_F(ClientWatchTest, RefusedWatchIsAnError) {
  RestConfig c = Config();
  c.token = "wrong";
  auto client = NewClient(c);
  WatchRecorder rec(*client, res::kConfigMaps, ns_, WatchOptions{});
  ASSERT_TRUE(rec.WaitDone());
  EXPECT_EQ(rec.result().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(rec.result().http_status(), 401);
  EXPECT_THAT(rec.result().message(), HasSubstr("watch configmaps in namespace " + ns_));
}

}  // namespace
}  // namespace gpuop::kube
