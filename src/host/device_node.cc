#include "host/device_node.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>

namespace gpuop::host {

Result<DeviceNodeInfo> StatDeviceNode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound(path + " does not exist");
    return Internal("stat " + path + ": " + std::strerror(err));
  }
  DeviceNodeInfo info;
  if (S_ISCHR(st.st_mode)) {
    info.type = 'c';
  } else if (S_ISBLK(st.st_mode)) {
    info.type = 'b';
  } else {
    return InvalidArgument(path +
                           " is not a device node (a host root made without mknod "
                           "permission has plain files there; lay it out as root)");
  }
  info.major = ::major(st.st_rdev);
  info.minor = ::minor(st.st_rdev);
  info.mode = st.st_mode & 07777;
  info.uid = st.st_uid;
  info.gid = st.st_gid;
  return info;
}

}  // namespace gpuop::host
