// The GPU feature discovery daemon (`gpuop gfd`): reads the node's GPUs,
// computes the labels (labels.h) and writes them to one or more outputs:
//
//   - the NFD features file (default <host-root>/etc/kubernetes/
//     node-feature-discovery/features.d/gfd): "key=value\n" per label, sorted,
//     written atomically with mode 0644 and removed when the daemon stops
//     (NFD then drops the labels), kept after a one-shot run;
//   - the NFD NodeFeature object nfd.k8s-sigs.io/v1alpha1
//     `nvidia-features-for-<node>` in the daemon's namespace, labelled
//     nfd.node.kubernetes.io/node-name=<node>, with spec.labels (NFD's
//     NodeFeature API, upstream's USE_NODE_FEATURE_API);
//   - direct node labels (gpuop only, no NFD needed): a merge patch of the
//     Node's own labels. Which labels are gfd's is recorded on the Node in the
//     annotation gpuop.io/gfd-labels (comma list of the full keys it set, in
//     sorted order), so a label it stops producing is removed while labels
//     of anyone else, nvidia.com/ or not, are never touched. Labels stay on
//     the node when the daemon stops (a restart must not make them flap).
//
// The pure part (NodeLabelPatch, FeaturesFileContent, NodeFeatureObject,
// NvmlToSysfsPciAddress) has no I/O; Daemon is the adapter with one thread.
//
// Loop: label, then relabel every `sleep_interval` (nullopt: never again),
// but re-read NVML, the DMI name and the PCI classes every `rescan_interval`
// and relabel at once when the labels differ (a MIG or GPU layout change), and
// when SetConfig hands a new device plugin config; Relabel (SIGHUP) forces a
// full pass with NVML reopened. The timestamp label is
// computed once per Start. NVML that does not open (library missing, driver
// not loaded) is logged once per distinct error and retried every
// `nvml_retry_interval`; labels appear as soon as it opens. An output that
// fails is logged and retried at the next rescan.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "base/clock.h"
#include "base/mutex.h"
#include "base/status.h"
#include "deviceplugin/config.h"
#include "gfd/labels.h"
#include "nvml/client.h"

namespace gpuop::kube {
class Client;
}  // namespace gpuop::kube

namespace gpuop::gfd {

using Labels = std::map<std::string, std::string>;

inline constexpr char kOwnedLabelsAnnotation[] = "gpuop.io/gfd-labels";
inline constexpr char kNodeFeatureNodeLabel[] = "nfd.node.kubernetes.io/node-name";
inline constexpr char kDefaultFeaturesFile[] =
    "/etc/kubernetes/node-feature-discovery/features.d/gfd";
inline constexpr char kDefaultMachineTypeFile[] = "/sys/class/dmi/id/product_name";

// ---- Pure ----

// The JSON merge patch for `node` that makes its labels carry `labels`:
// changed or new keys set, keys listed in the node's kOwnedLabelsAnnotation
// (and only those with the nvidia.com/ prefix) that `labels` lacks removed
// (null), and the annotation set to `labels`' keys. nullopt when the node
// already matches (nothing to write).
std::optional<nlohmann::json> NodeLabelPatch(const nlohmann::json& node, const Labels& labels);

// The annotation value for a label set: the keys, sorted, comma-separated.
std::string OwnedLabelsValue(const Labels& labels);

// The features file: one "key=value\n" per label, in key order.
std::string FeaturesFileContent(const Labels& labels);

// The NodeFeature object for `node` in namespace `ns` (metadata and spec only).
nlohmann::json NodeFeatureObject(std::string_view node, std::string_view ns, const Labels& labels);
std::string NodeFeatureName(std::string_view node);  // nvidia-features-for-<node>

// NVML's "00000000:18:00.0" → sysfs's "0000:18:00.0" (4-digit domain, lower
// case). InvalidArgument for anything not shaped like a PCI address.
Result<std::string> NvmlToSysfsPciAddress(std::string_view bus_id);

// The settings gfd takes from a flag, else its environment variable, else
// the device plugin config file's flags.gfd, as upstream; unset: not given.
struct Settings {
  std::optional<bool> oneshot, no_timestamp;
  std::optional<std::string> sleep_interval, output_file, machine_type_file;
};

// `given` (flags and environment) with what it leaves unset taken from the
// config file (whose defaults are gfd's own; output_file may stay unset).
Settings CompleteFromConfigFile(Settings given, const deviceplugin::Config::Gfd& file);

// ---- Adapter ----

struct DaemonOptions {
  std::string host_root = "/";
  // Host path (joined with host_root) of the DMI product name.
  std::string machine_type_file = kDefaultMachineTypeFile;
  // Full path of the features file (NOT joined with host_root); empty: none.
  std::string output_file;
  bool direct_labels = false;     // patch the Node's labels (needs client)
  bool node_feature_api = false;  // write the NodeFeature object (needs client)
  std::string node_name;          // NODE_NAME
  std::string namespace_name;     // for the NodeFeature
  kube::Client* client = nullptr;

