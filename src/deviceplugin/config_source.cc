#include "deviceplugin/config_source.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/files.h"
#include "base/log.h"
#include "base/strings.h"
#include "kube/informer.h"

namespace gpuop::deviceplugin {
namespace {

std::string EnvOr(const std::map<std::string, std::string>& env, const std::string& key,
                  std::string fallback = "") {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

ConfigSelection SelectionFromEnv(const std::map<std::string, std::string>& env,
                                 const std::string& config_flag) {
  ConfigSelection s;
  s.file = config_flag.empty() ? EnvOr(env, "CONFIG_FILE") : config_flag;
  s.srcdir = EnvOr(env, "CONFIG_FILE_SRCDIR");
  s.node_label = EnvOr(env, "NODE_LABEL", kDefaultNodeConfigLabel);
  s.default_config = EnvOr(env, "DEFAULT_CONFIG");
  s.node_name = EnvOr(env, "NODE_NAME");
  return s;
}

Result<std::optional<std::string>> ChooseConfigName(const std::optional<std::string>& label_value,
                                                    const std::string& label_key,
                                                    const std::string& default_config,
                                                    const std::vector<std::string>& available) {
  auto known = [&] { return available.empty() ? "none" : Join(available, ", "); };
  if (label_value && !label_value->empty()) {
    if (Contains(available, *label_value)) return std::optional<std::string>(*label_value);
    return NotFound("node label " + label_key + "=" + *label_value +
                    " names no config; the available configs are: " + known() +
                    " (fix the label or add the config to the ConfigMap)");
  }
  if (!default_config.empty()) {
    if (Contains(available, default_config)) return std::optional<std::string>(default_config);
    return NotFound("DEFAULT_CONFIG=" + default_config +
                    " names no config; the available configs are: " + known());
  }
  if (Contains(available, "default")) return std::optional<std::string>("default");
  if (available.size() == 1) return std::optional<std::string>(available.front());
  return std::optional<std::string>();
}

Result<std::vector<std::string>> ListConfigDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    return NotFound("config directory " + dir + " (CONFIG_FILE_SRCDIR): " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    struct stat st {};
    if (::stat((dir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      names.push_back(std::move(name));
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

Result<LoadedConfig> LoadConfig(const ConfigSelection& selection,
                                const std::optional<std::string>& label_value,
                                const std::map<std::string, std::string>& env,
                                const ConfigOverrides& overrides) {
  std::string path, why;
  if (!selection.file.empty()) {
    path = selection.file;
  } else if (selection.PerNode()) {
    GPUOP_ASSIGN_OR_RETURN(std::vector<std::string> available, ListConfigDir(selection.srcdir));
    GPUOP_ASSIGN_OR_RETURN(
        std::optional<std::string> name,
        ChooseConfigName(label_value, selection.node_label, selection.default_config, available));
    if (name) {
      path = JoinRoot(selection.srcdir, "/" + *name);
      why = label_value && !label_value->empty()
                ? " (label " + selection.node_label + "=" + *label_value + ")"
                : " (no " + selection.node_label + " label)";
    }
  }
  LoadedConfig out;
  std::optional<std::string> text;
  if (path.empty()) {
    out.origin = "flags and environment";
    out.key = "-";
  } else {
    auto read = ReadFile(path);
    if (!read.ok()) return read.status().Annotate("config file " + path);
    text = std::move(read).value();
    out.origin = "config file " + path + why;
    out.key = path + "\n" + *text;
  }
  GPUOP_ASSIGN_OR_RETURN(
      out.config,
      ResolveConfig(text, path.empty() ? "flags" : "config file " + path, env, overrides));
  return out;
}

// ---- ConfigWatcher ----------------------------------------------------------

ConfigWatcher::ConfigWatcher(Options options) : options_(std::move(options)) {}

ConfigWatcher::~ConfigWatcher() { Stop(); }

Result<std::unique_ptr<ConfigWatcher>> ConfigWatcher::Start(Options options, Callback on_config,
                                                            LoadedConfig* initial) {
  auto w = Load(std::move(options), initial);
  if (w.ok()) (*w)->Follow(std::move(on_config));
  return w;
}

Result<std::unique_ptr<ConfigWatcher>> ConfigWatcher::Load(Options options, LoadedConfig* initial) {
  std::unique_ptr<ConfigWatcher> w(new ConfigWatcher(std::move(options)));
  const ConfigSelection& sel = w->options_.selection;
  if (sel.PerNode() && w->options_.client && !sel.node_name.empty()) {
    kube::InformerOptions io;
    io.resource = kube::resources::kNodes;
    io.field_selector = "metadata.name=" + sel.node_name;
    w->informer_ = std::make_unique<kube::Informer>(w->options_.client, io);
    ConfigWatcher* self = w.get();
    auto on_node = [self, key = sel.node_label](const kube::ObjectPtr& obj) {
      std::optional<std::string> value;
      const auto& meta = obj->find("metadata");
      if (meta != obj->end() && meta->is_object()) {
        auto labels = meta->find("labels");
        if (labels != meta->end() && labels->is_object()) {
          auto it = labels->find(key);
          if (it != labels->end() && it->is_string()) value = it->get<std::string>();
        }
      }
      MutexLock lock(self->mu_);
      if (value != self->label_) {
        self->label_ = value;
        self->label_changed_ = true;
        self->cv_.notify_all();
      }
    };
    kube::EventHandler h;
    h.on_add = on_node;
    h.on_update = [on_node](const kube::ObjectPtr&, const kube::ObjectPtr& obj) { on_node(obj); };
    h.on_delete = [self](const kube::ObjectPtr&) {
      MutexLock lock(self->mu_);
      self->label_.reset();
      self->label_changed_ = true;
      self->cv_.notify_all();
    };
    w->informer_->AddEventHandler(std::move(h));
    w->informer_->Start();
    if (!w->informer_->WaitForSync(w->options_.node_sync_timeout)) {
      LogWarn("node not read from the API server yet; loading the config without its label",
              {{"node", sel.node_name}, {"label", sel.node_label}});
    }
  }
  std::optional<std::string> label = w->label();
  auto loaded = LoadConfig(sel, label, w->options_.env, w->options_.overrides);
  if (!loaded.ok()) return loaded.status();
  {
    MutexLock lock(w->mu_);
    w->label_changed_ = false;
  }
  w->applied_key_ = loaded->key;
  if (initial) *initial = std::move(loaded).value();
  return w;
}

void ConfigWatcher::Follow(Callback on_config) {
  const ConfigSelection& sel = options_.selection;
  // Nothing can change without a file or a label to follow.
  if (thread_.joinable() || (sel.file.empty() && !sel.PerNode())) return;
  on_config_ = std::move(on_config);
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
}

void ConfigWatcher::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  if (informer_) informer_->Stop();
}

std::optional<std::string> ConfigWatcher::label() const {
  MutexLock lock(mu_);
  return label_;
}

void ConfigWatcher::CheckNow() {
  MutexLock lock(mu_);
  label_changed_ = true;
  cv_.notify_all();
}

void ConfigWatcher::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    {
      MutexLock lock(mu_);
      cv_.wait_for(lock.native(), stop, options_.check_interval,
                   [this]() GPUOP_REQUIRES(mu_) { return label_changed_; });
      label_changed_ = false;
    }
    if (stop.stop_requested()) return;
    Check();
  }
}

void ConfigWatcher::Check() {
  auto loaded = LoadConfig(options_.selection, label(), options_.env, options_.overrides);
  Status st = loaded.ok() ? Status::Ok() : loaded.status();
  if (loaded.ok()) {
    if (loaded->key == applied_key_) {
      last_error_.clear();
      return;
    }
    st = on_config_(*loaded);
    if (st.ok()) {
      applied_key_ = loaded->key;
      last_error_.clear();
      ++reloads_;
      LogInfo("device plugin config reloaded", {{"origin", loaded->origin}});
      return;
    }
  }
  // Counted and logged once per distinct problem, not at every check.
  if (st.message() != last_error_) {
    ++errors_;
    LogError("device plugin config not applied; the last good config stays", {{"error", st}});
    last_error_ = st.message();
  }
}

}  // namespace gpuop::deviceplugin
