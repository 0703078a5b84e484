// `gpuop mig apply|assert|export|profiles|defaults`: the MIG tool, with
// nvidia-mig-parted's flags and environment (MIG_PARTED_CONFIG_FILE,
// MIG_PARTED_SELECTED_CONFIG, MIG_PARTED_MODE_ONLY). The work is in
// mig/apply.h and mig/plan.h. Exit codes: 0 ok, 1 failure (an NVML step, an
// assert that does not hold, a GPU that needs a reset), 2 bad usage or a
// config that does not suit these GPUs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "mig/apply.h"
#include "mig/config.h"
#include "mig/plan.h"
#include "nvml/client.h"

namespace gpuop::cli {
namespace {

struct MigFlags {
  std::string config_file;
  std::string selected_config;
  bool mode_only = false;
  bool dry_run = false;
  std::string export_name = "current";
  std::string output;
};

bool IsConfigError(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound;
}

Result<std::unique_ptr<nvml::Client>> OpenNvml(const GlobalOptions& g) {
  return nvml::Client::Open(NvmlLibraryPath(g));
}

Result<mig::ConfigFile> LoadConfig(const MigFlags& f) {
  if (f.config_file.empty()) {
    return InvalidArgument("no config file: pass -f FILE or set MIG_PARTED_CONFIG_FILE");
  }
  if (f.selected_config.empty()) {
    return InvalidArgument("no config selected: pass -c NAME or set MIG_PARTED_SELECTED_CONFIG");
  }
  GPUOP_ASSIGN_OR_RETURN(std::string text, ReadFile(f.config_file));
  return mig::ParseConfig(text, f.config_file);
}

int RunApply(const GlobalOptions& g, const MigFlags& f) {
  auto file = LoadConfig(f);
  if (!file.ok()) return Fail("mig apply", file.status(), kExitUsage);
  auto client = OpenNvml(g);
  if (!client.ok()) return Fail("mig apply", client.status());
  auto prepared = mig::Prepare(**client, *file, f.selected_config, f.mode_only);
  if (!prepared.ok()) {
    return Fail("mig apply", prepared.status(),
                IsConfigError(prepared.status()) ? kExitUsage : kExitFailure);
  }
  if (f.dry_run) {
    std::string d = prepared->plan.Describe();
    std::fputs(d.empty() ? "nothing to change\n" : d.c_str(), stdout);
    return kExitOk;
  }
  auto report = mig::Execute(**client, *prepared, {.mode_only = f.mode_only});
  if (!report.ok()) return Fail("mig apply", report.status());
  std::fputs(report->Summary().c_str(), stdout);
  auto waiting = report->ResetRequired();
  if (!waiting.empty()) {
    std::vector<std::string> ids;
    for (unsigned i : waiting) ids.push_back(std::to_string(i));
    // On the simulator nvidia-smi does not exist; its reset does.
    const std::string reset = (*client)->simulated() ? "gpuop sim gpu reset --gpu " + Join(ids, ",")
                                                     : "nvidia-smi -r -i " + Join(ids, ",");
    return Fail("mig apply", FailedPrecondition("reset required: GPU " + Join(ids, ", ") +
                                                " must be reset for the new MIG mode (e.g. " +
                                                reset + "), then apply again"));
  }
  return kExitOk;
}

int RunAssert(const GlobalOptions& g, const MigFlags& f) {
  auto file = LoadConfig(f);
  if (!file.ok()) return Fail("mig assert", file.status(), kExitUsage);
  auto client = OpenNvml(g);
  if (!client.ok()) return Fail("mig assert", client.status());
  Status s = mig::AssertConfig(**client, *file, f.selected_config, f.mode_only);
  if (!s.ok()) {
    return Fail("mig assert", s,
                s.code() == StatusCode::kFailedPrecondition || !IsConfigError(s) ? kExitFailure
                                                                                 : kExitUsage);
  }
  std::printf("mig-config \"%s\" is in force%s\n", f.selected_config.c_str(),
              f.mode_only ? " (mode only)" : "");
  return kExitOk;
}

int Write(const char* cmd, const std::string& text, const std::string& output) {
  if (output.empty() || output == "-") {
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  Status s = WriteFileAtomic(output, text);
  return s.ok() ? kExitOk : Fail(cmd, s);
}

int RunExport(const GlobalOptions& g, const MigFlags& f) {
  auto client = OpenNvml(g);
  if (!client.ok()) return Fail("mig export", client.status());
  auto file = mig::Export(**client, f.export_name);
  if (!file.ok()) return Fail("mig export", file.status());
  return Write("mig export", mig::SerializeConfig(*file), f.output);
}

int RunDefaults(const GlobalOptions& g, const MigFlags& f) {
  auto client = OpenNvml(g);
  if (!client.ok()) return Fail("mig defaults", client.status());
  auto state = mig::ReadState(**client);
  if (!state.ok()) return Fail("mig defaults", state.status());
  return Write("mig defaults", mig::SerializeConfig(mig::DefaultConfigs(*state)), f.output);
}

int RunProfiles(const GlobalOptions& g) {
  auto client = OpenNvml(g);
  if (!client.ok()) return Fail("mig profiles", client.status());
  // Only reads that need no MIG privilege: an unprivileged process gets the
  // profiles without their placements ("-").
  auto gpus = (*client)->Gpus();
  if (!gpus.ok()) return Fail("mig profiles", gpus.status());
  // Columns as wide as the longest GPU and profile names (an RTX PRO 6000's
  // name, a "+me.all" profile).
  std::vector<std::vector<nvml::GiProfile>> tables(gpus->size());
  int name_w = 26, profile_w = 12;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const nvml::Gpu& gpu = (*gpus)[i];
    name_w = std::max(name_w, static_cast<int>(gpu.name.size()));
    if (!gpu.mig_capable) continue;
    auto profiles = (*client)->GiProfiles(gpu.index);
    if (!profiles.ok()) return Fail("mig profiles", profiles.status());
    for (const auto& p : *profiles)
      profile_w = std::max(profile_w, static_cast<int>(p.name.size()));
    tables[i] = std::move(profiles).value();
  }
  std::printf("%-4s %-*s %-*s %-5s %9s %7s %6s  %s\n", "GPU", name_w, "NAME", profile_w, "PROFILE",
              "ID", "MEMORY", "SLICES", "MAX", "PLACEMENTS");
  for (size_t i = 0; i < gpus->size(); ++i) {
    const nvml::Gpu& gpu = (*gpus)[i];
    if (!gpu.mig_capable) {
      std::printf("%-4u %-*s %s\n", gpu.index, name_w, gpu.name.c_str(), "(no MIG)");
      continue;
    }
    if (tables[i].empty()) {
      std::printf("%-4u %-*s %s\n", gpu.index, name_w, gpu.name.c_str(),
                  "(profiles are listed once MIG mode is on)");
    }
    for (const auto& p : tables[i]) {
      std::vector<std::string> pl;
      for (const auto& x : p.placements) {
        pl.push_back(std::to_string(x.start) + ":" + std::to_string(x.size));
      }
      if (pl.empty()) pl.push_back("-");
      std::string mem = std::to_string(p.memory_mib) + "MiB";
      std::printf("%-4u %-*s %-*s %-5u %9s %7u %6u  %s\n", gpu.index, name_w, gpu.name.c_str(),
                  profile_w, p.name.c_str(), p.id, mem.c_str(), p.slices, p.max_count,
                  Join(pl, ",").c_str());
    }
  }
  return kExitOk;
}

void AddConfigFlags(CLI::App* cmd, MigFlags* f) {
  cmd->add_option("-f,--config-file", f->config_file, "The mig-parted config file (version: v1)")
      ->envname("MIG_PARTED_CONFIG_FILE");
  cmd->add_option("-c,--selected-config", f->selected_config,
                  "The name of the mig-config to use from the file")
      ->envname("MIG_PARTED_SELECTED_CONFIG");
  cmd->add_flag("-m,--mode-only", f->mode_only, "Only the MIG mode, not the MIG devices")
      ->envname("MIG_PARTED_MODE_ONLY");
}

}  // namespace

void RegisterMigCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<MigFlags>();
  auto* mig = app.add_subcommand(
      "mig", "The MIG tool (nvidia-mig-parted compatible): apply, assert and export MIG layouts");
  mig->require_subcommand(1);

