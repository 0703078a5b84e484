#include "dra/driver.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include "base/files.h"
#include "base/log.h"
#include "base/process.h"
#include "base/strings.h"
#include "dra/claim_cdi.h"
#include "dra/names.h"
#include "kube/resource.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

const kube::Resource kResourceClaims{"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim",
                                     true};

std::vector<kubelet::DraPreparedDevice> Answer(const CheckpointClaim& c) {
  std::vector<kubelet::DraPreparedDevice> out;
  for (const CheckpointDevice& d : c.devices) {
    out.push_back({d.requests, d.pool, d.device, d.cdi_ids, ""});
  }
  return out;
}

std::string Holder(const std::string& uid, const CheckpointClaim& c) {
  return c.ns + "/" + c.name + " (" + uid + ")";
}

}  // namespace

Status NvidiaSmiTimeSlicer::SetTimeSlice(const std::string& gpu_uuid, TimeSliceInterval interval) {
  const std::vector<std::vector<std::string>> steps = {
      {nvidia_smi_, "-i", gpu_uuid, "-c", "DEFAULT"},
      {nvidia_smi_, "compute-policy", "-i", gpu_uuid, "--set-timeslice",
       std::to_string(static_cast<int>(interval))}};
  for (const auto& argv : steps) {
    auto run = RunCommand(argv);
    if (!run.ok()) return run.status().Annotate("running " + nvidia_smi_);
    if (run->status != 0) {
      return Unavailable(Join(argv, " ") + " exited with status " + std::to_string(run->status) +
                         ": " + Excerpt(std::string(Trim(run->output)), 400));
    }
  }
  return Status::Ok();
}

ClaimFetcher ApiClaimFetcher(kube::Client& client) {
  return [&client](const kubelet::DraClaim& claim) -> Result<Json> {
    auto obj = client.Get(kResourceClaims, claim.ns, claim.name);
    if (!obj.ok()) return obj.status().Annotate("reading claim " + ClaimRef(claim));
    return obj;
  };
}

NodeDevicesSource NvmlNodeDevices(const nvml::Client& client, toolkit::CdiHostRoots roots) {
  return [&client, roots]() -> Result<NodeDevices> {
    GPUOP_ASSIGN_OR_RETURN(nvml::SystemInfo system, client.System());
    GPUOP_ASSIGN_OR_RETURN(std::vector<nvml::Gpu> gpus, client.Gpus());
    GPUOP_ASSIGN_OR_RETURN(toolkit::CdiInputs cdi,
                           toolkit::DiscoverCdiInputs(gpus, system.driver_version, roots));
    return NodeDevices{std::move(gpus), std::move(cdi)};
  };
}

Driver::Driver(DriverOptions options, ClaimFetcher fetch, NodeDevicesSource devices,
               TimeSlicer& time_slicer)
    : options_(std::move(options)),
      fetch_(std::move(fetch)),
      devices_(std::move(devices)),
      time_slicer_(time_slicer),
      checkpoint_(options_.plugin_dir + "/checkpoint.json", options_.boot_id_path) {}

Result<FileLock> Driver::LockPluginDir() const {
  GPUOP_RETURN_IF_ERROR(MakeDirs(options_.plugin_dir));
  return FileLock::Acquire(options_.plugin_dir + "/pu.lock", true);
}

std::string Driver::CdiSpecPath(const std::string& claim_uid) const {
  return options_.cdi_root + "/" + ClaimCdiFileName(claim_uid);
}

