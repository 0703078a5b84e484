// libnvml-sim.so: the NVML C ABI (src/nvml/nvml_abi.h) over the simulated
// machine (machine.h), its shared state (state.h), the MIG engine and the
// telemetry model. This file is the thin adapter: it resolves handles, maps
// verdicts to nvmlReturn_t and copies values into the caller's structs.
//
// Thread-safety: like NVML, every function may be called from any thread. One
// process-wide mutex guards the init count, the session and the handle tables;
// it is never held while the state store is read or written (the store has
// its own lock), and never while an event wait sleeps.
//
// Handles are pointers to objects interned for the life of the process, keyed
// by identity (GPU UUID, instance creation serials), so a stale handle is
// recognised and answered with an error rather than dereferenced into freed
// memory. No C++ exception crosses the C ABI.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "nvml/nvml_abi.h"
#include "sim/nvml/driver_env.h"
#include "sim/nvml/gpm.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/mig_engine.h"
#include "sim/nvml/state.h"
#include "sim/nvml/telemetry.h"
#include "sim/nvml/visibility.h"

using gpuop::sim::CiProfile;
using gpuop::sim::CiRecord;
using gpuop::sim::GiProfile;
using gpuop::sim::GiRecord;
using gpuop::sim::GpuModel;
using gpuop::sim::GpuRuntime;
using gpuop::sim::MigVerdict;
using gpuop::sim::SimGpu;
using gpuop::sim::SimState;
using gpuop::sim::StateStore;
using gpuop::sim::Telemetry;

// The handle types the ABI leaves opaque.
struct nvmlDevice_st {
  std::string gpu_uuid;
  unsigned gpu_index = 0;
  bool mig = false;
  unsigned gi_id = 0, ci_id = 0;
  uint64_t gi_serial = 0, ci_serial = 0;
};

struct nvmlGpuInstance_st {
  std::string gpu_uuid;
  unsigned gpu_index = 0;
  unsigned gi_id = 0;
  uint64_t gi_serial = 0;
};

struct nvmlComputeInstance_st {
  std::string gpu_uuid;
  unsigned gpu_index = 0;
  unsigned gi_id = 0, ci_id = 0;
  uint64_t gi_serial = 0, ci_serial = 0;
};

// A GPM sample: when it was taken and how much of the device's time had
// been busy by then (gpm.h).
struct nvmlGpmSample_st {
  bool taken = false;
  unsigned gpu_index = 0;
  std::optional<unsigned> gi_id;  // a MIG GPU instance's sample
  uint64_t gi_serial = 0;
  int64_t unix_ms = 0;
  uint64_t busy_ms = 0;
};

struct nvmlEventSet_st {
  uint64_t cursor = 0;                 // seq of the last event seen
  std::map<unsigned, uint64_t> masks;  // GPU index → registered event types
  bool freed = false;
};

namespace {

constexpr uint64_t kSupportedEvents = nvmlEventTypeSingleBitEccError |
                                      nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
                                      nvmlEventTypeXidCriticalError | nvmlEventTypeClock;

enum class HandleKind { kDevice, kGpuInstance, kComputeInstance, kEventSet };

struct Session {
  std::unique_ptr<StateStore> store;
  // While initialised, a process holds the driver (a real nvmlInit opens
  // /dev/nvidiactl): the module cannot be unloaded under it.
  std::optional<gpuop::sim::DriverHolder> holder;
  // The loaded driver's version and its CUDA version (a driver container may
  // have loaded another than the machine's).
  std::pair<std::string, int> DriverVersions() const {
    auto st = store->Read();
    if (!st.ok()) return {machine().driver_version, machine().cuda_driver_version};
    return {gpuop::sim::LoadedDriverVersion(machine(), **st),
            gpuop::sim::LoadedCudaVersion(machine(), **st)};
  }
  // Machine indices of the GPUs this process sees (visibility.h), fixed at init.
  std::vector<unsigned> visible;
  // What this process may do (driver_env.h), fixed at init.
  gpuop::sim::ProcessEnv env;
  const gpuop::sim::Machine& machine() const { return store->machine(); }
  bool Visible(unsigned index) const {
    return std::find(visible.begin(), visible.end(), index) != visible.end();
  }
};

// Process-wide library state. Never destroyed: threads may still call in while
// the process exits.
struct Library {
  std::mutex mu;
  int init_count = 0;
  std::shared_ptr<Session> session;
  std::map<std::string, std::unique_ptr<nvmlDevice_st>> devices;
  std::map<std::string, std::unique_ptr<nvmlGpuInstance_st>> gis;
  std::map<std::string, std::unique_ptr<nvmlComputeInstance_st>> cis;
  std::vector<std::unique_ptr<nvmlEventSet_st>> event_sets;
  std::map<const void*, HandleKind> valid;  // every handle ever handed out
  std::set<const nvmlGpmSample_st*> gpm_samples;  // allocated and not yet freed
};

Library& Lib() {
  static Library* lib = new Library;
  return *lib;
}

template <typename F>
nvmlReturn_t Guard(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

// A handle's identity: the GPU, and for instances both their IDs and creation
// serials. Serials restart with a fresh state directory, so the IDs must be
// part of the key too, or a re-initialised process would get a handle that
// names another instance.
std::string Key(const std::string& uuid, unsigned gi_id = 0, uint64_t gi_serial = 0,
                unsigned ci_id = 0, uint64_t ci_serial = 0) {
  return uuid + "/" + std::to_string(gi_id) + "." + std::to_string(gi_serial) + "/" +
         std::to_string(ci_id) + "." + std::to_string(ci_serial);
}

// ---- Interning (REQUIRES: nothing locked) -----------------------------------

nvmlDevice_t InternGpu(const SimGpu& gpu) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  auto& slot = lib.devices[Key(gpu.uuid)];
  if (!slot) {
    slot = std::make_unique<nvmlDevice_st>();
    slot->gpu_uuid = gpu.uuid;
    slot->gpu_index = gpu.index;
    lib.valid[slot.get()] = HandleKind::kDevice;
  }
  return slot.get();
}

nvmlDevice_t InternMig(const SimGpu& gpu, const GiRecord& gi, const CiRecord& ci) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  auto& slot = lib.devices[Key(gpu.uuid, gi.id, gi.serial, ci.id, ci.serial)];
  if (!slot) {
    slot = std::make_unique<nvmlDevice_st>();
    slot->gpu_uuid = gpu.uuid;
    slot->gpu_index = gpu.index;
    slot->mig = true;
    slot->gi_id = gi.id;
    slot->ci_id = ci.id;
    slot->gi_serial = gi.serial;
    slot->ci_serial = ci.serial;
    lib.valid[slot.get()] = HandleKind::kDevice;
  }
  return slot.get();
}

nvmlGpuInstance_t InternGi(const SimGpu& gpu, const GiRecord& gi) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  auto& slot = lib.gis[Key(gpu.uuid, gi.id, gi.serial)];
  if (!slot) {
    slot = std::make_unique<nvmlGpuInstance_st>();
    slot->gpu_uuid = gpu.uuid;
    slot->gpu_index = gpu.index;
    slot->gi_id = gi.id;
    slot->gi_serial = gi.serial;
    lib.valid[slot.get()] = HandleKind::kGpuInstance;
  }
  return slot.get();
}

nvmlComputeInstance_t InternCi(const SimGpu& gpu, const GiRecord& gi, const CiRecord& ci) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  auto& slot = lib.cis[Key(gpu.uuid, gi.id, gi.serial, ci.id, ci.serial)];
  if (!slot) {
    slot = std::make_unique<nvmlComputeInstance_st>();
    slot->gpu_uuid = gpu.uuid;
    slot->gpu_index = gpu.index;
    slot->gi_id = gi.id;
    slot->ci_id = ci.id;
    slot->gi_serial = gi.serial;
    slot->ci_serial = ci.serial;
    lib.valid[slot.get()] = HandleKind::kComputeInstance;
  }
  return slot.get();
}

