// The API emulator's HTTP front end (sim/kube/server.h), in-process on port 0
// with an httplib client: discovery, OpenAPI, CRUD with the real server's
// status codes and Status bodies, field validation, lists, Tables, watches,
// CRDs, eviction, authentication and TLS.
#include "sim/kube/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/pem.h>

#include <cctype>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "sim/kube/kubeconfig.h"
#include "sim/kube/tls.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

ServerOptions TestOptions() {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  o.threads = 16;
  return o;
}

std::unique_ptr<ApiServer> StartServer(ServerOptions o = TestOptions()) {
  auto s = ApiServer::Start(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::unique_ptr<httplib::Client> ClientFor(const ApiServer& s) {
  auto c = std::make_unique<httplib::Client>(s.host(), s.port());
  c->set_read_timeout(60);
  c->set_write_timeout(60);
  return c;
}

Json BodyOf(const httplib::Result& r) {
  if (!r) return nullptr;
  try {
    return Json::parse(r->body);
  } catch (const std::exception&) {
    return nullptr;
  }
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartServer().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = ClientFor(*server_);
  }

  httplib::Result Post(const std::string& path, const Json& body) {
    return client_->Post(path.c_str(), body.dump(), "application/json");
  }

  static ApiServer* server_;
  std::unique_ptr<httplib::Client> client_;
};
ApiServer* ServerTest::server_ = nullptr;

TEST_F(ServerTest, ServesVersionDiscoveryAndHealth) {
  auto v = client_->Get("/version");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->status, 200);
  EXPECT_EQ(BodyOf(v)["gitVersion"], "v1.35.0");
  EXPECT_EQ(BodyOf(client_->Get("/api"))["versions"], Json({"v1"}));
  EXPECT_EQ(BodyOf(client_->Get("/apis"))["kind"], "APIGroupList");
  EXPECT_EQ(BodyOf(client_->Get("/apis/apps"))["name"], "apps");
  Json apps = BodyOf(client_->Get("/apis/apps/v1"));
  EXPECT_EQ(apps["groupVersion"], "apps/v1");
  EXPECT_EQ(client_->Get("/apis/nope.example.com/v1")->status, 404);
  EXPECT_EQ(client_->Get("/healthz")->body, "ok");
  EXPECT_EQ(client_->Get("/readyz")->status, 200);

  httplib::Headers agg{{"Accept",
                        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                        "application/json"}};
  auto a = client_->Get("/apis", agg);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->get_header_value("Content-Type"),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
  EXPECT_EQ(BodyOf(a)["kind"], "APIGroupDiscoveryList");
}

TEST_F(ServerTest, ServesTheOpenApiV3Documents) {
  Json index = BodyOf(client_->Get("/openapi/v3"));
  ASSERT_TRUE(index["paths"].contains("api/v1")) << index.dump();
  std::string url = index["paths"]["apis/apps/v1"]["serverRelativeURL"];
  EXPECT_NE(url.find("?hash="), std::string::npos);
  Json doc = BodyOf(client_->Get(url.c_str()));
  EXPECT_TRUE(doc["components"]["schemas"].contains("io.k8s.api.apps.v1.DaemonSet"));
  EXPECT_EQ(client_->Get("/openapi/v3/apis/nope/v1")->status, 404);
}

