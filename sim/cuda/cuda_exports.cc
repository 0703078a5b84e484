// libcuda-sim.so: the part of the CUDA driver API (libcuda.so.1's C ABI) that
// gpuop's CUDA check uses, run on the CPU over the simulated node's GPUs.
//
// It reads the same machine and shared state as libnvml-sim.so (state.h):
//  - cuInit fails with CUDA_ERROR_NO_DEVICE while the simulated driver is
//    unloaded or no GPU is visible (visibility.h: device nodes, then
//    CUDA_VISIBLE_DEVICES, both read at cuInit like the real driver);
//  - cuDriverGetVersion answers the CUDA version of the machine's driver, and
//    cuModuleLoadData refuses PTX whose ISA is newer than that CUDA version
//    knows (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), as the real JIT does;
//  - on a lost GPU (XID 79) a new context fails with
//    CUDA_ERROR_DEVICE_UNAVAILABLE, and work in an existing one with the
//    sticky CUDA_ERROR_LAUNCH_FAILED;
//  - "device memory" is host memory behind CUdeviceptr handles, bounds-checked
//    (CUDA_ERROR_ILLEGAL_ADDRESS when a kernel runs off an allocation);
//  - cuModuleLoadData parses the PTX (version, target, entries, parameters,
//    instructions) and accepts only kernels it can run: an element-wise
//    float vector add (out[i] = a[i] + b[i] for i < n). Anything else is
//    CUDA_ERROR_INVALID_PTX. cuLaunchKernel runs it over the launch grid;
//  - a context shows in NVML as a running process on its GPU, and a kernel as
//    utilisation and as busy time GPM reads (GpuRuntime::processes,
//    last_kernel_unix_ms, busy).
//
// A simulator liberty: cuInit re-reads the environment when it changed and no
// context is alive, so tests can point one process at several machines.
//
// Thread-safety: every function may be called from any thread; one process-
// wide mutex serialises them (kernels run under it, on the calling thread).
// The current context is per thread, as in CUDA. No C++ exception crosses the
// C ABI.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"
#include "sim/nvml/visibility.h"

// ---- The ABI (cuda.h): only what this library implements ---------------------

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
} CUresult;

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;
static_assert(sizeof(CUuuid) == 16);
static_assert(sizeof(CUdeviceptr) == 8);

// CUdevice_attribute values this library answers.
constexpr int kAttrMaxThreadsPerBlock = 1;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

using gpuop::sim::Machine;
using gpuop::sim::SimState;
using gpuop::sim::StateStore;

struct CUctx_st;
struct CUmod_st;

enum class ParamType { kU64, kU32, kS32, kF32, kOther };

struct CUfunc_st {
  CUmod_st* module = nullptr;
  std::string name;
  std::vector<ParamType> params;
};

struct CUmod_st {
  CUctx_st* ctx = nullptr;
  bool loaded = true;
  std::vector<std::unique_ptr<CUfunc_st>> functions;
};

struct CUctx_st {
  unsigned generation = 0;  // the session it belongs to
  CUdevice ordinal = 0;
  unsigned gpu = 0;  // machine index
  int retains = 0;   // alive while > 0
  CUresult sticky = CUDA_SUCCESS;
  uint64_t used_bytes = 0;
};

struct CUstream_st;
typedef CUctx_st* CUcontext;
typedef CUmod_st* CUmodule;
typedef CUfunc_st* CUfunction;
typedef CUstream_st* CUstream;

