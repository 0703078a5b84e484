// The driver and toolkit checks against a simulated host root (the GPU
// simulator's NVML installed as the driver's libnvidia-ml.so), and the files
// they write: exactly NVIDIA's names and contents.
#include "validator/checks.h"

#include <gtest/gtest.h>

#include <future>
#include <stop_token>
#include <thread>

#include "base/files.h"
#include "sim/host/host_root.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/wait.h"
#include "validator/validator.h"

namespace gpuop::validator {
namespace {

class ValidatorCheckTest : public ::testing::Test {
 protected:
  // A simulated node whose driver is installed at <dir>/host<driver_root>.
  void SetUpNode(const std::string& driver_root = "/") {
    ASSERT_TRUE(node_.Boot("dgx-h100", "validator"));
    auto machine = sim::LoadMachine("dgx-h100", "validator");
    ASSERT_TRUE(machine.ok()) << machine.status().ToString();
    sim::HostRootOptions ho;
    ho.nvml_sim_library = gpuop::testing::kSimNvml;
    auto plan = sim::PlanHostRoot(*machine, ho);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const std::string root = JoinRoot(node_.dir() + "/host", driver_root);
    auto written = sim::WriteHostRoot(root, *plan);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    o_.read_root = node_.dir() + "/host";
    o_.output_dir = node_.dir() + "/validations";
    o_.node_name = "h100-1";
    o_.component = Component::kDriver;
  }

  std::string File(const char* name) const { return o_.output_dir + "/" + name; }

