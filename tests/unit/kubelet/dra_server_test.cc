// DraPluginServer against the kubelet's side (sim/kubelet/dra_kubelet.h):
// registration, version choice, prepare and unprepare all cross real unix
// sockets with real gRPC, and every check is made where the kubelet sees it.
#include "kubelet/dra_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>

#include "base/files.h"
#include "kubelet/unix_socket.h"
#include "kubelet_test_util.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "sim/kubelet/dra_kubelet.h"

namespace gpuop::kubelet {
namespace {

using sim::DraApiVersion;
using sim::DraKubeletClient;
using std::chrono_literals::operator""s;
using testing::ShortTempDir;

constexpr const char* kDriver = "gpu.nvidia.com";

bool IsSocket(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// A socket file nobody listens on: what a crashed plugin leaves behind.
void MakeStaleSocket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
  ::close(fd);
  ASSERT_TRUE(IsSocket(path));
}

// Answers every claim with one device named after it, except the claims it
// is told to fail, to omit or to throw on. Records what it was asked.
class FakeDriver final : public DraDriver {
 public:
  std::map<std::string, DraPrepareResult> Prepare(const std::vector<DraClaim>& claims) override {
    std::lock_guard lock(mu_);
    prepared.push_back(claims);
    if (throw_on_call) throw std::runtime_error("NVML went away");
    std::map<std::string, DraPrepareResult> out;
    for (const auto& c : claims) {
      if (omit.contains(c.uid)) continue;
      if (fail.contains(c.uid)) {
        out[c.uid].error = fail.at(c.uid);
        continue;
      }
      out[c.uid] = Result(c.uid);
    }
    return out;
  }
  std::map<std::string, std::string> Unprepare(const std::vector<DraClaim>& claims) override {
    std::lock_guard lock(mu_);
    unprepared.push_back(claims);
    std::map<std::string, std::string> out;
    for (const auto& c : claims) {
      if (omit.contains(c.uid)) continue;
      out[c.uid] = fail.contains(c.uid) ? fail.at(c.uid) : "";
    }
    return out;
  }

  // What Prepare answers for a claim that succeeds.
  static DraPrepareResult Result(const std::string& uid) {
    DraPrepareResult r;
    r.devices.push_back({{"gpu"},
                         "node-a",
                         "gpu-0",
                         {"k8s.gpu.nvidia.com/claim=" + uid + "-gpu-0"},
                         "share-" + uid});
    r.devices.push_back({{}, "node-a", "gpu-1", {}, ""});
    return r;
  }

  std::mutex mu_;
  std::vector<std::vector<DraClaim>> prepared, unprepared;  // guarded by mu_
  std::map<std::string, std::string> fail;                  // set before calls
  std::set<std::string> omit;
  bool throw_on_call = false;
};

// A registration server with a PluginInfo of the test's choosing, recording
// what the kubelet tells it.
class ScriptedRegistration final : public pluginregistration::Registration::Service {
 public:
  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* reply) override {
    *reply = info;
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const pluginregistration::RegistrationStatus* status,
                                        pluginregistration::RegistrationStatusResponse*) override {
    std::lock_guard lock(mu);
    notified.push_back(*status);
    return grpc::Status::OK;
  }

