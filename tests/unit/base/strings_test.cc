#include "base/strings.h"

#include <gtest/gtest.h>

namespace gpuop {
namespace {

TEST(StringsTest, HttpReasonPhrase) {
  EXPECT_EQ(HttpReasonPhrase(200), "OK");
  EXPECT_EQ(HttpReasonPhrase(404), "Not Found");
  EXPECT_EQ(HttpReasonPhrase(409), "Conflict");
  EXPECT_EQ(HttpReasonPhrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(HttpReasonPhrase(503), "Service Unavailable");
  EXPECT_EQ(HttpReasonPhrase(299), "");  // no phrase: callers fall back
  EXPECT_EQ(HttpReasonPhrase(0), "");
}

}  // namespace
}  // namespace gpuop
