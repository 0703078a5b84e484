// Memory a long-running process no longer needs after its start.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "base/status.h"

namespace gpuop {

// How long a long-running component runs before it pages out its
// executable: its start (flag parsing, static initialisers, gRPC's
// registration of every resolver and filter, the first pass) is over by then.
inline constexpr std::chrono::seconds kStartupSettle{10};

// Asks the kernel to reclaim this process's resident pages of its own
// executable (madvise MADV_PAGEOUT on each read-only mapping of
// /proc/self/exe). Code that ran once at start (and the neighbours the
// kernel's fault-around mapped with it) then leaves the process's RSS; code
// it runs again faults back in from the page cache. Pages other processes
// map too stay, as do the written ones (relocated data). Returns the bytes
// advised; an error when the kernel lacks MADV_PAGEOUT (before Linux 5.4) or
// the mappings cannot be read.
Result<size_t> PageOutExecutable();

// Hands the heap's free pages back to the kernel (glibc's malloc_trim(0),
// which also releases whole free pages inside the heap, in every arena):
// after a burst of parsing, what stays resident is what the process keeps.
// A no-op under AddressSanitizer (its allocator replaces glibc's, whose
// malloc_trim then walks an arena that was never set up) and without glibc.
void ReleaseFreeHeap();

// How often a waiting long-running component looks at its free heap, and how
// much free heap it tolerates before handing it back (ReleaseFreeHeap). A
// burst of work (thousands of watch events, each parsed whole before it is
// projected) leaves free chunks between the allocations the process keeps,
// which glibc only returns on a trim: Go's runtime scavenges the same way.
inline constexpr std::chrono::seconds kHeapScavengePeriod{10};
inline constexpr size_t kHeapScavengeFreeBytes = size_t{2} << 20;

// When more than `free_bytes` of the heap is free: runs the heap compactors
// (below), then ReleaseFreeHeap; whether it did. False under
// AddressSanitizer and without glibc.
bool ReleaseFreeHeapOver(size_t free_bytes);

// Work that makes free heap returnable, run before a scavenge's trim: a cache
// whose entries a burst left scattered between the burst's freed temporaries
// allocates them anew, together, and frees the old ones (Informer::Compact),
// so whole pages come free. Compactors run one at a time, on the scavenging
// thread. AddHeapCompactor returns the id RemoveHeapCompactor takes, which
// waits for that compactor to finish if it is running.
int AddHeapCompactor(std::function<void()> compact);
void RemoveHeapCompactor(int id);
void RunHeapCompactors();

// What a long-running component does with the time it waits idle, for its
// signal loop: wait at most NextWait() and, when nothing came, call OnIdle().
// The first idle wait (kStartupSettle) ends its start: PageOutExecutable.
// Each later one (kHeapScavengePeriod) hands free heap back
// (ReleaseFreeHeapOver kHeapScavengeFreeBytes) and, when there was that much,
// pages the executable out again: a burst of work left it, and the code the
// burst ran need not stay resident. A signal or event cuts a wait short and
// is not idle: the next wait starts whole again.
class IdleUpkeep {
 public:
  std::chrono::seconds NextWait() const {
    return paged_out_ ? kHeapScavengePeriod : kStartupSettle;
  }
  void OnIdle();

 private:
  bool paged_out_ = false;
};

}  // namespace gpuop
