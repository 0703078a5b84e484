#include "sim/nvml/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/files.h"
#include "base/strings.h"

namespace gpuop::sim {
namespace {

using nlohmann::json;

constexpr int kStateVersion = 1;

json BusyToJson(const BusyTime& b) {
  return {{"accountedMs", b.accounted_ms}, {"untilUnixMs", b.busy_until_unix_ms}};
}

// Absent in files written before GPM was simulated.
BusyTime BusyFromJson(const json& parent) {
  BusyTime b;
  if (!parent.contains("busy")) return b;
  const json& j = parent.at("busy");
  b.accounted_ms = j.at("accountedMs").get<uint64_t>();
  b.busy_until_unix_ms = j.at("untilUnixMs").get<int64_t>();
  return b;
}

json GiToJson(const GiRecord& gi) {
  json cis = json::array();
  for (const auto& ci : gi.cis) {
    cis.push_back({{"id", ci.id},
                   {"profile", ci.profile},
                   {"slices", ci.slices},
                   {"start", ci.start},
                   {"serial", ci.serial}});
  }
  return {{"id", gi.id},
          {"profileId", gi.profile_id},
          {"start", gi.start},
          {"size", gi.size},
          {"serial", gi.serial},
          {"cis", cis},
          {"busy", BusyToJson(gi.busy)}};
}

GiRecord GiFromJson(const json& j) {
  GiRecord gi;
  gi.id = j.at("id").get<unsigned>();
  gi.profile_id = j.at("profileId").get<unsigned>();
  gi.start = j.at("start").get<unsigned>();
  gi.size = j.at("size").get<unsigned>();
  gi.serial = j.at("serial").get<uint64_t>();
  for (const auto& c : j.at("cis")) {
    CiRecord ci;
    ci.id = c.at("id").get<unsigned>();
    ci.profile = c.at("profile").get<unsigned>();
    ci.slices = c.at("slices").get<unsigned>();
    ci.start = c.at("start").get<unsigned>();
    ci.serial = c.at("serial").get<uint64_t>();
    gi.cis.push_back(ci);
  }
  gi.busy = BusyFromJson(j);
  return gi;
}

json ProcessesToJson(const std::vector<SimProcess>& processes) {
  json out = json::array();
  for (const auto& p : processes) out.push_back({{"pid", p.pid}, {"usedBytes", p.used_bytes}});
  return out;
}

Status CheckGpu(const Machine& m, const SimState& s, unsigned gpu) {
  if (gpu >= m.gpus.size() || gpu >= s.gpus.size()) {
    return NotFound("GPU " + std::to_string(gpu) + " does not exist: machine " + m.name + " has " +
                    std::to_string(m.gpus.size()) + " GPUs (0-" +
                    std::to_string(m.gpus.size() - 1) + ")");
  }
  return Status::Ok();
}

std::string GpuName(const Machine& m, unsigned gpu) {
  return "GPU " + std::to_string(gpu) + " (" + m.gpus[gpu].model.name + ")";
}

}  // namespace

void SimState::AddEvent(unsigned gpu, uint64_t type, uint64_t data, unsigned gi, unsigned ci) {
  SimEvent e;
  e.seq = ++last_seq;
  e.gpu = gpu;
  e.type = type;
  e.data = data;
  e.gi = gi;
  e.ci = ci;
  events.push_back(e);
  if (events.size() > kMaxEvents) {
    events.erase(events.begin(), events.begin() + static_cast<long>(events.size() - kMaxEvents));
  }
}

SimState InitialState(const Machine& machine, int64_t now_unix_ms) {
  SimState s;
  s.machine = machine.name;
  s.created_unix_ms = now_unix_ms;
  for (const auto& g : machine.gpus) {
    s.gpu_uuids.push_back(g.uuid);
    GpuRuntime r;
    r.mig_current = r.mig_pending = g.mig_enabled_at_boot;
    s.gpus.push_back(r);
  }
  return s;
}

std::string SerializeState(const SimState& s) {
  json gpus = json::array();
  for (const auto& g : s.gpus) {
    json gis = json::array();
    for (const auto& gi : g.gis) gis.push_back(GiToJson(gi));
    gpus.push_back({{"migCurrent", g.mig_current},
                    {"migPending", g.mig_pending},
                    {"lost", g.lost},
                    {"ecc",
                     {{"sbeVolatile", g.ecc.sbe_volatile},
                      {"sbeAggregate", g.ecc.sbe_aggregate},
                      {"dbeVolatile", g.ecc.dbe_volatile},
                      {"dbeAggregate", g.ecc.dbe_aggregate}}},
                    {"remappedCorrectable", g.remapped_correctable},
                    {"remappedUncorrectable", g.remapped_uncorrectable},
                    {"remapPending", g.remap_pending},
                    {"pcieReplays", g.pcie_replays},
                    {"recoveryAction", g.recovery_action},
                    {"migCreates", g.mig_creates},
                    {"migDestroys", g.mig_destroys},
                    {"migCreateFailsAfter", g.mig_create_fails_after},
                    {"gpuInstances", gis},
                    {"processes", ProcessesToJson(g.processes)},
                    {"lastKernelUnixMs", g.last_kernel_unix_ms},
                    {"kernelLaunches", g.kernel_launches},
                    {"busy", BusyToJson(g.busy)}});
  }
  json events = json::array();
  for (const auto& e : s.events) {
    events.push_back({{"seq", e.seq},
                      {"gpu", e.gpu},
                      {"type", e.type},
                      {"data", e.data},
                      {"gi", e.gi},
                      {"ci", e.ci}});
  }
  json j = {{"version", kStateVersion},
            {"machine", s.machine},
            {"gpuUuids", s.gpu_uuids},
            {"createdUnixMs", s.created_unix_ms},
            {"driverLoaded", s.driver_loaded},
            {"uvmLoaded", s.uvm_loaded},
            {"modesetLoaded", s.modeset_loaded},
            {"driverVersion", s.driver_version},
            {"nextSerial", s.next_serial},
            {"lastSeq", s.last_seq},
            {"gpus", gpus},
            {"events", events}};
  return j.dump(1) + "\n";
}

Result<SimState> ParseState(std::string_view text, const std::string& origin) {
  const std::string fix = "; remove it (and its directory's lock) to start from a fresh state";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("state file " + origin + " is not valid JSON" + fix);
  try {
    if (j.at("version").get<int>() != kStateVersion) {
      return InvalidArgument("state file " + origin + " has version " + j.at("version").dump() +
                             ", this simulator writes version " + std::to_string(kStateVersion) +
                             fix);
    }
    SimState s;
    s.machine = j.at("machine").get<std::string>();
    s.gpu_uuids = j.at("gpuUuids").get<std::vector<std::string>>();
    s.created_unix_ms = j.at("createdUnixMs").get<int64_t>();
    s.driver_loaded = j.at("driverLoaded").get<bool>();
    // Absent in files written before the modules were told apart.
    s.uvm_loaded = j.value("uvmLoaded", s.driver_loaded);
    s.modeset_loaded = j.value("modesetLoaded", s.driver_loaded);
    s.driver_version = j.value("driverVersion", std::string());
    s.next_serial = j.at("nextSerial").get<uint64_t>();
    s.last_seq = j.at("lastSeq").get<uint64_t>();
    for (const auto& g : j.at("gpus")) {
      GpuRuntime r;
      r.mig_current = g.at("migCurrent").get<bool>();
      r.mig_pending = g.at("migPending").get<bool>();
      r.lost = g.at("lost").get<bool>();
      const auto& ecc = g.at("ecc");
      r.ecc.sbe_volatile = ecc.at("sbeVolatile").get<uint64_t>();
      r.ecc.sbe_aggregate = ecc.at("sbeAggregate").get<uint64_t>();
      r.ecc.dbe_volatile = ecc.at("dbeVolatile").get<uint64_t>();
      r.ecc.dbe_aggregate = ecc.at("dbeAggregate").get<uint64_t>();
      r.remapped_correctable = g.at("remappedCorrectable").get<unsigned>();
      r.remapped_uncorrectable = g.at("remappedUncorrectable").get<unsigned>();
      r.remap_pending = g.at("remapPending").get<bool>();
      r.pcie_replays = g.at("pcieReplays").get<unsigned>();
      // Absent in files written before the field existed.
      r.recovery_action = g.value("recoveryAction", 0u);
      r.mig_creates = g.value("migCreates", uint64_t{0});
      r.mig_destroys = g.value("migDestroys", uint64_t{0});
      r.mig_create_fails_after = g.value("migCreateFailsAfter", int64_t{-1});
      for (const auto& gi : g.at("gpuInstances")) r.gis.push_back(GiFromJson(gi));
      if (g.contains("processes")) {
        for (const auto& p : g.at("processes")) {
          r.processes.push_back({p.at("pid").get<uint32_t>(), p.at("usedBytes").get<uint64_t>()});
        }
      }
      r.last_kernel_unix_ms = g.value("lastKernelUnixMs", int64_t{0});
      r.kernel_launches = g.value("kernelLaunches", uint64_t{0});
      r.busy = BusyFromJson(g);
      s.gpus.push_back(std::move(r));
    }
    for (const auto& e : j.at("events")) {
      SimEvent ev;
      ev.seq = e.at("seq").get<uint64_t>();
      ev.gpu = e.at("gpu").get<unsigned>();
      ev.type = e.at("type").get<uint64_t>();
      ev.data = e.at("data").get<uint64_t>();
      ev.gi = e.at("gi").get<unsigned>();
      ev.ci = e.at("ci").get<unsigned>();
      s.events.push_back(ev);
    }
    if (s.gpus.size() != s.gpu_uuids.size()) {
      return InvalidArgument("state file " + origin + " lists " +
                             std::to_string(s.gpu_uuids.size()) + " GPU UUIDs but " +
                             std::to_string(s.gpus.size()) + " GPUs" + fix);
    }
    return s;
  } catch (const json::exception& e) {
    return InvalidArgument("state file " + origin + " is malformed (" + e.what() + ")" + fix);
  }
}

Status CheckStateMatches(const SimState& s, const Machine& m, const std::string& origin) {
  std::vector<std::string> uuids;
  for (const auto& g : m.gpus) uuids.push_back(g.uuid);
  if (s.machine == m.name && s.gpu_uuids.size() == uuids.size() && s.gpu_uuids != uuids) {
    return FailedPrecondition("state file " + origin + " belongs to another node's '" + m.name +
                              "' (its GPU UUIDs differ: was GPUOP_SIM_SEED different?); point "
                              "GPUOP_SIM_STATE at another directory or remove it");
  }
  if (s.machine != m.name || s.gpu_uuids != uuids) {
    return FailedPrecondition("state file " + origin + " belongs to machine '" + s.machine +
                              "' with " + std::to_string(s.gpu_uuids.size()) +
                              " GPUs, not to GPUOP_SIM_MACHINE '" + m.name + "' with " +
                              std::to_string(m.gpus.size()) +
                              " GPUs; point GPUOP_SIM_STATE at another directory or remove it");
  }
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    if (!s.gpus[i].gis.empty() && !LayoutValid(m.gpus[i].model, s.gpus[i].gis)) {
      return FailedPrecondition("state file " + origin + " holds a MIG layout that GPU " +
                                std::to_string(i) + " (" + m.gpus[i].model.name +
                                ") cannot have; remove the file to start afresh");
    }
  }
  return Status::Ok();
}

