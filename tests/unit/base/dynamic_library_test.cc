#include "base/dynamic_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

namespace gpuop {
namespace {

TEST(DynamicLibraryTest, ResolvesTheFirstExportedName) {
  void* self = dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  const char* resolved = nullptr;
  void* p = ResolveFirstSymbol(self, {"gpuop_no_such_symbol_v2", "dlopen", "dlsym"}, &resolved);
  EXPECT_EQ(p, dlsym(self, "dlopen"));
  EXPECT_EQ(std::string(resolved), "dlopen");
}

TEST(DynamicLibraryTest, NamesThePreferredSymbolWhenNoneResolves) {
  void* self = dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  const char* resolved = nullptr;
  EXPECT_EQ(ResolveFirstSymbol(self, {"gpuop_missing_v2", "gpuop_missing"}, &resolved), nullptr);
  EXPECT_EQ(std::string(resolved), "gpuop_missing_v2");
}

}  // namespace
}  // namespace gpuop
