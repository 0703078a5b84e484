// Symbol lookup in a library opened with dlopen, for the NVML and CUDA
// driver wrappers that accept several versioned names of one entry point.
// Thread-safe as far as dlsym/dlerror are (dlerror's state is per thread).
#pragma once

#include <initializer_list>

namespace gpuop {

// The address of the first of `names` that `handle` exports, or null when
// none does. `*resolved` is set to the name that resolved, or to the
// preferred (first) name when none did, so errors can name it. `names` must
// not be empty.
void* ResolveFirstSymbol(void* handle, std::initializer_list<const char*> names,
                         const char** resolved);

}  // namespace gpuop
