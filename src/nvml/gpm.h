// GpmSampler: NVML's GPU Performance Monitoring (GPM) for a collector that
// reads the same devices over and over, as the exporter does.
//
// GPM measures hardware counters between two samples: the SM, tensor-pipe,
// DRAM, PCIe and NVLink activity DCGM's profiling fields report. The sampler
// keeps each device's previous sample, so every Read takes one new sample and
// returns the metrics since the last Read of that device: no sleep between two
// samples, and the interval is the collector's own. Each device holds two
// sample buffers, reused read after read and freed when the device is swept
// (not read between two Sweeps) or the sampler is destroyed.
//
// GPM exists on Hopper and newer GPUs with a driver that has it (R520+); a
// GPU without it reads NotSupported. A MIG GPU instance is read through its
// GPU (nvmlGpmMigSampleGet).
//
// Threads: not thread-safe; one collector thread uses a sampler.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "base/status.h"
#include "nvml/device.h"

struct nvmlGpmSample_st;

namespace gpuop::nvml {

class Library;

class GpmSampler {
 public:
  ~GpmSampler();  // frees every sample buffer
  GpmSampler(const GpmSampler&) = delete;
  GpmSampler& operator=(const GpmSampler&) = delete;

  // Whether `gpu` has GPM (nvmlGpmQueryDeviceSupport); false, not an error,
  // for a GPU before Hopper or a driver without the GPM functions. Cached per GPU.
  Result<bool> Supported(unsigned gpu);

  // Samples `gpu`, or its MIG GPU instance `gi_id`, and returns the metrics
  // since the previous Read of the same device; nullopt on the first Read
  // (or the first after a failed one): nothing to compare with yet.
  // NotSupported when the GPU has no GPM; another error when NVML failed, and
  // the device then starts over.
  Result<std::optional<GpmMetrics>> Read(unsigned gpu, std::optional<unsigned> gi_id = {});

  // Frees the buffers of every device not read since the last Sweep (a GPU
  // gone, a MIG instance destroyed). A collector calls it after each round.
  void Sweep();

  // Sample buffers held now (two per device read since the last Sweep).
  size_t held_samples() const;

 private:
  friend class Client;
  explicit GpmSampler(std::shared_ptr<Library> lib);

  struct Device {
    nvmlGpmSample_st* previous = nullptr;
    nvmlGpmSample_st* current = nullptr;
    bool has_previous = false;
    bool read = false;  // since the last Sweep
  };
  using Key = std::pair<unsigned, unsigned>;  // (GPU, GI id or kWholeGpu)

  void Free(Device& d);
  struct MetricsBuffer;

  std::shared_ptr<Library> lib_;
  std::map<unsigned, bool> supported_;
  std::map<Key, Device> devices_;
  std::unique_ptr<MetricsBuffer> buffer_;  // nvmlGpmMetricsGet_t: 13 KB, reused
};

}  // namespace gpuop::nvml
