// Fault injection of the API emulator (sim/kube/faults.h) and its audit log
// (audit.h): the spec parser, the injector's decisions, and what a client
// sees over HTTP — 429 with Retry-After honoured by a retrying client,
// dropped watch streams, forced 410s, a paused server.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "sim/kube/audit.h"
#include "sim/kube/faults.h"
#include "sim/kube/server.h"

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

TEST(FaultSpecTest, ParsesEveryKindOfRule) {
  auto rules = ParseFaultSpec(
      "error=429,verb=list|watch,resource=pods|deployments.apps,rate=0.5,retry-after=2,count=3;"
      " latency=250ms ; drop-watch=2,resource=nodes; gone,verb=watch; pause; latency=2s");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  ASSERT_EQ(rules->size(), 6u);
  const FaultRule& e = (*rules)[0];
  EXPECT_EQ(e.kind, FaultKind::kError);
  EXPECT_EQ(e.code, 429);
  EXPECT_EQ(e.verbs, (std::vector<std::string>{"list", "watch"}));
  EXPECT_EQ(e.resources, (std::vector<std::string>{"pods", "deployments.apps"}));
  EXPECT_DOUBLE_EQ(e.rate, 0.5);
  EXPECT_EQ(e.retry_after_s, 2);
  EXPECT_EQ(e.remaining, 3);
  EXPECT_EQ((*rules)[1].latency, std::chrono::milliseconds(250));
  EXPECT_EQ((*rules)[2].kind, FaultKind::kDropWatch);
  EXPECT_EQ((*rules)[2].after_events, 2);
  EXPECT_EQ((*rules)[3].kind, FaultKind::kGone);
  EXPECT_EQ((*rules)[4].kind, FaultKind::kPause);
  EXPECT_EQ((*rules)[5].latency, std::chrono::seconds(2));
  EXPECT_TRUE(ParseFaultSpec("").ok());
}

TEST(FaultSpecTest, BadSpecsNameTheRuleAndToken) {
  for (const char* bad : {"explode", "error=200", "error=abc", "latency=5", "error=500,rate=2",
                          "error=500,verb=fly", "error=500,colour=red", "gone=1"}) {
    auto r = ParseFaultSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("fault rule"), std::string::npos) << r.status().message();
  }
  FaultInjector f;
  ASSERT_TRUE(f.Set("error=500").ok());
  EXPECT_FALSE(f.Set("error=500,verb=fly").ok());
  EXPECT_EQ(f.ToJson()["spec"], "error=500");  // a bad spec changes nothing
}

TEST(FaultInjectorTest, MatchesVerbsAndResourcesAndSpendsCounts) {
  FaultInjector f;
  ASSERT_TRUE(f.Set("error=503,verb=get,resource=deployments.apps,count=2;latency=10ms,verb=list;"
                    "gone,resource=nodes")
                  .ok());
  EXPECT_FALSE(f.Decide("get", "deployments", "").error_code);  // core "deployments" is not apps
  EXPECT_FALSE(f.Decide("list", "deployments", "apps").error_code);
  EXPECT_EQ(f.Decide("get", "deployments", "apps").error_code, 503);
  EXPECT_EQ(f.Decide("get", "deployments", "apps").error_code, 503);
  EXPECT_FALSE(f.Decide("get", "deployments", "apps").error_code);  // spent
  EXPECT_EQ(f.Decide("list", "pods", "").latency, std::chrono::milliseconds(10));
  EXPECT_TRUE(f.Decide("watch", "nodes", "").gone);
  EXPECT_FALSE(f.Decide("create", "nodes", "").gone);  // 410 only for watch and list
  EXPECT_EQ(f.ToJson()["rules"][0]["remaining"], 0);
  f.Clear();
  EXPECT_FALSE(f.Decide("get", "deployments", "apps").error_code);
}