  pluginregistration::PluginInfo info;
  std::mutex mu;
  std::vector<pluginregistration::RegistrationStatus> notified;  // guarded by mu
};

class DraPluginServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(MakeDirs(registry_dir_).ok()); }

  DraPluginServerOptions Options() const {
    return {.driver_name = kDriver, .plugin_dir = plugin_dir_, .registry_dir = registry_dir_};
  }
  std::unique_ptr<DraPluginServer> Serve() {
    auto s = DraPluginServer::Start(&driver_, Options());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::string RegSocket() const { return DraRegistrationSocketPath(registry_dir_, kDriver); }
  std::unique_ptr<DraKubeletClient> RegisterClient(const std::string& reg_socket) {
    auto c = DraKubeletClient::Register(reg_socket);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // A registration server on <registry>/<name>, stopped at teardown.
  ScriptedRegistration* ServeScripted(const std::string& name,
                                      const pluginregistration::PluginInfo& info) {
    scripted_.push_back(std::make_unique<ScriptedRegistration>());
    scripted_.back()->info = info;
    grpc::ServerBuilder builder;
    builder.RegisterService(scripted_.back().get());
    auto served = ServeOnUnixSocket(builder, dir_ / ("r/" + name), "test registration socket");
    EXPECT_TRUE(served.ok()) << served.status().ToString();
    if (served.ok()) scripted_servers_.push_back(std::move(served->server));
    return scripted_.back().get();
  }

  void TearDown() override {
    for (auto& s : scripted_servers_) s->Shutdown();
    scripted_servers_.clear();
  }

  ShortTempDir dir_;
  const std::string plugin_dir_ = dir_ / "p/gpu.nvidia.com";
  const std::string registry_dir_ = dir_ / "r";
  FakeDriver driver_;
  std::vector<std::unique_ptr<ScriptedRegistration>> scripted_;
  std::vector<std::unique_ptr<grpc::Server>> scripted_servers_;
};

TEST_F(DraPluginServerTest, KubeletRegistersItAndChoosesV1) {
  auto server = Serve();
  ASSERT_TRUE(server);
  EXPECT_TRUE(IsSocket(plugin_dir_ + "/dra.sock"));
  EXPECT_TRUE(IsSocket(RegSocket()));
  EXPECT_EQ(server->dra_socket(), plugin_dir_ + "/dra.sock");
  EXPECT_EQ(server->Registration().notifications, 0u);

  // What the kubelet's plugin watcher finds, then what it registers.
  EXPECT_EQ(sim::ListDraRegistrationSockets(registry_dir_), std::vector{RegSocket()});
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(client);
  EXPECT_EQ(client->registration().driver_name, kDriver);
  EXPECT_EQ(client->registration().endpoint, plugin_dir_ + "/dra.sock");
  EXPECT_EQ(client->registration().version, DraApiVersion::kV1);

  ASSERT_TRUE(server->WaitForNotification(1, 5s));
  DraRegistrationState state = server->Registration();
  EXPECT_EQ(state.notifications, 1u);
  EXPECT_TRUE(state.registered);
  EXPECT_EQ(state.error, "");
}

// A plugin sees the host's kubelet directory elsewhere in its container
// (gpuop mounts it at /host/var/lib/kubelet): it tells the kubelet the host
// path, and the kubelet, whose "/" is the node root, reaches it there.
TEST_F(DraPluginServerTest, AdvertisedEndpointIsTheNodesPath) {
  const std::string node_root = dir_ / "node";
  const std::string host_plugin_dir = "/var/lib/kubelet/plugins/gpu.nvidia.com";
  DraPluginServerOptions o = Options();
  o.plugin_dir = node_root + host_plugin_dir;
  o.endpoint = host_plugin_dir + "/dra.sock";
  auto server = DraPluginServer::Start(&driver_, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  sim::DraKubeletOptions ko;
  ko.node_root = node_root;
  auto client = DraKubeletClient::Register(RegSocket(), ko);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->registration().endpoint, host_plugin_dir + "/dra.sock");
  EXPECT_EQ((*client)->registration().dial_path, node_root + host_plugin_dir + "/dra.sock");
  auto out = (*client)->Prepare({{"ns", "uid-1", "claim"}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->count("uid-1"), 1u);
}

TEST_F(DraPluginServerTest, PrepareAndUnprepareOverV1CarryEveryField) {
  auto server = Serve();
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(server && client);
  driver_.fail["uid-b"] = "claim default/b: device gpu-7 is not on this node";
  const std::vector<DraClaim> claims = {{"default", "uid-a", "a"}, {"team-x", "uid-b", "b"}};

  auto prepared = client->Prepare(claims);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  DraPrepareResult failed;
  failed.error = "claim default/b: device gpu-7 is not on this node";
  const std::map<std::string, DraPrepareResult> want = {{"uid-a", FakeDriver::Result("uid-a")},
                                                        {"uid-b", failed}};
  EXPECT_EQ(*prepared, want);
  EXPECT_EQ(prepared->at("uid-a").devices[0].share_id, "share-uid-a");
  ASSERT_EQ(driver_.prepared.size(), 1u);
  EXPECT_EQ(driver_.prepared[0], claims);  // namespace, UID and name all arrive

  auto unprepared = client->Unprepare(claims);
  ASSERT_TRUE(unprepared.ok()) << unprepared.status().ToString();
  const std::map<std::string, std::string> want_errors = {
      {"uid-a", ""}, {"uid-b", "claim default/b: device gpu-7 is not on this node"}};
  EXPECT_EQ(*unprepared, want_errors);
  ASSERT_EQ(driver_.unprepared.size(), 1u);
  EXPECT_EQ(driver_.unprepared[0], claims);
}

TEST_F(DraPluginServerTest, EmptyRequestIsAnsweredWithoutTheDriver) {
  auto server = Serve();
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(server && client);
  auto prepared = client->Prepare({});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_TRUE(prepared->empty());
  auto unprepared = client->Unprepare({});
  ASSERT_TRUE(unprepared.ok()) << unprepared.status().ToString();
  EXPECT_TRUE(unprepared->empty());
  EXPECT_TRUE(driver_.prepared.empty());
  EXPECT_TRUE(driver_.unprepared.empty());
}

TEST_F(DraPluginServerTest, ClaimMissingFromTheAnswerIsAnErrorNamingIt) {
  auto server = Serve();
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(server && client);
  driver_.omit.insert("uid-b");
  auto prepared = client->Prepare({{"default", "uid-a", "a"}, {"team-x", "uid-b", "b"}});
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.status().message().find("team-x/b (UID uid-b)"), std::string::npos)
      << prepared.status().ToString();
  auto unprepared = client->Unprepare({{"team-x", "uid-b", "b"}});
  ASSERT_FALSE(unprepared.ok());
  EXPECT_NE(unprepared.status().message().find("NodeUnprepareResources without claim team-x/b"),
            std::string::npos)
      << unprepared.status().ToString();
}

TEST_F(DraPluginServerTest, ThrowingDriverIsAGrpcErrorForTheWholeCall) {
  auto server = Serve();
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(server && client);
  driver_.throw_on_call = true;
  auto prepared = client->Prepare({{"default", "uid-a", "a"}});
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().code(), StatusCode::kInternal);
  EXPECT_NE(prepared.status().message().find("NVML went away"), std::string::npos)
      << prepared.status().ToString();
  EXPECT_NE(prepared.status().message().find("default/a"), std::string::npos);
}