// True for a handle this library handed out as that kind; anything else (null,
// garbage, a GI handle passed as a device) is rejected before use.
bool IsValid(const void* h, HandleKind kind) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  auto it = lib.valid.find(h);
  return h != nullptr && it != lib.valid.end() && it->second == kind;
}
bool IsValidHandle(nvmlDevice_t h) { return IsValid(h, HandleKind::kDevice); }
bool IsValidHandle(nvmlGpuInstance_t h) { return IsValid(h, HandleKind::kGpuInstance); }
bool IsValidHandle(nvmlComputeInstance_t h) { return IsValid(h, HandleKind::kComputeInstance); }
bool IsValidHandle(nvmlEventSet_t h) { return IsValid(h, HandleKind::kEventSet); }

// ---- Resolution -------------------------------------------------------------

nvmlReturn_t GetSession(std::shared_ptr<Session>* out) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  if (!lib.session) return NVML_ERROR_UNINITIALIZED;
  *out = lib.session;
  return NVML_SUCCESS;
}

// NVML_ERROR_DEPRECATED for a symbol GPUOP_SIM_DEPRECATED names: what a later
// driver that dropped it answers. Checked first in the exports that may be.
bool Deprecated(const char* symbol) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  return lib.session && lib.session->env.deprecated.count(symbol) > 0;
}

// The calls the header marks "Requires privileged user": a process that
// cannot open the MIG config capability gets NO_PERMISSION.
nvmlReturn_t RequireMigPrivilege(const Session& s) {
  return s.env.mig_privileged ? NVML_SUCCESS : NVML_ERROR_NO_PERMISSION;
}

nvmlReturn_t ReadState(Session& s, std::shared_ptr<const SimState>* out) {
  auto r = s.store->Read();
  if (!r.ok()) {
    std::fprintf(stderr, "nvml-sim: %s\n", r.status().ToString().c_str());
    return NVML_ERROR_UNKNOWN;
  }
  *out = *r;
  return NVML_SUCCESS;
}

const GiRecord* FindGi(const GpuRuntime& rt, unsigned id, uint64_t serial) {
  for (const auto& gi : rt.gis) {
    if (gi.id == id && (serial == 0 || gi.serial == serial)) return &gi;
  }
  return nullptr;
}

const CiRecord* FindCi(const GiRecord& gi, unsigned id, uint64_t serial) {
  for (const auto& ci : gi.cis) {
    if (ci.id == id && (serial == 0 || ci.serial == serial)) return &ci;
  }
  return nullptr;
}

// Everything a call on one device, GI or CI needs.
struct Ctx {
  std::shared_ptr<Session> session;
  std::shared_ptr<const SimState> state;
  const SimGpu* gpu = nullptr;
  const GpuRuntime* rt = nullptr;
  const GiRecord* gi = nullptr;  // MIG handles, GI and CI handles
  const CiRecord* ci = nullptr;  // MIG handles and CI handles
  const GiProfile* gi_profile = nullptr;
  bool mig = false;  // the device handle is a MIG device
  const GpuModel& model() const { return gpu->model; }
};

nvmlReturn_t ResolveGpuIndex(const std::string& uuid, unsigned index, Ctx* c, bool allow_lost) {
  nvmlReturn_t r = GetSession(&c->session);
  if (r != NVML_SUCCESS) return r;
  const auto& gpus = c->session->machine().gpus;
  if (index >= gpus.size() || gpus[index].uuid != uuid) return NVML_ERROR_INVALID_ARGUMENT;
  c->gpu = &gpus[index];
  r = ReadState(*c->session, &c->state);
  if (r != NVML_SUCCESS) return r;
  c->rt = &c->state->gpus[index];
  if (c->rt->lost && !allow_lost) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}

nvmlReturn_t ResolveInstances(Ctx* c, unsigned gi_id, uint64_t gi_serial, bool want_ci,
                              unsigned ci_id, uint64_t ci_serial) {
  if (!c->rt->mig_current) return NVML_ERROR_NOT_FOUND;
  c->gi = FindGi(*c->rt, gi_id, gi_serial);
  if (c->gi == nullptr) return NVML_ERROR_NOT_FOUND;
  c->gi_profile = c->model().ProfileById(c->gi->profile_id);
  if (c->gi_profile == nullptr) return NVML_ERROR_UNKNOWN;
  if (want_ci) {
    c->ci = FindCi(*c->gi, ci_id, ci_serial);
    if (c->ci == nullptr) return NVML_ERROR_NOT_FOUND;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t ResolveDevice(nvmlDevice_t d, Ctx* c, bool allow_lost = false) {
  {
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (!lib.session) return NVML_ERROR_UNINITIALIZED;
  }
  if (!IsValidHandle(d)) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t r = ResolveGpuIndex(d->gpu_uuid, d->gpu_index, c, allow_lost);
  if (r != NVML_SUCCESS) return r;
  c->mig = d->mig;
  if (d->mig) return ResolveInstances(c, d->gi_id, d->gi_serial, true, d->ci_id, d->ci_serial);
  return NVML_SUCCESS;
}

// A full GPU, not a MIG device.
nvmlReturn_t ResolveGpu(nvmlDevice_t d, Ctx* c, bool allow_lost = false) {
  nvmlReturn_t r = ResolveDevice(d, c, allow_lost);
  if (r != NVML_SUCCESS) return r;
  return c->mig ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

// A getter of one value: resolves the handle (whole GPUs only, or MIG device
// handles too), checks the output pointer, stores what `value` computes.
template <typename T, typename F>
nvmlReturn_t GetOne(nvmlDevice_t device, T* out, bool gpu_only, F&& value) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    nvmlReturn_t r = gpu_only ? ResolveGpu(device, &c) : ResolveDevice(device, &c);
    if (r != NVML_SUCCESS) return r;
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *out = static_cast<T>(value(c));
    return NVML_SUCCESS;
  });
}

nvmlReturn_t ResolveGiHandle(nvmlGpuInstance_t h, Ctx* c) {
  {
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (!lib.session) return NVML_ERROR_UNINITIALIZED;
  }
  if (!IsValidHandle(h)) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t r = ResolveGpuIndex(h->gpu_uuid, h->gpu_index, c, false);
  if (r != NVML_SUCCESS) return r;
  return ResolveInstances(c, h->gi_id, h->gi_serial, false, 0, 0);
}

nvmlReturn_t ResolveCiHandle(nvmlComputeInstance_t h, Ctx* c) {
  {
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (!lib.session) return NVML_ERROR_UNINITIALIZED;
  }
  if (!IsValidHandle(h)) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t r = ResolveGpuIndex(h->gpu_uuid, h->gpu_index, c, false);
  if (r != NVML_SUCCESS) return r;
  return ResolveInstances(c, h->gi_id, h->gi_serial, true, h->ci_id, h->ci_serial);
}

// Runs `fn` as one read-modify-write of the shared state; `fn` returns the
// NVML code and nothing is written unless it is NVML_SUCCESS.
template <typename F>
nvmlReturn_t UpdateState(Session& session, F&& fn) {
  nvmlReturn_t rc = NVML_SUCCESS;
  gpuop::Status s = session.store->Update([&](SimState& st) -> gpuop::Status {
    rc = fn(st);
    return rc == NVML_SUCCESS ? gpuop::Status::Ok()
                              : gpuop::Status(gpuop::StatusCode::kFailedPrecondition, "rejected");
  });
  if (rc != NVML_SUCCESS) return rc;
  if (!s.ok()) {
    std::fprintf(stderr, "nvml-sim: %s\n", s.ToString().c_str());
    return NVML_ERROR_UNKNOWN;
  }
  return NVML_SUCCESS;
}

nvmlReturn_t VerdictToReturn(MigVerdict v) {
  switch (v) {
    case MigVerdict::kOk:
      return NVML_SUCCESS;
    case MigVerdict::kNotSupported:
      return NVML_ERROR_NOT_SUPPORTED;
    case MigVerdict::kInvalid:
      return NVML_ERROR_INVALID_ARGUMENT;
    case MigVerdict::kNoRoom:
      return NVML_ERROR_INSUFFICIENT_RESOURCES;
    case MigVerdict::kNotFound:
      return NVML_ERROR_NOT_FOUND;
  }
  return NVML_ERROR_UNKNOWN;
}

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned int length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

