// The API emulator with RBAC on (sim/kube/server.h): ServiceAccount tokens
// from the TokenRequest API, 403s with kube-apiserver's Status, the
// bootstrap roles, SelfSubjectAccessReview, impersonation and escalation
// prevention; and AlwaysAllow when RBAC is off.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "sim/kube/server.h"

namespace gpuop::simkube {
namespace {

using Json = nlohmann::json;

constexpr const char* kAdmin = "admin-token";
constexpr const char* kNs = "gpu-operator";
constexpr const char* kSaUser = "system:serviceaccount:gpu-operator:gfd";

std::unique_ptr<ApiServer> Start(bool rbac) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.openapi_dir = GPUOP_SOURCE_DIR "/api/openapi/1.35";
  o.threads = 8;
  o.token = kAdmin;
  o.rbac = rbac;
  auto s = ApiServer::Start(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

struct Reply {
  int code = 0;
  Json body;
};

class RbacServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = Start(true);
    ASSERT_NE(server_, nullptr);
    ASSERT_EQ(Call(kAdmin, "POST", "/api/v1/namespaces",
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}})
                  .code,
              201);
    ASSERT_EQ(Call(kAdmin, "POST", std::string("/api/v1/namespaces/") + kNs + "/serviceaccounts",
                   {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "gfd"}}}})
                  .code,
              201);
    sa_token_ = TokenFor("gfd");
    ASSERT_FALSE(sa_token_.empty());
  }

  Reply Call(const std::string& token, const std::string& method, const std::string& path,
             const Json& body = nullptr, httplib::Headers headers = {}) {
    httplib::Client c(server_->host(), server_->port());
    headers.emplace("Authorization", "Bearer " + token);
    std::string text = body.is_null() ? "" : body.dump();
    httplib::Result r = method == "GET"      ? c.Get(path, headers)
                        : method == "DELETE" ? c.Delete(path, headers)
                        : method == "PATCH"
                            ? c.Patch(path, headers, text, "application/merge-patch+json")
                            : c.Post(path, headers, text, "application/json");
    if (!r) return {};
    Reply out{r->status, nullptr};
    try {
      out.body = Json::parse(r->body);
    } catch (const std::exception&) {
    }
    return out;
  }

  std::string TokenFor(const std::string& sa) {
    Reply r = Call(kAdmin, "POST",
                   std::string("/api/v1/namespaces/") + kNs + "/serviceaccounts/" + sa + "/token",
                   {{"apiVersion", "authentication.k8s.io/v1"},
                    {"kind", "TokenRequest"},
                    {"spec", {{"expirationSeconds", 600}}}});
    EXPECT_EQ(r.code, 201) << r.body.dump();
    EXPECT_EQ(r.body.value("kind", ""), "TokenRequest");
    return r.body.value("status", Json::object()).value("token", "");
  }

  void Grant(const std::string& name, Json rules) {
    ASSERT_EQ(Call(kAdmin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                   {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "ClusterRole"},
                    {"metadata", {{"name", name}}},
                    {"rules", std::move(rules)}})
                  .code,
              201);
    ASSERT_EQ(Call(kAdmin, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                   {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "ClusterRoleBinding"},
                    {"metadata", {{"name", name}}},
                    {"roleRef",
                     {{"apiGroup", "rbac.authorization.k8s.io"},
                      {"kind", "ClusterRole"},
                      {"name", name}}},
                    {"subjects", {{{"kind", "ServiceAccount"}, {"name", "gfd"}, {"namespace", kNs}}}}})
                  .code,
              201);
  }

  bool CanI(const std::string& token, Json attributes, httplib::Headers headers = {}) {
    Reply r = Call(token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                   {{"apiVersion", "authorization.k8s.io/v1"},
                    {"kind", "SelfSubjectAccessReview"},
                    {"spec", {{"resourceAttributes", std::move(attributes)}}}},
                   std::move(headers));
    EXPECT_EQ(r.code, 201) << r.body.dump();
    return r.body.value("status", Json::object()).value("allowed", false);
  }

  std::unique_ptr<ApiServer> server_;
  std::string sa_token_;
};

