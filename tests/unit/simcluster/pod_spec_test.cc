#include "sim/cluster/pod_spec.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>

#include "base/files.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::simcluster {
namespace {

using ::gpuop::testing::TempDir;

std::string Env(const ContainerPlan& p, const std::string& name) {
  for (const auto& [k, v] : p.env) {
    if (k == name) return v;
  }
  return "<unset>";
}

class PodSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.node_name = "node-a";
    ctx_.node_ip = "10.99.0.2";
    ctx_.host_root = dir_.path() + "/root";
    ctx_.pods_dir = ctx_.host_root + "/var/lib/kubelet/pods";
    ctx_.api_host = "10.99.0.1";
    ctx_.api_port = 6443;
    ctx_.node_allocatable = {{"cpu", "16"}, {"memory", "64Gi"}};
    ASSERT_TRUE(MakeDirs(ctx_.host_root).ok());
    ctx_.ca_file = dir_.path() + "/ca.crt";
    ASSERT_TRUE(WriteFileAtomic(ctx_.ca_file, "CA PEM").ok());
    configmaps_["ns1/cfg"] = {{"data", {{"A", "alpha"}, {"B", "beta"}, {"bad=key", "x"}}},
                              {"binaryData", {{"BIN", "aGk="}}}};
    secrets_["ns1/sec"] = {{"data", {{"PASS", "czNjcjN0"}, {"USER", "YWRtaW4="}}}};
    ctx_.get_configmap = [this](const std::string& ns, const std::string& name) -> Result<Json> {
      auto it = configmaps_.find(ns + "/" + name);
      if (it == configmaps_.end()) return NotFound("configmaps \"" + name + "\" not found");
      return it->second;
    };
    ctx_.get_secret = [this](const std::string& ns, const std::string& name) -> Result<Json> {
      auto it = secrets_.find(ns + "/" + name);
      if (it == secrets_.end()) return NotFound("secrets \"" + name + "\" not found");
      return it->second;
    };
    ctx_.service_account_token = [this](const Json& pod, const std::string& audience,
                                        int64_t exp) -> Result<std::string> {
      token_requests_.push_back(audience + "/" + std::to_string(exp));
      return "token-for-" + pod["spec"].value("serviceAccountName", std::string("default"));
    };
  }

  Json Pod(Json spec) {
    return {{"metadata",
             {{"name", "p1"},
              {"namespace", "ns1"},
              {"uid", "uid-1"},
              {"labels", {{"app", "web"}, {"tier", "front"}}},
              {"annotations", {{"note", "hello"}}}}},
            {"spec", std::move(spec)}};
  }

  Result<ContainerPlan> Plan(const Json& pod, size_t i = 0) {
    auto vols = PrepareVolumes(pod, ctx_);
    if (!vols.ok()) return vols.status();
    return PlanContainer(pod, pod["spec"]["containers"][i], ctx_, *vols);
  }

  std::string Read(const std::string& p) { return ReadFile(p).value_or("<missing>"); }
  mode_t Mode(const std::string& p) {
    struct stat st {};
    ::stat(p.c_str(), &st);
    return st.st_mode & 07777;
  }

  TempDir dir_{"podspec"};
  NodeContext ctx_;
  std::map<std::string, Json> configmaps_, secrets_;
  std::vector<std::string> token_requests_;
};

// ---- env -------------------------------------------------------------------

