// The ld.so.cache reader against caches made by the real ldconfig (new, old and
// compat formats) and against hand-made broken bytes, plus a fuzz-style loop
// over every truncation and many byte flips of a real cache.
#include "host/ld_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/files.h"
#include "sim/host/elf_stub.h"
#include "tests/unit/host/test_util.h"

namespace gpuop::host {
namespace {

using testing::FindTool;
using testing::InCi;
using testing::TempDir;

constexpr const char* kLibDir = "/usr/lib/x86_64-linux-gnu";

class LdconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ldconfig_ = FindTool("ldconfig");
    if (ldconfig_.empty()) {
      if (InCi()) FAIL() << "ldconfig is required in CI (install libc-bin)";
      GTEST_SKIP() << "ldconfig is not installed; skipping tests against real caches";
    }
    auto machine = sim::HostElfMachine();
    ASSERT_TRUE(machine.ok()) << machine.status().ToString();
    root_ = tmp_.path();
    ASSERT_TRUE(MakeDirs(root_ + kLibDir + std::string("/vdpau")).ok());
    ASSERT_TRUE(MakeDirs(root_ + "/etc").ok());
    Lib("libcuda.so.570.172.08", "libcuda.so.1", *machine);
    Lib("libnvidia-ml.so.570.172.08", "libnvidia-ml.so.1", *machine);
    Lib("libnvidia-gpucomp.so.570.172.08", "libnvidia-gpucomp.so.570.172.08", *machine);
    ASSERT_TRUE(WriteFileAtomic(root_ + "/etc/ld.so.conf", std::string(kLibDir) + "\n").ok());
  }

  void Lib(const std::string& file, const std::string& soname, uint16_t machine) {
    ASSERT_TRUE(WriteFileAtomic(root_ + kLibDir + "/" + file,
                                sim::BuildElfSharedObject(soname, machine), 0755)
                    .ok());
  }

  // Runs ldconfig -r on the root in `format` and returns the cache bytes.
  std::string Build(const std::string& format) {
    std::string cmd = ldconfig_ + " -r " + root_ + " -c " + format + " 2>&1";
    int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << cmd;
    auto bytes = ReadFile(root_ + "/etc/ld.so.cache");
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.ok() ? *bytes : std::string();
  }

  static const LdCacheEntry* Find(const LdCache& c, const std::string& key) {
    for (const auto& e : c.entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  }

  void ExpectDriverEntries(const LdCache& c) {
    const LdCacheEntry* cuda = Find(c, "libcuda.so.1");
    ASSERT_NE(cuda, nullptr);
    EXPECT_EQ(cuda->value, std::string(kLibDir) + "/libcuda.so.1");
    EXPECT_EQ(cuda->flags & kLdFlagTypeMask, kLdFlagElfLibc6);
    EXPECT_EQ(cuda->flags & kLdFlagArchMask, HostLdArchFlag());
    const LdCacheEntry* nvml = Find(c, "libnvidia-ml.so.1");
    ASSERT_NE(nvml, nullptr);
    EXPECT_EQ(nvml->value, std::string(kLibDir) + "/libnvidia-ml.so.1");
    const LdCacheEntry* gpucomp = Find(c, "libnvidia-gpucomp.so.570.172.08");
    ASSERT_NE(gpucomp, nullptr);
    EXPECT_EQ(gpucomp->value, std::string(kLibDir) + "/libnvidia-gpucomp.so.570.172.08");
  }

  TempDir tmp_;
  std::string ldconfig_, root_;
};

TEST_F(LdconfigTest, ReadsTheNewFormat) {
  std::string bytes = Build("new");
  ASSERT_EQ(bytes.compare(0, 20, "glibc-ld.so.cache1.1"), 0);
  auto c = ParseLdCache(bytes, "cache");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->format, LdCacheFormat::kNew);
  EXPECT_EQ(c->entries.size(), 3u);
  ExpectDriverEntries(*c);
  if (HostLdArchFlag() == kLdFlagX8664Lib64) {
    EXPECT_EQ(LdFlagsName(Find(*c, "libcuda.so.1")->flags), "libc6,x86-64");
  }
}

TEST_F(LdconfigTest, ReadsTheCompatFormatThroughItsNewTable) {
  std::string bytes = Build("compat");
  ASSERT_EQ(bytes.compare(0, 11, "ld.so-1.7.0"), 0);
  auto c = ParseLdCache(bytes, "cache");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->format, LdCacheFormat::kOldAndNew);
  ExpectDriverEntries(*c);
}

TEST_F(LdconfigTest, ReadsTheOldFormat) {
  std::string bytes = Build("old");
  ASSERT_EQ(bytes.compare(0, 11, "ld.so-1.7.0"), 0);
  auto c = ParseLdCache(bytes, "cache");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->format, LdCacheFormat::kOld);
  ExpectDriverEntries(*c);
  for (const auto& e : c->entries) EXPECT_EQ(e.hwcap, 0u);
}

