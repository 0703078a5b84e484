// The podman runtime against REAL podman and runc: a tiny busybox image
// imported once per binary, containers in a fresh network namespace, a
// per-node CDI spec seen through the node's mount namespace view. In CI a
// missing podman (or not being root) fails; elsewhere the tests skip.
#include "sim/cluster/podman.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "base/files.h"
#include "base/process.h"
#include "base/strings.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace gpuop::simcluster {
namespace {

using ::gpuop::testing::TempDir;
using ::gpuop::testing::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kImage = "localhost/gpuop-test-busybox:1";

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// Why these tests cannot run here, "" when they can.
std::string MissingPeer() {
  if (::geteuid() != 0) return "needs root (network namespaces, podman as root)";
  for (const char* tool : {"podman", "runc", "ip", "tar"}) {
    auto r = RunCommand({"sh", "-c", std::string("command -v ") + tool});
    if (!r.ok() || r->status != 0) return std::string(tool) + " is not installed";
  }
  if (!PathExists("/bin/busybox")) return "/bin/busybox (busybox-static) is not installed";
  return "";
}

// Imports the busybox image once per test binary: /bin/busybox and its links.
Status BuildImage(const Podman& pm) {
  static std::once_flag once;
  static Status result;
  std::call_once(once, [&] {
    TempDir dir("pmimg");
    std::string root = dir.path() + "/rootfs";
    Status s = MakeDirs(root + "/bin");
    if (s.ok()) {
      std::error_code ec;
      std::filesystem::copy_file("/bin/busybox", root + "/bin/busybox", ec);
      for (const char* app : {"sh", "echo", "cat", "sleep", "hostname", "readlink", "env", "true", "ls", "id"}) {
        std::filesystem::create_symlink("busybox", root + "/bin/" + app, ec);
      }
      if (ec) s = Internal("building the busybox rootfs: " + ec.message());
    }
    std::string tar = dir.path() + "/rootfs.tar";
    if (s.ok()) {
      auto r = RunCommand({"tar", "-C", root, "-cf", tar, "."});
      if (!r.ok()) {
        s = r.status();
      } else if (r->status != 0) {
        s = Internal("tar: " + r->output);
      }
    }
    if (s.ok()) {
      auto r = pm.Call({"import", "--change", "CMD [\"/bin/sh\"]", tar, kImage});
      if (!r.ok()) {
        s = r.status();
      } else if (r->status != 0) {
        s = Internal("podman import: " + r->err + r->out);
      }
    }
    result = s;
  });
  return result;
}

class PodmanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = MissingPeer();
    if (!missing.empty()) {
      if (InCi()) FAIL() << "podman tests need a real peer in CI: " << missing;
      GTEST_SKIP() << missing;
    }
    static int counter = 0;
    run_id_ = "t" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    netns_ = "gpuop-" + run_id_;
    auto r = RunCommand({"ip", "netns", "add", netns_});
    ASSERT_TRUE(r.ok() && r->status == 0) << (r.ok() ? r->output : r.status().ToString());
    netns_made_ = true;
    node_root_ = dir_.path() + "/node";
    Podman::Options o;
    o.node_name = "node-" + run_id_;
    o.netns = netns_;
    o.host_root = node_root_;
    o.state_dir = dir_.path() + "/state";
    o.node_binds = {{node_root_ + "/var/run/cdi", "/var/run/cdi"}};
    auto pm = Podman::Create(o);
    ASSERT_TRUE(pm.ok()) << pm.status().ToString();
    pm_.emplace(std::move(*pm));
    Status built = BuildImage(*pm_);
    ASSERT_TRUE(built.ok()) << built.ToString();
  }

  void TearDown() override {
    if (pm_) {
      auto names = pm_->ListContainers({{"gpuop.test/run", run_id_}});
      if (names.ok()) {
        for (const auto& n : *names) EXPECT_TRUE(pm_->Remove(n).ok()) << n;
      }
    }
    if (netns_made_) (void)RunCommand({"ip", "netns", "delete", netns_});
  }

  std::map<std::string, std::string> Labels() { return {{"gpuop.test/run", run_id_}}; }
  std::string Name(const std::string& suffix) { return "gpuop-" + run_id_ + "-" + suffix; }

  ContainerPlan Plan(std::vector<std::string> script) {
    ContainerPlan p;
    p.name = "c";
    p.image = kImage;
    p.command = {"/bin/sh", "-c"};
    p.args = std::move(script);
    return p;
  }

  // Waits until the container has exited; its final state.
  Podman::State WaitExited(const std::string& name) {
    Podman::State st;
    bool exited = WaitFor(
        [&] {
          auto s = pm_->Inspect(name);
          if (!s.ok()) return false;
          st = *s;
          return !s->running && !s->finished_at.empty();
        },
        60s, 50ms);
    EXPECT_TRUE(exited) << name << " did not exit";
    return st;
  }

  std::string WaitLog(const std::string& path, const std::string& needle) {
    std::string text;
    WaitFor(
        [&] {
          text = ReadFile(path).value_or("");
          return text.find(needle) != std::string::npos;
        },
        30s, 20ms);
    return text;
  }

  TempDir dir_{"podman"};
  std::string run_id_, netns_, node_root_;
  bool netns_made_ = false;
  std::optional<Podman> pm_;
};