std::map<std::string, kubelet::DraPrepareResult> Driver::Prepare(
    const std::vector<kubelet::DraClaim>& claims) {
  std::map<std::string, kubelet::DraPrepareResult> out;
  // The API reads happen outside the lock: they may be slow and need no state.
  std::vector<ClaimAllocation> allocations;
  for (const kubelet::DraClaim& claim : claims) {
    auto obj = fetch_(claim);
    auto parsed = obj.ok() ? ParseClaim(*obj, claim, options_.node_name)
                           : Result<ClaimAllocation>(obj.status());
    if (!parsed.ok()) {
      out[claim.uid].error = parsed.status().message();
      LogWarn("DRA prepare failed", {{"claim", ClaimRef(claim)}, {"error", parsed.status()}});
      continue;
    }
    allocations.push_back(std::move(parsed).value());
  }
  if (allocations.empty()) return out;

  MutexLock lock(mu_);
  auto file_lock = LockPluginDir();
  auto cp = file_lock.ok() ? checkpoint_.Load() : Result<Checkpoint>(file_lock.status());
  if (!cp.ok()) {
    for (const ClaimAllocation& a : allocations) out[a.uid].error = cp.status().message();
    LogWarn("DRA prepare failed", {{"error", cp.status()}});
    return out;
  }
  std::optional<NodeDevices> node;  // read once, by the first claim that needs it
  for (const ClaimAllocation& a : allocations) {
    const std::string ref = a.ns + "/" + a.name;
    auto devices = PrepareClaim(*cp, a, node);
    if (!devices.ok()) {
      out[a.uid].error = "claim " + ref + ": " + devices.status().message();
      LogWarn("DRA prepare failed", {{"claim", ref}, {"uid", a.uid}, {"error", devices.status()}});
      continue;
    }
    out[a.uid].devices = std::move(devices).value();
  }
  return out;
}

Result<std::vector<kubelet::DraPreparedDevice>> Driver::PrepareClaim(
    Checkpoint& cp, const ClaimAllocation& claim, std::optional<NodeDevices>& node) {
  if (auto it = cp.claims.find(claim.uid);
      it != cp.claims.end() && it->second.state == PrepareState::kCompleted) {
    return Answer(it->second);
  }
  if (claim.devices.empty()) {
    return FailedPrecondition("no device of driver " + std::string(kDriverName) + " in pool " +
                              options_.node_name +
                              " is allocated to it; was it allocated for another node?");
  }
  for (const AllocatedDevice& d : claim.devices) {
    if (d.admin_access) continue;
    for (const auto& [uid, other] : cp.claims) {
      if (uid == claim.uid || other.state != PrepareState::kCompleted) continue;
      for (const CheckpointDevice& held : other.devices) {
        if (!held.admin_access && held.pool == d.pool && held.device == d.device) {
          return FailedPrecondition(
              "device " + d.device + " is already allocated to different claim " +
              Holder(uid, other) + "; it is freed when that claim's pods end");
        }
      }
    }
  }
  if (cp.claims.count(claim.uid)) GPUOP_RETURN_IF_ERROR(Undo(cp, claim.uid));

  if (!node) {
    auto read = devices_();
    if (!read.ok()) return read.status().Annotate("reading the node's GPUs");
    node = std::move(read).value();
  }
  std::map<std::string, TimeSliceInterval> time_slices;  // by GPU UUID
  std::vector<ResolvedDevice> resolved;
  GPUOP_ASSIGN_OR_RETURN(std::vector<CheckpointDevice> devices,
                         PlanDevices(claim, *node, time_slices, resolved));
  GPUOP_ASSIGN_OR_RETURN(toolkit::cdi::Spec spec,
                         BuildClaimCdiSpec(claim.uid, resolved, node->cdi, options_.cdi));

  CheckpointClaim& entry = cp.claims[claim.uid];
  entry = {PrepareState::kStarted, claim.name, claim.ns, devices, !time_slices.empty()};
  GPUOP_RETURN_IF_ERROR(checkpoint_.Save(cp));
  // From here a failure leaves the entry PrepareStarted: the next prepare or
  // unprepare of the claim rolls it back.
  for (const auto& [uuid, interval] : time_slices) {
    Status s = time_slicer_.SetTimeSlice(uuid, interval);
    if (!s.ok()) return s.Annotate("setting the time slice of GPU " + uuid);
  }
  GPUOP_RETURN_IF_ERROR(MakeDirs(options_.cdi_root));
  GPUOP_RETURN_IF_ERROR(WriteFileAtomic(CdiSpecPath(claim.uid), toolkit::cdi::ToYaml(spec)));
  entry.state = PrepareState::kCompleted;
  GPUOP_RETURN_IF_ERROR(checkpoint_.Save(cp));
  LogInfo("DRA claim prepared", {{"claim", claim.ns + "/" + claim.name},
                                 {"uid", claim.uid},
                                 {"devices", devices.size()},
                                 {"time_sliced_gpus", time_slices.size()}});
  return Answer(entry);
}

