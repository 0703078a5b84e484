#include "sim/nvml/state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "base/files.h"

namespace gpuop::sim {
namespace {

class StateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuop-simstate-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    machine_ = LoadMachine("dgx-h100", "").value();
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::unique_ptr<StateStore> Open(const std::string& dir) {
    auto s = StateStore::Open(machine_, dir, 1000);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  std::string dir_;
  Machine machine_;
};

TEST_F(StateTest, SerializeRoundTrips) {
  SimState s = InitialState(machine_, 42);
  s.gpus[1].mig_current = s.gpus[1].mig_pending = true;
  GiRecord gi{.id = 1, .profile_id = 9, .start = 0, .size = 4, .serial = 7};
  gi.cis.push_back({.id = 0, .profile = 2, .slices = 3, .start = 0, .serial = 8});
  s.gpus[1].gis.push_back(gi);
  ASSERT_TRUE(ApplyEcc(machine_, s, 2, true).ok());
  ASSERT_TRUE(ApplyXid(machine_, s, 1, 31, 1u, 0u).ok());
  auto back = ParseState(SerializeState(s), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST_F(StateTest, ControlOperations) {
  SimState s = InitialState(machine_, 0);
  ASSERT_TRUE(ApplyEcc(machine_, s, 0, false).ok());
  ASSERT_TRUE(ApplyEcc(machine_, s, 0, true).ok());
  EXPECT_EQ(s.gpus[0].ecc.sbe_volatile, 1u);
  EXPECT_EQ(s.gpus[0].ecc.dbe_aggregate, 1u);
  EXPECT_EQ(s.gpus[0].remapped_uncorrectable, 1u);
  EXPECT_TRUE(s.gpus[0].remap_pending);
  ASSERT_TRUE(ApplyLost(machine_, s, 3).ok());
  EXPECT_TRUE(s.gpus[3].lost);
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.events.back().type, kEventXid);
  EXPECT_EQ(s.events.back().data, 79u);
  EXPECT_EQ(s.events.back().gi, kNoInstanceId);

  // XIDs for a MIG device need one that exists.
  Status st = ApplyXid(machine_, s, 0, 31, 1u, 0u);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("GPU 0 (NVIDIA H100 80GB HBM3)"), std::string::npos);
  EXPECT_EQ(ApplyXid(machine_, s, 8, 31, std::nullopt, std::nullopt).code(), StatusCode::kNotFound);

  // A reset applies the pending MIG mode and clears lost and volatile counters.
  s.gpus[3].mig_pending = true;
  ASSERT_TRUE(ApplyReset(machine_, s, 3).ok());
  EXPECT_FALSE(s.gpus[3].lost);
  EXPECT_TRUE(s.gpus[3].mig_current);
  ASSERT_TRUE(ApplyReset(machine_, s, 0).ok());
  EXPECT_EQ(s.gpus[0].ecc.sbe_volatile, 0u);
  EXPECT_EQ(s.gpus[0].ecc.sbe_aggregate, 1u);

  // Turning MIG off on reset destroys the instances.
  s.gpus[3].gis.push_back({.id = 0, .profile_id = 0, .start = 0, .size = 8, .serial = 1});
  s.gpus[3].mig_pending = false;
  ASSERT_TRUE(ApplyReset(machine_, s, 3).ok());
  EXPECT_TRUE(s.gpus[3].gis.empty());

  ASSERT_TRUE(ApplyDriverLoaded(machine_, s, false).ok());
  EXPECT_FALSE(s.driver_loaded);
  ASSERT_TRUE(ApplyDriverLoaded(machine_, s, true).ok());
  EXPECT_TRUE(s.driver_loaded);
}

TEST_F(StateTest, EventLogKeepsTheNewest) {
  SimState s = InitialState(machine_, 0);
  for (int i = 0; i < 1500; ++i) s.AddEvent(0, kEventXid, static_cast<uint64_t>(i));
  ASSERT_EQ(s.events.size(), kMaxEvents);
  EXPECT_EQ(s.events.front().seq, 1500u - kMaxEvents + 1);
  EXPECT_EQ(s.events.back().seq, 1500u);
  EXPECT_EQ(s.last_seq, 1500u);
}

TEST_F(StateTest, InMemoryStore) {
  auto store = Open("");
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->shared());
  ASSERT_TRUE(InjectEcc(*store, 1, false).ok());
  EXPECT_EQ((*store->Read())->gpus[1].ecc.sbe_volatile, 1u);
  EXPECT_FALSE(PathExists(dir_ + "/state.json"));
}

TEST_F(StateTest, TwoStoresShareOneFile) {
  auto a = Open(dir_ + "/node");
  auto b = Open(dir_ + "/node");
  ASSERT_TRUE(a && b);
  auto before = b->Read();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ((*before)->created_unix_ms, 1000);

  ASSERT_TRUE(InjectXid(*a, 2, 13, std::nullopt, std::nullopt).ok());
  auto after = b->Read();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ((*after)->events.size(), 1u);
  EXPECT_EQ((*after)->events[0].data, 13u);
  // Unchanged file: the cached snapshot comes back.
  EXPECT_EQ(b->Read()->get(), after->get());

  // Many interleaved writers lose no update.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(InjectEcc(i % 2 ? *a : *b, 0, false).ok());
  }
  EXPECT_EQ((*a->Read())->gpus[0].ecc.sbe_aggregate, 20u);
  EXPECT_EQ((*b->Read())->gpus[0].ecc.sbe_aggregate, 20u);
}

