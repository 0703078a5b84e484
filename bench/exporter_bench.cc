// The exporter's render: one collection into the Prometheus text that every
// scrape then hands out (exporter/render.h), with the built-in counters.
// This is the collector thread's cost per collection, never a scrape's: a
// scrape only copies the rendered snapshot out.
//
// ExporterRender/gpus:8            8 × H100, no MIG, no pods
// ExporterRender/gpus:8/pods:1     the same, each GPU held by one container
// ExporterRenderMig/...            8 × H100 in MIG mode, 7 × 1g.10gb each: 8 GPU
//                                  series + 56 GPU instance series per field
// Counters: bytes (one scrape's body) and lines (series + HELP/TYPE).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "exporter/attribution.h"
#include "exporter/counters.h"
#include "exporter/render.h"
#include "nvml/device.h"

namespace {

namespace ex = gpuop::exporter;
namespace nvml = gpuop::nvml;

// A busy H100's full reading, as nvml::Client reports it.
nvml::Telemetry GpuTelemetry(unsigned i) {
  nvml::Telemetry t;
  t.gpu_temp_c = 60 + i;
  t.memory_temp_c = 70 + i;
  t.gpu_util_pct = 90;
  t.mem_util_pct = 45;
  t.enc_util_pct = 0;
  t.dec_util_pct = 0;
  t.power_w = 512.25 + i;
  t.power_limit_w = 700;
  t.total_energy_mj = 123456789012ULL + i;
  t.sm_clock_mhz = 1980;
  t.mem_clock_mhz = 2619;
  t.fb_total_mib = 81559;
  t.fb_used_mib = 40000 + i;
  t.fb_free_mib = 81559 - 40000 - i - 512;
  t.fb_reserved_mib = 512;
  t.ecc_sbe_volatile = 0;
  t.ecc_dbe_volatile = 0;
  t.ecc_sbe_aggregate = 3;
  t.ecc_dbe_aggregate = 0;
  t.remapped_rows_correctable = 0;
  t.remapped_rows_uncorrectable = 0;
  t.remapped_rows_pending = false;
  t.remapped_rows_failure = false;
  t.pcie_replay = 0;
  t.pcie_tx_kbps = 123456;
  t.pcie_rx_kbps = 654321;
  t.nvlink_tx_kib = 987654321;
  t.nvlink_rx_kib = 123456789;
  t.nvlink_active_links = 18;
  t.clock_event_reasons = 0;
  return t;
}

// What a MIG device reports: its own memory and engines, not the board's.
nvml::Telemetry MigTelemetry(unsigned j) {
  nvml::Telemetry t;
  t.gpu_util_pct = 50 + j;
  t.mem_util_pct = 20;
  t.fb_total_mib = 9984;
  t.fb_used_mib = 4000 + j;
  t.fb_free_mib = 9984 - 4000 - j;
  return t;
}

// 8 × H100; with `mig`, each in MIG mode with 7 × 1g.10gb GPU instances.
ex::Collection Node(bool mig, bool pods) {
  ex::Collection c;
  c.system.driver_version = "570.172.08";
  c.system.cuda_version = "12.8";
  c.system.nvml_version = "12.570.172.08";
  for (unsigned i = 0; i < 8; ++i) {
    nvml::Gpu g;
    g.index = i;
    g.name = "NVIDIA H100 80GB HBM3";
    char buf[64];
    std::snprintf(buf, sizeof buf, "GPU-%08x-1111-2222-3333-444444444444", 0x10000000 + i);
    g.uuid = buf;
    g.minor = static_cast<int>(i);
    std::snprintf(buf, sizeof buf, "00000000:%02X:00.0", 0x18 + 0x10 * i);
    g.pci.bus_id = buf;
    g.mig_capable = true;
    if (mig) {
      for (unsigned j = 0; j < 7; ++j) {
        nvml::MigDevice m;
        m.index = j;
        std::snprintf(buf, sizeof buf, "MIG-%08x-5555-6666-7777-%012x", 0x20000000 + i, j);
        m.uuid = buf;
        m.name = g.name + " MIG 1g.10gb";
        m.gi_id = 7 + j;
        m.profile = "1g.10gb";
        m.gi_profile_id = 19;
        m.memory_mib = 9984;
        g.mig_devices.push_back(m);
      }
    }
    c.gpus.push_back(g);
    c.healthy.push_back(true);
  }
  for (size_t i = 0; i < c.gpus.size(); ++i) {
    c.devices.push_back({i, std::nullopt, ex::Reading{GpuTelemetry(i), 0}});
    for (size_t j = 0; j < c.gpus[i].mig_devices.size(); ++j) {
      c.devices.push_back({i, j, ex::Reading{MigTelemetry(j), std::nullopt}});
    }
  }
  if (pods) {
    for (const ex::Collection::Device& d : c.devices) {
      const nvml::Gpu& g = c.gpus[d.gpu];
      ex::DeviceKey key{g.index, std::nullopt};
      std::string name = "train-" + std::to_string(g.index);
      if (d.mig) {
        key.gi_id = g.mig_devices[*d.mig].gi_id;
        name += "-" + std::to_string(*d.mig);
      }
      c.pods[key] = {{name, "ml", "trainer"}};
    }
  }
  return c;
}

void Render(benchmark::State& state, bool mig) {
  const std::vector<ex::Counter> counters = ex::DefaultCounters();
  const ex::Collection c = Node(mig, state.range(1) != 0);
  ex::SelfStats self;
  self.collections = 12345;
  self.kubernetes = state.range(1) != 0;
  std::string out;
  for (auto _ : state) {
    ex::RenderMetrics(counters, "node-1", c, self, &out);
    benchmark::DoNotOptimize(out.data());
  }
  size_t lines = 0;
  for (char ch : out) lines += ch == '\n';
  state.counters["bytes"] = static_cast<double>(out.size());
  state.counters["lines"] = static_cast<double>(lines);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}

void ExporterRender(benchmark::State& state) { Render(state, false); }
void ExporterRenderMig(benchmark::State& state) { Render(state, true); }

BENCHMARK(ExporterRender)->ArgNames({"gpus", "pods"})->Args({8, 0})->Args({8, 1});
BENCHMARK(ExporterRenderMig)->ArgNames({"gpus", "pods"})->Args({8, 0})->Args({8, 1});

}  // namespace
