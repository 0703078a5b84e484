#include "nvml/client.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "nvml/library.h"

namespace gpuop::nvml {
namespace {

constexpr unsigned kNoInstance = 0xFFFFFFFFu;

// GPU and compute instance profile indices run from 0 until NVML answers
// NVML_ERROR_INVALID_ARGUMENT (the header's rule: a newer driver knows more
// than our NVML_*_PROFILE_COUNT); the bound only guards against a library
// that never says so.
constexpr unsigned kMaxProfileIndices = 64;

// What a process without MIG privilege is told when NVML refuses a MIG call.
constexpr char kMigPrivilegeHint[] =
    "this process lacks MIG management privilege: give it the MIG capability device nodes "
    "/dev/nvidia-caps/nvidia-cap1 (config) and /dev/nvidia-caps/nvidia-cap2 (monitor) (in a "
    "container: NVIDIA_MIG_CONFIG_DEVICES=all and NVIDIA_MIG_MONITOR_DEVICES=all), or run it "
    "privileged";

Status MigPrivilege(Status s) {
  if (s.code() != StatusCode::kPermissionDenied) return s;
  return Status(s.code(), s.message() + ": " + kMigPrivilegeHint);
}

// NVML return codes that mean "this GPU or driver does not have this value":
// a telemetry field is then left empty instead of failing the whole read.
bool Absent(nvmlReturn_t ret, bool mig) {
  switch (ret) {
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_NO_PERMISSION:
    case NVML_ERROR_NO_DATA:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_DEPRECATED:  // a driver that dropped the call
      return true;
    case NVML_ERROR_INVALID_ARGUMENT:
      // Several device queries reject a MIG handle as an invalid argument.
      return mig;
    default:
      return false;
  }
}

// Calls an optional telemetry function: true when it filled its outputs,
// false when the value is absent, an error status otherwise.
template <typename F, typename... Args>
Result<bool> TryRead(const Library& lib, const Fn<F>& f, const std::string& object, bool mig,
                     Args... args) {
  if (!f) return false;
  nvmlReturn_t ret = f.ptr(args...);
  if (ret == NVML_SUCCESS) return true;
  if (Absent(ret, mig)) return false;
  return lib.Error(ret, object, f.symbol);
}

template <typename F, typename... Args>
Result<std::string> ReadString(const Library& lib, const Fn<F>& f, const std::string& object,
                               Args... args) {
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  GPUOP_RETURN_IF_ERROR(lib.Call(f, object, args..., buf, unsigned{sizeof(buf)}));
  buf[sizeof(buf) - 1] = '\0';
  return std::string(buf);
}

std::optional<uint64_t> FieldValueU64(const nvmlFieldValue_t& v) {
  if (v.nvmlReturn != NVML_SUCCESS) return std::nullopt;
  switch (v.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return v.value.dVal < 0 ? 0 : static_cast<uint64_t>(v.value.dVal);
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return v.value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return v.value.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return v.value.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return v.value.sllVal < 0 ? 0 : static_cast<uint64_t>(v.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return v.value.siVal < 0 ? 0 : v.value.siVal;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
      return v.value.usVal;
  }
  return std::nullopt;
}

std::string GpuObject(unsigned gpu, const std::string& uuid) {
  std::string s = "GPU " + std::to_string(gpu);
  if (!uuid.empty()) s += " (" + uuid + ")";
  return s;
}

// "GPU 3 (GPU-5d5b...)" for messages; just "GPU 3" when even the UUID fails
// (the call that follows will report why).
std::string ObjectFor(const Library& lib, unsigned gpu, nvmlDevice_t dev) {
  auto uuid = ReadString(lib, lib.fn().DeviceGetUUID, "", dev);
  return GpuObject(gpu, uuid.ok() ? *uuid : std::string());
}

// "7c3a0f5e-1b2d-4e6f-8a9b-0c1d2e3f4a5b": the 16 bytes as a standard UUID.
std::string FormatFabricUuid(const unsigned char (&b)[NVML_GPU_FABRIC_UUID_LEN]) {
  char out[40];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

template <typename Info>
GpuFabric FabricFrom(const Info& info) {
  GpuFabric f;
  f.cluster_uuid = FormatFabricUuid(info.clusterUuid);
  f.clique_id = info.cliqueId;
  f.state = static_cast<FabricState>(info.state);
  f.status = static_cast<int>(info.status);
  return f;
}

// The fabric of `dev`; nullopt where there is none to report (see
// Client::FabricInfo).
Result<std::optional<GpuFabric>> ReadFabric(const Library& lib, nvmlDevice_t dev,
                                            const std::string& object) {
  const Functions& fn = lib.fn();
  nvmlReturn_t ret = NVML_ERROR_FUNCTION_NOT_FOUND;
  const char* symbol = fn.DeviceGetGpuFabricInfoV.symbol;
  GpuFabric f;
  if (fn.DeviceGetGpuFabricInfoV) {
    nvmlGpuFabricInfo_v3_t v3{};
    v3.version = nvmlGpuFabricInfo_v3;
    ret = fn.DeviceGetGpuFabricInfoV.ptr(dev, &v3);
    if (ret == NVML_SUCCESS) f = FabricFrom(v3);
    if (ret == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
      // A driver that knows only v2: same fields, the v2 struct (and tag).
      nvmlGpuFabricInfo_v2_t v2{};
      v2.version = nvmlGpuFabricInfo_v2;
      ret = fn.DeviceGetGpuFabricInfoV.ptr(dev, reinterpret_cast<nvmlGpuFabricInfoV_t*>(&v2));
      if (ret == NVML_SUCCESS) f = FabricFrom(v2);
    }
  }
  if (ret == NVML_ERROR_FUNCTION_NOT_FOUND && fn.DeviceGetGpuFabricInfo) {
    nvmlGpuFabricInfo_t v1{};
    symbol = fn.DeviceGetGpuFabricInfo.symbol;
    ret = fn.DeviceGetGpuFabricInfo.ptr(dev, &v1);
    if (ret == NVML_SUCCESS) f = FabricFrom(v1);
  }
  if (ret != NVML_SUCCESS) {
    // No fabric on this GPU, or a driver without the call.
    if (Absent(ret, /*mig=*/false)) return std::optional<GpuFabric>();
    return lib.Error(ret, object, symbol);
  }
  if (f.state == FabricState::kNotSupported) return std::optional<GpuFabric>();
  return std::optional<GpuFabric>(std::move(f));
}

// The GPU temperature: nvmlDeviceGetTemperatureV (13.0 deprecates the
// unversioned call), else nvmlDeviceGetTemperature on a driver without it or
// that does not take our struct version.
Result<std::optional<unsigned>> ReadGpuTemperature(const Library& lib, nvmlDevice_t dev,
                                                   const std::string& object, bool mig) {
  const Functions& fn = lib.fn();
  if (fn.DeviceGetTemperatureV) {
    nvmlTemperature_t t{};
    t.version = nvmlTemperature_v1;
    t.sensorType = NVML_TEMPERATURE_GPU;
    nvmlReturn_t ret = fn.DeviceGetTemperatureV.ptr(dev, &t);
    if (ret == NVML_SUCCESS) return std::optional<unsigned>(t.temperature < 0 ? 0 : t.temperature);
    if (ret != NVML_ERROR_FUNCTION_NOT_FOUND && ret != NVML_ERROR_NOT_SUPPORTED &&
        ret != NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
      if (Absent(ret, mig)) return std::optional<unsigned>();
      return lib.Error(ret, object, fn.DeviceGetTemperatureV.symbol);
    }
  }
  unsigned u = 0;
  GPUOP_ASSIGN_OR_RETURN(
      bool ok, TryRead(lib, fn.DeviceGetTemperature, object, mig, dev, NVML_TEMPERATURE_GPU, &u));
  return ok ? std::optional<unsigned>(u) : std::optional<unsigned>();
}

// Everything about one GPU that the MIG calls need.
struct MigContext {
  nvmlDevice_t dev = nullptr;
  std::string object;
  uint64_t total_bytes = 0;
  std::vector<GiProfile> profiles;

  const GiProfile* ProfileById(unsigned id) const {
    for (const auto& p : profiles) {
      if (p.id == id) return &p;
    }
    return nullptr;
  }
};

Result<uint64_t> TotalMemoryBytes(const Library& lib, nvmlDevice_t dev, const std::string& object) {
  nvmlMemory_t mem{};
  GPUOP_RETURN_IF_ERROR(lib.Call(lib.fn().DeviceGetMemoryInfo, object, dev, &mem));
  return static_cast<uint64_t>(mem.total);
}

// Current and pending MIG mode; NotSupported (with a clear message) on a GPU
// without MIG, and the "driver too old" status when NVML lacks MIG.
Result<std::pair<bool, bool>> MigMode(const Library& lib, nvmlDevice_t dev,
                                      const std::string& object) {
  const auto& f = lib.fn().DeviceGetMigMode;
  if (!f) return lib.Missing(f.symbol, f.feature);
  unsigned current = 0, pending = 0;
  nvmlReturn_t ret = f.ptr(dev, &current, &pending);
  if (ret == NVML_ERROR_NOT_SUPPORTED) {
    auto name = ReadString(lib, lib.fn().DeviceGetName, object, dev);
    return NotSupported(object + (name.ok() ? " (" + *name + ")" : std::string()) +
                        " does not support MIG");
  }
  if (ret != NVML_SUCCESS) return lib.Error(ret, object, f.symbol);
  return std::make_pair(current == NVML_DEVICE_MIG_ENABLE, pending == NVML_DEVICE_MIG_ENABLE);
}

Result<std::vector<GiProfile>> ListGiProfiles(const Library& lib, nvmlDevice_t dev,
                                              const std::string& object, uint64_t total_bytes) {
  const Functions& fn = lib.fn();
  std::vector<GiProfile> out;
  for (unsigned idx = 0; idx < kMaxProfileIndices; ++idx) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    nvmlReturn_t ret = NVML_ERROR_FUNCTION_NOT_FOUND;
    const char* symbol = fn.DeviceGetGpuInstanceProfileInfoV.symbol;
    if (fn.DeviceGetGpuInstanceProfileInfoV) {
      ret = fn.DeviceGetGpuInstanceProfileInfoV.ptr(dev, idx, &info);
    }
    if (ret == NVML_ERROR_FUNCTION_NOT_FOUND || ret == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
      // Older drivers: the v1 struct holds the same numbers without the name.
      const auto& v1 = fn.DeviceGetGpuInstanceProfileInfo;
      if (!v1) return lib.Missing(v1.symbol, v1.feature);
      nvmlGpuInstanceProfileInfo_t old{};
      symbol = v1.symbol;
      ret = v1.ptr(dev, idx, &old);
      info.id = old.id;
      info.isP2pSupported = old.isP2pSupported;
      info.sliceCount = old.sliceCount;
      info.instanceCount = old.instanceCount;
      info.multiprocessorCount = old.multiprocessorCount;
      info.copyEngineCount = old.copyEngineCount;
      info.decoderCount = old.decoderCount;
      info.encoderCount = old.encoderCount;
      info.jpegCount = old.jpegCount;
      info.ofaCount = old.ofaCount;
      info.memorySizeMB = old.memorySizeMB;
    }
    if (ret == NVML_ERROR_INVALID_ARGUMENT) break;  // past the driver's last profile index
    // This GPU has no such profile (or MIG is off): not an error.
    if (ret == NVML_ERROR_NOT_SUPPORTED || ret == NVML_ERROR_NOT_FOUND) continue;
    if (ret != NVML_SUCCESS) return lib.Error(ret, object, symbol);

    GiProfile p;
    p.index = idx;
    p.id = info.id;
    p.slices = info.sliceCount;
    p.max_count = info.instanceCount;
    p.multiprocessors = info.multiprocessorCount;
    p.engines = {info.copyEngineCount, info.decoderCount, info.encoderCount, info.jpegCount,
                 info.ofaCount};
    p.memory_mib = info.memorySizeMB;
    p.p2p = info.isP2pSupported != 0;
    p.name = MigProfileName(p.slices, p.slices, p.memory_mib, total_bytes, idx);

    const auto& pl = fn.DeviceGetGpuInstancePossiblePlacements;
    if (pl) {
      nvmlGpuInstancePlacement_t buf[32] = {};
      unsigned count = 32;
      nvmlReturn_t pret = pl.ptr(dev, p.id, buf, &count);
      if (pret == NVML_SUCCESS) {
        for (unsigned i = 0; i < std::min(count, 32u); ++i) {
          p.placements.push_back({buf[i].start, buf[i].size});
        }
      } else if (pret != NVML_ERROR_NOT_SUPPORTED && pret != NVML_ERROR_NO_PERMISSION) {
        // Without MIG privilege the profile is listed without its placements.
        return lib.Error(pret, object, pl.symbol);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

Result<MigContext> MigSetup(const Library& lib, nvmlDevice_t dev, const std::string& object) {
  MigContext ctx;
  ctx.dev = dev;
  ctx.object = object;
  GPUOP_ASSIGN_OR_RETURN(ctx.total_bytes, TotalMemoryBytes(lib, dev, object));
  GPUOP_ASSIGN_OR_RETURN(ctx.profiles, ListGiProfiles(lib, dev, object, ctx.total_bytes));
  return ctx;
}

Result<nvmlGpuInstance_t> GiById(const Library& lib, const MigContext& ctx, unsigned gi_id) {
  const auto& f = lib.fn().DeviceGetGpuInstanceById;
  if (!f) return lib.Missing(f.symbol, f.feature);
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t ret = f.ptr(ctx.dev, gi_id, &gi);
  if (ret == NVML_ERROR_NOT_FOUND || ret == NVML_ERROR_INVALID_ARGUMENT) {
    return NotFound(ctx.object + " has no GPU instance " + std::to_string(gi_id));
  }
  if (ret != NVML_SUCCESS) return MigPrivilege(lib.Error(ret, ctx.object, f.symbol));
  return gi;
}

Result<GpuInstance> DescribeGi(const Library& lib, const MigContext& ctx, nvmlGpuInstance_t gi) {
  nvmlGpuInstanceInfo_t info{};
  GPUOP_RETURN_IF_ERROR(lib.Call(lib.fn().GpuInstanceGetInfo, ctx.object, gi, &info));
  GpuInstance out;
  out.id = info.id;
  out.profile_id = info.profileId;
  out.placement = {info.placement.start, info.placement.size};
  if (const GiProfile* p = ctx.ProfileById(info.profileId)) {
    out.profile_index = p->index;
    out.profile_name = p->name;
  }
  return out;
}

Result<ComputeInstance> DescribeCi(const Library& lib, const MigContext& ctx, const GpuInstance& gi,
                                   nvmlComputeInstance_t ci, unsigned ci_slices) {
  nvmlComputeInstanceInfo_t info{};
  GPUOP_RETURN_IF_ERROR(lib.Call(lib.fn().ComputeInstanceGetInfo, ctx.object, ci, &info));
  ComputeInstance out;
  out.id = info.id;
  out.profile_id = info.profileId;
  out.placement = {info.placement.start, info.placement.size};
  out.slices = ci_slices;
  if (const GiProfile* p = ctx.ProfileById(gi.profile_id)) {
    out.profile_name =
        MigProfileName(ci_slices, p->slices, p->memory_mib, ctx.total_bytes, p->index);
  }
  return out;
}

// Compute instance profiles of one GI (NVML lists them per GI).
Result<std::vector<CiProfile>> ListCiProfiles(const Library& lib, const MigContext& ctx,
                                              nvmlGpuInstance_t gi) {
  const auto& f = lib.fn().GpuInstanceGetComputeInstanceProfileInfo;
  if (!f) return lib.Missing(f.symbol, f.feature);
  std::vector<CiProfile> out;
  for (unsigned idx = 0; idx < kMaxProfileIndices; ++idx) {
    nvmlComputeInstanceProfileInfo_t info{};
    nvmlReturn_t ret = f.ptr(gi, idx, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
    if (ret == NVML_ERROR_INVALID_ARGUMENT) break;  // past the driver's last profile index
    if (ret == NVML_ERROR_NOT_SUPPORTED || ret == NVML_ERROR_NOT_FOUND) continue;
    if (ret != NVML_SUCCESS) return lib.Error(ret, ctx.object, f.symbol);
    out.push_back({idx, info.id, info.sliceCount, info.instanceCount, info.multiprocessorCount});
  }
  return out;
}

Result<std::vector<ComputeInstance>> ListCis(const Library& lib, const MigContext& ctx,
                                             const GpuInstance& gi_desc, nvmlGpuInstance_t gi) {
  GPUOP_ASSIGN_OR_RETURN(auto profiles, ListCiProfiles(lib, ctx, gi));
  std::vector<ComputeInstance> out;
  for (const CiProfile& p : profiles) {
    std::vector<nvmlComputeInstance_t> handles(std::max(p.max_count, 1u) + 1);
    unsigned count = 0;
    GPUOP_RETURN_IF_ERROR(MigPrivilege(lib.Call(lib.fn().GpuInstanceGetComputeInstances, ctx.object,
                                                gi, p.id, handles.data(), &count)));
    for (unsigned i = 0; i < std::min<size_t>(count, handles.size()); ++i) {
      GPUOP_ASSIGN_OR_RETURN(auto ci, DescribeCi(lib, ctx, gi_desc, handles[i], p.slices));
      out.push_back(std::move(ci));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

// The GI and CI of MIG device `mig` (profile ids, placement): calls that
// need MIG privilege, so PermissionDenied for a process without it.
Status DescribeInstances(const Library& lib, const MigContext& ctx, const std::string& mobj,
                         MigDevice* m) {
  const Functions& fn = lib.fn();
  GPUOP_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, GiById(lib, ctx, m->gi_id));
  GPUOP_ASSIGN_OR_RETURN(GpuInstance gi_desc, DescribeGi(lib, ctx, gi));
  nvmlComputeInstance_t ci = nullptr;
  GPUOP_RETURN_IF_ERROR(lib.Call(fn.GpuInstanceGetComputeInstanceById, mobj, gi, m->ci_id, &ci));
  nvmlComputeInstanceInfo_t ci_info{};
  GPUOP_RETURN_IF_ERROR(lib.Call(fn.ComputeInstanceGetInfo, mobj, ci, &ci_info));
  m->gi_profile_id = gi_desc.profile_id;
  m->placement = gi_desc.placement;
  m->ci_profile_id = ci_info.profileId;
  return Status::Ok();
}

// The GI profile a MIG device belongs to, from what an unprivileged process
// may read: its attributes (slices, memory) and its name, which NVML ends with
// the profile name ("... MIG 1g.24gb+gfx"). Variants of one size differ in
// engines (-me, +me.all) or in nothing the attributes show (+gfx); the name
// tells them apart, then the engines, then the first listed (the plain
// profile). nullptr when no profile has the device's size.
const GiProfile* ProfileForAttributes(const std::vector<GiProfile>& profiles,
                                      const nvmlDeviceAttributes_t& a,
                                      const std::string& device_name, uint64_t total_bytes) {
  const GiProfile* by_engines = nullptr;
  const GiProfile* by_size = nullptr;
  for (const GiProfile& p : profiles) {
    if (p.slices != a.gpuInstanceSliceCount || p.memory_mib != a.memorySizeMB) continue;
    const std::string name =
        MigProfileName(a.computeInstanceSliceCount, p.slices, p.memory_mib, total_bytes, p.index);
    if (EndsWith(device_name, " " + name)) return &p;
    if (by_engines == nullptr && p.engines.decoders == a.sharedDecoderCount &&
        p.engines.encoders == a.sharedEncoderCount && p.engines.jpegs == a.sharedJpegCount &&
        p.engines.ofas == a.sharedOfaCount) {
      by_engines = &p;
    }
    if (by_size == nullptr) by_size = &p;
  }
  return by_engines != nullptr ? by_engines : by_size;
}

Status RequireMigEnabled(const Library& lib, nvmlDevice_t dev, const std::string& object) {
  GPUOP_ASSIGN_OR_RETURN(auto mode, MigMode(lib, dev, object));
  if (!mode.first) {
    return FailedPrecondition(object +
                              " has MIG disabled: enable MIG mode (and reset the GPU) "
                              "before creating or destroying MIG instances");
  }
  return Status::Ok();
}

}  // namespace

// ---- Client -----------------------------------------------------------------

Result<std::unique_ptr<Client>> Client::Open(const std::string& library_path) {
  GPUOP_ASSIGN_OR_RETURN(std::shared_ptr<Library> lib, Library::Load(library_path));
  GPUOP_RETURN_IF_ERROR(lib->Init());
  return std::unique_ptr<Client>(new Client(std::move(lib)));
}

Client::~Client() = default;

const std::string& Client::library_path() const { return lib_->path(); }
bool Client::simulated() const { return lib_->simulated(); }

Result<SystemInfo> Client::System() const {
  const Functions& fn = lib_->fn();
  SystemInfo info;
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  GPUOP_ASSIGN_OR_RETURN(bool ok, TryRead(*lib_, fn.SystemGetDriverVersion, "system", false, buf,
                                          unsigned{sizeof(buf)}));
  if (ok) info.driver_version = std::string(buf, strnlen(buf, sizeof(buf)));
  char nbuf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
  GPUOP_ASSIGN_OR_RETURN(
      ok, TryRead(*lib_, fn.SystemGetNVMLVersion, "system", false, nbuf, unsigned{sizeof(nbuf)}));
  if (ok) info.nvml_version = std::string(nbuf, strnlen(nbuf, sizeof(nbuf)));
  // NVML asks libcuda.so.1 for the CUDA version; a node without it (no CUDA
  // user-mode driver, or a container that did not get it) has no version.
  int cuda = 0;
  const auto& cuda_fn = fn.SystemGetCudaDriverVersion;
  nvmlReturn_t ret = cuda_fn ? cuda_fn.ptr(&cuda) : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (ret == NVML_SUCCESS) {
    info.cuda_driver_version = cuda;
    info.cuda_version = CudaVersionString(cuda);
  } else if (ret != NVML_ERROR_LIBRARY_NOT_FOUND && !Absent(ret, /*mig=*/false)) {
    return lib_->Error(ret, "system", cuda_fn.symbol);
  }
  return info;
}

Result<unsigned> Client::GpuCount() const {
  unsigned count = 0;
  GPUOP_RETURN_IF_ERROR(lib_->Call(lib_->fn().DeviceGetCount, "", &count));
  return count;
}

Result<nvmlDevice_st*> Client::Handle(unsigned gpu) const {
  const auto& f = lib_->fn().DeviceGetHandleByIndex;
  nvmlDevice_t dev = nullptr;
  nvmlReturn_t ret = f.ptr(gpu, &dev);
  if (ret == NVML_SUCCESS) return dev;
  if (ret == NVML_ERROR_INVALID_ARGUMENT) {
    auto count = GpuCount();
    return NotFound("GPU " + std::to_string(gpu) + " does not exist: NVML reports " +
                    (count.ok() ? std::to_string(*count) : std::string("fewer")) + " GPUs");
  }
  return lib_->Error(ret, "GPU " + std::to_string(gpu), f.symbol);
}

bool SkippableGpuError(const Status& s) {
  return s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kUnavailable;
}

Result<std::vector<Gpu>> Client::Gpus() const {
  GPUOP_ASSIGN_OR_RETURN(unsigned count, GpuCount());
  std::vector<Gpu> out;
  out.reserve(count);
  Status first_skipped;
  for (unsigned i = 0; i < count; ++i) {
    auto g = GpuByIndex(i);
    if (!g.ok() && SkippableGpuError(g.status())) {
      // One GPU this process may not open (or that is lost) must not hide the others.
      LogWarn("skipping a GPU NVML cannot open", {{"gpu", i}, {"error", g.status().message()}});
      if (first_skipped.ok()) first_skipped = g.status();
      continue;
    }
    if (!g.ok()) return g.status();
    out.push_back(std::move(g).value());
  }
  if (out.empty() && !first_skipped.ok()) return first_skipped;  // none at all: say why
  return out;
}

Result<Gpu> Client::GpuByIndex(unsigned gpu) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  return Describe(gpu, dev);
}

Result<Gpu> Client::Describe(unsigned gpu, nvmlDevice_st* dev) const {
  const Library& lib = *lib_;
  const Functions& fn = lib.fn();
  Gpu g;
  g.index = gpu;
  std::string object = GpuObject(gpu, "");
  GPUOP_ASSIGN_OR_RETURN(g.uuid, ReadString(lib, fn.DeviceGetUUID, object, dev));
  object = GpuObject(gpu, g.uuid);
  GPUOP_ASSIGN_OR_RETURN(g.name, ReadString(lib, fn.DeviceGetName, object, dev));

  // The rest is optional: an old driver or an unsupported board leaves the
  // default ("unknown") instead of hiding the GPU.
  {
    char buf[NVML_DEVICE_SERIAL_BUFFER_SIZE + 2] = {};
    GPUOP_ASSIGN_OR_RETURN(
        bool ok, TryRead(lib, fn.DeviceGetSerial, object, false, dev, buf, unsigned{sizeof(buf)}));
    if (ok) g.serial = std::string(buf, strnlen(buf, sizeof(buf)));
  }
  unsigned minor = 0;
  GPUOP_ASSIGN_OR_RETURN(bool ok,
                         TryRead(lib, fn.DeviceGetMinorNumber, object, false, dev, &minor));
  if (ok) g.minor = static_cast<int>(minor);

  nvmlPciInfo_t pci{};
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetPciInfo, object, false, dev, &pci));
  if (ok) {
    g.pci.bus_id = std::string(pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
    g.pci.domain = pci.domain;
    g.pci.bus = pci.bus;
    g.pci.device = pci.device;
    g.pci.device_id = pci.pciDeviceId;
    g.pci.subsystem_id = pci.pciSubSystemId;
  }

  uint64_t total_bytes = 0;
  nvmlMemory_t mem{};
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetMemoryInfo, object, false, dev, &mem));
  if (ok) {
    total_bytes = mem.total;
    g.memory_mib = mem.total >> 20;
  }

  int major = 0, cc_minor = 0;
  GPUOP_ASSIGN_OR_RETURN(
      ok, TryRead(lib, fn.DeviceGetCudaComputeCapability, object, false, dev, &major, &cc_minor));
  if (ok) {
    g.cc_major = major;
    g.cc_minor = cc_minor;
  }
  nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetArchitecture, object, false, dev, &arch));
  g.architecture = ArchitectureName(ok ? arch : NVML_DEVICE_ARCH_UNKNOWN);
  nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetBrand, object, false, dev, &brand));
  g.brand = BrandName(ok ? brand : NVML_BRAND_UNKNOWN);
  unsigned numa = 0;
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetNumaNodeId, object, false, dev, &numa));
  if (ok && numa != kNoInstance) g.numa_node = static_cast<int>(numa);

  if (fn.DeviceGetMigMode) {
    auto mode = MigMode(lib, dev, object);
    if (mode.ok()) {
      g.mig_capable = true;
      g.mig_enabled = mode->first;
      g.mig_pending = mode->second;
    } else if (mode.status().code() != StatusCode::kNotSupported) {
      return mode.status();
    }
  }
  if (g.mig_enabled && total_bytes > 0) {
    GPUOP_ASSIGN_OR_RETURN(g.mig_devices, MigDevices(gpu, dev, object));
  }
  GPUOP_ASSIGN_OR_RETURN(g.fabric, ReadFabric(lib, dev, object));
  return g;
}

