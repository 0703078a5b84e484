#include "host/ld_cache.h"

#include <cstring>

#include "base/files.h"

namespace gpuop::host {
namespace {

constexpr std::string_view kOldMagic = "ld.so-1.7.0";           // 11 bytes
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";  // 17 + 3 bytes
constexpr size_t kOldHeaderSize = 16;  // magic[11], pad to 12, uint32 nlibs
constexpr size_t kOldEntrySize = 12;   // int32 flags, uint32 key, uint32 value
constexpr size_t kNewHeaderSize = 48;  // magic+version[20], nlibs, len_strings, flags, ext, unused
constexpr size_t kNewEntrySize = 24;   // flags, key, value, osversion, uint64 hwcap
constexpr size_t kNewAlign = 8;        // __alignof__(struct cache_file_new)
constexpr uint8_t kEndianLittle = 2;
constexpr uint8_t kEndianBig = 3;

// Little-endian loads; the caller has checked the bounds.
uint32_t U32(std::string_view b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[off + static_cast<size_t>(i)]);
  return v;
}
uint64_t U64(std::string_view b, size_t off) {
  return static_cast<uint64_t>(U32(b, off)) | (static_cast<uint64_t>(U32(b, off + 4)) << 32);
}

class CacheParser {
 public:
  CacheParser(std::string_view bytes, const std::string& name) : b_(bytes), name_(name) {}

  Status Bad(const std::string& why) const {
    return InvalidArgument(name_ + " is not a valid ld.so.cache: " + why +
                           "; regenerate it with ldconfig (ldconfig -r <root> for a driver root)");
  }

  // The NUL-terminated string at `base + off`, inside the file.
  Result<std::string> String(size_t base, uint32_t off, size_t entry, const char* field) const {
    size_t pos = base + off;
    if (pos < base || pos >= b_.size()) {
      return Bad("entry " + std::to_string(entry) + " " + field + " offset " + std::to_string(off) +
                 " points past the end of the file");
    }
    const void* nul = std::memchr(b_.data() + pos, '\0', b_.size() - pos);
    if (!nul) {
      return Bad("entry " + std::to_string(entry) + " " + field + " string is not terminated");
    }
    return std::string(b_.data() + pos, static_cast<const char*>(nul));
  }

  Result<LdCache> Parse() {
    if (b_.size() >= kNewMagic.size() && b_.substr(0, kNewMagic.size()) == kNewMagic) {
      LdCache cache;
      cache.format = LdCacheFormat::kNew;
      GPUOP_RETURN_IF_ERROR(ParseNew(0, &cache));
      return cache;
    }
    if (b_.size() >= kOldMagic.size() && b_.substr(0, kOldMagic.size()) == kOldMagic) {
      if (b_.size() < kOldHeaderSize) return Bad("the header is truncated");
      const uint64_t nlibs = U32(b_, kOldMagic.size() + 1);
      const uint64_t table_end = kOldHeaderSize + nlibs * kOldEntrySize;
      if (table_end > b_.size()) {
        return Bad("the header counts " + std::to_string(nlibs) +
                   " entries but the file has room for " +
                   std::to_string((b_.size() - kOldHeaderSize) / kOldEntrySize));
      }
      // A new-format table may follow, aligned (glibc's ALIGN_CACHE).
      const size_t new_start = (table_end + kNewAlign - 1) & ~(kNewAlign - 1);
      if (new_start + kNewMagic.size() <= b_.size() &&
          b_.substr(new_start, kNewMagic.size()) == kNewMagic) {
        LdCache cache;
        cache.format = LdCacheFormat::kOldAndNew;
        GPUOP_RETURN_IF_ERROR(ParseNew(new_start, &cache));
        return cache;
      }
      LdCache cache;
      cache.format = LdCacheFormat::kOld;
      for (size_t i = 0; i < nlibs; ++i) {
        const size_t at = kOldHeaderSize + i * kOldEntrySize;
        LdCacheEntry e;
        e.flags = static_cast<int32_t>(U32(b_, at));
        GPUOP_ASSIGN_OR_RETURN(e.key, String(table_end, U32(b_, at + 4), i, "key"));
        GPUOP_ASSIGN_OR_RETURN(e.value, String(table_end, U32(b_, at + 8), i, "value"));
        cache.entries.push_back(std::move(e));
      }
      return cache;
    }
    if (b_.empty()) return Bad("the file is empty");
    return Bad("no \"glibc-ld.so.cache1.1\" or \"ld.so-1.7.0\" magic at the start");
  }