// ---- StateStore ------------------------------------------------------------

namespace {

// Any user may use the simulated driver, as any user may open a real
// driver's device nodes (mode 0666 by default, NVreg_DeviceFileMode): its
// files are made readable and writable by all, whoever creates them (a
// non-root component such as the node-status exporter runs NVML too).
// chmod by someone else than the owner fails; the owner made it so already.
constexpr mode_t kSharedFileMode = 0666;
constexpr mode_t kSharedDirMode = 0777;

Status MakeSharedDir(const std::string& dir) {
  GPUOP_RETURN_IF_ERROR(MakeDirs(dir, kSharedDirMode));
  (void)::chmod(dir.c_str(), kSharedDirMode);  // MakeDirs' mode is cut by the umask
  return Status::Ok();
}

}  // namespace

StateStore::StateStore(Machine machine, std::string dir)
    : machine_(std::move(machine)),
      dir_(std::move(dir)),
      path_(dir_.empty() ? "" : dir_ + "/state.json"),
      lock_path_(dir_.empty() ? "" : dir_ + "/lock") {}

StateStore::~StateStore() {
  if (cached_fd_ >= 0) ::close(cached_fd_);
}

Result<std::unique_ptr<StateStore>> StateStore::Open(const Machine& machine, const std::string& dir,
                                                     int64_t now_unix_ms) {
  std::unique_ptr<StateStore> store(new StateStore(machine, dir));
  if (dir.empty()) {
    store->cached_ = std::make_shared<SimState>(InitialState(machine, now_unix_ms));
    return store;
  }
  GPUOP_RETURN_IF_ERROR(MakeSharedDir(dir).Annotate("GPUOP_SIM_STATE"));
  GPUOP_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(store->lock_path_, true));
  (void)::chmod(store->lock_path_.c_str(), kSharedFileMode);
  std::lock_guard<std::mutex> l(store->mu_);
  if (!PathExists(store->path_)) {
    GPUOP_RETURN_IF_ERROR(WriteFileAtomic(
        store->path_, SerializeState(InitialState(machine, now_unix_ms)), kSharedFileMode));
  }
  GPUOP_RETURN_IF_ERROR(store->RefreshLocked(true));
  return store;
}

