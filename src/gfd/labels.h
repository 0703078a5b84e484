// The node labels of GPU feature discovery (`gpuop gfd`): a pure function of
// the NVML view, the DMI machine name, the GPUs' PCI classes and the device
// plugin's config, with the keys and value rules of NVIDIA's
// gpu-feature-discovery (k8s-device-plugin internal/lm):
//
//   nvidia.com/gfd.timestamp                 unix seconds (absent with --no-timestamp)
//   nvidia.com/cuda.driver-version.{major,minor,revision,full}, cuda.driver.{major,minor,rev}
//   nvidia.com/cuda.runtime-version.{major,minor,full}, cuda.runtime.{major,minor}
//   nvidia.com/gpu.machine                   sanitised DMI product name, or "unknown"
//   nvidia.com/gpu.{product,count,replicas,sharing-strategy,memory,family,
//                   compute.major,compute.minor}
//   nvidia.com/gpu.mode                      compute (PCI class 0x0302), graphics (0x0300), unknown
//   nvidia.com/mig.capable, mps.capable      true/false
//   nvidia.com/mig.strategy                  single or mixed (absent for none)
//   MIG single: gpu.* describe the MIG devices (product <model>-MIG-<profile>),
//     plus gpu.{multiprocessors,slices.gi,slices.ci,engines.{copy,decoder,
//     encoder,jpeg,ofa}}; an invalid layout (MIG-enabled GPU without MIG
//     devices, MIG on some GPUs only, more than one profile) gives
//     gpu.product=<model>-MIG-INVALID with count, replicas and memory 0.
//   MIG mixed: the same set under nvidia.com/mig-<profile>.* ('+' written '.').
//   nvidia.com/gpu.clique                    <cluster UUID>.<clique id> of the GPUs'
//                                            NVLink fabric (GB200 NVL72), see FabricClique
//
// Nodes with more than one GPU model (upstream labels whichever model its map
// iteration meets last): the gpu.* labels describe the PRIMARY model, the one
// with the most GPUs (tie: the model of the lowest GPU index), and every model
// on the node, primary or not, gets
//
//   nvidia.com/gpu.count.<product>=<GPUs of that model>
//
// where <product> is the model's gpu.product value without -SHARED/-MIG
// suffixes (e.g. nvidia.com/gpu.count.NVIDIA-L40S=2). They are emitted on
// single-model nodes too, so `nvidia.com/gpu.count.NVIDIA-L40S` (Exists)
// selects every node that has an L40S. The name part after "nvidia.com/" is
// at most 63 characters: a product longer than 53 characters is cut to its
// first 44, trailing non-alphanumerics dropped, plus "-" and 8 hex digits of
// a FNV-1a hash of the full product, so distinct long names stay distinct.
//
// gpu.mode uses the PCI class of the primary model's lowest-index GPU (all
// GPUs of one model share it); upstream uses the first GPU. Sharing (replicas,
// -SHARED, sharing-strategy) is decided by deviceplugin::BuildResources, so
// the labels always agree with what the device plugin advertises. mps.capable
// is true when the config shares with MPS and no GPU has MIG enabled.
//
// Values only; no I/O, no clock. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "deviceplugin/config.h"
#include "nvml/device.h"

namespace gpuop::gfd {

inline constexpr std::string_view kLabelPrefix = "nvidia.com/";

struct LabelInput {
  std::vector<nvml::Gpu> gpus;
  nvml::SystemInfo system;
  std::string machine_type;  // raw DMI product name; empty: unknown
  // PCI class by GPU bus id (nvml::PciInfo::bus_id): 0x0302 or sysfs's
  // 24-bit 0x030200 form. A GPU missing here has mode "unknown".
  std::map<std::string, unsigned> pci_class;
  deviceplugin::Config config;
  std::optional<int64_t> timestamp;  // nullopt: no gfd.timestamp label (--no-timestamp)
};

// Every label, keys with the "nvidia.com/" prefix. Deterministic. Errors: a
// driver version not like X.Y[.Z], or a sharing config the device plugin
// would reject (the device plugin's message).
Result<std::map<std::string, std::string>> GenerateLabels(const LabelInput& in);

// gpu.product's rule for one part of a name: characters outside
// [A-Za-z0-9-_. ] removed, runs of spaces written as one '-'
// ("NVIDIA A100-SXM4-40GB" → "NVIDIA-A100-SXM4-40GB").
std::string SanitiseProduct(std::string_view name);

// A valid Kubernetes label value: spaces become '-', characters outside
// [A-Za-z0-9._-] are dropped, at most 63 characters, and it begins and ends
// with an alphanumeric (those at the edges are trimmed); may be empty.
std::string SanitiseLabelValue(std::string_view value);

// The gpu.count.<product> key for a model name (see above), with prefix.
std::string ModelCountKey(std::string_view model_name);

// The gpu.clique value, from each GPU's nvml::Gpu::fabric, as upstream's
// IMEX labeler: a GPU counts only when nvml::FabricAttached (registration
// COMPLETED with status SUCCESS and a non-zero cluster UUID); the others
// (no fabric, NOT_STARTED, IN_PROGRESS, a failed registration) are skipped.
// nullopt when no GPU counts. FailedPrecondition when the counted GPUs are in
// more than one cluster or clique (GenerateLabels then logs it and omits only
// this label; upstream warns and omits it too). Example value:
// "5fd7b1a2-8c3e-4d6f-9a0b-1c2d3e4f5a6b.32767".
Result<std::optional<std::string>> FabricClique(const std::vector<nvml::Gpu>& gpus);

// gpu.family for a compute capability: "ampere" for 8.0, "undefined" for
// unknown majors.
std::string ArchFamily(int cc_major, int cc_minor);

}  // namespace gpuop::gfd