 private:
  Status ParseNew(size_t start, LdCache* cache) {
    if (b_.size() - start < kNewHeaderSize)
      return Bad("the glibc-ld.so.cache1.1 header is truncated");
    const uint64_t nlibs = U32(b_, start + 20);
    const uint64_t len_strings = U32(b_, start + 24);
    const uint8_t endian = static_cast<uint8_t>(b_[start + 28]);
    if (endian == kEndianBig) {
      return Bad("it was written for a big-endian machine");
    }
    if (endian != 0 && endian != kEndianLittle) {
      return Bad("unknown endianness marker " + std::to_string(endian));
    }
    const uint64_t room = (b_.size() - start - kNewHeaderSize) / kNewEntrySize;
    if (nlibs > room) {
      return Bad("the header counts " + std::to_string(nlibs) +
                 " entries but the file has room for " + std::to_string(room));
    }
    const uint64_t strings_start = start + kNewHeaderSize + nlibs * kNewEntrySize;
    if (strings_start + len_strings > b_.size()) {
      return Bad("the string table (" + std::to_string(len_strings) +
                 " bytes) runs past the end of the file");
    }
    cache->entries.reserve(nlibs);
    for (size_t i = 0; i < nlibs; ++i) {
      const size_t at = start + kNewHeaderSize + i * kNewEntrySize;
      LdCacheEntry e;
      e.flags = static_cast<int32_t>(U32(b_, at));
      GPUOP_ASSIGN_OR_RETURN(e.key, String(start, U32(b_, at + 4), i, "key"));
      GPUOP_ASSIGN_OR_RETURN(e.value, String(start, U32(b_, at + 8), i, "value"));
      e.osversion = U32(b_, at + 12);
      e.hwcap = U64(b_, at + 16);
      cache->entries.push_back(std::move(e));
    }
    return Status::Ok();
  }

  std::string_view b_;
  const std::string& name_;
};

}  // namespace

Result<LdCache> ParseLdCache(std::string_view bytes, const std::string& name) {
  return CacheParser(bytes, name).Parse();
}

Result<LdCache> ReadLdCache(const std::string& path) {
  if (!PathExists(path)) return NotFound(path + " does not exist");
  GPUOP_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ParseLdCache(bytes, path);
}

int32_t HostLdArchFlag() {
#if defined(__x86_64__)
  return kLdFlagX8664Lib64;
#elif defined(__aarch64__)
  return kLdFlagAarch64Lib64;
#else
  return 0;
#endif
}

std::string LdFlagsName(int32_t flags) {
  std::string s;
  switch (flags & kLdFlagTypeMask) {
    case kLdFlagElf:
      s = "ELF";
      break;
    case kLdFlagElfLibc5:
      s = "libc5";
      break;
    case kLdFlagElfLibc6:
      s = "libc6";
      break;
    default:
      s = "unknown";
      break;
  }
  switch (flags & kLdFlagArchMask) {
    case 0:
      break;
    case kLdFlagX8664Lib64:
      s += ",x86-64";
      break;
    case kLdFlagAarch64Lib64:
      s += ",AArch64";
      break;
    default:
      s += ",arch " + std::to_string((flags & kLdFlagArchMask) >> 8);
      break;
  }
  return s;
}

}  // namespace gpuop::host
