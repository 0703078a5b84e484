#include "exporter/exporter.h"

#include "base/log.h"

namespace gpuop::exporter {
namespace {

constexpr unsigned kEventWaitMs = 250;  // how soon the events thread sees a stop

// GPM costs two NVML calls and two sample buffers per device: only when a
// counter reads it.
bool NeedsGpm(const std::vector<Counter>& counters) {
  return std::any_of(counters.begin(), counters.end(),
                     [](const Counter& c) { return c.field->name.starts_with("DCGM_FI_PROF_"); });
}

}  // namespace

Exporter::Exporter(ExporterOptions options)
    : options_(std::move(options)), needs_gpm_(NeedsGpm(options_.counters)) {}

Exporter::~Exporter() { Stop(); }

Result<std::unique_ptr<Exporter>> Exporter::Start(ExporterOptions options) {
  if (!options.open_nvml) return InvalidArgument("exporter: no way to open NVML was given");
  if (options.collect_interval.count() <= 0) {
    return InvalidArgument("--collect-interval " +
                           std::to_string(options.collect_interval.count()) +
                           " ms: the interval must be at least 1 ms");
  }
  if (options.pod_lister && options.pod_resources_interval.count() <= 0) {
    return InvalidArgument("--pod-resources-interval must be at least 1 ms");
  }
  if (options.nvml_retry_interval.count() <= 0)
    options.nvml_retry_interval = std::chrono::seconds(5);
  if (options.counters.empty()) options.counters = DefaultCounters();
  std::string unavailable;
  for (const Counter& c : options.counters) {
    if (c.field->kind != FieldKind::kUnavailable) continue;
    if (!unavailable.empty()) unavailable += ",";
    unavailable += c.field->name;
  }
  if (!unavailable.empty()) {
    LogInfo("fields NVML cannot give are accepted but not exported (see docs/exporter.md)",
            {{"fields", unavailable}});
  }

  std::unique_ptr<Exporter> e(new Exporter(std::move(options)));
  Exporter* raw = e.get();
  e->self_.kubernetes = static_cast<bool>(e->options_.pod_lister);
  if (e->options_.pod_lister) {
    e->pods_ = std::make_unique<PodResourcesCache>(
        e->options_.pod_lister, e->options_.pod_resources_interval, [raw] { raw->CollectNow(); });
  }
  e->collector_ = std::jthread([raw](std::stop_token stop) { raw->RunCollector(stop); });
  e->events_ = std::jthread([raw](std::stop_token stop) { raw->RunEvents(stop); });
  return e;
}

void Exporter::Stop() {
  collector_.request_stop();
  events_.request_stop();
  if (collector_.joinable()) collector_.join();
  if (events_.joinable()) events_.join();
  pods_.reset();
  MutexLock lock(mu_);
  client_.reset();
}

std::shared_ptr<const std::string> Exporter::Snapshot() const {
  MutexLock lock(mu_);
  return snapshot_;
}

uint64_t Exporter::collections() const { return collections_.load(); }

size_t Exporter::gpm_samples_held() const { return gpm_samples_held_.load(); }

bool Exporter::WatchingEvents() const { return watching_events_.load(); }

void Exporter::CollectNow() {
  {
    MutexLock lock(mu_);
    wake_ = true;
  }
  wake_cv_.notify_all();
}

http::Response Exporter::Metrics() {
  auto snap = Snapshot();
  if (!snap) {
    return {503, "text/plain; charset=utf-8",
            "no metrics yet: the first collection has not finished (is NVML loadable?)\n", nullptr};
  }
  const uint64_t n = scrapes_.fetch_add(1) + 1;
  http::Response r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.shared_body = std::move(snap);
  r.body =
      "# HELP gpuop_exporter_scrapes_total Scrapes of /metrics served.\n"
      "# TYPE gpuop_exporter_scrapes_total counter\n"
      "gpuop_exporter_scrapes_total " +
      std::to_string(n) + "\n";
  return r;
}

http::Response Exporter::Health() const {
  MutexLock lock(mu_);
  if (!client_) return {503, "text/plain; charset=utf-8", "NVML is not open\n", nullptr};
  if (!snapshot_) return {503, "text/plain; charset=utf-8", "no collection yet\n", nullptr};
  return {200, "text/plain; charset=utf-8", "OK\n", nullptr};
}

std::shared_ptr<nvml::Client> Exporter::CurrentClient() const {
  MutexLock lock(mu_);
  return client_;
}

void Exporter::DropClient() {
  {
    MutexLock lock(mu_);
    client_.reset();
    ++client_generation_;
  }
  wake_cv_.notify_all();
}

void Exporter::RunCollector(std::stop_token stop) {
  std::string last_open_error;
  while (!stop.stop_requested()) {
    std::shared_ptr<nvml::Client> client = CurrentClient();
    auto wait = options_.collect_interval;
    if (!client) {
      auto opened = options_.open_nvml();
      if (opened.ok()) {
        client = std::shared_ptr<nvml::Client>(std::move(opened).value());
        {
          MutexLock lock(mu_);
          client_ = client;
          ++client_generation_;
        }
        wake_cv_.notify_all();  // the events thread registers with the new client
        if (needs_gpm_) gpm_ = client->NewGpmSampler();
        last_open_error.clear();
        LogInfo("NVML opened", {{"library", client->library_path()}});
      } else {
        if (opened.status().message() != last_open_error) {
          last_open_error = opened.status().message();
          LogWarn("cannot open NVML yet; retrying",
                  {{"error", opened.status()},
                   {"retry_ms", static_cast<int64_t>(options_.nvml_retry_interval.count())}});
        }
        wait = std::min(wait, options_.nvml_retry_interval);
      }
    }
    if (client && !Collect(*client)) {
      gpm_.reset();  // its samples belong to the client being dropped
      DropClient();  // reopened on the next round
      wait = std::min(wait, options_.nvml_retry_interval);
    }
    MutexLock lock(mu_);
    wake_cv_.wait_for(lock.native(), stop, wait, [this]() GPUOP_REQUIRES(mu_) { return wake_; });
    wake_ = false;
  }
}

std::optional<nvml::GpmMetrics> Exporter::ReadGpm(unsigned gpu, std::optional<unsigned> gi_id) {
  if (!gpm_) return std::nullopt;
  auto m = gpm_->Read(gpu, gi_id);
  const std::pair<unsigned, unsigned> device{gpu, gi_id.value_or(~0u)};
  if (m.ok()) {
    if (gpm_failing_.erase(device) > 0) {
      LogInfo("GPM profiling metrics work again", {{"gpu", gpu}, {"gi", gi_id.value_or(0)}});
    }
    return *m;
  }
  // A GPU without GPM is the common case, not an error: its profiling fields
  // are counted in gpuop_exporter_field_unsupported.
  if (m.status().code() != StatusCode::kNotSupported) {
    ++self_.collection_errors;
    if (gpm_failing_.insert(device).second) {  // once, not every collection
      LogWarn("GPM profiling metrics failed; their fields are missing until a sample succeeds",
              {{"gpu", gpu}, {"gi", gi_id.value_or(0)}, {"error", m.status()}});
    }
  }
  return std::nullopt;
}

bool Exporter::Collect(const nvml::Client& client) {
  const auto start = std::chrono::steady_clock::now();
  auto count = client.GpuCount();
  if (!count.ok()) {
    ++self_.collection_errors;
    LogWarn("NVML cannot count the GPUs; reopening it", {{"error", count.status()}});
    return false;
  }
  if (auto sys = client.System(); sys.ok()) {
    collection_.system = std::move(sys).value();
  } else {
    ++self_.collection_errors;
  }
  std::map<unsigned, uint64_t> xids;
  {
    MutexLock lock(mu_);
    xids = last_xid_;
  }

  known_gpus_.resize(*count);
  was_healthy_.resize(*count, true);
  collection_.gpus.clear();
  collection_.healthy.clear();
  collection_.devices.clear();
  for (unsigned i = 0; i < *count; ++i) {
    Reading reading;
    reading.last_xid = xids.contains(i) ? xids[i] : 0;
    bool healthy = false;
    Status why;
    auto described = client.GpuByIndex(i);
    if (!described.ok() && described.status().code() == StatusCode::kPermissionDenied) {
      // A GPU this process may not open is not its to watch (nvml::Client::Gpus skips it too).
      if (was_healthy_[i])
        LogWarn("skipping a GPU NVML may not open", {{"gpu", i}, {"error", described.status()}});
      was_healthy_[i] = false;
      continue;
    }
    if (auto& g = described; g.ok()) {
      known_gpus_[i] = std::move(g).value();
      if (auto t = client.ReadTelemetry(i); t.ok()) {
        reading.telemetry = std::move(t).value();
        reading.gpm = ReadGpm(i, std::nullopt);
        healthy = true;
      } else {
        why = t.status();
      }
    } else {
      known_gpus_[i].index = i;  // keeps the last known identity, if any
      why = g.status();
    }
    if (!healthy) ++self_.collection_errors;
    if (healthy != was_healthy_[i]) {
      if (healthy) {
        LogInfo("GPU answers NVML again", {{"gpu", i}, {"uuid", known_gpus_[i].uuid}});
      } else {
        LogWarn("GPU does not answer NVML; its series report gpuop_exporter_gpu_healthy 0",
                {{"gpu", i}, {"uuid", known_gpus_[i].uuid}, {"error", why}});
      }
      was_healthy_[i] = healthy;
    }

    const size_t pos = collection_.gpus.size();
    collection_.gpus.push_back(known_gpus_[i]);
    collection_.healthy.push_back(healthy);
    collection_.devices.push_back({pos, std::nullopt, std::move(reading)});
    if (!healthy) continue;

    // One series per MIG GPU instance (its first MIG device stands for it).
    const nvml::Gpu& g = collection_.gpus[pos];
    std::vector<unsigned> seen_gi;
    for (size_t j = 0; j < g.mig_devices.size(); ++j) {
      const nvml::MigDevice& m = g.mig_devices[j];
      if (std::find(seen_gi.begin(), seen_gi.end(), m.gi_id) != seen_gi.end()) continue;
      seen_gi.push_back(m.gi_id);
      Collection::Device d{pos, j, std::nullopt};
      if (auto t = client.ReadMigTelemetry(i, m.index); t.ok()) {
        d.reading = Reading{std::move(t).value(), std::nullopt, ReadGpm(i, m.gi_id)};
      } else {
        ++self_.collection_errors;
      }
      collection_.devices.push_back(std::move(d));
    }
  }

  if (gpm_) {
    gpm_->Sweep();  // MIG instances destroyed since the last round
    gpm_samples_held_.store(gpm_->held_samples());
  }

  if (pods_) {
    auto latest = pods_->Latest();
    collection_.pods = latest ? AttributePods(*latest, collection_.gpus, options_.gpu_id_type,
                                              options_.extra_resource_names)
                              : PodMap{};
    self_.pod_resources_errors = pods_->errors();
  }
  ++self_.collections;
  self_.last_collection_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // A fresh string each time (scrapers may still hold the previous one),
  // sized from the last so it grows at most once.
  std::string text;
  text.reserve(last_render_size_ + last_render_size_ / 8 + 4096);
  RenderMetrics(options_.counters, options_.hostname, collection_, self_, &text);
  last_render_size_ = text.size();
  auto snap = std::make_shared<const std::string>(std::move(text));
  {
    MutexLock lock(mu_);
    snapshot_ = std::move(snap);
  }
  collections_.fetch_add(1);
  return true;
}

void Exporter::RunEvents(std::stop_token stop) {
  std::shared_ptr<nvml::Client> client;
  std::unique_ptr<nvml::EventWatcher> watcher;
  uint64_t generation = 0;
  std::string last_error;
  auto pause = [&](std::chrono::milliseconds d) {
    MutexLock lock(mu_);
    wake_cv_.wait_for(lock.native(), stop, d,
                      [&]() GPUOP_REQUIRES(mu_) { return client_generation_ != generation; });
  };
  while (!stop.stop_requested()) {
    {
      MutexLock lock(mu_);
      if (client_generation_ != generation) {
        watcher.reset();
        watching_events_ = false;
        client = client_;
        generation = client_generation_;
      }
    }
    if (!client) {
      pause(options_.nvml_retry_interval);
      continue;
    }
    if (!watcher) {
      auto w = client->NewEventWatcher();
      auto count = client->GpuCount();
      if (!w.ok() || !count.ok()) {
        Status s = w.ok() ? count.status() : w.status();
        if (s.message() != last_error) {
          last_error = s.message();
          LogWarn("cannot watch XID events; DCGM_FI_DEV_XID_ERRORS stays at its last value",
                  {{"error", s}});
        }
        pause(options_.nvml_retry_interval);
        continue;
      }
      for (unsigned i = 0; i < *count; ++i) {
        if (auto r = (*w)->Register(i, nvml::kEventXid); !r.ok()) {
          LogDebug("GPU not registered for XID events", {{"gpu", i}, {"error", r.status()}});
        }
      }
      watcher = std::move(w).value();
      watching_events_ = true;
      last_error.clear();
    }
    auto ev = watcher->Wait(kEventWaitMs);
    if (!ev.ok()) {
      LogWarn("waiting for NVML events failed; re-registering", {{"error", ev.status()}});
      watcher.reset();
      watching_events_ = false;
      pause(options_.nvml_retry_interval);
      continue;
    }
    if (!*ev || ((*ev)->type & nvml::kEventXid) == 0) continue;
    const nvml::Event& e = **ev;
    LogWarn("XID", {{"gpu", e.gpu}, {"uuid", e.uuid}, {"xid", e.xid}});
    {
      MutexLock lock(mu_);
      last_xid_[e.gpu] = e.xid;
      wake_ = true;  // show it now, not at the next interval
    }
    wake_cv_.notify_all();
  }
  watching_events_ = false;
}

}  // namespace gpuop::exporter