TEST_F(DraPluginServerTest, FirstKnownVersionIsChosenAndV1beta1DropsShareId) {
  auto server = Serve();
  ASSERT_TRUE(server);
  // A plugin that lists an unknown version first, then only v1beta1.
  pluginregistration::PluginInfo info;
  info.set_type("DRAPlugin");
  info.set_name(kDriver);
  info.set_endpoint(server->dra_socket());
  info.add_supported_versions("v2.DRAPlugin");
  info.add_supported_versions("v1beta1.DRAPlugin");
  info.add_supported_versions("v1.DRAPlugin");
  ScriptedRegistration& registration = *ServeScripted("old-reg.sock", info);

  auto client = RegisterClient(dir_ / "r/old-reg.sock");
  ASSERT_TRUE(client);
  EXPECT_EQ(client->registration().version, DraApiVersion::kV1beta1);
  auto prepared = client->Prepare({{"default", "uid-a", "a"}});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  DraPrepareResult want = FakeDriver::Result("uid-a");
  want.devices[0].share_id = "";  // not in the v1beta1 wire format
  EXPECT_EQ(prepared->at("uid-a"), want);
  auto unprepared = client->Unprepare({{"default", "uid-a", "a"}});
  ASSERT_TRUE(unprepared.ok()) << unprepared.status().ToString();
  EXPECT_EQ(unprepared->at("uid-a"), "");
  std::lock_guard lock(registration.mu);
  ASSERT_EQ(registration.notified.size(), 1u);
  EXPECT_TRUE(registration.notified[0].plugin_registered());
}

