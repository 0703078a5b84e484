#include "gfd/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "kube/client.h"
#include "kube/object.h"
#include "kube/resource.h"

namespace gpuop::gfd {

using Json = nlohmann::json;

// ---- Pure ----

std::string OwnedLabelsValue(const Labels& labels) {
  std::vector<std::string> keys;
  keys.reserve(labels.size());
  for (const auto& [k, v] : labels) keys.push_back(k);
  return Join(keys, ",");
}

std::optional<Json> NodeLabelPatch(const Json& node, const Labels& labels) {
  const auto current = kube::Labels(node);
  Json set = Json::object();
  for (const auto& [k, v] : labels) {
    auto it = current.find(k);
    if (it == current.end() || it->second != v) set[k] = v;
  }
  // Only keys this daemon recorded as its own, and only under nvidia.com/:
  // a hand-edited annotation must not let it delete someone else's label.
  const auto owned = kube::Annotation(node, kOwnedLabelsAnnotation);
  if (owned) {
    for (const auto& k : Split(*owned, ',')) {
      if (!k.starts_with(kLabelPrefix) || labels.contains(k) || !current.contains(k)) continue;
      set[k] = nullptr;
    }
  }
  Json patch = Json::object();
  if (!set.empty()) patch["metadata"]["labels"] = std::move(set);
  const std::string value = OwnedLabelsValue(labels);
  if (owned != value) patch["metadata"]["annotations"][kOwnedLabelsAnnotation] = value;
  if (patch.empty()) return std::nullopt;
  return patch;
}

std::string FeaturesFileContent(const Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) out += k + "=" + v + "\n";
  return out;
}

std::string NodeFeatureName(std::string_view node) {
  return "nvidia-features-for-" + std::string(node);
}

Json NodeFeatureObject(std::string_view node, std::string_view ns, const Labels& labels) {
  Json obj = {{"apiVersion", kube::resources::kNodeFeatures.ApiVersion()},
              {"kind", kube::resources::kNodeFeatures.kind},
              {"metadata",
               {{"name", NodeFeatureName(node)},
                {"namespace", std::string(ns)},
                {"labels", {{kNodeFeatureNodeLabel, std::string(node)}}}}},
              {"spec", {{"labels", Json::object()}}}};
  for (const auto& [k, v] : labels) obj["spec"]["labels"][k] = v;
  return obj;
}

Result<std::string> NvmlToSysfsPciAddress(std::string_view bus_id) {
  // [domain:]bus:device.function, the domain 4 or 8 hex digits.
  auto bad = [&] {
    return InvalidArgument("PCI bus id \"" + std::string(bus_id) +
                           "\": want DOMAIN:BUS:DEVICE.FUNCTION in hex, e.g. 00000000:18:00.0");
  };
  const auto parts = Split(bus_id, ':', false);
  if (parts.size() != 3) return bad();
  std::string domain = parts[0];
  if (domain.size() == 8 && domain.starts_with("0000")) domain = domain.substr(4);
  const std::string& bus = parts[1];
  const std::string& devfn = parts[2];
  auto hex = [](std::string_view s) {
    for (char c : s) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    return !s.empty();
  };
  if (domain.size() != 4 || !hex(domain) || bus.size() != 2 || !hex(bus) || devfn.size() != 4 ||
      devfn[2] != '.' || !hex(devfn.substr(0, 2)) || !hex(devfn.substr(3))) {
    return bad();
  }
  return ToLower(domain + ":" + bus + ":" + devfn);
}

Settings CompleteFromConfigFile(Settings given, const deviceplugin::Config::Gfd& file) {
  if (!given.oneshot) given.oneshot = file.oneshot;
  if (!given.no_timestamp) given.no_timestamp = file.no_timestamp;
  if (!given.sleep_interval) given.sleep_interval = file.sleep_interval;
  if (!given.output_file) given.output_file = file.output_file;
  if (!given.machine_type_file) given.machine_type_file = file.machine_type_file;
  return given;
}

// ---- Adapter ----

Status ValidateOptions(const DaemonOptions& o) {
  if (!o.open_nvml) return InvalidArgument("gfd: no NVML opener given");
  if (o.output_file.empty() && !o.direct_labels && !o.node_feature_api) {
    return InvalidArgument(
        "gfd: no output: give --output-file, --use-node-feature-api or --direct-labels");
  }
  if (o.direct_labels || o.node_feature_api) {
    const char* what = o.direct_labels ? "--direct-labels" : "--use-node-feature-api";
    if (!o.client) {
      return InvalidArgument(std::string(what) +
                             " needs the API server (--kubeconfig or in-cluster)");
    }
    if (o.node_name.empty()) {
      return InvalidArgument(std::string(what) + " needs the node's name: set NODE_NAME");
    }
  }
  if (o.node_feature_api && o.namespace_name.empty()) {
    return InvalidArgument(
        "--use-node-feature-api needs a namespace for the NodeFeature: set OPERATOR_NAMESPACE "
        "or --namespace");
  }
  return Status::Ok();
}