// after=N is a crash point: the first N writes land, every later one fails.
TEST(FaultInjectorTest, AfterLetsTheFirstMatchingRequestsThrough) {
  FaultInjector f;
  ASSERT_TRUE(f.Set("error=500,verb=create|patch,after=2").ok());
  EXPECT_FALSE(f.Decide("get", "nodes", "").error_code);  // not a match: not counted
  EXPECT_FALSE(f.Decide("create", "nodes", "").error_code);
  EXPECT_EQ(f.ToJson()["rules"][0]["after"], 1);
  EXPECT_FALSE(f.Decide("patch", "nodes", "").error_code);
  EXPECT_EQ(f.ToJson()["rules"][0]["fired"], 0);
  EXPECT_EQ(f.Decide("create", "daemonsets", "apps").error_code, 500);
  EXPECT_EQ(f.Decide("patch", "nodes", "").error_code, 500);
  EXPECT_EQ(f.ToJson()["rules"][0]["fired"], 2);
  EXPECT_FALSE(ParseFaultSpec("error=500,after=x").ok());
}

TEST(FaultInjectorTest, RatesHitSomeRequestsReproducibly) {
  auto count_hits = [] {
    FaultInjector f(42);
    EXPECT_TRUE(f.Set("error=500,rate=0.5").ok());
    int hits = 0;
    for (int i = 0; i < 200; ++i) hits += f.Decide("get", "pods", "").error_code ? 1 : 0;
    return hits;
  };
  int hits = count_hits();
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, 200);
  EXPECT_EQ(count_hits(), hits);  // same seed, same requests, same hits
}

TEST(AuditLogTest, WritesJsonLinesAndCounts) {
  char tmpl[] = "/tmp/gpuop-audit-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  AuditLog log;
  ASSERT_TRUE(log.Open(tmpl).ok());
  log.Record({"get", "", "pods", "", "default", "p1", "admin", 200});
  log.Record({"list", "apps", "deployments", "", "", "", "admin", 429});
  std::ifstream in(tmpl);
  std::string line;
  std::vector<Json> lines;
  while (std::getline(in, line)) lines.push_back(Json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["verb"], "get");
  EXPECT_EQ(lines[0]["name"], "p1");
  EXPECT_EQ(lines[1]["code"], 429);
  EXPECT_EQ(lines[1]["group"], "apps");
  Json c = log.Counters();
  EXPECT_EQ(c["total"], 2);
  EXPECT_EQ(c["codes"]["429"], 1);
  log.ResetCounters();
  EXPECT_EQ(log.Counters()["total"], 0);
  EXPECT_FALSE(log.Open("/nonexistent/dir/audit").ok());
  unlink(tmpl);
}

// --- Over HTTP --------------------------------------------------------------

class FaultServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    o.threads = 16;
    auto s = ApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    client_ = std::make_unique<httplib::Client>(server_->host(), server_->port());
    client_->set_read_timeout(60);
  }

  void SetFaults(const std::string& spec) {
    auto r = client_->Put("/gpuop-sim/faults", spec, "text/plain");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }

  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(FaultServerTest, TooManyRequestsCarriesRetryAfterAndARetryingClientGetsThrough) {
  SetFaults("error=429,verb=list,resource=configmaps,count=2,retry-after=1");
  int attempts = 0, throttled = 0, last = 0;
  while (attempts < 10) {
    ++attempts;
    auto r = client_->Get("/api/v1/namespaces/default/configmaps");
    ASSERT_TRUE(r);
    last = r->status;
    if (r->status != 429) break;
    ++throttled;
    Json status = Json::parse(r->body);
    EXPECT_EQ(status["reason"], "TooManyRequests");
    EXPECT_EQ(status["details"]["retryAfterSeconds"], 1);
    std::string retry_after = r->get_header_value("Retry-After");
    ASSERT_EQ(retry_after, "1");
    std::this_thread::sleep_for(std::chrono::seconds(std::stoi(retry_after)));
  }
  EXPECT_EQ(last, 200);
  EXPECT_EQ(throttled, 2);
  EXPECT_EQ(attempts, 3);
  // Other verbs and resources were never hit.
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default")->status, 200);
  Json audit = Json::parse(client_->Get("/gpuop-sim/audit")->body);
  EXPECT_EQ(audit["codes"]["429"], 2);
}

