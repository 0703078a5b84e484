// The simulated GPUs' run-time state, shared by every process of a node.
//
// A real driver gives every process one view of the GPUs: a MIG layout made by
// mig-manager is what the device plugin then lists. The simulator gets the same
// by keeping the state in `$GPUOP_SIM_STATE/state.json`. Writers take an
// exclusive flock on `<dir>/lock`, re-read, change and write the file with
// WriteFileAtomic, so a writer killed half-way leaves the previous file.
// Readers do not lock: they stat the file and re-read it only when it changed
// (inode, size, mtime), which keeps NVML calls cheap. Without GPUOP_SIM_STATE
// the state lives in the process only.
//
// SimState and the functions on it are plain values and pure. StateStore is
// thread-safe: Read and Update may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/mig_engine.h"

namespace gpuop::sim {

inline constexpr unsigned kNoInstanceId = 0xFFFFFFFFu;
inline constexpr size_t kMaxEvents = 1024;

// NVML event type bits the simulator emits (nvmlEventType*).
inline constexpr uint64_t kEventSingleBitEcc = 0x1;
inline constexpr uint64_t kEventDoubleBitEcc = 0x2;
inline constexpr uint64_t kEventXid = 0x8;

// nvmlDeviceGpuRecoveryAction_t values.
inline constexpr unsigned kRecoveryNone = 0;
inline constexpr unsigned kRecoveryGpuReset = 1;
inline constexpr unsigned kRecoveryNodeReboot = 2;

// The recovery action the simulated driver posts for an XID: a reset for the
// faults NVIDIA's XID catalog resolves with RESET_GPU (uncorrectable memory
// errors, row-remap events, NVLink errors, GSP/firmware errors, bus loss), a
// node reboot for a failed row remap (a reset cannot retire the row), none for
// the rest (application errors: restarting the application is enough).
unsigned RecoveryActionForXid(uint64_t xid);

struct EccCounters {
  uint64_t sbe_volatile = 0, sbe_aggregate = 0;
  uint64_t dbe_volatile = 0, dbe_aggregate = 0;
  bool operator==(const EccCounters&) const = default;
};

// A process holding a CUDA context on a GPU (libcuda-sim.so), as NVML's
// running-process list reports it.
struct SimProcess {
  uint32_t pid = 0;
  uint64_t used_bytes = 0;  // device memory the process holds
  bool operator==(const SimProcess&) const = default;
};

// How long after a kernel ends NVML still counts the GPU busy: its
// utilisation is the share of the last sample period (up to a second) that a
// kernel ran.
inline constexpr int64_t kKernelBusyWindowMs = 1000;

struct GpuRuntime {
  bool mig_current = false;
  bool mig_pending = false;
  bool lost = false;
  EccCounters ecc;
  unsigned remapped_correctable = 0;
  unsigned remapped_uncorrectable = 0;
  bool remap_pending = false;  // a remap waits for the next reset
  unsigned pcie_replays = 0;
  // What the driver says this GPU needs (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION):
  // one of kRecovery*. Set by faults (RecoveryActionForXid), cleared by the
  // reset or driver reload it asks for: the evidence a health check reads.
  unsigned recovery_action = 0;
  // NVML calls that created or destroyed a GPU or compute instance on this
  // GPU (what a MIG change cost), and a fault: when >= 0, that many more
  // creates succeed and the next fails with INSUFFICIENT_RESOURCES (then -1).
  uint64_t mig_creates = 0, mig_destroys = 0;
  int64_t mig_create_fails_after = -1;
  std::vector<GiRecord> gis;  // sorted by id
  // CUDA work (libcuda-sim.so): the processes with a context on this GPU and
  // when the last kernel finished. A reset or driver unload ends them.
  std::vector<SimProcess> processes;
  int64_t last_kernel_unix_ms = 0;
  uint64_t kernel_launches = 0;
  // Its work (kernels, `gpuop sim gpu load`): what GPM's counters read.
  BusyTime busy;
  bool operator==(const GpuRuntime&) const = default;
};

struct SimEvent {
  uint64_t seq = 0;
  unsigned gpu = 0;
  uint64_t type = 0;  // one kEvent* bit
  uint64_t data = 0;  // the XID for XID events
  unsigned gi = kNoInstanceId;
  unsigned ci = kNoInstanceId;
  bool operator==(const SimEvent&) const = default;
};

struct SimState {
  std::string machine;                 // Machine::name
  std::vector<std::string> gpu_uuids;  // says which machine the file belongs to
  int64_t created_unix_ms = 0;         // telemetry's time origin
  // The kernel driver: `nvidia` (driver_loaded) and its two users, at the
  // version a driver container loaded ("" : the machine's preinstalled one).
  bool driver_loaded = true;
  bool uvm_loaded = true, modeset_loaded = true;
  std::string driver_version;
  uint64_t next_serial = 1;  // creation serials of GIs and CIs
  uint64_t last_seq = 0;     // seq of the newest event
  std::vector<GpuRuntime> gpus;
  std::vector<SimEvent> events;  // the newest kMaxEvents, oldest first