Telemetry Sample(const Ctx& c) {
  double seconds = static_cast<double>(gpuop::NowUnixMillis() - c.state->created_unix_ms) / 1000.0;
  return gpuop::sim::SampleTelemetry(c.model(), c.gpu->index, std::max(0.0, seconds));
}

std::string MigUuid(const Ctx& c) {
  return "MIG-" +
         gpuop::sim::HashUuid(c.gpu->uuid + "/" + std::to_string(c.gi->id) + "/" +
                              std::to_string(c.ci->id) + "/" + std::to_string(c.ci->serial));
}

std::string MigName(const Ctx& c) {
  return c.model().name + " MIG " +
         gpuop::sim::MigDeviceProfileName(c.model(), *c.gi_profile, c.ci->slices);
}

// MIG devices of a GPU in (GI id, CI id) order.
std::vector<std::pair<const GiRecord*, const CiRecord*>> MigDevices(const GpuRuntime& rt) {
  std::vector<std::pair<const GiRecord*, const CiRecord*>> out;
  if (!rt.mig_current) return out;
  for (const auto& gi : rt.gis) {
    for (const auto& ci : gi.cis) out.emplace_back(&gi, &ci);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.first->id, a.second->id) < std::make_pair(b.first->id, b.second->id);
  });
  return out;
}

void FillPci(const SimGpu& gpu, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof(*pci));
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  std::sscanf(gpu.bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = dev;
  pci->pciDeviceId = gpu.model.pci_device_id;
  pci->pciSubSystemId = gpu.model.pci_subsystem_id;
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", gpu.bus_id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", domain & 0xFFFF,
                bus, dev, fn);
}

// Normalises "0000:18:00.0" and "00000000:18:00.0" (any case) for comparison.
bool ParseBusId(const char* s, unsigned out[4]) {
  char tail = 0;
  return std::sscanf(s, "%x:%x:%x.%x%c", &out[0], &out[1], &out[2], &out[3], &tail) == 4;
}

}  // namespace

extern "C" {

// Not NVIDIA's: marks this library as gpuop's simulator, so a tool can name
// the simulator's own commands (gpuop sim gpu reset) instead of nvidia-smi's.
int gpuopSimulated(void) { return 1; }

// Not NVIDIA's: GPM samples allocated and not yet freed in this process, so
// tests can hold a GPM user to freeing what it allocates.
int gpuopSimGpmSamples(void) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  return static_cast<int>(lib.gpm_samples.size());
}

// ---- Library ----------------------------------------------------------------

nvmlReturn_t nvmlInit_v2(void) {
  return Guard([]() -> nvmlReturn_t {
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (lib.init_count > 0) {
      ++lib.init_count;
      return NVML_SUCCESS;
    }
    const char* driver = std::getenv("GPUOP_SIM_DRIVER");
    if (driver != nullptr && std::strcmp(driver, "unloaded") == 0) {
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    auto store = gpuop::sim::OpenStateFromEnv(false);
    if (!store.ok()) {
      std::fprintf(stderr, "nvml-sim: cannot start the simulated driver: %s\n",
                   store.status().message().c_str());
      return NVML_ERROR_UNKNOWN;
    }
    auto state = (*store)->Read();
    if (!state.ok()) {
      std::fprintf(stderr, "nvml-sim: cannot start the simulated driver: %s\n",
                   state.status().message().c_str());
      return NVML_ERROR_UNKNOWN;
    }
    if (!(*state)->driver_loaded) return NVML_ERROR_DRIVER_NOT_LOADED;
    auto session = std::make_shared<Session>();
    session->store = std::move(store).value();
    if (session->store->shared()) {
      auto h = gpuop::sim::DriverHolder::Acquire(
          session->store->dir(),
          "pid " + std::to_string(::getpid()) + " (" + program_invocation_short_name + ", NVML)");
      if (!h.ok()) {
        std::fprintf(stderr, "nvml-sim: %s\n", h.status().ToString().c_str());
        return NVML_ERROR_UNKNOWN;
      }
      session->holder.emplace(std::move(h).value());
    }
    session->visible = gpuop::sim::VisibleGpusFromEnv(session->machine());
    auto env = gpuop::sim::ProcessEnvFromEnv();
    if (!env.ok()) {
      std::fprintf(stderr, "nvml-sim: cannot start the simulated driver: %s\n",
                   env.status().message().c_str());
      return NVML_ERROR_UNKNOWN;
    }
    session->env = std::move(env).value();
    lib.session = std::move(session);
    lib.init_count = 1;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) { return nvmlInit_v2(); }

nvmlReturn_t nvmlShutdown(void) {
  return Guard([]() -> nvmlReturn_t {
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (lib.init_count == 0) return NVML_ERROR_UNINITIALIZED;
    if (--lib.init_count == 0) lib.session.reset();
    return NVML_SUCCESS;
  });
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
      return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
      return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
      return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
      return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
      return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
      return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE:
      return "In use by another client";
    case NVML_ERROR_MEMORY:
      return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
      return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "The requested vgpu operation is not available on target device, because ECC is "
             "enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return "Ran out of critical resources, other than memory";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
      return "Ran out of critical resources, other than memory";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
      return "The requested functionality has been deprecated";
    case NVML_ERROR_NOT_READY:
      return "The system is not ready for the request";
    case NVML_ERROR_GPU_NOT_FOUND:
      return "The GPU could not be found";
    case NVML_ERROR_INVALID_STATE:
      return "The GPU is in an invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
      return "The reset type is not supported";
    case NVML_ERROR_UNKNOWN:
      return "Unknown Error";
  }
  return "Unknown Error";
}

// ---- System -----------------------------------------------------------------

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    return CopyString(s->DriverVersions().first, version, length);
  });
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    // NVML's version is the CUDA major version followed by the driver version.
    auto [driver, cuda] = s->DriverVersions();
    std::string v = std::to_string(cuda / 1000) + "." + driver;
    return CopyString(v, version, length);
  });
}

// The header: without libcuda.so.1 this one answers "a known supported
// version" (the driver's), while _v2, which asks libcuda, answers
// LIBRARY_NOT_FOUND.
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = s->DriverVersions().second;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (s->env.libcuda_absent) return NVML_ERROR_LIBRARY_NOT_FOUND;
    *cudaDriverVersion = s->DriverVersions().second;
    return NVML_SUCCESS;
  });
}

// ---- Enumeration ------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = static_cast<unsigned>(s->visible.size());
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    if (device == nullptr || index >= s->visible.size()) return NVML_ERROR_INVALID_ARGUMENT;
    // Counted but not to be opened (GPUOP_SIM_DENY_GPUS), as the header allows.
    if (s->env.denied_gpus.count(s->visible[index]) > 0) return NVML_ERROR_NO_PERMISSION;
    *device = InternGpu(s->machine().gpus[s->visible[index]]);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (const auto& g : s->machine().gpus) {
      if (g.uuid == uuid && s->Visible(g.index)) {
        if (s->env.denied_gpus.count(g.index) > 0) return NVML_ERROR_NO_PERMISSION;
        *device = InternGpu(g);
        return NVML_SUCCESS;
      }
    }
    if (std::strncmp(uuid, "MIG-", 4) != 0) return NVML_ERROR_NOT_FOUND;
    std::shared_ptr<const SimState> state;
    if (nvmlReturn_t r = ReadState(*s, &state); r != NVML_SUCCESS) return r;
    for (const auto& g : s->machine().gpus) {
      if (!s->Visible(g.index)) continue;
      Ctx c;
      c.session = s;
      c.state = state;
      c.gpu = &g;
      for (const auto& [gi, ci] : MigDevices(state->gpus[g.index])) {
        c.gi = gi;
        c.ci = ci;
        if (MigUuid(c) == uuid) {
          *device = InternMig(g, *gi, *ci);
          return NVML_SUCCESS;
        }
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    unsigned want[4];
    if (pciBusId == nullptr || device == nullptr || !ParseBusId(pciBusId, want)) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (const auto& g : s->machine().gpus) {
      unsigned have[4];
      if (ParseBusId(g.bus_id.c_str(), have) && std::equal(have, have + 4, want) &&
          s->Visible(g.index)) {
        if (s->env.denied_gpus.count(g.index) > 0) return NVML_ERROR_NO_PERMISSION;
        *device = InternGpu(g);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

// ---- Device information -----------------------------------------------------

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    return CopyString(c.mig ? MigName(c) : c.model().name, name, length);
  });
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    // The UUID stays readable on a lost GPU so that callers can say which one it is.
    if (nvmlReturn_t r = ResolveDevice(device, &c, true); r != NVML_SUCCESS) return r;
    return CopyString(c.mig ? MigUuid(c) : c.gpu->uuid, uuid, length);
  });
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (c.mig) return NVML_ERROR_NOT_SUPPORTED;
    return CopyString(c.gpu->serial, serial, length);
  });
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (c.mig) return NVML_ERROR_NOT_SUPPORTED;
    if (minorNumber == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = c.gpu->minor;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c, true); r != NVML_SUCCESS) return r;
    if (c.mig) return NVML_ERROR_NOT_SUPPORTED;
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // The enumeration index: the position among the GPUs this process sees.
    const auto& visible = c.session->visible;
    auto it = std::find(visible.begin(), visible.end(), c.gpu->index);
    *index = it == visible.end() ? c.gpu->index : static_cast<unsigned>(it - visible.begin());
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    FillPci(*c.gpu, pci);
    return NVML_SUCCESS;
  });
}

}  // extern "C"

