// Mutex and MutexLock: std::mutex and a scoped lock that clang's thread-safety
// analysis understands, so "this field is guarded by mu_" is checked by the
// compiler rather than stated in a comment (-Wthread-safety; `make lint` and
// the test `thread_safety` compile every file that uses them with clang).
//
//   Mutex mu_;
//   std::deque<std::string> queue_ GPUOP_GUARDED_BY(mu_);
//   void PopLocked() GPUOP_REQUIRES(mu_);
//
//   MutexLock lock(mu_);
//   cv_.wait(lock.native(), [&]() GPUOP_REQUIRES(mu_) { return !queue_.empty(); });
//
// Under other compilers the annotations expand to nothing. The analysis treats
// a condition variable's wait as keeping the lock, which is what the code after
// the wait may assume.
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define GPUOP_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GPUOP_THREAD_ANNOTATION(x)
#endif

#define GPUOP_CAPABILITY(x) GPUOP_THREAD_ANNOTATION(capability(x))
#define GPUOP_SCOPED_CAPABILITY GPUOP_THREAD_ANNOTATION(scoped_lockable)
#define GPUOP_GUARDED_BY(x) GPUOP_THREAD_ANNOTATION(guarded_by(x))
#define GPUOP_PT_GUARDED_BY(x) GPUOP_THREAD_ANNOTATION(pt_guarded_by(x))
#define GPUOP_REQUIRES(...) GPUOP_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GPUOP_REQUIRES_SHARED(...) GPUOP_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define GPUOP_EXCLUDES(...) GPUOP_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GPUOP_ACQUIRE(...) GPUOP_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GPUOP_RELEASE(...) GPUOP_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GPUOP_ACQUIRE_SHARED(...) GPUOP_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define GPUOP_RELEASE_SHARED(...) GPUOP_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define GPUOP_RELEASE_GENERIC(...) GPUOP_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define GPUOP_TRY_ACQUIRE(...) GPUOP_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define GPUOP_RETURN_CAPABILITY(x) GPUOP_THREAD_ANNOTATION(lock_returned(x))
// For the rare function the analysis cannot follow; say why beside it.
#define GPUOP_NO_THREAD_SAFETY_ANALYSIS GPUOP_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace gpuop {

class GPUOP_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() GPUOP_ACQUIRE() { mu_.lock(); }
  void unlock() GPUOP_RELEASE() { mu_.unlock(); }
  bool try_lock() GPUOP_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // The std::mutex, for std::condition_variable through MutexLock::native().
  std::mutex& native() GPUOP_RETURN_CAPABILITY(this) { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope. Unlock() and Lock() drop and retake it inside the
// scope (for a call that must not run under the lock).
class GPUOP_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) GPUOP_ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() GPUOP_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() GPUOP_RELEASE() { lock_.unlock(); }
  void Lock() GPUOP_ACQUIRE() { lock_.lock(); }

  // For condition variables' waits.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// std::shared_mutex, annotated: many readers or one writer.
class GPUOP_CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() GPUOP_ACQUIRE() { mu_.lock(); }
  void unlock() GPUOP_RELEASE() { mu_.unlock(); }
  void lock_shared() GPUOP_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() GPUOP_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its scope.
class GPUOP_SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex& mu) GPUOP_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterMutexLock() GPUOP_RELEASE() { mu_.unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared (as one of its readers) for its scope.
class GPUOP_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mu) GPUOP_ACQUIRE_SHARED(mu) : mu_(mu) {
    mu_.lock_shared();
  }
  ~ReaderMutexLock() GPUOP_RELEASE_GENERIC() { mu_.unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace gpuop