TEST_F(PodmanTest, RunsAPlanInTheNodesNetworkWithMountsEnvAndPerNodeCdi) {
  // The node's CDI spec, only in the node's /var/run/cdi.
  std::string cdi_src = dir_.path() + "/cdi-src.txt";
  ASSERT_TRUE(WriteFileAtomic(cdi_src, "mounted-by-cdi\n").ok());
  std::string kind = "gpuop.test/dev" + std::to_string(::getpid());
  Json spec = {{"cdiVersion", "0.5.0"},
               {"kind", kind},
               {"devices",
                {{{"name", "d0"},
                  {"containerEdits",
                   {{"env", {"CDI_ENV=from-node-spec"}},
                    {"mounts", {{{"hostPath", cdi_src}, {"containerPath", "/cdi-file"}, {"options", {"ro", "bind"}}}}}}}}}}};
  ASSERT_TRUE(WriteFileAtomic(node_root_ + "/var/run/cdi/test.json", spec.dump()).ok());
  std::string data = node_root_ + "/data";
  ASSERT_TRUE(MakeDirs(data).ok());
  ASSERT_TRUE(WriteFileAtomic(data + "/in.txt", "from-host\n").ok());

  ContainerPlan p = Plan({"echo env=$FOO; echo cdi=$CDI_ENV; cat /cdi-file; cat /data/in.txt; "
                          "echo written > /data/out.txt; echo host=$(hostname); echo net=$(readlink /proc/self/ns/net); "
                          "echo args=$0,$1; echo err-line >&2; exit 7",
                          "zero", "one"});
  p.env = {{"FOO", "bar baz"}};
  p.mounts = {{data, "/data", false, ""}};
  p.cdi_devices = {kind + "=d0"};
  p.hostname = "node-a";
  std::string name = Name("run");
  std::string log = dir_.path() + "/logs/run.log";
  auto id = pm_->Run(p, name, log, Labels());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->size(), 64u) << *id;

  Podman::State st = WaitExited(name);
  EXPECT_EQ(st.exit_code, 7);
  EXPECT_FALSE(st.started_at.empty());
  EXPECT_FALSE(st.oom_killed);

  std::string text = WaitLog(log, "args=");
  // CRI log lines: <RFC3339Nano> stdout|stderr F <text>.
  EXPECT_NE(text.find(" stdout F env=bar baz\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" stdout F cdi=from-node-spec\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" stdout F mounted-by-cdi\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" stdout F from-host\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" stdout F host=node-a\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" stdout F args=zero,one\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" stderr F err-line\n"), std::string::npos) << text;
  for (const auto& line : Split(text, '\n')) {
    ASSERT_GE(line.size(), 30u) << line;
    EXPECT_EQ(line[4], '-') << line;
    EXPECT_EQ(line[10], 'T') << line;
  }
  // The container ran in the node's network namespace.
  struct stat ns_st {};
  ASSERT_EQ(::stat(("/var/run/netns/" + netns_).c_str(), &ns_st), 0);
  EXPECT_NE(text.find("net=net:[" + std::to_string(ns_st.st_ino) + "]"), std::string::npos) << text;
  // The write through the hostPath-style mount landed on the node's side.
  EXPECT_EQ(ReadFile(data + "/out.txt").value_or(""), "written\n");
  // The host's own /var/run/cdi never got the node's spec.
  EXPECT_FALSE(PathExists("/var/run/cdi/test.json"));

  auto listed = pm_->ListContainers(Labels());
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, std::vector<std::string>{name});
  listed = pm_->ListContainers({{"gpuop.sim/node", pm_->options().node_name}});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, std::vector<std::string>{name});
  listed = pm_->ListContainers({{"gpuop.sim/node", "some-other-node"}, {"gpuop.test/run", run_id_}});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());

  // The same name again: AlreadyExists, as the kubelet's naming must avoid.
  auto again = pm_->Run(p, name, log, Labels());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
}