Result<std::vector<MigDevice>> Client::MigDevices(unsigned, nvmlDevice_st* dev,
                                                  const std::string& object) const {
  const Library& lib = *lib_;
  const Functions& fn = lib.fn();
  GPUOP_ASSIGN_OR_RETURN(MigContext ctx, MigSetup(lib, dev, object));
  unsigned max = 0;
  GPUOP_RETURN_IF_ERROR(lib.Call(fn.DeviceGetMaxMigDeviceCount, object, dev, &max));
  const auto& by_index = fn.DeviceGetMigDeviceHandleByIndex;
  if (!by_index) return lib.Missing(by_index.symbol, by_index.feature);

  std::vector<MigDevice> out;
  for (unsigned j = 0; j < max; ++j) {
    nvmlDevice_t mig = nullptr;
    nvmlReturn_t ret = by_index.ptr(dev, j, &mig);
    if (ret == NVML_ERROR_NOT_FOUND || ret == NVML_ERROR_INVALID_ARGUMENT) continue;  // a hole
    if (ret != NVML_SUCCESS) return lib.Error(ret, object, by_index.symbol);

    MigDevice m;
    m.index = j;
    std::string mobj = object + " MIG device " + std::to_string(j);
    GPUOP_ASSIGN_OR_RETURN(m.uuid, ReadString(lib, fn.DeviceGetUUID, mobj, mig));
    GPUOP_ASSIGN_OR_RETURN(m.name, ReadString(lib, fn.DeviceGetName, mobj, mig));
    GPUOP_RETURN_IF_ERROR(lib.Call(fn.DeviceGetGpuInstanceId, mobj, mig, &m.gi_id));
    GPUOP_RETURN_IF_ERROR(lib.Call(fn.DeviceGetComputeInstanceId, mobj, mig, &m.ci_id));

    nvmlDeviceAttributes_t attr{};
    GPUOP_RETURN_IF_ERROR(lib.Call(fn.DeviceGetAttributes, mobj, mig, &attr));
    m.memory_mib = attr.memorySizeMB;
    m.multiprocessors = attr.multiprocessorCount;
    m.gi_slices = attr.gpuInstanceSliceCount;
    m.ci_slices = attr.computeInstanceSliceCount;
    m.engines = {attr.sharedCopyEngineCount, attr.sharedDecoderCount, attr.sharedEncoderCount,
                 attr.sharedJpegCount, attr.sharedOfaCount};

    Status privileged = DescribeInstances(lib, ctx, mobj, &m);
    if (privileged.code() == StatusCode::kPermissionDenied) {
      // Only a process with MIG privilege may open the instances: the
      // profiles follow from the device's own attributes, the placement
      // stays unknown.
      const GiProfile* p = ProfileForAttributes(ctx.profiles, attr, m.name, ctx.total_bytes);
      if (p != nullptr) m.gi_profile_id = p->id;
      // The driver numbers CI profiles by their NVML_COMPUTE_INSTANCE_PROFILE_* index.
      m.ci_profile_id = CiProfileIndexForSlices(m.ci_slices).value_or(0);
    } else if (!privileged.ok()) {
      return privileged;
    }

    // The name comes from NVML's numbers: the GI profile's memory (the
    // attributes' memory on a GI NVML did not list) against the whole GPU.
    const GiProfile* p = ctx.ProfileById(m.gi_profile_id);
    uint64_t mem = p ? p->memory_mib : m.memory_mib;
    unsigned index = p ? p->index : NVML_GPU_INSTANCE_PROFILE_COUNT;
    m.profile = MigProfileName(m.ci_slices, m.gi_slices, mem, ctx.total_bytes, index);
    out.push_back(std::move(m));
  }
  return out;
}