namespace {

// Device memory a context holds before any allocation (its code, stacks,
// heaps): about what a real H100 context shows in nvidia-smi.
constexpr uint64_t kContextOverheadBytes = 512ull << 20;
// This simulator keeps "device memory" in host memory: it refuses more than
// this much in one process, whatever the simulated GPU has.
constexpr uint64_t kHostMemoryCap = 2ull << 30;
constexpr CUdeviceptr kFirstAddress = 0x7f2a00000000ull;
constexpr uint64_t kAlignment = 512;

struct Allocation {
  CUctx_st* ctx = nullptr;
  std::unique_ptr<unsigned char[]> bytes;
  size_t size = 0;
};

struct Session {
  std::unique_ptr<StateStore> store;
  // This process's hold on the driver, from its first context on (a real
  // process keeps /dev/nvidia-uvm open until it exits).
  std::optional<gpuop::sim::DriverHolder> holder;
  std::vector<unsigned> devices;  // CUDA ordinal -> machine GPU index
  std::string env_key;
  unsigned generation = 0;
  const Machine& machine() const { return store->machine(); }
};

struct Driver {
  std::mutex mu;
  std::unique_ptr<Session> session;
  unsigned generations = 0;
  // Every context and module ever made stays allocated, so that a stale
  // handle is recognised rather than dereferenced into freed memory.
  std::vector<std::unique_ptr<CUctx_st>> contexts;
  std::vector<std::unique_ptr<CUmod_st>> modules;
  std::map<CUdeviceptr, Allocation> allocations;
  CUdeviceptr next_address = kFirstAddress;
  uint64_t allocated_bytes = 0;
};

Driver& Drv() {
  static Driver* d = new Driver;  // never destroyed: threads may call in at exit
  return *d;
}

thread_local CUctx_st* tls_current = nullptr;

template <typename F>
CUresult Guard(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : std::string("=") + v;
}

std::string EnvKey() {
  std::string key;
  for (const char* name :
       {"GPUOP_SIM_MACHINE", "GPUOP_SIM_STATE", "GPUOP_SIM_SEED", "GPUOP_SIM_DRIVER",
        "GPUOP_SIM_VISIBLE", "GPUOP_SIM_DEV_DIR", "CUDA_VISIBLE_DEVICES"}) {
    key += std::string(name) + Env(name) + "\n";
  }
  return key;
}

// The newest PTX ISA (10*major + minor) the JIT of a CUDA version accepts.
int MaxPtxIsa(int cuda_version) {
  static constexpr std::pair<int, int> kTable[] = {
      {13010, 91}, {13000, 90}, {12090, 88}, {12080, 87}, {12070, 86}, {12060, 85},
      {12050, 85}, {12040, 84}, {12030, 83}, {12020, 82}, {12010, 81}, {12000, 80},
      {11080, 78}, {11070, 77}, {11060, 76}, {11050, 75}, {11040, 74}, {11030, 73},
      {11020, 72}, {11010, 71}, {11000, 70}, {10020, 65}, {10010, 64}, {10000, 63}};
  for (const auto& [cuda, isa] : kTable) {
    if (cuda_version >= cuda) return isa;
  }
  return 60;
}

bool AnyContextAlive(const Driver& d) {
  return std::any_of(d.contexts.begin(), d.contexts.end(),
                     [](const auto& c) { return c->retains > 0; });
}

// REQUIRES: d.mu held.
CUresult ReadState(Session& s, std::shared_ptr<const SimState>* out) {
  auto r = s.store->Read();
  if (!r.ok()) {
    std::fprintf(stderr, "cuda-sim: %s\n", r.status().ToString().c_str());
    return CUDA_ERROR_UNKNOWN;
  }
  *out = *r;
  return CUDA_SUCCESS;
}

// REQUIRES: d.mu held.
CUresult RequireSession(Driver& d) { return d.session ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

// REQUIRES: d.mu held and a session.
CUresult ResolveDevice(Driver& d, CUdevice dev, unsigned* gpu) {
  if (dev < 0 || static_cast<size_t>(dev) >= d.session->devices.size()) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *gpu = d.session->devices[static_cast<size_t>(dev)];
  return CUDA_SUCCESS;
}

// Whether the GPU can take work now. REQUIRES: d.mu held and a session.
CUresult GpuHealth(Driver& d, unsigned gpu, CUresult when_bad) {
  std::shared_ptr<const SimState> state;
  if (CUresult r = ReadState(*d.session, &state); r != CUDA_SUCCESS) return r;
  if (!state->driver_loaded || gpu >= state->gpus.size() || state->gpus[gpu].lost) {
    return when_bad;
  }
  return CUDA_SUCCESS;
}

// The calling thread's live context, checked against the GPU's health; a
// failure becomes the context's sticky error. REQUIRES: d.mu held.
CUresult CurrentContext(Driver& d, CUctx_st** out) {
  if (CUresult r = RequireSession(d); r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = tls_current;
  if (ctx == nullptr || ctx->retains <= 0 || ctx->generation != d.session->generation) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (ctx->sticky != CUDA_SUCCESS) return ctx->sticky;
  if (CUresult r = GpuHealth(d, ctx->gpu, CUDA_ERROR_LAUNCH_FAILED); r != CUDA_SUCCESS) {
    ctx->sticky = r;
    return r;
  }
  *out = ctx;
  return CUDA_SUCCESS;
}

// The prologue of the exported functions, outermost first: Locked runs `f(d)`
// under the driver's mutex with exceptions caught; WithSession first answers
// CUDA_ERROR_NOT_INITIALIZED before cuInit; WithDevice then resolves `dev`
// (CUDA_ERROR_INVALID_DEVICE) and runs `f(d, gpu)`; WithContext instead
// checks the calling thread's context (CurrentContext) and runs `f(d, ctx)`.
template <typename F>
CUresult Locked(F&& f) noexcept {
  return Guard([&]() -> CUresult {
    Driver& d = Drv();
    std::lock_guard<std::mutex> l(d.mu);
    return f(d);
  });
}

template <typename F>
CUresult WithSession(F&& f) noexcept {
  return Locked([&](Driver& d) -> CUresult {
    if (CUresult r = RequireSession(d); r != CUDA_SUCCESS) return r;
    return f(d);
  });
}

template <typename F>
CUresult WithDevice(CUdevice dev, F&& f) noexcept {
  return WithSession([&](Driver& d) -> CUresult {
    unsigned gpu = 0;
    if (CUresult r = ResolveDevice(d, dev, &gpu); r != CUDA_SUCCESS) return r;
    return f(d, gpu);
  });
}

template <typename F>
CUresult WithContext(F&& f) noexcept {
  return Locked([&](Driver& d) -> CUresult {
    CUctx_st* ctx = nullptr;
    if (CUresult r = CurrentContext(d, &ctx); r != CUDA_SUCCESS) return r;
    return f(d, ctx);
  });
}

// Runs `fn` on the shared state; failures are logged, not returned: the
// telemetry is a side effect, the CUDA call itself succeeded.
template <typename F>
void RecordInState(Session& s, F&& fn) {
  gpuop::Status st = s.store->Update([&](SimState& state) -> gpuop::Status {
    fn(state);
    return gpuop::Status::Ok();
  });
  if (!st.ok()) std::fprintf(stderr, "cuda-sim: recording GPU work: %s\n", st.ToString().c_str());
}

void SetProcess(SimState& state, unsigned gpu, uint32_t pid, std::optional<uint64_t> used) {
  if (gpu >= state.gpus.size()) return;
  auto& procs = state.gpus[gpu].processes;
  procs.erase(std::remove_if(procs.begin(), procs.end(),
                             [&](const gpuop::sim::SimProcess& p) { return p.pid == pid; }),
              procs.end());
  if (used) procs.push_back({pid, *used});
}

// An allocation holding [ptr, ptr + size), or null. REQUIRES: d.mu held.
Allocation* FindRange(Driver& d, CUdeviceptr ptr, uint64_t size) {
  auto it = d.allocations.upper_bound(ptr);
  if (it == d.allocations.begin()) return nullptr;
  --it;
  const CUdeviceptr base = it->first;
  if (ptr < base || size > it->second.size || ptr - base > it->second.size - size) return nullptr;
  return &it->second;
}

void FreeContextMemory(Driver& d, CUctx_st* ctx) {
  for (auto it = d.allocations.begin(); it != d.allocations.end();) {
    if (it->second.ctx == ctx) {
      d.allocated_bytes -= it->second.size;
      it = d.allocations.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& m : d.modules) {
    if (m->ctx == ctx) m->loaded = false;
  }
}

// ---- PTX ----------------------------------------------------------------------

struct PtxEntry {
  std::string name;
  std::vector<ParamType> params;
  std::vector<std::string> opcodes;  // "ld.global.f32", "add.f32", ...
};

struct PtxModule {
  int isa = 0;        // 10 * major + minor of .version
  int target_sm = 0;  // sm_NN of .target
  std::vector<PtxEntry> entries;
};

std::string StripComments(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
      out += ' ';
    } else {
      out += text[i++];
    }
  }
  return out;
}

bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' ||
         c == '%';
}

// Splits into identifiers/numbers (with dots) and single punctuation characters.
std::vector<std::string> Tokenize(const std::string& text) {
  std::vector<std::string> tokens;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (IsIdentChar(c)) {
      size_t j = i;
      while (j < text.size() && IsIdentChar(text[j])) ++j;
      tokens.emplace_back(text.substr(i, j - i));
      i = j;
    } else {
      tokens.emplace_back(1, c);
      ++i;
    }
  }
  return tokens;
}

