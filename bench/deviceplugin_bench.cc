// The device plugin's Allocate and GetPreferredAllocation, on an 8-GPU H100
// node.
//
// DpAllocateGrpc: the whole kubelet round trip. A FakeKubelet (the kubelet's
// side, real gRPC over a unix socket) calls Allocate on a DevicePluginServer
// whose callback runs deviceplugin::Allocate over BuildResources' resource,
// for each device list strategy. The work is spread over threads (client,
// gRPC server), so the time is wall time, and every call is timed on its own:
// p50_us and p99_us are the median and 99th percentile of those calls.
//
// DpGrpcEmptyCall: the gRPC round trip alone, for comparison.
// DpAllocateCore and DpPreferred: the pure cores alone (no gRPC).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deviceplugin/allocate.h"
#include "deviceplugin/config.h"
#include "deviceplugin/preferred.h"
#include "deviceplugin/resources.h"
#include "deviceplugin/topology.h"
#include "kubelet/device_plugin_server.h"
#include "kubelet/registration.h"
#include "nvml/device.h"
#include "sim/kubelet/fake_kubelet.h"

namespace {

namespace dp = gpuop::deviceplugin;
using std::chrono::milliseconds;

constexpr char kResource[] = "nvidia.com/gpu";

// 8 × H100 SXM as nvml::Client reports them: minors 0-7, NUMA 0 for 0-3, 1 for 4-7.
std::vector<gpuop::nvml::Gpu> H100Node() {
  std::vector<gpuop::nvml::Gpu> gpus;
  for (unsigned i = 0; i < 8; ++i) {
    gpuop::nvml::Gpu g;
    g.index = i;
    g.name = "NVIDIA H100 80GB HBM3";
    g.uuid = "GPU-" + std::to_string(10000000 + i) + "-1111-2222-3333-444444444444";
    g.minor = static_cast<int>(i);
    g.numa_node = i < 4 ? 0 : 1;
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + 0x10 * i);
    g.pci.bus_id = bus;
    g.mig_capable = true;
    gpus.push_back(g);
  }
  return gpus;
}

dp::Config StrategyConfig(const std::string& strategy) {
  dp::Config c;
  if (strategy == "envvar+passDeviceSpecs") {
    c.pass_device_specs = true;
  } else {
    auto s = dp::ParseDeviceListStrategy(std::string_view(strategy));
    if (!s.ok()) {
      std::fprintf(stderr, "bench: %s\n", s.status().ToString().c_str());
      std::abort();
    }
    c.device_list = *s;
  }
  return c;
}

const std::vector<std::string> kStrategies = {"envvar", "volume-mounts", "cdi-annotations",
                                              "cdi-cri", "envvar+passDeviceSpecs"};

// The annotation's random part: a counter is enough here (and thread-safe).
std::string NextUuid() {
  static std::atomic<uint64_t> n{0};
  char buf[40];
  std::snprintf(buf, sizeof buf, "00000000-0000-4000-8000-%012llx",
                static_cast<unsigned long long>(n.fetch_add(1)));
  return buf;
}

const dp::Resource& GpuResource() {
  static const dp::Resource r = [] {
    auto rs = dp::BuildResources(H100Node(), dp::Config{}, nullptr);
    if (!rs.ok() || rs->size() != 1) {
      std::fprintf(stderr, "bench: BuildResources: %s\n", rs.status().ToString().c_str());
      std::abort();
    }
    return rs->front();
  }();
  return r;
}

std::vector<std::string> FirstIds(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back(GpuResource().units[static_cast<size_t>(i)].uuid);
  return ids;
}

// One fake kubelet and one registered plugin for the whole run; the strategy
// the plugin's callback allocates with is switched between benchmarks (no
// call is in flight then).
class GrpcNode {
 public:
  static GrpcNode& Get() {
    static GrpcNode node;
    return node;
  }
  void Use(const std::string& strategy) { current_.store(&configs_.at(strategy)); }
  gpuop::sim::FakeKubelet& kubelet() { return *kubelet_; }

