#include "sim/nvml/driver_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpuop::sim {
namespace {

TEST(DriverEnvTest, ProfileIndicesByBranch) {
  EXPECT_EQ(GiProfileCountForDriver("535.247.01"), 0xAu);
  EXPECT_EQ(GiProfileCountForDriver("565.57.01"), 0xAu);
  EXPECT_EQ(GiProfileCountForDriver("570.172.08"), 0xDu);
  EXPECT_EQ(GiProfileCountForDriver("575.57.08"), 0x11u);
  EXPECT_EQ(GiProfileCountForDriver("590.44.01"), 0x11u);
  EXPECT_EQ(GiProfileCountForDriver("595.45.04"), 0x12u);
  EXPECT_EQ(GiProfileCountForDriver("610.57.04"), 0x12u);
  EXPECT_EQ(GiProfileCountForDriver("custom"), 0x12u);
  EXPECT_EQ(DriverBranch("580.95.05"), 580u);
  EXPECT_FALSE(DriverHasTemperatureV("560.35.03"));
  EXPECT_TRUE(DriverHasTemperatureV("565.57.01"));
  EXPECT_TRUE(DriverHasTemperatureV("570.172.08"));
}

struct Env {
  std::map<std::string, std::string> vars;
  std::set<std::string> files;
  VisibilityConfig visibility;
  Result<ProcessEnv> Parse() const {
    return ParseProcessEnv(
        [this](const char* n) {
          auto it = vars.find(n);
          return it == vars.end() ? nullptr : it->second.c_str();
        },
        visibility, [this](const std::string& p) { return files.count(p) > 0; });
  }
};

TEST(DriverEnvTest, MigPrivilegeFollowsTheConfigCapabilityInTheContainerView) {
  Env e;
  EXPECT_TRUE(e.Parse()->mig_privileged);  // the host view
  e.visibility = {true, "/c/dev"};
  EXPECT_FALSE(e.Parse()->mig_privileged);
  e.files.insert("/c/dev/nvidia-caps/nvidia-cap2");  // the monitor capability is not enough
  EXPECT_FALSE(e.Parse()->mig_privileged);
  e.files.insert("/c/dev/nvidia-caps/nvidia-cap1");
  EXPECT_TRUE(e.Parse()->mig_privileged);
  e.vars["GPUOP_SIM_MIG_PRIVILEGED"] = "0";
  EXPECT_FALSE(e.Parse()->mig_privileged);
  e.files.clear();
  e.vars["GPUOP_SIM_MIG_PRIVILEGED"] = "1";
  EXPECT_TRUE(e.Parse()->mig_privileged);
}

TEST(DriverEnvTest, ListsAndSwitches) {
  Env e;
  e.vars = {{"GPUOP_SIM_DEPRECATED", " nvmlDeviceGetTemperature,,nvmlDeviceGetMemoryInfo "},
            {"GPUOP_SIM_DENY_GPUS", "3, 0"},
            {"GPUOP_SIM_LIBCUDA", "absent"}};
  auto env = e.Parse();
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->deprecated,
            (std::set<std::string>{"nvmlDeviceGetTemperature", "nvmlDeviceGetMemoryInfo"}));
  EXPECT_EQ(env->denied_gpus, (std::set<unsigned>{0, 3}));
  EXPECT_TRUE(env->libcuda_absent);
  EXPECT_FALSE(Env{}.Parse()->libcuda_absent);
}

TEST(DriverEnvTest, BadValuesNameTheVariableAndTheFix) {
  struct Case {
    const char *var, *value, *want;
  };
  for (const Case& c : {Case{"GPUOP_SIM_MIG_PRIVILEGED", "yes", "use 1"},
                        Case{"GPUOP_SIM_DENY_GPUS", "0,x", "'x' is not a GPU index"},
                        Case{"GPUOP_SIM_DEPRECATED", "cuInit", "'cuInit' is not an NVML symbol"},
                        Case{"GPUOP_SIM_LIBCUDA", "missing", "use absent"}}) {
    SCOPED_TRACE(c.var);
    Env e;
    e.vars[c.var] = c.value;
    auto env = e.Parse();
    ASSERT_FALSE(env.ok());
    EXPECT_NE(env.status().message().find(c.var), std::string::npos) << env.status().message();
    EXPECT_NE(env.status().message().find(c.want), std::string::npos) << env.status().message();
  }
}

}  // namespace
}  // namespace gpuop::sim