TEST_F(FaultServerTest, InjectedServerErrorsAndLatency) {
  SetFaults("error=500,verb=create,resource=configmaps;latency=20ms,verb=get");
  auto r = client_->Post("/api/v1/namespaces/default/configmaps",
                         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}})",
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(Json::parse(r->body)["reason"], "InternalError");
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default")->status, 200);  // slow, but answered
  auto bad = client_->Put("/gpuop-sim/faults", "error=9000", "text/plain");
  EXPECT_EQ(bad->status, 400);
  ASSERT_EQ(client_->Delete("/gpuop-sim/faults")->status, 200);
  EXPECT_EQ(Json::parse(client_->Get("/gpuop-sim/faults")->body)["spec"], "");
}

TEST_F(FaultServerTest, DroppedWatchStreamEndsWithoutAFinalChunk) {
  SetFaults("drop-watch=1,resource=namespaces");
  std::string data;
  std::thread creator([this] {
    client_->Post("/api/v1/namespaces",
                  R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"dropped"}})",
                  "application/json");
  });
  httplib::Client watcher(server_->host(), server_->port());
  watcher.set_read_timeout(60);
  // From "0": the initial ADDED events come first; the stream is cut after one.
  auto r = watcher.Get("/api/v1/namespaces?watch=true", [&](const char* d, size_t n) {
    data.append(d, n);
    return true;
  });
  creator.join();
  EXPECT_FALSE(r);  // the connection closed mid-stream: an error, not a clean end
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(std::count(data.begin(), data.end(), '\n'), 1);
  EXPECT_EQ(Json::parse(data.substr(0, data.find('\n')))["type"], "ADDED");
}

TEST_F(FaultServerTest, ForcedGoneOnWatchAndOnListContinue) {
  SetFaults("gone,resource=namespaces");
  auto w = client_->Get("/api/v1/namespaces?watch=true&resourceVersion=1");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->status, 200);
  Json ev = Json::parse(w->body.substr(0, w->body.find('\n')));
  EXPECT_EQ(ev["type"], "ERROR");
  EXPECT_EQ(ev["object"]["code"], 410);
  EXPECT_EQ(ev["object"]["reason"], "Expired");
  // A first page is fine; its continuation is expired.
  ASSERT_EQ(client_->Get("/api/v1/namespaces?limit=1")->status, 200);
  Json page = Json::parse(client_->Get("/api/v1/namespaces?limit=1")->body);
  std::string cont = page["metadata"]["continue"];
  auto next = client_->Get(("/api/v1/namespaces?limit=1&continue=" + UrlEncode(cont)).c_str());
  EXPECT_EQ(next->status, 410);
  EXPECT_EQ(Json::parse(next->body)["reason"], "Expired");
}

TEST_F(FaultServerTest, PausedServerHoldsRequestsUntilResumed) {
  SetFaults("pause");
  std::atomic<bool> done{false};
  int status = 0;
  std::thread t([&] {
    httplib::Client c(server_->host(), server_->port());
    c.set_read_timeout(60);
    auto r = c.Get("/api/v1/namespaces/default");
    if (r) status = r->status;
    done = true;
  });
  // The control endpoint still answers while the API is paused.
  Json faults = Json::parse(client_->Get("/gpuop-sim/faults")->body);
  EXPECT_EQ(faults["spec"], "pause");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(done);  // held, however long we look
  ASSERT_EQ(client_->Delete("/gpuop-sim/faults")->status, 200);
  t.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(status, 200);
}

TEST_F(FaultServerTest, StopReleasesPausedRequestsAndOpenWatches) {
  SetFaults("pause");
  std::thread held([this] {
    httplib::Client c(server_->host(), server_->port());
    c.set_read_timeout(60);
    c.Get("/api/v1/namespaces/default");
  });
  std::thread watch([this] {
    httplib::Client c(server_->host(), server_->port());
    c.set_read_timeout(60);
    c.Get("/api/v1/namespaces?watch=true", [](const char*, size_t) { return true; });
  });
  // Give both a chance to reach the server, then stop it: neither may hang.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->Stop();
  held.join();
  watch.join();
}

}  // namespace
}  // namespace gpuop::simkube