TEST_F(LdconfigTest, ReadLdCacheNamesAMissingFile) {
  auto c = ReadLdCache(root_ + "/etc/none.cache");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/etc/none.cache"), std::string::npos);
}

// Every prefix of a real cache (new and compat) either parses or is a clean
// error naming the file; ASan/UBSan catch any read out of bounds.
TEST_F(LdconfigTest, EveryTruncationIsACleanErrorOrAPrefixParse) {
  for (const char* format : {"new", "compat", "old"}) {
    std::string bytes = Build(format);
    ASSERT_FALSE(bytes.empty());
    size_t errors = 0;
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto c = ParseLdCache(std::string_view(bytes).substr(0, n), "/root/etc/ld.so.cache");
      if (!c.ok()) {
        ++errors;
        EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(c.status().message().find("/root/etc/ld.so.cache is not a valid ld.so.cache"),
                  std::string::npos)
            << c.status().message();
      }
    }
    EXPECT_GT(errors, bytes.size() / 2) << format;
  }
}

TEST_F(LdconfigTest, ByteFlipsNeverCrash) {
  std::string bytes = Build("new");
  std::mt19937 rng(42);
  for (int round = 0; round < 4000; ++round) {
    std::string b = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) b[rng() % b.size()] = static_cast<char>(rng());
    auto c = ParseLdCache(b, "cache");
    if (c.ok()) {
      for (const auto& e : c->entries) EXPECT_LE(e.key.size(), b.size());
    } else {
      EXPECT_NE(c.status().message().find("cache is not a valid ld.so.cache"), std::string::npos);
    }
  }
}

// ---- hand-made bytes -------------------------------------------------------

void Put32(std::string& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    b[off + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// A new-format cache with one entry {libx.so.1 → /lib/libx.so.1}.
std::string OneEntryCache() {
  std::string b(48 + 24, '\0');
  std::memcpy(b.data(), "glibc-ld.so.cache1.1", 20);
  Put32(b, 20, 1);  // nlibs
  const std::string strings = std::string("libx.so.1") + '\0' + "/lib/libx.so.1" + '\0';
  Put32(b, 24, static_cast<uint32_t>(strings.size()));
  b[28] = 2;  // little endian
  Put32(b, 48, kLdFlagElfLibc6 | kLdFlagX8664Lib64);
  Put32(b, 52, 72);       // key
  Put32(b, 56, 72 + 10);  // value
  return b + strings;
}

TEST(LdCacheBytesTest, ParsesAHandMadeCache) {
  auto c = ParseLdCache(OneEntryCache(), "f");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->entries.size(), 1u);
  EXPECT_EQ(c->entries[0].key, "libx.so.1");
  EXPECT_EQ(c->entries[0].value, "/lib/libx.so.1");
  EXPECT_EQ(LdFlagsName(c->entries[0].flags), "libc6,x86-64");
}

TEST(LdCacheBytesTest, RejectsBrokenFilesWithTheReason) {
  struct Case {
    const char* name;
    std::string bytes;
    const char* why;
  };
  std::string huge = OneEntryCache();
  Put32(huge, 20, 0x10000000);
  std::string past = OneEntryCache();
  Put32(past, 56, 0x7fffffff);
  std::string unterminated = OneEntryCache();
  unterminated.pop_back();  // the value's NUL, with the table length to match
  Put32(unterminated, 24, static_cast<uint32_t>(unterminated.size() - 72));
  std::string big_endian = OneEntryCache();
  big_endian[28] = 3;
  std::string strings_past = OneEntryCache();
  Put32(strings_past, 24, 1000);
  std::string old_huge = std::string("ld.so-1.7.0") + std::string(5, '\0');
  Put32(old_huge, 12, 99);
  const Case cases[] = {
      {"empty", "", "the file is empty"},
      {"garbage", "this is not a cache at all, really", "no \"glibc-ld.so.cache1.1\""},
      {"short header", "glibc-ld.so.cache1.1\x01", "header is truncated"},
      {"huge nlibs", huge, "counts 268435456 entries"},
      {"value past end", past, "entry 0 value offset"},
      {"unterminated", unterminated, "not terminated"},
      {"big endian", big_endian, "big-endian"},
      {"strings past end", strings_past, "string table"},
      {"old nlibs", old_huge, "counts 99 entries"},
  };
  for (const Case& c : cases) {
    auto r = ParseLdCache(c.bytes, "/x/etc/ld.so.cache");
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(r.status().message().find("/x/etc/ld.so.cache is not a valid ld.so.cache"),
              std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(c.why), std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("ldconfig"), std::string::npos) << c.name;
  }
}

}  // namespace
}  // namespace gpuop::host