namespace {

struct MemoryView {
  unsigned long long total, reserved, used, free;
};

MemoryView Memory(const Ctx& c) {
  Telemetry t = Sample(c);
  if (!c.mig) return {t.fb_total_bytes, t.fb_reserved_bytes, t.fb_used_bytes, t.fb_free_bytes};
  // A MIG device sees its GI's memory, used in proportion to the GPU's load.
  const unsigned long long total = c.gi_profile->memory_mib << 20;
  const unsigned long long reserved = (c.gi_profile->memory_mib / 100) << 20;
  const auto used =
      static_cast<unsigned long long>((total - reserved) * 0.5 * t.load) & ~0xFFFFFULL;
  return {total, reserved, used, total - reserved - used};
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (Deprecated("nvmlDeviceGetMemoryInfo")) return NVML_ERROR_DEPRECATED;
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    MemoryView m = Memory(c);
    memory->total = m.total;
    memory->used = m.used + m.reserved;  // v1 counts the driver's share as used
    memory->free = m.free;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    MemoryView m = Memory(c);
    memory->total = m.total;
    memory->reserved = m.reserved;
    memory->used = m.used;
    memory->free = m.free;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *major = c.model().cc_major;
    *minor = c.model().cc_minor;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  return GetOne(device, type, /*gpu_only=*/false,
                [&](const Ctx& c) { return static_cast<nvmlBrandType_t>(c.model().brand); });
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  return GetOne(device, arch, /*gpu_only=*/false,
                [&](const Ctx& c) { return c.model().architecture; });
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  return GetOne(device, node, /*gpu_only=*/false,
                [&](const Ctx& c) { return static_cast<unsigned>(c.gpu->numa_node); });
}

// ---- Fabric -----------------------------------------------------------------

}  // extern "C"

namespace {

// What nvmlDeviceGetGpuFabricInfo* report for a whole GPU: NOT_SUPPORTED for a
// model without a fabric; NOT_STARTED for a fabric-capable GPU no fabric
// manager registered; COMPLETED/SUCCESS with the cluster and clique otherwise.
template <typename Info>
nvmlReturn_t FillFabric(nvmlDevice_t device, Info* info) {
  Ctx c;
  if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!c.model().fabric_capable) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info->clusterUuid, 0, sizeof(info->clusterUuid));
  info->cliqueId = 0;
  info->status = NVML_SUCCESS;
  info->state = NVML_GPU_FABRIC_STATE_NOT_STARTED;
  if (c.gpu->fabric) {
    if (!gpuop::sim::ParseUuidBytes(c.gpu->fabric->cluster_uuid, info->clusterUuid)) {
      return NVML_ERROR_UNKNOWN;  // machine.cc validated it
    }
    info->cliqueId = c.gpu->fabric->clique_id;
    info->state = NVML_GPU_FABRIC_STATE_COMPLETED;
  }
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t* gpuFabricInfo) {
  if (Deprecated("nvmlDeviceGetGpuFabricInfo")) return NVML_ERROR_DEPRECATED;
  return Guard([&]() -> nvmlReturn_t { return FillFabric(device, gpuFabricInfo); });
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t* gpuFabricInfo) {
  return Guard([&]() -> nvmlReturn_t {
    if (gpuFabricInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // The caller's version decides the layout; v2 is 4 bytes shorter, so
    // nothing past it may be written.
    if (gpuFabricInfo->version == nvmlGpuFabricInfo_v2) {
      auto* v2 = reinterpret_cast<nvmlGpuFabricInfo_v2_t*>(gpuFabricInfo);
      nvmlReturn_t r = FillFabric(device, v2);
      if (r == NVML_SUCCESS) v2->healthMask = 0;
      return r;
    }
    if (gpuFabricInfo->version == nvmlGpuFabricInfo_v3) {
      nvmlReturn_t r = FillFabric(device, gpuFabricInfo);
      if (r == NVML_SUCCESS) {
        gpuFabricInfo->healthMask = 0;
        gpuFabricInfo->healthSummary = 0;  // NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED
      }
      return r;
    }
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  });
}

// ---- Topology ---------------------------------------------------------------

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t* pathInfo) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx a, b;
    if (nvmlReturn_t r = ResolveGpu(device1, &a); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = ResolveGpu(device2, &b); r != NVML_SUCCESS) return r;
    if (pathInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *pathInfo = static_cast<nvmlGpuTopologyLevel_t>(
        gpuop::sim::TopologyLevel(a.session->machine(), a.gpu->index, b.gpu->index));
    return NVML_SUCCESS;
  });
}

}  // extern "C"

namespace {

// Resolves `device` and its active link `link`; NOT_SUPPORTED for a GPU
// without NVLink, INVALID_ARGUMENT past its last link.
nvmlReturn_t ResolveLink(nvmlDevice_t device, unsigned link, Ctx* c,
                         const gpuop::sim::SimNvLink** out) {
  if (nvmlReturn_t r = ResolveGpu(device, c); r != NVML_SUCCESS) return r;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& links = c->gpu->nvlinks;
  if (links.empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *out = &links[link];
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* isActive) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (isActive == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    if (c.gpu->nvlinks.empty()) return NVML_ERROR_NOT_SUPPORTED;
    // The link slots past the wired ones exist but are down.
    *isActive = link < c.gpu->nvlinks.size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    const gpuop::sim::SimNvLink* l = nullptr;
    if (nvmlReturn_t r = ResolveLink(device, link, &c, &l); r != NVML_SUCCESS) return r;
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& m = c.session->machine();
    if (!l->to_switch) {
      FillPci(m.gpus[l->remote], pci);
      return NVML_SUCCESS;
    }
    // The far end is an NVSwitch: its own PCI function, as on HGX boards.
    std::memset(pci, 0, sizeof(*pci));
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    std::sscanf(m.nvswitches[l->remote].c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = c.model().architecture == NVML_DEVICE_ARCH_HOPPER ? 0x22A310DE : 0x1AF110DE;
    std::snprintf(pci->busId, sizeof(pci->busId), "%s", m.nvswitches[l->remote].c_str());
    std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", domain & 0xFFFF,
                  bus, dev, fn);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t* pNvLinkDeviceType) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    const gpuop::sim::SimNvLink* l = nullptr;
    if (nvmlReturn_t r = ResolveLink(device, link, &c, &l); r != NVML_SUCCESS) return r;
    if (pNvLinkDeviceType == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *pNvLinkDeviceType =
        l->to_switch ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
  });
}

// ---- Telemetry --------------------------------------------------------------

}  // extern "C"

