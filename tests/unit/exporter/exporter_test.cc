// The exporter daemon against the GPU simulator (dgx-h100: 8×H100) through
// the real NVML binding: every default counter per GPU with its labels, MIG
// per-instance series, unsupported fields, XIDs from NVML events, a lost GPU,
// pod labels from a fake lister, NVML that loads late, and /metrics and
// /health over HTTP on 127.0.0.1:0. Every wait is on a condition with a
// generous deadline.
#include "exporter/exporter.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <regex>
#include <set>

#include "base/clock.h"
#include "http/server.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"
#include "tests/testing/wait.h"

namespace gpuop::exporter {
namespace {

using testing::kSimNvml;
using testing::WaitFor;

// Lines of `text` that are samples of `family`.
std::vector<std::string> Samples(const std::string& text, const std::string& family) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (line.starts_with(family + "{") || line.starts_with(family + " ")) out.push_back(line);
    pos = end + 1;
  }
  return out;
}

double ValueOf(const std::string& line) { return std::stod(line.substr(line.rfind(' ') + 1)); }

class ExporterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sim_.booted()); }
  void TearDown() override { exporter_.reset(); }

  ExporterOptions Options() {
    ExporterOptions o;
    o.collect_interval = std::chrono::milliseconds(50);
    o.nvml_retry_interval = std::chrono::milliseconds(20);
    o.hostname = "node-1";
    o.open_nvml = [] { return nvml::Client::Open(kSimNvml); };
    return o;
  }

  void Start(ExporterOptions o) {
    auto e = Exporter::Start(std::move(o));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    exporter_ = std::move(e).value();
  }

  // The text of a collection that started after this call.
  std::string Fresh() {
    const uint64_t n = exporter_->collections();
    exporter_->CollectNow();
    EXPECT_TRUE(WaitFor([&] { return exporter_->collections() >= n + 2; }));
    auto snap = exporter_->Snapshot();
    return snap ? *snap : "";
  }

  testing::SimNode sim_{"dgx-h100", "exporter-test"};
  std::unique_ptr<Exporter> exporter_;
};

TEST_F(ExporterTest, EveryDefaultCounterForEachGpuWithDcgmLabels) {
  Start(Options());
  std::string text = Fresh();
  auto client = nvml::Client::Open(kSimNvml);
  ASSERT_TRUE(client.ok());
  auto gpus = (*client)->Gpus();
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 8u);
  auto sys = (*client)->System();
  ASSERT_TRUE(sys.ok());

  for (const Counter& c : DefaultCounters()) {
    if (c.type == MetricType::kLabel || c.field->kind != FieldKind::kNumeric) continue;
    const std::string name(c.field->name);
    auto lines = Samples(text, name);
    EXPECT_EQ(lines.size(), 8u) << name << " should have one series per GPU";
    EXPECT_NE(text.find("# HELP " + name + " " + c.help + "\n"), std::string::npos) << name;
    EXPECT_NE(text.find("# TYPE " + name + " " + std::string(ExpositionTypeName(c.type)) + "\n"),
              std::string::npos)
        << name;
    for (const nvml::Gpu& g : *gpus) {
      const std::string labels = "{gpu=\"" + std::to_string(g.index) + "\",UUID=\"" + g.uuid +
                                 "\",pci_bus_id=\"" + g.pci.bus_id + "\",device=\"nvidia" +
                                 std::to_string(g.minor) + "\",modelName=\"" + g.name +
                                 "\",hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"" +
                                 sys->driver_version + "\"} ";
      EXPECT_NE(text.find(name + labels), std::string::npos) << name << labels;
    }
  }
  for (const auto& line : Samples(text, "DCGM_FI_DEV_XID_ERRORS")) EXPECT_EQ(ValueOf(line), 0);
  for (const auto& line : Samples(text, "DCGM_FI_DEV_GPU_TEMP")) {
    EXPECT_GT(ValueOf(line), 15);
    EXPECT_LT(ValueOf(line), 100);
  }
  for (const auto& line : Samples(text, "DCGM_FI_DEV_POWER_MGMT_LIMIT")) {
    EXPECT_EQ(ValueOf(line), 700) << "H100 SXM's 700 W limit, in W";
  }
  // H100s have GPM: the profiling fields of the default counters are there.
  for (const auto& line : Samples(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")) {
    EXPECT_GE(ValueOf(line), 0);
    EXPECT_LE(ValueOf(line), 1) << "a ratio, as DCGM's";
  }
  EXPECT_NE(
      text.find("gpuop_exporter_field_unsupported{field=\"DCGM_FI_PROF_GR_ENGINE_ACTIVE\"} 0\n"),
      std::string::npos);
  EXPECT_NE(text.find("gpuop_exporter_field_unsupported{field=\"DCGM_FI_DEV_GPU_TEMP\"} 0\n"),
            std::string::npos);
  EXPECT_EQ(Samples(text, "gpuop_exporter_gpu_healthy").size(), 8u);
}

