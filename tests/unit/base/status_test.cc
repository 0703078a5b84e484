#include "base/status.h"

#include <gtest/gtest.h>

namespace gpuop {
namespace {

Result<int> Half(int v) {
  if (v % 2) return InvalidArgument(std::to_string(v) + " is odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  GPUOP_ASSIGN_OR_RETURN(int h, Half(v));
  GPUOP_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int v) {
  GPUOP_RETURN_IF_ERROR(Half(v).status());
  return Status::Ok();
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFound("GPU 3 does not exist");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: GPU 3 does not exist");
  EXPECT_EQ(s.Annotate("reading node").ToString(), "NotFound: reading node: GPU 3 does not exist");
  EXPECT_EQ(s.Annotate("x").code(), StatusCode::kNotFound);
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);  // 6/2 = 3, then odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
  EXPECT_EQ(r.value_or(-1), -1);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuop
