// Where the client's configuration comes from (src/kube/config.h): kubeconfig
// files with inline data or files relative to the kubeconfig, contexts, the
// errors for every missing piece, the KUBECONFIG list and ~/.kube/config, and
// the in-cluster service account, including a token rotated under a live
// client (against the API emulator).
#include "kube/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "base/files.h"
#include "kube/client.h"
#include "sim/kube/kubeconfig.h"
#include "sim/kube/server.h"
#include "sim/kube/tls.h"

namespace gpuop::kube {
namespace {

using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kube-config-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& rel, const std::string& content) const {
    std::string p = path_ + "/" + rel;
    EXPECT_TRUE(MakeDirs(DirName(p)).ok());
    EXPECT_TRUE(WriteFileAtomic(p, content).ok());
    return p;
  }

 private:
  std::string path_;
};

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv& Set(const char* name, const std::optional<std::string>& value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
    return *this;
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// Test PEM material: a real CA and a certificate/key pair.
const simkube::TlsMaterial& Pems() {
  static const simkube::TlsMaterial m = [] {
    auto r = simkube::GenerateServingCert("127.0.0.1");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : simkube::TlsMaterial{};
  }();
  return m;
}

// Two clusters, two users and three contexts, one of them the current one.
std::string TwoClusterKubeconfig(const std::string& ca_file_rel) {
  using simkube::Base64Encode;
  return "apiVersion: v1\n"
         "kind: Config\n"
         "current-context: dev\n"
         "clusters:\n"
         "- name: dev-cluster\n"
         "  cluster:\n"
         "    server: https://dev.example.com:6443/\n"
         "    certificate-authority-data: " +
         Base64Encode(Pems().ca_cert_pem) +
         "\n"
         "- name: prod-cluster\n"
         "  cluster:\n"
         "    server: https://10.0.0.1\n"
         "    certificate-authority: " +
         ca_file_rel +
         "\n"
         "- name: lab-cluster\n"
         "  cluster:\n"
         "    server: https://lab:443\n"
         "    insecure-skip-tls-verify: true\n"
         "users:\n"
         "- name: dev-user\n"
         "  user:\n"
         "    token: dev-token\n"
         "- name: prod-user\n"
         "  user:\n"
         "    client-certificate: certs/client.crt\n"
         "    client-key: certs/client.key\n"
         "- name: file-user\n"
         "  user:\n"
         "    tokenFile: secrets/token\n"
         "- name: data-user\n"
         "  user:\n"
         "    client-certificate-data: " +
         Base64Encode(Pems().cert_pem) +
         "\n"
         "    client-key-data: " +
         Base64Encode(Pems().key_pem) +
         "\n"
         "contexts:\n"
         "- name: dev\n"
         "  context: {cluster: dev-cluster, user: dev-user, namespace: team-a}\n"
         "- name: prod\n"
         "  context: {cluster: prod-cluster, user: prod-user}\n"
         "- name: lab\n"
         "  context: {cluster: lab-cluster, user: file-user}\n"
         "- name: lab-data\n"
         "  context: {cluster: lab-cluster, user: data-user}\n"
         "- name: no-user\n"
         "  context: {cluster: dev-cluster, user: ghost}\n"
         "- name: no-cluster\n"
         "  context: {cluster: nowhere, user: dev-user}\n";
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The CA one level up ("../certs/ca.crt"), the rest beside the file.
    dir_.Write("certs/ca.crt", Pems().ca_cert_pem);
    dir_.Write("certs/client.crt", Pems().cert_pem);
    dir_.Write("kube/certs/client.crt", Pems().cert_pem);
    dir_.Write("kube/certs/client.key", Pems().key_pem);
    dir_.Write("kube/secrets/token", "  file-token\n");
    path_ = dir_.Write("kube/config", TwoClusterKubeconfig("../certs/ca.crt"));
  }
  TempDir dir_;
  std::string path_;
};

TEST_F(ConfigTest, CurrentContextWithInlineData) {
  auto c = LoadKubeconfig(path_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://dev.example.com:6443");  // no trailing '/'
  EXPECT_EQ(c->ca_pem, Pems().ca_cert_pem);
  EXPECT_EQ(c->token, "dev-token");
  EXPECT_EQ(c->token_file, "");
  EXPECT_EQ(c->namespace_, "team-a");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_THAT(c->source, HasSubstr(path_));
  EXPECT_THAT(c->source, HasSubstr("\"dev\""));
}

TEST_F(ConfigTest, FilePathsAreRelativeToTheKubeconfigDirectory) {
  auto c = LoadKubeconfig(path_, "prod");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1");
  EXPECT_EQ(c->ca_pem, Pems().ca_cert_pem);
  EXPECT_EQ(c->client_cert_pem, Pems().cert_pem);
  EXPECT_EQ(c->client_key_pem, Pems().key_pem);
  EXPECT_EQ(c->token, "");
  EXPECT_EQ(c->namespace_, "default");  // the context names none
}

TEST_F(ConfigTest, TokenFileIsReadAndKeptForRereading) {
  auto c = LoadKubeconfig(path_, "lab");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->token, "file-token");
  EXPECT_EQ(c->token_file, dir_.path() + "/kube/secrets/token");
}