TEST_F(ExporterTest, MigGpuInstancesGetTheirOwnSeriesAndUnsupportedFieldsAreCounted) {
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 2, true, {"1g.10gb", "1g.10gb", "3g.40gb"}).ok());
  Start(Options());
  std::string text = Fresh();

  auto fb = Samples(text, "DCGM_FI_DEV_FB_USED");
  std::set<std::string> gi_ids;
  std::set<std::string> profiles;
  const std::regex mig(
      R"re(gpu="2",.*GPU_I_PROFILE="([^"]+)",GPU_I_ID="(\d+)",hostname="node-1")re");
  for (const auto& line : fb) {
    std::smatch m;
    if (std::regex_search(line, m, mig)) {
      profiles.insert(m[1]);
      gi_ids.insert(m[2]);
    }
  }
  EXPECT_EQ(gi_ids.size(), 3u) << text;
  EXPECT_EQ(profiles, (std::set<std::string>{"1g.10gb", "3g.40gb"}));
  EXPECT_EQ(fb.size(), 8u + 3u) << "8 GPUs + 3 GPU instances";

  // In MIG mode NVML has no GPU utilisation for the GPU, and none for GIs:
  // GPU 2 and its 3 GIs lack it, the other GPUs carry on.
  auto util = Samples(text, "DCGM_FI_DEV_GPU_UTIL");
  EXPECT_EQ(util.size(), 7u);
  for (const auto& line : util) EXPECT_EQ(line.find("gpu=\"2\""), std::string::npos) << line;
  EXPECT_NE(text.find("gpuop_exporter_field_unsupported{field=\"DCGM_FI_DEV_GPU_UTIL\"} 4\n"),
            std::string::npos)
      << text;
}

// The value of `field` on the series whose labels contain `labels`; -1 when none.
double SeriesValue(const std::string& text, const std::string& field, const std::string& labels) {
  for (const auto& line : Samples(text, field)) {
    if (line.find(labels) != std::string::npos) return ValueOf(line);
  }
  return -1;
}

TEST_F(ExporterTest, ProfilingFieldsFollowTheWorkOnGpusAndMigInstances) {
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 2, true, {"1g.10gb", "3g.40gb"}).ok());
  std::vector<Counter> counters = DefaultCounters();
  auto extra = ParseCounters("DCGM_FI_PROF_PIPE_FP16_ACTIVE, gauge, fp16.\n", "extra.csv");
  ASSERT_TRUE(extra.ok()) << extra.status().ToString();
  counters.insert(counters.end(), extra->begin(), extra->end());
  ExporterOptions o = Options();
  o.counters = counters;
  Start(std::move(o));
  std::string text = Fresh();
  // Which GI id the 1g.10gb instance got.
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(text, m, std::regex(R"re(GPU_I_PROFILE="1g.10gb",GPU_I_ID="(\d+)")re")))
      << text;
  const std::string gi = m[1];
  ASSERT_TRUE(sim::AddLoad(sim_.store(), 3, std::nullopt, NowUnixMillis(), 120000).ok());
  ASSERT_TRUE(sim::AddLoad(sim_.store(), 2, std::stoi(gi), NowUnixMillis(), 120000).ok());
  Fresh();  // the baseline sample now has the load ahead of it
  text = Fresh();

  const std::string busy_gpu = "{gpu=\"3\",", idle_gpu = "{gpu=\"4\",";
  const std::string busy_gi = "GPU_I_ID=\"" + gi + "\"";
  for (const char* f : {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE"}) {
    EXPECT_GT(SeriesValue(text, f, busy_gpu), 0.0) << f << "\n" << text;
    EXPECT_EQ(SeriesValue(text, f, idle_gpu), 0.0) << f << ": an idle GPU reads zero";
    EXPECT_GT(SeriesValue(text, f, busy_gi), 0.0) << f << ": the busy MIG instance";
    EXPECT_LE(SeriesValue(text, f, busy_gpu), 1.0) << f << ": a ratio";
  }
  EXPECT_GT(SeriesValue(text, "DCGM_FI_PROF_SM_ACTIVE", busy_gpu), 0.5);
  // Bytes per second, GPM's MiB/s scaled; none per MIG instance.
  EXPECT_GT(SeriesValue(text, "DCGM_FI_PROF_PCIE_RX_BYTES", busy_gpu),
            SeriesValue(text, "DCGM_FI_PROF_PCIE_RX_BYTES", idle_gpu));
  EXPECT_GT(SeriesValue(text, "DCGM_FI_PROF_PCIE_RX_BYTES", idle_gpu), 1e6);
  EXPECT_EQ(SeriesValue(text, "DCGM_FI_PROF_PCIE_RX_BYTES", busy_gi), -1);
  // 8 GPUs and 2 GPU instances, the MIG ones without PCIe traffic.
  EXPECT_EQ(Samples(text, "DCGM_FI_PROF_SM_ACTIVE").size(), 10u);
  EXPECT_NE(text.find("gpuop_exporter_field_unsupported{field=\"DCGM_FI_PROF_PCIE_RX_BYTES\"} 2\n"),
            std::string::npos)
      << text;

  // Two sample buffers per device, reused collection after collection.
  const int held = testing::SimGpmSamples();
  EXPECT_EQ(exporter_->gpm_samples_held(), 20u);
  for (int i = 0; i < 50; ++i) Fresh();
  EXPECT_EQ(exporter_->gpm_samples_held(), 20u);
  EXPECT_EQ(testing::SimGpmSamples(), held) << "no sample buffer leaks across collections";
  // The MIG instances go: their buffers are freed.
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 2, false, {}).ok());
  Fresh();
  EXPECT_EQ(exporter_->gpm_samples_held(), 16u);
  EXPECT_EQ(testing::SimGpmSamples(), held - 4);
  exporter_.reset();
  EXPECT_EQ(testing::SimGpmSamples(), held - 20) << "the exporter frees every buffer it took";
}

