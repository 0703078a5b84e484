// Client: gpuop's one way to talk to the GPUs.
//
// Open() loads an NVML library (the driver's libnvidia-ml.so.1, or the
// simulator; see library.h), initialises it, and the Client then answers in
// the plain C++ model of device.h: GPUs, MIG devices and profiles, telemetry,
// MIG changes and events. Every failure is a Status naming the GPU and the
// NVML call; a function an old driver lacks gives NotSupported "too old".
// GPUs are addressed by NVML index (0..count-1), as nvidia-smi does.
//
// Ownership: the Client owns the library and its nvmlInit; destroying it
// calls nvmlShutdown (an EventWatcher keeps the library alive until it, too,
// is gone). Threads: every method may be called from any thread at the same
// time, as NVML itself is thread-safe; the Client keeps no mutable state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "nvml/device.h"

struct nvmlDevice_st;
struct nvmlEventSet_st;

namespace gpuop::nvml {

class Library;
class EventWatcher;
class GpmSampler;

// Whether a failure to open or describe one GPU means "skip that GPU"
// (no permission for it, or lost) rather than "NVML is unusable". For
// callers that loop over GpuCount() themselves, as Gpus() does.
bool SkippableGpuError(const Status& s);

class Client {
 public:
  // `library_path`: a path or soname ("libnvidia-ml.so.1" for the driver).
  // Fails with one clear line when the library cannot be loaded, lacks a
  // required function, or the driver is not loaded.
  static Result<std::unique_ptr<Client>> Open(const std::string& library_path);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& library_path() const;
  // The library is gpuop's simulator (hints then name its commands).
  bool simulated() const;

  // A value the driver cannot give is left empty (the CUDA version on a node
  // without libcuda.so.1, say); only NVML itself failing is an error.
  Result<SystemInfo> System() const;
  Result<unsigned> GpuCount() const;
  // All GPUs, each with its MIG devices. A GPU this process may not open
  // (NVML_ERROR_NO_PERMISSION) or that is lost is skipped with a warning, so
  // indices may have gaps (Gpu::index is NVML's); an error only when every
  // GPU failed, or for a failure that is not about one GPU.
  Result<std::vector<Gpu>> Gpus() const;
  // One GPU. A process without MIG privilege still gets its MIG devices,
  // without their placement (see MigDevice).
  Result<Gpu> GpuByIndex(unsigned gpu) const;

  // The processes using `gpu` (pid, name where /proc tells it).
  Result<std::vector<GpuProcess>> Processes(unsigned gpu) const;

  // One reading of every telemetry field (nullopt where not supported).
  Result<Telemetry> ReadTelemetry(unsigned gpu) const;
  // The same for MIG device `mig_index` of `gpu` (NVML supports few fields there).
  Result<Telemetry> ReadMigTelemetry(unsigned gpu, unsigned mig_index) const;

  // ---- Topology ----
  // Where GPUs `a` and `b` meet on PCIe (nvmlDeviceGetTopologyCommonAncestor).
  Result<TopologyLevel> CommonAncestor(unsigned a, unsigned b) const;
  // The active NVLinks of `gpu`, each with its far end resolved to a GPU
  // index where it is one of ours. Empty for a GPU without NVLink.
  Result<std::vector<NvLink>> NvLinks(unsigned gpu) const;
  // The GPUs `gpu` reaches over NVLink, directly or through NVSwitches (see
  // NvLinkPeer); reads the links of every GPU when `gpu` has switch links.
  Result<std::vector<NvLinkPeer>> NvLinkPeers(unsigned gpu) const;

  // ---- Health ----
  // One probe of `gpu`: whether it answers NVML and the recovery evidence of
  // GpuHealth. A lost GPU gives responds=false, not an error; an error means
  // the probe itself could not run (no such GPU, NVML not initialised).
  Result<GpuHealth> ReadHealth(unsigned gpu) const;

  // ---- Fabric ----
  // The GPU fabric (NVLink domain) of `gpu`, also in Gpu::fabric. nullopt
  // when the GPU has none (NVML_ERROR_NOT_SUPPORTED or state NOT_SUPPORTED)
  // or the driver predates nvmlDeviceGetGpuFabricInfo: never an error for
  // that. Uses nvmlDeviceGetGpuFabricInfoV (v3, then v2), else the
  // unversioned call.
  Result<std::optional<GpuFabric>> FabricInfo(unsigned gpu) const;