Status StateStore::RefreshLocked(bool force) {
  if (dir_.empty()) return Status::Ok();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return FailedPrecondition("state file " + path_ + " is gone (" + ErrnoText(errno) +
                              "); was GPUOP_SIM_STATE removed while in use?");
  }
  const int64_t mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (!force && cached_ && st.st_dev == dev_ && st.st_ino == ino_ && st.st_size == size_ &&
      mtime_ns == mtime_ns_) {
    return Status::Ok();
  }
  // Read through one descriptor so that the identity we keep is the content's.
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal("opening " + path_ + ": " + ErrnoText(errno));
  struct stat fst {};
  std::string text;
  if (::fstat(fd, &fst) != 0) {
    int err = errno;
    ::close(fd);
    return Internal("stat " + path_ + ": " + ErrnoText(err));
  }
  char buf[65536];
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return Internal("reading " + path_ + ": " + ErrnoText(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  auto parsed = ParseState(text, path_);
  Status s = parsed.ok() ? CheckStateMatches(*parsed, machine_, path_) : parsed.status();
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  if (cached_fd_ >= 0) ::close(cached_fd_);
  cached_fd_ = fd;
  dev_ = fst.st_dev;
  ino_ = fst.st_ino;
  size_ = fst.st_size;
  mtime_ns_ = static_cast<int64_t>(fst.st_mtim.tv_sec) * 1000000000 + fst.st_mtim.tv_nsec;
  cached_ = std::make_shared<SimState>(std::move(parsed).value());
  return Status::Ok();
}

Result<std::shared_ptr<const SimState>> StateStore::Read() {
  std::lock_guard<std::mutex> l(mu_);
  GPUOP_RETURN_IF_ERROR(RefreshLocked(false));
  return cached_;
}

Status StateStore::Update(const std::function<Status(SimState&)>& fn) {
  std::lock_guard<std::mutex> l(mu_);
  std::optional<FileLock> lock;
  if (shared()) {
    GPUOP_ASSIGN_OR_RETURN(FileLock fl, FileLock::Acquire(lock_path_, true));
    lock.emplace(std::move(fl));
    GPUOP_RETURN_IF_ERROR(RefreshLocked(false));
  }
  auto next = std::make_shared<SimState>(*cached_);
  GPUOP_RETURN_IF_ERROR(fn(*next));
  if (shared()) {
    GPUOP_RETURN_IF_ERROR(WriteFileAtomic(path_, SerializeState(*next), kSharedFileMode));
    // We hold the lock, so the file is ours: take its identity without parsing it again.
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat fst {};
    if (fd < 0 || ::fstat(fd, &fst) != 0) {
      if (fd >= 0) ::close(fd);
      cached_.reset();  // forces a full re-read next time
      return Status::Ok();
    }
    if (cached_fd_ >= 0) ::close(cached_fd_);
    cached_fd_ = fd;
    dev_ = fst.st_dev;
    ino_ = fst.st_ino;
    size_ = fst.st_size;
    mtime_ns_ = static_cast<int64_t>(fst.st_mtim.tv_sec) * 1000000000 + fst.st_mtim.tv_nsec;
  }
  cached_ = std::move(next);
  return Status::Ok();
}

// ---- Control operations ----------------------------------------------------

Result<std::unique_ptr<StateStore>> OpenStateFromEnv(bool require_shared) {
  const char* machine_env = std::getenv("GPUOP_SIM_MACHINE");
  const char* state_env = std::getenv("GPUOP_SIM_STATE");
  const char* seed_env = std::getenv("GPUOP_SIM_SEED");
  std::string machine_name = machine_env && *machine_env ? machine_env : "dgx-h100";
  std::string dir = state_env ? state_env : "";
  if (require_shared && dir.empty()) {
    return FailedPrecondition(
        "GPUOP_SIM_STATE is not set: set it to the simulated node's state directory (the one "
        "the NVML simulator of that node uses)");
  }
  auto machine = LoadMachine(machine_name, seed_env ? seed_env : "");
  if (!machine.ok()) return machine.status().Annotate("GPUOP_SIM_MACHINE");
  return StateStore::Open(*machine, dir, NowUnixMillis());
}

namespace {

// A new fault never lowers what an earlier one asked for.
void PostRecoveryAction(GpuRuntime& g, unsigned action) {
  auto rank = [](unsigned a) { return a == kRecoveryNodeReboot ? 2 : a == kRecoveryNone ? 0 : 1; };
  if (rank(action) > rank(g.recovery_action)) g.recovery_action = action;
}

}  // namespace

unsigned RecoveryActionForXid(uint64_t xid) {
  switch (xid) {
    case 46:   // GPU stopped processing
    case 48:   // double-bit ECC error
    case 61:   // internal micro-controller breakpoint
    case 62:   // internal micro-controller halt
    case 63:   // row remap pending
    case 74:   // NVLink error
    case 79:   // fallen off the bus
    case 95:   // uncontained ECC error
    case 119:  // GSP RPC timeout
    case 120:  // GSP error
    case 140:  // unrecovered ECC error
      return kRecoveryGpuReset;
    case 64:  // row remap failure
      return kRecoveryNodeReboot;
    default:
      return kRecoveryNone;
  }
}

Status ApplyXid(const Machine& m, SimState& s, unsigned gpu, uint64_t xid,
                std::optional<unsigned> gi, std::optional<unsigned> ci) {
  GPUOP_RETURN_IF_ERROR(CheckGpu(m, s, gpu));
  if (gi.has_value() != ci.has_value()) {
    return InvalidArgument("an XID for a MIG device needs both --gi and --ci");
  }
  if (gi) {
    const auto& gis = s.gpus[gpu].gis;
    auto g = std::find_if(gis.begin(), gis.end(), [&](const GiRecord& r) { return r.id == *gi; });
    bool found = g != gis.end() && std::any_of(g->cis.begin(), g->cis.end(),
                                               [&](const CiRecord& c) { return c.id == *ci; });
    if (!found) {
      return NotFound(GpuName(m, gpu) + " has no MIG device with GPU instance " +
                      std::to_string(*gi) + " and compute instance " + std::to_string(*ci));
    }
  }
  s.AddEvent(gpu, kEventXid, xid, gi.value_or(kNoInstanceId), ci.value_or(kNoInstanceId));
  PostRecoveryAction(s.gpus[gpu], RecoveryActionForXid(xid));
  return Status::Ok();
}

Status ApplyEcc(const Machine& m, SimState& s, unsigned gpu, bool double_bit) {
  GPUOP_RETURN_IF_ERROR(CheckGpu(m, s, gpu));
  auto& g = s.gpus[gpu];
  if (double_bit) {
    ++g.ecc.dbe_volatile;
    ++g.ecc.dbe_aggregate;
    ++g.remapped_uncorrectable;
    g.remap_pending = true;
    PostRecoveryAction(g, kRecoveryGpuReset);
    s.AddEvent(gpu, kEventDoubleBitEcc, 0);
  } else {
    ++g.ecc.sbe_volatile;
    ++g.ecc.sbe_aggregate;
    s.AddEvent(gpu, kEventSingleBitEcc, 0);
  }
  return Status::Ok();
}

Status ApplyLost(const Machine& m, SimState& s, unsigned gpu) {
  GPUOP_RETURN_IF_ERROR(CheckGpu(m, s, gpu));
  s.gpus[gpu].lost = true;
  PostRecoveryAction(s.gpus[gpu], RecoveryActionForXid(79));
  s.AddEvent(gpu, kEventXid, 79);
  return Status::Ok();
}

Status ApplyReset(const Machine& m, SimState& s, unsigned gpu) {
  GPUOP_RETURN_IF_ERROR(CheckGpu(m, s, gpu));
  auto& g = s.gpus[gpu];
  if (g.mig_current && !g.mig_pending) g.gis.clear();
  g.mig_current = g.mig_pending;
  g.lost = false;
  g.processes.clear();  // a reset ends every context on the GPU
  g.ecc.sbe_volatile = g.ecc.dbe_volatile = 0;
  g.remap_pending = false;
  if (g.recovery_action == kRecoveryGpuReset) g.recovery_action = kRecoveryNone;
  return Status::Ok();
}

Status ApplyLoad(const Machine& m, SimState& s, unsigned gpu, std::optional<unsigned> gi,
                 int64_t now_ms, int64_t duration_ms) {
  GPUOP_RETURN_IF_ERROR(CheckGpu(m, s, gpu));
  if (duration_ms <= 0) return InvalidArgument("a load needs a positive duration");
  auto& g = s.gpus[gpu];
  if (!gi) {
    AddBusy(g.busy, now_ms, now_ms + duration_ms);
    return Status::Ok();
  }
  for (auto& r : g.gis) {
    if (r.id == *gi) {
      AddBusy(r.busy, now_ms, now_ms + duration_ms);
      return Status::Ok();
    }
  }
  return NotFound("GPU " + std::to_string(gpu) + " of machine " + m.name + " has no GPU instance " +
                  std::to_string(*gi) + (g.mig_current ? "" : " (MIG is disabled)") +
                  "; list them with `gpuop nvml list`");
}

Status ApplyDriverLoaded(const Machine& m, SimState& s, bool loaded) {
  if (loaded && !s.driver_loaded) {
    for (unsigned i = 0; i < s.gpus.size(); ++i) {
      GPUOP_RETURN_IF_ERROR(ApplyReset(m, s, i));
      s.gpus[i].recovery_action = kRecoveryNone;
    }
  }
  if (!loaded) {
    for (auto& g : s.gpus) {
      g.gis.clear();
      g.processes.clear();
    }
  }
  s.driver_loaded = s.uvm_loaded = s.modeset_loaded = loaded;
  if (!loaded) s.driver_version.clear();
  return Status::Ok();
}

Status ApplyMigLayout(const Machine& m, SimState& s, unsigned gpu, bool enabled,
                      const std::vector<std::string>& profiles) {
  GPUOP_RETURN_IF_ERROR(CheckGpu(m, s, gpu));
  const GpuModel& model = m.gpus[gpu].model;
  if (!model.mig_capable()) {
    return NotSupported(GpuName(m, gpu) + " does not support MIG; choose a MIG-capable GPU");
  }
  if (!enabled && !profiles.empty()) {
    return InvalidArgument(GpuName(m, gpu) +
                           ": MIG devices can only be created with MIG enabled; "
                           "drop --create or use --enable");
  }
  GpuRuntime& g = s.gpus[gpu];
  if (g.lost) return FailedPrecondition(GpuName(m, gpu) + " is lost; reset it first");
  g.mig_current = g.mig_pending = enabled;
  g.gis.clear();
  for (const std::string& name : profiles) {
    const GiProfile* profile = nullptr;
    std::vector<std::string> names;
    for (const GiProfile& p : model.mig_profiles) {
      names.push_back(p.name);
      if (p.name == name) profile = &p;
    }
    if (!profile) {
      return NotFound(GpuName(m, gpu) + " has no MIG profile \"" + name + "\"; its profiles are " +
                      Join(names, ", "));
    }
    GiRecord gi;
    if (PlanGpuInstance(model, g.gis, *profile, std::nullopt, &gi) != MigVerdict::kOk) {
      return FailedPrecondition(GpuName(m, gpu) + ": no room for another " + name +
                                " GPU instance after " + std::to_string(g.gis.size()) +
                                " instances; list fewer profiles");
    }
    gi.serial = s.next_serial++;
    // One compute instance over the whole GI: the CI profile with the GI's slices.
    CiRecord ci;
    bool made = false;
    for (unsigned index = 0; index < 8 && !made; ++index) {
      auto cp = CiProfileFor(*profile, index);
      if (!cp || cp->slices != profile->slices) continue;
      made = PlanComputeInstance(*profile, gi, index, &ci) == MigVerdict::kOk;
    }
    if (!made) {
      return Internal(GpuName(m, gpu) + ": profile " + name +
                      " has no compute instance profile spanning the whole GPU instance");
    }
    ci.serial = s.next_serial++;
    gi.cis.push_back(ci);
    auto pos = std::lower_bound(g.gis.begin(), g.gis.end(), gi.id,
                                [](const GiRecord& a, unsigned id) { return a.id < id; });
    g.gis.insert(pos, std::move(gi));
  }
  return Status::Ok();
}

Status SetMigLayout(StateStore& store, unsigned gpu, bool enabled,
                    const std::vector<std::string>& profiles) {
  return store.Update(
      [&](SimState& s) { return ApplyMigLayout(store.machine(), s, gpu, enabled, profiles); });
}

Status InjectXid(StateStore& store, unsigned gpu, uint64_t xid, std::optional<unsigned> gi,
                 std::optional<unsigned> ci) {
  return store.Update([&](SimState& s) { return ApplyXid(store.machine(), s, gpu, xid, gi, ci); });
}

Status InjectEcc(StateStore& store, unsigned gpu, bool double_bit) {
  return store.Update([&](SimState& s) { return ApplyEcc(store.machine(), s, gpu, double_bit); });
}

Status MarkGpuLost(StateStore& store, unsigned gpu) {
  return store.Update([&](SimState& s) { return ApplyLost(store.machine(), s, gpu); });
}

Status ResetGpu(StateStore& store, unsigned gpu) {
  return store.Update([&](SimState& s) { return ApplyReset(store.machine(), s, gpu); });
}

Status AddLoad(StateStore& store, unsigned gpu, std::optional<unsigned> gi, int64_t now_ms,
               int64_t duration_ms) {
  return store.Update(
      [&](SimState& s) { return ApplyLoad(store.machine(), s, gpu, gi, now_ms, duration_ms); });
}

Status InjectMigCreateFailure(StateStore& store, unsigned gpu, unsigned after) {
  return store.Update([&](SimState& s) -> Status {
    GPUOP_RETURN_IF_ERROR(CheckGpu(store.machine(), s, gpu));
    s.gpus[gpu].mig_create_fails_after = after;
    return Status::Ok();
  });
}

Status SetDriverLoaded(StateStore& store, bool loaded) {
  return store.Update([&](SimState& s) { return ApplyDriverLoaded(store.machine(), s, loaded); });
}

std::string LoadedDriverVersion(const Machine& m, const SimState& s) {
  return s.driver_version.empty() ? m.driver_version : s.driver_version;
}

int LoadedCudaVersion(const Machine& m, const SimState& s) {
  return s.driver_version.empty() ? m.cuda_driver_version : CudaVersionForDriver(s.driver_version);
}

Status LoadDriver(StateStore& store, const std::string& version) {
  if (version.empty()) return InvalidArgument("loading the simulated driver: no version given");
  return store.Update([&](SimState& s) -> Status {
    if (s.driver_loaded) {
      const std::string loaded = LoadedDriverVersion(store.machine(), s);
      if (loaded == version) {
        s.uvm_loaded = s.modeset_loaded = true;
        return Status::Ok();
      }
      return FailedPrecondition("driver " + loaded +
                                " is loaded on this node: unload it before "
                                "loading " +
                                version);
    }
    GPUOP_RETURN_IF_ERROR(ApplyDriverLoaded(store.machine(), s, true));
    s.driver_version = version;
    return Status::Ok();
  });
}

Result<DriverHolder> DriverHolder::Acquire(const std::string& state_dir, const std::string& what) {
  const std::string dir = state_dir + "/holders";
  GPUOP_RETURN_IF_ERROR(MakeSharedDir(dir));
  static std::atomic<uint64_t> counter{0};
  const std::string name =
      std::to_string(::getpid()) + "-" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "-" +
      std::to_string(counter++);
  const std::string path = dir + "/" + name;
  // Made locked under a hidden name, then renamed: a concurrent scan would
  // take an unlocked file for a dead holder's and remove it.
  const std::string hidden = dir + "/." + name;
  int fd = ::open(hidden.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("creating driver holder " + hidden + ": " + std::strerror(errno));
  auto fail = [&](const std::string& step) -> Status {
    Status s = Internal(step + " driver holder " + hidden + ": " + std::strerror(errno));
    ::unlink(hidden.c_str());
    ::close(fd);
    return s;
  };
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return fail("locking");
  if (::write(fd, what.data(), what.size()) < 0) return fail("writing");
  if (::rename(hidden.c_str(), path.c_str()) != 0) return fail("naming");
  return DriverHolder(fd, path);
}

DriverHolder::~DriverHolder() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

Result<std::vector<std::string>> LiveDriverHolders(const std::string& state_dir) {
  std::vector<std::string> live;
  const std::string dir = state_dir + "/holders";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return live;
    return Internal("reading " + dir + ": " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // its holder just went
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::unlink(path.c_str());  // nobody holds it: a process that died
    } else {
      auto what = ReadFile(path);
      live.push_back(what.ok() && !what->empty() ? *what : name);
    }
    ::close(fd);
  }
  return live;
}

}  // namespace gpuop::sim
