#include "runtime/diff.h"

#include <gtest/gtest.h>

#include "runtime/plan.h"

namespace gpuop::runtime {
namespace {

TEST(UnifiedDiff, EqualTextsGiveNothing) {
  EXPECT_EQ(UnifiedDiff("a", "b", "x\ny\n", "x\ny\n"), "");
}

// Expected outputs are what GNU `diff -u` prints for the same inputs.
TEST(UnifiedDiff, OneInsertedLineWithContext) {
  std::string before = "1\n2\n3\n4\n5\n6\n7\n8\n";
  std::string after = "1\n2\n3\n4\nnew\n5\n6\n7\n8\n";
  EXPECT_EQ(UnifiedDiff("a", "b", before, after),
            "--- a\n+++ b\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+new\n 5\n 6\n 7\n");
}

TEST(UnifiedDiff, DistantChangesMakeTwoHunks) {
  std::string before = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n";
  std::string after = "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nM\n";
  EXPECT_EQ(UnifiedDiff("x", "y", before, after),
            "--- x\n+++ y\n@@ -1,4 +1,4 @@\n-a\n+A\n b\n c\n d\n"
            "@@ -10,4 +10,4 @@\n j\n k\n l\n-m\n+M\n");
}

TEST(UnifiedDiff, CreatedAndDeletedFiles) {
  EXPECT_EQ(UnifiedDiff("/dev/null", "f", "", "a\nb\n"),
            "--- /dev/null\n+++ f\n@@ -0,0 +1,2 @@\n+a\n+b\n");
  EXPECT_EQ(UnifiedDiff("f", "/dev/null", "a\n", ""), "--- f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n");
}

TEST(UnifiedDiff, MissingFinalNewlineIsMarked) {
  EXPECT_EQ(UnifiedDiff("a", "b", "x\ny", "x\ny\n"),
            "--- a\n+++ b\n@@ -1,2 +1,2 @@\n x\n-y\n\\ No newline at end of file\n+y\n");
}

TEST(RenderPlanDiff, LabelsCreatedAndDeletedFilesWithDevNull) {
  Plan p;
  p.changes.push_back({"/etc/new", std::nullopt, "x\n"});
  p.changes.push_back({"/etc/old", "y\n", std::nullopt});
  EXPECT_EQ(RenderPlanDiff(p),
            "--- /dev/null\n+++ /etc/new\n@@ -0,0 +1 @@\n+x\n"
            "--- /etc/old\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n");
}

TEST(ValidRuntimeName, AcceptsHandlerNames) {
  EXPECT_TRUE(ValidRuntimeName("nvidia"));
  EXPECT_TRUE(ValidRuntimeName("nvidia-cdi_2.x"));
  EXPECT_FALSE(ValidRuntimeName(""));
  EXPECT_FALSE(ValidRuntimeName("a b"));
  EXPECT_FALSE(ValidRuntimeName("x\"y"));
}

}  // namespace
}  // namespace gpuop::runtime