  ~GrpcNode() {
    if (server_) server_->Stop();
    if (kubelet_) kubelet_->Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  GrpcNode() {
    for (const auto& s : kStrategies) configs_.emplace(s, StrategyConfig(s));
    current_.store(&configs_.at("envvar"));
    char tmpl[] = "/tmp/gdpb-XXXXXX";  // unix socket paths: < 108 bytes
    if (::mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
    dir_ = tmpl;

    auto kubelet = gpuop::sim::FakeKubelet::Start(dir_);
    if (!kubelet.ok()) Die(kubelet.status().ToString());
    kubelet_ = std::move(kubelet).value();

    gpuop::kubelet::DevicePluginCallbacks cb;
    cb.allocate = [this](const std::vector<std::vector<std::string>>& containers)
        -> gpuop::Result<std::vector<dp::ContainerAllocation>> {
      const dp::Config& c = *current_.load();
      std::vector<dp::ContainerAllocation> out;
      for (const auto& ids : containers) {
        auto a = dp::Allocate(GpuResource(), ids, c, NextUuid);
        if (!a.ok()) return a.status();
        out.push_back(std::move(a).value());
      }
      return out;
    };
    auto server = gpuop::kubelet::DevicePluginServer::Start(dir_ + "/nvidia-gpu.sock", cb);
    if (!server.ok()) Die(server.status().ToString());
    server_ = std::move(server).value();
    server_->SetDevices(GpuResource().Devices());

    auto st = gpuop::kubelet::RegisterWithKubelet(kubelet_->socket_path(), "nvidia-gpu.sock",
                                                  kResource, true, milliseconds(5000));
    if (!st.ok()) Die(st.ToString());
    auto devs = kubelet_->WaitForDevices(
        kResource, [](const auto& d) { return d.size() == 8; }, milliseconds(5000));
    if (!devs.ok()) Die(devs.status().ToString());
  }

  [[noreturn]] static void Die(const std::string& why) {
    std::fprintf(stderr, "bench: device plugin node: %s\n", why.c_str());
    std::abort();
  }

  std::string dir_;
  std::map<std::string, dp::Config> configs_;
  std::atomic<const dp::Config*> current_{nullptr};
  std::unique_ptr<gpuop::sim::FakeKubelet> kubelet_;
  std::unique_ptr<gpuop::kubelet::DevicePluginServer> server_;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// Times each `call()` (which returns a Result) on its own; reports the median
// and 99th percentile as p50_us / p99_us.
template <typename Call>
void TimeEachCall(benchmark::State& state, const Call& call) {
  std::vector<double> us;
  us.reserve(1 << 14);
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = call();
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  state.counters["p50_us"] = Percentile(us, 0.50);
  state.counters["p99_us"] = Percentile(us, 0.99);
}

void BM_DpAllocateGrpc(benchmark::State& state, const std::string& strategy) {
  GrpcNode& node = GrpcNode::Get();
  node.Use(strategy);
  const auto ids = FirstIds(static_cast<int>(state.range(0)));
  // One call outside the timing: the channel is connected and the path warm.
  if (!node.kubelet().Allocate(kResource, ids).ok()) {
    state.SkipWithError("warm-up Allocate failed");
    return;
  }
  TimeEachCall(state, [&] { return node.kubelet().Allocate(kResource, ids); });
}

// The floor under DpAllocateGrpc: an empty call (GetDevicePluginOptions) over
// the same socket, channel and server threads.
void BM_DpGrpcEmptyCall(benchmark::State& state) {
  GrpcNode& node = GrpcNode::Get();
  TimeEachCall(state, [&] { return node.kubelet().GetDevicePluginOptions(kResource); });
}
BENCHMARK(BM_DpGrpcEmptyCall)->UseRealTime();

void BM_DpAllocateCore(benchmark::State& state, const std::string& strategy) {
  const dp::Config c = StrategyConfig(strategy);
  const auto ids = FirstIds(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto a = dp::Allocate(GpuResource(), ids, c, NextUuid);
    benchmark::DoNotOptimize(a);
  }
}

#define GPUOP_DP_STRATEGY_BENCH(fn, name, strategy) \
  BENCHMARK_CAPTURE(fn, name, std::string(strategy))->Arg(1)->Arg(8)

GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateGrpc, envvar, "envvar")->UseRealTime();
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateGrpc, volume_mounts, "volume-mounts")->UseRealTime();
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateGrpc, cdi_annotations, "cdi-annotations")->UseRealTime();
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateGrpc, cdi_cri, "cdi-cri")->UseRealTime();
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateGrpc, envvar_pass_device_specs, "envvar+passDeviceSpecs")
    ->UseRealTime();
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateCore, envvar, "envvar");
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateCore, volume_mounts, "volume-mounts");
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateCore, cdi_annotations, "cdi-annotations");
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateCore, cdi_cri, "cdi-cri");
GPUOP_DP_STRATEGY_BENCH(BM_DpAllocateCore, envvar_pass_device_specs, "envvar+passDeviceSpecs");

// h100-nvl-8 (the simulator's machine): NVLink bridges 0-1, 2-3, 4-5, 6-7
// (12 links each), every GPU on its own root port, GPUs 0-3 on NUMA node 0
// and 4-7 on node 1.
dp::Topology H100Nvl8() {
  dp::Topology t(8);
  for (unsigned a = 0; a < 8; ++a) {
    t.SetNumaNode(a, a < 4 ? 0 : 1);
    for (unsigned b = a + 1; b < 8; ++b) {
      t.SetLevel(a, b,
                 (a < 4) == (b < 4) ? gpuop::nvml::TopologyLevel::kNode
                                    : gpuop::nvml::TopologyLevel::kSystem);
    }
  }
  for (unsigned a = 0; a < 8; a += 2) t.SetNvLinks(a, a + 1, 12);
  return t;
}

// Preferred `size` of the 8 whole GPUs, all available.
void BM_DpPreferred(benchmark::State& state) {
  const dp::Topology topo = H100Nvl8();
  std::vector<dp::DeviceRef> avail;
  for (const dp::Unit& u : GpuResource().units) avail.push_back({u.uuid, u.gpu, u.uuid, false, 1});
  const int size = static_cast<int>(state.range(0));
  for (auto _ : state) {
    auto r = dp::PreferredAllocation(topo, avail, {}, size, dp::SharedPolicy::kDistributed);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_DpPreferred)->Arg(2)->Arg(4);

}  // namespace
