#include "base/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

namespace gpuop {
namespace {

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

namespace {

// A temporary file beside `requested` (a symlink: beside the file it names,
// so the link stays), filled by `fill`, chmod, fsync, renamed over it, and
// the directory fsynced.
Status ReplaceAtomically(const std::string& requested, mode_t mode,
                         const std::function<Status(int fd, const std::string& tmp)>& fill) {
  std::string path = requested;
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
  Status s = fill(fd, tmp);
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

// Up to sizeof(buf) bytes; fewer only at the end of the file. -1: errno.
ssize_t ReadFull(int fd, char* buf, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

constexpr size_t kChunk = 65536;

}  // namespace

Status WriteFileAtomic(const std::string& path, std::string_view content, mode_t mode) {
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
  return ReplaceAtomically(
      path, mode, [&](int fd, const std::string& tmp) { return WriteAll(fd, content, tmp); });
}

Status CopyFileAtomic(const std::string& from, const std::string& to, mode_t mode) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Internal("cannot open " + from + ": " + ErrnoText(errno));
  struct stat st {};
  if (::stat(to.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(in);
    return FailedPrecondition(to + " is a directory, not a file");
  }
  std::vector<char> buf(kChunk);
  Status s = ReplaceAtomically(to, mode, [&](int fd, const std::string& tmp) -> Status {
    for (;;) {
      ssize_t n = ReadFull(in, buf.data(), buf.size());
      if (n < 0) return Internal("reading " + from + ": " + ErrnoText(errno));
      if (n == 0) return Status::Ok();
      GPUOP_RETURN_IF_ERROR(
          WriteAll(fd, std::string_view(buf.data(), static_cast<size_t>(n)), tmp));
    }
  });
  ::close(in);
  return s;
}

bool SameContents(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0 || !S_ISREG(sa.st_mode) ||
      !S_ISREG(sb.st_mode) || sa.st_size != sb.st_size) {
    return false;
  }
  int fa = ::open(a.c_str(), O_RDONLY | O_CLOEXEC);
  int fb = ::open(b.c_str(), O_RDONLY | O_CLOEXEC);
  bool same = fa >= 0 && fb >= 0;
  std::vector<char> ba(kChunk), bb(kChunk);
  while (same) {
    ssize_t na = ReadFull(fa, ba.data(), ba.size());
    ssize_t nb = ReadFull(fb, bb.data(), bb.size());
    if (na < 0 || na != nb || std::memcmp(ba.data(), bb.data(), static_cast<size_t>(na)) != 0) {
      same = false;
    } else if (na == 0) {
      break;
    }
  }
  if (fa >= 0) ::close(fa);
  if (fb >= 0) ::close(fb);
  return same;
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
  // flock needs no write access: a lock file another user made still locks.
  if (fd < 0 && errno == EACCES) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