TEST_F(ServerTest, CrudWithRealStatusCodesAndStatusBodies) {
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "crud"}, {"labels", {{"app", "x"}}}}},
             {"data", {{"a", "1"}}}};
  auto created = Post("/api/v1/namespaces/default/configmaps", cm);
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  Json obj = BodyOf(created);
  EXPECT_FALSE(obj["metadata"]["uid"].get<std::string>().empty());
  EXPECT_EQ(obj["metadata"]["namespace"], "default");
  std::string rv = obj["metadata"]["resourceVersion"];

  auto again = Post("/api/v1/namespaces/default/configmaps", cm);
  EXPECT_EQ(again->status, 409);
  EXPECT_EQ(BodyOf(again)["reason"], "AlreadyExists");

  auto got = client_->Get("/api/v1/namespaces/default/configmaps/crud");
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(BodyOf(got)["data"]["a"], "1");

  // Update with the current resourceVersion, then again with the stale one.
  obj["data"]["a"] = "2";
  auto put =
      client_->Put("/api/v1/namespaces/default/configmaps/crud", obj.dump(), "application/json");
  ASSERT_EQ(put->status, 200) << put->body;
  EXPECT_NE(BodyOf(put)["metadata"]["resourceVersion"], rv);
  auto stale =
      client_->Put("/api/v1/namespaces/default/configmaps/crud", obj.dump(), "application/json");
  EXPECT_EQ(stale->status, 409);
  Json status = BodyOf(stale);
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["reason"], "Conflict");
  EXPECT_NE(status["message"].get<std::string>().find("the object has been modified"),
            std::string::npos);

  // The URL name wins over nothing: a mismatch is a 400.
  obj["metadata"]["name"] = "other";
  EXPECT_EQ(
      client_->Put("/api/v1/namespaces/default/configmaps/crud", obj.dump(), "application/json")
          ->status,
      400);

  // Patches by Content-Type.
  auto merge = client_->Patch("/api/v1/namespaces/default/configmaps/crud", R"({"data":{"b":"m"}})",
                              "application/merge-patch+json");
  EXPECT_EQ(merge->status, 200) << merge->body;
  auto jp = client_->Patch("/api/v1/namespaces/default/configmaps/crud",
                           R"([{"op":"remove","path":"/data/a"}])", "application/json-patch+json");
  EXPECT_EQ(jp->status, 200) << jp->body;
  auto smp = client_->Patch("/api/v1/namespaces/default/configmaps/crud",
                            R"({"metadata":{"labels":{"app":null,"tier":"t"}}})",
                            "application/strategic-merge-patch+json");
  ASSERT_EQ(smp->status, 200) << smp->body;
  Json patched = BodyOf(smp);
  EXPECT_EQ(patched["data"], Json({{"b", "m"}}));
  EXPECT_EQ(patched["metadata"]["labels"], Json({{"tier", "t"}}));
  EXPECT_EQ(
      client_->Patch("/api/v1/namespaces/default/configmaps/crud", "{}", "text/plain")->status,
      415);

  auto del = client_->Delete("/api/v1/namespaces/default/configmaps/crud");
  ASSERT_EQ(del->status, 200);
  EXPECT_EQ(BodyOf(del)["status"], "Success");
  EXPECT_EQ(BodyOf(del)["details"]["name"], "crud");
  auto gone = client_->Get("/api/v1/namespaces/default/configmaps/crud");
  EXPECT_EQ(gone->status, 404);
  EXPECT_EQ(BodyOf(gone)["message"], "configmaps \"crud\" not found");
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/widgets")->status, 404);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/nodes")->status, 404);  // cluster-scoped
}

TEST_F(ServerTest, ServerSideApplyCreatesAndUpdates) {
  std::string path = "/api/v1/namespaces/default/configmaps/ssa?fieldManager=test";
  std::string yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  n: \"1\"\n";
  auto first = client_->Patch(path.c_str(), yaml, "application/apply-patch+yaml");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 201) << first->body;
  auto second = client_->Patch(path.c_str(), R"({"apiVersion":"v1","kind":"ConfigMap",
      "metadata":{"name":"ssa"},"data":{"n":"2"}})",
                               "application/apply-patch+yaml");
  ASSERT_EQ(second->status, 200) << second->body;
  Json obj = BodyOf(second);
  EXPECT_EQ(obj["data"]["n"], "2");
  EXPECT_EQ(obj["metadata"]["managedFields"][0]["manager"], "test");
  auto no_manager = client_->Patch("/api/v1/namespaces/default/configmaps/ssa", yaml,
                                   "application/apply-patch+yaml");
  EXPECT_EQ(no_manager->status, 400);
}