namespace {

// Telemetry is per physical GPU: MIG handles get NOT_SUPPORTED, as on hardware.
template <typename F>
nvmlReturn_t WithTelemetry(nvmlDevice_t device, F&& fn) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (c.mig) return NVML_ERROR_NOT_SUPPORTED;
    return fn(c, Sample(c));
  });
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int* temp) {
  if (Deprecated("nvmlDeviceGetTemperature")) return NVML_ERROR_DEPRECATED;
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (temp == nullptr || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = t.gpu_temp_c;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t* temperature) {
  {
    // The entry point came with the 565 branch: an older loaded driver
    // answers as a library without the symbol would leave the caller.
    std::shared_ptr<Session> s;
    if (GetSession(&s) == NVML_SUCCESS &&
        !gpuop::sim::DriverHasTemperatureV(s->DriverVersions().first)) {
      return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
  }
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (temperature == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (temperature->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    temperature->temperature = static_cast<int>(t.gpu_temp_c);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  return WithTelemetry(device, [&](const Ctx& c, const Telemetry& t) -> nvmlReturn_t {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (c.rt->mig_current) return NVML_ERROR_NOT_SUPPORTED;  // like hardware in MIG mode
    utilization->gpu = t.gpu_util;
    utilization->memory = t.memory_util;
    // A CUDA kernel ran within the last sample period (libcuda-sim.so).
    if (c.rt->last_kernel_unix_ms > 0 &&
        gpuop::NowUnixMillis() - c.rt->last_kernel_unix_ms < gpuop::sim::kKernelBusyWindowMs) {
      utilization->gpu = 100;
    }
    return NVML_SUCCESS;
  });
}

// The processes holding a CUDA context on the GPU (libcuda-sim.so records them).
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& procs = c.rt->processes;
    const unsigned room = *infoCount;
    *infoCount = static_cast<unsigned>(procs.size());
    if (room < procs.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
    if (procs.empty()) return NVML_SUCCESS;
    if (infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < procs.size(); ++i) {
      infos[i].pid = procs[i].pid;
      infos[i].usedGpuMemory = procs[i].used_bytes;
      infos[i].gpuInstanceId = 0xFFFFFFFFu;  // not a MIG device
      infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* samplingPeriodUs) {
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (utilization == nullptr || samplingPeriodUs == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *utilization = t.encoder_util;
    *samplingPeriodUs = 167000;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* samplingPeriodUs) {
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (utilization == nullptr || samplingPeriodUs == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *utilization = t.decoder_util;
    *samplingPeriodUs = 167000;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *power = t.power_mw;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit) {
  return WithTelemetry(device, [&](const Ctx& c, const Telemetry&) -> nvmlReturn_t {
    if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *limit = c.model().power_limit_w * 1000;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (energy == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *energy = t.energy_mj;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int* clock) {
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        *clock = t.sm_clock_mhz;
        return NVML_SUCCESS;
      case NVML_CLOCK_MEM:
        *clock = t.mem_clock_mhz;
        return NVML_SUCCESS;
      case NVML_CLOCK_VIDEO:
        *clock = t.video_clock_mhz;
        return NVML_SUCCESS;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
  });
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int* clock) {
  return WithTelemetry(device, [&](const Ctx& c, const Telemetry&) -> nvmlReturn_t {
    if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        *clock = c.model().max_sm_clock_mhz;
        return NVML_SUCCESS;
      case NVML_CLOCK_MEM:
        *clock = c.model().max_mem_clock_mhz;
        return NVML_SUCCESS;
      case NVML_CLOCK_VIDEO:
        *clock = c.model().max_sm_clock_mhz * 9 / 10;
        return NVML_SUCCESS;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
  });
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                  nvmlEnableState_t* pending) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = NVML_FEATURE_ENABLED;  // every simulated model runs with ECC on
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long* eccCounts) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (eccCounts == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& e = c.rt->ecc;
    const bool vol = counterType == NVML_VOLATILE_ECC;
    if (!vol && counterType != NVML_AGGREGATE_ECC) return NVML_ERROR_INVALID_ARGUMENT;
    if (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED) {
      *eccCounts = vol ? e.sbe_volatile : e.sbe_aggregate;
    } else if (errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED) {
      *eccCounts = vol ? e.dbe_volatile : e.dbe_aggregate;
    } else {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                       unsigned int* uncRows, unsigned int* isPending,
                                       unsigned int* failureOccurred) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (!corrRows || !uncRows || !isPending || !failureOccurred) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (c.model().architecture < NVML_DEVICE_ARCH_AMPERE) return NVML_ERROR_NOT_SUPPORTED;
    *corrRows = c.rt->remapped_correctable;
    *uncRows = c.rt->remapped_uncorrectable;
    *isPending = c.rt->remap_pending ? 1 : 0;
    *failureOccurred = 0;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  return GetOne(device, value, /*gpu_only=*/true, [&](const Ctx& c) { return c.rt->pcie_replays; });
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int* value) {
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (value == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (counter == NVML_PCIE_UTIL_TX_BYTES) {
      *value = t.pcie_tx_kbps;
    } else if (counter == NVML_PCIE_UTIL_RX_BYTES) {
      *value = t.pcie_rx_kbps;
    } else {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* clocksEventReasons) {
  return WithTelemetry(device, [&](const Ctx&, const Telemetry& t) -> nvmlReturn_t {
    if (clocksEventReasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *clocksEventReasons = t.clock_event_reasons;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* clocksThrottleReasons) {
  if (Deprecated("nvmlDeviceGetCurrentClocksThrottleReasons")) return NVML_ERROR_DEPRECATED;
  return nvmlDeviceGetCurrentClocksEventReasons(device, clocksThrottleReasons);
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t* values) {
  return WithTelemetry(device, [&](const Ctx& c, const Telemetry& t) -> nvmlReturn_t {
    if (valuesCount < 0 || (valuesCount > 0 && values == nullptr)) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    const long long now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    const unsigned links = c.model().nvlinks;
    for (int i = 0; i < valuesCount; ++i) {
      nvmlFieldValue_t& v = values[i];
      v.timestamp = now_us;
      v.latencyUsec = 0;
      v.nvmlReturn = NVML_SUCCESS;
      switch (v.fieldId) {
        case NVML_FI_DEV_MEMORY_TEMP:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
          v.value.uiVal = t.memory_temp_c;
          break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX: {
          if (links == 0) {
            v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            break;
          }
          if (v.scopeId != UINT_MAX && v.scopeId >= links) {
            v.nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
            break;
          }
          const bool tx = v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ||
                          v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX;
          const bool raw = v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX ||
                           v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX;
          unsigned long long kib = tx ? t.nvlink_tx_kib : t.nvlink_rx_kib;
          if (raw) kib += kib / 16;  // protocol overhead on the wire
          if (v.scopeId == UINT_MAX) kib *= links;
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
          v.value.ullVal = kib;
          break;
        }
        case NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
          v.value.uiVal = c.rt->recovery_action;
          break;
        default:
          v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
          break;
      }
    }
    return NVML_SUCCESS;
  });
}

// ---- MIG mode and MIG devices ----------------------------------------------

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                  unsigned int* pendingMode) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!c.model().mig_capable()) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = c.rt->mig_current ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pendingMode = c.rt->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t* activationStatus) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (!c.model().mig_capable()) return NVML_ERROR_NOT_SUPPORTED;
    if (mode != NVML_DEVICE_MIG_DISABLE && mode != NVML_DEVICE_MIG_ENABLE) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    const unsigned index = c.gpu->index;
    const bool enable = mode == NVML_DEVICE_MIG_ENABLE;
    nvmlReturn_t activation = NVML_SUCCESS;
    nvmlReturn_t r = UpdateState(*c.session, [&](SimState& s) -> nvmlReturn_t {
      GpuRuntime& g = s.gpus[index];
      if (g.lost) return NVML_ERROR_GPU_IS_LOST;
      if (mode == NVML_DEVICE_MIG_DISABLE && !g.gis.empty()) return NVML_ERROR_IN_USE;
      if (enable == g.mig_current) {  // nothing to activate (or a pending change withdrawn)
        g.mig_pending = enable;
        return NVML_SUCCESS;
      }
      // A process holding the GPU blocks the change: the call succeeds, the
      // modes stay, and the activation status says why.
      if (!g.processes.empty()) {
        activation = NVML_ERROR_IN_USE;
        return NVML_SUCCESS;
      }
      g.mig_pending = enable;
      activation = NVML_ERROR_RESET_REQUIRED;
      return NVML_SUCCESS;
    });
    if (r != NVML_SUCCESS) return r;
    if (activationStatus != nullptr) *activationStatus = activation;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return GetOne(device, count, /*gpu_only=*/true, [&](const Ctx& c) {
    return c.model().mig_capable() ? c.model().compute_slices : 0;
  });
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* migDevice) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (migDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!c.model().mig_capable()) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= c.model().compute_slices) return NVML_ERROR_INVALID_ARGUMENT;
    auto devices = MigDevices(*c.rt);
    if (index >= devices.size()) return NVML_ERROR_NOT_FOUND;
    *migDevice = InternMig(*c.gpu, *devices[index].first, *devices[index].second);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t* device) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(migDevice, &c); r != NVML_SUCCESS) return r;
    if (!c.mig || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *device = InternGpu(*c.gpu);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) {
  return Guard([&]() -> nvmlReturn_t {
    if (isMigDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    {
      Library& lib = Lib();
      std::lock_guard<std::mutex> l(lib.mu);
      if (!lib.session) return NVML_ERROR_UNINITIALIZED;
    }
    if (!IsValidHandle(device)) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = device->mig ? 1 : 0;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (!c.mig || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *id = c.gi->id;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (!c.mig || id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *id = c.ci->id;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t* attributes) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (attributes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::memset(attributes, 0, sizeof(*attributes));
    if (!c.mig) {
      const GpuModel& m = c.model();
      attributes->multiprocessorCount = m.multiprocessors;
      attributes->sharedEncoderCount = m.encoders;
      attributes->memorySizeMB = m.memory_mib;
      if (const GiProfile* full = m.ProfileByNvmlIndex(NVML_GPU_INSTANCE_PROFILE_7_SLICE)) {
        attributes->sharedCopyEngineCount = full->copy_engines;
        attributes->sharedDecoderCount = full->decoders;
        attributes->sharedJpegCount = full->jpegs;
        attributes->sharedOfaCount = full->ofas;
      }
      return NVML_SUCCESS;
    }
    const GiProfile& p = *c.gi_profile;
    attributes->multiprocessorCount = p.multiprocessors * c.ci->slices / p.slices;
    attributes->sharedCopyEngineCount = p.copy_engines;
    attributes->sharedDecoderCount = p.decoders;
    attributes->sharedEncoderCount = p.encoders;
    attributes->sharedJpegCount = p.jpegs;
    attributes->sharedOfaCount = p.ofas;
    attributes->gpuInstanceSliceCount = p.slices;
    attributes->computeInstanceSliceCount = c.ci->slices;
    attributes->memorySizeMB = p.memory_mib;
    return NVML_SUCCESS;
  });
}

// ---- GPU instances ----------------------------------------------------------

}  // extern "C"

namespace {

void FillGiProfileInfo(const GiProfile& p, nvmlGpuInstanceProfileInfo_t* info) {
  std::memset(info, 0, sizeof(*info));
  info->id = p.id;
  info->isP2pSupported = 0;
  info->sliceCount = p.slices;
  info->instanceCount = p.max_count;
  info->multiprocessorCount = p.multiprocessors;
  info->copyEngineCount = p.copy_engines;
  info->decoderCount = p.decoders;
  info->encoderCount = p.encoders;
  info->jpegCount = p.jpegs;
  info->ofaCount = p.ofas;
  info->memorySizeMB = p.memory_mib;
}

// A MIG-capable physical GPU and the GI profile with enum index `profile`.
// The GI profile indices the loaded driver knows: enumeration ends at the
// first index past them (INVALID_ARGUMENT), as the header prescribes.
unsigned KnownGiProfiles(const Ctx& c) {
  return gpuop::sim::GiProfileCountForDriver(
      gpuop::sim::LoadedDriverVersion(c.session->machine(), *c.state));
}

nvmlReturn_t ResolveProfileByIndex(nvmlDevice_t device, unsigned profile, Ctx* c,
                                   const GiProfile** out) {
  if (nvmlReturn_t r = ResolveGpu(device, c); r != NVML_SUCCESS) return r;
  if (!c->model().mig_capable()) return NVML_ERROR_NOT_SUPPORTED;
  if (profile >= KnownGiProfiles(*c)) return NVML_ERROR_INVALID_ARGUMENT;
  *out = c->model().ProfileByNvmlIndex(profile);
  return *out ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

// A MIG-capable physical GPU and the GI profile with driver id `profile_id`.
nvmlReturn_t ResolveProfileById(nvmlDevice_t device, unsigned profile_id, Ctx* c,
                                const GiProfile** out, bool need_mig_enabled) {
  if (nvmlReturn_t r = ResolveGpu(device, c); r != NVML_SUCCESS) return r;
  if (!c->model().mig_capable()) return NVML_ERROR_NOT_SUPPORTED;
  if (need_mig_enabled && !c->rt->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  *out = c->model().ProfileById(profile_id);
  // A profile of a kind the loaded driver predates does not exist for it.
  if (*out != nullptr && (*out)->nvml_index >= KnownGiProfiles(*c)) *out = nullptr;
  return *out ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

// The fault of sim::InjectMigCreateFailure: counts down the creates it lets
// through and fails the next one.
bool TakeInjectedCreateFailure(GpuRuntime& g) {
  if (g.mig_create_fails_after < 0) return false;
  if (g.mig_create_fails_after > 0) {
    --g.mig_create_fails_after;
    return false;
  }
  g.mig_create_fails_after = -1;
  return true;
}

nvmlReturn_t CreateGi(nvmlDevice_t device, unsigned profile_id,
                      const nvmlGpuInstancePlacement_t* placement, nvmlGpuInstance_t* out) {
  Ctx c;
  const GiProfile* profile = nullptr;
  if (nvmlReturn_t r = ResolveProfileById(device, profile_id, &c, &profile, true);
      r != NVML_SUCCESS) {
    return r;
  }
  if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::optional<unsigned> start;
  if (placement != nullptr) {
    if (placement->size != profile->placement_size) return NVML_ERROR_INVALID_ARGUMENT;
    start = placement->start;
  }
  const unsigned index = c.gpu->index;
  const GpuModel& model = c.model();
  GiRecord created;
  nvmlReturn_t r = UpdateState(*c.session, [&](SimState& s) -> nvmlReturn_t {
    GpuRuntime& g = s.gpus[index];
    if (g.lost) return NVML_ERROR_GPU_IS_LOST;
    if (!g.mig_current) return NVML_ERROR_NOT_SUPPORTED;
    if (TakeInjectedCreateFailure(g)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
    MigVerdict v = gpuop::sim::PlanGpuInstance(model, g.gis, *profile, start, &created);
    if (v != MigVerdict::kOk) return VerdictToReturn(v);
    ++g.mig_creates;
    created.serial = s.next_serial++;
    auto pos = std::lower_bound(g.gis.begin(), g.gis.end(), created.id,
                                [](const GiRecord& a, unsigned id) { return a.id < id; });
    g.gis.insert(pos, created);
    return NVML_SUCCESS;
  });
  if (r != NVML_SUCCESS) return r;
  *out = InternGi(*c.gpu, created);
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    const GiProfile* p = nullptr;
    if (nvmlReturn_t r = ResolveProfileByIndex(device, profile, &c, &p); r != NVML_SUCCESS) {
      return r;
    }
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    FillGiProfileInfo(*p, info);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    const GiProfile* p = nullptr;
    if (nvmlReturn_t r = ResolveProfileByIndex(device, profile, &c, &p); r != NVML_SUCCESS) {
      return r;
    }
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlGpuInstanceProfileInfo_v2) {
      return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    nvmlGpuInstanceProfileInfo_t v1;
    FillGiProfileInfo(*p, &v1);
    info->id = v1.id;
    info->isP2pSupported = v1.isP2pSupported;
    info->sliceCount = v1.sliceCount;
    info->instanceCount = v1.instanceCount;
    info->multiprocessorCount = v1.multiprocessorCount;
    info->copyEngineCount = v1.copyEngineCount;
    info->decoderCount = v1.decoderCount;
    info->encoderCount = v1.encoderCount;
    info->jpegCount = v1.jpegCount;
    info->ofaCount = v1.ofaCount;
    info->memorySizeMB = v1.memorySizeMB;
    std::memset(info->name, 0, sizeof(info->name));
    std::snprintf(info->name, sizeof(info->name), "MIG %s", p->name.c_str());
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    const GiProfile* p = nullptr;
    if (nvmlReturn_t r = ResolveProfileById(device, profileId, &c, &p, false); r != NVML_SUCCESS) {
      return r;
    }
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned>(p->placement_starts.size());
    if (placements != nullptr) {
      for (size_t i = 0; i < p->placement_starts.size(); ++i) {
        placements[i].start = p->placement_starts[i];
        placements[i].size = p->placement_size;
      }
    }
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int* count) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    const GiProfile* p = nullptr;
    if (nvmlReturn_t r = ResolveProfileById(device, profileId, &c, &p, true); r != NVML_SUCCESS) {
      return r;
    }
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpuop::sim::GpuInstanceRemainingCapacity(c.model(), c.rt->gis, *p);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                         nvmlGpuInstance_t* gpuInstance) {
  return Guard([&]() { return CreateGi(device, profileId, nullptr, gpuInstance); });
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* gpuInstance) {
  return Guard([&]() -> nvmlReturn_t {
    if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return CreateGi(device, profileId, placement, gpuInstance);
  });
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t* gpuInstances, unsigned int* count) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    const GiProfile* p = nullptr;
    if (nvmlReturn_t r = ResolveProfileById(device, profileId, &c, &p, true); r != NVML_SUCCESS) {
      return r;
    }
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // Like NVML, the buffer must hold the profile's instanceCount; count is output only.
    unsigned n = 0;
    for (const auto& gi : c.rt->gis) {
      if (gi.profile_id != profileId) continue;
      if (gpuInstances != nullptr) gpuInstances[n] = InternGi(*c.gpu, gi);
      ++n;
    }
    *count = n;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t* gpuInstance) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGpu(device, &c); r != NVML_SUCCESS) return r;
    if (gpuInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!c.model().mig_capable() || !c.rt->mig_current) return NVML_ERROR_NOT_SUPPORTED;
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    const GiRecord* gi = FindGi(*c.rt, id, 0);
    if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
    *gpuInstance = InternGi(*c.gpu, *gi);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t* info) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGiHandle(gpuInstance, &c); r != NVML_SUCCESS) return r;
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    info->device = InternGpu(*c.gpu);
    info->id = c.gi->id;
    info->profileId = c.gi->profile_id;
    info->placement.start = c.gi->start;
    info->placement.size = c.gi->size;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGiHandle(gpuInstance, &c); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    const unsigned index = c.gpu->index, id = c.gi->id;
    const uint64_t serial = c.gi->serial;
    return UpdateState(*c.session, [&](SimState& s) -> nvmlReturn_t {
      auto& gis = s.gpus[index].gis;
      auto it = std::find_if(gis.begin(), gis.end(),
                             [&](const GiRecord& g) { return g.id == id && g.serial == serial; });
      if (it == gis.end()) return NVML_ERROR_NOT_FOUND;
      if (!it->cis.empty()) return NVML_ERROR_IN_USE;
      gis.erase(it);
      ++s.gpus[index].mig_destroys;
      return NVML_SUCCESS;
    });
  });
}

// ---- Compute instances ------------------------------------------------------

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGiHandle(gpuInstance, &c); r != NVML_SUCCESS) return r;
    if (info == nullptr || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) return NVML_ERROR_NOT_SUPPORTED;
    auto p = gpuop::sim::CiProfileFor(*c.gi_profile, profile);
    if (!p) return NVML_ERROR_NOT_SUPPORTED;
    info->id = p->nvml_index;
    info->sliceCount = p->slices;
    info->instanceCount = p->instance_count;
    info->multiprocessorCount = p->multiprocessors;
    info->sharedCopyEngineCount = c.gi_profile->copy_engines;
    info->sharedDecoderCount = c.gi_profile->decoders;
    info->sharedEncoderCount = c.gi_profile->encoders;
    info->sharedJpegCount = c.gi_profile->jpegs;
    info->sharedOfaCount = c.gi_profile->ofas;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId,
                                                                unsigned int* count) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGiHandle(gpuInstance, &c); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpuop::sim::CiProfileFor(*c.gi_profile, profileId)) return NVML_ERROR_NOT_SUPPORTED;
    *count = gpuop::sim::ComputeInstanceRemainingCapacity(*c.gi_profile, *c.gi, profileId);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t* computeInstance) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGiHandle(gpuInstance, &c); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    if (computeInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const unsigned index = c.gpu->index, gi_id = c.gi->id;
    const uint64_t gi_serial = c.gi->serial;
    const GiProfile& gi_profile = *c.gi_profile;
    GiRecord gi_after;
    CiRecord created;
    nvmlReturn_t r = UpdateState(*c.session, [&](SimState& s) -> nvmlReturn_t {
      GpuRuntime& g = s.gpus[index];
      if (g.lost) return NVML_ERROR_GPU_IS_LOST;
      auto it = std::find_if(g.gis.begin(), g.gis.end(), [&](const GiRecord& x) {
        return x.id == gi_id && x.serial == gi_serial;
      });
      if (it == g.gis.end()) return NVML_ERROR_NOT_FOUND;
      if (TakeInjectedCreateFailure(g)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
      MigVerdict v = gpuop::sim::PlanComputeInstance(gi_profile, *it, profileId, &created);
      if (v != MigVerdict::kOk) return VerdictToReturn(v);
      ++g.mig_creates;
      created.serial = s.next_serial++;
      auto pos = std::lower_bound(it->cis.begin(), it->cis.end(), created.id,
                                  [](const CiRecord& a, unsigned id) { return a.id < id; });
      it->cis.insert(pos, created);
      gi_after = *it;
      return NVML_SUCCESS;
    });
    if (r != NVML_SUCCESS) return r;
    *computeInstance = InternCi(*c.gpu, gi_after, created);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t* computeInstances,
                                                unsigned int* count) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGiHandle(gpuInstance, &c); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpuop::sim::CiProfileFor(*c.gi_profile, profileId)) return NVML_ERROR_NOT_SUPPORTED;
    unsigned n = 0;
    for (const auto& ci : c.gi->cis) {
      if (ci.profile != profileId) continue;
      if (computeInstances != nullptr) computeInstances[n] = InternCi(*c.gpu, *c.gi, ci);
      ++n;
    }
    *count = n;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t* computeInstance) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveGiHandle(gpuInstance, &c); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    if (computeInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const CiRecord* ci = FindCi(*c.gi, id, 0);
    if (ci == nullptr) return NVML_ERROR_NOT_FOUND;
    *computeInstance = InternCi(*c.gpu, *c.gi, *ci);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t* info) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveCiHandle(computeInstance, &c); r != NVML_SUCCESS) return r;
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    info->device = InternGpu(*c.gpu);
    info->gpuInstance = InternGi(*c.gpu, *c.gi);
    info->id = c.ci->id;
    info->profileId = c.ci->profile;
    info->placement.start = c.ci->start;
    info->placement.size = c.ci->slices;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveCiHandle(computeInstance, &c); r != NVML_SUCCESS) return r;
    if (nvmlReturn_t r = RequireMigPrivilege(*c.session); r != NVML_SUCCESS) return r;
    const unsigned index = c.gpu->index, gi_id = c.gi->id, ci_id = c.ci->id;
    const uint64_t gi_serial = c.gi->serial, ci_serial = c.ci->serial;
    return UpdateState(*c.session, [&](SimState& s) -> nvmlReturn_t {
      auto& gis = s.gpus[index].gis;
      auto gi = std::find_if(gis.begin(), gis.end(), [&](const GiRecord& g) {
        return g.id == gi_id && g.serial == gi_serial;
      });
      if (gi == gis.end()) return NVML_ERROR_NOT_FOUND;
      auto ci = std::find_if(gi->cis.begin(), gi->cis.end(), [&](const CiRecord& x) {
        return x.id == ci_id && x.serial == ci_serial;
      });
      if (ci == gi->cis.end()) return NVML_ERROR_NOT_FOUND;
      gi->cis.erase(ci);
      ++s.gpus[index].mig_destroys;
      return NVML_SUCCESS;
    });
  });
}