Result<std::vector<CheckpointDevice>> Driver::PlanDevices(
    const ClaimAllocation& claim, const NodeDevices& node,
    std::map<std::string, TimeSliceInterval>& time_slices,
    std::vector<ResolvedDevice>& resolved) const {
  GPUOP_ASSIGN_OR_RETURN(std::vector<ConfigEntry> configs, ParseAllocationConfigs(claim.config));
  std::vector<CheckpointDevice> out;
  for (const AllocatedDevice& d : claim.devices) {
    GPUOP_ASSIGN_OR_RETURN(ResolvedDevice r, ResolveDevice(node.gpus, d.device));
    GPUOP_ASSIGN_OR_RETURN(DeviceConfig config, SelectConfig(configs, d, r.type));
    if (config.time_slice) time_slices[r.gpu_uuid] = *config.time_slice;
    CheckpointDevice c;
    c.requests = {ReportedRequestName(d.request)};
    c.pool = d.pool;
    c.device = d.device;
    c.admin_access = d.admin_access;
    c.cdi_ids = {ClaimCdiDeviceId(claim.uid, d.device)};
    c.type = r.type;
    c.uuid = r.gpu_uuid;
    c.mig_uuid = r.mig_uuid;
    out.push_back(std::move(c));
    if (std::find(resolved.begin(), resolved.end(), r) == resolved.end()) resolved.push_back(r);
  }
  return out;
}

Status Driver::Undo(Checkpoint& cp, const std::string& uid) {
  const CheckpointClaim& entry = cp.claims.at(uid);
  if (entry.time_slice_applied) {
    std::set<std::string> gpus;
    for (const CheckpointDevice& d : entry.devices) {
      if (d.type == DeviceType::kGpu) gpus.insert(d.uuid);
    }
    for (const auto& [other_uid, other] : cp.claims) {
      if (other_uid == uid) continue;
      for (const CheckpointDevice& d : other.devices) gpus.erase(d.uuid);  // still shared
    }
    for (const std::string& gpu : gpus) {
      Status s = time_slicer_.SetTimeSlice(gpu, TimeSliceInterval::kDefault);
      if (!s.ok()) return s.Annotate("resetting the time slice of GPU " + gpu);
    }
  }
  std::error_code ec;
  std::filesystem::remove(CdiSpecPath(uid), ec);
  if (ec) {
    return Internal("removing the claim's CDI spec " + CdiSpecPath(uid) + ": " + ec.message());
  }
  cp.claims.erase(uid);
  return checkpoint_.Save(cp);
}

std::map<std::string, std::string> Driver::Unprepare(const std::vector<kubelet::DraClaim>& claims) {
  std::map<std::string, std::string> out;
  if (claims.empty()) return out;
  MutexLock lock(mu_);
  auto file_lock = LockPluginDir();
  auto cp = file_lock.ok() ? checkpoint_.Load() : Result<Checkpoint>(file_lock.status());
  for (const kubelet::DraClaim& claim : claims) {
    out[claim.uid] = "";
    if (!cp.ok()) {
      out[claim.uid] = cp.status().message();
      continue;
    }
    if (!cp->claims.count(claim.uid)) continue;  // never prepared, or undone already
    Status s = Undo(*cp, claim.uid);
    if (!s.ok()) {
      out[claim.uid] = "claim " + ClaimRef(claim) + ": " + s.message();
      LogWarn("DRA unprepare failed", {{"claim", ClaimRef(claim)}, {"error", s}});
      continue;
    }
    LogInfo("DRA claim unprepared", {{"claim", ClaimRef(claim)}, {"uid", claim.uid}});
  }
  if (!cp.ok()) LogWarn("DRA unprepare failed", {{"error", cp.status()}});
  return out;
}

}  // namespace gpuop::dra