TEST_F(PodmanTest, ExecSignalAndRemove) {
  ContainerPlan p = Plan({"trap 'echo got-term; exit 42' TERM; echo started; while true; do sleep 0.1; done"});
  std::string name = Name("long");
  std::string log = dir_.path() + "/long.log";
  auto id = pm_->Run(p, name, log, Labels());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitLog(log, "started");
  auto st = pm_->Inspect(name);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(st->running);
  EXPECT_GT(st->pid, 0);

  auto ex = pm_->Exec(name, {"sh", "-c", "echo from-exec; exit 3"}, 30s);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(ex->first, 3);
  EXPECT_EQ(ex->second, "from-exec\n");
  ex = pm_->Exec(name, {"true"}, 30s);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(ex->first, 0);
  ex = pm_->Exec(name, {"sleep", "30"}, 1s);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kDeadlineExceeded);
  auto missing = pm_->Exec(Name("nope"), {"true"}, 30s);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();

  ASSERT_TRUE(pm_->Signal(name, SIGTERM).ok());
  Podman::State done = WaitExited(name);
  EXPECT_EQ(done.exit_code, 42);
  EXPECT_NE(WaitLog(log, "got-term").find("stdout F got-term"), std::string::npos);

  ASSERT_TRUE(pm_->Remove(name).ok());
  auto gone = pm_->Inspect(name);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound) << gone.status().ToString();
  EXPECT_TRUE(pm_->Remove(name).ok());  // removing what is gone is fine
  EXPECT_EQ(pm_->Signal(name, SIGTERM).code(), StatusCode::kNotFound);
  auto listed = pm_->ListContainers(Labels());
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(PodmanTest, MissingImageIsNotFoundAndNeverPulled) {
  auto exists = pm_->ImageExists(kImage);
  ASSERT_TRUE(exists.ok()) << exists.status().ToString();
  EXPECT_TRUE(*exists);
  exists = pm_->ImageExists("localhost/gpuop-no-such-image:1");
  ASSERT_TRUE(exists.ok()) << exists.status().ToString();
  EXPECT_FALSE(*exists);

  ContainerPlan p = Plan({"true"});
  p.image = "localhost/gpuop-no-such-image:1";
  auto r = pm_->Run(p, Name("noimg"), dir_.path() + "/noimg.log", Labels());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
}

