#include "base/memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"

namespace gpuop {

Result<size_t> PageOutExecutable() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return Internal(std::string("reading /proc/self/exe: ") + std::strerror(errno));
  const std::string path(exe, static_cast<size_t>(n));
  std::ifstream maps("/proc/self/maps");
  if (!maps) return Internal("reading /proc/self/maps");
  size_t advised = 0;
  std::string line;
  while (std::getline(maps, line)) {
    // start-end perms offset dev inode path
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, file;
    in >> range >> perms >> offset >> dev >> inode;
    std::getline(in >> std::ws, file);
    if (file != path || perms.size() < 2 || perms[1] == 'w') continue;
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    const uintptr_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_PAGEOUT) != 0) {
      if (errno == EINVAL) return NotSupported("madvise(MADV_PAGEOUT): needs Linux 5.4 or later");
      return Internal(std::string("madvise(MADV_PAGEOUT): ") + std::strerror(errno));
    }
    advised += end - start;
  }
  return advised;
}

void ReleaseFreeHeap() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  malloc_trim(0);
#endif
}

namespace {

// One registered compactor. Its own mutex, not the registry's, is held while
// it runs: a compaction may wait for a cache whose event handler is
// registering another cache meanwhile.
struct Compactor {
  std::mutex mu;
  std::function<void()> compact;  // empty once removed
};

struct HeapCompactors {
  std::mutex mu;
  int next_id = 1;
  std::map<int, std::shared_ptr<Compactor>> compactors;
};

HeapCompactors& Compactors() {
  static auto* compactors = new HeapCompactors;  // never destroyed: used until exit
  return *compactors;
}

}  // namespace

int AddHeapCompactor(std::function<void()> compact) {
  auto compactor = std::make_shared<Compactor>();
  compactor->compact = std::move(compact);
  HeapCompactors& all = Compactors();
  std::lock_guard lock(all.mu);
  const int id = all.next_id++;
  all.compactors.emplace(id, std::move(compactor));
  return id;
}

void RemoveHeapCompactor(int id) {
  std::shared_ptr<Compactor> compactor;
  {
    HeapCompactors& all = Compactors();
    std::lock_guard lock(all.mu);
    auto it = all.compactors.find(id);
    if (it == all.compactors.end()) return;
    compactor = std::move(it->second);
    all.compactors.erase(it);
  }
  std::lock_guard running(compactor->mu);  // waits for a running compaction
  compactor->compact = nullptr;
}

void RunHeapCompactors() {
  std::vector<std::shared_ptr<Compactor>> compactors;
  {
    HeapCompactors& all = Compactors();
    std::lock_guard lock(all.mu);
    for (const auto& [id, compactor] : all.compactors) compactors.push_back(compactor);
  }
  for (const auto& compactor : compactors) {
    std::lock_guard running(compactor->mu);
    if (compactor->compact) compactor->compact();
  }
}

bool ReleaseFreeHeapOver(size_t free_bytes) {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  // fordblks: free bytes in every arena, the top chunks included.
  if (mallinfo2().fordblks <= free_bytes) return false;
  RunHeapCompactors();
  malloc_trim(0);
  return true;
#else
  (void)free_bytes;
  return false;
#endif
}

void IdleUpkeep::OnIdle() {
  if (!std::exchange(paged_out_, true)) {
    auto bytes = PageOutExecutable();
    if (bytes.ok()) {
      LogDebug("paged out the executable's startup pages", {{"mapped_bytes", *bytes}});
    } else {
      LogDebug("keeping the executable's startup pages", {{"why", bytes.status()}});
    }
  } else if (ReleaseFreeHeapOver(kHeapScavengeFreeBytes)) {
    // The burst of work that left the heap this much free is over: the code
    // it faulted back in (thousands of events' parsing, a reconcile of every
    // node) goes the way of the start-up code.
    auto bytes = PageOutExecutable();
    LogDebug("handed free heap back to the kernel", {{"paged_out", bytes.ok()}});
  }
}

}  // namespace gpuop