TEST_F(ServerTest, FieldValidationFollowsTheQueryParameter) {
  Json cm = {
      {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "fv"}}}, {"bogus", 1}};
  auto strict = Post("/api/v1/namespaces/default/configmaps?fieldValidation=Strict", cm);
  EXPECT_EQ(strict->status, 400) << strict->body;
  EXPECT_NE(BodyOf(strict)["message"].get<std::string>().find("unknown field \"bogus\""),
            std::string::npos)
      << strict->body;
  auto warn = Post("/api/v1/namespaces/default/configmaps?fieldValidation=Warn", cm);
  ASSERT_EQ(warn->status, 201) << warn->body;
  EXPECT_NE(warn->get_header_value("Warning").find("unknown field"), std::string::npos);
  EXPECT_FALSE(BodyOf(warn).contains("bogus"));
  auto bad = Post("/api/v1/namespaces/default/configmaps?fieldValidation=Loud", cm);
  EXPECT_EQ(bad->status, 400);

  // An invalid object is a 422 with causes.
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "Bad_Name"}}},
              {"spec", {{"containers", Json::array()}}}};
  auto invalid = Post("/api/v1/namespaces/default/pods", pod);
  EXPECT_EQ(invalid->status, 422) << invalid->body;
  EXPECT_EQ(BodyOf(invalid)["reason"], "Invalid");
  // The wrong apiVersion in the body is a 400.
  Json wrong = {{"apiVersion", "apps/v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "w"}}}};
  EXPECT_EQ(Post("/api/v1/namespaces/default/configmaps", wrong)->status, 400);
  // A protobuf body without the envelope's magic is a 400, as on the real
  // server (well-formed ones are decoded: protobuf_test.cc).
  auto proto = client_->Post("/api/v1/namespaces/default/configmaps", "k8s\x00",
                             "application/vnd.kubernetes.protobuf");
  EXPECT_EQ(proto->status, 400);
}

TEST_F(ServerTest, ListsSelectPaginateAndPrintTables) {
  Post("/api/v1/namespaces",
       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "lists"}}}});
  for (int i = 0; i < 5; ++i) {
    Json cm = {
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata",
         {{"name", "cm" + std::to_string(i)}, {"labels", {{"parity", i % 2 ? "odd" : "even"}}}}}};
    ASSERT_EQ(Post("/api/v1/namespaces/lists/configmaps", cm)->status, 201);
  }
  Json odd = BodyOf(client_->Get("/api/v1/namespaces/lists/configmaps?labelSelector=parity%3Dodd"));
  EXPECT_EQ(odd["kind"], "ConfigMapList");
  EXPECT_EQ(odd["items"].size(), 2u);
  Json by_name =
      BodyOf(client_->Get("/api/v1/namespaces/lists/configmaps?fieldSelector=metadata.name%3Dcm3"));
  ASSERT_EQ(by_name["items"].size(), 1u);
  EXPECT_EQ(by_name["items"][0]["metadata"]["name"], "cm3");

  std::vector<std::string> names;
  std::string cont;
  int pages = 0;
  do {
    std::string path = "/api/v1/namespaces/lists/configmaps?limit=2";
    if (!cont.empty()) path += "&continue=" + UrlEncode(cont);
    Json page = BodyOf(client_->Get(path.c_str()));
    for (const auto& i : page["items"]) names.push_back(i["metadata"]["name"]);
    cont = page["metadata"].value("continue", "");
    ++pages;
  } while (!cont.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"cm0", "cm1", "cm2", "cm3", "cm4"}));

  httplib::Headers table{
      {"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}};
  Json t = BodyOf(client_->Get("/api/v1/namespaces/lists/configmaps", table));
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["columnDefinitions"][0]["name"], "Name");
  EXPECT_EQ(t["rows"].size(), 5u);
  Json one = BodyOf(client_->Get("/api/v1/namespaces/lists/configmaps/cm1", table));
  EXPECT_EQ(one["kind"], "Table");
  EXPECT_EQ(one["rows"][0]["cells"][0], "cm1");

  auto dc = client_->Delete("/api/v1/namespaces/lists/configmaps?labelSelector=parity%3Deven");
  EXPECT_EQ(dc->status, 200) << dc->body;
  EXPECT_EQ(BodyOf(client_->Get("/api/v1/namespaces/lists/configmaps"))["items"].size(), 2u);
}

// Reads a watch stream on a thread until `until` holds for what arrived.
class WatchReader {
 public:
  WatchReader(const ApiServer& s, std::string path, httplib::Headers headers = {})
      : client_(ClientFor(s)) {
    thread_ = std::thread([this, path, headers] {
      auto r = client_->Get(path.c_str(), headers, [this](const char* d, size_t n) {
        std::lock_guard lock(mu_);
        data_.append(d, n);
        cv_.notify_all();
        return !stop_;
      });
      std::lock_guard lock(mu_);
      ended_ = true;
      error_ = r.error();
      if (r) status_ = r->status;
      cv_.notify_all();
    });
  }
  ~WatchReader() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    client_->stop();
    thread_.join();
  }
  // Waits (generously) for the stream's text to satisfy `pred`.
  bool WaitFor(const std::function<bool(const std::string&)>& pred) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return pred(data_) || ended_; }) &&
           pred(data_);
  }
  bool WaitEnded() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return ended_; });
  }
  std::vector<Json> Events() {
    std::lock_guard lock(mu_);
    std::vector<Json> out;
    size_t start = 0;
    for (size_t nl; (nl = data_.find('\n', start)) != std::string::npos; start = nl + 1) {
      out.push_back(Json::parse(data_.substr(start, nl - start)));
    }
    return out;
  }
  httplib::Error error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  std::unique_ptr<httplib::Client> client_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string data_;
  bool stop_ = false, ended_ = false;
  int status_ = 0;
  httplib::Error error_ = httplib::Error::Success;
};