  // ---- MIG ----
  // The GPU instance profiles; empty when MIG is disabled (NVML lists
  // profiles only in MIG mode). NotSupported on a GPU without MIG.
  Result<std::vector<GiProfile>> GiProfiles(unsigned gpu) const;
  // Compute instance profiles of GPU instance `gi_id`.
  Result<std::vector<CiProfile>> CiProfiles(unsigned gpu, unsigned gi_id) const;
  // Requests MIG mode on or off. The change says whether the mode is in
  // force, waits for a GPU reset, or could not be activated because
  // processes use the GPU (listed in it): such a GPU must not be reset.
  // MIG management calls refused for want of privilege are PermissionDenied
  // saying how to grant it (the MIG capability device nodes).
  Result<MigModeChange> SetMigMode(unsigned gpu, bool enabled) const;
  // Existing GPU instances with their compute instances, ordered by GI id.
  Result<std::vector<GpuInstance>> GpuInstances(unsigned gpu) const;
  // Creates a GI of driver profile id `profile_id` (GiProfile::id), at
  // `placement` when given. Returns the new GI (without CIs).
  Result<GpuInstance> CreateGpuInstance(unsigned gpu, unsigned profile_id,
                                        std::optional<Placement> placement = std::nullopt) const;
  Status DestroyGpuInstance(unsigned gpu, unsigned gi_id) const;
  // Creates a CI of NVML compute profile `ci_profile_index`
  // (NVML_COMPUTE_INSTANCE_PROFILE_*, see CiProfileIndexForSlices) in GI `gi_id`.
  Result<ComputeInstance> CreateComputeInstance(unsigned gpu, unsigned gi_id,
                                                unsigned ci_profile_index) const;
  Status DestroyComputeInstance(unsigned gpu, unsigned gi_id, unsigned ci_id) const;

  // ---- Events ----
  Result<std::unique_ptr<EventWatcher>> NewEventWatcher() const;

  // ---- Profiling (GPM) ----
  // A sampler of GPM metrics (gpm.h); it keeps the library alive as long as it lives.
  std::unique_ptr<GpmSampler> NewGpmSampler() const;

 private:
  explicit Client(std::shared_ptr<Library> lib) : lib_(std::move(lib)) {}

  Result<nvmlDevice_st*> Handle(unsigned gpu) const;
  Result<Gpu> Describe(unsigned gpu, nvmlDevice_st* dev) const;
  Result<std::vector<MigDevice>> MigDevices(unsigned gpu, nvmlDevice_st* dev,
                                            const std::string& object) const;
  Result<Telemetry> Read(nvmlDevice_st* dev, const std::string& object, bool mig) const;

  std::shared_ptr<Library> lib_;
};

// Waits for NVML events (XIDs, ECC errors, ...) on registered GPUs.
//
// Owns one NVML event set, freed on destruction. Register() may be called
// from any thread; Wait() from one thread at a time (it blocks in NVML and
// holds no lock while it does, so Register may run meanwhile).
class EventWatcher {
 public:
  ~EventWatcher();
  EventWatcher(const EventWatcher&) = delete;
  EventWatcher& operator=(const EventWatcher&) = delete;

  // Registers `gpu` for the types in `mask` (EventType bits) that it
  // supports; returns the mask actually registered. NotSupported when the GPU
  // supports none of them.
  Result<uint64_t> Register(unsigned gpu, uint64_t mask);

  // The next event, or nullopt when `timeout_ms` passes without one.
  Result<std::optional<Event>> Wait(unsigned timeout_ms);

 private:
  friend class Client;
  struct Registered {
    unsigned index;
    std::string uuid;
  };
  EventWatcher(std::shared_ptr<Library> lib, nvmlEventSet_st* set)
      : lib_(std::move(lib)), set_(set) {}

  std::shared_ptr<Library> lib_;
  nvmlEventSet_st* set_;
  Mutex mu_;
  std::unordered_map<nvmlDevice_st*, Registered> gpus_ GPUOP_GUARDED_BY(mu_);
};

}  // namespace gpuop::nvml
