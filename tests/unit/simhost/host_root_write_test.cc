// Writes real host roots into temporary directories and checks them with
// stat(2) and the real ldconfig.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/strings.h"
#include "gtest/gtest.h"
#include "sim/host/host_root.h"
#include "tests/unit/simhost/test_machines.h"

namespace gpuop::sim {
namespace {

namespace fs = std::filesystem;

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

std::string FindTool(const std::string& name) {
  for (const char* dir : {"/sbin", "/usr/sbin", "/usr/bin", "/bin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Runs a shell command and returns its stdout.
std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

class HostRootWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ldconfig_ = FindTool("ldconfig");
    if (ldconfig_.empty()) {
      if (InCi()) FAIL() << "ldconfig is required in CI (install libc-bin)";
      GTEST_SKIP() << "ldconfig is not installed; skipping the host-root write tests";
    }
    std::string tmpl = (fs::temp_directory_path() / "gpuop-hostroot-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
    root_ = tmp_ + "/node";
  }
  void TearDown() override {
    if (!tmp_.empty()) {
      std::error_code ec;
      fs::remove_all(tmp_, ec);  // does not follow symlinks out of the tree
    }
  }

  HostRootResult Write(const Machine& m, HostRootOptions o = {}) {
    auto machine = HostElfMachine();
    EXPECT_TRUE(machine.ok());
    o.elf_machine = *machine;
    auto plan = PlanHostRoot(m, o);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    lib_dir_ = plan->lib_dir;
    auto r = WriteHostRoot(root_, *plan);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HostRootResult{};
  }

  struct stat Lstat(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat((root_ + path).c_str(), &st), 0) << path;
    return st;
  }

  void ExpectNode(const HostRootResult& r, const std::string& path, unsigned major, unsigned minor,
                  mode_t mode) {
    struct stat st = Lstat(path);
    EXPECT_EQ(st.st_mode & 07777, mode) << path;
    if (r.device_nodes_are_files) {
      EXPECT_TRUE(S_ISREG(st.st_mode)) << path;
      return;
    }
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << path;
    EXPECT_EQ(major(st.st_rdev), major) << path;
    EXPECT_EQ(minor(st.st_rdev), minor) << path;
  }

  // Every entry of the tree: type, mode, device number, size and content.
  std::map<std::string, std::string> Snapshot() {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root_)) {
      struct stat st {};
      ::lstat(e.path().c_str(), &st);
      std::string v = std::to_string(st.st_mode) + " " + std::to_string(st.st_rdev) + " " +
                      std::to_string(st.st_size);
      // ldconfig replaces its cache files on every run; everything else must
      // stay the very same inode (nothing rewritten that did not change).
      // Its aux-cache records inode change times, so it differs run to run.
      if (e.path().string().find("/var/cache/ldconfig/") != std::string::npos) continue;
      if (e.path().string().find("ld.so.cache") == std::string::npos) {
        v += " ino=" + std::to_string(st.st_ino);
      }
      if (S_ISLNK(st.st_mode)) v += " -> " + fs::read_symlink(e.path()).string();
      if (S_ISREG(st.st_mode)) v += " " + ReadFile(e.path().string()).value_or("?");
      out[e.path().string()] = v;
    }
    return out;
  }

