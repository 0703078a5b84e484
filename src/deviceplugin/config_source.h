// Where the device plugin's config file comes from, and keeping it current.
//
// Two schemes, as NVIDIA's plugin and its config-manager sidecar offer:
//   - one file: `--config FILE` or CONFIG_FILE;
//   - per node: CONFIG_FILE_SRCDIR holds named configs (a ConfigMap mounted at
//     /available-configs); the node's label NODE_LABEL
//     (nvidia.com/device-plugin.config) names the one to use, DEFAULT_CONFIG
//     when the node has no label. gpuop reads the label itself (an informer on
//     its own Node, NODE_NAME) instead of a sidecar, and reloads without a
//     restart when the label or the file changes.
// With neither, the plugin runs on flags and environment only.
//
// ChooseConfigName is the pure decision (which name, given the label, the
// default and the files present); ConfigWatcher is the adapter that reads the
// label, the directory and the file, and hands each new good config to a
// callback. A bad file is logged and counted, and the last good config stays.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "deviceplugin/config.h"

namespace gpuop::kube {
class Client;
class Informer;
}  // namespace gpuop::kube

namespace gpuop::deviceplugin {

inline constexpr char kDefaultNodeConfigLabel[] = "nvidia.com/device-plugin.config";

struct ConfigSelection {
  std::string file;                                  // --config / CONFIG_FILE
  std::string srcdir;                                // CONFIG_FILE_SRCDIR
  std::string node_label = kDefaultNodeConfigLabel;  // NODE_LABEL
  std::string default_config;                        // DEFAULT_CONFIG
  std::string node_name;                             // NODE_NAME

  // The per-node scheme is in use (a single file wins over it).
  bool PerNode() const { return file.empty() && !srcdir.empty(); }
};

// Reads CONFIG_FILE, CONFIG_FILE_SRCDIR, NODE_LABEL, DEFAULT_CONFIG and
// NODE_NAME (empty values count as unset); `config_flag` (--config) wins over
// CONFIG_FILE.
ConfigSelection SelectionFromEnv(const std::map<std::string, std::string>& env,
                                 const std::string& config_flag);

// The name of the config to load in the per-node scheme: the label's value
// when the node has one; else DEFAULT_CONFIG; else a config named "default";
// else the only config when there is exactly one; else none (nullopt: flags
// and environment only). A name that is not among `available` is NotFound
// naming the label or variable it came from and the configs there are.
Result<std::optional<std::string>> ChooseConfigName(const std::optional<std::string>& label_value,
                                                    const std::string& label_key,
                                                    const std::string& default_config,
                                                    const std::vector<std::string>& available);

// The config files in `dir`: names of regular files (symlinks followed), not
// starting with '.' (a ConfigMap volume's ..data), sorted.
Result<std::vector<std::string>> ListConfigDir(const std::string& dir);

// The whole chain once: which file (per the selection and the label), its
// text, ResolveConfig with env and overrides. `origin` names what was loaded
// ("config file /available-configs/a100 (label nvidia.com/device-plugin.config=a100)",
// "flags and environment").
struct LoadedConfig {
  Config config;
  std::string origin;
  std::string key;  // the file's path and content: equal keys, same config
};
Result<LoadedConfig> LoadConfig(const ConfigSelection& selection,
                                const std::optional<std::string>& label_value,
                                const std::map<std::string, std::string>& env,
                                const ConfigOverrides& overrides);

// Keeps the config current: on a label change (from an informer on the Node,
// when a client is given) and on a change of the chosen file (checked every
// `check_interval`: ConfigMap volumes change by a symlink swap), it loads the
// config again and, when the result differs, calls `on_config`. A load error
// or a callback error is logged once per distinct message and counted; the
// last good config stays.
//
// Threads: one owned thread, plus the informer's. `on_config` runs on the
// watcher thread. Stop() may be called from any other thread.
class ConfigWatcher {
 public:
  using Callback = std::function<Status(const LoadedConfig& loaded)>;

  struct Options {
    ConfigSelection selection;
    std::map<std::string, std::string> env;
    ConfigOverrides overrides;
    std::chrono::milliseconds check_interval{2000};
    // Null: no label (DEFAULT_CONFIG applies).
    kube::Client* client = nullptr;
    // How long Start waits for the Node before loading without its label.
    std::chrono::milliseconds node_sync_timeout{5000};
  };

  // Loads the first config (an error here is returned: the caller decides to
  // fail) into `initial` and starts reading the Node's label; nothing is
  // handed on until Follow. A component built from `initial` then calls
  // Follow once it can take changes, so no change can reach it before it
  // exists.
  static Result<std::unique_ptr<ConfigWatcher>> Load(Options options, LoadedConfig* initial);
  // Hands each new good config to `on_config` from now on: one loaded
  // between Load and Follow at the first check.
  void Follow(Callback on_config);
  // Load, then Follow.
  static Result<std::unique_ptr<ConfigWatcher>> Start(Options options, Callback on_config,
                                                      LoadedConfig* initial);
  ~ConfigWatcher();  // Stop()
  ConfigWatcher(const ConfigWatcher&) = delete;
  ConfigWatcher& operator=(const ConfigWatcher&) = delete;

  void Stop();
  // Loads the config again now instead of at the next check (SIGHUP).
  void CheckNow();

  uint64_t reloads() const { return reloads_.load(); }
  uint64_t errors() const { return errors_.load(); }
  // The label value last seen (nullopt: no label, or no Node seen).
  std::optional<std::string> label() const;

 private:
  explicit ConfigWatcher(Options options);
  void Run(std::stop_token stop);
  void Check();

  const Options options_;
  Callback on_config_;  // set once, by Follow, before the thread starts
  std::unique_ptr<kube::Informer> informer_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::optional<std::string> label_ GPUOP_GUARDED_BY(mu_);
  bool label_changed_ GPUOP_GUARDED_BY(mu_) = false;
  std::string applied_key_;  // touched by the watcher thread only (after Start)
  std::string last_error_;   // likewise

  std::atomic<uint64_t> reloads_{0}, errors_{0};
  std::jthread thread_;
};

}  // namespace gpuop::deviceplugin