TEST_F(ExporterTest, NoGpmSamplesWithoutAProfilingCounter) {
  auto counters = ParseCounters("DCGM_FI_DEV_GPU_TEMP, gauge, temp.\n", "mine.csv");
  ASSERT_TRUE(counters.ok());
  ExporterOptions o = Options();
  o.counters = *counters;
  Start(std::move(o));
  Fresh();
  EXPECT_EQ(exporter_->gpm_samples_held(), 0u);
  // The simulator is loaded by now (it is not before the first exporter of
  // the process), and every earlier test's exporter freed its samples.
  EXPECT_EQ(testing::SimGpmSamples(), 0);
}

TEST_F(ExporterTest, AmpereHasNoProfilingFields) {
  ASSERT_TRUE(sim_.Boot("dgx-a100", "exporter-a100", "state-a100"));
  Start(Options());
  std::string text = Fresh();
  EXPECT_TRUE(Samples(text, "DCGM_FI_PROF_SM_ACTIVE").empty());
  EXPECT_FALSE(Samples(text, "DCGM_FI_DEV_GPU_UTIL").empty());
  EXPECT_NE(text.find("gpuop_exporter_field_unsupported{field=\"DCGM_FI_PROF_SM_ACTIVE\"} 8\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(exporter_->gpm_samples_held(), 0u);
}

TEST_F(ExporterTest, InjectedXidShowsAsTheLastXid) {
  Start(Options());
  ASSERT_TRUE(WaitFor([&] { return exporter_->WatchingEvents() && exporter_->Snapshot(); }));
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 3, 48, std::nullopt, std::nullopt).ok());
  auto xid_of = [&](unsigned gpu) -> double {
    auto snap = exporter_->Snapshot();
    for (const auto& line : Samples(*snap, "DCGM_FI_DEV_XID_ERRORS")) {
      if (line.find("{gpu=\"" + std::to_string(gpu) + "\"") != std::string::npos) {
        return ValueOf(line);
      }
    }
    return -1;
  };
  ASSERT_TRUE(WaitFor([&] { return xid_of(3) == 48; })) << *exporter_->Snapshot();
  EXPECT_EQ(xid_of(2), 0);
  ASSERT_TRUE(sim::InjectXid(sim_.store(), 3, 13, std::nullopt, std::nullopt).ok());
  EXPECT_TRUE(WaitFor([&] { return xid_of(3) == 13; })) << "the last XID, not the first";
}