TEST_F(DraPluginServerTest, BadPluginInfoIsRefusedAndThePluginToldWhy) {
  struct Case {
    std::string type, name, endpoint;
    std::vector<std::string> versions;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"CSIPlugin",
       kDriver,
       "/x/dra.sock",
       {"v1.DRAPlugin"},
       "a DRA driver must say \"DRAPlugin\""},
      {"DRAPlugin", "", "/x/dra.sock", {"v1.DRAPlugin"}, "gave no driver name"},
      {"DRAPlugin", kDriver, "x/dra.sock", {"v1.DRAPlugin"}, "must be the absolute path"},
      {"DRAPlugin",
       kDriver,
       "/x/dra.sock",
       {"v1alpha4.DRAPlugin"},
       "supports [v1alpha4.DRAPlugin]; this kubelet speaks v1.DRAPlugin and v1beta1.DRAPlugin"},
      {"DRAPlugin", kDriver, "/x/dra.sock", {}, "supports []"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].why);
    pluginregistration::PluginInfo info;
    info.set_type(cases[i].type);
    info.set_name(cases[i].name);
    info.set_endpoint(cases[i].endpoint);
    for (const auto& v : cases[i].versions) info.add_supported_versions(v);
    const std::string name = "bad" + std::to_string(i) + "-reg.sock";
    ScriptedRegistration& registration = *ServeScripted(name, info);

    auto client = DraKubeletClient::Register(dir_ / ("r/" + name));
    ASSERT_FALSE(client.ok());
    EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(client.status().message().find(cases[i].why), std::string::npos)
        << client.status().message();
    std::lock_guard lock(registration.mu);
    ASSERT_EQ(registration.notified.size(), 1u);
    EXPECT_FALSE(registration.notified[0].plugin_registered());
    EXPECT_EQ(registration.notified[0].error(), client.status().message());
  }
}

TEST_F(DraPluginServerTest, RecordsTheKubeletsRefusal) {
  auto server = Serve();
  ASSERT_TRUE(server);
  auto channel = grpc::CreateChannel("unix:" + RegSocket(), grpc::InsecureChannelCredentials());
  auto stub = pluginregistration::Registration::NewStub(channel);
  grpc::ClientContext ctx;
  pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(false);
  status.set_error("driver name gpu.nvidia.com already registered by another plugin");
  pluginregistration::RegistrationStatusResponse reply;
  ASSERT_TRUE(stub->NotifyRegistrationStatus(&ctx, status, &reply).ok());
  DraRegistrationState state = server->Registration();
  EXPECT_EQ(state.notifications, 1u);
  EXPECT_FALSE(state.registered);
  EXPECT_EQ(state.error, "driver name gpu.nvidia.com already registered by another plugin");

  // A later success replaces it.
  ASSERT_TRUE(RegisterClient(RegSocket()));
  ASSERT_TRUE(server->WaitForNotification(2, 5s));
  state = server->Registration();
  EXPECT_TRUE(state.registered);
  EXPECT_EQ(state.error, "");
}

