#include "toolkit/cdi_hook.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

#include "base/files.h"

namespace gpuop::toolkit {
namespace {

// ---- Pure parts -------------------------------------------------------------

TEST(ContainerStateTest, ParsesTheOciState) {
  auto s = ParseContainerState(R"({"ociVersion":"1.0.2","id":"abc","status":"created",
      "pid":4242,"bundle":"/run/bundle/abc","annotations":{"a":"b"}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->oci_version, "1.0.2");
  EXPECT_EQ(s->id, "abc");
  EXPECT_EQ(s->status, "created");
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->bundle, "/run/bundle/abc");
  EXPECT_EQ(s->annotations.at("a"), "b");
}

TEST(ContainerStateTest, RejectsWhatIsNotAState) {
  EXPECT_FALSE(ParseContainerState("").ok());
  EXPECT_FALSE(ParseContainerState("[]").ok());
  EXPECT_FALSE(ParseContainerState(R"({"id":"x"})").ok());                 // no bundle
  EXPECT_FALSE(ParseContainerState(R"({"bundle":"relative/dir"})").ok());  // not absolute
  EXPECT_FALSE(ParseContainerState(R"({"bundle":"/b","pid":"7"})").ok());
  EXPECT_FALSE(ParseContainerState(R"({"bundle":"/b","annotations":{"k":1}})").ok());
  auto s = ParseContainerState("{not json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not JSON"), std::string::npos);
}

TEST(ConfigRootTest, ReadsRootPath) {
  EXPECT_EQ(*ParseConfigRootPath(R"({"ociVersion":"1.0.2","root":{"path":"rootfs"}})"), "rootfs");
  EXPECT_EQ(*ParseConfigRootPath(R"({"root":{"path":"/var/lib/x/merged","readonly":true}})"),
            "/var/lib/x/merged");
  EXPECT_FALSE(ParseConfigRootPath(R"({"process":{}})").ok());
  EXPECT_FALSE(ParseConfigRootPath(R"({"root":{"path":""}})").ok());
  EXPECT_FALSE(ParseConfigRootPath("nope").ok());
}

TEST(RootfsPathTest, RelativeToBundleOrAbsolute) {
  EXPECT_EQ(RootfsPath("/run/b", "rootfs"), "/run/b/rootfs");
  EXPECT_EQ(RootfsPath("/run/b", "./rootfs/"), "/run/b/rootfs");
  EXPECT_EQ(RootfsPath("/run/b", "/var/merged"), "/var/merged");
  EXPECT_EQ(RootfsPath("/run/b", "../other"), "/run/other");
}

TEST(CleanPathTest, Lexical) {
  EXPECT_EQ(CleanPath(""), ".");
  EXPECT_EQ(CleanPath("/"), "/");
  EXPECT_EQ(CleanPath("//a//b/./c/"), "/a/b/c");
  EXPECT_EQ(CleanPath("/a/../../b"), "/b");
  EXPECT_EQ(CleanPath("a/../.."), "..");
  EXPECT_EQ(CleanPath("a/b/.."), "a");
}

// A fake file system of symlinks: host path → target.
ReadlinkFn FakeLinks(std::map<std::string, std::string> links) {
  return [links = std::move(links)](const std::string& p) -> std::optional<std::string> {
    auto it = links.find(p);
    if (it == links.end()) return std::nullopt;
    return it->second;
  };
}

TEST(SecureJoinTest, PlainPaths) {
  auto none = FakeLinks({});
  EXPECT_EQ(*SecureJoin("/r", "/usr/lib", none), "/r/usr/lib");
  EXPECT_EQ(*SecureJoin("/r/", "usr//lib/", none), "/r/usr/lib");
  EXPECT_EQ(*SecureJoin("/r", "/", none), "/r");
  EXPECT_EQ(*SecureJoin("/", "/etc", none), "/etc");
}

TEST(SecureJoinTest, DotDotNeverClimbsAboveTheRoot) {
  auto none = FakeLinks({});
  EXPECT_EQ(*SecureJoin("/r", "/../../etc/passwd", none), "/r/etc/passwd");
  EXPECT_EQ(*SecureJoin("/r", "a/../../../b", none), "/r/b");
}

