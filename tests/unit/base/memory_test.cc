#include "base/memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/process.h"

namespace gpuop {
namespace {

// KiB of this process's executable resident now, in its read-only mappings
// (/proc/self/smaps): what PageOutExecutable releases. The writable ones
// (.data, RELRO) stay, and how much of them is resident depends on the build.
long ExecutableRssKib() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  const std::string path(exe, n > 0 ? static_cast<size_t>(n) : 0);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool ours = false;
  long kib = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      // "start-end perms offset dev inode path"
      const size_t perms = line.find(' ') + 1;
      ours = line.size() >= path.size() &&
             line.compare(line.size() - path.size(), path.size(), path) == 0 &&
             line[perms + 1] != 'w';
    } else if (ours && line.rfind("Rss:", 0) == 0) {
      kib += std::stol(line.substr(4));
    }
  }
  return kib;
}

// The kernel drops the executable's read-only pages from this process. It
// keeps those another process maps too, so the measurement runs in a private
// copy of this test binary (ctest runs other cases of it meanwhile), which
// this process starts with GPUOP_PAGEOUT_COPY set.
TEST(PageOutExecutableTest, ReleasesTheExecutablesPages) {
  if (std::getenv("GPUOP_PAGEOUT_COPY") == nullptr) {
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    ASSERT_GT(n, 0);
    const std::string copy = testing::TempDir() + "/pageout_copy_" + std::to_string(getpid());
    std::filesystem::copy_file(std::string(exe, static_cast<size_t>(n)), copy,
                               std::filesystem::copy_options::overwrite_existing);
    auto run = RunCommand({"env", "GPUOP_PAGEOUT_COPY=1", copy,
                           "--gtest_filter=PageOutExecutableTest.ReleasesTheExecutablesPages"});
    std::filesystem::remove(copy);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_EQ(run->status, 0) << run->output;
    EXPECT_NE(run->output.find("[  PASSED  ] 1 test"), std::string::npos) << run->output;
    return;
  }
  const long before = ExecutableRssKib();
  ASSERT_GT(before, 0);
  auto advised = PageOutExecutable();
  ASSERT_TRUE(advised.ok()) << advised.status().ToString();
  EXPECT_GT(*advised, 0u);
  const long after = ExecutableRssKib();
  // What runs from here on (this test, gtest) faults back in, each fault
  // with up to 64 KiB around it (the kernel's fault-around): about 1.3 MiB
  // of a sanitizer build's test binary. How much was resident before depends
  // on the code's layout (2.6 MiB with unity sources, more without).
  EXPECT_LT(after, before * 3 / 4) << "before " << before << " KiB, after " << after << " KiB";
}

// Free heap between the allocations a process keeps goes back to the kernel
// only on a trim; the scavenger trims when there is enough of it to matter.
TEST(ReleaseFreeHeapOverTest, TrimsOnlyPastTheThreshold) {
  // Every 64th 1 KiB block kept, the rest freed: ~16 MiB of holes that no
  // trim at the heap's top can return.
  std::vector<std::unique_ptr<char[]>> blocks(16384);
  for (auto& block : blocks) {
    block = std::make_unique<char[]>(1024);
    block[0] = 1;
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i % 64 != 0) blocks[i].reset();
  }
  EXPECT_FALSE(ReleaseFreeHeapOver(size_t{1} << 40));
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  EXPECT_TRUE(ReleaseFreeHeapOver(size_t{1} << 20));
#else
  // ASan's allocator (or another libc's) has no malloc_trim to call.
  EXPECT_FALSE(ReleaseFreeHeapOver(size_t{1} << 20));
#endif
}

// The scavenger runs each registered compactor until it is removed.
TEST(HeapCompactorsTest, RunUntilRemoved) {
  int first = 0, second = 0;
  const int a = AddHeapCompactor([&first] { ++first; });
  const int b = AddHeapCompactor([&second] { ++second; });
  EXPECT_NE(a, b);
  RunHeapCompactors();
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
  RemoveHeapCompactor(a);
  RunHeapCompactors();
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 2);
  RemoveHeapCompactor(b);
}

}  // namespace
}  // namespace gpuop