namespace {

// Everything GenerateLabels needs except the config and timestamp. An error
// here is NVML's (the caller reopens it).
Result<LabelInput> Collect(const nvml::Client& nvml, const DaemonOptions& o) {
  LabelInput in;
  GPUOP_ASSIGN_OR_RETURN(in.gpus, nvml.Gpus());
  GPUOP_ASSIGN_OR_RETURN(in.system, nvml.System());
  // Both files are optional: a VM without DMI, a GPU sysfs does not show
  // (the labels say "unknown").
  if (auto m = ReadFile(JoinRoot(o.host_root, o.machine_type_file)); m.ok()) {
    in.machine_type = std::string(Trim(*m));
  }
  for (const auto& g : in.gpus) {
    auto addr = NvmlToSysfsPciAddress(g.pci.bus_id);
    if (!addr.ok()) continue;
    auto text = ReadFile(JoinRoot(o.host_root, "/sys/bus/pci/devices/" + *addr + "/class"));
    if (!text.ok()) continue;
    unsigned long v = 0;
    if (std::sscanf(std::string(Trim(*text)).c_str(), "%lx", &v) == 1) {
      in.pci_class[g.pci.bus_id] = static_cast<unsigned>(v);
    }
  }
  return in;
}

Status WriteNodeFeature(const DaemonOptions& o, const Labels& labels) {
  const auto& r = kube::resources::kNodeFeatures;
  const Json want = NodeFeatureObject(o.node_name, o.namespace_name, labels);
  auto got = o.client->Get(r, o.namespace_name, NodeFeatureName(o.node_name));
  if (!got.ok() && kube::IsNotFound(got.status())) {
    auto created = o.client->Create(r, o.namespace_name, want);
    if (created.ok() || !kube::IsAlreadyExists(created.status())) return created.status();
  } else if (!got.ok()) {
    return got.status();
  }
  auto updated = kube::UpdateWithRetry(
      *o.client, r, o.namespace_name, NodeFeatureName(o.node_name), [&](Json& obj) {
        bool changed = kube::SetLabel(obj, kNodeFeatureNodeLabel, o.node_name);
        const Json& spec_labels = want["spec"]["labels"];
        if (!obj.contains("spec") || !obj["spec"].is_object() ||
            obj["spec"]["labels"] != spec_labels) {
          obj["spec"]["labels"] = spec_labels;
          changed = true;
        }
        return changed;
      });
  return updated.status();
}

Status WriteNodeLabels(const DaemonOptions& o, const Labels& labels) {
  GPUOP_ASSIGN_OR_RETURN(Json node, o.client->Get(kube::resources::kNodes, "", o.node_name));
  auto patch = NodeLabelPatch(node, labels);
  if (!patch) return Status::Ok();
  return o.client->Patch(kube::resources::kNodes, "", o.node_name, kube::PatchType::kMerge, *patch)
      .status();
}

// Every output; tries each, returns the first error.
Status WriteOutputs(const DaemonOptions& o, const Labels& labels) {
  Status first = Status::Ok();
  auto keep = [&first](Status s) {
    if (first.ok() && !s.ok()) first = std::move(s);
  };
  if (!o.output_file.empty()) {
    Status s = MakeDirs(DirName(o.output_file));
    if (s.ok()) s = WriteFileAtomic(o.output_file, FeaturesFileContent(labels), 0644);
    keep(s);
  }
  if (o.node_feature_api) keep(WriteNodeFeature(o, labels));
  if (o.direct_labels) keep(WriteNodeLabels(o, labels));
  return first;
}

int64_t Now(const DaemonOptions& o) {
  return o.now ? o.now() : static_cast<int64_t>(std::time(nullptr));
}

}  // namespace

Result<Labels> Daemon::RunOnce(const DaemonOptions& options, const deviceplugin::Config& config) {
  GPUOP_RETURN_IF_ERROR(ValidateOptions(options));
  GPUOP_ASSIGN_OR_RETURN(std::unique_ptr<nvml::Client> nvml, options.open_nvml());
  GPUOP_ASSIGN_OR_RETURN(LabelInput in, Collect(*nvml, options));
  in.config = config;
  if (options.timestamp) in.timestamp = Now(options);
  GPUOP_ASSIGN_OR_RETURN(Labels labels, GenerateLabels(in));
  GPUOP_RETURN_IF_ERROR(WriteOutputs(options, labels));
  return labels;
}

Daemon::Daemon(DaemonOptions options, deviceplugin::Config config)
    : options_(std::move(options)),
      timestamp_(options_.timestamp ? std::optional<int64_t>(Now(options_)) : std::nullopt),
      config_(std::move(config)) {}