TEST_F(ConfigTest, ClientCertificateData) {
  auto c = LoadKubeconfig(path_, "lab-data");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->client_cert_pem, Pems().cert_pem);
  EXPECT_EQ(c->client_key_pem, Pems().key_pem);
}

TEST_F(ConfigTest, UnknownContextListsTheOnesThereAre) {
  auto c = LoadKubeconfig(path_, "staging");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr(path_));
  EXPECT_THAT(c.status().message(), HasSubstr("no context \"staging\""));
  EXPECT_THAT(c.status().message(), HasSubstr("dev, prod, lab"));
  EXPECT_THAT(c.status().message(), HasSubstr("--context"));
}

TEST_F(ConfigTest, ContextNamingAMissingUserOrCluster) {
  auto u = LoadKubeconfig(path_, "no-user");
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.status().message(),
              HasSubstr("context \"no-user\" names user \"ghost\", which the file does not "
                        "define"));
  auto c = LoadKubeconfig(path_, "no-cluster");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("context \"no-cluster\" names cluster \"nowhere\", which the file does "
                        "not define"));
}

TEST_F(ConfigTest, MissingPiecesAreNamed) {
  // No current-context.
  std::string p = dir_.Write("a/config",
                             "apiVersion: v1\nkind: Config\nclusters: []\ncontexts:\n"
                             "- name: x\n  context: {cluster: c}\n");
  auto c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("has no current-context"));
  EXPECT_THAT(c.status().message(), HasSubstr("(contexts: x)"));

  // A cluster without a server.
  p = dir_.Write("b/config",
                 "current-context: x\nclusters:\n- name: c\n  cluster: {}\ncontexts:\n"
                 "- name: x\n  context: {cluster: c}\n");
  c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("cluster \"c\" has no server"));

  // A certificate-authority file that is not there.
  p = dir_.Write("c/config",
                 "current-context: x\nclusters:\n- name: c\n  cluster:\n    server: https://h\n"
                 "    certificate-authority: missing-ca.crt\ncontexts:\n"
                 "- name: x\n  context: {cluster: c}\n");
  c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(),
              HasSubstr("certificate-authority " + dir_.path() + "/c/missing-ca.crt"));

  // Data that is not base64.
  p = dir_.Write("d/config",
                 "current-context: x\nclusters:\n- name: c\n  cluster:\n    server: https://h\n"
                 "    certificate-authority-data: '***'\ncontexts:\n"
                 "- name: x\n  context: {cluster: c}\n");
  c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("certificate-authority-data is not valid base64"));

  // A client certificate without its key.
  p = dir_.Write("e/config",
                 "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://h}\n"
                 "users:\n- name: u\n  user: {client-certificate: ../certs/client.crt}\n"
                 "contexts:\n- name: x\n  context: {cluster: c, user: u}\n");
  c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("client certificate but no key"));

  // An exec plugin, which gpuop does not run.
  p = dir_.Write("f/config",
                 "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://h}\n"
                 "users:\n- name: u\n  user:\n    exec: {command: aws}\n"
                 "contexts:\n- name: x\n  context: {cluster: c, user: u}\n");
  c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(c.status().message(), HasSubstr("exec plugin"));
}

TEST_F(ConfigTest, UnreadableOrMalformedFiles) {
  auto c = LoadKubeconfig(dir_.path() + "/nope");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr(dir_.path() + "/nope does not exist"));

  std::string p = dir_.Write("bad/config", "clusters: [unclosed\n");
  c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("is not valid YAML"));

  p = dir_.Write("list/config", "- a\n- b\n");
  c = LoadKubeconfig(p);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("is not a kubeconfig"));
}