TEST_F(ExporterTest, LostGpuKeepsItsLabelsAndTheOthersCarryOn) {
  Start(Options());
  ASSERT_TRUE(WaitFor([&] { return exporter_->WatchingEvents() && exporter_->Snapshot(); }));
  std::string before = Fresh();
  std::string gpu5_uuid;
  for (const auto& line : Samples(before, "gpuop_exporter_gpu_healthy")) {
    if (line.starts_with("gpuop_exporter_gpu_healthy{gpu=\"5\"")) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(line, m, std::regex("UUID=\"([^\"]+)\"")));
      gpu5_uuid = m[1];
    }
  }
  ASSERT_FALSE(gpu5_uuid.empty());

  ASSERT_TRUE(sim::MarkGpuLost(sim_.store(), 5).ok());
  std::string text;
  ASSERT_TRUE(WaitFor([&] {
    text = *exporter_->Snapshot();
    for (const auto& line : Samples(text, "gpuop_exporter_gpu_healthy")) {
      if (line.starts_with("gpuop_exporter_gpu_healthy{gpu=\"5\",UUID=\"" + gpu5_uuid)) {
        return ValueOf(line) == 0;
      }
    }
    return false;
  })) << text;
  auto temp = Samples(text, "DCGM_FI_DEV_GPU_TEMP");
  EXPECT_EQ(temp.size(), 7u);
  for (const auto& line : temp) EXPECT_EQ(line.find("gpu=\"5\""), std::string::npos);
  // XID 79 came as an event: it stays on the lost GPU's series.
  EXPECT_TRUE(WaitFor([&] {
    for (const auto& line : Samples(*exporter_->Snapshot(), "DCGM_FI_DEV_XID_ERRORS")) {
      if (line.starts_with("DCGM_FI_DEV_XID_ERRORS{gpu=\"5\",UUID=\"" + gpu5_uuid)) {
        return ValueOf(line) == 79;
      }
    }
    return false;
  }));
  EXPECT_EQ(exporter_->Health().status, 200) << "one lost GPU does not fail the exporter";

  ASSERT_TRUE(sim::ResetGpu(sim_.store(), 5).ok());
  EXPECT_TRUE(
      WaitFor([&] { return Samples(*exporter_->Snapshot(), "DCGM_FI_DEV_GPU_TEMP").size() == 8; }));
}

