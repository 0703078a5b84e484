// `gpuop device-plugin` as a process, for what lives in the command itself:
// an early exit must tear down in an order that leaves no thread reaching a
// destroyed plugin (the test build runs under ASan, which would report it).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "base/files.h"
#include "tests/testing/sim_node.h"

namespace gpuop::deviceplugin {
namespace {

const std::string kGpuop = std::string(GPUOP_BINARY_DIR) + "/bin/gpuop";

int ExitCode(const std::string& command) {
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(DpCommandTest, HealthAddressInUseExitsCleanly) {
  ASSERT_TRUE(PathExists(kGpuop)) << kGpuop << " is not built: build the gpuop target";
  testing::SimNode sim("dgx-a100", "dp-cmd");
  ASSERT_TRUE(sim.booted());
  const std::string root = sim.dir() + "/root";
  ASSERT_EQ(ExitCode(kGpuop + " sim host-root --machine dgx-a100 " + root + " >/dev/null"), 0);

  const int busy = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(busy, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(busy, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(busy, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));

  const std::string log = sim.dir() + "/plugin.log";
  const int rc =
      ExitCode("GPUOP_NVML_LIB=" + testing::kSimNvml + " " + kGpuop + " --host-root " + root +
               " device-plugin --health-addr 127.0.0.1:" + port + " >" + log + " 2>&1");
  close(busy);
  auto out = ReadFile(log);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(rc, 1) << *out;
  EXPECT_NE(out->find("--health-addr"), std::string::npos) << *out;
  EXPECT_EQ(out->find("AddressSanitizer"), std::string::npos) << *out;
}

}  // namespace
}  // namespace gpuop::deviceplugin
