// /etc/ld.so.cache of a host or driver root (both layouts). Invariant: the
// parser never reads out of bounds (ASan) and names the file in its errors.
#include "fuzz_util.h"
#include "host/ld_cache.h"

using gpuop::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto cache = gpuop::host::ParseLdCache(gpuop::fuzz::AsText(data, size), "fuzz.cache");
  if (!cache.ok()) {
    Check(cache.status().message().find("fuzz.cache") != std::string::npos,
          "an ld.so.cache error does not name the file", cache.status().ToString());
    return 0;
  }
  for (const auto& e : cache->entries) (void)gpuop::host::LdFlagsName(e.flags);
  return 0;
}
