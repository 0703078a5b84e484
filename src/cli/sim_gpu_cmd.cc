// `gpuop sim gpu inject|reset|mig|load`, `gpuop sim driver load|unload` and
// `gpuop sim machines`: change the shared state of a simulated node's GPUs
// (sim/nvml/state.h) the way hardware faults and admin actions would.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"

namespace gpuop::cli {
namespace {

struct InjectOptions {
  unsigned gpu = 0;
  std::optional<unsigned long long> xid;
  std::optional<unsigned> gi, ci;
  std::string ecc;
  bool lost = false;
  std::optional<unsigned> mig_create_fails_after;
};

// Opens the node's state, runs `op` on it and reports the outcome: `done`
// on stdout, or the error on stderr.
template <typename Op>
int RunControl(Op op, const std::string& done) {
  auto store = sim::OpenStateFromEnv(/*require_shared=*/true);
  if (!store.ok()) {
    std::fprintf(stderr, "error: %s\n", store.status().message().c_str());
    return kExitFailure;
  }
  Status s = op(**store);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitFailure;
  }
  std::printf("%s\n", done.c_str());
  return kExitOk;
}

// "all" or a comma-separated list of GPU indices.
Result<std::vector<unsigned>> ParseGpuList(const std::string& text, const sim::StateStore& store) {
  std::vector<unsigned> out;
  if (text == "all") {
    for (unsigned i = 0; i < store.machine().gpus.size(); ++i) out.push_back(i);
    return out;
  }
  for (const std::string& part : Split(text, ',')) {
    std::optional<uint64_t> v = ParseUint(Trim(part));
    if (!v || *v > 1024) {
      return InvalidArgument("--gpu " + text + ": \"" + part +
                             "\" is not a GPU index; give indices (0,1) or all");
    }
    out.push_back(static_cast<unsigned>(*v));
  }
  return out;
}

// What `inject` did, in a line.
std::string InjectedText(const InjectOptions& in) {
  std::string gpu = "GPU " + std::to_string(in.gpu);
  if (in.xid) {
    if (in.gi) gpu += " GI " + std::to_string(*in.gi) + " CI " + std::to_string(*in.ci);
    return gpu + ": XID " + std::to_string(*in.xid) + " injected";
  }
  if (!in.ecc.empty()) return gpu + ": " + in.ecc + "-bit ECC error injected";
  if (in.mig_create_fails_after) {
    return gpu + ": MIG create fails after " + std::to_string(*in.mig_create_fails_after) + " more";
  }
  return gpu + ": lost (fell off the bus)";
}

}  // namespace

