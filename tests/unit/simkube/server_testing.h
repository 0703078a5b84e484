// A fixture for tests of the API emulator's HTTP front end: one server per
// suite (with the Kubernetes 1.35 schemas), an HTTP client and a namespace of
// the test's own name per test, so tests never see each other's objects.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "sim/kube/server.h"

namespace gpuop::simkube::testing {

class ServerTest : public ::testing::Test {
 protected:
  using Json = nlohmann::json;

  static void SetUpTestSuite() {
    ServerOptions o;
    o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
    o.threads = 8;
    auto s = ApiServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<httplib::Client>(server_->host(), server_->port());
    client_->set_read_timeout(60);
    ns_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : ns_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ASSERT_EQ(Send("POST", "/api/v1/namespaces", {{"metadata", {{"name", ns_}}}}).first, 201);
  }

  // One request; the status code (0 when no answer came) and the JSON body.
  std::pair<int, Json> Send(const std::string& method, const std::string& path, const Json& body,
                            const std::string& type = "application/json") {
    const std::string text = body.is_null() ? "" : body.dump();
    httplib::Result r = method == "POST"    ? client_->Post(path, text, type)
                        : method == "PUT"   ? client_->Put(path, text, type)
                        : method == "PATCH" ? client_->Patch(path, text, type)
                                            : client_->Get(path);
    if (!r) return {0, nullptr};
    return {r->status, Json::parse(r->body, nullptr, false)};
  }
  std::pair<int, Json> Get(const std::string& path) { return Send("GET", path, nullptr); }
  std::pair<int, Json> Post(const std::string& path, const Json& body) {
    return Send("POST", path, body);
  }

  static inline ApiServer* server_ = nullptr;
  std::unique_ptr<httplib::Client> client_;
  std::string ns_;
};

}  // namespace gpuop::simkube::testing
