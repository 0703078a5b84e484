// The simulated driver container's init and stop against a simulated node:
// its run dir, driver tree and /dev in temporary directories, the node's
// kernel over a shared state.
#include "sim/host/driver_container.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "base/files.h"
#include "sim/host/sim_kernel.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::sim {
namespace {

namespace fs = std::filesystem;

const char kLibInTree[] = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1";

class DriverContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    machine_ = LoadMachine("dgx-h100", "").value();
    auto s = StateStore::Open(machine_, tmp_.path() + "/state", 1000);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::shared_ptr<StateStore>(std::move(s).value());
    kernel_ = SimKernelModules(store_);

    options_.run_dir = tmp_.path() + "/run";
    options_.driver_tree = tmp_.path() + "/tree";
    options_.dev_dir = tmp_.path() + "/dev";
    options_.version = "580.65.06";
    options_.config_digest = "digest-1";
    ASSERT_TRUE(MakeDirs(fs::path(options_.driver_tree + kLibInTree).parent_path()).ok());
    ASSERT_TRUE(WriteFileAtomic(options_.driver_tree + kLibInTree, "ELF").ok());
    // A link to it, as the driver installs them.
    fs::create_symlink("libnvidia-ml.so.1",
                       options_.driver_tree + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so");
    ASSERT_TRUE(MakeDirs(options_.dev_dir + "/nvidia-caps").ok());
    if (::geteuid() == 0) {
      MakeNode("/nvidia0", S_IFCHR | 0666, ::makedev(195, 0));
      MakeNode("/nvidiactl", S_IFCHR | 0666, ::makedev(195, 255));
      MakeNode("/nvidia-caps/nvidia-cap1", S_IFCHR | 0400, ::makedev(511, 1));
      MakeNode("/null", S_IFCHR | 0666, ::makedev(1, 3));  // not the driver's
    }
  }

  void MakeNode(const std::string& name, mode_t mode, dev_t dev) {
    ASSERT_EQ(::mknod((options_.dev_dir + name).c_str(), mode, dev), 0) << name;
  }

  std::string Root() const { return options_.run_dir + "/driver"; }
  std::string DaemonsStatus() const {
    return ReadFile(options_.run_dir + "/validations/.driver-daemons-status").value_or("<none>");
  }
  std::optional<std::string> Loaded() {
    auto v = kernel_->NvidiaVersion();
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : std::nullopt;
  }
  size_t GisOnGpu0() { return store_->Read().value()->gpus[0].gis.size(); }

  // A bare node: no driver loaded yet.
  void UnloadPreinstalled() { ASSERT_TRUE(SetDriverLoaded(*store_, false).ok()); }

  gpuop::testing::TempDir tmp_{"drvctr"};
  Machine machine_;
  std::shared_ptr<StateStore> store_;
  std::unique_ptr<host::KernelModules> kernel_;
  DriverContainerOptions options_;
};