void RegisterSimGpuCommand(CLI::App& sim, const GlobalOptions&, Action* action) {
  auto* gpu = sim.add_subcommand(
      "gpu", "Inject faults into and reset simulated GPUs (GPUOP_SIM_MACHINE, GPUOP_SIM_STATE)");
  gpu->require_subcommand(1);

  auto in = std::make_shared<InjectOptions>();
  auto* inject = gpu->add_subcommand(
      "inject", "Inject an XID, an ECC error, a lost GPU or a failing MIG create");
  inject->add_option("--gpu", in->gpu, "GPU index")->required();
  auto* fault = inject->add_option_group("fault", "What to inject (exactly one)");
  auto* xid = fault->add_option("--xid", in->xid, "XID number, e.g. 13, 31, 48, 79");
  fault->add_option("--ecc", in->ecc, "ECC error: single (correctable) or double")
      ->check(CLI::IsMember({"single", "double"}));
  fault->add_flag("--lost", in->lost, "The GPU falls off the bus (XID 79)");
  fault->add_option("--mig-create-fails-after", in->mig_create_fails_after,
                    "After N more successful MIG instance creates, the next fails "
                    "(INSUFFICIENT_RESOURCES)");
  fault->require_option(1);
  auto* gi = inject->add_option("--gi", in->gi, "GPU instance id of the MIG device (with --xid)");
  auto* ci =
      inject->add_option("--ci", in->ci, "Compute instance id of the MIG device (with --xid)");
  gi->needs(xid)->needs(ci);
  ci->needs(xid)->needs(gi);
  inject->callback([action, in] {
    *action = [in] {
      return RunControl(
          [&](sim::StateStore& store) {
            if (in->xid) return sim::InjectXid(store, in->gpu, *in->xid, in->gi, in->ci);
            if (!in->ecc.empty()) return sim::InjectEcc(store, in->gpu, in->ecc == "double");
            if (in->mig_create_fails_after) {
              return sim::InjectMigCreateFailure(store, in->gpu, *in->mig_create_fails_after);
            }
            return sim::MarkGpuLost(store, in->gpu);
          },
          InjectedText(*in));
    };
  });

  auto reset_gpus = std::make_shared<std::string>();
  auto* reset = gpu->add_subcommand(
      "reset", "Reset GPUs: applies a pending MIG mode and clears a lost GPU or a posted reset");
  reset->add_option("--gpu", *reset_gpus, "GPU indices, comma-separated (0,3), or all")->required();
  reset->callback([action, reset_gpus] {
    *action = [reset_gpus] {
      return RunControl(
          [&](sim::StateStore& store) -> Status {
            GPUOP_ASSIGN_OR_RETURN(std::vector<unsigned> gpus, ParseGpuList(*reset_gpus, store));
            for (unsigned i : gpus) GPUOP_RETURN_IF_ERROR(sim::ResetGpu(store, i));
            return Status::Ok();
          },
          "reset GPU " + *reset_gpus);
    };
  });

  struct MigOptions {
    unsigned gpu = 0;
    bool enable = false, disable = false;
    std::string create;
  };
  auto mo = std::make_shared<MigOptions>();
  auto* mig = gpu->add_subcommand(
      "mig",
      "Set a GPU's MIG mode at once and lay out MIG devices (one full-GI compute instance "
      "per listed profile)");
  mig->add_option("--gpu", mo->gpu, "GPU index")->required();
  auto* mode = mig->add_option_group("mode", "MIG mode (exactly one)");
  mode->add_flag("--enable", mo->enable, "Enable MIG mode");
  mode->add_flag("--disable", mo->disable, "Disable MIG mode (destroys every MIG device)");
  mode->require_option(1);
  mig->add_option("--create", mo->create,
                  "Comma-separated GPU instance profiles to create, e.g. 1g.10gb,1g.10gb,2g.20gb");
  mig->callback([action, mo] {
    *action = [mo] {
      return RunControl(
          [&](sim::StateStore& store) {
            return sim::SetMigLayout(store, mo->gpu, mo->enable, Split(mo->create, ','));
          },
          "GPU " + std::to_string(mo->gpu) + ": MIG " + (mo->enable ? "enabled" : "disabled") +
              (mo->create.empty() ? "" : ", created " + mo->create));
    };
  });

  struct LoadOptions {
    unsigned gpu = 0;
    std::optional<unsigned> gi;
    std::string duration = "60s";
  };
  auto lo = std::make_shared<LoadOptions>();
  auto* load = gpu->add_subcommand(
      "load",
      "Keep a GPU, or one of its MIG GPU instances, busy for a while, as a workload would: "
      "what GPM's profiling metrics (DCGM_FI_PROF_*) then read");
  load->add_option("--gpu", lo->gpu, "GPU index")->required();
  load->add_option("--gi", lo->gi, "GPU instance id of a MIG GPU instance (default: the GPU)");
  load->add_option("--for", lo->duration, "How long, e.g. 90s or 5m (default 60s)");
  load->callback([action, lo] {
    *action = [lo] {
      auto duration = ParseDuration(lo->duration);
      if (!duration.ok() || duration->count() <= 0) {
        std::fprintf(stderr, "error: --for %s: give a positive duration such as 90s or 5m\n",
                     lo->duration.c_str());
        return kExitUsage;
      }
      const int64_t now = NowUnixMillis();
      return RunControl(
          [&](sim::StateStore& store) {
            return sim::AddLoad(store, lo->gpu, lo->gi, now, duration->count());
          },
          "GPU " + std::to_string(lo->gpu) +
              (lo->gi ? " GPU instance " + std::to_string(*lo->gi) : std::string()) +
              ": busy for " + lo->duration);
    };
  });

  auto driver_op = std::make_shared<std::string>();
  auto driver_version = std::make_shared<std::string>();
  auto* driver = sim.add_subcommand(
      "driver", "Load or unload the simulated GPU driver (unload: the driver lost, held or not)");
  driver->add_option("operation", *driver_op, "load|unload")
      ->required()
      ->check(CLI::IsMember({"load", "unload"}));
  driver->add_option("--version", *driver_version,
                     "load: the driver version to load (default: the machine's)");
  driver->callback([action, driver_op, driver_version] {
    *action = [driver_op, driver_version] {
      return RunControl(
          [&](sim::StateStore& store) {
            if (*driver_op == "load" && !driver_version->empty()) {
              return sim::LoadDriver(store, *driver_version);
            }
            return sim::SetDriverLoaded(store, *driver_op == "load");
          },
          std::string("driver ") + (*driver_op == "load" ? "loaded" : "unloaded") +
              (driver_version->empty() ? "" : " (" + *driver_version + ")"));
    };
  });

  auto* machines = sim.add_subcommand("machines", "List the simulated machine presets");
  machines->callback([action] {
    *action = [] {
      std::fputs(sim::DescribePresets().c_str(), stdout);
      return kExitOk;
    };
  });
}

}  // namespace gpuop::cli
