// The binding against an "old driver" (tests/fixtures/nvml_old): only the
// required NVML functions, under their unversioned names. Proves the
// versioned-name fallbacks, the "driver too old" NotSupported for everything
// else, a clean Load failure without a required function, and the message for
// an unloaded driver.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "nvml/client.h"

namespace gpuop::nvml {
namespace {

const std::string kOld = std::string(GPUOP_BINARY_DIR) + "/lib/libnvml-old.so";
const std::string kOldNoUuid = std::string(GPUOP_BINARY_DIR) + "/lib/libnvml-old-nouuid.so";

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(NvmlOldDriverTest, LoadsThroughUnversionedNamesAndEnumerates) {
  auto client = Client::Open(kOld);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_FALSE((*client)->simulated());  // another NVML than gpuop's simulator
  auto count = (*client)->GpuCount();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, 1u);

  auto gpus = (*client)->Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 1u);
  const Gpu& g = (*gpus)[0];
  EXPECT_EQ(g.name, "Tesla K80");
  EXPECT_EQ(g.uuid, "GPU-0ld00000-0000-4000-8000-000000000001");
  // What the old library cannot say stays "unknown" instead of failing.
  EXPECT_EQ(g.minor, -1);
  EXPECT_EQ(g.numa_node, -1);
  EXPECT_EQ(g.memory_mib, 0u);
  EXPECT_EQ(g.architecture, "Unknown");
  EXPECT_FALSE(g.mig_capable);
  EXPECT_TRUE(g.mig_devices.empty());

  auto sys = (*client)->System();
  ASSERT_TRUE(sys.ok()) << sys.status().ToString();
  EXPECT_EQ(sys->driver_version, "");
  EXPECT_EQ(sys->cuda_driver_version, 0);
}

TEST(NvmlOldDriverTest, MissingOptionalFunctionIsDriverTooOld) {
  auto client = Client::Open(kOld);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  Result<MigModeChange> mig = (*client)->SetMigMode(0, true);
  ASSERT_FALSE(mig.ok());
  EXPECT_EQ(mig.status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(mig.status().message(), "the NVIDIA driver's NVML (" + kOld +
                                        ") has no nvmlDeviceGetMigMode: this driver is too old "
                                        "for MIG; upgrade the driver");

  auto watcher = (*client)->NewEventWatcher();
  ASSERT_FALSE(watcher.ok());
  EXPECT_EQ(watcher.status().code(), StatusCode::kNotSupported);
  EXPECT_TRUE(Contains(watcher.status().message(),
                       "has no nvmlEventSetCreate: this driver is too old for NVML events"))
      << watcher.status().message();

  auto profiles = (*client)->GiProfiles(0);
  ASSERT_FALSE(profiles.ok());
  EXPECT_EQ(profiles.status().code(), StatusCode::kNotSupported);

  auto gis = (*client)->CreateGpuInstance(0, 19);
  ASSERT_FALSE(gis.ok());
  EXPECT_EQ(gis.status().code(), StatusCode::kNotSupported);
}

TEST(NvmlOldDriverTest, TelemetryOfAnOldDriverIsAllAbsentNotAnError) {
  auto client = Client::Open(kOld);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto t = (*client)->ReadTelemetry(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->gpu_temp_c.has_value());
  EXPECT_FALSE(t->power_w.has_value());
  EXPECT_FALSE(t->fb_total_mib.has_value());
  EXPECT_FALSE(t->ecc_dbe_volatile.has_value());
  EXPECT_FALSE(t->nvlink_active_links.has_value());
  EXPECT_FALSE(t->clock_event_reasons.has_value());
}

TEST(NvmlOldDriverTest, UnknownGpuIndexIsNotFound) {
  auto client = Client::Open(kOld);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto g = (*client)->GpuByIndex(5);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(g.status().message(), "GPU 5 does not exist: NVML reports 1 GPUs");
}

TEST(NvmlOldDriverTest, MissingRequiredFunctionFailsOpenWithOneLine) {
  auto client = Client::Open(kOldNoUuid);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(client.status().message(),
            "NVML library " + kOldNoUuid +
                " has no nvmlDeviceGetUUID (needed for GPU UUIDs): it is not a usable NVML; "
                "install a current NVIDIA driver");
}

TEST(NvmlOldDriverTest, NonexistentPathSaysHowToFixIt) {
  const std::string path = std::string(GPUOP_BINARY_DIR) + "/lib/no-such-libnvidia-ml.so.1";
  auto client = Client::Open(path);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  const std::string& m = client.status().message();
  EXPECT_EQ(m.rfind("cannot load NVML from " + path + ": ", 0), 0u) << m;
  EXPECT_TRUE(Contains(m,
                       "; is the NVIDIA driver installed? (set --nvml-lib or GPUOP_NVML_LIB "
                       "to use another library)"))
      << m;
}

TEST(NvmlOldDriverTest, UnloadedDriverSaysWhatToDo) {
  ASSERT_EQ(setenv("NVML_OLD_DRIVER", "unloaded", 1), 0);
  auto client = Client::Open(kOld);
  unsetenv("NVML_OLD_DRIVER");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(client.status().message(),
            "NVIDIA driver is not loaded (nvmlInit: Driver Not Loaded): load the nvidia kernel "
            "module or wait for the driver container");
}

}  // namespace
}  // namespace gpuop::nvml