  // Appends an event with the next seq, dropping the oldest beyond kMaxEvents.
  void AddEvent(unsigned gpu, uint64_t type, uint64_t data, unsigned gi = kNoInstanceId,
                unsigned ci = kNoInstanceId);
  bool operator==(const SimState&) const = default;
};

SimState InitialState(const Machine& machine, int64_t now_unix_ms);
std::string SerializeState(const SimState& state);
// `origin` names the file in error messages.
Result<SimState> ParseState(std::string_view json, const std::string& origin);
// An error naming both machines when `state` was made for another machine.
Status CheckStateMatches(const SimState& state, const Machine& machine, const std::string& origin);

class StateStore {
 public:
  // `dir` empty: the state lives in this process only. Otherwise the directory
  // is created if needed and state.json initialised from `machine` when absent.
  static Result<std::unique_ptr<StateStore>> Open(const Machine& machine, const std::string& dir,
                                                  int64_t now_unix_ms);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const Machine& machine() const { return machine_; }
  bool shared() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // The current state; re-reads the file only when it changed.
  Result<std::shared_ptr<const SimState>> Read();

  // Read-modify-write under the exclusive file lock. When `fn` fails nothing is
  // written and its status is returned.
  // REQUIRES: `fn` does not call back into this store.
  Status Update(const std::function<Status(SimState&)>& fn);

 private:
  StateStore(Machine machine, std::string dir);
  // REQUIRES: mu_ held. Re-reads the file when its identity changed.
  Status RefreshLocked(bool force);

  const Machine machine_;
  const std::string dir_;
  const std::string path_;
  const std::string lock_path_;