TEST(SecureJoinTest, AbsoluteLinksAreTakenInsideTheRoot) {
  // /lib -> /usr/lib (the usrmerge layout), and an attacker's /evil -> /etc.
  auto fs = FakeLinks({{"/r/lib", "/usr/lib"}, {"/r/evil", "/etc"}});
  EXPECT_EQ(*SecureJoin("/r", "/lib/x86_64-linux-gnu", fs), "/r/usr/lib/x86_64-linux-gnu");
  EXPECT_EQ(*SecureJoin("/r", "/evil/shadow", fs), "/r/etc/shadow");
}

TEST(SecureJoinTest, RelativeLinksCannotEscape) {
  auto fs = FakeLinks({{"/r/a/up", "../../../../host"}, {"/r/b", "a/up"}});
  EXPECT_EQ(*SecureJoin("/r", "/a/up/file", fs), "/r/host/file");
  EXPECT_EQ(*SecureJoin("/r", "/b/file", fs), "/r/host/file");
}

TEST(SecureJoinTest, LastComponentCanBeLeftUnfollowed) {
  auto fs = FakeLinks({{"/r/usr/lib/libcuda.so", "/etc/passwd"}});
  EXPECT_EQ(*SecureJoin("/r", "/usr/lib/libcuda.so", fs), "/r/etc/passwd");
  EXPECT_EQ(*SecureJoin("/r", "/usr/lib/libcuda.so", fs, /*follow_last=*/false),
            "/r/usr/lib/libcuda.so");
}

TEST(SecureJoinTest, LoopsFail) {
  auto fs = FakeLinks({{"/r/a", "b"}, {"/r/b", "a"}});
  auto r = SecureJoin("/r", "/a/x", fs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too many levels"), std::string::npos);
}

TEST(LinkFlagTest, Parses) {
  auto r = ParseLinkFlag("libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->target, "libcuda.so.1");
  EXPECT_EQ(r->link, "/usr/lib/x86_64-linux-gnu/libcuda.so");
  EXPECT_FALSE(ParseLinkFlag("libcuda.so.1").ok());
  EXPECT_FALSE(ParseLinkFlag("::/x").ok());
  EXPECT_FALSE(ParseLinkFlag("t::").ok());
  EXPECT_FALSE(ParseLinkFlag("t::relative/link").ok());
  EXPECT_FALSE(ParseLinkFlag("t::/a::/b").ok());
}

TEST(LdcacheTest, ConfAndCommandLine) {
  EXPECT_EQ(LdsoConfContent({"/usr/lib/x86_64-linux-gnu", "/usr/lib64"}),
            "# Written by `gpuop cdi hook update-ldcache`: the NVIDIA driver libraries.\n"
            "/usr/lib/x86_64-linux-gnu\n/usr/lib64\n");
  EXPECT_EQ(LdconfigArgs("/sbin/ldconfig", "/b/rootfs", {"/usr/lib64"}),
            (std::vector<std::string>{"/sbin/ldconfig", "-r", "/b/rootfs", "/usr/lib64"}));
}

// ---- On a real directory ----------------------------------------------------

class HookFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuop-hook-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_ = dir_ + "/rootfs";
    ASSERT_TRUE(MakeDirs(root_ + "/usr/lib").ok());
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string Link(const std::string& p) { return HostReadlink(p).value_or("<not a link>"); }
  std::string dir_, root_;
};

TEST_F(HookFsTest, CreatesLinksAndIsIdempotent) {
  std::vector<LinkRequest> links{{"libcuda.so.1", "/usr/lib/libcuda.so"},
                                 {"../card1", "/dev/dri/by-path/pci-0000:18:00.0-card"}};
  auto r = CreateSymlinks(root_, links);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<LinkOutcome>{LinkOutcome::kCreated, LinkOutcome::kCreated}));
  EXPECT_EQ(Link(root_ + "/usr/lib/libcuda.so"), "libcuda.so.1");
  EXPECT_EQ(Link(root_ + "/dev/dri/by-path/pci-0000:18:00.0-card"), "../card1");
  r = CreateSymlinks(root_, links);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<LinkOutcome>{LinkOutcome::kUnchanged, LinkOutcome::kUnchanged}));
}