ParamType ParseParamType(const std::string& t) {
  if (t == ".u64" || t == ".b64" || t == ".s64") return ParamType::kU64;
  if (t == ".u32" || t == ".b32") return ParamType::kU32;
  if (t == ".s32") return ParamType::kS32;
  if (t == ".f32") return ParamType::kF32;
  return ParamType::kOther;
}

// CUDA_SUCCESS and the module, or CUDA_ERROR_INVALID_PTX for text this
// simulator cannot read.
CUresult ParsePtx(std::string_view image, PtxModule* out) {
  const std::vector<std::string> t = Tokenize(StripComments(image));
  PtxModule m;
  bool address_64 = false;
  size_t i = 0;
  auto at = [&](size_t k) -> const std::string& {
    static const std::string kEmpty;
    return k < t.size() ? t[k] : kEmpty;
  };
  while (i < t.size()) {
    const std::string& tok = t[i];
    if (tok == ".version") {
      const std::string& v = at(i + 1);
      unsigned major = 0, minor = 0;
      char tail = 0;
      if (std::sscanf(v.c_str(), "%u.%u%c", &major, &minor, &tail) != 2 || minor > 9) {
        return CUDA_ERROR_INVALID_PTX;
      }
      m.isa = static_cast<int>(major * 10 + minor);
      i += 2;
    } else if (tok == ".target") {
      const std::string& v = at(i + 1);
      if (v.rfind("sm_", 0) != 0) return CUDA_ERROR_INVALID_PTX;
      m.target_sm = std::atoi(v.c_str() + 3);
      i += 2;
      while (at(i) == ",") i += 2;  // ", texmode_independent", ...
    } else if (tok == ".address_size") {
      address_64 = at(i + 1) == "64";
      i += 2;
    } else if (tok == ".visible" || tok == ".weak" || tok == ".extern") {
      ++i;
    } else if (tok == ".entry") {
      PtxEntry e;
      e.name = at(i + 1);
      if (e.name.empty() || !IsIdentChar(e.name[0]) || at(i + 2) != "(") {
        return CUDA_ERROR_INVALID_PTX;
      }
      i += 3;
      // Parameters: .param <type> [.ptr ...] [.align N] name [, ...] )
      while (i < t.size() && t[i] != ")") {
        if (t[i] != ".param") return CUDA_ERROR_INVALID_PTX;
        e.params.push_back(ParseParamType(at(i + 1)));
        i += 2;
        while (i < t.size() && t[i] != "," && t[i] != ")") ++i;
        if (at(i) == ",") ++i;
      }
      if (at(i) != ")") return CUDA_ERROR_INVALID_PTX;
      ++i;
      while (i < t.size() && t[i] != "{") {  // performance directives (.maxntid ...)
        if (t[i] == ";" || t[i] == "}") return CUDA_ERROR_INVALID_PTX;
        ++i;
      }
      if (at(i) != "{") return CUDA_ERROR_INVALID_PTX;
      ++i;
      int depth = 1;
      bool statement_start = true;
      while (i < t.size() && depth > 0) {
        const std::string& s = t[i];
        if (s == "{") {
          ++depth;
          statement_start = true;
        } else if (s == "}") {
          --depth;
          statement_start = true;
        } else if (s == ";") {
          statement_start = true;
        } else if (statement_start) {
          if (s == "@") {  // a predicate guard: @%p or @!%p
            i += at(i + 1) == "!" ? 3 : 2;
            continue;
          }
          if (at(i + 1) == ":") {  // a label
            i += 2;
            continue;
          }
          if (s[0] != '.') e.opcodes.push_back(s);
          statement_start = false;
        }
        ++i;
      }
      if (depth != 0) return CUDA_ERROR_INVALID_PTX;
      m.entries.push_back(std::move(e));
    } else {
      ++i;
    }
  }
  if (m.isa == 0 || m.target_sm == 0 || !address_64 || m.entries.empty()) {
    return CUDA_ERROR_INVALID_PTX;
  }
  *out = std::move(m);
  return CUDA_SUCCESS;
}

