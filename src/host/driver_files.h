// Where the NVIDIA driver's user-space files are under a driver root: the
// libraries of one driver version, the utility binaries, the GSP firmware and
// the IPC sockets of its daemons.
//
// Two roots are kept apart. `read_root` is where gpuop reads on this machine
// (host root + driver root, e.g. /host/run/nvidia/driver); every path these
// functions return is a path INSIDE the driver root ("/usr/lib/x86_64-linux-
// gnu/libcuda.so.570.172.08"), which is also where it appears in a container.
// The caller prefixes the driver root as the host sees it to get a CDI
// hostPath. `display_root` is only used to name the root in messages.
//
// Thin adapters over the file system (stat, readdir) plus the ld.so.cache
// reader; no state, thread-safe.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpuop::host {

// Searched, in order, when the driver root's ld.so.cache does not name the
// driver's libraries.
inline constexpr std::array<std::string_view, 5> kStandardLibraryDirs = {
    "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib"};
inline constexpr std::array<std::string_view, 5> kDriverBinaries = {
    "nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server"};
inline constexpr std::array<std::string_view, 3> kBinaryDirs = {"/usr/bin", "/usr/sbin", "/bin"};

struct DriverLibraries {
  // Every *.so.<version> in the directory of libcuda.so.<version> and of
  // libnvidia-ml.so.<version> and their vdpau/ subdirectories, plus
  // libnvidia-nvvm70.so.*; sorted, unique.
  std::vector<std::string> paths;
  std::string libcuda_dir;     // directory of libcuda.so.<version>; empty when absent
  bool from_ld_cache = false;  // found through <root>/etc/ld.so.cache
};

// Finds the driver's libraries for `version` through <read_root>/etc/ld.so.cache
// (entries of this machine's architecture), falling back to
// kStandardLibraryDirs. A corrupt ld.so.cache is an InvalidArgument naming the
// file; no libcuda.so.<version> nor libnvidia-ml.so.<version> anywhere is a
// NotFound naming the driver root and the version.
Result<DriverLibraries> FindDriverLibraries(const std::string& read_root,
                                            const std::string& version,
                                            const std::string& display_root);

// The path inside `read_root` of the library with this soname
// ("libnvidia-ml.so.1"): <read_root>/etc/ld.so.cache's entry for this
// machine's architecture, else the first of kStandardLibraryDirs that has it.
// NotFound names the root and the soname.
Result<std::string> FindLibraryBySoname(const std::string& read_root, const std::string& soname);

// The kDriverBinaries found in kBinaryDirs (first hit per binary), in
// kDriverBinaries order.
std::vector<std::string> FindDriverBinaries(const std::string& read_root);

// /lib/firmware/nvidia/<version>/gsp*.bin, sorted.
std::vector<std::string> FindGspFirmware(const std::string& read_root, const std::string& version);

// The daemons' IPC endpoints that exist: nvidia-persistenced/socket and
// nvidia-fabricmanager/socket under /run (else /var/run), and /tmp/nvidia-mps.
std::vector<std::string> FindIpcSockets(const std::string& read_root);

}  // namespace gpuop::host
