#include "base/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

namespace gpuop {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

Status WriteAll(int fd, std::string_view content, const std::string& path) {
  while (!content.empty()) {
    ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal("writing " + path + ": " + ErrnoText(errno));
    }
    content.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound(path + " does not exist");
    if (err == EACCES) return PermissionDenied("cannot read " + path + ": permission denied");
    return Internal("opening " + path + ": " + ErrnoText(err));
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Internal("reading " + path + ": " + ErrnoText(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomic(const std::string& requested, std::string_view content, mode_t mode) {
  std::string path = requested;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return FailedPrecondition(path + " is a directory, not a file");
    // A stream (/dev/stdout, a FIFO): nothing to replace atomically, and a
    // rename would put a regular file where the device was. Write through.
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Internal("cannot open " + path + ": " + ErrnoText(errno));
    Status s = WriteAll(fd, content, path);
    ::close(fd);
    return s;
  }
  // A symlink to a file: replace the file it names, keep the link.
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    char* resolved = ::realpath(path.c_str(), nullptr);
    if (resolved != nullptr) {
      path = resolved;
      ::free(resolved);
    }
  }
  std::string dir = DirName(path);
  std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    return Internal("cannot create a temporary file in " + dir + ": " + ErrnoText(errno));
  }
  Status s = WriteAll(fd, content, tmp);
  if (s.ok() && ::fchmod(fd, mode) != 0) s = Internal("chmod " + tmp + ": " + ErrnoText(errno));
  if (s.ok() && ::fsync(fd) != 0) s = Internal("fsync " + tmp + ": " + ErrnoText(errno));
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Internal("renaming " + tmp + " to " + path + ": " + ErrnoText(errno));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: the rename is already visible to readers
    ::close(dfd);
  }
  return Status::Ok();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Status::Ok();
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
        return Internal("cannot create directory " + cur + ": " + ErrnoText(errno));
      }
    }
    if (i < path.size()) cur += path[i];
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPrecondition(path + " exists and is not a directory");
  }
  return Status::Ok();
}

std::string DirName(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

bool PathExists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string JoinRoot(std::string_view root, std::string_view path) {
  std::string r(root);
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  if (r.empty() || r == "/") return std::string(path);
  if (!path.empty() && path.front() != '/') r += '/';
  r += path;
  return r;
}

Result<FileLock> FileLock::Acquire(const std::string& path, bool exclusive) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("opening lock file " + path + ": " + ErrnoText(errno));
  while (::flock(fd, exclusive ? LOCK_EX : LOCK_SH) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    ::close(fd);
    return Internal("locking " + path + ": " + ErrnoText(err));
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace gpuop