  std::mutex mu_;
  std::shared_ptr<const SimState> cached_;  // GUARDED_BY(mu_)
  // Identity of the file behind cached_. The fd stays open so that its inode
  // cannot be reused by a later write while we compare against it.
  int cached_fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  off_t size_ = 0;
  int64_t mtime_ns_ = 0;
};

// ---- Control operations (`gpuop sim gpu ...`, tests) ----------------------
// Each is one Update of the store; errors name the GPU and the machine.

// Opens the store named by the environment: GPUOP_SIM_MACHINE (default
// dgx-h100), GPUOP_SIM_STATE (required when `require_shared`) and
// GPUOP_SIM_SEED (UUID seed, default empty).
Result<std::unique_ptr<StateStore>> OpenStateFromEnv(bool require_shared);

// An XID on a GPU, or on one MIG device when `gi` and `ci` are given.
Status InjectXid(StateStore& store, unsigned gpu, uint64_t xid, std::optional<unsigned> gi,
                 std::optional<unsigned> ci);
// A single-bit (correctable) or double-bit ECC error: counters and an event; a
// double-bit error also remaps a row (uncorrectable remapped rows).
Status InjectEcc(StateStore& store, unsigned gpu, bool double_bit);
// The GPU falls off the bus: XID 79, then every call on it fails GPU_IS_LOST.
Status MarkGpuLost(StateStore& store, unsigned gpu);
// A GPU reset: applies the pending MIG mode (destroying instances when MIG
// turns off), clears the lost flag, volatile ECC counters and pending remaps,
// and a recovery action of "reset" (not one of "reboot": that takes a driver
// reload, SetDriverLoaded).
Status ResetGpu(StateStore& store, unsigned gpu);
// Keeps `gpu` (or its GPU instance `gi`) busy for `duration_ms` from `now_ms`,
// as a running workload would: what GPM's activity metrics then read.
// NotFound naming the GPU when it has no GPU instance `gi`.
Status AddLoad(StateStore& store, unsigned gpu, std::optional<unsigned> gi, int64_t now_ms,
               int64_t duration_ms);
// The next MIG create on `gpu` after `after` more successful ones fails with
// NVML_ERROR_INSUFFICIENT_RESOURCES (a fault in the middle of an apply).
Status InjectMigCreateFailure(StateStore& store, unsigned gpu, unsigned after);
// Driver unload/load. Unload destroys every MIG instance (they do not survive
// the module); load resets every GPU. nvmlInit fails while unloaded.
Status SetDriverLoaded(StateStore& store, bool loaded);
// Loads the driver at `version` (a driver container's load): all three
// modules. FailedPrecondition when a driver of another version is loaded
// (unload it first); a no-op when this version is.
Status LoadDriver(StateStore& store, const std::string& version);
// The version NVML and CUDA report: the loaded one, else the machine's.
std::string LoadedDriverVersion(const Machine& m, const SimState& s);
// The CUDA version of that driver (12080 for 12.8).
int LoadedCudaVersion(const Machine& m, const SimState& s);

// A process's hold on the driver (an open /dev/nvidia-uvm in a real kernel):
// an exclusive flock on a file in <state dir>/holders, released when the
// process exits however it exits, in whatever container it ran. The CUDA
// simulator takes one with a process's first context.
class DriverHolder {
 public:
  // `what` names the holder in errors ("pid 42 (vector-add)").
  static Result<DriverHolder> Acquire(const std::string& state_dir, const std::string& what);
  DriverHolder(DriverHolder&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
    other.fd_ = -1;
  }
  DriverHolder& operator=(DriverHolder&&) = delete;
  DriverHolder(const DriverHolder&) = delete;
  ~DriverHolder();

 private:
  DriverHolder(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};
// The live holders' names; the files of dead ones are removed.
Result<std::vector<std::string>> LiveDriverHolders(const std::string& state_dir);
// Sets the MIG mode of `gpu` at once (as a mode change followed by a reset)
// and, when enabling, replaces its layout with one GPU instance per entry of
// `profiles` ("1g.10gb", ...; first free placement, in order), each holding
// one compute instance that spans the whole GI. Errors name the GPU, its
// model and the profile; on error nothing changes.
Status SetMigLayout(StateStore& store, unsigned gpu, bool enabled,
                    const std::vector<std::string>& profiles);

// Pure versions of the above, for tests and for composing updates.
Status ApplyXid(const Machine& m, SimState& s, unsigned gpu, uint64_t xid,
                std::optional<unsigned> gi, std::optional<unsigned> ci);
Status ApplyEcc(const Machine& m, SimState& s, unsigned gpu, bool double_bit);
Status ApplyLost(const Machine& m, SimState& s, unsigned gpu);
Status ApplyReset(const Machine& m, SimState& s, unsigned gpu);
Status ApplyLoad(const Machine& m, SimState& s, unsigned gpu, std::optional<unsigned> gi,
                 int64_t now_ms, int64_t duration_ms);
Status ApplyDriverLoaded(const Machine& m, SimState& s, bool loaded);
Status ApplyMigLayout(const Machine& m, SimState& s, unsigned gpu, bool enabled,
                      const std::vector<std::string>& profiles);

}  // namespace gpuop::sim
