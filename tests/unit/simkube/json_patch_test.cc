#include "sim/kube/json_patch.h"

#include <gtest/gtest.h>

namespace gpuop::simkube {
namespace {

using nlohmann::json;

// RFC 7386 appendix A examples.
TEST(MergePatchTest, Rfc7386Examples) {
  struct Case {
    const char* target;
    const char* patch;
    const char* result;
  };
  const Case cases[] = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", "null", "null"},
      {R"({"a":"foo"})", R"("bar")", R"("bar")"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(MergePatch(json::parse(c.target), json::parse(c.patch)), json::parse(c.result))
        << c.target << " + " << c.patch;
  }
}

TEST(MergePatchTest, CreateMergePatchRoundTrips) {
  json from = {{"metadata", {{"labels", {{"a", "1"}, {"b", "2"}}}}}, {"spec", {{"x", {1, 2}}}}};
  json to = {{"metadata", {{"labels", {{"a", "1"}, {"c", "3"}}}}}, {"spec", {{"x", {3}}}}};
  json patch = CreateMergePatch(from, to);
  EXPECT_EQ(patch, json::parse(R"({"metadata":{"labels":{"b":null,"c":"3"}},"spec":{"x":[3]}})"));
  EXPECT_EQ(MergePatch(from, patch), to);
  EXPECT_EQ(CreateMergePatch(from, from), json::object());
}

json Apply(const char* doc, const char* patch) {
  auto r = ApplyJsonPatch(json::parse(doc), json::parse(patch));
  EXPECT_TRUE(r.ok()) << patch << ": " << r.status().ToString();
  return r.ok() ? r.value() : json();
}

TEST(JsonPatchTest, Operations) {
  EXPECT_EQ(Apply(R"({"foo":"bar"})", R"([{"op":"add","path":"/baz","value":"qux"}])"),
            json::parse(R"({"foo":"bar","baz":"qux"})"));
  EXPECT_EQ(Apply(R"({"foo":["bar","baz"]})", R"([{"op":"add","path":"/foo/1","value":"qux"}])"),
            json::parse(R"({"foo":["bar","qux","baz"]})"));
  EXPECT_EQ(Apply(R"({"foo":[1]})", R"([{"op":"add","path":"/foo/-","value":2}])"),
            json::parse(R"({"foo":[1,2]})"));
  EXPECT_EQ(Apply(R"({"baz":"qux","foo":"bar"})", R"([{"op":"remove","path":"/baz"}])"),
            json::parse(R"({"foo":"bar"})"));
  EXPECT_EQ(Apply(R"({"foo":["bar","qux","baz"]})", R"([{"op":"remove","path":"/foo/1"}])"),
            json::parse(R"({"foo":["bar","baz"]})"));
  EXPECT_EQ(Apply(R"({"baz":"qux"})", R"([{"op":"replace","path":"/baz","value":"boo"}])"),
            json::parse(R"({"baz":"boo"})"));
  EXPECT_EQ(Apply(R"({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}})",
                  R"([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}])"),
            json::parse(R"({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}})"));
  EXPECT_EQ(Apply(R"({"foo":["all","grass","cows","eat"]})",
                  R"([{"op":"move","from":"/foo/1","path":"/foo/3"}])"),
            json::parse(R"({"foo":["all","cows","eat","grass"]})"));
  EXPECT_EQ(Apply(R"({"a":{"b":1}})", R"([{"op":"copy","from":"/a","path":"/c"}])"),
            json::parse(R"({"a":{"b":1},"c":{"b":1}})"));
  EXPECT_EQ(
      Apply(
          R"({"baz":"qux","foo":["a",2,"c"]})",
          R"([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}])"),
      json::parse(R"({"baz":"qux","foo":["a",2,"c"]})"));
  // Escaped pointers: "~1" is '/', "~0" is '~' (label keys with a prefix).
  EXPECT_EQ(Apply(R"({"metadata":{"labels":{"nvidia.com/gpu":"1","a~b":"2"}}})",
                  R"([{"op":"remove","path":"/metadata/labels/nvidia.com~1gpu"},
                      {"op":"replace","path":"/metadata/labels/a~0b","value":"3"}])"),
            json::parse(R"({"metadata":{"labels":{"a~b":"3"}}})"));
  // The whole document.
  EXPECT_EQ(Apply(R"({"a":1})", R"([{"op":"replace","path":"","value":[1]}])"), json::parse("[1]"));
}

TEST(JsonPatchTest, ErrorsLeaveDocumentUnchanged) {
  json doc = json::parse(R"({"a":{"b":1},"l":[1,2]})");
  const char* bad[] = {
      R"([{"op":"remove","path":"/nope"}])",
      R"([{"op":"replace","path":"/nope","value":1}])",
      R"([{"op":"add","path":"/x/y","value":1}])",
      R"([{"op":"add","path":"/l/5","value":1}])",
      R"([{"op":"add","path":"/l/01","value":1}])",
      R"([{"op":"test","path":"/a/b","value":2}])",
      R"([{"op":"move","from":"/a","path":"/a/c"}])",
      R"([{"op":"copy","from":"/missing","path":"/c"}])",
      R"([{"op":"bogus","path":"/a"}])",
      R"([{"path":"/a"}])",
      R"([{"op":"add","path":"/a/c"}])",
      R"([{"op":"add","path":"a","value":1}])",
      R"({"op":"add"})",
      // The first op applies, the second fails: nothing changes.
      R"([{"op":"add","path":"/new","value":1},{"op":"remove","path":"/nope"}])",
  };
  for (const char* p : bad) {
    auto r = ApplyJsonPatch(doc, json::parse(p));
    EXPECT_FALSE(r.ok()) << p;
  }
  EXPECT_EQ(doc, json::parse(R"({"a":{"b":1},"l":[1,2]})"));
  auto r = ApplyJsonPatch(doc, json::parse(R"([{"op":"test","path":"/a/b","value":2}])"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "testing value /a/b failed: test failed");
}

}  // namespace
}  // namespace gpuop::simkube
