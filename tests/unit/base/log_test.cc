#include "base/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace gpuop {
namespace {

constexpr int64_t kTs = 1764662400123;  // 2025-12-02T08:00:00.123Z

TEST(LogTest, TextLineQuotesOnlyWhenNeeded) {
  std::string line = FormatLogLine(LogFormat::kText, LogLevel::kWarn, "gpu lost",
                                   {{"gpu", 3}, {"uuid", "GPU-1"}, {"why", "fell off \"bus\""}},
                                   kTs);
  EXPECT_EQ(line,
            "ts=2025-12-02T08:00:00.123Z level=warn msg=\"gpu lost\" gpu=3 uuid=GPU-1 "
            "why=\"fell off \\\"bus\\\"\"\n");
}

TEST(LogTest, JsonLineParses) {
  std::string line = FormatLogLine(LogFormat::kJson, LogLevel::kInfo, "ready",
                                   {{"ok", true}, {"text", "a\nb"}}, kTs);
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["msg"], "ready");
  EXPECT_EQ(j["ok"], "true");
  EXPECT_EQ(j["text"], "a\nb");
  EXPECT_EQ(j["ts"], "2025-12-02T08:00:00.123Z");
}

TEST(LogTest, LevelFilters) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  SetLogFd(fds[1]);
  SetLogLevel(LogLevel::kWarn);
  LogInfo("hidden");
  LogError("shown", {{"code", 7}});
  SetLogFd(2);
  SetLogLevel(LogLevel::kInfo);
  close(fds[1]);
  char buf[512] = {};
  ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
  close(fds[0]);
  ASSERT_GT(n, 0);
  std::string out(buf, static_cast<size_t>(n));
  EXPECT_EQ(out.find("hidden"), std::string::npos);
  EXPECT_NE(out.find("level=error msg=shown code=7"), std::string::npos);
}

TEST(LogTest, ParsesNames) {
  LogLevel l{};
  LogFormat f{};
  EXPECT_TRUE(ParseLogLevel("debug", &l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_FALSE(ParseLogLevel("verbose", &l));
  EXPECT_TRUE(ParseLogFormat("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("xml", &f));
}

}  // namespace
}  // namespace gpuop