  gpuop::testing::SimNode node_;
  Options o_;
};

TEST_F(ValidatorCheckTest, HostDriverWritesNvidiasDriverReady) {
  SetUpNode();
  ASSERT_TRUE(MakeDirs(o_.output_dir).ok());
  ASSERT_TRUE(RunCheck(o_, nullptr, {}).ok());
  auto content = ReadFile(File(kDriverReadyFile));
  ASSERT_TRUE(content.ok()) << content.status().ToString();
  EXPECT_EQ(*content,
            "IS_HOST_DRIVER=true\n"
            "NVIDIA_DRIVER_ROOT=/\n"
            "DRIVER_ROOT_CTR_PATH=/host\n"
            "NVIDIA_DEV_ROOT=/\n"
            "DEV_ROOT_CTR_PATH=/host\n");
  // What the toolkit and the MIG manager take from it.
  auto read = host::ReadDriverReady(node_.dir(), "/validations");
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status().ToString();
  EXPECT_TRUE((*read)->host_driver);
  EXPECT_EQ((*read)->driver_root, "/");

  auto d = CheckDriver(o_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->gpus, 8u);
  EXPECT_TRUE(d->host_driver);
  EXPECT_EQ(d->nvml_path.rfind(o_.read_root, 0), 0u) << d->nvml_path;
}

TEST_F(ValidatorCheckTest, HostRootNamedByHostRootVariable) {
  SetUpNode();
  o_.host_root = "/custom";
  auto d = CheckDriver(o_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(DriverReadyContent(*d),
            "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/custom\nDRIVER_ROOT_CTR_PATH=/host\n"
            "NVIDIA_DEV_ROOT=/custom\nDEV_ROOT_CTR_PATH=/host\n");
}

TEST_F(ValidatorCheckTest, UnloadedDriverFailsAndRemovesTheStaleFile) {
  SetUpNode();
  ASSERT_TRUE(sim::SetDriverLoaded(node_.store(), false).ok());
  ASSERT_TRUE(MakeDirs(o_.output_dir).ok());
  ASSERT_TRUE(WriteFileAtomic(File(kDriverReadyFile), "IS_HOST_DRIVER=true\n").ok());
  Status s = RunCheck(o_, nullptr, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("driver validation failed"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("h100-1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("load the driver"), std::string::npos) << s.message();
  EXPECT_FALSE(PathExists(File(kDriverReadyFile)));

  // Loaded again: the same check passes.
  ASSERT_TRUE(sim::SetDriverLoaded(node_.store(), true).ok());
  EXPECT_TRUE(RunCheck(o_, nullptr, {}).ok());
  EXPECT_TRUE(PathExists(File(kDriverReadyFile)));
}

TEST_F(ValidatorCheckTest, SimDriverVariableUnloadedFails) {
  SetUpNode();
  ::setenv("GPUOP_SIM_DRIVER", "unloaded", 1);
  auto d = CheckDriver(o_);
  ::unsetenv("GPUOP_SIM_DRIVER");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("does not start"), std::string::npos) << d.status().message();
}

TEST_F(ValidatorCheckTest, NoDriverAnywhereSaysWhatToDo) {
  ASSERT_TRUE(node_.Boot("dgx-h100", "validator"));
  o_.read_root = node_.dir() + "/empty-host";
  o_.output_dir = node_.dir() + "/validations";
  ASSERT_TRUE(MakeDirs(o_.read_root).ok());
  auto d = CheckDriver(o_);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("driver.enabled"), std::string::npos) << d.status().message();
}

TEST_F(ValidatorCheckTest, ContainerDriverWaitsForDriverCtrReady) {
  SetUpNode(kDefaultDriverInstallDir);
  ASSERT_TRUE(MakeDirs(o_.output_dir).ok());
  auto d = CheckDriver(o_);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(".driver-ctr-ready"), std::string::npos)
      << d.status().message();

  // WITH_WAIT: the check retries until the driver container signals ready.
  o_.with_wait = true;
  o_.sleep_interval_seconds = 1;
  std::stop_source stop;
  auto done =
      std::async(std::launch::async, [&] { return RunCheck(o_, nullptr, stop.get_token()); });
  ASSERT_TRUE(WriteFileAtomic(File(kDriverCtrReadyFile),
                              "GDRCOPY_ENABLED: false\nGDS_ENABLED: false\n"
                              "GPU_DIRECT_RDMA_ENABLED: false\n")
                  .ok());
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  Status s = done.get();
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto content = ReadFile(File(kDriverReadyFile));
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(*content,
            "IS_HOST_DRIVER=false\n"
            "NVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
            "DRIVER_ROOT_CTR_PATH=/driver-root\n"
            "NVIDIA_DEV_ROOT=/run/nvidia/driver\n"
            "DEV_ROOT_CTR_PATH=/driver-root\n");
}

TEST_F(ValidatorCheckTest, WithWaitStopsOnRequest) {
  SetUpNode(kDefaultDriverInstallDir);
  o_.with_wait = true;
  o_.sleep_interval_seconds = 3600;
  std::stop_source stop;
  auto done =
      std::async(std::launch::async, [&] { return RunCheck(o_, nullptr, stop.get_token()); });
  stop.request_stop();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  Status s = done.get();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_FALSE(PathExists(File(kDriverReadyFile)));
}

TEST_F(ValidatorCheckTest, ToolkitReadyWhenNvmlLoadsInTheContainer) {
  SetUpNode();
  o_.component = Component::kToolkit;
  o_.nvml_library = gpuop::testing::kSimNvml;
  ASSERT_TRUE(RunCheck(o_, nullptr, {}).ok());
  auto content = ReadFile(File(kToolkitReadyFile));
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(*content, "");
}

TEST_F(ValidatorCheckTest, ToolkitNotReadyWithoutInjectedNvml) {
  SetUpNode();
  o_.component = Component::kToolkit;
  o_.nvml_library = node_.dir() + "/nowhere/libnvidia-ml.so.1";
  Status s = RunCheck(o_, nullptr, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("toolkit validation failed"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("runtime"), std::string::npos) << s.message();
  EXPECT_FALSE(PathExists(File(kToolkitReadyFile)));
}

TEST(ValidatorCleanupTest, RemovesReadyFilesButNotTheDriverContainers) {
  gpuop::testing::SimEnv env;
  const std::string dir = env.dir() + "/v";
  ASSERT_TRUE(MakeDirs(dir).ok());
  for (const char* f : {"driver-ready", "toolkit-ready", "cuda-ready", "plugin-ready",
                        ".driver-ctr-ready", "workload-type"}) {
    ASSERT_TRUE(WriteFileAtomic(dir + "/" + f, "").ok());
  }
  ASSERT_TRUE(Cleanup(dir).ok());
  EXPECT_FALSE(PathExists(dir + "/driver-ready"));
  EXPECT_FALSE(PathExists(dir + "/plugin-ready"));
  EXPECT_FALSE(PathExists(dir + "/cuda-ready"));
  EXPECT_TRUE(PathExists(dir + "/.driver-ctr-ready"));
  EXPECT_TRUE(PathExists(dir + "/workload-type"));
}

TEST(ValidatorOptionsTest, NvidiaEnvironmentNamesAndDefaults) {
  auto d = OptionsFromEnv({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->component, Component::kMain);
  EXPECT_FALSE(d->with_wait);
  EXPECT_TRUE(d->with_workload);
  EXPECT_EQ(d->sleep_interval_seconds, 5);
  EXPECT_EQ(d->mig_strategy, "single");
  EXPECT_EQ(d->metrics_port, 0);
  EXPECT_EQ(d->driver_install_dir, "/run/nvidia/driver");
  EXPECT_EQ(d->OutputDir(), "/run/nvidia/validations");

  Options base;
  base.read_root = "/host";
  auto o = OptionsFromEnv({{"COMPONENT", "plugin"},
                           {"WITH_WAIT", "true"},
                           {"WITH_WORKLOAD", "false"},
                           {"SLEEP_INTERVAL_SECONDS", "2"},
                           {"MIG_STRATEGY", "mixed"},
                           {"METRICS_PORT", "8000"},
                           {"NODE_NAME", "n1"},
                           {"OPERATOR_NAMESPACE", "gpu-operator"},
                           {"VALIDATOR_IMAGE", "img:1"},
                           {"VALIDATOR_IMAGE_PULL_SECRETS", "a, b"},
                           {"VALIDATOR_RUNTIME_CLASS", "nvidia"}},
                          base);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->component, Component::kPlugin);
  EXPECT_TRUE(o->with_wait);
  EXPECT_FALSE(o->with_workload);
  EXPECT_EQ(o->sleep_interval_seconds, 2);
  EXPECT_EQ(o->mig_strategy, "mixed");
  EXPECT_EQ(o->metrics_port, 8000);
  EXPECT_EQ(o->OutputDir(), "/host/run/nvidia/validations");
  EXPECT_EQ(o->validator_image_pull_secrets, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o->validator_runtime_class, "nvidia");

  auto bad = OptionsFromEnv({{"WITH_WAIT", "maybe"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("WITH_WAIT"), std::string::npos);
  auto comp = OptionsFromEnv({{"COMPONENT", "mofed"}});
  ASSERT_FALSE(comp.ok());
  EXPECT_NE(comp.status().message().find("driver, toolkit"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::validator
