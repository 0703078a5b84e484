// base/json_field.h: optional fields read without a check at every level,
// typed, with a fallback for what is missing or of another type.
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

TEST(JsonFieldTest, TypedReadsFallBack) {
  const nlohmann::json s = nlohmann::json::parse(
      R"({"name": "x", "empty": "", "on": true, "n": 7, "f": 1.5,
          "list": ["a", 1, "b"], "map": {"k": "v", "i": 2}})");
  EXPECT_EQ(StringField(s, "name"), "x");
  EXPECT_EQ(StringField(s, "empty", "d"), "");  // an empty string is a value
  EXPECT_EQ(NonEmptyStringField(s, "empty", "d"), "d");
  EXPECT_EQ(NonEmptyStringField(s, "name", "d"), "x");
  EXPECT_EQ(StringField(s, "on", "d"), "d");  // not a string
  EXPECT_EQ(StringField(s, "missing"), "");
  EXPECT_TRUE(BoolField(s, "on", false));
  EXPECT_FALSE(BoolField(s, "name", false));
  EXPECT_EQ(IntField(s, "n"), 7);
  EXPECT_EQ(IntField(s, "f"), std::nullopt);
  EXPECT_EQ(IntField(s, "missing"), std::nullopt);
  EXPECT_EQ(StringList(s["list"]), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(StringList(s["map"]).empty());
  EXPECT_EQ(StringMap(s["map"]), (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_TRUE(StringMap(s["list"]).empty());
}

}  // namespace
}  // namespace gpuop