  auto* apply = mig->add_subcommand(
      "apply", "Bring the GPUs to a mig-config, changing only the GPUs whose layout differs");
  AddConfigFlags(apply, f.get());
  apply->add_flag("--dry-run", f->dry_run, "Print the plan and change nothing");
  apply->callback([&g, action, f] { *action = [&g, f] { return RunApply(g, *f); }; });

  auto* assert_cmd =
      mig->add_subcommand("assert", "Exit 0 when the GPUs have the mig-config, 1 with the diff");
  AddConfigFlags(assert_cmd, f.get());
  assert_cmd->callback([&g, action, f] { *action = [&g, f] { return RunAssert(g, *f); }; });

  auto* exp = mig->add_subcommand("export", "Print the current MIG layout as a mig-config");
  exp->add_option("--config-name", f->export_name, "Name of the exported mig-config")
      ->capture_default_str();
  exp->add_option("-o,--output", f->output, "Write to this file (atomically) instead of stdout");
  exp->callback([&g, action, f] { *action = [&g, f] { return RunExport(g, *f); }; });

  auto* profiles = mig->add_subcommand(
      "profiles", "List each GPU's MIG profiles: memory, slices, max count, placements");
  profiles->callback([&g, action] { *action = [&g] { return RunProfiles(g); }; });

  auto* defaults =
      mig->add_subcommand("defaults",
                          "Print default mig-configs for the GPU models present (all-disabled, "
                          "all-enabled, all-<profile>, all-balanced)");
  defaults->add_option("-o,--output", f->output, "Write to this file instead of stdout");
  defaults->callback([&g, action, f] { *action = [&g, f] { return RunDefaults(g, *f); }; });
}

}  // namespace gpuop::cli