TEST_F(DraPluginServerTest, StopRemovesBothSocketsSoTheKubeletDeregisters) {
  auto server = Serve();
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(server && client);
  server->Stop();
  EXPECT_FALSE(std::filesystem::exists(RegSocket()));
  EXPECT_FALSE(std::filesystem::exists(plugin_dir_ + "/dra.sock"));
  EXPECT_TRUE(sim::ListDraRegistrationSockets(registry_dir_).empty());
  auto prepared = client->Prepare({{"default", "uid-a", "a"}});
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().code(), StatusCode::kUnavailable) << prepared.status().ToString();
  server->Stop();  // idempotent
}

TEST_F(DraPluginServerTest, RestartOnTheSamePathsReplacesStaleSockets) {
  ASSERT_TRUE(MakeDirs(plugin_dir_).ok());
  MakeStaleSocket(plugin_dir_ + "/dra.sock");
  MakeStaleSocket(RegSocket());
  auto server = Serve();
  ASSERT_TRUE(server);
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Prepare({{"default", "uid-a", "a"}}).ok());
}

TEST_F(DraPluginServerTest, OldServerStoppingLeavesItsSuccessorsSockets) {
  auto old_server = Serve();
  ASSERT_TRUE(old_server);
  auto new_server = Serve();  // the usual order on a rolling restart
  ASSERT_TRUE(new_server);
  old_server->Stop();
  EXPECT_TRUE(IsSocket(RegSocket()));
  EXPECT_TRUE(IsSocket(plugin_dir_ + "/dra.sock"));
  auto client = RegisterClient(RegSocket());
  ASSERT_TRUE(client);
  auto prepared = client->Prepare({{"default", "uid-a", "a"}});
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_TRUE(new_server->WaitForNotification(1, 5s));
  EXPECT_EQ(old_server->Registration().notifications, 0u);
}

TEST_F(DraPluginServerTest, StartErrorsNameTheProblem) {
  DraPluginServerOptions options = Options();
  options.registry_dir = dir_ / "missing";
  auto missing = DraPluginServer::Start(&driver_, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir_ / "missing"), std::string::npos);
  EXPECT_NE(missing.status().message().find("mounted"), std::string::npos);

  options = Options();
  options.plugin_dir = dir_ / std::string(120, 'p');
  auto too_long = DraPluginServer::Start(&driver_, options);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("unix socket limit"), std::string::npos);

  options = Options();
  options.driver_name = "";
  auto unnamed = DraPluginServer::Start(&driver_, options);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.status().code(), StatusCode::kInvalidArgument);
}

TEST(DraKubeletClient, MissingRegistrationSocketSaysSo) {
  ShortTempDir dir;
  auto client = DraKubeletClient::Register(dir / "gpu.nvidia.com-reg.sock");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("is the plugin running?"), std::string::npos);
}

TEST(DraKubeletClient, EmptyEndpointMeansTheRegistrationSocket) {
  auto r = sim::ValidateDraPluginInfo({"DRAPlugin", kDriver, "", {"v1.DRAPlugin"}},
                                      "/var/lib/kubelet/plugins_registry/x-reg.sock");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->endpoint, "/var/lib/kubelet/plugins_registry/x-reg.sock");
}

TEST(DraKubeletClient, WatcherListsOnlyRegistrationSockets) {
  ShortTempDir dir;
  MakeStaleSocket(dir / "b.example.com-reg.sock");
  MakeStaleSocket(dir / "a.example.com-reg.sock");
  MakeStaleSocket(dir / ".gpuop-1-0");        // not yet renamed into place
  MakeStaleSocket(dir / ".hidden-reg.sock");  // dot names are ignored
  MakeStaleSocket(dir / "csi.sock");          // not a registration socket
  std::ofstream(dir / "file-reg.sock") << "not a socket";
  EXPECT_EQ(
      sim::ListDraRegistrationSockets(dir.path()),
      (std::vector<std::string>{dir / "a.example.com-reg.sock", dir / "b.example.com-reg.sock"}));
  EXPECT_TRUE(sim::ListDraRegistrationSockets(dir / "missing").empty());
}

}  // namespace
}  // namespace gpuop::kubelet
