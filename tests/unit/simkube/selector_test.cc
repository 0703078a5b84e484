#include "sim/kube/selector.h"

#include <gtest/gtest.h>

namespace gpuop::simkube {
namespace {

using nlohmann::json;

LabelSelector MustParse(std::string_view s) {
  auto r = LabelSelector::Parse(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().ToString();
  return r.ok() ? r.value() : LabelSelector();
}

TEST(LabelSelectorTest, EmptyMatchesEverything) {
  LabelSelector s = MustParse("");
  EXPECT_TRUE(s.Empty());
  EXPECT_TRUE(s.Matches(json()));
  EXPECT_TRUE(s.Matches(json{{"a", "b"}}));
  EXPECT_TRUE(MustParse("   ").Empty());
}

TEST(LabelSelectorTest, EqualityForms) {
  json labels = {{"app", "gpu"}, {"tier", "node"}};
  EXPECT_TRUE(MustParse("app=gpu").Matches(labels));
  EXPECT_TRUE(MustParse("app==gpu").Matches(labels));
  EXPECT_FALSE(MustParse("app=cpu").Matches(labels));
  EXPECT_TRUE(MustParse("app!=cpu").Matches(labels));
  EXPECT_FALSE(MustParse("app!=gpu").Matches(labels));
  // != matches objects without the label.
  EXPECT_TRUE(MustParse("missing!=x").Matches(labels));
  EXPECT_TRUE(MustParse("app=gpu,tier=node").Matches(labels));
  EXPECT_FALSE(MustParse("app=gpu,tier=edge").Matches(labels));
  EXPECT_TRUE(MustParse(" app = gpu , tier == node ").Matches(labels));
}

TEST(LabelSelectorTest, SetBasedAndExistence) {
  json labels = {{"env", "prod"}, {"gpu", "true"}};
  EXPECT_TRUE(MustParse("env in (prod,staging)").Matches(labels));
  EXPECT_FALSE(MustParse("env in (dev)").Matches(labels));
  EXPECT_TRUE(MustParse("env notin (dev, qa)").Matches(labels));
  EXPECT_FALSE(MustParse("env notin (prod)").Matches(labels));
  EXPECT_TRUE(MustParse("other notin (prod)").Matches(labels));
  EXPECT_FALSE(MustParse("other in (prod)").Matches(labels));
  EXPECT_TRUE(MustParse("gpu").Matches(labels));
  EXPECT_FALSE(MustParse("!gpu").Matches(labels));
  EXPECT_TRUE(MustParse("!cpu").Matches(labels));
  EXPECT_FALSE(MustParse("cpu").Matches(labels));
  EXPECT_TRUE(
      MustParse("a=b,c!=d,e in (x,y),!f,g").Matches(json{{"a", "b"}, {"e", "y"}, {"g", ""}}));
  EXPECT_FALSE(MustParse("a=b,c!=d,e in (x,y),!f,g")
                   .Matches(json{{"a", "b"}, {"e", "y"}, {"g", ""}, {"f", "1"}}));
}

TEST(LabelSelectorTest, EmptyValuesAndPrefixedKeys) {
  json labels = {{"nvidia.com/gpu.present", "true"}, {"empty", ""}};
  EXPECT_TRUE(MustParse("nvidia.com/gpu.present=true").Matches(labels));
  EXPECT_TRUE(MustParse("empty=").Matches(labels));
  EXPECT_FALSE(MustParse("empty=x").Matches(labels));
  EXPECT_TRUE(MustParse("empty in (,x)").Matches(labels));
}

TEST(LabelSelectorTest, GreaterLess) {
  json labels = {{"gen", "5"}, {"name", "x"}};
  EXPECT_TRUE(MustParse("gen>4").Matches(labels));
  EXPECT_FALSE(MustParse("gen>5").Matches(labels));
  EXPECT_TRUE(MustParse("gen<6").Matches(labels));
  EXPECT_FALSE(MustParse("name>1").Matches(labels));
  EXPECT_FALSE(LabelSelector::Parse("gen>x").ok());
}

TEST(LabelSelectorTest, ParseErrors) {
  for (const char* bad :
       {"a in b", "a in (x", "a in ()", "=a", "a b", "a=b c", "!a=b", "a,,b", "a=b=c", "in",
        "a notin", "(a)", "-bad-=x", "a=-bad-", "example.com/=x", "UPPER.com/x=y", "a/b/c=d"}) {
    auto r = LabelSelector::Parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("unable to parse requirement"), std::string::npos)
          << r.status().message();
    }
  }
  auto r = LabelSelector::Parse("a in b");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("found 'b', expected: '('"), std::string::npos)
      << r.status().message();
  auto long_value = LabelSelector::Parse("a=" + std::string(64, 'x'));
  ASSERT_FALSE(long_value.ok());
  EXPECT_NE(long_value.status().message().find("must be no more than 63 characters"),
            std::string::npos);
}

TEST(LabelSelectorTest, StringRoundTrips) {
  LabelSelector s = MustParse("z=1,a in (y,x),!b,c,d!=2,e notin (q)");
  EXPECT_EQ(s.String(), "a in (x,y),!b,c,d!=2,e notin (q),z=1");
  LabelSelector again = MustParse(s.String());
  EXPECT_EQ(again.String(), s.String());
}