TEST_F(ServerTest, WatchStreamsJsonLines) {
  Post("/api/v1/namespaces",
       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "watched"}}}});
  Json list = BodyOf(client_->Get("/api/v1/namespaces/watched/configmaps"));
  std::string rv = list["metadata"]["resourceVersion"];
  WatchReader w(*server_, "/api/v1/namespaces/watched/configmaps?watch=true&resourceVersion=" + rv);
  Json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "w1"}}}};
  ASSERT_EQ(Post("/api/v1/namespaces/watched/configmaps", cm)->status, 201);
  client_->Delete("/api/v1/namespaces/watched/configmaps/w1");
  ASSERT_TRUE(
      w.WaitFor([](const std::string& d) { return d.find("DELETED") != std::string::npos; }));
  auto events = w.Events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "w1");
  EXPECT_EQ(events[0]["object"]["kind"], "ConfigMap");
  EXPECT_EQ(events.back()["type"], "DELETED");
}

TEST_F(ServerTest, WatchOfTablesSendsColumnsOnce) {
  httplib::Headers table{
      {"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}};
  WatchReader w(*server_, "/api/v1/namespaces?watch=1&labelSelector=tablewatch%3Dyes", table);
  for (const char* name : {"tw1", "tw2"}) {
    Post("/api/v1/namespaces",
         {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", name}, {"labels", {{"tablewatch", "yes"}}}}}});
  }
  ASSERT_TRUE(w.WaitFor([](const std::string& d) { return d.find("tw2") != std::string::npos; }));
  auto events = w.Events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["object"]["kind"], "Table");
  EXPECT_FALSE(events[0]["object"]["columnDefinitions"].empty());
  EXPECT_TRUE(events[1]["object"]["columnDefinitions"].empty());
  EXPECT_EQ(events[1]["object"]["rows"][0]["cells"][0], "tw2");
}

TEST_F(ServerTest, WatchFromACompactedVersionGetsAnExpiredError) {
  std::string rv = BodyOf(client_->Get("/api/v1/namespaces"))["metadata"]["resourceVersion"];
  Post("/api/v1/namespaces",
       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "compacted"}}}});
  ASSERT_EQ(client_->Post("/gpuop-sim/compact", "", "text/plain")->status, 200);
  WatchReader w(*server_, "/api/v1/namespaces?watch=true&resourceVersion=" + rv);
  ASSERT_TRUE(w.WaitEnded());
  auto events = w.Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["code"], 410);
}

