#include "base/yaml_json.h"

#include <gtest/gtest.h>

namespace gpuop {
namespace {

TEST(ParseYamlDocumentsTest, ReadsEveryDocument) {
  auto docs = ParseYamlDocuments("a: 1\n---\n---\nb: [x, true]\n");
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1]["b"][1], true);
}

// Found by tests/fuzz: yaml-cpp's LoadAll loops forever, taking memory, on a
// document that starts with a stray ','.
TEST(ParseYamlDocumentsTest, StrayCommaIsAnErrorNotAHang) {
  for (const char* text : {",", " , a", "# c\n  ,", "a: b\n---\n, x", "&x ,", ",]"}) {
    auto docs = ParseYamlDocuments(text);
    ASSERT_FALSE(docs.ok()) << text;
    EXPECT_NE(docs.status().message().find("starts with ','"), std::string::npos)
        << docs.status().message();
  }
}

// Found by tests/fuzz: a scalar that is not UTF-8 made a JSON string that
// nlohmann::json throws on when it is written (the device plugin's config
// errors quote values that way).
TEST(ParseYamlDocumentsTest, TextThatIsNotUtf8IsRejected) {
  auto docs = ParseYamlDocuments("a: \"\xff\"\n");
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.status().message(), "byte 4 is not valid UTF-8");
  // NULs made yaml-cpp read "\x01\0\0\0..." as UTF-32, decoding it into such strings.
  docs = ParseYamlDocuments(std::string("\x01\0\0\0{a: 1}", 10));
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.status().message(), "byte 1 is a NUL, which YAML does not allow");
}

}  // namespace
}  // namespace gpuop
