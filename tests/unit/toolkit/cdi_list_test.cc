#include "toolkit/cdi_list.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/files.h"

namespace gpuop::toolkit {
namespace {

std::string Spec(const std::string& kind, const std::vector<std::string>& names) {
  std::string s = "cdiVersion: 0.5.0\nkind: " + kind + "\ndevices:\n";
  for (const std::string& n : names) {
    s += "- name: \"" + n + "\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n";
  }
  return s;
}

CdiSpecFile File(std::string path, int priority, std::string content) {
  return {std::move(path), priority, std::move(content), ""};
}

TEST(CdiListTest, SortedFullyQualifiedNames) {
  auto l = ListCdiDevices({File("/etc/cdi/b.yaml", 0, Spec("nvidia.com/gpu", {"1", "0", "all"})),
                           File("/etc/cdi/a.json", 0,
                                R"({"cdiVersion":"0.5.0","kind":"vendor.com/net","devices":[
                                  {"name":"eth0","containerEdits":{"env":["A=1"]}}]})")});
  EXPECT_TRUE(l.ok());
  EXPECT_EQ(l.devices, (std::vector<std::string>{"nvidia.com/gpu=0", "nvidia.com/gpu=1",
                                                 "nvidia.com/gpu=all", "vendor.com/net=eth0"}));
}

TEST(CdiListTest, ABrokenSpecIsReportedAndTheOthersStillListed) {
  auto l = ListCdiDevices({File("/etc/cdi/good.yaml", 0, Spec("nvidia.com/gpu", {"0"})),
                           File("/etc/cdi/typo.yaml", 0,
                                "cdiVersion: 0.5.0\nkind: x.com/y\ndevices:\n- name: a\n"
                                "  containerEdits:\n    mountz: []\n"),
                           File("/etc/cdi/noedits.yaml", 0,
                                "cdiVersion: 0.5.0\nkind: x.com/y\ndevices:\n- name: a\n"
                                "  containerEdits: {}\n"),
                           {"/etc/cdi/unreadable.yaml", 0, "", "permission denied"}});
  EXPECT_FALSE(l.ok());
  EXPECT_EQ(l.devices, std::vector<std::string>{"nvidia.com/gpu=0"});
  ASSERT_EQ(l.problems.size(), 3u);
  EXPECT_EQ(l.problems[0].path, "/etc/cdi/typo.yaml");
  EXPECT_NE(l.problems[0].reason.find("mountz"), std::string::npos) << l.problems[0].reason;
  EXPECT_EQ(l.problems[1].path, "/etc/cdi/noedits.yaml");
  EXPECT_EQ(l.problems[2].path, "/etc/cdi/unreadable.yaml");
  EXPECT_EQ(l.problems[2].reason, "permission denied");
}

TEST(CdiListTest, LaterDirectoryOverridesAndSameDirectoryConflicts) {
  auto l = ListCdiDevices({File("/etc/cdi/a.yaml", 0, Spec("nvidia.com/gpu", {"0", "1"})),
                           File("/var/run/cdi/b.yaml", 1, Spec("nvidia.com/gpu", {"0"}))});
  EXPECT_TRUE(l.ok());
  EXPECT_EQ(l.devices, (std::vector<std::string>{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}));

  l = ListCdiDevices({File("/etc/cdi/a.yaml", 0, Spec("nvidia.com/gpu", {"0", "1"})),
                      File("/etc/cdi/b.yaml", 0, Spec("nvidia.com/gpu", {"0"}))});
  EXPECT_FALSE(l.ok());
  EXPECT_EQ(l.devices, std::vector<std::string>{"nvidia.com/gpu=1"});
  ASSERT_EQ(l.problems.size(), 2u);
  EXPECT_NE(l.problems[0].reason.find("nvidia.com/gpu=0 is also defined in /etc/cdi/a.yaml and "
                                      "/etc/cdi/b.yaml"),
            std::string::npos)
      << l.problems[0].reason;
}

TEST(CdiListTest, FileNames) {
  EXPECT_TRUE(IsCdiSpecFileName("nvidia.yaml"));
  EXPECT_TRUE(IsCdiSpecFileName("nvidia.yml"));
  EXPECT_TRUE(IsCdiSpecFileName("nvidia.json"));
  EXPECT_FALSE(IsCdiSpecFileName("nvidia.yaml.tmp.12.34"));
  EXPECT_FALSE(IsCdiSpecFileName(".hidden.yaml"));
  EXPECT_FALSE(IsCdiSpecFileName("README"));
}

TEST(CdiListTest, ReadsDirectoriesSkippingMissingOnes) {
  char tmpl[] = "/tmp/gpuop-cdilist-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  ASSERT_TRUE(MakeDirs(dir + "/etc").ok());
  ASSERT_TRUE(MakeDirs(dir + "/etc/sub.yaml").ok());  // a directory named like a spec
  ASSERT_TRUE(WriteFileAtomic(dir + "/etc/b.yaml", "b").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/etc/a.json", "a").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/etc/notes.txt", "x").ok());
  auto files = ReadCdiSpecDirs({dir + "/missing", dir + "/etc"});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, dir + "/etc/a.json");
  EXPECT_EQ(files[0].content, "a");
  EXPECT_EQ(files[0].priority, 1);
  EXPECT_EQ(files[1].path, dir + "/etc/b.yaml");
  EXPECT_EQ(files[2].path, dir + "/etc/sub.yaml");
  EXPECT_EQ(files[2].read_error, "not a regular file");
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gpuop::toolkit
