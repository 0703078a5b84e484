// File helpers. Every file another process reads is written with
// WriteFileAtomic: a temporary file in the same directory, fsync, rename, and
// fsync of the directory, so a reader sees the old or the new content, never a
// torn one, and a failed write leaves the old file intact. A path that is a
// stream (/dev/stdout, a FIFO) is written through instead, and a symlink's
// target is replaced, never the link itself.
// Thread-safe: no shared state.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop {

Result<std::string> ReadFile(const std::string& path);
Status WriteFileAtomic(const std::string& path, std::string_view content, mode_t mode = 0644);
// WriteFileAtomic of a file's contents, streamed: a large file (an
// executable) is never held in memory.
Status CopyFileAtomic(const std::string& from, const std::string& to, mode_t mode);
// Two readable regular files with the same bytes, compared in chunks.
bool SameContents(const std::string& a, const std::string& b);
// mkdir -p; succeeds when the directory exists already.
Status MakeDirs(const std::string& path, mode_t mode = 0755);
bool PathExists(const std::string& path);
// "/a/b/c" → "/a/b"; "/c" → "/"; "c" → ".".
std::string DirName(std::string_view path);

// Joins a host root and an absolute host path: JoinRoot("/host", "/dev/nvidia0").
std::string JoinRoot(std::string_view root, std::string_view path);

// An exclusive or shared flock(2) on a lock file, released on destruction.
class FileLock {
 public:
  static Result<FileLock> Acquire(const std::string& path, bool exclusive);
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace gpuop