Result<Telemetry> Client::ReadTelemetry(unsigned gpu) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  GPUOP_ASSIGN_OR_RETURN(std::string uuid,
                         ReadString(*lib_, lib_->fn().DeviceGetUUID, GpuObject(gpu, ""), dev));
  return Read(dev, GpuObject(gpu, uuid), false);
}

Result<Telemetry> Client::ReadMigTelemetry(unsigned gpu, unsigned mig_index) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  const auto& f = lib_->fn().DeviceGetMigDeviceHandleByIndex;
  if (!f) return lib_->Missing(f.symbol, f.feature);
  nvmlDevice_t mig = nullptr;
  std::string object = ObjectFor(*lib_, gpu, dev) + " MIG device " + std::to_string(mig_index);
  nvmlReturn_t ret = f.ptr(dev, mig_index, &mig);
  if (ret == NVML_ERROR_NOT_FOUND || ret == NVML_ERROR_INVALID_ARGUMENT) {
    return NotFound(object + " does not exist");
  }
  if (ret != NVML_SUCCESS) return lib_->Error(ret, object, f.symbol);
  return Read(mig, object, true);
}

Result<Telemetry> Client::Read(nvmlDevice_st* dev, const std::string& object, bool mig) const {
  const Library& lib = *lib_;
  const Functions& fn = lib.fn();
  Telemetry t;
  bool ok = false;

  unsigned u = 0;
  GPUOP_ASSIGN_OR_RETURN(t.gpu_temp_c, ReadGpuTemperature(lib, dev, object, mig));

  nvmlUtilization_t util{};
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetUtilizationRates, object, mig, dev, &util));
  if (ok) {
    t.gpu_util_pct = util.gpu;
    t.mem_util_pct = util.memory;
  }
  unsigned period = 0;
  GPUOP_ASSIGN_OR_RETURN(
      ok, TryRead(lib, fn.DeviceGetEncoderUtilization, object, mig, dev, &u, &period));
  if (ok) t.enc_util_pct = u;
  GPUOP_ASSIGN_OR_RETURN(
      ok, TryRead(lib, fn.DeviceGetDecoderUtilization, object, mig, dev, &u, &period));
  if (ok) t.dec_util_pct = u;

  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetPowerUsage, object, mig, dev, &u));
  if (ok) t.power_w = u / 1000.0;
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetPowerManagementLimit, object, mig, dev, &u));
  if (ok) t.power_limit_w = u / 1000.0;
  unsigned long long ull = 0;
  GPUOP_ASSIGN_OR_RETURN(ok,
                         TryRead(lib, fn.DeviceGetTotalEnergyConsumption, object, mig, dev, &ull));
  if (ok) t.total_energy_mj = ull;

  GPUOP_ASSIGN_OR_RETURN(ok,
                         TryRead(lib, fn.DeviceGetClockInfo, object, mig, dev, NVML_CLOCK_SM, &u));
  if (ok) t.sm_clock_mhz = u;
  GPUOP_ASSIGN_OR_RETURN(ok,
                         TryRead(lib, fn.DeviceGetClockInfo, object, mig, dev, NVML_CLOCK_MEM, &u));
  if (ok) t.mem_clock_mhz = u;

  // Frame buffer: v2 adds the reserved amount; fall back to v1 on old drivers.
  nvmlMemory_v2_t mem2{};
  mem2.version = nvmlMemory_v2;
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetMemoryInfoV2, object, mig, dev, &mem2));
  if (ok) {
    t.fb_total_mib = mem2.total >> 20;
    t.fb_free_mib = mem2.free >> 20;
    t.fb_used_mib = mem2.used >> 20;
    t.fb_reserved_mib = mem2.reserved >> 20;
  } else {
    nvmlMemory_t mem{};
    GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetMemoryInfo, object, mig, dev, &mem));
    if (ok) {
      t.fb_total_mib = mem.total >> 20;
      t.fb_free_mib = mem.free >> 20;
      t.fb_used_mib = mem.used >> 20;
    }
  }

  struct Ecc {
    nvmlMemoryErrorType_t type;
    nvmlEccCounterType_t counter;
    std::optional<uint64_t>* out;
  } ecc[] = {
      {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &t.ecc_sbe_volatile},
      {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &t.ecc_dbe_volatile},
      {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &t.ecc_sbe_aggregate},
      {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &t.ecc_dbe_aggregate},
  };
  for (const Ecc& e : ecc) {
    GPUOP_ASSIGN_OR_RETURN(
        ok, TryRead(lib, fn.DeviceGetTotalEccErrors, object, mig, dev, e.type, e.counter, &ull));
    if (ok) *e.out = ull;
  }

  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetRemappedRows, object, mig, dev, &corr, &unc,
                                     &pending, &failure));
  if (ok) {
    t.remapped_rows_correctable = corr;
    t.remapped_rows_uncorrectable = unc;
    t.remapped_rows_pending = pending != 0;
    t.remapped_rows_failure = failure != 0;
  }

  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetPcieReplayCounter, object, mig, dev, &u));
  if (ok) t.pcie_replay = u;
  GPUOP_ASSIGN_OR_RETURN(
      ok, TryRead(lib, fn.DeviceGetPcieThroughput, object, mig, dev, NVML_PCIE_UTIL_TX_BYTES, &u));
  if (ok) t.pcie_tx_kbps = u;
  GPUOP_ASSIGN_OR_RETURN(
      ok, TryRead(lib, fn.DeviceGetPcieThroughput, object, mig, dev, NVML_PCIE_UTIL_RX_BYTES, &u));
  if (ok) t.pcie_rx_kbps = u;

  GPUOP_ASSIGN_OR_RETURN(
      ok, TryRead(lib, fn.DeviceGetCurrentClocksEventReasons, object, mig, dev, &ull));
  if (ok) t.clock_event_reasons = ull;

  // Memory temperature and NVLink totals are field values; each field
  // carries its own return code.
  nvmlFieldValue_t fields[3] = {};
  fields[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
  fields[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
  fields[1].scopeId = UINT_MAX;  // summed over all links
  fields[2].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
  fields[2].scopeId = UINT_MAX;
  GPUOP_ASSIGN_OR_RETURN(ok, TryRead(lib, fn.DeviceGetFieldValues, object, mig, dev, 3, fields));
  if (ok) {
    if (auto v = FieldValueU64(fields[0])) t.memory_temp_c = static_cast<unsigned>(*v);
    t.nvlink_tx_kib = FieldValueU64(fields[1]);
    t.nvlink_rx_kib = FieldValueU64(fields[2]);
  }

  if (fn.DeviceGetNvLinkState && !mig) {
    unsigned active = 0;
    bool any = false;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t state = NVML_FEATURE_DISABLED;
      nvmlReturn_t ret = fn.DeviceGetNvLinkState.ptr(dev, link, &state);
      if (ret == NVML_SUCCESS) {
        any = true;
        if (state == NVML_FEATURE_ENABLED) ++active;
      } else if (Absent(ret, true)) {
        break;  // no NVLink, or past the GPU's last link
      } else {
        return lib.Error(ret, object, fn.DeviceGetNvLinkState.symbol);
      }
    }
    if (any) t.nvlink_active_links = active;
  }
  return t;
}

