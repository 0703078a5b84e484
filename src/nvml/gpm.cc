#include "nvml/gpm.h"

#include <string>

#include "nvml/client.h"
#include "nvml/library.h"

namespace gpuop::nvml {
namespace {

constexpr unsigned kWholeGpu = ~0u;

// The metrics gpuop reads, and where each goes.
struct Wanted {
  nvmlGpmMetricId_t id;
  std::optional<double> GpmMetrics::*member;
};
constexpr Wanted kWanted[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, &GpmMetrics::graphics_util},
    {NVML_GPM_METRIC_SM_UTIL, &GpmMetrics::sm_util},
    {NVML_GPM_METRIC_SM_OCCUPANCY, &GpmMetrics::sm_occupancy},
    {NVML_GPM_METRIC_INTEGER_UTIL, &GpmMetrics::integer_util},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, &GpmMetrics::any_tensor_util},
    {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, &GpmMetrics::dfma_tensor_util},
    {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, &GpmMetrics::hmma_tensor_util},
    {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, &GpmMetrics::imma_tensor_util},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, &GpmMetrics::dram_bw_util},
    {NVML_GPM_METRIC_FP64_UTIL, &GpmMetrics::fp64_util},
    {NVML_GPM_METRIC_FP32_UTIL, &GpmMetrics::fp32_util},
    {NVML_GPM_METRIC_FP16_UTIL, &GpmMetrics::fp16_util},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, &GpmMetrics::pcie_tx_mib_s},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, &GpmMetrics::pcie_rx_mib_s},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, &GpmMetrics::nvlink_tx_mib_s},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, &GpmMetrics::nvlink_rx_mib_s},
};
constexpr unsigned kWantedCount = sizeof(kWanted) / sizeof(kWanted[0]);
static_assert(kWantedCount <= 98, "the oldest GPM header holds 98 metrics");

std::string Object(unsigned gpu, unsigned gi) {
  std::string o = "GPU " + std::to_string(gpu);
  if (gi != kWholeGpu) o += " GPU instance " + std::to_string(gi);
  return o;
}

}  // namespace

struct GpmSampler::MetricsBuffer {
  nvmlGpmMetricsGet_t get{};
};

std::unique_ptr<GpmSampler> Client::NewGpmSampler() const {
  return std::unique_ptr<GpmSampler>(new GpmSampler(lib_));
}

GpmSampler::GpmSampler(std::shared_ptr<Library> lib)
    : lib_(std::move(lib)), buffer_(std::make_unique<MetricsBuffer>()) {}

GpmSampler::~GpmSampler() {
  for (auto& [key, d] : devices_) Free(d);
}

void GpmSampler::Free(Device& d) {
  const auto& free = lib_->fn().GpmSampleFree;
  for (nvmlGpmSample_st** s : {&d.previous, &d.current}) {
    if (*s != nullptr && free) free.ptr(nvmlGpmSample_t{*s});
    *s = nullptr;
  }
  d.has_previous = false;
}

Result<bool> GpmSampler::Supported(unsigned gpu) {
  if (auto it = supported_.find(gpu); it != supported_.end()) return it->second;
  const Functions& fn = lib_->fn();
  bool yes = false;
  if (fn.GpmQueryDeviceSupport && fn.GpmSampleAlloc && fn.GpmSampleFree && fn.GpmSampleGet &&
      fn.GpmMetricsGet) {
    nvmlDevice_t dev = nullptr;
    GPUOP_RETURN_IF_ERROR(lib_->Call(fn.DeviceGetHandleByIndex, Object(gpu, kWholeGpu), gpu, &dev));
    nvmlGpmSupport_t support{};
    support.version = NVML_GPM_SUPPORT_VERSION;
    nvmlReturn_t ret = fn.GpmQueryDeviceSupport.ptr(dev, &support);
    if (ret == NVML_SUCCESS) {
      yes = support.isSupportedDevice != 0;
    } else if (ret != NVML_ERROR_NOT_SUPPORTED) {
      return lib_->Error(ret, Object(gpu, kWholeGpu), fn.GpmQueryDeviceSupport.symbol);
    }
  }
  supported_[gpu] = yes;
  return yes;
}

Result<std::optional<GpmMetrics>> GpmSampler::Read(unsigned gpu, std::optional<unsigned> gi_id) {
  const unsigned gi = gi_id.value_or(kWholeGpu);
  const std::string object = Object(gpu, gi);
  GPUOP_ASSIGN_OR_RETURN(bool supported, Supported(gpu));
  if (!supported) return NotSupported(object + " has no GPM profiling metrics (Hopper and newer)");
  const Functions& fn = lib_->fn();
  if (gi_id && !fn.GpmMigSampleGet)
    return lib_->Missing(fn.GpmMigSampleGet.symbol, fn.GpmMigSampleGet.feature);

  Device& d = devices_[{gpu, gi}];
  d.read = true;
  for (nvmlGpmSample_st** s : {&d.previous, &d.current}) {
    if (*s != nullptr) continue;
    nvmlGpmSample_t sample{};
    GPUOP_RETURN_IF_ERROR(lib_->Call(fn.GpmSampleAlloc, object, &sample));
    *s = sample.handle;
  }
  nvmlDevice_t dev = nullptr;
  Status taken = lib_->Call(fn.DeviceGetHandleByIndex, object, gpu, &dev);
  if (taken.ok()) {
    taken = gi_id ? lib_->Call(fn.GpmMigSampleGet, object, dev, *gi_id, nvmlGpmSample_t{d.current})
                  : lib_->Call(fn.GpmSampleGet, object, dev, nvmlGpmSample_t{d.current});
  }
  if (!taken.ok()) {
    d.has_previous = false;  // the next Read starts over
    return taken;
  }
  if (!d.has_previous) {
    std::swap(d.previous, d.current);
    d.has_previous = true;
    return std::optional<GpmMetrics>();
  }

  nvmlGpmMetricsGet_t& get = buffer_->get;
  get.version = NVML_GPM_METRICS_GET_VERSION;
  get.numMetrics = kWantedCount;
  get.sample1 = nvmlGpmSample_t{d.previous};
  get.sample2 = nvmlGpmSample_t{d.current};
  for (unsigned i = 0; i < kWantedCount; ++i) {
    get.metrics[i] = nvmlGpmMetric_t{};
    get.metrics[i].metricId = kWanted[i].id;
  }
  Status got = lib_->Call(fn.GpmMetricsGet, object, &get);
  std::swap(d.previous, d.current);  // this sample is the next Read's baseline
  if (!got.ok()) return got;
  GpmMetrics m;
  for (unsigned i = 0; i < kWantedCount; ++i) {
    if (get.metrics[i].nvmlReturn == NVML_SUCCESS) m.*kWanted[i].member = get.metrics[i].value;
  }
  return std::optional<GpmMetrics>(m);
}

void GpmSampler::Sweep() {
  for (auto it = devices_.begin(); it != devices_.end();) {
    if (it->second.read) {
      it->second.read = false;
      ++it;
    } else {
      Free(it->second);
      it = devices_.erase(it);
    }
  }
}

size_t GpmSampler::held_samples() const {
  size_t n = 0;
  for (const auto& [key, d] : devices_) n += (d.previous != nullptr) + (d.current != nullptr);
  return n;
}

}  // namespace gpuop::nvml