  std::string ldconfig_, tmp_, root_, lib_dir_;
};

TEST_F(HostRootWriteTest, DeviceNodesHaveTheirTypesNumbersAndModes) {
  HostRootResult r = Write(testing::DgxH100());
  EXPECT_EQ(r.gpus, 8u);
  if (::geteuid() == 0) {
    // Root can mknod (CI runs the tests as root): the nodes must be real.
    EXPECT_FALSE(r.device_nodes_are_files);
  }
  ExpectNode(r, "/dev/nvidia0", 195, 0, 0666);
  ExpectNode(r, "/dev/nvidia7", 195, 7, 0666);
  ExpectNode(r, "/dev/nvidiactl", 195, 255, 0666);
  ExpectNode(r, "/dev/nvidia-modeset", 195, 254, 0666);
  ExpectNode(r, "/dev/nvidia-uvm", kNvidiaUvmMajor, 0, 0666);
  ExpectNode(r, "/dev/nvidia-uvm-tools", kNvidiaUvmMajor, 1, 0666);
  ExpectNode(r, "/dev/nvidia-caps/nvidia-cap1", kNvidiaCapsMajor, 1, 0400);
  ExpectNode(r, "/dev/nvidia-caps/nvidia-cap2", kNvidiaCapsMajor, 2, 0444);
  ExpectNode(r, "/dev/nvidia-caps/nvidia-cap12", kNvidiaCapsMajor, 12, 0444);
  ExpectNode(r, "/dev/dri/card2", 226, 2, 0660);
  ExpectNode(r, "/dev/dri/renderD130", 226, 130, 0666);
  if (::geteuid() == 0) {
    EXPECT_EQ(Lstat("/dev/dri/card2").st_gid, 44u);
  }
  EXPECT_TRUE(S_ISSOCK(Lstat("/run/nvidia-persistenced/socket").st_mode));
  EXPECT_TRUE(S_ISSOCK(Lstat("/run/nvidia-fabricmanager/socket").st_mode));
  EXPECT_TRUE(S_ISDIR(Lstat("/tmp/nvidia-mps").st_mode));
  EXPECT_EQ(Lstat("/tmp").st_mode & 07777, 01777u);
  EXPECT_EQ(Lstat("/usr/bin/nvidia-smi").st_mode & 0777, 0755u);
  // The DRI nodes resolve through sysfs by bus id, as a CDI generator finds them.
  EXPECT_TRUE(fs::is_directory(root_ + "/sys/bus/pci/devices/0000:3a:00.0/drm/card2"));
  EXPECT_TRUE(fs::is_directory(root_ + "/sys/bus/pci/devices/0000:3a:00.0/driver"));
  EXPECT_EQ(*ReadFile(root_ + "/sys/bus/pci/devices/0000:3a:00.0/vendor"), "0x10de\n");
  // The binaries run and say what they are.
  std::string smi = Capture(root_ + "/usr/bin/nvidia-smi");
  EXPECT_NE(smi.find("simulated"), std::string::npos) << smi;
}

TEST_F(HostRootWriteTest, LdconfigCacheListsTheDriverLibraries) {
  HostRootResult r = Write(testing::DgxH100());
  ASSERT_EQ(r.ld_cache, r.root + "/etc/ld.so.cache");
  std::string listing = Capture(ldconfig_ + " -C " + r.ld_cache + " -p");
  for (const char* soname : {"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-nvvm.so.4",
                             "libnvidia-allocator.so.1", "libnvidia-ptxjitcompiler.so.1"}) {
    std::string want = std::string(soname) + " (";
    size_t at = listing.find("\t" + want);
    ASSERT_NE(at, std::string::npos) << soname << " missing from:\n" << listing;
    std::string line = listing.substr(at, listing.find('\n', at) - at);
    // The cache holds paths as seen from inside the root.
    EXPECT_NE(line.find("=> " + lib_dir_ + "/" + soname), std::string::npos) << line;
  }
  EXPECT_NE(listing.find("libnvidia-gpucomp.so.570.172.08"), std::string::npos);
  // ldconfig made the soname links in the root's library directory.
  EXPECT_EQ(fs::read_symlink(root_ + lib_dir_ + "/libcuda.so.1").string(), "libcuda.so.570.172.08");
  EXPECT_EQ(fs::read_symlink(root_ + lib_dir_ + "/libnvidia-ml.so.1").string(),
            "libnvidia-ml.so.570.172.08");
}

TEST_F(HostRootWriteTest, SecondRunLeavesTheSameTree) {
  Write(testing::DgxH100());
  auto first = Snapshot();
  HostRootResult again = Write(testing::DgxH100());
  EXPECT_EQ(again.gpus, 8u);
  auto second = Snapshot();
  EXPECT_EQ(first.size(), second.size());
  for (const auto& [path, v] : first) {
    auto it = second.find(path);
    ASSERT_NE(it, second.end()) << path << " vanished";
    EXPECT_TRUE(it->second == v) << path << " changed";
  }
}

TEST_F(HostRootWriteTest, ANewMachineReplacesTheOldLayout) {
  Write(testing::FourL40s());
  ASSERT_TRUE(WriteFileAtomic(root_ + "/dev/mine", "not the simulator's").ok());
  HostRootResult r = Write(testing::OneA100());
  EXPECT_EQ(r.gpus, 1u);
  // The L40S machine's second GPU is gone, with its sysfs directory.
  EXPECT_FALSE(PathExists(root_ + "/dev/nvidia3"));
  EXPECT_FALSE(PathExists(root_ + "/dev/dri/card3"));
  EXPECT_FALSE(PathExists(root_ + "/sys/bus/pci/devices/0000:c1:00.0"));
  EXPECT_FALSE(PathExists(root_ + "/proc/driver/nvidia/gpus/0000:c1:00.0"));
  EXPECT_TRUE(PathExists(root_ + "/dev/nvidia0"));
  EXPECT_TRUE(PathExists(root_ + "/dev/mine"));  // not ours: left alone
  ExpectNode(r, "/dev/nvidia-caps/nvidia-cap137", kNvidiaCapsMajor, 137, 0444);
  EXPECT_EQ(*ReadFile(root_ + "/sys/bus/pci/devices/0000:07:00.0/device"), "0x20b0\n");
}

TEST_F(HostRootWriteTest, CopiesTheNvmlSimulator) {
  // A stand-in for libnvml-sim.so: an ELF object with NVML's soname.
  std::string fake = tmp_ + "/libnvml-sim.so";
  std::string bytes = BuildElfSharedObject("libnvidia-ml.so.1", *HostElfMachine());
  bytes += "distinct";
  ASSERT_TRUE(WriteFileAtomic(fake, bytes, 0755).ok());
  HostRootOptions o;
  o.nvml_sim_library = fake;
  HostRootResult r = Write(testing::OneA100(), o);
  EXPECT_EQ(r.libraries, 17u);
  EXPECT_EQ(*ReadFile(root_ + lib_dir_ + "/libnvidia-ml.so.570.172.08"), bytes);
  std::string listing = Capture(ldconfig_ + " -C " + r.ld_cache + " -p");
  EXPECT_NE(listing.find("libnvidia-ml.so.1 ("), std::string::npos) << listing;
}

TEST_F(HostRootWriteTest, AMissingNvmlSimulatorChangesNothing) {
  HostRootOptions o;
  o.nvml_sim_library = tmp_ + "/no-such-libnvml-sim.so";
  auto plan = PlanHostRoot(testing::OneA100(), o);
  ASSERT_TRUE(plan.ok());
  auto r = WriteHostRoot(root_, *plan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-libnvml-sim.so"), std::string::npos);
  EXPECT_FALSE(PathExists(root_));
}

TEST_F(HostRootWriteTest, RefusesAnNvmlLibraryWithAnotherSoname) {
  std::string wrong = tmp_ + "/libwrong.so";
  ASSERT_TRUE(
      WriteFileAtomic(wrong, BuildElfSharedObject("libwrong.so.1", *HostElfMachine())).ok());
  for (const std::string& source : {wrong, std::string("/dev/null")}) {
    HostRootOptions o;
    o.nvml_sim_library = source;
    auto plan = PlanHostRoot(testing::OneA100(), o);
    ASSERT_TRUE(plan.ok());
    auto r = WriteHostRoot(root_, *plan);
    ASSERT_FALSE(r.ok()) << source;
    EXPECT_NE(r.status().message().find("libnvidia-ml.so.1"), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(PathExists(root_));
  }
}

TEST_F(HostRootWriteTest, RefusesTheRealRootAndAnEmptyName) {
  auto plan = PlanHostRoot(testing::OneA100(), {});
  ASSERT_TRUE(plan.ok());
  for (const std::string& dir :
       std::vector<std::string>{"", " ", "/", "//", "/.", "/tmp/..", tmp_ + "/../../.."}) {
    auto r = WriteHostRoot(dir, *plan);
    ASSERT_FALSE(r.ok()) << "'" << dir << "' was accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << dir;
  }
}

TEST_F(HostRootWriteTest, NeverFollowsASymlinkOutOfTheRoot) {
  std::string outside = tmp_ + "/outside";
  ASSERT_TRUE(MakeDirs(outside).ok());
  ASSERT_TRUE(MakeDirs(root_).ok());
  fs::create_directory_symlink(outside, root_ + "/dev");
  auto plan = PlanHostRoot(testing::OneA100(), {});
  ASSERT_TRUE(plan.ok());
  auto r = WriteHostRoot(root_, *plan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("symbolic link"), std::string::npos) << r.status().message();
  EXPECT_TRUE(fs::is_empty(outside));
}

TEST_F(HostRootWriteTest, AMissingLdconfigIsAClearError) {
  auto plan = PlanHostRoot(testing::OneA100(), {});
  ASSERT_TRUE(plan.ok());
  WriteHostRootOptions o;
  o.ldconfig = tmp_ + "/no-ldconfig";
  auto r = WriteHostRoot(root_, *plan, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("ldconfig"), std::string::npos);
}

TEST_F(HostRootWriteTest, ADeepRootStillGetsSockets) {
  // Longer than sun_path (108 bytes): the sockets are bound via /proc/self/fd.
  root_ = tmp_ + "/" + std::string(60, 'a') + "/" + std::string(60, 'b') + "/node";
  HostRootResult r = Write(testing::OneA100());
  EXPECT_TRUE(S_ISSOCK(Lstat("/run/nvidia-persistenced/socket").st_mode));
}

}  // namespace
}  // namespace gpuop::sim
