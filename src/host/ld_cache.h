// A reader of glibc's /etc/ld.so.cache, the table ldconfig writes and the
// dynamic loader reads to map a soname ("libcuda.so.1") to a file path.
//
// Two layouts exist (glibc elf/dl-cache.h):
//   - "glibc-ld.so.cache1.1" (glibc 2.32+ writes only this): a 48-byte header
//     (magic, version, nlibs, len_strings, an endianness byte, the extension
//     offset), then nlibs 24-byte entries {int32 flags, uint32 key, uint32
//     value, uint32 osversion, uint64 hwcap}; key and value are offsets of
//     NUL-terminated strings from the start of this header.
//   - "ld.so-1.7.0" (libc5 / old glibc): a 16-byte header {magic, nlibs} and
//     12-byte entries {int32 flags, uint32 key, uint32 value}, offsets counted
//     from the end of the entry table. Old ldconfig ("compat" format) put the
//     new table right after the old one, 8-byte aligned; the new table is then
//     the one used, as glibc's loader does.
// Every offset and count is bounds-checked: a truncated or garbage file is an
// InvalidArgument naming the file, never a read out of bounds.
//
// Pure functions over bytes (ParseLdCache) plus one thin file reader
// (ReadLdCache); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::host {

// Entry flags (dl-cache.h): the low byte is the library type, the next byte
// the architecture/ABI.
inline constexpr int32_t kLdFlagTypeMask = 0x00ff;
inline constexpr int32_t kLdFlagElf = 0x0001;
inline constexpr int32_t kLdFlagElfLibc5 = 0x0002;
inline constexpr int32_t kLdFlagElfLibc6 = 0x0003;
inline constexpr int32_t kLdFlagArchMask = 0xff00;
inline constexpr int32_t kLdFlagX8664Lib64 = 0x0300;
inline constexpr int32_t kLdFlagAarch64Lib64 = 0x0a00;

enum class LdCacheFormat {
  kNew,        // "glibc-ld.so.cache1.1" only
  kOld,        // "ld.so-1.7.0" only
  kOldAndNew,  // "ld.so-1.7.0" followed by "glibc-ld.so.cache1.1"
};

struct LdCacheEntry {
  int32_t flags = 0;
  std::string key;    // the soname: "libcuda.so.1"
  std::string value;  // the path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
  uint32_t osversion = 0;
  uint64_t hwcap = 0;  // 0 in the old format
};

struct LdCache {
  LdCacheFormat format = LdCacheFormat::kNew;
  std::vector<LdCacheEntry> entries;  // in file order (ldconfig sorts them)
};

// Parses the bytes of an ld.so.cache; `name` (the file path) names the file in
// errors: "<name> is not a valid ld.so.cache: entry 3 points past the end".
Result<LdCache> ParseLdCache(std::string_view bytes, const std::string& name);

// Reads and parses the file at `path`. NotFound when it does not exist.
Result<LdCache> ReadLdCache(const std::string& path);

// The architecture flag (kLdFlagX8664Lib64, ...) of libraries built for the
// machine gpuop runs on; 0 where the cache marks none (e.g. 32-bit x86).
int32_t HostLdArchFlag();

// "libc6,x86-64" and the like, as `ldconfig -p` prints flags.
std::string LdFlagsName(int32_t flags);

}  // namespace gpuop::host
