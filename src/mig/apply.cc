#include "mig/apply.h"

#include <algorithm>

#include "base/log.h"
#include "base/strings.h"

namespace gpuop::mig {
namespace {

Status StepError(const GpuPlan& p, const std::string& step, const Status& s) {
  return Status(s.code(), p.gpu_desc + ": " + step + ": " + s.message());
}

// Runs the operations of one GPU's plan. `result` counts the calls made.
Status ExecuteGpu(const nvml::Client& client, const GpuPlan& p, GpuApplyResult* result) {
  for (const auto& c : p.destroy_cis) {
    Status s = client.DestroyComputeInstance(p.gpu, c.gi_id, c.ci_id);
    if (!s.ok()) {
      return StepError(p,
                       "destroying compute instance " + std::to_string(c.ci_id) +
                           " of GPU instance " + std::to_string(c.gi_id),
                       s);
    }
    ++result->destroyed_cis;
  }
  for (unsigned gi : p.destroy_gis) {
    Status s = client.DestroyGpuInstance(p.gpu, gi);
    if (!s.ok()) return StepError(p, "destroying GPU instance " + std::to_string(gi), s);
    ++result->destroyed_gis;
  }
  if (p.set_mode) {
    auto change = client.SetMigMode(p.gpu, *p.set_mode);
    if (!change.ok()) {
      return StepError(p, std::string("setting MIG mode ") + (*p.set_mode ? "on" : "off"),
                       change.status());
    }
    ++result->mode_changes;
    if (change->activation == nvml::MigActivation::kInUse) {
      // Never reset a busy GPU: that would fail, or end its users' work.
      const std::string who = change->processes.empty()
                                  ? std::string("processes NVML does not list")
                                  : "process(es) " + nvml::DescribeProcesses(change->processes);
      return StepError(
          p, std::string("setting MIG mode ") + (*p.set_mode ? "on" : "off"),
          Unavailable("the GPU is in use by " + who +
                      ", so the driver cannot change its MIG mode (and it is not reset while "
                      "in use): stop them, or let the MIG manager evict the GPU clients, and "
                      "apply again"));
    }
    if (change->reset_required) {
      result->reset_required = true;
      return Status::Ok();  // the layout, if any, waits for the reset
    }
  }
  for (const auto& c : p.creates) {
    const std::string where = "creating " + c.device + " at placement " +
                              std::to_string(c.placement.start) + ":" +
                              std::to_string(c.placement.size);
    auto gi = client.CreateGpuInstance(p.gpu, c.gi_profile_id, c.placement);
    if (!gi.ok()) return StepError(p, where, gi.status());
    ++result->created_gis;
    auto ci_index = nvml::CiProfileIndexForSlices(c.ci_slices);
    if (!ci_index) {
      return StepError(p, where,
                       InvalidArgument("no compute instance profile of " +
                                       std::to_string(c.ci_slices) + " slices"));
    }
    auto ci = client.CreateComputeInstance(p.gpu, gi->id, *ci_index);
    if (!ci.ok()) return StepError(p, where + " (its compute instance)", ci.status());
    ++result->created_cis;
  }
  return Status::Ok();
}

}  // namespace

Result<GpuState> ReadGpuState(const nvml::Client& client, unsigned index) {
  GPUOP_ASSIGN_OR_RETURN(nvml::Gpu gpu, client.GpuByIndex(index));
  GpuState s;
  s.index = gpu.index;
  s.name = gpu.name;
  s.pci_device_id = gpu.pci.device_id;
  s.pci_subsystem_id = gpu.pci.subsystem_id;
  s.mig_capable = gpu.mig_capable;
  s.mig_enabled = gpu.mig_enabled;
  s.mig_pending = gpu.mig_pending;
  if (!s.mig_capable) return s;
  GPUOP_ASSIGN_OR_RETURN(s.profiles, client.GiProfiles(index));
  GPUOP_ASSIGN_OR_RETURN(s.instances, client.GpuInstances(index));
  return s;
}

Result<std::vector<GpuState>> ReadState(const nvml::Client& client) {
  GPUOP_ASSIGN_OR_RETURN(unsigned count, client.GpuCount());
  std::vector<GpuState> out;
  for (unsigned i = 0; i < count; ++i) {
    GPUOP_ASSIGN_OR_RETURN(GpuState s, ReadGpuState(client, i));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<unsigned> ApplyReport::ResetRequired() const {
  std::vector<unsigned> out;
  for (const auto& g : gpus) {
    if (g.reset_required) out.push_back(g.gpu);
  }
  return out;
}

std::string ApplyReport::Summary() const {
  if (gpus.empty()) return "nothing to change: every GPU already has its layout\n";
  std::string out;
  for (const auto& g : gpus) {
    out += g.gpu_desc + ": destroyed " + std::to_string(g.destroyed_gis) + " GPU and " +
           std::to_string(g.destroyed_cis) + " compute instances, created " +
           std::to_string(g.created_gis) + " GPU and " + std::to_string(g.created_cis) +
           " compute instances";
    if (g.mode_changes > 0) out += ", MIG mode set";
    if (g.reset_done) out += ", GPU reset";
    if (g.reset_required) out += "; reset required: the new MIG mode waits for a GPU reset";
    out += "\n";
  }
  return out;
}

Result<ApplyReport> ApplyPlan(const nvml::Client& client, const Plan& plan,
                              const ApplyOptions& options) {
  ApplyReport report;
  report.plan = plan;
  for (const auto& p : plan.gpus) {
    GpuApplyResult r;
    r.gpu = p.gpu;
    r.gpu_desc = p.gpu_desc;
    Status s = ExecuteGpu(client, p, &r);
    if (s.ok() && r.reset_required && options.reset_gpu) {
      // Reset, then plan this GPU again from what the driver now reports.
      s = options.reset_gpu(p.gpu);
      if (!s.ok()) {
        s = StepError(p, "resetting the GPU for its new MIG mode", s);
      } else {
        r.reset_done = true;
        r.reset_required = false;
        LogDebug("GPU reset for its MIG mode", {{"gpu", p.gpu}});
        if (p.after_reset) {
          auto state = ReadGpuState(client, p.gpu);
          if (!state.ok()) return state.status();
          auto replanned = PlanGpu(*state, *p.after_reset, options.mode_only);
          if (!replanned.ok()) return replanned.status();
          GpuApplyResult more;
          s = ExecuteGpu(client, *replanned, &more);
          r.created_gis += more.created_gis;
          r.created_cis += more.created_cis;
          r.destroyed_cis += more.destroyed_cis;
          r.destroyed_gis += more.destroyed_gis;
          r.mode_changes += more.mode_changes;
          r.reset_required = more.reset_required;
        }
      }
    }
    report.gpus.push_back(r);
    if (!s.ok()) return s;
    LogDebug("MIG layout applied", {{"gpu", p.gpu},
                                    {"created_gis", r.created_gis},
                                    {"destroyed_gis", r.destroyed_gis},
                                    {"reset_required", r.reset_required}});
  }
  return report;
}

Result<Prepared> Prepare(const nvml::Client& client, const ConfigFile& file,
                         const std::string& name, bool mode_only) {
  Prepared p;
  GPUOP_ASSIGN_OR_RETURN(auto entries, file.Select(name));
  GPUOP_ASSIGN_OR_RETURN(p.state, ReadState(client));
  GPUOP_ASSIGN_OR_RETURN(p.wants, SelectWants(entries, p.state, name));
  GPUOP_ASSIGN_OR_RETURN(p.plan, PlanAll(p.state, p.wants, mode_only));
  return p;
}

Result<ApplyReport> Execute(const nvml::Client& client, const Prepared& prepared,
                            const ApplyOptions& options) {
  GPUOP_ASSIGN_OR_RETURN(ApplyReport report, ApplyPlan(client, prepared.plan, options));
  // Verify every GPU but those that wait for a reset.
  auto waiting = report.ResetRequired();
  std::vector<GpuWant> wants = prepared.wants;
  std::erase_if(wants, [&](const GpuWant& w) {
    return std::find(waiting.begin(), waiting.end(), w.gpu) != waiting.end();
  });
  GPUOP_ASSIGN_OR_RETURN(auto after, ReadState(client));
  Status s = CheckWants(after, wants, options.mode_only);
  if (!s.ok()) return s.Annotate("after apply");
  return report;
}

Result<ApplyReport> ApplyConfig(const nvml::Client& client, const ConfigFile& file,
                                const std::string& name, const ApplyOptions& options) {
  GPUOP_ASSIGN_OR_RETURN(Prepared p, Prepare(client, file, name, options.mode_only));
  return Execute(client, p, options);
}

Status AssertConfig(const nvml::Client& client, const ConfigFile& file, const std::string& name,
                    bool mode_only) {
  GPUOP_ASSIGN_OR_RETURN(auto entries, file.Select(name));
  GPUOP_ASSIGN_OR_RETURN(auto state, ReadState(client));
  GPUOP_ASSIGN_OR_RETURN(auto wants, SelectWants(entries, state, name));
  return CheckWants(state, wants, mode_only);
}

Result<ConfigFile> Export(const nvml::Client& client, const std::string& name) {
  GPUOP_ASSIGN_OR_RETURN(auto state, ReadState(client));
  return ExportConfig(state, name);
}

}  // namespace gpuop::mig
