#include "sim/host/elf_stub.h"

#include <link.h>

#include <cstring>
#include <memory>
#include <string>

#include "base/files.h"
#include "gtest/gtest.h"

namespace gpuop::sim {
namespace {

uint64_t Le(const std::string& b, size_t off, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[off + i]);
  return v;
}

TEST(ElfStubTest, HeaderFieldsAreThoseOfAnElf64SharedObject) {
  std::string b = BuildElfSharedObject("libcuda.so.1", kElfMachineX86_64);
  ASSERT_GE(b.size(), 64u);
  EXPECT_EQ(b.substr(0, 4), std::string("\x7f"
                                        "ELF",
                                        4));
  EXPECT_EQ(b[4], 2);            // ELFCLASS64
  EXPECT_EQ(b[5], 1);            // ELFDATA2LSB
  EXPECT_EQ(b[6], 1);            // EV_CURRENT
  EXPECT_EQ(Le(b, 16, 2), 3u);   // ET_DYN
  EXPECT_EQ(Le(b, 18, 2), 62u);  // EM_X86_64
  EXPECT_EQ(Le(b, 32, 8), 64u);  // e_phoff
  EXPECT_EQ(Le(b, 54, 2), 56u);  // e_phentsize
  EXPECT_EQ(Le(b, 56, 2), 2u);   // e_phnum
  // PT_LOAD covers the whole file from offset 0.
  EXPECT_EQ(Le(b, 64, 4), 1u);
  EXPECT_EQ(Le(b, 64 + 8, 8), 0u);
  EXPECT_EQ(Le(b, 64 + 32, 8), b.size());
  // PT_DYNAMIC follows.
  EXPECT_EQ(Le(b, 120, 4), 2u);
  // The soname string is in the file, NUL-terminated at the end.
  EXPECT_NE(b.find(std::string("libcuda.so.1\0", 13)), std::string::npos);
}

TEST(ElfStubTest, ReaderFindsTheSonameWritten) {
  for (uint16_t machine : {kElfMachineX86_64, kElfMachineAarch64}) {
    auto info = ReadElfSharedObject(BuildElfSharedObject("libnvidia-nvvm.so.4", machine));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->type, 3);
    EXPECT_EQ(info->machine, machine);
    EXPECT_EQ(info->soname, "libnvidia-nvvm.so.4");
  }
}

TEST(ElfStubTest, ReaderRejectsEveryTruncationWithoutOverreading) {
  std::string b = BuildElfSharedObject("libnvidia-ml.so.1", kElfMachineX86_64);
  for (size_t n = 0; n < b.size(); ++n) {
    // A heap copy of exactly n bytes, so ASan catches any read past the end.
    std::unique_ptr<char[]> cut(new char[n == 0 ? 1 : n]);
    std::memcpy(cut.get(), b.data(), n);
    auto info = ReadElfSharedObject(std::string_view(cut.get(), n));
    if (info.ok()) {
      EXPECT_NE(info->soname, "libnvidia-ml.so.1") << "at " << n;
    }
  }
  EXPECT_FALSE(ReadElfSharedObject("#!/bin/sh\necho not elf\n").ok());
}

TEST(ElfStubTest, ReaderRejectsAStringTableOutsideTheFile) {
  std::string b = BuildElfSharedObject("libcuda.so.1", kElfMachineX86_64);
  // DT_STRTAB's value is the first dynamic entry's d_val at 176 + 8.
  b[184] = '\xff';
  b[185] = '\xff';
  EXPECT_FALSE(ReadElfSharedObject(b).ok());
}

int FindLibc(dl_phdr_info* info, size_t, void* data) {
  if (std::strstr(info->dlpi_name, "/libc.so.6") != nullptr) {
    *static_cast<std::string*>(data) = info->dlpi_name;
    return 1;
  }
  return 0;
}

TEST(ElfStubTest, ReaderAgreesWithARealLibrary) {
  std::string libc;
  dl_iterate_phdr(FindLibc, &libc);
  if (libc.empty()) GTEST_SKIP() << "libc.so.6 is not loaded by path in this process";
  auto bytes = ReadFile(libc);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto info = ReadElfSharedObject(*bytes);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->soname, "libc.so.6");
  auto host = HostElfMachine();
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(info->machine, *host);
}

TEST(ElfStubTest, HostMachineIsTheBuildArchitecture) {
  auto m = HostElfMachine();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
#if defined(__x86_64__)
  EXPECT_EQ(*m, kElfMachineX86_64);
#elif defined(__aarch64__)
  EXPECT_EQ(*m, kElfMachineAarch64);
#endif
  EXPECT_TRUE(MultiarchLibDir(*m).ok());
}

TEST(ElfStubTest, MultiarchLibDirs) {
  EXPECT_EQ(*MultiarchLibDir(kElfMachineX86_64), "/usr/lib/x86_64-linux-gnu");
  EXPECT_EQ(*MultiarchLibDir(kElfMachineAarch64), "/usr/lib/aarch64-linux-gnu");
  EXPECT_EQ(MultiarchLibDir(40).status().code(), StatusCode::kNotSupported);  // EM_ARM
}

}  // namespace
}  // namespace gpuop::sim
