// The device plugin as a process runs it (deviceplugin/service.h): what a
// node whose GPUs cannot be served does under upstream's FAIL_ON_INIT_ERROR.
#include "deviceplugin/service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "tests/testing/wait.h"

namespace gpuop::deviceplugin {
namespace {

ServiceOptions NoNvml(bool fail_on_init_error, std::atomic<int>* opens) {
  ServiceOptions o;
  o.initial.config.fail_on_init_error = fail_on_init_error;
  o.open_nvml = [opens]() -> Result<std::unique_ptr<nvml::Client>> {
    ++*opens;
    return Unavailable("libnvidia-ml.so.1: cannot open shared object file");
  };
  return o;
}

TEST(DpServiceTest, WithFailOnInitErrorANodeWithoutNvmlFailsTheProcess) {
  std::atomic<int> opens{0};
  Service service(NoNvml(/*fail_on_init_error=*/true, &opens));
  Status s = service.Run(std::stop_token{});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("libnvidia-ml.so.1"), std::string::npos) << s.ToString();
  EXPECT_EQ(opens.load(), 1);
}

TEST(DpServiceTest, WithoutFailOnInitErrorItWaitsForItsStopInstead) {
  std::atomic<int> opens{0};
  Service service(NoNvml(/*fail_on_init_error=*/false, &opens));
  std::stop_source stop;
  auto result = std::async(std::launch::async, [&] { return service.Run(stop.get_token()); });
  ASSERT_TRUE(testing::WaitFor([&] { return opens.load() == 1; }));
  // Not serving, so not healthy; but running, so the DaemonSet does not
  // crash-loop.
  EXPECT_EQ(service.CheckHealth().code(), StatusCode::kUnavailable);
  EXPECT_EQ(result.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  stop.request_stop();
  EXPECT_TRUE(result.get().ok());
}

}  // namespace
}  // namespace gpuop::deviceplugin