// ---- Events -----------------------------------------------------------------

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> s;
    if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
    if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::shared_ptr<const SimState> state;
    if (nvmlReturn_t r = ReadState(*s, &state); r != NVML_SUCCESS) return r;
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    auto es = std::make_unique<nvmlEventSet_st>();
    es->cursor = state->last_seq;  // a set sees only what happens after it exists
    *set = es.get();
    lib.valid[es.get()] = HandleKind::kEventSet;
    lib.event_sets.push_back(std::move(es));
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes) {
  return GetOne(device, eventTypes, /*gpu_only=*/false,
                [](const Ctx&) { return kSupportedEvents; });
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (!IsValidHandle(set)) return NVML_ERROR_INVALID_ARGUMENT;
    if ((eventTypes & ~kSupportedEvents) != 0) return NVML_ERROR_NOT_SUPPORTED;
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (set->freed) return NVML_ERROR_INVALID_ARGUMENT;
    // A MIG handle registers its parent: events carry the GI/CI ids.
    set->masks[c.gpu->index] |= eventTypes;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeoutms) {
  return Guard([&]() -> nvmlReturn_t {
    if (data == nullptr || !IsValidHandle(set)) return NVML_ERROR_INVALID_ARGUMENT;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutms);
    for (;;) {
      std::shared_ptr<Session> s;
      if (nvmlReturn_t r = GetSession(&s); r != NVML_SUCCESS) return r;
      std::shared_ptr<const SimState> state;
      if (nvmlReturn_t r = ReadState(*s, &state); r != NVML_SUCCESS) return r;
      const gpuop::sim::SimEvent* hit = nullptr;
      {
        Library& lib = Lib();
        std::lock_guard<std::mutex> l(lib.mu);
        if (set->freed) return NVML_ERROR_INVALID_ARGUMENT;
        for (const auto& e : state->events) {
          if (e.seq <= set->cursor) continue;
          set->cursor = e.seq;  // consumed, whether or not this set wants it
          auto m = set->masks.find(e.gpu);
          if (m != set->masks.end() && (m->second & e.type) != 0 &&
              e.gpu < s->machine().gpus.size()) {
            hit = &e;
            break;
          }
        }
      }
      if (hit != nullptr) {
        data->device = InternGpu(s->machine().gpus[hit->gpu]);
        data->eventType = hit->type;
        data->eventData = hit->data;
        data->gpuInstanceId = hit->gi;
        data->computeInstanceId = hit->ci;
        return NVML_SUCCESS;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return NVML_ERROR_TIMEOUT;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(10), deadline - now));
    }
  });
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  return Guard([&]() -> nvmlReturn_t {
    if (!IsValidHandle(set)) return NVML_ERROR_INVALID_ARGUMENT;
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (!lib.session) return NVML_ERROR_UNINITIALIZED;
    if (set->freed) return NVML_ERROR_INVALID_ARGUMENT;
    set->freed = true;  // kept, so that a late Wait on another thread fails cleanly
    set->masks.clear();
    return NVML_SUCCESS;
  });
}

