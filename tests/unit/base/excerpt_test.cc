#include <gtest/gtest.h>

#include <string>

#include "base/strings.h"

namespace gpuop {
namespace {

TEST(ExcerptTest, ShortTextIsWhole) {
  EXPECT_EQ(Excerpt(""), "");
  EXPECT_EQ(Excerpt("migStrategy: both"), "migStrategy: both");
  EXPECT_EQ(Excerpt(std::string(80, 'a')), std::string(80, 'a'));
  EXPECT_EQ(Excerpt("abcdef", 6), "abcdef");
}

TEST(ExcerptTest, LongTextIsCutAndItsSizeTold) {
  EXPECT_EQ(Excerpt(std::string(81, 'a')), std::string(80, 'a') + "... (81 bytes)");
  const std::string file = "root:x:0:0:root:/root:/bin/bash\n" + std::string(100000, 'z');
  EXPECT_EQ(Excerpt(file, 10), "root:x:0:0... (100032 bytes)");
}

TEST(ExcerptTest, CutsBetweenUtf8Characters) {
  const std::string e = "\xc3\xa9";  // é, two bytes
  EXPECT_EQ(Excerpt(e + e + e, 3), e + "... (6 bytes)");
  EXPECT_EQ(Excerpt(e + e + e, 4), e + e + "... (6 bytes)");
  EXPECT_EQ(Excerpt("\xe2\x82\xac\xe2\x82\xac", 2), "... (6 bytes)");  // €€
}

}  // namespace
}  // namespace gpuop