TEST_F(ServerTest, NodeActionsReachTheClusterSimulator) {
  // Not served until the cluster simulator sets a handler.
  EXPECT_EQ(client_->Post("/gpuop-sim/nodes/n1/restart-kubelet", "", "text/plain")->status, 404);
  std::vector<std::string> calls;
  server_->SetNodeAction([&](const std::string& node, const std::string& action, const Json& p) {
    calls.push_back(node + " " + action + " " + p.dump());
    if (node != "n1") return NotFound("no node \"" + node + "\" in this cluster");
    return Status::Ok();
  });
  auto ok = client_->Post("/gpuop-sim/nodes/n1/restart-kubelet", R"({"downSeconds":1.5})",
                          "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(BodyOf(ok), Json({{"node", "n1"}, {"action", "restart-kubelet"}}));
  EXPECT_EQ(client_->Post("/gpuop-sim/nodes/n1/restart-kubelet", "", "text/plain")->status, 200);
  auto missing = client_->Post("/gpuop-sim/nodes/n9/restart-kubelet", "", "text/plain");
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(BodyOf(missing)["message"], "no node \"n9\" in this cluster");
  auto bad = client_->Post("/gpuop-sim/nodes/n1/restart-kubelet", "[1]", "application/json");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(client_->Get("/gpuop-sim/nodes/n1/restart-kubelet")->status, 405);
  EXPECT_EQ(client_->Post("/gpuop-sim/nodes/n1", "", "text/plain")->status, 404);
  server_->SetNodeAction(nullptr);
  EXPECT_EQ(calls, (std::vector<std::string>{"n1 restart-kubelet {\"downSeconds\":1.5}",
                                             "n1 restart-kubelet {}", "n9 restart-kubelet {}"}));
}

TEST_F(ServerTest, CrdServesItsCustomResources) {
  Json crd =
      Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"gadgets.example.com"},
    "spec":{"group":"example.com","scope":"Cluster","names":{"kind":"Gadget","plural":"gadgets"},
      "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
        "additionalPrinterColumns":[{"name":"Speed","type":"integer","jsonPath":".spec.speed"}],
        "schema":{"openAPIV3Schema":{"type":"object","properties":{
          "spec":{"type":"object","properties":{"speed":{"type":"integer","default":1}}},
          "status":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}}]}})");
  auto created = Post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  ASSERT_EQ(created->status, 201) << created->body;
  Json stored = BodyOf(
      client_->Get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com"));
  bool established = false;
  for (const auto& c : stored["status"]["conditions"]) {
    if (c["type"] == "Established" && c["status"] == "True") established = true;
  }
  EXPECT_TRUE(established) << stored.dump();
  Json rl = BodyOf(client_->Get("/apis/example.com/v1"));
  ASSERT_EQ(rl["resources"].size(), 2u) << rl.dump();  // gadgets, gadgets/status

  Json g = {{"apiVersion", "example.com/v1"},
            {"kind", "Gadget"},
            {"metadata", {{"name", "g1"}}},
            {"spec", Json::object()},
            {"status", {{"ok", true}}}};
  auto cr = Post("/apis/example.com/v1/gadgets", g);
  ASSERT_EQ(cr->status, 201) << cr->body;
  Json obj = BodyOf(cr);
  EXPECT_EQ(obj["spec"]["speed"], 1);    // defaulted
  EXPECT_FALSE(obj.contains("status"));  // the status subresource owns it
  EXPECT_EQ(obj["metadata"]["generation"], 1);
  g["spec"]["speed"] = "fast";
  auto wrong_type = Post("/apis/example.com/v1/gadgets", {{"apiVersion", "example.com/v1"},
                                                          {"kind", "Gadget"},
                                                          {"metadata", {{"name", "g2"}}},
                                                          {"spec", {{"speed", "fast"}}}});
  EXPECT_EQ(wrong_type->status, 422) << wrong_type->body;
  EXPECT_EQ(
      client_
          ->Patch("/apis/example.com/v1/gadgets/g1", "{}", "application/strategic-merge-patch+json")
          ->status,
      415);
  httplib::Headers table{{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}};
  Json t = BodyOf(client_->Get("/apis/example.com/v1/gadgets", table));
  EXPECT_EQ(t["columnDefinitions"][1]["name"], "Speed");
  EXPECT_EQ(t["rows"][0]["cells"], Json({"g1", 1}));

  auto del = client_->Delete(
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com");
  EXPECT_EQ(del->status, 200) << del->body;
  EXPECT_EQ(client_->Get("/apis/example.com/v1/gadgets")->status, 404);
  EXPECT_EQ(server_->registry().Find("example.com", "v1", "gadgets"), nullptr);
}

TEST_F(ServerTest, EvictionDeletesThePod) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "evictme"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  ASSERT_EQ(Post("/api/v1/namespaces/default/pods", pod)->status, 201);
  Json eviction = {{"apiVersion", "policy/v1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", "evictme"}, {"namespace", "default"}}}};
  auto ev = Post("/api/v1/namespaces/default/pods/evictme/eviction", eviction);
  ASSERT_EQ(ev->status, 201) << ev->body;
  EXPECT_EQ(BodyOf(ev)["status"], "Success");
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/pods/evictme")->status, 404);
  EXPECT_EQ(Post("/api/v1/namespaces/default/pods/nobody/eviction", eviction)->status, 400);
  EXPECT_EQ(Post("/api/v1/namespaces/default/configmaps/x/eviction", eviction)->status, 404);
}