// ---- GPM (gpm.h) ---------------------------------------------------------------

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* gpmSupport) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (gpmSupport == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION) {
      return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    gpmSupport->isSupportedDevice = gpuop::sim::GpmSupported(c.model()) ? 1 : 0;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* gpmSample) {
  return Guard([&]() -> nvmlReturn_t {
    if (gpmSample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (!lib.session) return NVML_ERROR_UNINITIALIZED;
    auto* sample = new nvmlGpmSample_st;
    lib.gpm_samples.insert(sample);
    gpmSample->handle = sample;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample) {
  return Guard([&]() -> nvmlReturn_t {
    Library& lib = Lib();
    std::lock_guard<std::mutex> l(lib.mu);
    if (lib.gpm_samples.erase(gpmSample.handle) == 0) return NVML_ERROR_INVALID_ARGUMENT;
    delete gpmSample.handle;
    return NVML_SUCCESS;
  });
}

namespace {

bool IsLiveSample(const nvmlGpmSample_t& s) {
  Library& lib = Lib();
  std::lock_guard<std::mutex> l(lib.mu);
  return lib.gpm_samples.contains(s.handle);
}

// Records the busy account of `busy` in `out` now.
nvmlReturn_t TakeSample(const Ctx& c, const gpuop::sim::BusyTime& busy,
                        std::optional<unsigned> gi_id, uint64_t gi_serial, nvmlGpmSample_st* out) {
  const int64_t now = gpuop::NowUnixMillis();
  out->taken = true;
  out->gpu_index = c.gpu->index;
  out->gi_id = gi_id;
  out->gi_serial = gi_serial;
  out->unix_ms = now;
  out->busy_ms = gpuop::sim::BusyMsAt(busy, now);
  return NVML_SUCCESS;
}

}  // namespace

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (!IsLiveSample(gpmSample)) return NVML_ERROR_INVALID_ARGUMENT;
    // A MIG device is sampled through its parent (nvmlGpmMigSampleGet).
    if (c.mig || !gpuop::sim::GpmSupported(c.model())) return NVML_ERROR_NOT_SUPPORTED;
    return TakeSample(c, c.rt->busy, std::nullopt, 0, gpmSample.handle);
  });
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample) {
  return Guard([&]() -> nvmlReturn_t {
    Ctx c;
    if (nvmlReturn_t r = ResolveDevice(device, &c); r != NVML_SUCCESS) return r;
    if (!IsLiveSample(gpmSample)) return NVML_ERROR_INVALID_ARGUMENT;
    if (c.mig || !gpuop::sim::GpmSupported(c.model())) return NVML_ERROR_NOT_SUPPORTED;
    if (!c.rt->mig_current) return NVML_ERROR_NOT_FOUND;
    for (const GiRecord& gi : c.rt->gis) {
      if (gi.id == gpuInstanceId) return TakeSample(c, gi.busy, gi.id, gi.serial, gpmSample.handle);
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* metricsGet) {
  return Guard([&]() -> nvmlReturn_t {
    std::shared_ptr<Session> session;
    if (nvmlReturn_t r = GetSession(&session); r != NVML_SUCCESS) return r;
    if (metricsGet == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION) {
      return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    if (metricsGet->numMetrics > NVML_GPM_METRIC_MAX) return NVML_ERROR_INVALID_ARGUMENT;
    if (!IsLiveSample(metricsGet->sample1) || !IsLiveSample(metricsGet->sample2)) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    const nvmlGpmSample_st& a = *metricsGet->sample1.handle;
    const nvmlGpmSample_st& b = *metricsGet->sample2.handle;
    // Both taken, of the same device (a GPU instance re-created under the
    // same id is another device), the first before the second.
    if (!a.taken || !b.taken || a.gpu_index != b.gpu_index || a.gi_id != b.gi_id ||
        a.gi_serial != b.gi_serial || b.unix_ms < a.unix_ms) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    const auto& gpus = session->machine().gpus;
    if (a.gpu_index >= gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
    const int64_t span = b.unix_ms - a.unix_ms;
    const double share =
        span > 0 ? static_cast<double>(b.busy_ms - std::min(a.busy_ms, b.busy_ms)) / span : 0.0;
    for (unsigned i = 0; i < metricsGet->numMetrics; ++i) {
      nvmlGpmMetric_t& m = metricsGet->metrics[i];
      auto v = gpuop::sim::GpmMetricValue(m.metricId, share, gpus[a.gpu_index].model,
                                          a.gi_id.has_value());
      m.nvmlReturn = v ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
      m.value = v.value_or(0);
      m.metricInfo = {nullptr, nullptr, nullptr};
    }
    return NVML_SUCCESS;
  });
}

}  // extern "C"