TEST_F(RbacServerTest, ServiceAccountTokenIsAuthorisedByRbac) {
  // Discovery and SelfSubjectAccessReview through the bootstrap roles.
  EXPECT_EQ(Call(sa_token_, "GET", "/version").code, 200);
  EXPECT_EQ(Call(sa_token_, "GET", "/apis").code, 200);
  EXPECT_EQ(Call(sa_token_, "GET", "/api/v1").code, 200);

  Reply denied = Call(sa_token_, "PATCH", "/api/v1/nodes/n1", {{"metadata", Json::object()}});
  EXPECT_EQ(denied.code, 403);
  EXPECT_EQ(denied.body.value("reason", ""), "Forbidden");
  EXPECT_EQ(denied.body.value("message", ""),
            std::string("nodes \"n1\" is forbidden: User \"") + kSaUser +
                "\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope");
  EXPECT_EQ(denied.body["details"], (Json{{"name", "n1"}, {"kind", "nodes"}}));

  Reply evict = Call(sa_token_, "POST", "/api/v1/namespaces/default/pods/p/eviction",
                     {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}});
  EXPECT_EQ(evict.code, 403);
  EXPECT_EQ(evict.body.value("message", ""),
            std::string("pods \"p\" is forbidden: User \"") + kSaUser +
                "\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace "
                "\"default\"");

  Reply path = Call(sa_token_, "GET", "/gpuop-sim/audit");
  EXPECT_EQ(path.code, 403);
  EXPECT_EQ(path.body.value("message", ""),
            std::string("forbidden: User \"") + kSaUser + "\" cannot get path \"/gpuop-sim/audit\"");

  Grant("nodes", {{{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"list"}}}});
  EXPECT_EQ(Call(sa_token_, "GET", "/api/v1/nodes").code, 200);
  EXPECT_EQ(Call(sa_token_, "GET", "/api/v1/nodes/n1").code, 403);  // get is not list
  EXPECT_EQ(Call(kAdmin, "GET", "/api/v1/nodes/n1").code, 404);     // admin: system:masters
}

TEST_F(RbacServerTest, TokenDiesWithItsServiceAccount) {
  EXPECT_EQ(Call("not-a-token", "GET", "/version").code, 401);
  const std::string sa = std::string("/api/v1/namespaces/") + kNs + "/serviceaccounts/gfd";
  ASSERT_EQ(Call(kAdmin, "DELETE", sa).code, 200);
  EXPECT_EQ(Call(sa_token_, "GET", "/version").code, 401);
  // A ServiceAccount of the same name is another one (new uid).
  ASSERT_EQ(Call(kAdmin, "POST", std::string("/api/v1/namespaces/") + kNs + "/serviceaccounts",
                 {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "gfd"}}}})
                .code,
            201);
  EXPECT_EQ(Call(sa_token_, "GET", "/version").code, 401);
  EXPECT_EQ(Call(TokenFor("gfd"), "GET", "/version").code, 200);
  EXPECT_EQ(Call(kAdmin, "POST",
                 std::string("/api/v1/namespaces/") + kNs + "/serviceaccounts/missing/token",
                 Json::object())
                .code,
            404);
}

TEST_F(RbacServerTest, SelfSubjectAccessReviewAndImpersonation) {
  Json patch_nodes{{"verb", "patch"}, {"resource", "nodes"}};
  EXPECT_FALSE(CanI(sa_token_, patch_nodes));
  EXPECT_TRUE(CanI(kAdmin, patch_nodes));
  // kubectl auth can-i --as: the admin impersonates the ServiceAccount.
  httplib::Headers as_sa{{"Impersonate-User", kSaUser}};
  EXPECT_FALSE(CanI(kAdmin, patch_nodes, as_sa));
  Grant("patch-nodes", {{{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"patch"}}}});
  EXPECT_TRUE(CanI(sa_token_, patch_nodes));
  EXPECT_TRUE(CanI(kAdmin, patch_nodes, as_sa));
  EXPECT_FALSE(CanI(kAdmin, {{"verb", "delete"}, {"resource", "nodes"}}, as_sa));

  // Impersonating needs `impersonate` on the user.
  Reply r = Call(sa_token_, "GET", "/api/v1/nodes", nullptr, {{"Impersonate-User", "alice"}});
  EXPECT_EQ(r.code, 403);
  EXPECT_EQ(r.body.value("message", ""),
            std::string("users \"alice\" is forbidden: User \"") + kSaUser +
                "\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope");
  // Impersonated requests are authorised as the one impersonated.
  EXPECT_EQ(Call(kAdmin, "GET", "/api/v1/nodes", nullptr, as_sa).code, 403);
  EXPECT_EQ(Call(kAdmin, "GET", "/api/v1/nodes", nullptr,
                 {{"Impersonate-User", "alice"}, {"Impersonate-Group", "system:masters"}})
                .code,
            200);
}