// ---- Topology ---------------------------------------------------------------

namespace {

// "00000000:18:00.0" and "0000:18:00.0" (any case) name the same function.
std::string NormalBusId(std::string_view s) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  std::string text(s);
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return text;
  char out[32];
  std::snprintf(out, sizeof(out), "%08X:%02X:%02X.%X", domain, bus, dev, fn);
  return out;
}

}  // namespace

Result<TopologyLevel> Client::CommonAncestor(unsigned a, unsigned b) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t da, Handle(a));
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t db, Handle(b));
  nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
  GPUOP_RETURN_IF_ERROR(lib_->Call(lib_->fn().DeviceGetTopologyCommonAncestor,
                                   "GPUs " + std::to_string(a) + " and " + std::to_string(b), da,
                                   db, &level));
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE:
    case NVML_TOPOLOGY_MULTIPLE:
    case NVML_TOPOLOGY_HOSTBRIDGE:
    case NVML_TOPOLOGY_NODE:
    case NVML_TOPOLOGY_SYSTEM:
      return static_cast<TopologyLevel>(level);
  }
  // A level a newer driver added between ours: round to the next wider one.
  unsigned v = static_cast<unsigned>(level);
  return v >= 50 ? TopologyLevel::kSystem : static_cast<TopologyLevel>((v / 10 + 1) * 10);
}

