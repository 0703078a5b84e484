#include "base/strings.h"

#include <gtest/gtest.h>

namespace gpuop {
namespace {

using namespace std::chrono_literals;

TEST(DurationTest, Parses) {
  EXPECT_EQ(*ParseDuration("500ms"), 500ms);
  EXPECT_EQ(*ParseDuration("30s"), 30s);
  EXPECT_EQ(*ParseDuration("5m"), 300s);
  EXPECT_EQ(*ParseDuration("1h"), 3600s);
  EXPECT_EQ(*ParseDuration("1m30s"), 90s);
  for (const char* bad : {"", "5", "m", "0s", "5x", "-1s", "1.5s", "s5", "99999999999s"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}


TEST(StringsTest, HttpReasonPhrase) {
  EXPECT_EQ(HttpReasonPhrase(200), "OK");
  EXPECT_EQ(HttpReasonPhrase(404), "Not Found");
  EXPECT_EQ(HttpReasonPhrase(409), "Conflict");
  EXPECT_EQ(HttpReasonPhrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(HttpReasonPhrase(503), "Service Unavailable");
  EXPECT_EQ(HttpReasonPhrase(299), "");  // no phrase: callers fall back
  EXPECT_EQ(HttpReasonPhrase(0), "");
}

TEST(StringsTest, Base64DecodeStandardAlphabet) {
  EXPECT_EQ(Base64Decode("aGVsbG8="), "hello");
  EXPECT_EQ(Base64Decode("aGk="), "hi");
  EXPECT_EQ(Base64Decode("YQ=="), "a");
  EXPECT_EQ(Base64Decode(""), "");
  EXPECT_EQ(Base64Decode("+/8="), std::string("\xfb\xff"));
}

TEST(StringsTest, Base64DecodeToleratesLineBreaksAndMissingPadding) {
  EXPECT_EQ(Base64Decode("aGVs\nbG8=\n"), "hello");
  EXPECT_EQ(Base64Decode(" aGVs\r\n\tbG8= "), "hello");
  EXPECT_EQ(Base64Decode("aGVsbG8"), "hello");
  EXPECT_EQ(Base64Decode("YQ"), "a");
}

TEST(StringsTest, Base64DecodeRejectsMalformedInput) {
  EXPECT_EQ(Base64Decode("aGVs*bG8="), std::nullopt);  // stray character
  EXPECT_EQ(Base64Decode("aGVsbG8-"), std::nullopt);   // URL-safe alphabet is not standard
  EXPECT_EQ(Base64Decode("aGk=aGk="), std::nullopt);   // data after padding
  EXPECT_EQ(Base64Decode("aGVsbG8=x"), std::nullopt);
  EXPECT_EQ(Base64Decode("aGVsb"), std::nullopt);  // one dangling character
}

TEST(Utf8Test, FindsTheFirstInvalidByte) {
  EXPECT_EQ(InvalidUtf8Offset(""), std::nullopt);
  EXPECT_EQ(InvalidUtf8Offset("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), std::nullopt);
  EXPECT_EQ(InvalidUtf8Offset("ab\xff"), 2u);
  EXPECT_EQ(InvalidUtf8Offset("a\xc3"), 1u);             // truncated
  EXPECT_EQ(InvalidUtf8Offset("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(InvalidUtf8Offset("x\xed\xa0\x80"), 1u);     // surrogate
  EXPECT_EQ(InvalidUtf8Offset("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(InvalidUtf8Offset("\xe2\x28\xa1"), 0u);      // bad continuation
}

}  // namespace
}  // namespace gpuop