TEST_F(ExporterTest, PodsFromTheListerLabelWholeGpusMigInstancesAndSharedGpus) {
  ASSERT_TRUE(sim::SetMigLayout(sim_.store(), 1, true, {"1g.10gb", "3g.40gb"}).ok());
  auto client = nvml::Client::Open(kSimNvml);
  ASSERT_TRUE(client.ok());
  auto gpus = (*client)->Gpus();
  ASSERT_TRUE(gpus.ok());
  const nvml::Gpu& g0 = (*gpus)[0];
  const nvml::Gpu& g1 = (*gpus)[1];
  ASSERT_EQ(g1.mig_devices.size(), 2u);
  const nvml::MigDevice& big =
      g1.mig_devices[0].profile == "3g.40gb" ? g1.mig_devices[0] : g1.mig_devices[1];

  // The lister runs on the cache's thread until the exporter stops (in
  // TearDown): it owns what it uses.
  ExporterOptions o = Options();
  o.collect_interval = std::chrono::hours(1);  // only the pod mapping change re-renders
  o.pod_resources_interval = std::chrono::milliseconds(20);
  o.pod_lister = [gpu0 = g0.uuid,
                  mig = big.uuid]() -> Result<std::vector<kubelet::ContainerDevices>> {
    return std::vector<kubelet::ContainerDevices>{
        {"train-0", "ml", "main", "nvidia.com/gpu", {gpu0 + "::0"}},
        {"train-1", "ml", "main", "nvidia.com/gpu", {gpu0 + "::1"}},
        {"infer-0", "default", "srv", "nvidia.com/mig-3g.40gb", {mig}},
    };
  };
  Start(std::move(o));
  std::string text;
  ASSERT_TRUE(WaitFor([&] {
    auto s = exporter_->Snapshot();
    text = s ? *s : "";
    return text.find("pod=\"infer-0\"") != std::string::npos;
  })) << text;

  auto temp = Samples(text, "DCGM_FI_DEV_GPU_TEMP");
  int gpu0 = 0;
  for (const auto& line : temp) {
    if (!line.starts_with("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"")) continue;
    ++gpu0;
    EXPECT_TRUE(
        line.find(",container=\"main\",namespace=\"ml\",pod=\"train-0\"}") != std::string::npos ||
        line.find(",container=\"main\",namespace=\"ml\",pod=\"train-1\"}") != std::string::npos)
        << line;
  }
  EXPECT_EQ(gpu0, 2) << "a shared GPU: one series per container";
  EXPECT_EQ(temp.size(), 9u);
  bool mig_seen = false;
  for (const auto& line : Samples(text, "DCGM_FI_DEV_FB_USED")) {
    if (line.find("GPU_I_ID=\"" + std::to_string(big.gi_id) + "\"") != std::string::npos &&
        line.find("gpu=\"1\"") != std::string::npos) {
      mig_seen = true;
      EXPECT_NE(line.find("GPU_I_PROFILE=\"3g.40gb\""), std::string::npos);
      EXPECT_NE(line.find(",container=\"srv\",namespace=\"default\",pod=\"infer-0\"}"),
                std::string::npos)
          << line;
    } else {
      EXPECT_EQ(line.find("pod=\"infer-0\""), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(mig_seen) << text;

  EXPECT_NE(text.find("gpuop_exporter_pod_resources_errors_total 0\n"), std::string::npos);
}

TEST_F(ExporterTest, StartsBeforeNvmlLoadsAndServesHttp) {
  std::atomic<int> attempts{0};
  std::atomic<bool> loadable{false};
  ExporterOptions o = Options();
  o.open_nvml = [&]() -> Result<std::unique_ptr<nvml::Client>> {
    ++attempts;
    if (!loadable) return Unavailable("libnvidia-ml.so.1: not found (driver not installed yet)");
    return nvml::Client::Open(kSimNvml);
  };
  Start(std::move(o));
  Exporter* e = exporter_.get();
  auto server = http::Server::Start(
      "127.0.0.1:0", "--listen",
      {{"/metrics", [e] { return e->Metrics(); }}, {"/health", [e] { return e->Health(); }}});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client http("127.0.0.1", (*server)->port());

  ASSERT_TRUE(WaitFor([&] { return attempts >= 3; }));
  auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 503);

  loadable = true;
  ASSERT_TRUE(WaitFor([&] {
    auto h = http.Get("/health");
    return h && h->status == 200;
  }));
  metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->get_header_value("Content-Type").find("text/plain; version=0.0.4"),
            std::string::npos);
  auto snap = e->Snapshot();
  ASSERT_TRUE(snap);
  // The body is the snapshot the scrape saw, then the scrape counter.
  EXPECT_TRUE(metrics->body.starts_with("# HELP ")) << metrics->body.substr(0, 200);
  EXPECT_EQ(Samples(metrics->body, "DCGM_FI_DEV_GPU_TEMP").size(), 8u);
  auto scrapes = Samples(metrics->body, "gpuop_exporter_scrapes_total");
  ASSERT_EQ(scrapes.size(), 1u);
  EXPECT_GE(ValueOf(scrapes[0]), 1);
  EXPECT_TRUE(metrics->body.ends_with("\n"));
  (*server)->Stop();
}

TEST_F(ExporterTest, StopIsQuickAndCleanWithLongIntervals) {
  ExporterOptions o = Options();
  o.collect_interval = std::chrono::hours(1);
  o.pod_resources_interval = std::chrono::hours(1);
  o.pod_lister = [] { return Result<std::vector<kubelet::ContainerDevices>>(Unavailable("x")); };
  Start(std::move(o));
  ASSERT_TRUE(WaitFor([&] { return exporter_->collections() >= 1; }));
  exporter_->Stop();  // returns: waits are cut short by the stop token
  exporter_.reset();
  SUCCEED();
}

TEST(ExporterOptionsTest, RejectsBadOptions) {
  ExporterOptions o;
  EXPECT_FALSE(Exporter::Start(o).ok());
  o.open_nvml = [] { return nvml::Client::Open(kSimNvml); };
  o.collect_interval = std::chrono::milliseconds(0);
  auto r = Exporter::Start(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--collect-interval"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::exporter