TEST(LabelSelectorTest, FromJson) {
  json sel = {{"matchLabels", {{"app", "gpu"}}},
              {"matchExpressions",
               {{{"key", "tier"}, {"operator", "In"}, {"values", {"a", "b"}}},
                {{"key", "skip"}, {"operator", "DoesNotExist"}}}}};
  auto r = LabelSelector::FromJson(sel);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->Matches(json{{"app", "gpu"}, {"tier", "b"}}));
  EXPECT_FALSE(r->Matches(json{{"app", "gpu"}, {"tier", "b"}, {"skip", "1"}}));
  EXPECT_FALSE(r->Matches(json{{"app", "gpu"}}));
  EXPECT_TRUE(LabelSelector::FromJson(json::object())->Empty());
  EXPECT_FALSE(
      LabelSelector::FromJson(json{{"matchExpressions", {{{"key", "a"}, {"operator", "Bogus"}}}}})
          .ok());
  EXPECT_FALSE(
      LabelSelector::FromJson(json{{"matchExpressions", {{{"key", "a"}, {"operator", "In"}}}}})
          .ok());
}

TEST(LabelSelectorTest, MatchesObject) {
  json obj = {{"metadata", {{"name", "n"}, {"labels", {{"a", "b"}}}}}};
  EXPECT_TRUE(MustParse("a=b").MatchesObject(obj));
  EXPECT_FALSE(MustParse("a").MatchesObject(json{{"metadata", {{"name", "n"}}}}));
  EXPECT_TRUE(MustParse("!a").MatchesObject(json::object()));
}

TEST(FieldSelectorTest, ParseAndMatch) {
  json pod = {{"metadata", {{"name", "p1"}, {"namespace", "ns1"}}},
              {"spec", {{"nodeName", "node-1"}, {"hostNetwork", true}}},
              {"status", {{"phase", "Running"}}}};
  auto s = FieldSelector::Parse("spec.nodeName=node-1,status.phase!=Failed");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->Matches(pod));
  EXPECT_TRUE(FieldSelector::Parse("metadata.name==p1")->Matches(pod));
  EXPECT_FALSE(FieldSelector::Parse("metadata.namespace=ns2")->Matches(pod));
  EXPECT_TRUE(FieldSelector::Parse("spec.hostNetwork=true")->Matches(pod));
  // A missing field reads as "".
  EXPECT_TRUE(FieldSelector::Parse("spec.schedulerName=")->Matches(pod));
  EXPECT_TRUE(FieldSelector::Parse("spec.schedulerName!=x")->Matches(pod));
  EXPECT_EQ(FieldSelector::Parse("metadata.name=a,spec.nodeName=b")->RequiredValue("spec.nodeName"),
            "b");
  EXPECT_EQ(FieldSelector::Parse("spec.nodeName!=b")->RequiredValue("spec.nodeName"), std::nullopt);
  EXPECT_TRUE(FieldSelector::Parse("")->Empty());
}

TEST(FieldSelectorTest, Escapes) {
  json obj = {{"metadata", {{"name", "a,b=c"}}}};
  auto s = FieldSelector::Parse("metadata.name=a\\,b\\=c");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->Matches(obj));
  EXPECT_EQ(s->String(), "metadata.name=a\\,b\\=c");
  EXPECT_FALSE(FieldSelector::Parse("metadata.name=a\\x").ok());
  EXPECT_FALSE(FieldSelector::Parse("metadata.name").ok());
  EXPECT_FALSE(FieldSelector::Parse("=x").ok());
  EXPECT_FALSE(FieldSelector::Parse("a=b=c").ok());
}

TEST(ValidationTest, QualifiedNamesAndValues) {
  EXPECT_EQ(ValidateQualifiedName("app"), "");
  EXPECT_EQ(ValidateQualifiedName("nvidia.com/gpu.product"), "");
  EXPECT_EQ(ValidateQualifiedName("Upper_Case-1.x"), "");
  EXPECT_NE(ValidateQualifiedName(""), "");
  EXPECT_NE(ValidateQualifiedName("-a"), "");
  EXPECT_NE(ValidateQualifiedName(std::string(64, 'a')), "");
  EXPECT_NE(ValidateQualifiedName("Bad.Prefix/x"), "");
  EXPECT_EQ(ValidateLabelValue(""), "");
  EXPECT_EQ(ValidateLabelValue("NVIDIA-H100-80GB-HBM3"), "");
  EXPECT_NE(ValidateLabelValue("a b"), "");
  EXPECT_NE(ValidateLabelValue(std::string(64, 'a')), "");
}

// Found by tests/fuzz: "a in (,)" (the empty value) was written as
// "a in ()", which does not parse.
TEST(LabelSelectorTest, EmptyValueSetStringParses) {
  auto sel = LabelSelector::Parse("a in (,)");
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  EXPECT_EQ(sel->String(), "a in (,)");
  EXPECT_TRUE(LabelSelector::Parse(sel->String()).ok());
}

// Found by tests/fuzz: a field of blanks parsed to an empty field, which
// String() wrote as "=x", which does not parse; "a! =x" parsed to field "a!",
// which String() wrote as "a!=x", another selector.
TEST(FieldSelectorTest, FieldsStringCannotMisreadAreRejected) {
  EXPECT_FALSE(FieldSelector::Parse("=x").ok());
  EXPECT_FALSE(FieldSelector::Parse(" =x").ok());
  EXPECT_FALSE(FieldSelector::Parse("a=b, !=c").ok());
  EXPECT_FALSE(FieldSelector::Parse("Name!    =n").ok());
  EXPECT_FALSE(FieldSelector::Parse("a\\\n=x").ok());  // field "a\" after trimming
  auto ok = FieldSelector::Parse(" a =x");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->String(), "a=x");
}

}  // namespace
}  // namespace gpuop::simkube
