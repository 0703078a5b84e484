// A simulated node's kernel modules over the shared GPU state: what the
// driver manager and the driver container see and do through
// host::KernelModules.
#include "sim/host/sim_kernel.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include "tests/testing/temp_dir.h"

namespace gpuop::sim {
namespace {

using host::FindModule;
using host::KernelModule;

class SimKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    machine_ = LoadMachine("dgx-h100", "").value();
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
    kernel_ = SimKernelModules(store_);
  }

  // Another process's view of the same node: its own store on the directory.
  std::shared_ptr<StateStore> OpenStore() {
    auto s = StateStore::Open(machine_, tmp_.path(), 1000);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::shared_ptr<StateStore>(std::move(s).value()) : nullptr;
  }

  std::vector<KernelModule> List(host::KernelModules& k) {
    auto modules = k.List();
    EXPECT_TRUE(modules.ok()) << modules.status().ToString();
    return modules.ok() ? *modules : std::vector<KernelModule>{};
  }

  gpuop::testing::TempDir tmp_{"simkernel"};
  Machine machine_;
  std::shared_ptr<StateStore> store_;
  std::unique_ptr<host::KernelModules> kernel_;
};

TEST_F(SimKernelTest, ListsTheThreeModulesWithTheirUsers) {
  std::vector<KernelModule> modules = List(*kernel_);
  ASSERT_EQ(modules.size(), 3u);
  const KernelModule* nvidia = FindModule(modules, "nvidia");
  ASSERT_NE(nvidia, nullptr);
  EXPECT_EQ(nvidia->refcount, 2);
  EXPECT_EQ(nvidia->used_by, (std::vector<std::string>{"nvidia_uvm", "nvidia_modeset"}));
  ASSERT_NE(FindModule(modules, "nvidia_modeset"), nullptr);
  ASSERT_NE(FindModule(modules, "nvidia_uvm"), nullptr);
  EXPECT_EQ(FindModule(modules, "nvidia_uvm")->refcount, 0);

  auto holder = DriverHolder::Acquire(tmp_.path(), "pid 7 (vector-add)");
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  modules = List(*kernel_);
  ASSERT_NE(FindModule(modules, "nvidia_uvm"), nullptr);
  EXPECT_EQ(FindModule(modules, "nvidia_uvm")->refcount, 1);
  auto version = kernel_->NvidiaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, std::optional<std::string>(machine_.driver_version));
}

TEST_F(SimKernelTest, NvidiaIsRefusedBeforeItsUsers) {
  Status s = kernel_->Unload("nvidia");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("in use by nvidia_uvm, nvidia_modeset"), std::string::npos)
      << s.message();
  EXPECT_EQ(List(*kernel_).size(), 3u);

  ASSERT_TRUE(kernel_->Unload("nvidia_modeset").ok());
  Status uvm_left = kernel_->Unload("nvidia");
  ASSERT_FALSE(uvm_left.ok());
  EXPECT_NE(uvm_left.message().find("in use by nvidia_uvm:"), std::string::npos)
      << uvm_left.message();
  std::vector<KernelModule> modules = List(*kernel_);
  const KernelModule* nvidia = FindModule(modules, "nvidia");
  ASSERT_NE(nvidia, nullptr);
  EXPECT_EQ(nvidia->refcount, 1);
}

TEST_F(SimKernelTest, UnloadIsSeenByEveryProcessOfTheNode) {
  ASSERT_TRUE(SetMigLayout(*store_, 0, true, {"1g.10gb"}).ok());
  std::shared_ptr<StateStore> other_store = OpenStore();
  ASSERT_NE(other_store, nullptr);
  auto other = SimKernelModules(other_store);
  for (const char* name : {"nvidia_modeset", "nvidia_uvm", "nvidia"}) {
    Status s = kernel_->Unload(name);
    ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
  }
  EXPECT_TRUE(List(*other).empty());
  auto version = other->NvidiaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, std::nullopt);
  EXPECT_TRUE(other_store->Read().value()->gpus[0].gis.empty());  // gone with the module

  Status again = other->Unload("nvidia");
  EXPECT_EQ(again.code(), StatusCode::kNotFound);
  EXPECT_NE(again.message().find("nvidia is not loaded"), std::string::npos);
  EXPECT_EQ(other->Unload("nvidia_fs").code(), StatusCode::kNotFound);

  ASSERT_TRUE(LoadDriver(*other_store, "580.65.06").ok());
  version = kernel_->NvidiaVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, std::optional<std::string>("580.65.06"));
  EXPECT_EQ(List(*kernel_).size(), 3u);
}

TEST_F(SimKernelTest, UvmIsRefusedWhileAProcessHoldsTheDriver) {
  {
    auto holder = DriverHolder::Acquire(tmp_.path(), "pid 42 (vector-add)");
    ASSERT_TRUE(holder.ok()) << holder.status().ToString();
    Status s = kernel_->Unload("nvidia_uvm");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("in use by 1 process(es): pid 42 (vector-add)"), std::string::npos)
        << s.message();
    EXPECT_NE(FindModule(List(*kernel_), "nvidia_uvm"), nullptr);
  }
  Status s = kernel_->Unload("nvidia_uvm");
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(FindModule(List(*kernel_), "nvidia_uvm"), nullptr);
}

TEST_F(SimKernelTest, HolderInAProcessThatExitsStopsCounting) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto h = DriverHolder::Acquire(tmp_.path(), "pid 9 (child)");
    char c = h.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::_exit(0);  // no destructor runs: only the kernel drops the lock
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  ::close(ready[1]);
  Status s = kernel_->Unload("nvidia_uvm");
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(SimKernelTest, FromEnvNeedsASharedState) {
  const char* saved = std::getenv("GPUOP_SIM_STATE");
  std::string restore = saved ? saved : "";
  ::unsetenv("GPUOP_SIM_STATE");
  auto missing = SimKernelModulesFromEnv();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("GPUOP_SIM_STATE"), std::string::npos)
      << missing.status().message();

  ::setenv("GPUOP_SIM_STATE", tmp_.path().c_str(), 1);
  ::setenv("GPUOP_SIM_MACHINE", "dgx-h100", 1);
  auto from_env = SimKernelModulesFromEnv();
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  ASSERT_TRUE(kernel_->Unload("nvidia_modeset").ok());
  EXPECT_EQ(FindModule(List(**from_env), "nvidia_modeset"), nullptr);
  ::unsetenv("GPUOP_SIM_MACHINE");
  if (saved) {
    ::setenv("GPUOP_SIM_STATE", restore.c_str(), 1);
  } else {
    ::unsetenv("GPUOP_SIM_STATE");
  }
}

}  // namespace
}  // namespace gpuop::sim