  bool timestamp = true;  // false: --no-timestamp
  // Unix seconds for gfd.timestamp; default: the wall clock at Start.
  std::function<int64_t()> now;

  // Relabel at least this often; nullopt: "infinite" (only on changes).
  std::optional<std::chrono::milliseconds> sleep_interval = std::chrono::seconds(60);
  std::chrono::milliseconds rescan_interval{5000};
  std::chrono::milliseconds nvml_retry_interval{5000};
  // Times the three intervals above; null: RealClock() (tests: a FakeClock).
  const Clock* clock = nullptr;

  // Opens NVML; the command passes nvml::Client::Open of --nvml-lib, tests
  // an opener that fails first.
  std::function<Result<std::unique_ptr<nvml::Client>>()> open_nvml;
};

// Checks the options (an output chosen, a client and node name for the API
// outputs, an opener); InvalidArgument naming the missing piece.
Status ValidateOptions(const DaemonOptions& options);

class Daemon {
 public:
  // Labels once, synchronously, with one NVML attempt: the one-shot mode.
  // The features file stays. Returns the labels written.
  static Result<Labels> RunOnce(const DaemonOptions& options, const deviceplugin::Config& config);

  // Starts the loop thread (NVML may not be ready; the loop retries).
  static Result<std::unique_ptr<Daemon>> Start(DaemonOptions options, deviceplugin::Config config);
  ~Daemon();  // Stop()
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // A new device plugin config (sharing, MIG strategy): relabel at once.
  void SetConfig(deviceplugin::Config config);
  // SIGHUP: reopen NVML (a reloaded driver needs a fresh init), re-read the
  // GPUs and write every output now, even when the labels are unchanged (a
  // features file someone removed comes back).
  void Relabel();
  // Joins the thread and removes the features file. Idempotent.
  void Stop();

  // Completed labelling passes (every output written); for tests and logs.
  uint64_t passes() const;
  // Waits until passes() >= n or `timeout` passes; returns passes() >= n.
  bool WaitForPasses(uint64_t n, std::chrono::milliseconds timeout) const;
  // The labels of the last completed pass.
  Labels labels() const;

 private:
  Daemon(DaemonOptions options, deviceplugin::Config config);
  void Run(std::stop_token stop);

  const DaemonOptions options_;
  const std::optional<int64_t> timestamp_;

  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  deviceplugin::Config config_ GPUOP_GUARDED_BY(mu_);
  bool config_changed_ GPUOP_GUARDED_BY(mu_) = false;
  bool relabel_ GPUOP_GUARDED_BY(mu_) = false;
  uint64_t passes_ GPUOP_GUARDED_BY(mu_) = 0;
  Labels labels_ GPUOP_GUARDED_BY(mu_);

  std::atomic<bool> stopped_{false};
  std::jthread thread_;
};

}  // namespace gpuop::gfd