Result<std::vector<NvLink>> Client::NvLinks(unsigned gpu) const {
  const Library& lib = *lib_;
  const Functions& fn = lib.fn();
  if (!fn.DeviceGetNvLinkState) {
    return lib.Missing(fn.DeviceGetNvLinkState.symbol, fn.DeviceGetNvLinkState.feature);
  }
  if (!fn.DeviceGetNvLinkRemotePciInfo) {
    return lib.Missing(fn.DeviceGetNvLinkRemotePciInfo.symbol,
                       fn.DeviceGetNvLinkRemotePciInfo.feature);
  }
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  const std::string object = ObjectFor(lib, gpu, dev);

  std::vector<NvLink> out;
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    nvmlEnableState_t state = NVML_FEATURE_DISABLED;
    nvmlReturn_t ret = fn.DeviceGetNvLinkState.ptr(dev, link, &state);
    if (Absent(ret, /*mig=*/true)) break;  // no NVLink, or past the GPU's last link
    if (ret != NVML_SUCCESS) return lib.Error(ret, object, fn.DeviceGetNvLinkState.symbol);
    if (state != NVML_FEATURE_ENABLED) continue;
    nvmlPciInfo_t pci{};
    ret = fn.DeviceGetNvLinkRemotePciInfo.ptr(dev, link, &pci);
    if (Absent(ret, true)) continue;
    if (ret != NVML_SUCCESS) return lib.Error(ret, object, fn.DeviceGetNvLinkRemotePciInfo.symbol);
    NvLink l;
    l.link = link;
    l.remote_bus_id = std::string(pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
    // The far end's type; drivers without the call get it from the bus id below.
    nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    bool typed = fn.DeviceGetNvLinkRemoteDeviceType &&
                 fn.DeviceGetNvLinkRemoteDeviceType.ptr(dev, link, &type) == NVML_SUCCESS;
    if (typed && type == NVML_NVLINK_DEVICE_TYPE_SWITCH) l.remote = NvLink::Remote::kSwitch;
    if (typed && type == NVML_NVLINK_DEVICE_TYPE_GPU) l.remote = NvLink::Remote::kGpu;
    out.push_back(std::move(l));
  }
  if (out.empty()) return out;

  // Resolve far GPUs by bus id. Without the type call, a far end that is none
  // of our GPUs is taken for an NVSwitch (the only other NVLink peer on x86).
  GPUOP_ASSIGN_OR_RETURN(unsigned count, GpuCount());
  std::unordered_map<std::string, unsigned> by_bus;
  for (unsigned i = 0; i < count; ++i) {
    auto d_or = Handle(i);
    if (!d_or.ok() && SkippableGpuError(d_or.status())) continue;  // not ours to resolve
    GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t d, std::move(d_or));
    nvmlPciInfo_t pci{};
    if (lib.Call(fn.DeviceGetPciInfo, "", d, &pci).ok()) {
      by_bus[NormalBusId(std::string_view(pci.busId, strnlen(pci.busId, sizeof(pci.busId))))] = i;
    }
  }
  for (NvLink& l : out) {
    auto it = by_bus.find(NormalBusId(l.remote_bus_id));
    if (it != by_bus.end() && l.remote != NvLink::Remote::kSwitch) {
      l.remote = NvLink::Remote::kGpu;
      l.remote_gpu = it->second;
    } else if (it == by_bus.end() && l.remote == NvLink::Remote::kOther &&
               !fn.DeviceGetNvLinkRemoteDeviceType) {
      l.remote = NvLink::Remote::kSwitch;
    }
  }
  return out;
}

