// The DRA driver's checkpoint: which claims this node prepared, with what, so
// prepare and unprepare stay idempotent across plugin and kubelet restarts
// (NVIDIA's plugin keeps one too). The file is <plugin dir>/checkpoint.json.
//
// gpuop's own format (NVIDIA's checksum is FNV over Go's spew output, not
// reproducible here): one JSON object
//   {"kind": "GpuopDraCheckpoint", "version": 1, "checksum": "<fnv1a32 hex>",
//    "data": {"nodeBootID": "...", "preparedClaims": {"<uid>": {
//       "state": "PrepareStarted"|"PrepareCompleted", "name", "namespace",
//       "timeSliceApplied": bool,
//       "devices": [{"requests", "pool", "device", "adminAccess", "cdiIds",
//                    "type": "gpu"|"mig", "uuid", "migUUID"}]}}}}
// where the checksum is Fnv1a32 of data serialised canonically (sorted keys,
// no spaces), so a torn or edited file is reported, never half-trusted.
//
// SerializeCheckpoint / ParseCheckpoint are pure. CheckpointFile is the thin
// adapter: it reads and writes (WriteFileAtomic) the file and the kernel's
// boot ID; a checkpoint from another boot is dropped, since a reboot undid
// everything it records. Not thread-safe: the driver serialises its use.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "dra/claims.h"

namespace gpuop::dra {

inline constexpr char kDefaultBootIdPath[] = "/proc/sys/kernel/random/boot_id";

enum class PrepareState { kStarted, kCompleted };

struct CheckpointDevice {
  std::vector<std::string> requests;  // what the kubelet is told
  std::string pool, device;
  bool admin_access = false;
  std::vector<std::string> cdi_ids;
  DeviceType type = DeviceType::kGpu;
  std::string uuid;      // the GPU, or a MIG device's parent
  std::string mig_uuid;  // MIG only
  bool operator==(const CheckpointDevice&) const = default;
};

struct CheckpointClaim {
  PrepareState state = PrepareState::kStarted;
  std::string name, ns;
  std::vector<CheckpointDevice> devices;
  // Whether prepare set a time slice on the claim's GPUs (unprepare resets it).
  bool time_slice_applied = false;
  bool operator==(const CheckpointClaim&) const = default;
};

struct Checkpoint {
  std::string node_boot_id;
  std::map<std::string, CheckpointClaim> claims;  // by claim UID
  bool operator==(const Checkpoint&) const = default;
};

std::string SerializeCheckpoint(const Checkpoint& checkpoint);
// InvalidArgument naming `origin` for a file that does not parse, has another
// kind or version, or whose checksum does not match (with the fix: move the
// file away; the kubelet then prepares its claims again).
Result<Checkpoint> ParseCheckpoint(std::string_view text, const std::string& origin);

class CheckpointFile {
 public:
  CheckpointFile(std::string path, std::string boot_id_path = kDefaultBootIdPath)
      : path_(std::move(path)), boot_id_path_(std::move(boot_id_path)) {}

  // The checkpoint; an empty one for this boot when the file is absent or
  // was written in another boot. Errors: unreadable boot ID, corrupt file.
  Result<Checkpoint> Load() const;
  Status Save(const Checkpoint& checkpoint) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_, boot_id_path_;
};

}  // namespace gpuop::dra