// The one kernel shape this simulator runs: (const float* a, const float* b,
// float* out, int n), bounds-checked, out[i] = a[i] + b[i].
bool IsVectorAdd(const PtxEntry& e) {
  auto count = [&](std::string_view prefix) {
    return std::count_if(e.opcodes.begin(), e.opcodes.end(),
                         [&](const std::string& op) { return op.rfind(prefix, 0) == 0; });
  };
  bool params = e.params.size() == 4 && e.params[0] == ParamType::kU64 &&
                e.params[1] == ParamType::kU64 && e.params[2] == ParamType::kU64 &&
                (e.params[3] == ParamType::kU32 || e.params[3] == ParamType::kS32);
  return params && count("ld.global.f32") == 2 && count("st.global.f32") == 1 &&
         count("add.f32") == 1 && count("setp.") >= 1 && count("ret") >= 1 &&
         count("mul.f32") == 0 && count("sub.f32") == 0 && count("fma.") == 0;
}

const char* ErrorName(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
      return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_PTX:
      return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_FAILED:
      return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_UNKNOWN:
      return "CUDA_ERROR_UNKNOWN";
  }
  return nullptr;
}

const char* ErrorText(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return "no error";
    case CUDA_ERROR_INVALID_VALUE:
      return "invalid argument";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "initialization error";
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return "CUDA-capable device(s) is/are busy or unavailable";
    case CUDA_ERROR_NO_DEVICE:
      return "no CUDA-capable device is detected";
    case CUDA_ERROR_INVALID_DEVICE:
      return "invalid device ordinal";
    case CUDA_ERROR_INVALID_IMAGE:
      return "device kernel image is invalid";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "invalid device context";
    case CUDA_ERROR_INVALID_PTX:
      return "a PTX JIT compilation failed";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return "the provided PTX was compiled with an unsupported toolchain.";
    case CUDA_ERROR_INVALID_HANDLE:
      return "invalid resource handle";
    case CUDA_ERROR_NOT_FOUND:
      return "named symbol not found";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "an illegal memory access was encountered";
    case CUDA_ERROR_LAUNCH_FAILED:
      return "unspecified launch failure";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "operation not supported";
    case CUDA_ERROR_UNKNOWN:
      return "unknown error";
  }
  return nullptr;
}

}  // namespace

