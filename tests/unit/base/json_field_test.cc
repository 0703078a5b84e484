// base/json_field.h: optional fields read without a check at every level,
// typed, with a fallback for what is missing or of another type (the *Field
// readers) or an error naming the field (the Read* ones).
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

TEST(JsonFieldTest, StrictReadsKeepDefaultsAndNameWrongTypes) {
  const nlohmann::json s = nlohmann::json::parse(
      R"({"on": true, "name": "x", "empty": "", "n": 7, "neg": -1, "list": ["a", "b"],
          "map": {"k": "v"}, "null": null})");
  bool b = false;
  std::string str = "default";
  int64_t n = 42;
  std::vector<std::string> list{"d"};
  std::map<std::string, std::string> map{{"d", "d"}};
  // Present and of the right type: read.
  ASSERT_TRUE(ReadBool(s, "on", "spec.x", &b).ok());
  EXPECT_TRUE(b);
  ASSERT_TRUE(ReadString(s, "name", "spec.x", &str).ok());
  EXPECT_EQ(str, "x");
  ASSERT_TRUE(ReadWholeNumber(s, "n", "spec.x", &n).ok());
  EXPECT_EQ(n, 7);
  ASSERT_TRUE(ReadStringList(s, "list", "spec.x", &list).ok());
  EXPECT_EQ(list, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(ReadStringMap(s, "map", "spec.x", &map).ok());
  EXPECT_EQ(map, (std::map<std::string, std::string>{{"k", "v"}}));
  // Missing or null: the default stays.
  str = "default";
  ASSERT_TRUE(ReadString(s, "missing", "spec.x", &str).ok());
  ASSERT_TRUE(ReadString(s, "null", "spec.x", &str).ok());
  EXPECT_EQ(str, "default");
  // "" is a value for ReadString, unset for ReadNonEmptyString.
  ASSERT_TRUE(ReadNonEmptyString(s, "empty", "spec.x", &str).ok());
  EXPECT_EQ(str, "default");
  ASSERT_TRUE(ReadString(s, "empty", "spec.x", &str).ok());
  EXPECT_EQ(str, "");
  // The wrong type: an error naming the field and what it wants; *out untouched.
  n = 42;
  Status bad = ReadWholeNumber(s, "neg", "spec.x", &n, "seconds");
  EXPECT_EQ(bad.message(), "spec.x.neg: want a whole number of seconds (0 or more), got -1");
  EXPECT_EQ(n, 42);
  EXPECT_EQ(ReadBool(s, "name", "spec.x", &b).message(),
            "spec.x.name: want true or false, got \"x\"");
  EXPECT_EQ(ReadString(s, "n", "spec.x", &str).message(), "spec.x.n: want a string, got 7");
  EXPECT_EQ(ReadStringList(s, "map", "spec.x", &list).message(),
            "spec.x.map: want a list of strings, got {\"k\":\"v\"}");
  EXPECT_FALSE(ReadStringList(nlohmann::json::parse(R"({"l": ["a", 1]})"), "l", "p", &list).ok());
  EXPECT_FALSE(ReadStringMap(nlohmann::json::parse(R"({"m": {"k": 1}})"), "m", "p", &map).ok());
  EXPECT_EQ(list, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace gpuop
