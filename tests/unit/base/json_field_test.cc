// base/json_field.h: optional fields read without a check at every level.
#include "base/json_field.h"

#include <gtest/gtest.h>

namespace gpuop {
namespace {

TEST(JsonFieldTest, MembersOrNull) {
  const nlohmann::json pod = nlohmann::json::parse(R"({"spec": {"nodeName": "n1"}, "list": [1]})");
  EXPECT_EQ(Field(Field(pod, "spec"), "nodeName"), "n1");
  EXPECT_TRUE(Field(Field(pod, "status"), "phase").is_null());  // missing at any level
  EXPECT_TRUE(Field(pod["list"], "x").is_null());               // not an object
  EXPECT_TRUE(Field(nlohmann::json(), "x").is_null());
}

}  // namespace
}  // namespace gpuop
