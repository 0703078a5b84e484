#include "base/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "base/files.h"

namespace gpuop {
namespace {

TEST(RunCommandTest, CollectsOutputAndExitStatus) {
  auto r = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 3);
  EXPECT_EQ(r->output, "out\nerr\n");
  auto missing = RunCommand({"gpuop-no-such-program"});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 127);
  EXPECT_EQ(missing->output, "exec failed\n");
}

// Inside a root, as `chroot ROOT CMD` runs it (gpuop's image has no chroot
// binary): the command is found on the root's system PATH, not ours.
TEST(RunCommandTest, RunsInsideARoot) {
  ASSERT_EQ(::geteuid(), 0u) << "chroot(2) needs root";
  char tmpl[] = "/tmp/gpuop-root-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  // busybox-static (a test peer): a program that runs without a libc in the root.
  const char* busybox = "/bin/busybox";
  ASSERT_TRUE(PathExists(busybox)) << "install busybox-static (scripts/install-deps.sh)";
  ASSERT_TRUE(MakeDirs(root + "/usr/sbin").ok());
  std::filesystem::copy_file(busybox, root + "/usr/sbin/busybox");
  ASSERT_TRUE(WriteFileAtomic(root + "/marker", "inside the root\n").ok());

  auto r = RunCommand({"busybox", "cat", "/marker"}, root);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 0) << r->output;
  EXPECT_EQ(r->output, "inside the root\n");

  auto missing = RunCommand({"nvidia-smi"}, root);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 127);
  EXPECT_EQ(missing->output, "exec failed\n");

  auto no_root = RunCommand({"busybox", "true"}, root + "/no-such-dir");
  ASSERT_TRUE(no_root.ok());
  EXPECT_EQ(no_root->status, 127);
  EXPECT_EQ(no_root->output, "cannot enter the root directory\n");
  std::filesystem::remove_all(root);
}

std::atomic<int> handled_in_parent{0};

// SpawnChild blocks every signal while the child shares this process's
// memory; the program it execs gets the caller's mask back: a SIGTERM it
// sends itself kills it (and never reaches the parent's handler), and one
// the caller blocks stays blocked.
TEST(SpawnChildTest, ChildHasDefaultHandlersAndTheCallersMask) {
  struct sigaction handler = {}, old_term = {};
  handler.sa_handler = [](int) { handled_in_parent = 1; };
  ASSERT_EQ(::sigaction(SIGTERM, &handler, &old_term), 0);
  char kill_self[] = "kill -TERM $$; sleep 5; exit 0";
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, kill_self, nullptr};
  auto pid = SpawnChild([&] {
    ::execv(argv[0], argv);
    ::_exit(126);
  });
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  int wstatus = 0;
  ASSERT_EQ(::waitpid(*pid, &wstatus, 0), *pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "exit status " << WEXITSTATUS(wstatus);
  EXPECT_EQ(WTERMSIG(wstatus), SIGTERM);
  EXPECT_EQ(handled_in_parent.load(), 0);

  // A signal the caller blocks stays blocked in the child: the shell's
  // kill does not end it, so it exits 0 after its sleep (shortened here).
  sigset_t term, before;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &before), 0);
  char kill_blocked[] = "kill -TERM $$; exit 7";
  argv[2] = kill_blocked;
  pid = SpawnChild([&] {
    ::execv(argv[0], argv);
    ::_exit(126);
  });
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &before, nullptr), 0);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ASSERT_EQ(::waitpid(*pid, &wstatus, 0), *pid);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "signal " << WTERMSIG(wstatus);
  EXPECT_EQ(WEXITSTATUS(wstatus), 7);
  ::sigaction(SIGTERM, &old_term, nullptr);
}

}  // namespace
}  // namespace gpuop