TEST_F(PodmanTest, AStartFailureIsReportedAndLeavesNoContainer) {
  ContainerPlan p = Plan({});
  p.command = {"/bin/no-such-binary"};
  std::string name = Name("badcmd");
  auto r = pm_->Run(p, name, dir_.path() + "/badcmd.log", Labels());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("/bin/no-such-binary"), std::string::npos) << r.status().ToString();
  auto st = pm_->Inspect(name);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kNotFound);
}

TEST_F(PodmanTest, SecurityContextIsApplied) {
  ContainerPlan p = Plan({"echo id=$(id -u):$(id -g); echo x > /rootfs-write 2>/dev/null && echo rw || echo ro"});
  p.run_as_user = 1234;
  p.run_as_group = 567;
  p.read_only_root = true;
  p.cap_drop = {"ALL"};
  std::string name = Name("sec");
  std::string log = dir_.path() + "/sec.log";
  auto id = pm_->Run(p, name, log, Labels());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(WaitExited(name).exit_code, 0);
  std::string text = WaitLog(log, "stdout F r");
  EXPECT_NE(text.find("stdout F id=1234:567\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stdout F ro\n"), std::string::npos) << text;
}

// Pure: what podman cannot express is an error naming the field.
TEST(PodmanArgsTest, MapsThePlanAndRefusesWhatPodmanCannotExpress) {
  TempDir dir("pmargs");
  Podman::Options o;
  o.node_name = "n1";
  o.netns = "gpuop-n1";
  o.state_dir = dir.path() + "/state";
  auto pm = Podman::Create(o);
  ASSERT_TRUE(pm.ok()) << pm.status().ToString();
  EXPECT_TRUE(PathExists(dir.path() + "/state/containers.conf"));
  ContainerPlan p;
  p.name = "c";
  p.image = "img:1";
  p.command = {"/bin/app", "--x"};
  p.args = {"a"};
  p.host_pid = true;
  p.privileged = true;
  p.mounts = {{"/src", "/dst", true, "rslave"}};
  p.devices = {"/dev/nvidia0:/dev/nvidia0:rwm"};
  p.cdi_devices = {"nvidia.com/gpu=GPU-1"};
  auto args = pm->RunArgs(p, "pod-c-0", "/logs/c.log", {{"k", "v"}});
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  std::string joined = Join(*args, " ");
  for (const char* want :
       {"--network ns:/var/run/netns/gpuop-n1", "--pull never", "--pid host", "--privileged",
        "--mount type=bind,source=/src,destination=/dst,ro=true,bind-propagation=rslave",
        "--device /dev/nvidia0:/dev/nvidia0:rwm", "--device nvidia.com/gpu=GPU-1", "--label gpuop.sim/node=n1",
        "--label k=v", "--log-driver k8s-file --log-opt path=/logs/c.log", "--entrypoint [\"/bin/app\",\"--x\"] img:1 a"}) {
    EXPECT_NE(joined.find(want), std::string::npos) << want << " not in: " << joined;
  }
  p.seccomp_unconfined = true;
  args = pm->RunArgs(p, "pod-c-0", "/logs/c.log", {});
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_NE(Join(*args, " ").find("--security-opt seccomp=unconfined"), std::string::npos);
  p.seccomp_unconfined = false;
  p.run_as_user.reset();
  p.run_as_group = 5;
  auto bad = pm->RunArgs(p, "pod-c-0", "/logs/c.log", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("runAsGroup"), std::string::npos);
  p.run_as_group.reset();
  p.mounts = {{"/a,b", "/dst", false, ""}};
  bad = pm->RunArgs(p, "pod-c-0", "/logs/c.log", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("volumeMounts /dst"), std::string::npos);
  o.netns = "";  // an instance that only lists and removes
  auto lister = Podman::Create(o);
  ASSERT_TRUE(lister.ok()) << lister.status().ToString();
  p.mounts.clear();
  bad = lister->RunArgs(p, "pod-c-0", "/logs/c.log", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no network namespace"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::simcluster
