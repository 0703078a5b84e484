#include "sim/host/elf_stub.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

namespace gpuop::sim {
namespace {

// Sizes and constants from the ELF64 specification (elf.h).
constexpr size_t kEhdrSize = 64;
constexpr size_t kPhdrSize = 56;
constexpr size_t kDynSize = 16;
constexpr uint16_t kEtDyn = 3;
constexpr uint32_t kPtLoad = 1;
constexpr uint32_t kPtDynamic = 2;
constexpr uint32_t kPfW = 2;
constexpr uint32_t kPfR = 4;
constexpr int64_t kDtNull = 0;
constexpr int64_t kDtStrtab = 5;
constexpr int64_t kDtStrsz = 10;
constexpr int64_t kDtSoname = 14;

// Little-endian writers: ELF64 objects for x86-64 and aarch64 are both LSB,
// and writing byte by byte keeps the output independent of the host's order.
void Put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Put16(std::string& out, uint64_t v) { Put(out, v, 2); }
void Put32(std::string& out, uint64_t v) { Put(out, v, 4); }
void Put64(std::string& out, uint64_t v) { Put(out, v, 8); }

uint64_t Get(std::string_view in, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(in[off + static_cast<size_t>(i)]);
  }
  return v;
}

struct Phdr {
  uint32_t type;
  uint64_t offset, vaddr, filesz;
};

// Maps a virtual address to a file offset through the PT_LOAD segments.
std::optional<uint64_t> AddrToOffset(const std::vector<Phdr>& phdrs, uint64_t addr) {
  for (const Phdr& p : phdrs) {
    if (p.type == kPtLoad && addr >= p.vaddr && addr - p.vaddr < p.filesz) {
      return addr - p.vaddr + p.offset;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string BuildElfSharedObject(std::string_view soname, uint16_t e_machine) {
  const uint64_t phoff = kEhdrSize;
  const uint64_t dynoff = phoff + 2 * kPhdrSize;
  const uint64_t dynsz = 4 * kDynSize;
  const uint64_t stroff = dynoff + dynsz;
  // String table: a leading NUL (index 0 is the empty string), then the soname.
  const uint64_t strsz = soname.size() + 2;
  const uint64_t filesz = stroff + strsz;

  std::string out;
  out.reserve(filesz);
  // e_ident: magic, ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_SYSV, padding.
  out.append(
      "\x7f"
      "ELF",
      4);
  out.push_back(2);
  out.push_back(1);
  out.push_back(1);
  out.append(9, '\0');
  Put16(out, kEtDyn);
  Put16(out, e_machine);
  Put32(out, 1);          // e_version
  Put64(out, 0);          // e_entry: a library without an entry point
  Put64(out, phoff);      // e_phoff
  Put64(out, 0);          // e_shoff: no section headers; loaders and ldconfig use phdrs
  Put32(out, 0);          // e_flags
  Put16(out, kEhdrSize);  // e_ehsize
  Put16(out, kPhdrSize);  // e_phentsize
  Put16(out, 2);          // e_phnum
  Put16(out, 0);          // e_shentsize
  Put16(out, 0);          // e_shnum
  Put16(out, 0);          // e_shstrndx

  // PT_LOAD maps the whole file at address 0, so addresses equal offsets.
  Put32(out, kPtLoad);
  Put32(out, kPfR);
  Put64(out, 0);
  Put64(out, 0);
  Put64(out, 0);
  Put64(out, filesz);
  Put64(out, filesz);
  Put64(out, 0x1000);

  Put32(out, kPtDynamic);
  Put32(out, kPfR | kPfW);
  Put64(out, dynoff);
  Put64(out, dynoff);
  Put64(out, dynoff);
  Put64(out, dynsz);
  Put64(out, dynsz);
  Put64(out, 8);

  Put64(out, kDtStrtab);
  Put64(out, stroff);
  Put64(out, kDtStrsz);
  Put64(out, strsz);
  Put64(out, kDtSoname);
  Put64(out, 1);
  Put64(out, kDtNull);
  Put64(out, 0);

  out.push_back('\0');
  out.append(soname);
  out.push_back('\0');
  return out;
}

Result<ElfSharedObjectInfo> ReadElfSharedObject(std::string_view bytes) {
  if (bytes.size() < kEhdrSize || bytes.substr(0, 4) != std::string_view("\x7f"
                                                                         "ELF",
                                                                         4)) {
    return InvalidArgument("not an ELF file (no ELF magic)");
  }
  if (bytes[4] != 2 || bytes[5] != 1) {
    return NotSupported("only ELF64 little-endian objects are read");
  }
  ElfSharedObjectInfo info;
  info.type = static_cast<uint16_t>(Get(bytes, 16, 2));
  info.machine = static_cast<uint16_t>(Get(bytes, 18, 2));
  const uint64_t phoff = Get(bytes, 32, 8);
  const uint64_t phentsize = Get(bytes, 54, 2);
  const uint64_t phnum = Get(bytes, 56, 2);
  if (phentsize != kPhdrSize || phoff > bytes.size() ||
      phnum > (bytes.size() - phoff) / kPhdrSize) {
    return InvalidArgument("ELF program headers lie outside the file");
  }
  std::vector<Phdr> phdrs;
  for (uint64_t i = 0; i < phnum; ++i) {
    size_t at = phoff + i * kPhdrSize;
    phdrs.push_back({static_cast<uint32_t>(Get(bytes, at, 4)), Get(bytes, at + 8, 8),
                     Get(bytes, at + 16, 8), Get(bytes, at + 32, 8)});
  }
  for (const Phdr& p : phdrs) {
    if (p.type != kPtLoad) continue;
    if (p.offset > bytes.size() || p.filesz > bytes.size() - p.offset) {
      return InvalidArgument("ELF PT_LOAD segment lies outside the file");
    }
  }
  const Phdr* dyn = nullptr;
  for (const Phdr& p : phdrs) {
    if (p.type == kPtDynamic) dyn = &p;
  }
  if (dyn == nullptr) return info;  // a static object: no soname
  if (dyn->offset > bytes.size() || dyn->filesz > bytes.size() - dyn->offset) {
    return InvalidArgument("ELF PT_DYNAMIC segment lies outside the file");
  }
  std::optional<uint64_t> strtab, strsz, soname;
  for (uint64_t at = dyn->offset; at + kDynSize <= dyn->offset + dyn->filesz; at += kDynSize) {
    int64_t tag = static_cast<int64_t>(Get(bytes, at, 8));
    uint64_t val = Get(bytes, at + 8, 8);
    if (tag == kDtNull) break;
    if (tag == kDtStrtab) strtab = val;
    if (tag == kDtStrsz) strsz = val;
    if (tag == kDtSoname) soname = val;
  }
  if (!soname) return info;
  if (!strtab || !strsz) return InvalidArgument("ELF DT_SONAME without a string table");
  std::optional<uint64_t> stroff = AddrToOffset(phdrs, *strtab);
  if (!stroff || *stroff > bytes.size() || *strsz > bytes.size() - *stroff || *soname >= *strsz) {
    return InvalidArgument("ELF string table lies outside the file");
  }
  std::string_view table = bytes.substr(*stroff, *strsz);
  size_t end = table.find('\0', *soname);
  if (end == std::string_view::npos) return InvalidArgument("ELF DT_SONAME is not terminated");
  info.soname = std::string(table.substr(*soname, end - *soname));
  return info;
}

Result<uint16_t> HostElfMachine() {
  int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal(std::string("opening /proc/self/exe: ") + std::strerror(errno));
  char buf[kEhdrSize];
  ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof(buf))) {
    return Internal("reading the ELF header of /proc/self/exe failed");
  }
  std::string_view hdr(buf, sizeof(buf));
  if (hdr.substr(0, 4) != std::string_view("\x7f"
                                           "ELF",
                                           4) ||
      hdr[4] != 2 || hdr[5] != 1) {
    return NotSupported("this executable is not ELF64 little-endian");
  }
  return static_cast<uint16_t>(Get(hdr, 18, 2));
}

Result<std::string> MultiarchLibDir(uint16_t e_machine) {
  switch (e_machine) {
    case kElfMachineX86_64:
      return std::string("/usr/lib/x86_64-linux-gnu");
    case kElfMachineAarch64:
      return std::string("/usr/lib/aarch64-linux-gnu");
    default:
      return NotSupported("no driver library directory is known for ELF machine " +
                          std::to_string(e_machine) + " (x86-64 and aarch64 are supported)");
  }
}

}  // namespace gpuop::sim
