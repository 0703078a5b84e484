// Test helpers for the runtime cores: a host tree in memory (host path →
// bytes), read from a fixture directory, changed by applying a Plan, and
// compared with a golden directory. GPUOP_UPDATE_GOLDEN=1 rewrites the golden
// directory from the result instead of comparing.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "runtime/plan.h"

namespace gpuop::runtime::testing {

using Tree = std::map<std::string, std::string>;

inline std::filesystem::path FixtureDir(const std::string& name) {
  return std::filesystem::path(GPUOP_SOURCE_DIR) / "tests/fixtures/runtime" / name;
}

inline Tree ReadTree(const std::filesystem::path& dir) {
  Tree t;
  if (!std::filesystem::exists(dir)) return t;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == ".keep") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    t["/" + std::filesystem::relative(e.path(), dir).string()] = s.str();
  }
  return t;
}

inline std::optional<std::string> Get(const Tree& t, const std::string& path) {
  auto it = t.find(path);
  return it == t.end() ? std::nullopt : std::optional<std::string>(it->second);
}

// Applies the plan; each change's `before` must match the tree.
inline void Apply(const Plan& plan, Tree* t) {
  for (const FileChange& c : plan.changes) {
    if (c.directory) continue;  // the tree holds files only
    EXPECT_EQ(c.before, Get(*t, c.path)) << c.path;
    if (c.after) {
      (*t)[c.path] = *c.after;
    } else {
      t->erase(c.path);
    }
  }
}

inline void ExpectGolden(const Tree& got, const std::filesystem::path& want_dir) {
  if (std::getenv("GPUOP_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::remove_all(want_dir);
    for (const auto& [path, bytes] : got) {
      std::filesystem::path p = want_dir / path.substr(1);
      std::filesystem::create_directories(p.parent_path());
      std::ofstream(p, std::ios::binary) << bytes;
    }
    return;
  }
  Tree want = ReadTree(want_dir);
  for (const auto& [path, bytes] : want) {
    auto g = Get(got, path);
    ASSERT_TRUE(g.has_value()) << path << " missing; want it as in " << want_dir;
    EXPECT_EQ(*g, bytes) << path << " differs from " << (want_dir / path.substr(1));
  }
  for (const auto& [path, bytes] : got) {
    EXPECT_TRUE(want.count(path)) << path << " is not in " << want_dir;
  }
}

}  // namespace gpuop::runtime::testing