TEST_F(ServerTest, StatusSubresourceAndAuditCounters) {
  client_->Delete("/gpuop-sim/audit");
  Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n-status"}}}};
  ASSERT_EQ(Post("/api/v1/nodes", node)->status, 201);
  auto st = client_->Patch("/api/v1/nodes/n-status/status",
                           R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})",
                           "application/merge-patch+json");
  ASSERT_EQ(st->status, 200) << st->body;
  EXPECT_EQ(BodyOf(client_->Get("/api/v1/nodes/n-status"))["status"]["conditions"][0]["type"],
            "Ready");
  Json counters = BodyOf(client_->Get("/gpuop-sim/audit"));
  EXPECT_EQ(counters["verbs"]["create"], 1);
  EXPECT_EQ(counters["verbs"]["patch"], 1);
  EXPECT_EQ(counters["verbs"]["get"], 1);
  EXPECT_EQ(counters["codes"]["201"], 1);
  EXPECT_GE(counters["store"]["objectCount"].get<int>(), 1);
}

TEST(ServerAuthTest, TokenIsRequiredWhenSet) {
  ServerOptions o = TestOptions();
  o.token = "t0ken";
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  auto c = ClientFor(*s);
  auto anon = c->Get("/api/v1/namespaces");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->status, 401);
  EXPECT_EQ(BodyOf(anon)["reason"], "Unauthorized");
  EXPECT_EQ(c->Get("/healthz")->status, 200);
  c->set_bearer_token_auth("wrong");
  EXPECT_EQ(c->Get("/version")->status, 401);
  c->set_bearer_token_auth("t0ken");
  EXPECT_EQ(c->Get("/api/v1/namespaces")->status, 200);
  EXPECT_EQ(s->kubeconfig().token, "t0ken");
  s->Stop();
  s->Wait();  // returns once stopped
}

TEST(ServerTlsTest, ServesHttpsVerifiedByItsCa) {
  ServerOptions o = TestOptions();
  o.tls = true;
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->url().rfind("https://127.0.0.1:", 0), 0u) << s->url();
  ASSERT_FALSE(s->ca_cert_pem().empty());
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(s->ca_cert_pem().data(), static_cast<int>(s->ca_cert_pem().size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(ca, nullptr);
  X509_STORE_add_cert(store, ca);
  X509_free(ca);
  httplib::SSLClient c(s->host(), s->port());
  c.set_ca_cert_store(store);  // the client owns it now
  c.enable_server_certificate_verification(true);
  auto v = c.Get("/version");
  ASSERT_TRUE(v) << httplib::to_string(v.error());
  EXPECT_EQ(v->status, 200);

  // A client that trusts nothing refuses the certificate.
  httplib::SSLClient untrusting(s->host(), s->port());
  untrusting.set_ca_cert_store(X509_STORE_new());
  untrusting.enable_server_certificate_verification(true);
  EXPECT_FALSE(untrusting.Get("/version"));

  std::string yaml = RenderKubeconfig(s->kubeconfig());
  EXPECT_NE(yaml.find("certificate-authority-data: " + Base64Encode(s->ca_cert_pem())),
            std::string::npos);
  EXPECT_NE(yaml.find("server: " + s->url()), std::string::npos);
}

TEST(ServerStartTest, BadOptionsAreClearErrors) {
  ServerOptions o = TestOptions();
  o.listen = "localhost";
  auto r = ApiServer::Start(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("HOST:PORT"), std::string::npos);
  o = TestOptions();
  o.faults = "explode=1";
  EXPECT_FALSE(ApiServer::Start(o).ok());
  o = TestOptions();
  o.openapi_dir = "/nonexistent";
  r = ApiServer::Start(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--openapi-dir"), std::string::npos);

  // A busy port.
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  o = TestOptions();
  o.listen = "127.0.0.1:" + std::to_string(first->port());
  r = ApiServer::Start(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("in use"), std::string::npos);
}

TEST(KubeconfigTest, WritesAnAtomicPrivateFile) {
  char dir_tmpl[] = "/tmp/gpuop-kubeconfig-XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  std::string path = std::string(dir_tmpl) + "/sub/kubeconfig";
  KubeconfigParams p;
  p.server = "https://127.0.0.1:6443";
  p.ca_cert_pem = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n";
  p.token = "tok";
  ASSERT_TRUE(WriteKubeconfig(path, p).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string text = RenderKubeconfig(p);
  EXPECT_NE(text.find("current-context: gpuop-sim"), std::string::npos);
  EXPECT_NE(text.find("token: tok"), std::string::npos);
  EXPECT_NE(text.find("certificate-authority-data: " + Base64Encode(p.ca_cert_pem)),
            std::string::npos);
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
  std::system(("rm -rf " + std::string(dir_tmpl)).c_str());
}

}  // namespace
}  // namespace gpuop::simkube
