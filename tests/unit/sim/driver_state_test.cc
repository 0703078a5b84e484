// The simulated kernel driver in the shared state: its three modules and
// version (SimState), LoadDriver, the version NVML and CUDA report, and the
// processes holding the driver (DriverHolder).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/files.h"
#include "sim/nvml/state.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::sim {
namespace {

class DriverStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    machine_ = LoadMachine("dgx-h100", "").value();
    auto s = StateStore::Open(machine_, tmp_.path(), 1000);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  SimState Current() { return *store_->Read().value(); }

  gpuop::testing::TempDir tmp_{"drvstate"};
  Machine machine_;
  std::unique_ptr<StateStore> store_;
};

TEST_F(DriverStateTest, ModulesAndVersionRoundTrip) {
  SimState s = InitialState(machine_, 0);
  EXPECT_TRUE(s.driver_loaded && s.uvm_loaded && s.modeset_loaded);
  EXPECT_EQ(s.driver_version, "");
  s.uvm_loaded = false;
  s.driver_version = "580.65.06";
  auto back = ParseState(SerializeState(s), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->uvm_loaded);
  EXPECT_TRUE(back->modeset_loaded);
  EXPECT_EQ(back->driver_version, "580.65.06");
  EXPECT_EQ(*back, s);
}

TEST_F(DriverStateTest, OldFilesWithoutModulesFollowTheDriver) {
  for (bool loaded : {true, false}) {
    SimState s = InitialState(machine_, 0);
    s.driver_loaded = loaded;
    auto j = nlohmann::json::parse(SerializeState(s));
    j.erase("uvmLoaded");
    j.erase("modesetLoaded");
    j.erase("driverVersion");
    auto back = ParseState(j.dump(), "old");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->uvm_loaded, loaded);
    EXPECT_EQ(back->modeset_loaded, loaded);
    EXPECT_EQ(back->driver_version, "");
  }
}

TEST_F(DriverStateTest, LoadedVersionIsTheMachinesUntilADriverIsLoaded) {
  SimState s = InitialState(machine_, 0);
  EXPECT_EQ(LoadedDriverVersion(machine_, s), machine_.driver_version);
  EXPECT_EQ(LoadedCudaVersion(machine_, s), machine_.cuda_driver_version);
  s.driver_version = "580.65.06";
  EXPECT_EQ(LoadedDriverVersion(machine_, s), "580.65.06");
  EXPECT_EQ(LoadedCudaVersion(machine_, s), 13000);
  s.driver_version = "550.127.05";
  EXPECT_EQ(LoadedCudaVersion(machine_, s), 12040);
}

TEST_F(DriverStateTest, LoadDriverOfAnotherVersionNeedsAnUnload) {
  Status other = LoadDriver(*store_, "580.65.06");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.message().find("driver " + machine_.driver_version + " is loaded"),
            std::string::npos)
      << other.message();
  EXPECT_EQ(Current().driver_version, "");

  ASSERT_TRUE(SetMigLayout(*store_, 0, true, {"1g.10gb"}).ok());
  ASSERT_TRUE(SetDriverLoaded(*store_, false).ok());
  ASSERT_TRUE(LoadDriver(*store_, "580.65.06").ok());
  SimState s = Current();
  EXPECT_TRUE(s.driver_loaded && s.uvm_loaded && s.modeset_loaded);
  EXPECT_EQ(LoadedDriverVersion(machine_, s), "580.65.06");
  EXPECT_TRUE(s.gpus[0].gis.empty());  // instances do not survive the module

  // The same version again is a no-op that keeps what the driver holds, and
  // brings back a module unloaded on its own.
  ASSERT_TRUE(SetMigLayout(*store_, 0, true, {"1g.10gb"}).ok());
  ASSERT_TRUE(store_
                  ->Update([](SimState& st) {
                    st.uvm_loaded = false;
                    return Status::Ok();
                  })
                  .ok());
  ASSERT_TRUE(LoadDriver(*store_, "580.65.06").ok());
  s = Current();
  EXPECT_TRUE(s.uvm_loaded);
  EXPECT_EQ(s.gpus[0].gis.size(), 1u);
  EXPECT_FALSE(LoadDriver(*store_, "570.172.08").ok());
  EXPECT_FALSE(LoadDriver(*store_, "").ok());
}

TEST_F(DriverStateTest, UnloadForgetsTheLoadedVersion) {
  ASSERT_TRUE(SetDriverLoaded(*store_, false).ok());
  ASSERT_TRUE(LoadDriver(*store_, "580.65.06").ok());
  ASSERT_TRUE(SetDriverLoaded(*store_, false).ok());
  SimState s = Current();
  EXPECT_FALSE(s.driver_loaded || s.uvm_loaded || s.modeset_loaded);
  EXPECT_EQ(s.driver_version, "");
}

TEST_F(DriverStateTest, HoldersCountWhileAlive) {
  EXPECT_TRUE(LiveDriverHolders(tmp_.path()).value().empty());
  {
    auto a = DriverHolder::Acquire(tmp_.path(), "pid 1 (vector-add)");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = DriverHolder::Acquire(tmp_.path(), "pid 2 (nvidia-smi)");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    auto live = LiveDriverHolders(tmp_.path());
    ASSERT_TRUE(live.ok()) << live.status().ToString();
    std::sort(live->begin(), live->end());
    EXPECT_EQ(*live, (std::vector<std::string>{"pid 1 (vector-add)", "pid 2 (nvidia-smi)"}));
    DriverHolder moved = std::move(a).value();  // a move keeps the hold
    EXPECT_EQ(LiveDriverHolders(tmp_.path()).value().size(), 2u);
  }
  EXPECT_TRUE(LiveDriverHolders(tmp_.path()).value().empty());
}

TEST_F(DriverStateTest, HolderOfAProcessThatExitsStopsCounting) {
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto h = DriverHolder::Acquire(tmp_.path(), "child");
    char c = h.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(release[0], &c, 1);
    ::_exit(0);  // no destructor: the kernel drops the lock
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_EQ(LiveDriverHolders(tmp_.path()).value(), std::vector<std::string>{"child"});
  ASSERT_EQ(::write(release[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  for (int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);
  EXPECT_TRUE(LiveDriverHolders(tmp_.path()).value().empty());
  // The dead holder's file is gone too.
  EXPECT_TRUE(std::filesystem::is_empty(tmp_.path() + "/holders"));
}

TEST_F(DriverStateTest, HolderAcquiredIsAlwaysSeenByAConcurrentScan) {
  std::atomic<bool> done{false};
  std::thread scanner([&] {
    while (!done) (void)LiveDriverHolders(tmp_.path());
  });
  int missed = 0;
  for (int i = 0; i < 300; ++i) {
    auto h = DriverHolder::Acquire(tmp_.path(), "pid " + std::to_string(i));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    if (LiveDriverHolders(tmp_.path()).value().empty()) ++missed;
  }
  done = true;
  scanner.join();
  EXPECT_EQ(missed, 0) << "a scan removed a holder's file before it was locked";
}

}  // namespace
}  // namespace gpuop::sim