TEST_F(ConfigTest, ResolutionOrder) {
  ScopedEnv env;
  env.Set("KUBERNETES_SERVICE_HOST", std::nullopt).Set("KUBERNETES_SERVICE_PORT", std::nullopt);
  std::string other = dir_.Write("other/config",
                                 "current-context: o\nclusters:\n- name: c\n  cluster:\n"
                                 "    server: https://other\ncontexts:\n"
                                 "- name: o\n  context: {cluster: c}\n");

  // KUBECONFIG: the first file of the list that exists.
  env.Set("KUBECONFIG", dir_.path() + "/missing:" + other + ":" + path_);
  auto c = LoadRestConfig({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://other");

  // An explicit path and context win over everything.
  c = LoadRestConfig({path_, "prod"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1");

  env.Set("KUBECONFIG", dir_.path() + "/missing");
  c = LoadRestConfig({});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("KUBECONFIG=" + dir_.path() + "/missing"));

  // ~/.kube/config through $HOME.
  env.Set("KUBECONFIG", std::nullopt).Set("HOME", dir_.path());
  dir_.Write(".kube/config", TwoClusterKubeconfig("/dev/null"));
  c = LoadRestConfig({"", "dev"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://dev.example.com:6443");

  env.Set("HOME", dir_.path() + "/empty-home");
  c = LoadRestConfig({});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("no Kubernetes configuration found"));
  EXPECT_THAT(c.status().message(), HasSubstr("--kubeconfig"));
}

// An in-cluster service-account directory under a temporary root.
class ConfigInClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.Set("KUBERNETES_SERVICE_HOST", "10.96.0.1").Set("KUBERNETES_SERVICE_PORT", "443");
    sa_ = "/var/run/secrets/kubernetes.io/serviceaccount";
    dir_.Write(sa_ + "/token", "sa-token\n");
    dir_.Write(sa_ + "/ca.crt", Pems().ca_cert_pem);
    dir_.Write(sa_ + "/namespace", "gpu-operator");
  }
  TempDir dir_;
  ScopedEnv env_;
  std::string sa_;
};

TEST_F(ConfigInClusterTest, ReadsTheServiceAccount) {
  auto c = InClusterConfig(dir_.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token, "sa-token");
  EXPECT_EQ(c->token_file, dir_.path() + sa_ + "/token");
  EXPECT_EQ(c->ca_pem, Pems().ca_cert_pem);
  EXPECT_EQ(c->namespace_, "gpu-operator");
  EXPECT_THAT(c->source, HasSubstr("in-cluster"));
}

TEST_F(ConfigInClusterTest, Ipv6ServiceHostGoesInBrackets) {
  env_.Set("KUBERNETES_SERVICE_HOST", "fd00:10:96::1").Set("KUBERNETES_SERVICE_PORT", "6443");
  auto c = InClusterConfig(dir_.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://[fd00:10:96::1]:6443");
}

TEST_F(ConfigInClusterTest, MissingPieces) {
  ASSERT_EQ(::unlink((dir_.path() + sa_ + "/namespace").c_str()), 0);
  auto c = InClusterConfig(dir_.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->namespace_, "default");

  ASSERT_EQ(::unlink((dir_.path() + sa_ + "/token").c_str()), 0);
  c = InClusterConfig(dir_.path());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(sa_ + "/token"));
  EXPECT_THAT(c.status().message(), HasSubstr("automountServiceAccountToken"));

  env_.Set("KUBERNETES_SERVICE_PORT", "http");
  EXPECT_THAT(InClusterConfig(dir_.path()).status().message(),
              HasSubstr("KUBERNETES_SERVICE_PORT=http"));
  env_.Set("KUBERNETES_SERVICE_HOST", std::nullopt);
  c = InClusterConfig(dir_.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("KUBERNETES_SERVICE_HOST"));
}

TEST_F(ConfigInClusterTest, TokenRotationIsPickedUpByALiveClient) {
  // One empty OpenAPI document: the emulator starts at once, and schemas
  // play no part here.
  simkube::ServerOptions o;
  o.openapi_dir = dir_.path() + "/openapi";
  dir_.Write("openapi/api_v1.json",
             R"({"openapi":"3.0.0","paths":{},"components":{"schemas":{}}})");
  o.threads = 8;
  o.tls = true;
  o.token = "sa-token";
  auto server = simkube::ApiServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  env_.Set("KUBERNETES_SERVICE_HOST", (*server)->host())
      .Set("KUBERNETES_SERVICE_PORT", std::to_string((*server)->port()));
  dir_.Write(sa_ + "/ca.crt", (*server)->ca_cert_pem());

  auto config = InClusterConfig(dir_.path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto client = Client::New(
      *config, RetryPolicy{1, std::chrono::milliseconds(1), std::chrono::milliseconds(1)});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE((*client)->Get(resources::kNamespaces, "", "default").ok());

  // The kubelet replaces the token: the client must use the new one (here
  // one the server refuses, so the change shows).
  dir_.Write(sa_ + "/token", "rotated-but-unknown-token\n");
  auto got = (*client)->Get(resources::kNamespaces, "", "default");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().http_status(), 401);
  EXPECT_THAT(got.status().message(), HasSubstr("in-cluster service account"));

  dir_.Write(sa_ + "/token", "sa-token");
  got = (*client)->Get(resources::kNamespaces, "", "default");
  EXPECT_TRUE(got.ok()) << got.status().ToString();
}

}  // namespace
}  // namespace gpuop::kube
