#include "host/driver_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <set>

#include "base/files.h"
#include "base/strings.h"
#include "host/ld_cache.h"

namespace gpuop::host {
namespace {

// lstat says a regular file or a symlink is there (a library or binary may be
// either).
bool FileOrLink(const std::string& full) {
  struct stat st {};
  if (::lstat(full.c_str(), &st) != 0) return false;
  return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode);
}

bool Exists(const std::string& full) {
  struct stat st {};
  return ::stat(full.c_str(), &st) == 0;
}

// Names in a directory (no "." and ".."), sorted; empty when unreadable.
std::vector<std::string> ListDir(const std::string& full) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(full.c_str()), ::closedir);
  if (!dir) return names;
  while (const dirent* e = ::readdir(dir.get())) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string InDir(const std::string& dir, std::string_view name) {
  return dir == "/" ? "/" + std::string(name) : dir + "/" + std::string(name);
}

// Directories that hold `file` according to the cache: the directory of each
// entry whose key is libname.so.<anything> for this machine's architecture,
// where `file` exists.
void DirsFromCache(const LdCache& cache, const std::string& read_root, std::string_view stem,
                   const std::string& file, std::vector<std::string>* dirs) {
  const int32_t arch = HostLdArchFlag();
  for (const LdCacheEntry& e : cache.entries) {
    if (!StartsWith(e.key, std::string(stem) + ".so")) continue;
    if (arch != 0 && (e.flags & kLdFlagArchMask) != arch) continue;
    if (!StartsWith(e.value, "/")) continue;
    std::string dir = DirName(e.value);
    if (std::find(dirs->begin(), dirs->end(), dir) != dirs->end()) continue;
    if (FileOrLink(JoinRoot(read_root, InDir(dir, file)))) dirs->push_back(dir);
  }
}

}  // namespace

Result<DriverLibraries> FindDriverLibraries(const std::string& read_root,
                                            const std::string& version,
                                            const std::string& display_root) {
  const std::string libcuda = "libcuda.so." + version;
  const std::string libnvml = "libnvidia-ml.so." + version;
  DriverLibraries out;
  std::vector<std::string> cuda_dirs, nvml_dirs;

  const std::string cache_path = JoinRoot(read_root, "/etc/ld.so.cache");
  auto cache = ReadLdCache(cache_path);
  if (cache.ok()) {
    DirsFromCache(*cache, read_root, "libcuda", libcuda, &cuda_dirs);
    DirsFromCache(*cache, read_root, "libnvidia-ml", libnvml, &nvml_dirs);
    out.from_ld_cache = !cuda_dirs.empty() || !nvml_dirs.empty();
  } else if (cache.status().code() != StatusCode::kNotFound) {
    return cache.status();
  }
  if (cuda_dirs.empty() && nvml_dirs.empty()) {
    for (std::string_view d : kStandardLibraryDirs) {
      std::string dir(d);
      if (cuda_dirs.empty() && FileOrLink(JoinRoot(read_root, InDir(dir, libcuda)))) {
        cuda_dirs.push_back(dir);
      }
      if (nvml_dirs.empty() && FileOrLink(JoinRoot(read_root, InDir(dir, libnvml)))) {
        nvml_dirs.push_back(dir);
      }
    }
  }
  if (cuda_dirs.empty() && nvml_dirs.empty()) {
    std::vector<std::string> std_dirs(kStandardLibraryDirs.begin(), kStandardLibraryDirs.end());
    return NotFound("no NVIDIA driver libraries for driver version " + version +
                    " under driver root " + display_root + ": neither " + libcuda + " nor " +
                    libnvml + " is in " + JoinRoot(display_root, "/etc/ld.so.cache") + " or in " +
                    Join(std_dirs, ", ") +
                    "; install the driver there or point --driver-root at the driver's root");
  }
  if (!cuda_dirs.empty()) out.libcuda_dir = cuda_dirs.front();

  std::vector<std::string> dirs = cuda_dirs;
  for (const auto& d : nvml_dirs) {
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  const std::string suffix = ".so." + version;
  std::set<std::string> found;
  for (const std::string& dir : dirs) {
    for (const std::string& sub : {dir, InDir(dir, "vdpau")}) {
      const std::string full_dir = JoinRoot(read_root, sub);
      for (const std::string& name : ListDir(full_dir)) {
        const bool versioned = EndsWith(name, suffix);
        const bool nvvm70 = sub == dir && StartsWith(name, "libnvidia-nvvm70.so.");
        if (!versioned && !nvvm70) continue;
        if (FileOrLink(full_dir + "/" + name)) found.insert(InDir(sub, name));
      }
    }
  }
  out.paths.assign(found.begin(), found.end());
  return out;
}

Result<std::string> FindLibraryBySoname(const std::string& read_root, const std::string& soname) {
  auto cache = ReadLdCache(JoinRoot(read_root, "/etc/ld.so.cache"));
  if (cache.ok()) {
    const int32_t arch = HostLdArchFlag();
    for (const LdCacheEntry& e : cache->entries) {
      if (e.key != soname || !StartsWith(e.value, "/")) continue;
      if (arch != 0 && (e.flags & kLdFlagArchMask) != arch) continue;
      if (Exists(JoinRoot(read_root, e.value))) return e.value;
    }
  }
  for (std::string_view d : kStandardLibraryDirs) {
    std::string path = InDir(std::string(d), soname);
    if (Exists(JoinRoot(read_root, path))) return path;
  }
  return NotFound(soname + " is neither in " + JoinRoot(read_root, "/etc/ld.so.cache") +
                  " nor in the standard library directories under " + read_root);
}

std::vector<std::string> FindDriverBinaries(const std::string& read_root) {
  std::vector<std::string> out;
  for (std::string_view bin : kDriverBinaries) {
    for (std::string_view dir : kBinaryDirs) {
      std::string path = InDir(std::string(dir), bin);
      if (FileOrLink(JoinRoot(read_root, path))) {
        out.push_back(std::move(path));
        break;
      }
    }
  }
  return out;
}

std::vector<std::string> FindGspFirmware(const std::string& read_root, const std::string& version) {
  std::vector<std::string> out;
  const std::string dir = "/lib/firmware/nvidia/" + version;
  for (const std::string& name : ListDir(JoinRoot(read_root, dir))) {
    if (StartsWith(name, "gsp") && EndsWith(name, ".bin") &&
        FileOrLink(JoinRoot(read_root, dir + "/" + name))) {
      out.push_back(dir + "/" + name);
    }
  }
  return out;
}

std::vector<std::string> FindIpcSockets(const std::string& read_root) {
  std::vector<std::string> out;
  for (std::string_view rel : {"nvidia-persistenced/socket", "nvidia-fabricmanager/socket"}) {
    for (std::string_view base : {"/run/", "/var/run/"}) {
      std::string path = std::string(base) + std::string(rel);
      if (Exists(JoinRoot(read_root, path))) {
        out.push_back(std::move(path));
        break;
      }
    }
  }
  if (Exists(JoinRoot(read_root, "/tmp/nvidia-mps"))) out.push_back("/tmp/nvidia-mps");
  return out;
}

}  // namespace gpuop::host