TEST_F(HookFsTest, ReplacesALinkToSomethingElse) {
  ASSERT_EQ(symlink("libcuda.so.535", (root_ + "/usr/lib/libcuda.so").c_str()), 0);
  auto r = CreateSymlinks(root_, {{"libcuda.so.1", "/usr/lib/libcuda.so"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->at(0), LinkOutcome::kReplaced);
  EXPECT_EQ(Link(root_ + "/usr/lib/libcuda.so"), "libcuda.so.1");
}

TEST_F(HookFsTest, NeverClobbersARegularFile) {
  ASSERT_TRUE(WriteFileAtomic(root_ + "/usr/lib/libcuda.so", "image's own").ok());
  auto r = CreateSymlinks(root_, {{"libcuda.so.1", "/usr/lib/libcuda.so"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a symlink"), std::string::npos);
  EXPECT_EQ(*ReadFile(root_ + "/usr/lib/libcuda.so"), "image's own");
}

TEST_F(HookFsTest, LinksThroughAHostileSymlinkStayInsideTheRoot) {
  // The image's /usr/lib64 points at the host's /tmp-like directory outside.
  std::string outside = dir_ + "/outside";
  ASSERT_TRUE(MakeDirs(outside).ok());
  ASSERT_EQ(symlink(outside.c_str(), (root_ + "/usr/lib64").c_str()), 0);
  ASSERT_EQ(symlink("../../../../../../..", (root_ + "/usr/up").c_str()), 0);
  auto r = CreateSymlinks(
      root_, {{"libcuda.so.1", "/usr/lib64/libcuda.so"}, {"libcuda.so.1", "/usr/up/escaped.so"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(PathExists(outside + "/libcuda.so"));
  EXPECT_FALSE(PathExists(dir_ + "/escaped.so"));
  // Absolute targets resolve inside the root: <root><outside>/libcuda.so.
  EXPECT_EQ(Link(root_ + outside + "/libcuda.so"), "libcuda.so.1");
  EXPECT_EQ(Link(root_ + "/escaped.so"), "libcuda.so.1");
}

TEST_F(HookFsTest, RootfsFromStateReadsTheBundle) {
  std::string bundle = dir_;
  ASSERT_TRUE(WriteFileAtomic(bundle + "/config.json", R"({"root":{"path":"rootfs"}})").ok());
  std::string state =
      R"({"ociVersion":"1.0.2","id":"c","status":"created","pid":1,"bundle":")" + bundle + R"("})";
  auto r = RootfsFromState(state, "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, root_);

  ASSERT_TRUE(WriteFileAtomic(bundle + "/other.json", R"({"root":{"path":"missing"}})").ok());
  r = RootfsFromState(state, bundle + "/other.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a directory"), std::string::npos);

  std::string bad = R"({"bundle":")" + dir_ + R"(/nobundle"})";
  r = RootfsFromState(bad, "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("config.json"), std::string::npos);
}

TEST_F(HookFsTest, UpdateLdcacheWritesTheDropInAndRunsLdconfig) {
  auto ldconfig = FindLdconfig("");
  if (!ldconfig.ok()) GTEST_SKIP() << ldconfig.status().message();
  // A library dir with one real shared object copied from the host is not
  // needed: ldconfig builds a (possibly empty) cache for any root.
  ASSERT_TRUE(MakeDirs(root_ + "/etc").ok());
  Status s = UpdateLdcache(root_, {"/usr/lib"}, *ldconfig);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(*ReadFile(root_ + std::string(kLdsoConfDropIn)), LdsoConfContent({"/usr/lib"}));
  EXPECT_TRUE(PathExists(root_ + "/etc/ld.so.cache"));
  EXPECT_FALSE(UpdateLdcache(root_, {"relative"}, *ldconfig).ok());
  EXPECT_FALSE(FindLdconfig(dir_ + "/no-ldconfig").ok());
}

}  // namespace
}  // namespace gpuop::toolkit