TEST_F(StateTest, FailedUpdateWritesNothing) {
  auto a = Open(dir_);
  ASSERT_TRUE(a);
  auto text = ReadFile(dir_ + "/state.json");
  Status s = a->Update([](SimState& st) {
    st.driver_loaded = false;
    return InvalidArgument("no");
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(*ReadFile(dir_ + "/state.json"), *text);
  EXPECT_TRUE((*a->Read())->driver_loaded);
}

TEST_F(StateTest, CorruptFileIsAClearError) {
  {
    auto a = Open(dir_);
    ASSERT_TRUE(a);
  }
  std::ofstream(dir_ + "/state.json") << "{\"version\": 1, \"machine\": ";
  auto b = StateStore::Open(machine_, dir_, 0);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(dir_ + "/state.json"), std::string::npos);
  EXPECT_NE(b.status().message().find("not valid JSON"), std::string::npos);

  std::ofstream(dir_ + "/state.json") << "{\"version\": 1}";
  auto c = StateStore::Open(machine_, dir_, 0);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("malformed"), std::string::npos);
}

TEST_F(StateTest, CorruptionWhileOpenIsSeenByReaders) {
  auto a = Open(dir_);
  ASSERT_TRUE(a);
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/state.json", "garbage").ok());
  auto r = a->Read();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not valid JSON"), std::string::npos);
}

TEST_F(StateTest, StateOfAnotherMachineIsRefused) {
  ASSERT_TRUE(Open(dir_));
  Machine other = LoadMachine("dgx-a100", "").value();
  auto s = StateStore::Open(other, dir_, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("dgx-h100"), std::string::npos);
  EXPECT_NE(s.status().message().find("dgx-a100"), std::string::npos);
  // Another seed (another node) has other UUIDs: refused too.
  Machine reseeded = LoadMachine("dgx-h100", "node-2").value();
  EXPECT_FALSE(StateStore::Open(reseeded, dir_, 0).ok());
}

TEST_F(StateTest, KilledWriterLeavesThePreviousFile) {
  auto a = Open(dir_);
  ASSERT_TRUE(a);
  ASSERT_TRUE(InjectEcc(*a, 0, true).ok());
  auto good = ReadFile(dir_ + "/state.json");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child writes half a temp file, as a writer killed mid-write would.
    auto lock = FileLock::Acquire(dir_ + "/lock", true);
    std::ofstream(dir_ + "/state.json.tmp.999.1") << "{\"version\": 1, \"mach";
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(*ReadFile(dir_ + "/state.json"), *good);
  auto b = Open(dir_);
  ASSERT_TRUE(b);
  EXPECT_EQ((*b->Read())->gpus[0].ecc.dbe_aggregate, 1u);
}

// Any user may use the simulated driver, as any may open a real driver's
// 0666 device nodes: a non-root component (the node-status exporter, uid
// 65532) runs NVML against state a root process made.
TEST_F(StateTest, AnyUserMayUseTheState) {
  const std::string dir = dir_ + "/state";
  auto a = Open(dir);
  ASSERT_TRUE(a);
  ASSERT_TRUE(InjectEcc(*a, 0, true).ok());
  ASSERT_TRUE(DriverHolder::Acquire(dir, "pid 1 (test)").ok());
  auto mode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0u;
  };
  EXPECT_EQ(mode(dir), 0777u);
  EXPECT_EQ(mode(dir + "/holders"), 0777u);
  EXPECT_EQ(mode(dir + "/lock"), 0666u);
  EXPECT_EQ(mode(dir + "/state.json"), 0666u);
  if (::geteuid() != 0) return;               // only root can become another user below
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // mkdtemp's 0700 would keep the user out
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65532) != 0 || ::setuid(65532) != 0) ::_exit(2);
    auto b = StateStore::Open(machine_, dir, 1000);
    if (!b.ok() || (*(*b)->Read())->gpus[0].ecc.dbe_aggregate != 1) ::_exit(3);
    if (!DriverHolder::Acquire(dir, "pid 2 (non-root)").ok()) ::_exit(4);
    ::_exit(InjectEcc(**b, 1, true).ok() ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: setuid, 3: open or read, 4: holder, 5: update";
  EXPECT_EQ((*a->Read())->gpus[1].ecc.dbe_aggregate, 1u);
}

TEST_F(StateTest, OpenFromEnvNeedsAStateDirForControl) {
  ::unsetenv("GPUOP_SIM_STATE");
  auto s = OpenStateFromEnv(true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("GPUOP_SIM_STATE"), std::string::npos);
  ::setenv("GPUOP_SIM_MACHINE", "nope", 1);
  auto bad = OpenStateFromEnv(false);
  ::unsetenv("GPUOP_SIM_MACHINE");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GPUOP_SIM_MACHINE"), std::string::npos);
  auto local = OpenStateFromEnv(false);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ((*local)->machine().name, "dgx-h100");
}

}  // namespace
}  // namespace gpuop::sim