TEST_F(PodSpecTest, EnvFromEverySource) {
  Json pod = Pod({{"nodeName", "node-a"},
                  {"serviceAccountName", "sa1"},
                  {"automountServiceAccountToken", false},
                  {"containers",
                   {{{"name", "c"},
                     {"image", "img:1"},
                     {"resources", {{"limits", {{"memory", "128Mi"}}}, {"requests", {{"cpu", "250m"}}}}},
                     {"envFrom",
                      {{{"configMapRef", {{"name", "cfg"}}}, {"prefix", "CM_"}},
                       {{"secretRef", {{"name", "sec"}}}}}},
                     {"env",
                      {{{"name", "PLAIN"}, {"value", "v-$(CM_A)-$$(CM_A)-$(NOPE)"}},
                       {{"name", "POD"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
                       {{"name", "NS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
                       {{"name", "UID"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.uid"}}}}}},
                       {{"name", "APP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.labels['app']"}}}}}},
                       {{"name", "NOTE"},
                        {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.annotations['note']"}}}}}},
                       {{"name", "NODE"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
                       {{"name", "SA"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.serviceAccountName"}}}}}},
                       {{"name", "HOSTIP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.hostIP"}}}}}},
                       {{"name", "PODIP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
                       {{"name", "PODIPS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIPs"}}}}}},
                       {{"name", "MEM_MI"},
                        {"valueFrom", {{"resourceFieldRef", {{"resource", "limits.memory"}, {"divisor", "1Mi"}}}}}},
                       {{"name", "CPU_LIMIT"}, {"valueFrom", {{"resourceFieldRef", {{"resource", "limits.cpu"}}}}}},
                       {{"name", "CPU_REQ_M"},
                        {"valueFrom", {{"resourceFieldRef", {{"resource", "requests.cpu"}, {"divisor", "1m"}}}}}},
                       {{"name", "CPU_REQ"}, {"valueFrom", {{"resourceFieldRef", {{"resource", "requests.cpu"}}}}}},
                       {{"name", "FROM_CM"}, {"valueFrom", {{"configMapKeyRef", {{"name", "cfg"}, {"key", "B"}}}}}},
                       {{"name", "FROM_SEC"}, {"valueFrom", {{"secretKeyRef", {{"name", "sec"}, {"key", "PASS"}}}}}},
                       {{"name", "OPT"},
                        {"valueFrom",
                         {{"configMapKeyRef", {{"name", "cfg"}, {"key", "none"}, {"optional", true}}}}}},
                       {{"name", "CM_A"}, {"value", "overridden"}}}},
                     {"command", {"/bin/run", "--node=$(NODE)"}},
                     {"args", {"$(POD)", "$$(POD)"}}}}}});
  auto plan = Plan(pod);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Env(*plan, "KUBERNETES_SERVICE_HOST"), "10.99.0.1");
  EXPECT_EQ(Env(*plan, "KUBERNETES_SERVICE_PORT"), "6443");
  EXPECT_EQ(Env(*plan, "KUBERNETES_PORT"), "tcp://10.99.0.1:6443");
  EXPECT_EQ(Env(*plan, "CM_B"), "beta");
  EXPECT_EQ(Env(*plan, "CM_BIN"), "hi");
  EXPECT_EQ(Env(*plan, "CM_bad=key"), "<unset>");
  EXPECT_EQ(Env(*plan, "PASS"), "s3cr3t");
  EXPECT_EQ(Env(*plan, "USER"), "admin");
  EXPECT_EQ(Env(*plan, "PLAIN"), "v-alpha-$(CM_A)-$(NOPE)");
  EXPECT_EQ(Env(*plan, "POD"), "p1");
  EXPECT_EQ(Env(*plan, "NS"), "ns1");
  EXPECT_EQ(Env(*plan, "UID"), "uid-1");
  EXPECT_EQ(Env(*plan, "APP"), "web");
  EXPECT_EQ(Env(*plan, "NOTE"), "hello");
  EXPECT_EQ(Env(*plan, "NODE"), "node-a");
  EXPECT_EQ(Env(*plan, "SA"), "sa1");
  EXPECT_EQ(Env(*plan, "HOSTIP"), "10.99.0.2");
  EXPECT_EQ(Env(*plan, "PODIP"), "10.99.0.2");
  EXPECT_EQ(Env(*plan, "PODIPS"), "10.99.0.2");
  EXPECT_EQ(Env(*plan, "MEM_MI"), "128");
  EXPECT_EQ(Env(*plan, "CPU_LIMIT"), "16");  // unset limit: the node's allocatable
  EXPECT_EQ(Env(*plan, "CPU_REQ_M"), "250");
  EXPECT_EQ(Env(*plan, "CPU_REQ"), "1");  // rounded up
  EXPECT_EQ(Env(*plan, "FROM_CM"), "beta");
  EXPECT_EQ(Env(*plan, "FROM_SEC"), "s3cr3t");
  EXPECT_EQ(Env(*plan, "OPT"), "<unset>");
  EXPECT_EQ(Env(*plan, "CM_A"), "overridden");
  // A later source overrides in place: one entry per name.
  int count = 0;
  for (const auto& [k, v] : plan->env) count += k == "CM_A";
  EXPECT_EQ(count, 1);
  EXPECT_EQ(plan->command, (std::vector<std::string>{"/bin/run", "--node=node-a"}));
  EXPECT_EQ(plan->args, (std::vector<std::string>{"p1", "$(POD)"}));
  // No service account volume when automount is off.
  for (const auto& m : plan->mounts) EXPECT_NE(m.target, kServiceAccountMountPath);
}

TEST_F(PodSpecTest, EnvErrorsReadLikeTheKubelets) {
  auto run = [&](Json env_entry) {
    Json pod = Pod({{"containers", {{{"name", "c"}, {"image", "img:1"}, {"env", {env_entry}}}}}});
    return Plan(pod);
  };
  auto r = run({{"name", "X"}, {"valueFrom", {{"configMapKeyRef", {{"name", "cfg"}, {"key", "MISSING"}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "couldn't find key MISSING in ConfigMap ns1/cfg");
  r = run({{"name", "X"}, {"valueFrom", {{"secretKeyRef", {{"name", "sec"}, {"key", "MISSING"}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "couldn't find key MISSING in Secret ns1/sec");
  r = run({{"name", "X"}, {"valueFrom", {{"configMapKeyRef", {{"name", "gone"}, {"key", "A"}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "configmap \"gone\" not found");
  r = run({{"name", "X"}, {"valueFrom", {{"secretKeyRef", {{"name", "gone"}, {"key", "A"}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "secret \"gone\" not found");
  r = run({{"name", "X"},
           {"valueFrom", {{"secretKeyRef", {{"name", "gone"}, {"key", "A"}, {"optional", true}}}}}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  r = run({{"name", "X"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.bogus"}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "unsupported fieldPath: spec.bogus");

  Json pod = Pod({{"containers",
                   {{{"name", "c"}, {"image", "img:1"}, {"envFrom", {{{"configMapRef", {{"name", "gone"}}}}}}}}}});
  r = Plan(pod);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "configmap \"gone\" not found");
  pod["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["optional"] = true;
  EXPECT_TRUE(Plan(pod).ok());
}

TEST_F(PodSpecTest, QuantitiesAndPullPolicy) {
  EXPECT_EQ(ParseQuantityNano("250m"), Int128(250'000'000));
  EXPECT_EQ(ParseQuantityNano("1.5Gi"), Int128(1536) * 1024 * 1024 * 1'000'000'000);
  EXPECT_EQ(ParseQuantityNano("2e3"), Int128(2000) * 1'000'000'000);
  EXPECT_EQ(ParseQuantityNano("1k"), Int128(1000) * 1'000'000'000);
  EXPECT_FALSE(ParseQuantityNano("12parsecs").has_value());
  EXPECT_FALSE(ParseQuantityNano("").has_value());

  Json pod = Pod({{"automountServiceAccountToken", false},
                  {"containers",
                   {{{"name", "a"}, {"image", "repo/img"}},
                    {{"name", "b"}, {"image", "repo:5000/img:latest"}},
                    {{"name", "c"}, {"image", "repo:5000/img:v1"}},
                    {{"name", "d"}, {"image", "img:v1"}, {"imagePullPolicy", "Never"}}}}});
  EXPECT_EQ(Plan(pod, 0)->image_pull_policy, "Always");
  EXPECT_EQ(Plan(pod, 1)->image_pull_policy, "Always");
  EXPECT_EQ(Plan(pod, 2)->image_pull_policy, "IfNotPresent");
  EXPECT_EQ(Plan(pod, 3)->image_pull_policy, "Never");
}

// ---- hostPath ----------------------------------------------------------------

TEST_F(PodSpecTest, HostPathTypeChecksLikeTheKubelet) {
  auto setup = [&](const std::string& path, const std::string& type) {
    Json hp = {{"path", path}};
    if (!type.empty()) hp["type"] = type;
    Json pod = Pod({{"automountServiceAccountToken", false},
                    {"volumes", {{{"name", "v"}, {"hostPath", hp}}}},
                    {"containers", {{{"name", "c"}, {"image", "i:1"}}}}});
    return PrepareVolumes(pod, ctx_);
  };
  auto r = setup("/x", "Directory");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "MountVolume.SetUp failed for volume \"v\" : hostPath type check failed: /x is not a directory");

  r = setup("/run/made/here", "DirectoryOrCreate");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at("v"), ctx_.host_root + "/run/made/here");
  EXPECT_TRUE(std::filesystem::is_directory(ctx_.host_root + "/run/made/here"));
  EXPECT_TRUE(setup("/run/made/here", "Directory").ok());

  // FileOrCreate creates the file, not its parent directory.
  r = setup("/etc/new.conf", "FileOrCreate");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("volume \"v\""), std::string::npos);
  ASSERT_TRUE(MakeDirs(ctx_.host_root + "/etc").ok());
  ASSERT_TRUE(setup("/etc/new.conf", "FileOrCreate").ok());
  EXPECT_TRUE(std::filesystem::is_regular_file(ctx_.host_root + "/etc/new.conf"));
  EXPECT_TRUE(setup("/etc/new.conf", "File").ok());
  r = setup("/etc", "File");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hostPath type check failed: /etc is not a file"), std::string::npos);
  r = setup("/etc/new.conf", "Directory");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/etc/new.conf is not a directory"), std::string::npos);

  r = setup("/etc/new.conf", "Socket");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hostPath type check failed: /etc/new.conf is not a socket file"),
            std::string::npos);
  std::string sock = ctx_.host_root + "/s.sock";
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << sock;
  EXPECT_TRUE(setup("/s.sock", "Socket").ok());
  ::close(fd);

  r = setup("/etc/new.conf", "CharDevice");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/etc/new.conf is not a character device"), std::string::npos);
  ASSERT_TRUE(MakeDirs(ctx_.host_root + "/dev").ok());
  if (::mknod((ctx_.host_root + "/dev/null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    EXPECT_TRUE(setup("/dev/null", "CharDevice").ok());
  }
  r = setup("/etc/new.conf", "BlockDevice");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a block device"), std::string::npos);
  r = setup("/etc", "Weird");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Weird is an invalid volume type"), std::string::npos);

  // No type: no check; a missing source becomes a directory (as the runtime does).
  ASSERT_TRUE(setup("/var/log/untyped", "").ok());
  EXPECT_TRUE(std::filesystem::is_directory(ctx_.host_root + "/var/log/untyped"));
}

TEST_F(PodSpecTest, HostPathSymlinksStayInsideTheNodeRoot) {
  // /var/run → /run, an absolute link as on a real root: it must resolve in the node root.
  ASSERT_TRUE(MakeDirs(ctx_.host_root + "/run/nvidia").ok());
  ASSERT_TRUE(MakeDirs(ctx_.host_root + "/var").ok());
  std::filesystem::create_symlink("/run", ctx_.host_root + "/var/run");
  Json pod = Pod({{"automountServiceAccountToken", false},
                  {"volumes", {{{"name", "v"}, {"hostPath", {{"path", "/var/run/nvidia"}, {"type", "Directory"}}}}}},
                  {"containers", {{{"name", "c"}, {"image", "i:1"}}}}});
  auto r = PrepareVolumes(pod, ctx_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at("v"), ctx_.host_root + "/run/nvidia");
}

// ---- other volumes -------------------------------------------------------------

TEST_F(PodSpecTest, ConfigMapSecretDownwardEmptyDirAndProjectedVolumes) {
  Json pod = Pod(
      {{"serviceAccountName", "sa1"},
       {"volumes",
        {{{"name", "cm-all"}, {"configMap", {{"name", "cfg"}}}},
         {{"name", "cm-items"},
          {"configMap",
           {{"name", "cfg"}, {"defaultMode", 0600}, {"items", {{{"key", "A"}, {"path", "sub/a.txt"}, {"mode", 0400}},
                                                                {{"key", "B"}, {"path", "b.txt"}}}}}}},
         {{"name", "cm-opt"}, {"configMap", {{"name", "gone"}, {"optional", true}}}},
         {{"name", "sec"}, {"secret", {{"secretName", "sec"}}}},
         {{"name", "scratch"}, {"emptyDir", Json::object()}},
         {{"name", "info"},
          {"downwardAPI",
           {{"items",
             {{{"path", "labels"}, {"fieldRef", {{"fieldPath", "metadata.labels"}}}},
              {{"path", "name"}, {"fieldRef", {{"fieldPath", "metadata.name"}}}},
              {{"path", "mem"},
               {"resourceFieldRef", {{"containerName", "c"}, {"resource", "limits.memory"}, {"divisor", "1Mi"}}}}}}}}},
         {{"name", "proj"},
          {"projected",
           {{"sources",
             {{{"serviceAccountToken", {{"audience", "vault"}, {"expirationSeconds", 600}, {"path", "vault-token"}}}},
              {{"configMap", {{"name", "cfg"}, {"items", {{{"key", "A"}, {"path", "a"}}}}}}},
              {{"secret", {{"name", "sec"}, {"items", {{{"key", "USER"}, {"path", "user"}}}}}}},
              {{"downwardAPI", {{"items", {{{"path", "ns"}, {"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}}}}}}}}}}}},
       {"containers",
        {{{"name", "c"},
          {"image", "i:1"},
          {"resources", {{"limits", {{"memory", "1Gi"}}}}},
          {"volumeMounts", {{{"name", "cm-all"}, {"mountPath", "/cfg"}, {"readOnly", true}}}}}}}});
  auto vols = PrepareVolumes(pod, ctx_);
  ASSERT_TRUE(vols.ok()) << vols.status().ToString();
  std::string base = ctx_.pods_dir + "/uid-1/volumes";
  EXPECT_EQ(vols->at("cm-all"), base + "/kubernetes.io~configmap/cm-all");
  EXPECT_EQ(Read(vols->at("cm-all") + "/A"), "alpha");
  EXPECT_EQ(Read(vols->at("cm-all") + "/BIN"), "hi");
  EXPECT_EQ(Mode(vols->at("cm-all") + "/A"), 0644u);
  EXPECT_EQ(Read(vols->at("cm-items") + "/sub/a.txt"), "alpha");
  EXPECT_EQ(Mode(vols->at("cm-items") + "/sub/a.txt"), 0400u);
  EXPECT_EQ(Mode(vols->at("cm-items") + "/b.txt"), 0600u);
  EXPECT_FALSE(PathExists(vols->at("cm-items") + "/A"));
  EXPECT_TRUE(std::filesystem::is_empty(vols->at("cm-opt")));
  EXPECT_EQ(Read(vols->at("sec") + "/PASS"), "s3cr3t");
  EXPECT_TRUE(std::filesystem::is_directory(vols->at("scratch")));
  EXPECT_EQ(Read(vols->at("info") + "/labels"), "app=\"web\"\ntier=\"front\"");
  EXPECT_EQ(Read(vols->at("info") + "/name"), "p1");
  EXPECT_EQ(Read(vols->at("info") + "/mem"), "1024");
  EXPECT_EQ(Read(vols->at("proj") + "/vault-token"), "token-for-sa1");
  EXPECT_EQ(Read(vols->at("proj") + "/a"), "alpha");
  EXPECT_EQ(Read(vols->at("proj") + "/user"), "admin");
  EXPECT_EQ(Read(vols->at("proj") + "/ns"), "ns1");
  // The automatic service account volume: token, CA, namespace.
  std::string sa = vols->at(kServiceAccountVolume);
  EXPECT_EQ(Read(sa + "/token"), "token-for-sa1");
  EXPECT_EQ(Read(sa + "/ca.crt"), "CA PEM");
  EXPECT_EQ(Read(sa + "/namespace"), "ns1");
  EXPECT_EQ(token_requests_, (std::vector<std::string>{"vault/600", "/3607"}));

  auto plan = PlanContainer(pod, pod["spec"]["containers"][0], ctx_, *vols);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->mounts.size(), 2u);
  EXPECT_EQ(plan->mounts[0].source, vols->at("cm-all"));
  EXPECT_EQ(plan->mounts[0].target, "/cfg");
  EXPECT_TRUE(plan->mounts[0].read_only);
  EXPECT_EQ(plan->mounts[1].source, sa);
  EXPECT_EQ(plan->mounts[1].target, kServiceAccountMountPath);
  EXPECT_TRUE(plan->mounts[1].read_only);

  // A resync follows the ConfigMap: changed values rewritten, removed keys gone.
  configmaps_["ns1/cfg"]["data"] = {{"A", "alpha2"}, {"B", "beta"}};
  configmaps_["ns1/cfg"].erase("binaryData");
  auto again = PrepareVolumes(pod, ctx_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Read(vols->at("cm-all") + "/A"), "alpha2");
  EXPECT_FALSE(PathExists(vols->at("cm-all") + "/BIN"));
}

TEST_F(PodSpecTest, VolumeErrorsNameTheVolume) {
  auto setup = [&](Json vol) {
    Json pod = Pod({{"automountServiceAccountToken", false},
                    {"volumes", {vol}},
                    {"containers", {{{"name", "c"}, {"image", "i:1"}}}}});
    return PrepareVolumes(pod, ctx_);
  };
  auto r = setup({{"name", "cm"}, {"configMap", {{"name", "gone"}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "MountVolume.SetUp failed for volume \"cm\" : configmap \"gone\" not found");
  r = setup({{"name", "cm"}, {"configMap", {{"name", "cfg"}, {"items", {{{"key", "Z"}, {"path", "z"}}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "MountVolume.SetUp failed for volume \"cm\" : configmap references non-existent config key: Z");
  r = setup({{"name", "s"}, {"secret", {{"secretName", "gone"}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "MountVolume.SetUp failed for volume \"s\" : secret \"gone\" not found");
  r = setup({{"name", "s"}, {"secret", {{"secretName", "sec"}, {"items", {{{"key", "Z"}, {"path", "z"}}}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "MountVolume.SetUp failed for volume \"s\" : references non-existent secret key: Z");
  r = setup({{"name", "cm"}, {"configMap", {{"name", "cfg"}, {"items", {{{"key", "A"}, {"path", "../evil"}}}}}}});
  ASSERT_FALSE(r.ok());
  r = setup({{"name", "pvc"}, {"persistentVolumeClaim", {{"claimName", "x"}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("persistentVolumeClaim is not supported"), std::string::npos);
}

// ---- mounts and security ---------------------------------------------------------

TEST_F(PodSpecTest, MountsSubPathPropagationAndSecurityContext) {
  ASSERT_TRUE(MakeDirs(ctx_.host_root + "/run/nvidia/driver").ok());
  Json pod = Pod({{"hostNetwork", true},
                  {"hostPID", true},
                  {"automountServiceAccountToken", false},
                  {"securityContext", {{"runAsUser", 1000}, {"runAsGroup", 2000}, {"supplementalGroups", {44}}}},
                  {"volumes",
                   {{{"name", "run"}, {"hostPath", {{"path", "/run/nvidia"}}}},
                    {{"name", "scratch"}, {"emptyDir", Json::object()}}}},
                  {"containers",
                   {{{"name", "c"},
                     {"image", "i:1"},
                     {"workingDir", "/work"},
                     {"env", {{{"name", "POD"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}}}},
                     {"securityContext",
                      {{"privileged", true},
                       {"readOnlyRootFilesystem", true},
                       {"runAsUser", 0},
                       {"allowPrivilegeEscalation", false},
                       {"capabilities", {{"add", {"SYS_ADMIN"}}, {"drop", {"ALL"}}}}}},
                     {"volumeMounts",
                      {{{"name", "run"}, {"mountPath", "/run/nvidia"}, {"mountPropagation", "Bidirectional"}},
                       {{"name", "run"},
                        {"mountPath", "/driver"},
                        {"subPath", "driver"},
                        {"mountPropagation", "HostToContainer"},
                        {"readOnly", true}},
                       {{"name", "scratch"}, {"mountPath", "/logs"}, {"subPathExpr", "logs/$(POD)"}}}}}}}});
  auto plan = Plan(pod);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->privileged);
  EXPECT_TRUE(plan->read_only_root);
  EXPECT_TRUE(plan->host_network);
  EXPECT_TRUE(plan->host_pid);
  EXPECT_TRUE(plan->no_new_privileges);
  EXPECT_EQ(plan->hostname, "node-a");
  EXPECT_EQ(plan->working_dir, "/work");
  EXPECT_EQ(plan->run_as_user, 0);    // the container's field wins
  EXPECT_EQ(plan->run_as_group, 2000);  // from the pod
  EXPECT_EQ(plan->supplemental_groups, (std::vector<int64_t>{44}));
  EXPECT_EQ(plan->cap_add, (std::vector<std::string>{"SYS_ADMIN"}));
  EXPECT_EQ(plan->cap_drop, (std::vector<std::string>{"ALL"}));
  ASSERT_EQ(plan->mounts.size(), 3u);
  EXPECT_EQ(plan->mounts[0].source, ctx_.host_root + "/run/nvidia");
  EXPECT_EQ(plan->mounts[0].propagation, "rshared");
  EXPECT_EQ(plan->mounts[1].source, ctx_.host_root + "/run/nvidia/driver");
  EXPECT_EQ(plan->mounts[1].propagation, "rslave");
  EXPECT_TRUE(plan->mounts[1].read_only);
  std::string scratch = ctx_.pods_dir + "/uid-1/volumes/kubernetes.io~empty-dir/scratch";
  EXPECT_EQ(plan->mounts[2].source, scratch + "/logs/p1");
  EXPECT_TRUE(std::filesystem::is_directory(scratch + "/logs/p1"));  // created like the kubelet does

  // Not hostNetwork: the pod's own hostname.
  pod["spec"]["hostNetwork"] = false;
  EXPECT_EQ(Plan(pod)->hostname, "p1");

  // Bidirectional needs a privileged container.
  pod["spec"]["containers"][0]["securityContext"]["privileged"] = false;
  auto r = Plan(pod);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Bidirectional"), std::string::npos);
  pod["spec"]["containers"][0]["securityContext"]["privileged"] = true;

  // A subPath may not leave its volume.
  pod["spec"]["containers"][0]["volumeMounts"][1]["subPath"] = "../../etc";
  EXPECT_FALSE(Plan(pod).ok());
  pod["spec"]["containers"][0]["volumeMounts"][1]["subPath"] = "driver";

  // A mount of an unknown volume.
  pod["spec"]["containers"][0]["volumeMounts"][0]["name"] = "nope";
  r = Plan(pod);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot find volume \"nope\" to mount into container \"c\"");
  pod["spec"]["containers"][0]["volumeMounts"][0]["name"] = "run";

  // seccompProfile: the runtime's default, Unconfined (the pod's unless the
  // container has its own), and Localhost refused by name.
  EXPECT_FALSE(Plan(pod)->seccomp_unconfined);
  pod["spec"]["securityContext"]["seccompProfile"] = {{"type", "Unconfined"}};
  EXPECT_TRUE(Plan(pod)->seccomp_unconfined);
  pod["spec"]["containers"][0]["securityContext"]["seccompProfile"] = {{"type", "RuntimeDefault"}};
  EXPECT_FALSE(Plan(pod)->seccomp_unconfined);
  pod["spec"]["containers"][0]["securityContext"]["seccompProfile"] = {{"type", "Localhost"},
                                                                       {"localhostProfile", "p.json"}};
  r = Plan(pod);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("seccompProfile type Localhost"), std::string::npos);
  pod["spec"]["containers"][0]["securityContext"].erase("seccompProfile");

  // runAsNonRoot with user 0.
  pod["spec"]["containers"][0]["securityContext"]["runAsNonRoot"] = true;
  EXPECT_FALSE(Plan(pod).ok());
}

TEST_F(PodSpecTest, ServiceAccountMountedByThePodItselfIsNotAddedTwice) {
  Json pod = Pod({{"volumes", {{{"name", "kube-api-access-abcde"}, {"projected", {{"sources", Json::array()}}}}}},
                  {"containers",
                   {{{"name", "c"},
                     {"image", "i:1"},
                     {"volumeMounts",
                      {{{"name", "kube-api-access-abcde"}, {"mountPath", kServiceAccountMountPath}}}}}}}});
  auto vols = PrepareVolumes(pod, ctx_);
  ASSERT_TRUE(vols.ok()) << vols.status().ToString();
  EXPECT_EQ(vols->count(kServiceAccountVolume), 0u);
  auto plan = PlanContainer(pod, pod["spec"]["containers"][0], ctx_, *vols);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->mounts.size(), 1u);
}

// ---- probes ------------------------------------------------------------------------

TEST_F(PodSpecTest, ProbesWithNamedPortsAndDefaults) {
  Json c = {{"name", "c"},
            {"ports", {{{"name", "metrics"}, {"containerPort", 9400}}, {{"name", "grpc"}, {"containerPort", 50051}}}},
            {"livenessProbe",
             {{"httpGet", {{"port", "metrics"}, {"path", "/health"}, {"httpHeaders", {{{"name", "X"}, {"value", "1"}}}}}},
              {"periodSeconds", 5},
              {"terminationGracePeriodSeconds", 7}}},
            {"readinessProbe", {{"tcpSocket", {{"port", 8080}}}}},
            {"startupProbe", {{"exec", {{"command", {"cat", "/ready"}}}}, {"failureThreshold", 30}}}};
  auto live = ParseProbe(c, "livenessProbe");
  ASSERT_TRUE(live.ok() && live->has_value()) << live.status().ToString();
  const Probe& l = **live;
  EXPECT_EQ(l.kind, Probe::kHttpGet);
  EXPECT_EQ(l.port, 9400);
  EXPECT_EQ(l.path, "/health");
  EXPECT_EQ(l.scheme, "HTTP");
  EXPECT_EQ(l.host, "");
  EXPECT_EQ(l.headers, (std::vector<std::pair<std::string, std::string>>{{"X", "1"}}));
  EXPECT_EQ(l.period_s, 5);
  EXPECT_EQ(l.timeout_s, 1);
  EXPECT_EQ(l.success_threshold, 1);
  EXPECT_EQ(l.failure_threshold, 3);
  EXPECT_EQ(l.initial_delay_s, 0);
  EXPECT_EQ(l.termination_grace_s, 7);
  auto ready = ParseProbe(c, "readinessProbe");
  ASSERT_TRUE(ready.ok() && ready->has_value());
  EXPECT_EQ((*ready)->kind, Probe::kTcpSocket);
  EXPECT_EQ((*ready)->port, 8080);
  EXPECT_EQ((*ready)->period_s, 10);
  EXPECT_EQ((*ready)->termination_grace_s, -1);
  auto startup = ParseProbe(c, "startupProbe");
  ASSERT_TRUE(startup.ok() && startup->has_value());
  EXPECT_EQ((*startup)->kind, Probe::kExec);
  EXPECT_EQ((*startup)->command, (std::vector<std::string>{"cat", "/ready"}));
  EXPECT_EQ((*startup)->failure_threshold, 30);

  c["livenessProbe"] = {{"grpc", {{"port", 50051}, {"service", "health"}}}};
  auto g = ParseProbe(c, "livenessProbe");
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->kind, Probe::kGrpc);
  EXPECT_EQ((*g)->service, "health");

  Json none = {{"name", "c"}};
  auto n = ParseProbe(none, "livenessProbe");
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n->has_value());

  c["livenessProbe"] = {{"httpGet", {{"port", "nope"}}}};
  auto bad = ParseProbe(c, "livenessProbe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"nope\""), std::string::npos);
  c["livenessProbe"] = {{"periodSeconds", 3}};
  EXPECT_FALSE(ParseProbe(c, "livenessProbe").ok());
}

}  // namespace
}  // namespace gpuop::simcluster
