// Minimal ELF64 shared objects for simulated driver libraries.
//
// A simulated host root holds the driver's libraries (libcuda.so.<version>,
// ...) so that the real ldconfig, and anything that reads ELF dynamic
// sections, sees them as on a driver install: an ET_DYN object for the host's
// machine whose DT_SONAME is the real soname. The objects carry no code and
// no symbols; they are never meant to be dlopen()ed.
//
// BuildElfSharedObject and ReadElfSharedObject are pure functions of their
// arguments; HostElfMachine reads /proc/self/exe. All are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpuop::sim {

// e_machine values (elf.h) for the architectures gpuop ships on.
inline constexpr uint16_t kElfMachineX86_64 = 62;
inline constexpr uint16_t kElfMachineAarch64 = 183;

// The bytes of a little-endian ELF64 ET_DYN object with one PT_LOAD covering
// the whole file and a PT_DYNAMIC holding DT_STRTAB, DT_STRSZ, DT_SONAME and
// DT_NULL. REQUIRES: soname is non-empty and holds no NUL.
std::string BuildElfSharedObject(std::string_view soname, uint16_t e_machine);

// What ReadElfSharedObject found in an ELF64 little-endian file.
struct ElfSharedObjectInfo {
  uint16_t type = 0;     // e_type (3 = ET_DYN)
  uint16_t machine = 0;  // e_machine
  std::string soname;    // DT_SONAME; empty when the object has none
};

// Parses the header and the dynamic section through the program headers (the
// way ldconfig does, no section headers needed). Rejects anything that is not
// a well-formed ELF64 little-endian file, without reading out of bounds.
Result<ElfSharedObjectInfo> ReadElfSharedObject(std::string_view bytes);

// The e_machine of the running executable (/proc/self/exe), so that stub
// libraries match what this host's ldconfig expects.
Result<uint16_t> HostElfMachine();

// The Debian multiarch library directory for a machine:
// /usr/lib/x86_64-linux-gnu or /usr/lib/aarch64-linux-gnu.
Result<std::string> MultiarchLibDir(uint16_t e_machine);

}  // namespace gpuop::sim
