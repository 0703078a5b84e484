#include "base/files.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "base/strings.h"

namespace gpuop {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuop-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  int CountEntries() {
    int n = 0;
    DIR* d = opendir(dir_.c_str());
    while (auto* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
    return n;
  }
  std::string dir_;
};

TEST_F(FilesTest, AtomicWriteReplacesAndKeepsMode) {
  std::string p = dir_ + "/spec.yaml";
  ASSERT_TRUE(WriteFileAtomic(p, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(p, "two", 0600).ok());
  EXPECT_EQ(*ReadFile(p), "two");
  struct stat st {};
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(CountEntries(), 1) << "no temporary file may be left behind";
}

TEST_F(FilesTest, FailedWriteLeavesOldContent) {
  std::string p = dir_ + "/spec.yaml";
  ASSERT_TRUE(WriteFileAtomic(p, "old").ok());
  // A read-only directory makes the temporary file impossible to create.
  // (Root ignores directory modes, so use a path whose parent is a file.)
  Status s = WriteFileAtomic(p + "/child", "new");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(p), std::string::npos) << s.ToString();
  EXPECT_EQ(*ReadFile(p), "old");
}

// `--output-file /dev/stdout` once replaced the /dev/stdout link with a
// regular file: a stream is written through, a link's target is replaced.
TEST_F(FilesTest, AtomicWriteKeepsStreamsAndLinks) {
  std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = *ReadFile(fifo); });
  ASSERT_TRUE(WriteFileAtomic(fifo, "through").ok());
  reader.join();
  EXPECT_EQ(got, "through");
  struct stat st {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";

  std::string target = dir_ + "/target", link = dir_ + "/link";
  ASSERT_TRUE(WriteFileAtomic(target, "old").ok());
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(link, "new").ok());
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(*ReadFile(target), "new");

  EXPECT_FALSE(WriteFileAtomic(dir_, "x").ok());  // a directory is an error
}

TEST_F(FilesTest, CopyStreamsAFileIntoPlaceAndComparesContents) {
  // Bigger than one 64 KiB chunk, not a multiple of it.
  std::string big(200000, 'x');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);
  const std::string from = dir_ + "/from", to = dir_ + "/to";
  ASSERT_TRUE(WriteFileAtomic(from, big, 0644).ok());
  EXPECT_FALSE(SameContents(from, to));  // no such file
  ASSERT_TRUE(WriteFileAtomic(to, "old", 0644).ok());
  EXPECT_FALSE(SameContents(from, to));

  ASSERT_TRUE(CopyFileAtomic(from, to, 0755).ok());
  EXPECT_EQ(*ReadFile(to), big);
  EXPECT_TRUE(SameContents(from, to));
  struct stat st {};
  ASSERT_EQ(stat(to.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(CountEntries(), 2);  // no temporary file left

  // The same size, one byte different in the last chunk.
  big[big.size() - 3] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(to, big, 0644).ok());
  EXPECT_FALSE(SameContents(from, to));

  // A missing source names itself and leaves the destination alone.
  Status s = CopyFileAtomic(dir_ + "/absent", to, 0755);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/absent"), std::string::npos) << s.ToString();
  EXPECT_EQ(*ReadFile(to), big);
  EXPECT_EQ(CountEntries(), 2);
}

TEST_F(FilesTest, ReadMissingIsNotFound) {
  auto r = ReadFile(dir_ + "/none");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/none does not exist"), std::string::npos);
}

TEST_F(FilesTest, MakeDirsIsIdempotent) {
  std::string p = dir_ + "/a/b/c";
  ASSERT_TRUE(MakeDirs(p).ok());
  ASSERT_TRUE(MakeDirs(p).ok());
  EXPECT_TRUE(PathExists(p));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/f", "x").ok());
  EXPECT_FALSE(MakeDirs(dir_ + "/f").ok());
}

TEST_F(FilesTest, JoinRoot) {
  EXPECT_EQ(JoinRoot("/", "/dev/nvidia0"), "/dev/nvidia0");
  EXPECT_EQ(JoinRoot("/host/", "/dev/nvidia0"), "/host/dev/nvidia0");
  EXPECT_EQ(JoinRoot("/host", "dev"), "/host/dev");
  EXPECT_EQ(JoinRoot("", "/x"), "/x");
}

TEST_F(FilesTest, ExclusiveLockExcludesOtherProcess) {
  std::string lock = dir_ + "/lock";
  std::string marker = dir_ + "/marker";
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  // Fork before locking: a child that inherited the parent's lock descriptor
  // would share its flock and never block.
  pid_t child = fork();
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(2);
    auto l = FileLock::Acquire(lock, true);  // blocks until the parent releases
    _exit(l.ok() && WriteFileAtomic(marker, "child").ok() ? 0 : 1);
  }
  close(go[0]);
  auto held = FileLock::Acquire(lock, true);
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(write(go[1], "x", 1), 1);
  close(go[1]);
  usleep(200 * 1000);
  EXPECT_FALSE(PathExists(marker)) << "the child took a lock the parent holds";
  { FileLock released = std::move(held.value()); }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(*ReadFile(marker), "child");
}

TEST(StringsTest, Helpers) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Split("a,,b", ',', false), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Trim("  x y \n"), "x y");
  EXPECT_EQ(*ParseUint("0x233010DE"), 0x233010DEu);
  EXPECT_EQ(*ParseUint("42"), 42u);
  EXPECT_FALSE(ParseUint("42x").has_value());
  EXPECT_FALSE(ParseUint("").has_value());
  EXPECT_EQ(JsonQuote("a\"b\n"), "\"a\\\"b\\n\"");
  EXPECT_EQ(Join({"a", "b"}, ", "), "a, b");
  EXPECT_TRUE(StartsWith("GPU-1", "GPU-"));
  EXPECT_TRUE(EndsWith("x.so.1", ".so.1"));
  EXPECT_EQ(ToLower("0000:18:00.0 AB"), "0000:18:00.0 ab");
}

}  // namespace
}  // namespace gpuop