Result<std::vector<NvLinkPeer>> Client::NvLinkPeers(unsigned gpu) const {
  GPUOP_ASSIGN_OR_RETURN(unsigned count, GpuCount());
  if (gpu >= count) return Handle(gpu).status();
  std::vector<std::vector<NvLink>> links(count);
  GPUOP_ASSIGN_OR_RETURN(links[gpu], NvLinks(gpu));
  bool switched = std::any_of(links[gpu].begin(), links[gpu].end(),
                              [](const NvLink& l) { return l.remote == NvLink::Remote::kSwitch; });
  if (switched) {
    for (unsigned i = 0; i < count; ++i) {
      if (i == gpu) continue;
      auto l = NvLinks(i);
      if (!l.ok() && SkippableGpuError(l.status())) continue;  // a GPU we may not open
      GPUOP_ASSIGN_OR_RETURN(links[i], std::move(l));
    }
  }
  return NvLinkPeersFromLinks(gpu, links);
}

// ---- Health -----------------------------------------------------------------

Result<GpuHealth> Client::ReadHealth(unsigned gpu) const {
  const Library& lib = *lib_;
  const Functions& fn = lib.fn();
  GpuHealth h;
  // A call that fails on this GPU alone (lost, fallen off the bus, needing a
  // reset) means it does not answer; the text says why.
  auto unresponsive = [&](nvmlReturn_t ret, const char* symbol) {
    h.responds = false;
    h.error = std::string(symbol) + ": " + lib.ErrorText(ret);
    return h;
  };
  auto device_down = [](nvmlReturn_t ret) {
    return ret == NVML_ERROR_GPU_IS_LOST || ret == NVML_ERROR_RESET_REQUIRED ||
           ret == NVML_ERROR_UNKNOWN || ret == NVML_ERROR_DRIVER_NOT_LOADED ||
           ret == NVML_ERROR_UNINITIALIZED;
  };

  nvmlDevice_t dev = nullptr;
  nvmlReturn_t ret = fn.DeviceGetHandleByIndex.ptr(gpu, &dev);
  if (ret == NVML_ERROR_INVALID_ARGUMENT) return Handle(gpu).status();  // no such GPU
  if (ret != NVML_SUCCESS) return unresponsive(ret, fn.DeviceGetHandleByIndex.symbol);
  // The name needs the device itself (the UUID may be cached by the driver).
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  ret = fn.DeviceGetName.ptr(dev, name, unsigned{sizeof(name)});
  if (ret != NVML_SUCCESS) return unresponsive(ret, fn.DeviceGetName.symbol);
  h.responds = true;

  if (fn.DeviceGetFieldValues) {
    nvmlFieldValue_t v{};
    v.fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
    ret = fn.DeviceGetFieldValues.ptr(dev, 1, &v);
    if (device_down(ret)) return unresponsive(ret, fn.DeviceGetFieldValues.symbol);
    if (ret == NVML_SUCCESS && v.nvmlReturn == NVML_SUCCESS) {
      if (auto a = FieldValueU64(v)) h.recovery_action = static_cast<RecoveryAction>(*a);
    }
  }
  if (fn.DeviceGetTotalEccErrors) {
    unsigned long long dbe = 0;
    ret = fn.DeviceGetTotalEccErrors.ptr(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                         &dbe);
    if (device_down(ret)) return unresponsive(ret, fn.DeviceGetTotalEccErrors.symbol);
    if (ret == NVML_SUCCESS) h.ecc_dbe_volatile = dbe;
  }
  if (fn.DeviceGetRemappedRows) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    ret = fn.DeviceGetRemappedRows.ptr(dev, &corr, &unc, &pending, &failure);
    if (device_down(ret)) return unresponsive(ret, fn.DeviceGetRemappedRows.symbol);
    if (ret == NVML_SUCCESS) h.remapped_rows_pending = pending != 0;
  }
  return h;
}