extern "C" {

// ---- Initialisation and version ------------------------------------------------

CUresult cuInit(unsigned int flags) {
  return Guard([&]() -> CUresult {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    Driver& d = Drv();
    std::lock_guard<std::mutex> l(d.mu);
    const std::string key = EnvKey();
    if (d.session && (d.session->env_key == key || AnyContextAlive(d))) {
      std::shared_ptr<const SimState> state;
      if (CUresult r = ReadState(*d.session, &state); r != CUDA_SUCCESS) return r;
      return state->driver_loaded ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
    }
    d.session.reset();
    const char* driver = std::getenv("GPUOP_SIM_DRIVER");
    if (driver != nullptr && std::strcmp(driver, "unloaded") == 0) return CUDA_ERROR_NO_DEVICE;
    auto store = gpuop::sim::OpenStateFromEnv(false);
    if (!store.ok()) {
      std::fprintf(stderr, "cuda-sim: cannot start the simulated driver: %s\n",
                   store.status().message().c_str());
      return CUDA_ERROR_UNKNOWN;
    }
    auto session = std::make_unique<Session>();
    session->store = std::move(store).value();
    session->env_key = key;
    std::shared_ptr<const SimState> state;
    if (CUresult r = ReadState(*session, &state); r != CUDA_SUCCESS) return r;
    if (!state->driver_loaded) return CUDA_ERROR_NO_DEVICE;
    std::vector<unsigned> visible = gpuop::sim::VisibleGpusFromEnv(session->machine());
    if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES"); cvd != nullptr) {
      visible = gpuop::sim::ApplyCudaVisibleDevices(session->machine(), visible, cvd);
    }
    if (visible.empty()) return CUDA_ERROR_NO_DEVICE;
    session->devices = std::move(visible);
    session->generation = ++d.generations;
    d.session = std::move(session);
    return CUDA_SUCCESS;
  });
}

