// The API server's naming rules (src/kube/names.h): apimachinery's messages
// word for word, and the hand-written matchers agreeing with the regular
// expressions those messages quote.
#include "kube/names.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuop::kube {
namespace {

TEST(NamesTest, MessagesMatchApimachinery) {
  EXPECT_TRUE(IsDns1123Subdomain("nvidia.com").empty());
  EXPECT_EQ(
      IsDns1123Subdomain("Foo")[0],
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
      "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
      "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  EXPECT_EQ(IsDns1123Label("a.b"), (std::vector<std::string>{"must not contain dots"}));
  EXPECT_EQ(
      IsDns1123Label("-x")[0],
      "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
      "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
      "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
  EXPECT_EQ(IsDns1123Label(std::string(64, 'a'))[0], "must be no more than 63 characters");
  EXPECT_EQ(
      IsDns1035Label("1abc")[0],
      "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
      "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
      "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
  EXPECT_TRUE(IsPathSegmentName("system:controller:x").empty());
  EXPECT_EQ(IsPathSegmentName("a/b"), (std::vector<std::string>{"may not contain '/'"}));
  EXPECT_TRUE(IsQualifiedName("nvidia.com/gpu.present").empty());
  EXPECT_EQ(IsQualifiedName("/x")[0], "prefix part must be non-empty");
  EXPECT_EQ(IsQualifiedName("a/b/c").size(), 1u);
  EXPECT_TRUE(IsLabelValue("").empty());
  EXPECT_TRUE(IsLabelValue("NVIDIA-H100-80GB-HBM3").empty());
  EXPECT_FALSE(IsLabelValue("has space").empty());
  EXPECT_FALSE(IsConfigMapKey("bad key").empty());
}

TEST(NamesTest, QualifiedNameWithTwoSlashes) {
  EXPECT_EQ(IsQualifiedName("a/b/c"),
            (std::vector<std::string>{
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                "'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')"}));
  // An empty name part fails both the emptiness and the pattern, as upstream.
  EXPECT_EQ(IsQualifiedName("nvidia.com/").size(), 2u);
}

// [a-z0-9]([-a-z0-9]*[a-z0-9])? and its relatives, case by case.
TEST(NamesTest, MatchersFollowThePatterns) {
  for (const char* ok : {"a", "0", "a-b", "a--b", "abc123"}) {
    EXPECT_TRUE(IsDns1123Label(ok).empty()) << ok;
  }
  for (const char* bad : {"", "-a", "a-", "A", "a_b", "a b"}) {
    EXPECT_FALSE(IsDns1123Label(bad).empty()) << bad;
  }
  for (const char* ok : {"a", "a.b", "nvidia.com", "a-1.b-2.c"}) {
    EXPECT_TRUE(IsDns1123Subdomain(ok).empty()) << ok;
  }
  for (const char* bad : {"", ".a", "a.", "a..b", "a.-b", "Nvidia.com"}) {
    EXPECT_FALSE(IsDns1123Subdomain(bad).empty()) << bad;
  }
  EXPECT_EQ(IsDns1123Subdomain(std::string(254, 'a'))[0], "must be no more than 253 characters");
  EXPECT_TRUE(IsDns1035Label("a1").empty());
  EXPECT_FALSE(IsDns1035Label("1a").empty());
  for (const char* ok : {"x", "X.y_z-1", "gpu.present"}) {
    EXPECT_TRUE(IsLabelValue(ok).empty()) << ok;
  }
  for (const char* bad : {"_x", "x_", ".", "a/b"}) {
    EXPECT_FALSE(IsLabelValue(bad).empty()) << bad;
  }
  EXPECT_FALSE(IsLabelValue(std::string(64, 'a')).empty());
  EXPECT_TRUE(IsConfigMapKey(".hidden").empty());
  EXPECT_FALSE(IsConfigMapKey("").empty());
  EXPECT_FALSE(IsConfigMapKey("..").empty());
}

}  // namespace
}  // namespace gpuop::kube
