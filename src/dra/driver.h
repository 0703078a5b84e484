// Driver: NodePrepareResources / NodeUnprepareResources for driver
// gpu.nvidia.com on this node, as NVIDIA's gpu-kubelet-plugin behaves
// (kubernetes-sigs/dra-driver-nvidia-gpu, cmd/gpu-kubelet-plugin).
//
// Prepare, per claim: read the claim from the API server (its UID must be the
// kubelet's, it must be allocated), then under the lock
//   1. a claim the checkpoint has as PrepareCompleted gets its stored answer;
//   2. a device that another completed claim holds is refused ("already
//      allocated to different claim"), admin-access results excepted;
//   3. a claim left PrepareStarted (a crash, a failed step) is rolled back;
//   4. devices are resolved against the GPUs now and their opaque configs
//      selected (config.h); nothing is touched when that fails;
//   5. checkpoint PrepareStarted, apply time slicing (TimeSlicer), write the
//      per-claim CDI spec (claim_cdi.h) into the CDI root, checkpoint
//      PrepareCompleted;
//   6. answer per device: request_names=[request], pool, device and the CDI
//      id k8s.gpu.nvidia.com/claim=<uid>-<device>.
// Unprepare: an unknown claim is success; otherwise the time slice is reset to
// Default on GPUs no other claim holds (when prepare set one), the CDI file is
// deleted and the entry dropped. A failure leaves the entry, so the kubelet's
// retry tries again.
//
// One claim's failure is that claim's error; a checkpoint that cannot be read
// fails every claim of the call (the message names the file and the fix).
//
// Thread-safety: Prepare and Unprepare may be called from any thread; they
// are serialised by a mutex and, across processes (an old and a new plugin
// pod), by an exclusive flock on <plugin dir>/pu.lock.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/mutex.h"
#include "base/status.h"
#include "dra/checkpoint.h"
#include "dra/claims.h"
#include "dra/config.h"
#include "kube/client.h"
#include "kubelet/dra_types.h"
#include "nvml/client.h"
#include "nvml/device.h"
#include "toolkit/cdi_build.h"
#include "toolkit/cdi_discover.h"

namespace gpuop::dra {

// Applies a GPU's time slice (nvidia-smi compute-policy on a real node).
// Called under the driver's lock, one GPU at a time.
class TimeSlicer {
 public:
  virtual ~TimeSlicer() = default;
  // Sets whole GPU `gpu_uuid` to `interval`; Default resets it.
  virtual Status SetTimeSlice(const std::string& gpu_uuid, TimeSliceInterval interval) = 0;
};

// The real one: `nvidia-smi -i <uuid> -c DEFAULT`, then `nvidia-smi
// compute-policy -i <uuid> --set-timeslice <0..3>`, as NVIDIA's driver does
// for a TimeSlicing config. A non-zero exit is an error quoting nvidia-smi.
class NvidiaSmiTimeSlicer final : public TimeSlicer {
 public:
  // `nvidia_smi`: the binary, a path or a name looked up in PATH.
  explicit NvidiaSmiTimeSlicer(std::string nvidia_smi = "nvidia-smi")
      : nvidia_smi_(std::move(nvidia_smi)) {}
  Status SetTimeSlice(const std::string& gpu_uuid, TimeSliceInterval interval) override;

 private:
  std::string nvidia_smi_;
};

// The node's devices now: what NVML reports and what the CDI spec is built from.
struct NodeDevices {
  std::vector<nvml::Gpu> gpus;
  toolkit::CdiInputs cdi;
};

using ClaimFetcher = std::function<Result<nlohmann::json>(const kubelet::DraClaim&)>;
using NodeDevicesSource = std::function<Result<NodeDevices>()>;

// GET resourceclaims/<name> in the claim's namespace (RBAC: resourceclaims get).
// `client` must outlive the fetcher.
ClaimFetcher ApiClaimFetcher(kube::Client& client);
// The GPUs from NVML and the CDI inputs from the host root, read per call.
// `client` must outlive the source.
NodeDevicesSource NvmlNodeDevices(const nvml::Client& client, toolkit::CdiHostRoots roots);

struct DriverOptions {
  std::string node_name;   // the pool of this node's devices
  std::string plugin_dir;  // checkpoint.json and pu.lock
  std::string cdi_root;    // where per-claim CDI specs go (/var/run/cdi)
  std::string boot_id_path = kDefaultBootIdPath;
  // hook_path, driver_root and dev_root of the specs; the rest is set per claim.
  toolkit::CdiBuildOptions cdi;
};

class Driver final : public kubelet::DraDriver {
 public:
  // `time_slicer` must outlive the driver.
  Driver(DriverOptions options, ClaimFetcher fetch, NodeDevicesSource devices,
         TimeSlicer& time_slicer);

  std::map<std::string, kubelet::DraPrepareResult> Prepare(
      const std::vector<kubelet::DraClaim>& claims) override;
  std::map<std::string, std::string> Unprepare(
      const std::vector<kubelet::DraClaim>& claims) override;

  std::string CheckpointPath() const { return checkpoint_.path(); }
  std::string CdiSpecPath(const std::string& claim_uid) const;

 private:
  // The file lock must be held too (LockPluginDir).
  Result<std::vector<kubelet::DraPreparedDevice>> PrepareClaim(Checkpoint& cp,
                                                               const ClaimAllocation& claim,
                                                               std::optional<NodeDevices>& node)
      GPUOP_REQUIRES(mu_);
  Result<std::vector<CheckpointDevice>> PlanDevices(const ClaimAllocation& claim,
                                                    const NodeDevices& node,
                                                    std::map<std::string, TimeSliceInterval>& ts,
                                                    std::vector<ResolvedDevice>& resolved) const;
  Status Undo(Checkpoint& cp, const std::string& uid) GPUOP_REQUIRES(mu_);
  // The cross-process lock, <plugin dir>/pu.lock (the directory is made).
  Result<FileLock> LockPluginDir() const;

  const DriverOptions options_;
  const ClaimFetcher fetch_;
  const NodeDevicesSource devices_;
  TimeSlicer& time_slicer_;
  const CheckpointFile checkpoint_;
  Mutex mu_;
};

}  // namespace gpuop::dra