Result<std::unique_ptr<Daemon>> Daemon::Start(DaemonOptions options, deviceplugin::Config config) {
  GPUOP_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<Daemon> d(new Daemon(std::move(options), std::move(config)));
  d->thread_ = std::jthread([p = d.get()](std::stop_token stop) { p->Run(stop); });
  return d;
}

Daemon::~Daemon() { Stop(); }

void Daemon::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void Daemon::SetConfig(deviceplugin::Config config) {
  MutexLock lock(mu_);
  config_ = std::move(config);
  config_changed_ = true;
  cv_.notify_all();
}

void Daemon::Relabel() {
  MutexLock lock(mu_);
  relabel_ = true;
  config_changed_ = true;  // wakes the loop
  cv_.notify_all();
}

uint64_t Daemon::passes() const {
  MutexLock lock(mu_);
  return passes_;
}

bool Daemon::WaitForPasses(uint64_t n, std::chrono::milliseconds timeout) const {
  MutexLock lock(mu_);
  return cv_.wait_for(lock.native(), timeout, [&]() GPUOP_REQUIRES(mu_) { return passes_ >= n; });
}

Labels Daemon::labels() const {
  MutexLock lock(mu_);
  return labels_;
}

void Daemon::Run(std::stop_token stop) {
  const Clock& clock = ClockOrReal(options_.clock);
  // A stop wakes the wait below. Registered before mu_ is taken: for a stop
  // already requested it runs here, at once.
  std::stop_callback on_stop(stop, [this] {
    MutexLock lock(mu_);
    cv_.notify_all();
  });
  std::unique_ptr<nvml::Client> nvml;
  std::optional<Labels> written;  // what every output holds now
  Clock::SteadyTime last_write{};
  std::string last_error;  // each distinct error is logged once
  auto log_once = [&last_error](std::string_view what, const Status& s) {
    if (s.message() == last_error) return;
    last_error = s.message();
    LogWarn(what, {{"error", s}});
  };

  while (!stop.stop_requested()) {
    std::chrono::milliseconds wait = options_.rescan_interval;
    deviceplugin::Config config;
    bool relabel = false;
    {
      MutexLock lock(mu_);
      config = config_;
      config_changed_ = false;
      std::swap(relabel, relabel_);
    }
    if (relabel) {
      nvml.reset();
      LogInfo("relabelling on request (SIGHUP)", {{"node", options_.node_name}});
    }
    if (!nvml) {
      auto c = options_.open_nvml();
      if (c.ok()) {
        nvml = std::move(c).value();
        LogInfo("NVML opened", {{"library", nvml->library_path()}});
      } else {
        log_once("NVML is not ready; retrying until it opens", c.status());
        wait = options_.nvml_retry_interval;
      }
    }
    if (nvml) {
      auto in = Collect(*nvml, options_);
      if (!in.ok()) {
        log_once("reading the GPUs failed; reopening NVML", in.status());
        nvml.reset();  // a driver reload needs a fresh nvmlInit
        wait = options_.nvml_retry_interval;
      } else {
        in->config = std::move(config);
        in->timestamp = timestamp_;
        auto labels = GenerateLabels(*in);
        const auto now = clock.SteadyNow();
        const bool due = relabel || !written || (labels.ok() && *labels != *written) ||
                         (options_.sleep_interval && now - last_write >= *options_.sleep_interval);
        if (!labels.ok()) {
          log_once("the labels cannot be computed; the last ones stay", labels.status());
        } else if (due) {
          if (Status s = WriteOutputs(options_, *labels); !s.ok()) {
            log_once("writing the labels failed; retrying", s);
          } else {
            if (!written || *written != *labels) {
              LogInfo("labels written", {{"labels", labels->size()},
                                         {"node", options_.node_name},
                                         {"file", options_.output_file}});
            }
            last_error.clear();
            written = *labels;
            last_write = now;
            MutexLock lock(mu_);
            labels_ = *labels;
            ++passes_;
            cv_.notify_all();
          }
        }
      }
    }
    const auto deadline = clock.SteadyNow() + wait;
    MutexLock lock(mu_);
    clock.WaitUntil(lock.native(), cv_, stop, deadline,
                    [&]() GPUOP_REQUIRES(mu_) { return config_changed_; });
  }
  // NFD drops the labels of a features file that is gone.
  // Only a regular file: never a stream such as /dev/stdout, nor a link.
  struct stat st {};
  if (!options_.output_file.empty() && ::lstat(options_.output_file.c_str(), &st) == 0 &&
      S_ISREG(st.st_mode)) {
    if (unlink(options_.output_file.c_str()) != 0 && errno != ENOENT) {
      LogWarn("removing the features file failed", {{"file", options_.output_file}});
    }
  }
}

}  // namespace gpuop::gfd
