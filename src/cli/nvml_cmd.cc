// `gpuop nvml list|info|telemetry`: what the NVML binding sees, for people
// and for scripts. Formatting lives in nvml/format.h; this file only wires
// flags to the Client.
#include <cstdio>
#include <memory>
#include <string>

#include "base/log.h"
#include "cli/cli.h"
#include "nvml/client.h"
#include "nvml/format.h"

namespace gpuop::cli {
namespace {

int List(const std::string& lib) {
  auto client = nvml::Client::Open(lib);
  if (!client.ok()) return Fail("nvml", client.status());
  auto gpus = (*client)->Gpus();
  if (!gpus.ok()) return Fail("nvml", gpus.status());
  std::fputs(nvml::FormatGpuList(*gpus).c_str(), stdout);
  return kExitOk;
}

int Info(const std::string& lib, bool json) {
  auto client = nvml::Client::Open(lib);
  if (!client.ok()) return Fail("nvml", client.status());
  const nvml::Client& c = **client;
  auto system = c.System();
  if (!system.ok()) return Fail("nvml", system.status());
  auto gpus = c.Gpus();
  if (!gpus.ok()) return Fail("nvml", gpus.status());
  std::vector<std::vector<nvml::GiProfile>> profiles;
  for (const nvml::Gpu& g : *gpus) {
    std::vector<nvml::GiProfile> p;
    if (g.mig_capable) {
      auto r = c.GiProfiles(g.index);
      if (!r.ok()) return Fail("nvml", r.status());
      p = std::move(*r);
    }
    profiles.push_back(std::move(p));
  }
  if (json) {
    std::printf("%s\n", nvml::InventoryJson(*system, *gpus, profiles).dump(2).c_str());
    return kExitOk;
  }
  std::printf("Driver %s, CUDA %s, NVML %s\n", system->driver_version.c_str(),
              system->cuda_version.c_str(), system->nvml_version.c_str());
  for (const nvml::Gpu& g : *gpus) std::fputs(nvml::FormatGpuSummary(g).c_str(), stdout);
  return kExitOk;
}

// Every GPU is read even when one fails (a lost GPU must not hide the others);
// the exit code says whether all readings succeeded.
int Telemetry(const std::string& lib, bool json) {
  auto client = nvml::Client::Open(lib);
  if (!client.ok()) return Fail("nvml", client.status());
  auto count = (*client)->GpuCount();
  if (!count.ok()) return Fail("nvml", count.status());
  std::vector<nvml::TelemetryRow> rows;
  bool all_ok = true;
  for (unsigned i = 0; i < *count; ++i) {
    auto reading = (*client)->ReadTelemetry(i);
    if (!reading.ok() && reading.status().code() == StatusCode::kPermissionDenied) {
      // A GPU this process may not open is skipped, as nvml::Client::Gpus does.
      LogWarn("skipping a GPU NVML may not open", {{"gpu", i}, {"error", reading.status()}});
      continue;
    }
    rows.push_back({i, std::move(reading)});
    all_ok = all_ok && rows.back().reading.ok();
  }
  if (json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : rows) {
      all.push_back(r.reading.ok()
                        ? nlohmann::json{{"gpu", r.gpu}, {"telemetry", nvml::ToJson(*r.reading)}}
                        : nlohmann::json{{"gpu", r.gpu}, {"error", r.reading.status().message()}});
    }
    std::printf("%s\n", all.dump(2).c_str());
  } else {
    std::fputs(nvml::FormatTelemetryTable(rows).c_str(), stdout);
  }
  return all_ok ? kExitOk : kExitFailure;
}

}  // namespace

void RegisterNvmlCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto* nvml = app.add_subcommand("nvml", "Show what NVML reports: GPUs, MIG devices, telemetry");
  nvml->require_subcommand(1);

  auto* list = nvml->add_subcommand("list", "List GPUs and MIG devices like `nvidia-smi -L`");
  list->callback([&g, action] { *action = [&g] { return List(NvmlLibraryPath(g)); }; });

  auto json = std::make_shared<bool>(false);
  auto* info = nvml->add_subcommand("info", "Everything NVML reports about the system and GPUs");
  info->add_flag("--json", *json, "Print JSON");
  info->callback(
      [&g, action, json] { *action = [&g, json] { return Info(NvmlLibraryPath(g), *json); }; });

  auto tjson = std::make_shared<bool>(false);
  auto* tel = nvml->add_subcommand("telemetry", "Read telemetry once from every GPU");
  tel->add_flag("--json", *tjson, "Print JSON");
  tel->callback([&g, action, tjson] {
    *action = [&g, tjson] { return Telemetry(NvmlLibraryPath(g), *tjson); };
  });
}

}  // namespace gpuop::cli
