// A config error quotes a bounded excerpt of what it was given, with its
// place, never the whole input: a wrong --config may point at a secret, and
// errors go to logs.
#include <gtest/gtest.h>

#include <string>

#include "deviceplugin/config.h"

namespace gpuop::deviceplugin {
namespace {

std::string ParseError(const std::string& text) {
  auto c = ParseConfig(text, "config file /etc/passwd");
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : c.status().message();
}

TEST(DpConfigExcerptTest, AFileThatIsNotAConfigIsQuotedFromItsFirstLine) {
  std::string passwd = "root:x:0:0:root:/root:/bin/bash\n";
  for (int i = 1; i < 200; ++i) {
    passwd += "user" + std::to_string(i) + ":x:" + std::to_string(i) + ":100::/home:/bin/sh\n";
  }
  passwd += "last-line-secret:x:999:999::/:/bin/false\n";
  const std::string error = ParseError(passwd);
  EXPECT_TRUE(error.starts_with(
      "config file /etc/passwd: line 1: must be a mapping starting with version: v1, got "
      "\"root:x:0:0:root:/root:/bin/bash user1:x:1:100::/home:/bin/sh"))
      << error;
  EXPECT_TRUE(error.ends_with(" bytes)")) << error;
  EXPECT_LT(error.size(), 200u);
  EXPECT_EQ(error.find("last-line-secret"), std::string::npos);

  EXPECT_EQ(ParseError("# a comment\n\n---\nkey=value\n"),
            "config file /etc/passwd: line 4: must be a mapping starting with version: v1, got "
            "\"key=value\"");
}

TEST(DpConfigExcerptTest, LongValuesAreCut) {
  EXPECT_EQ(ParseError("version: v1\nflags: {migStrategy: [" + std::string(5000, 'a') + "]}\n"),
            "config file /etc/passwd: flags.migStrategy: must be a string, got [\"" +
                std::string(78, 'a') + "... (5004 bytes)");
  EXPECT_EQ(ParseError("version: v1\nflags: {migStrategy: " + std::string(5000, 'b') + "}\n"),
            "config file /etc/passwd: flags.migStrategy: unknown MIG strategy \"" +
                std::string(80, 'b') + "... (5000 bytes)\"; use none, single or mixed");
}

}  // namespace
}  // namespace gpuop::deviceplugin