CUresult cuDriverGetVersion(int* driverVersion) {
  return Guard([&]() -> CUresult {
    if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
    Driver& d = Drv();
    std::lock_guard<std::mutex> l(d.mu);
    if (d.session) {
      auto st = d.session->store->Read();
      *driverVersion = st.ok() ? gpuop::sim::LoadedCudaVersion(d.session->machine(), **st)
                               : d.session->machine().cuda_driver_version;
      return CUDA_SUCCESS;
    }
    // Like the real library, this works before cuInit: the version is the library's.
    const char* machine = std::getenv("GPUOP_SIM_MACHINE");
    const char* seed = std::getenv("GPUOP_SIM_SEED");
    auto m = gpuop::sim::LoadMachine(machine && *machine ? machine : "dgx-h100", seed ? seed : "");
    if (!m.ok()) return CUDA_ERROR_UNKNOWN;
    *driverVersion = m->cuda_driver_version;
    return CUDA_SUCCESS;
  });
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = ErrorName(error);
  return *pStr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = ErrorText(error);
  return *pStr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// ---- Devices ---------------------------------------------------------------------

CUresult cuDeviceGetCount(int* count) {
  return WithSession([&](Driver& d) -> CUresult {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = static_cast<int>(d.session->devices.size());
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return WithSession([&](Driver& d) -> CUresult {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    unsigned gpu = 0;
    if (CUresult r = ResolveDevice(d, ordinal, &gpu); r != CUDA_SUCCESS) return r;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  return WithDevice(dev, [&](Driver& d, unsigned gpu) -> CUresult {
    if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(name, static_cast<size_t>(len), "%s",
                  d.session->machine().gpus[gpu].model.name.c_str());
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  return WithDevice(dev, [&](Driver& d, unsigned gpu) -> CUresult {
    if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const std::string& text = d.session->machine().gpus[gpu].uuid;  // "GPU-xxxxxxxx-..."
    unsigned char bytes[16];
    if (text.size() < 4 || !gpuop::sim::ParseUuidBytes(std::string_view(text).substr(4), bytes)) {
      return CUDA_ERROR_UNKNOWN;
    }
    std::memcpy(uuid->bytes, bytes, sizeof(bytes));
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  return WithDevice(dev, [&](Driver& d, unsigned gpu) -> CUresult {
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *bytes = static_cast<size_t>(d.session->machine().gpus[gpu].model.memory_mib) << 20;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetAttribute(int* pi, int attrib, CUdevice dev) {
  return WithDevice(dev, [&](Driver& d, unsigned gpu) -> CUresult {
    if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const auto& model = d.session->machine().gpus[gpu].model;
    switch (attrib) {
      case kAttrMaxThreadsPerBlock:
        *pi = 1024;
        return CUDA_SUCCESS;
      case kAttrMultiprocessorCount:
        *pi = static_cast<int>(model.multiprocessors);
        return CUDA_SUCCESS;
      case kAttrComputeCapabilityMajor:
        *pi = model.cc_major;
        return CUDA_SUCCESS;
      case kAttrComputeCapabilityMinor:
        *pi = model.cc_minor;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

// ---- Contexts --------------------------------------------------------------------

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return WithDevice(dev, [&](Driver& d, unsigned gpu) -> CUresult {
    if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUctx_st* ctx = nullptr;
    for (auto& c : d.contexts) {
      if (c->generation == d.session->generation && c->ordinal == dev) ctx = c.get();
    }
    if (ctx != nullptr && ctx->retains > 0) {
      ++ctx->retains;
      *pctx = ctx;
      return CUDA_SUCCESS;
    }
    if (CUresult r = GpuHealth(d, gpu, CUDA_ERROR_DEVICE_UNAVAILABLE); r != CUDA_SUCCESS) return r;
    if (ctx == nullptr) {
      d.contexts.push_back(std::make_unique<CUctx_st>());
      ctx = d.contexts.back().get();
      ctx->generation = d.session->generation;
      ctx->ordinal = dev;
      ctx->gpu = gpu;
    }
    ctx->retains = 1;
    ctx->sticky = CUDA_SUCCESS;
    ctx->used_bytes = kContextOverheadBytes;
    const uint32_t pid = static_cast<uint32_t>(::getpid());
    if (!d.session->holder && d.session->store->shared()) {
      auto h = gpuop::sim::DriverHolder::Acquire(
          d.session->store->dir(),
          "pid " + std::to_string(pid) + " (" + program_invocation_short_name + ")");
      if (h.ok())
        d.session->holder.emplace(std::move(h).value());
      else
        std::fprintf(stderr, "cuda-sim: %s\n", h.status().ToString().c_str());
    }
    RecordInState(*d.session, [&](SimState& s) { SetProcess(s, gpu, pid, ctx->used_bytes); });
    *pctx = ctx;
    return CUDA_SUCCESS;
  });
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return WithDevice(dev, [&](Driver& d, unsigned gpu) -> CUresult {
    for (auto& c : d.contexts) {
      if (c->generation != d.session->generation || c->ordinal != dev || c->retains <= 0) continue;
      if (--c->retains > 0) return CUDA_SUCCESS;
      FreeContextMemory(d, c.get());
      if (tls_current == c.get()) tls_current = nullptr;
      const uint32_t pid = static_cast<uint32_t>(::getpid());
      RecordInState(*d.session, [&](SimState& s) { SetProcess(s, gpu, pid, std::nullopt); });
      return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_CONTEXT;
  });
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  return WithSession([&](Driver& d) -> CUresult {
    if (ctx == nullptr) {
      tls_current = nullptr;
      return CUDA_SUCCESS;
    }
    bool known = std::any_of(d.contexts.begin(), d.contexts.end(),
                             [&](const auto& c) { return c.get() == ctx; });
    if (!known || ctx->retains <= 0 || ctx->generation != d.session->generation) {
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    tls_current = ctx;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxSynchronize(void) {
  // Kernels ran at launch; what is left is their error.
  return WithContext([](Driver&, CUctx_st*) -> CUresult { return CUDA_SUCCESS; });
}

// ---- Modules ---------------------------------------------------------------------

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  return WithContext([&](Driver& d, CUctx_st* ctx) -> CUresult {
    if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const char* text = static_cast<const char*>(image);
    if (std::strncmp(text,
                     "\x7f"
                     "ELF",
                     4) == 0)
      return CUDA_ERROR_INVALID_IMAGE;  // cubin: not simulated
    PtxModule ptx;
    if (CUresult r = ParsePtx(text, &ptx); r != CUDA_SUCCESS) return r;
    const Machine& m = d.session->machine();
    if (ptx.isa > MaxPtxIsa(m.cuda_driver_version)) return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    const auto& model = m.gpus[ctx->gpu].model;
    if (ptx.target_sm > model.cc_major * 10 + model.cc_minor) return CUDA_ERROR_INVALID_PTX;
    auto mod = std::make_unique<CUmod_st>();
    mod->ctx = ctx;
    for (const PtxEntry& e : ptx.entries) {
      if (!IsVectorAdd(e)) {
        std::fprintf(stderr,
                     "cuda-sim: kernel %s is not one this simulator can run (only an element-wise "
                     "float vector add)\n",
                     e.name.c_str());
        return CUDA_ERROR_INVALID_PTX;
      }
      auto fn = std::make_unique<CUfunc_st>();
      fn->module = mod.get();
      fn->name = e.name;
      fn->params = e.params;
      mod->functions.push_back(std::move(fn));
    }
    *module = mod.get();
    d.modules.push_back(std::move(mod));
    return CUDA_SUCCESS;
  });
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  return WithSession([&](Driver& d) -> CUresult {
    if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    bool known = std::any_of(d.modules.begin(), d.modules.end(),
                             [&](const auto& m) { return m.get() == hmod; });
    if (!known || !hmod->loaded) return CUDA_ERROR_INVALID_HANDLE;
    for (auto& fn : hmod->functions) {
      if (fn->name == name) {
        *hfunc = fn.get();
        return CUDA_SUCCESS;
      }
    }
    return CUDA_ERROR_NOT_FOUND;
  });
}

CUresult cuModuleUnload(CUmodule hmod) {
  return WithSession([&](Driver& d) -> CUresult {
    bool known = std::any_of(d.modules.begin(), d.modules.end(),
                             [&](const auto& m) { return m.get() == hmod; });
    if (!known || !hmod->loaded) return CUDA_ERROR_INVALID_HANDLE;
    hmod->loaded = false;
    return CUDA_SUCCESS;
  });
}

// ---- Memory ----------------------------------------------------------------------

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return WithContext([&](Driver& d, CUctx_st* ctx) -> CUresult {
    if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    const uint64_t device_bytes = d.session->machine().gpus[ctx->gpu].model.memory_mib << 20;
    if (bytesize > device_bytes - std::min(device_bytes, ctx->used_bytes) ||
        bytesize > kHostMemoryCap - std::min(kHostMemoryCap, d.allocated_bytes)) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    Allocation a;
    a.ctx = ctx;
    a.size = bytesize;
    a.bytes.reset(new unsigned char[bytesize]());
    const CUdeviceptr address = d.next_address;
    d.next_address += (bytesize + 2 * kAlignment - 1) / kAlignment * kAlignment;  // + a gap
    d.allocated_bytes += bytesize;
    ctx->used_bytes += bytesize;
    d.allocations.emplace(address, std::move(a));
    *dptr = address;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return WithContext([&](Driver& d, CUctx_st* ctx) -> CUresult {
    auto it = d.allocations.find(dptr);
    if (it == d.allocations.end() || it->second.ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
    d.allocated_bytes -= it->second.size;
    ctx->used_bytes -= it->second.size;
    d.allocations.erase(it);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  return WithContext([&](Driver& d, CUctx_st*) -> CUresult {
    if (ByteCount == 0) return CUDA_SUCCESS;
    Allocation* a = FindRange(d, dstDevice, ByteCount);
    if (a == nullptr || srcHost == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto base = d.allocations.upper_bound(dstDevice);
    --base;
    std::memcpy(a->bytes.get() + (dstDevice - base->first), srcHost, ByteCount);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return WithContext([&](Driver& d, CUctx_st*) -> CUresult {
    if (ByteCount == 0) return CUDA_SUCCESS;
    Allocation* a = FindRange(d, srcDevice, ByteCount);
    if (a == nullptr || dstHost == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto base = d.allocations.upper_bound(srcDevice);
    --base;
    std::memcpy(dstHost, a->bytes.get() + (srcDevice - base->first), ByteCount);
    return CUDA_SUCCESS;
  });
}

// ---- Execution -------------------------------------------------------------------

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void** kernelParams, void** extra) {
  return WithContext([&](Driver& d, CUctx_st* ctx) -> CUresult {
    bool known = false;
    for (const auto& m : d.modules) {
      for (const auto& fn : m->functions) known = known || fn.get() == f;
    }
    if (!known || !f->module->loaded) return CUDA_ERROR_INVALID_HANDLE;
    if (f->module->ctx != ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (hStream != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // the default stream only
    const uint64_t block = uint64_t{blockDimX} * blockDimY * blockDimZ;
    if (gridDimX == 0 || gridDimY == 0 || gridDimZ == 0 || block == 0 || block > 1024 ||
        sharedMemBytes > 48 * 1024 || kernelParams == nullptr || extra != nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < f->params.size(); ++i) {
      if (kernelParams[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    }
    CUdeviceptr a = 0, b = 0, out = 0;
    int32_t n = 0;
    std::memcpy(&a, kernelParams[0], sizeof(a));
    std::memcpy(&b, kernelParams[1], sizeof(b));
    std::memcpy(&out, kernelParams[2], sizeof(out));
    std::memcpy(&n, kernelParams[3], sizeof(n));
    // Thread i = blockIdx.x * blockDim.x + threadIdx.x; the y and z extents
    // repeat the same indices, which write the same values.
    const uint64_t threads = uint64_t{gridDimX} * blockDimX;
    const uint64_t count = n > 0 ? std::min<uint64_t>(threads, static_cast<uint64_t>(n)) : 0;
    if (count > 0) {
      const uint64_t bytes = count * sizeof(float);
      Allocation* pa = FindRange(d, a, bytes);
      Allocation* pb = FindRange(d, b, bytes);
      Allocation* po = FindRange(d, out, bytes);
      if (pa == nullptr || pb == nullptr || po == nullptr) {
        ctx->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;  // the kernel faulted: the context is gone
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      }
      auto offset = [&](CUdeviceptr p) {
        auto it = d.allocations.upper_bound(p);
        --it;
        return p - it->first;
      };
      const unsigned char* sa = pa->bytes.get() + offset(a);
      const unsigned char* sb = pb->bytes.get() + offset(b);
      unsigned char* so = po->bytes.get() + offset(out);
      for (uint64_t i = 0; i < count; ++i) {
        float x = 0, y = 0;
        std::memcpy(&x, sa + i * sizeof(float), sizeof(float));
        std::memcpy(&y, sb + i * sizeof(float), sizeof(float));
        const float z = x + y;
        std::memcpy(so + i * sizeof(float), &z, sizeof(float));
      }
    }
    const unsigned gpu = ctx->gpu;
    const uint64_t used = ctx->used_bytes;
    const uint32_t pid = static_cast<uint32_t>(::getpid());
    const int64_t now = gpuop::NowUnixMillis();
    RecordInState(*d.session, [&](SimState& s) {
      if (gpu >= s.gpus.size()) return;
      s.gpus[gpu].last_kernel_unix_ms = now;
      ++s.gpus[gpu].kernel_launches;
      gpuop::sim::AddBusy(s.gpus[gpu].busy, now, now + gpuop::sim::kKernelBusyWindowMs);
      SetProcess(s, gpu, pid, used);
    });
    return CUDA_SUCCESS;
  });
}

}  // extern "C"