// ---- Fabric -----------------------------------------------------------------

Result<std::optional<GpuFabric>> Client::FabricInfo(unsigned gpu) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  return ReadFabric(*lib_, dev, ObjectFor(*lib_, gpu, dev));
}

// ---- MIG --------------------------------------------------------------------

Result<std::vector<GiProfile>> Client::GiProfiles(unsigned gpu) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_RETURN_IF_ERROR(MigMode(*lib_, dev, object).status());
  GPUOP_ASSIGN_OR_RETURN(MigContext ctx, MigSetup(*lib_, dev, object));
  return std::move(ctx.profiles);
}

Result<std::vector<CiProfile>> Client::CiProfiles(unsigned gpu, unsigned gi_id) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_ASSIGN_OR_RETURN(MigContext ctx, MigSetup(*lib_, dev, object));
  GPUOP_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, GiById(*lib_, ctx, gi_id));
  return ListCiProfiles(*lib_, ctx, gi);
}

Result<MigModeChange> Client::SetMigMode(unsigned gpu, bool enabled) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_RETURN_IF_ERROR(MigMode(*lib_, dev, object).status());
  nvmlReturn_t activation = NVML_SUCCESS;
  unsigned mode = enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  GPUOP_RETURN_IF_ERROR(
      MigPrivilege(lib_->Call(lib_->fn().DeviceSetMigMode, object, dev, mode, &activation)));
  GPUOP_ASSIGN_OR_RETURN(auto now, MigMode(*lib_, dev, object));
  MigModeChange change;
  change.enabled = enabled;
  change.current = now.first;
  // activationStatus says why the mode is not in force: a busy GPU must be
  // idled (a reset would fail or kill its work), anything else waits for a reset.
  if (activation == NVML_ERROR_IN_USE) {
    change.activation = MigActivation::kInUse;
    auto procs = Processes(gpu);
    if (procs.ok()) {
      change.processes = std::move(procs).value();
    } else {
      LogWarn("cannot list the processes holding a GPU",
              {{"gpu", gpu}, {"error", procs.status().message()}});
    }
  } else if (activation != NVML_SUCCESS || now.first != enabled) {
    if (activation != NVML_SUCCESS && activation != NVML_ERROR_RESET_REQUIRED) {
      LogWarn("MIG mode not activated; taking it as pending a reset",
              {{"gpu", gpu}, {"activation", lib_->ErrorText(activation)}});
    }
    change.activation = MigActivation::kResetRequired;
    change.reset_required = true;
  }
  return change;
}

Result<std::vector<GpuProcess>> Client::Processes(unsigned gpu) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  const auto& f = lib_->fn().DeviceGetComputeRunningProcesses;
  if (!f) return lib_->Missing(f.symbol, f.feature);
  std::string object = ObjectFor(*lib_, gpu, dev);
  // The list may grow between the count and the read: ask until it fits.
  std::vector<nvmlProcessInfo_t> infos(16);
  for (int attempt = 0;; ++attempt) {
    unsigned count = static_cast<unsigned>(infos.size());
    nvmlReturn_t ret = f.ptr(dev, &count, infos.data());
    if (ret == NVML_ERROR_INSUFFICIENT_SIZE && attempt < 4) {
      infos.resize(std::max<size_t>(count, infos.size()) * 2);
      continue;
    }
    if (ret != NVML_SUCCESS) return lib_->Error(ret, object, f.symbol);
    infos.resize(std::min<size_t>(count, infos.size()));
    break;
  }
  std::vector<GpuProcess> out;
  for (const nvmlProcessInfo_t& info : infos) {
    GpuProcess p;
    p.pid = info.pid;
    p.used_mib = info.usedGpuMemory == static_cast<unsigned long long>(-1)
                     ? 0
                     : info.usedGpuMemory >> 20;  // NVML_VALUE_NOT_AVAILABLE
    if (auto comm = ReadFile("/proc/" + std::to_string(info.pid) + "/comm"); comm.ok()) {
      p.name = std::string(Trim(*comm));
    }
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<GpuInstance>> Client::GpuInstances(unsigned gpu) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_ASSIGN_OR_RETURN(auto mode, MigMode(*lib_, dev, object));
  std::vector<GpuInstance> out;
  if (!mode.first) return out;
  GPUOP_ASSIGN_OR_RETURN(MigContext ctx, MigSetup(*lib_, dev, object));
  for (const GiProfile& p : ctx.profiles) {
    std::vector<nvmlGpuInstance_t> handles(std::max(p.max_count, 1u) + 1);
    unsigned count = 0;
    GPUOP_RETURN_IF_ERROR(MigPrivilege(
        lib_->Call(lib_->fn().DeviceGetGpuInstances, object, dev, p.id, handles.data(), &count)));
    for (unsigned i = 0; i < std::min<size_t>(count, handles.size()); ++i) {
      GPUOP_ASSIGN_OR_RETURN(GpuInstance gi, DescribeGi(*lib_, ctx, handles[i]));
      GPUOP_ASSIGN_OR_RETURN(gi.compute_instances, ListCis(*lib_, ctx, gi, handles[i]));
      out.push_back(std::move(gi));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

Result<GpuInstance> Client::CreateGpuInstance(unsigned gpu, unsigned profile_id,
                                              std::optional<Placement> placement) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_RETURN_IF_ERROR(RequireMigEnabled(*lib_, dev, object));
  GPUOP_ASSIGN_OR_RETURN(MigContext ctx, MigSetup(*lib_, dev, object));
  const GiProfile* p = ctx.ProfileById(profile_id);
  if (p == nullptr) {
    std::vector<std::string> ids;
    for (const auto& q : ctx.profiles) ids.push_back(std::to_string(q.id) + " (" + q.name + ")");
    std::string list;
    for (size_t i = 0; i < ids.size(); ++i) list += (i ? ", " : "") + ids[i];
    return InvalidArgument(object + " has no GPU instance profile " + std::to_string(profile_id) +
                           "; its profiles are " + list);
  }
  nvmlGpuInstance_t gi = nullptr;
  Status s;
  if (placement) {
    nvmlGpuInstancePlacement_t pl{placement->start, placement->size};
    s = lib_->Call(lib_->fn().DeviceCreateGpuInstanceWithPlacement, object, dev, profile_id, &pl,
                   &gi);
  } else {
    s = lib_->Call(lib_->fn().DeviceCreateGpuInstance, object, dev, profile_id, &gi);
  }
  if (!s.ok()) return MigPrivilege(s.Annotate("creating a " + p->name + " GPU instance"));
  return DescribeGi(*lib_, ctx, gi);
}

Status Client::DestroyGpuInstance(unsigned gpu, unsigned gi_id) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_RETURN_IF_ERROR(RequireMigEnabled(*lib_, dev, object));
  MigContext ctx;
  ctx.dev = dev;
  ctx.object = object;
  GPUOP_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, GiById(*lib_, ctx, gi_id));
  Status s = MigPrivilege(lib_->Call(lib_->fn().GpuInstanceDestroy, object, gi));
  if (!s.ok()) {
    return s.Annotate("destroying GPU instance " + std::to_string(gi_id) +
                      " (destroy its compute instances and stop its processes first)");
  }
  return Status::Ok();
}