TEST_F(DriverContainerTest, FreshLoadSetsUpTheRootAndReportsReady) {
  UnloadPreinstalled();
  Status s = StartDriver(options_, *store_, *kernel_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(DaemonsStatus(), "Ready\n");
  EXPECT_EQ(ReadFile(options_.run_dir + "/nvidia-driver.state").value_or(""), "digest-1\n");
  EXPECT_EQ(Loaded(), std::optional<std::string>("580.65.06"));
  EXPECT_EQ(LoadedDriverVersion(machine_, *store_->Read().value()), "580.65.06");
  EXPECT_EQ(LoadedCudaVersion(machine_, *store_->Read().value()), 13000);
  EXPECT_EQ(ReadFile(Root() + kLibInTree).value_or(""), "ELF");
  std::error_code ec;
  EXPECT_EQ(fs::read_symlink(Root() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so", ec),
            "libnvidia-ml.so.1");
  if (::geteuid() != 0) return;  // the device nodes need mknod
  struct stat st {};
  ASSERT_EQ(::lstat((Root() + "/dev/nvidia0").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, ::makedev(195, 0));
  ASSERT_EQ(::lstat((Root() + "/dev/nvidia-caps/nvidia-cap1").c_str(), &st), 0);
  EXPECT_EQ(st.st_rdev, ::makedev(511, 1));
  EXPECT_TRUE(PathExists(Root() + "/dev/nvidiactl"));
  EXPECT_FALSE(PathExists(Root() + "/dev/null"));
}

TEST_F(DriverContainerTest, SameVersionAndDigestKeepTheLoadedDriver) {
  UnloadPreinstalled();
  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  ASSERT_TRUE(SetMigLayout(*store_, 0, true, {"1g.10gb"}).ok());
  ASSERT_TRUE(fs::remove(Root() + kLibInTree));

  Status s = StartDriver(options_, *store_, *kernel_);  // a container restart
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(GisOnGpu0(), 1u) << "the driver was reloaded";
  EXPECT_EQ(DaemonsStatus(), "Ready\n");
  EXPECT_TRUE(PathExists(Root() + kLibInTree));  // the user space is set up again

  options_.config_digest = "digest-2";  // another configuration reloads
  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  EXPECT_EQ(GisOnGpu0(), 0u);
  EXPECT_EQ(ReadFile(options_.run_dir + "/nvidia-driver.state").value_or(""), "digest-2\n");
}

// A restart with the same digest installs the user space again while the
// node's operands have libnvidia-ml mapped: each file must be replaced by a
// rename (the open copy keeps its bytes), never truncated in place, which
// would kill those processes with SIGBUS.
TEST_F(DriverContainerTest, ReinstallReplacesFilesAMappedCopyKeeps) {
  UnloadPreinstalled();
  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  ASSERT_TRUE(WriteFileAtomic(options_.driver_tree + kLibInTree, "ELF, rebuilt").ok());
  int fd = ::open((Root() + kLibInTree).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  struct stat before {};
  ASSERT_EQ(::fstat(fd, &before), 0);

  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  char buf[16] = {};
  ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
  ::close(fd);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "ELF");
  struct stat after {};
  ASSERT_EQ(::stat((Root() + kLibInTree).c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);
  EXPECT_EQ(ReadFile(Root() + kLibInTree).value_or(""), "ELF, rebuilt");
  for (const auto& e : fs::recursive_directory_iterator(Root())) {
    EXPECT_EQ(e.path().filename().string().find(".installing"), std::string::npos) << e.path();
  }
}

TEST_F(DriverContainerTest, ReloadWithoutADigestForgetsTheOldOne) {
  UnloadPreinstalled();
  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  DriverContainerOptions no_digest = options_;
  no_digest.config_digest.clear();
  ASSERT_TRUE(StartDriver(no_digest, *store_, *kernel_).ok());  // a reload, configuration unknown
  ASSERT_TRUE(SetMigLayout(*store_, 0, true, {"1g.10gb"}).ok());

  // The loaded modules no longer match digest-1: no fast path.
  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  EXPECT_EQ(GisOnGpu0(), 0u) << "took the fast path on a digest of an earlier load";
}

TEST_F(DriverContainerTest, AnotherVersionIsUnloadedFirst) {
  ASSERT_EQ(Loaded(), std::optional<std::string>(machine_.driver_version));  // preinstalled
  ASSERT_TRUE(SetMigLayout(*store_, 0, true, {"1g.10gb"}).ok());
  Status s = StartDriver(options_, *store_, *kernel_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Loaded(), std::optional<std::string>("580.65.06"));
  EXPECT_EQ(GisOnGpu0(), 0u);

  options_.version = "550.127.05";
  s = StartDriver(options_, *store_, *kernel_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Loaded(), std::optional<std::string>("550.127.05"));
  EXPECT_EQ(LoadedCudaVersion(machine_, *store_->Read().value()), 12040);
}

TEST_F(DriverContainerTest, DriverInUseRefusesAnotherVersion) {
  UnloadPreinstalled();
  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  auto holder = DriverHolder::Acquire(store_->dir(), "pid 42 (vector-add)");
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();

  DriverContainerOptions next = options_;
  next.version = "550.127.05";
  Status s = StartDriver(next, *store_, *kernel_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("driver is in use"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pid 42 (vector-add)"), std::string::npos) << s.message();
  EXPECT_EQ(Loaded(), std::optional<std::string>("580.65.06"));
  EXPECT_NE(host::FindModule(kernel_->List().value(), "nvidia_uvm"), nullptr);
  EXPECT_EQ(DaemonsStatus(), "NotReady\n");
  EXPECT_TRUE(PathExists(Root() + kLibInTree));  // consumers keep their driver root
}

TEST_F(DriverContainerTest, BuildFailureLeavesNoDriver) {
  options_.fail = "build";
  Status s = StartDriver(options_, *store_, *kernel_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("building the NVIDIA kernel module 580.65.06 failed"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(Loaded(), std::nullopt);
  EXPECT_TRUE(kernel_->List().value().empty());
  EXPECT_EQ(DaemonsStatus(), "NotReady\n");
  EXPECT_TRUE(fs::is_directory(Root()));
  EXPECT_TRUE(fs::is_empty(Root()));
}

TEST_F(DriverContainerTest, NoVersionIsRefused) {
  options_.version.clear();
  Status s = StartDriver(options_, *store_, *kernel_);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("DRIVER_VERSION"), std::string::npos);
  EXPECT_EQ(Loaded(), std::optional<std::string>(machine_.driver_version));
}

TEST_F(DriverContainerTest, StopUnloadsAndEmptiesTheRootButKeepsIt) {
  UnloadPreinstalled();
  ASSERT_TRUE(StartDriver(options_, *store_, *kernel_).ok());
  {
    auto holder = DriverHolder::Acquire(store_->dir(), "pid 42 (vector-add)");
    ASSERT_TRUE(holder.ok());
    Status busy = StopDriver(options_, *kernel_);
    EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(PathExists(Root() + kLibInTree));
    EXPECT_TRUE(Loaded().has_value());
  }
  Status s = StopDriver(options_, *kernel_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Loaded(), std::nullopt);
  EXPECT_TRUE(kernel_->List().value().empty());
  EXPECT_TRUE(fs::is_directory(Root()));
  EXPECT_TRUE(fs::is_empty(Root()));
}

TEST(DriverVersionFromImageTest, VersionFromTheTag) {
  for (const auto& [image, version] : std::vector<std::pair<std::string, std::string>>{
           {"nvcr.io/nvidia/driver:550.127.05-ubuntu22.04", "550.127.05"},
           {"nvcr.io/nvidia/driver:580.65.06-rhel9.4", "580.65.06"},
           {"localhost:5000/driver:570.172.08", "570.172.08"},
           {"driver:535.230.02-ubuntu24.04", "535.230.02"}}) {
    auto v = DriverVersionFromImage(image);
    ASSERT_TRUE(v.ok()) << image << ": " << v.status().ToString();
    EXPECT_EQ(*v, version) << image;
  }
}

TEST(DriverVersionFromImageTest, BadNamesSayWhatIsExpected) {
  for (const std::string image : {"nvcr.io/nvidia/driver", "localhost:5000/nvidia/driver",
                                  "driver@sha256:0123abcd", "driver:550.127.05@sha256:0123abcd"}) {
    auto v = DriverVersionFromImage(image);
    ASSERT_FALSE(v.ok()) << image;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(v.status().message().find("has no tag"), std::string::npos) << v.status().message();
  }
  for (const std::string image : {"nvcr.io/nvidia/driver:latest", "driver:-ubuntu22.04",
                                  "driver:", "driver:550.x-ubuntu22.04"}) {
    auto v = DriverVersionFromImage(image);
    ASSERT_FALSE(v.ok()) << image;
    EXPECT_NE(v.status().message().find("does not start with a driver version"), std::string::npos)
        << v.status().message();
  }
}

}  // namespace
}  // namespace gpuop::sim