TEST_F(RbacServerTest, EscalationNeedsTheGrantedPermissionsOrEscalateAndBind) {
  Grant("rbac-writer",
        {{{"apiGroups", {"rbac.authorization.k8s.io"}},
          {"resources", {"clusterroles", "clusterrolebindings"}},
          {"verbs", {"create"}}},
         {{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"get"}}}});
  auto role = [](const std::string& name, Json verbs) {
    return Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                {"kind", "ClusterRole"},
                {"metadata", {{"name", name}}},
                {"rules", {{{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", verbs}}}}};
  };
  const std::string roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
  EXPECT_EQ(Call(sa_token_, "POST", roles, role("held", {"get"})).code, 201);
  Reply r = Call(sa_token_, "POST", roles, role("more", {"get", "delete"}));
  EXPECT_EQ(r.code, 403);
  EXPECT_EQ(r.body.value("message", ""),
            std::string("clusterroles.rbac.authorization.k8s.io \"more\" is forbidden: user \"") +
                kSaUser +
                "\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:gpu-operator\" "
                "\"system:authenticated\"]) is attempting to grant RBAC permissions not currently "
                "held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"delete\"]}");

  // A binding to a role with more than the binder holds needs `bind`.
  ASSERT_EQ(Call(kAdmin, "POST", roles, role("admin-made", {"delete"})).code, 201);
  Json binding{{"apiVersion", "rbac.authorization.k8s.io/v1"},
               {"kind", "ClusterRoleBinding"},
               {"metadata", {{"name", "b"}}},
               {"roleRef",
                {{"apiGroup", "rbac.authorization.k8s.io"},
                 {"kind", "ClusterRole"},
                 {"name", "admin-made"}}},
               {"subjects", {{{"kind", "User"}, {"name", "bob"}}}}};
  const std::string bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
  EXPECT_EQ(Call(sa_token_, "POST", bindings, binding).code, 403);
  Grant("escalate-bind", {{{"apiGroups", {"rbac.authorization.k8s.io"}},
                           {"resources", {"clusterroles"}},
                           {"verbs", {"escalate", "bind"}}}});
  EXPECT_EQ(Call(sa_token_, "POST", bindings, binding).code, 201);
  EXPECT_EQ(Call(sa_token_, "POST", roles, role("more", {"get", "delete"})).code, 201);
}

TEST_F(RbacServerTest, ApplyThatCreatesNeedsCreate) {
  Grant("cm-patch", {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", {"patch"}}}});
  auto apply = [&](const std::string& token) {
    httplib::Client c(server_->host(), server_->port());
    auto r = c.Patch(
        std::string("/api/v1/namespaces/") + kNs + "/configmaps/cm?fieldManager=test",
        {{"Authorization", "Bearer " + token}},
        R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"k":"v"}})",
        "application/apply-patch+yaml");
    return r ? r->status : 0;
  };
  EXPECT_EQ(apply(sa_token_), 403);
  EXPECT_EQ(apply(kAdmin), 201);
  EXPECT_EQ(apply(sa_token_), 200);  // it exists now: a patch
}

TEST(RbacOffTest, EveryAuthenticatedUserMayDoEverything) {
  auto server = Start(false);
  ASSERT_NE(server, nullptr);
  httplib::Client c(server->host(), server->port());
  httplib::Headers admin{{"Authorization", std::string("Bearer ") + kAdmin}};
  ASSERT_EQ(c.Post("/api/v1/namespaces/default/serviceaccounts", admin,
                   R"({"metadata":{"name":"sa"}})", "application/json")
                ->status,
            201);
  auto tr = c.Post("/api/v1/namespaces/default/serviceaccounts/sa/token", admin, "{}",
                   "application/json");
  ASSERT_EQ(tr->status, 201);
  std::string token = Json::parse(tr->body)["status"]["token"];
  httplib::Headers sa{{"Authorization", "Bearer " + token}};
  EXPECT_EQ(c.Get("/api/v1/nodes", sa)->status, 200);
  // No bootstrap roles are made without RBAC.
  auto crs = c.Get("/apis/rbac.authorization.k8s.io/v1/clusterroles", admin);
  EXPECT_TRUE(Json::parse(crs->body)["items"].empty());
}

}  // namespace
}  // namespace gpuop::simkube