Result<ComputeInstance> Client::CreateComputeInstance(unsigned gpu, unsigned gi_id,
                                                      unsigned ci_profile_index) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_RETURN_IF_ERROR(RequireMigEnabled(*lib_, dev, object));
  GPUOP_ASSIGN_OR_RETURN(MigContext ctx, MigSetup(*lib_, dev, object));
  GPUOP_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, GiById(*lib_, ctx, gi_id));
  GPUOP_ASSIGN_OR_RETURN(GpuInstance gi_desc, DescribeGi(*lib_, ctx, gi));
  GPUOP_ASSIGN_OR_RETURN(auto profiles, ListCiProfiles(*lib_, ctx, gi));
  auto it = std::find_if(profiles.begin(), profiles.end(),
                         [&](const CiProfile& p) { return p.index == ci_profile_index; });
  if (it == profiles.end()) {
    return InvalidArgument(object + " GPU instance " + std::to_string(gi_id) + " (" +
                           gi_desc.profile_name + ") has no compute instance profile " +
                           std::to_string(ci_profile_index));
  }
  nvmlComputeInstance_t ci = nullptr;
  Status s = MigPrivilege(
      lib_->Call(lib_->fn().GpuInstanceCreateComputeInstance, object, gi, it->id, &ci));
  if (!s.ok()) {
    return s.Annotate("creating a compute instance in GPU instance " + std::to_string(gi_id));
  }
  return DescribeCi(*lib_, ctx, gi_desc, ci, it->slices);
}

Status Client::DestroyComputeInstance(unsigned gpu, unsigned gi_id, unsigned ci_id) const {
  GPUOP_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu));
  std::string object = ObjectFor(*lib_, gpu, dev);
  GPUOP_RETURN_IF_ERROR(RequireMigEnabled(*lib_, dev, object));
  MigContext ctx;
  ctx.dev = dev;
  ctx.object = object;
  GPUOP_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, GiById(*lib_, ctx, gi_id));
  const auto& f = lib_->fn().GpuInstanceGetComputeInstanceById;
  if (!f) return lib_->Missing(f.symbol, f.feature);
  nvmlComputeInstance_t ci = nullptr;
  nvmlReturn_t ret = f.ptr(gi, ci_id, &ci);
  if (ret == NVML_ERROR_NOT_FOUND || ret == NVML_ERROR_INVALID_ARGUMENT) {
    return NotFound(object + " GPU instance " + std::to_string(gi_id) +
                    " has no compute instance " + std::to_string(ci_id));
  }
  if (ret != NVML_SUCCESS) return MigPrivilege(lib_->Error(ret, object, f.symbol));
  return MigPrivilege(lib_->Call(lib_->fn().ComputeInstanceDestroy, object, ci));
}

// ---- Events -----------------------------------------------------------------

Result<std::unique_ptr<EventWatcher>> Client::NewEventWatcher() const {
  nvmlEventSet_t set = nullptr;
  GPUOP_RETURN_IF_ERROR(lib_->Call(lib_->fn().EventSetCreate, "", &set));
  return std::unique_ptr<EventWatcher>(new EventWatcher(lib_, set));
}

EventWatcher::~EventWatcher() {
  if (set_ != nullptr && lib_->fn().EventSetFree) lib_->fn().EventSetFree.ptr(set_);
}

Result<uint64_t> EventWatcher::Register(unsigned gpu, uint64_t mask) {
  const Library& lib = *lib_;
  const Functions& fn = lib.fn();
  nvmlDevice_t dev = nullptr;
  GPUOP_RETURN_IF_ERROR(lib.Call(fn.DeviceGetHandleByIndex, GpuObject(gpu, ""), gpu, &dev));
  GPUOP_ASSIGN_OR_RETURN(std::string uuid,
                         ReadString(lib, fn.DeviceGetUUID, GpuObject(gpu, ""), dev));
  std::string object = GpuObject(gpu, uuid);
  unsigned long long supported = 0;
  GPUOP_RETURN_IF_ERROR(lib.Call(fn.DeviceGetSupportedEventTypes, object, dev, &supported));
  // NVML rejects the whole mask if one type is unsupported; ask only for the rest.
  uint64_t want = mask & supported;
  if (want == 0) return NotSupported(object + " supports none of the requested NVML events");
  GPUOP_RETURN_IF_ERROR(
      lib.Call(fn.DeviceRegisterEvents, object, dev, static_cast<unsigned long long>(want), set_));
  MutexLock lock(mu_);
  gpus_[dev] = {gpu, uuid};
  return want;
}

Result<std::optional<Event>> EventWatcher::Wait(unsigned timeout_ms) {
  const auto& f = lib_->fn().EventSetWait;
  if (!f) return lib_->Missing(f.symbol, f.feature);
  nvmlEventData_t data{};
  // The v1 wait does not write the instance ids: preset "not a MIG event".
  data.gpuInstanceId = kNoInstance;
  data.computeInstanceId = kNoInstance;
  nvmlReturn_t ret = f.ptr(set_, &data, timeout_ms);
  if (ret == NVML_ERROR_TIMEOUT) return std::optional<Event>();
  if (ret != NVML_SUCCESS) return lib_->Error(ret, "NVML event set", f.symbol);

  Event e;
  e.type = data.eventType;
  e.xid = data.eventData;
  if (data.gpuInstanceId != kNoInstance) e.gi_id = data.gpuInstanceId;
  if (data.computeInstanceId != kNoInstance) e.ci_id = data.computeInstanceId;
  {
    MutexLock lock(mu_);
    auto it = gpus_.find(data.device);
    if (it != gpus_.end()) {
      e.gpu = it->second.index;
      e.uuid = it->second.uuid;
      return std::optional<Event>(std::move(e));
    }
  }
  // A handle we did not register (NVML may report the MIG device's handle).
  const Functions& fn = lib_->fn();
  unsigned index = 0;
  if (fn.DeviceGetIndex && fn.DeviceGetIndex.ptr(data.device, &index) == NVML_SUCCESS) {
    e.gpu = index;
  }
  auto uuid = ReadString(*lib_, fn.DeviceGetUUID, "NVML event", data.device);
  if (uuid.ok()) e.uuid = *uuid;
  return std::optional<Event>(std::move(e));
}

}  // namespace gpuop::nvml
