// DRA (`gpuop dra-plugin`, issue 20) on a simulated 8 × H100 node with every
// GPU split into 7 × 1g.10gb MIG devices (56 devices to publish):
//   - building the devices from NVML's GPUs and the ResourceSlices from them;
//   - publishing them to the in-process API emulator over HTTP: the first
//     write of the pool, a re-check that writes nothing, a change;
//   - a claim's prepare and unprepare as the kubelet drives them: gRPC over
//     unix sockets to the plugin server, the claim read from the emulator, the
//     checkpoint and the per-claim CDI spec written to a temporary directory;
//   - the floors under a prepare: an empty gRPC call, one fsync'd file write.
//
// Run from the repository root: build/bin/gpuop_bench --benchmark_filter=Dra
// (figures in docs/performance.md).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/files.h"
#include "base/status.h"
#include "dra/devices.h"
#include "dra/driver.h"
#include "dra/names.h"
#include "dra/slice_publisher.h"
#include "dra/slices.h"
#include "kube/client.h"
#include "kube/resource.h"
#include "kubelet/dra_server.h"
#include "nvml/client.h"
#include "sim/kube/server.h"
#include "sim/kubelet/dra_kubelet.h"
#include "sim/nvml/state.h"
#include "tests/unit/dra/prepare_fixtures.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr unsigned kGpus = 8;
constexpr unsigned kMigsPerGpu = 7;
constexpr char kNamespace[] = "bench";

std::string SimLibrary() {
  const char* dir = std::getenv("GPUOP_BENCH_BUILD_DIR");
  return std::string(dir ? dir : "build") + "/lib/libnvml-sim.so";
}

// A fresh /tmp directory, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/gpuop-drab-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A dgx-h100 in the GPU simulator, its shared state in a scratch directory,
// every GPU in MIG mode with 7 × 1g.10gb or every GPU with MIG off. The
// simulator reads GPUOP_SIM_* when NVML is first initialised, so one machine
// lives at a time and the variables go with it (the NVML benches set theirs).
class SimMachine {
 public:
  static Result<std::unique_ptr<SimMachine>> Boot(bool mig) {
    auto m = std::unique_ptr<SimMachine>(new SimMachine());
    if (m->dir_.path().empty()) return Internal("mkdtemp /tmp/gpuop-drab-XXXXXX failed");
    ::unsetenv("GPUOP_SIM_DRIVER");
    ::setenv("GPUOP_SIM_MACHINE", "dgx-h100", 1);
    ::setenv("GPUOP_SIM_STATE", (m->dir_.path() + "/state").c_str(), 1);
    ::setenv("GPUOP_SIM_SEED", "dra-bench", 1);
    auto store = sim::OpenStateFromEnv(true);
    if (!store.ok()) return store.status();
    m->store_ = std::move(store).value();
    const std::vector<std::string> layout(kMigsPerGpu, "1g.10gb");
    for (unsigned gpu = 0; gpu < kGpus; ++gpu) {
      Status s = sim::SetMigLayout(*m->store_, gpu, mig, mig ? layout : std::vector<std::string>{});
      if (!s.ok()) return s;
    }
    auto client = nvml::Client::Open(SimLibrary());
    if (!client.ok()) {
      return client.status().Annotate("run from the repository root or set GPUOP_BENCH_BUILD_DIR");
    }
    m->nvml_ = std::move(client).value();
    return m;
  }

  ~SimMachine() {
    nvml_.reset();  // nvmlShutdown before the variables go
    store_.reset();
    for (const char* name : {"GPUOP_SIM_MACHINE", "GPUOP_SIM_STATE", "GPUOP_SIM_SEED"}) {
      ::unsetenv(name);
    }
  }

  const nvml::Client& nvml() const { return *nvml_; }
  const std::string& dir() const { return dir_.path(); }

 private:
  SimMachine() = default;
  ScratchDir dir_;
  std::unique_ptr<sim::StateStore> store_;
  std::unique_ptr<nvml::Client> nvml_;
};

// The API emulator on 127.0.0.1:0 with the 1.35 schemas (resource.k8s.io/v1
// objects are validated) and a client without a rate limit.
struct Api {
  std::unique_ptr<simkube::ApiServer> server;
  std::unique_ptr<kube::Client> client;  // declared last: goes before the server
};

Result<Api> StartApi() {
  simkube::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.threads = 8;
  auto server = simkube::ApiServer::Start(std::move(so));
  if (!server.ok()) return server.status();
  kube::RestConfig rc;
  rc.server = (*server)->url();
  rc.qps = 0;
  auto client = kube::Client::New(rc);
  if (!client.ok()) return client.status();
  return Api{std::move(server).value(), std::move(client).value()};
}

// The node's devices as the plugin builds them before publishing.
Result<std::vector<Device>> NodeDevicesNow(const nvml::Client& gpu_lib) {
  auto gpus = gpu_lib.Gpus();
  if (!gpus.ok()) return gpus.status();
  auto system = gpu_lib.System();
  if (!system.ok()) return system.status();
  return BuildDevices(*gpus, *system);
}

// Marks the run as failed with `status`'s message; true when it is an error.
bool Failed(benchmark::State& state, const Status& status) {
  if (status.ok()) return false;
  state.SkipWithError(status.ToString().c_str());
  return true;
}
template <typename T>
bool Failed(benchmark::State& state, const Result<T>& result) {
  return Failed(state, result.status());
}

// Arg 0: devices and slices from GPUs already read; arg 1: with the NVML
// enumeration of the 8 GPUs and 56 MIG devices first (what each rescan does).
void BM_DraBuildDevicesAndSlices(benchmark::State& state) {
  const bool read_nvml = state.range(0) != 0;
  auto machine = SimMachine::Boot(/*mig=*/true);
  if (Failed(state, machine)) return;
  const nvml::Client& gpu_lib = (*machine)->nvml();
  auto gpus = gpu_lib.Gpus();
  if (Failed(state, gpus)) return;
  auto system = gpu_lib.System();
  if (Failed(state, system)) return;

  size_t devices = 0, slices = 0;
  for (auto _ : state) {
    if (read_nvml) {
      gpus = gpu_lib.Gpus();
      if (Failed(state, gpus)) return;
    }
    auto built = BuildDevices(*gpus, *system);
    if (Failed(state, built)) return;
    std::vector<Json> pool = BuildSlices(*built, testing::kNode, "node-uid", 1);
    devices = built->size();
    slices = pool.size();
    benchmark::DoNotOptimize(pool);
  }
  if (devices != kGpus * kMigsPerGpu) {
    state.SkipWithError(("expected 56 MIG devices, built " + std::to_string(devices)).c_str());
  }
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["slices"] = static_cast<double>(slices);
}
BENCHMARK(BM_DraBuildDevicesAndSlices)->Arg(0)->Arg(1)->ArgName("nvml_read");

Status DeleteNodeSlices(kube::Client& client) {
  kube::ListOptions o;
  o.field_selector = SliceFieldSelector(testing::kNode);
  auto list = client.List(kube::resources::kResourceSlices, "", o);
  if (!list.ok()) return list.status();
  for (const Json& slice : list->items) {
    Status s = client.Delete(kube::resources::kResourceSlices, "",
                             slice["metadata"]["name"].get<std::string>());
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

// Arg 0: the first publication of the pool (no slices yet: a Node GET for the
// owner reference, a list, a create); 1: an unchanged re-publish (a list,
// no write); 2: a change each time (a MIG device gone, then back: a list and
// an update in place).
void BM_DraPublishSlices(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  std::vector<Device> devices;
  {
    auto machine = SimMachine::Boot(/*mig=*/true);
    if (Failed(state, machine)) return;
    auto built = NodeDevicesNow((*machine)->nvml());
    if (Failed(state, built)) return;
    devices = std::move(built).value();
  }
  if (devices.size() != kGpus * kMigsPerGpu) {
    state.SkipWithError(
        ("expected 56 MIG devices, built " + std::to_string(devices.size())).c_str());
    return;
  }
  const std::vector<Device> one_fewer(devices.begin(), devices.end() - 1);
  auto api = StartApi();
  if (Failed(state, api)) return;
  kube::Client& client = *api->client;
  const Json node = {
      {"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", testing::kNode}}}};
  if (Failed(state, client.Create(kube::resources::kNodes, "", node))) return;

  auto publisher = std::make_unique<SlicePublisher>(client, testing::kNode);
  if (mode != 0 && Failed(state, publisher->Publish(devices))) return;
  const int64_t first_generation = publisher->generation();
  int64_t writes = 0;
  for (auto _ : state) {
    if (mode == 0) {
      state.PauseTiming();
      Status deleted = DeleteNodeSlices(client);
      publisher = std::make_unique<SlicePublisher>(client, testing::kNode);
      std::vector<Device> copy = devices;
      state.ResumeTiming();
      if (Failed(state, deleted)) return;
      if (Failed(state, publisher->Publish(std::move(copy)))) return;
    } else if (mode == 1) {
      if (Failed(state, publisher->Publish(devices))) return;
    } else {
      if (Failed(state, publisher->Publish(writes % 2 == 0 ? one_fewer : devices))) return;
      ++writes;
    }
  }
  // The row is only what it says when the writes happened (or did not).
  if (mode == 1 && publisher->generation() != first_generation) {
    state.SkipWithError("an unchanged re-publish wrote the slices");
  }
  if (mode == 2 && publisher->generation() != first_generation + writes) {
    state.SkipWithError("a change did not write the slices once");
  }
  state.counters["devices"] = static_cast<double>(devices.size());
}
BENCHMARK(BM_DraPublishSlices)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("first_unchanged_changed")
    ->Unit(benchmark::kMicrosecond);

// The `p` quantile of `v` (reordered); 0 when empty.
double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto nth = v.begin() + static_cast<std::ptrdiff_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), nth, v.end());
  return *nth;
}

class NoTimeSlicing final : public TimeSlicer {
 public:
  Status SetTimeSlice(const std::string&, TimeSliceInterval) override { return Status::Ok(); }
};

// The claim as the scheduler leaves it: `results` allocated on kNode.
Result<kubelet::DraClaim> CreateAllocatedClaim(kube::Client& client,
                                               const std::vector<Json>& results) {
  Json claim = testing::ClaimObject(kNamespace, "bench-claim");
  claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = results.size();
  auto created = client.Create(kube::resources::kResourceClaims, kNamespace, claim);
  if (!created.ok()) return created.status();
  auto allocated =
      client.UpdateStatus(kube::resources::kResourceClaims, testing::Allocated(*created, results));
  if (!allocated.ok()) return allocated.status();
  return kubelet::DraClaim{kNamespace, (*created)["metadata"]["uid"].get<std::string>(),
                           "bench-claim"};
}

// The kubelet's NodePrepareResources then NodeUnprepareResources of one
// claim, over the plugin's sockets. The time is the prepare's mean; the
// counters are the median and 99th percentile of each call. Arg 0: one
// 1g.10gb MIG device on the MIG node; arg 1: all 8 GPUs with MIG off.
void BM_DraPrepareUnprepare(benchmark::State& state) {
  const bool whole_gpus = state.range(0) != 0;
  auto machine = SimMachine::Boot(/*mig=*/!whole_gpus);
  if (Failed(state, machine)) return;
  const nvml::Client& gpu_lib = (*machine)->nvml();
  auto gpus = gpu_lib.Gpus();
  if (Failed(state, gpus)) return;
  std::vector<Json> results;
  if (whole_gpus) {
    for (const nvml::Gpu& gpu : *gpus) {
      results.push_back(testing::Result("gpu", GpuDeviceName(gpu)));
    }
  } else {
    if (gpus->size() != kGpus || (*gpus)[3].mig_devices.size() != kMigsPerGpu) {
      state.SkipWithError("the simulated node lacks the 7 MIG devices on GPU 3");
      return;
    }
    results.push_back(testing::Result("gpu", MigDeviceName((*gpus)[3], (*gpus)[3].mig_devices[2])));
  }

  auto api = StartApi();
  if (Failed(state, api)) return;
  kube::Client& client = *api->client;
  if (Failed(state, client.Create(kube::resources::kNamespaces, "",
                                  Json{{"apiVersion", "v1"},
                                       {"kind", "Namespace"},
                                       {"metadata", {{"name", kNamespace}}}})))
    return;
  auto claim = CreateAllocatedClaim(client, results);
  if (Failed(state, claim)) return;

  const std::string& dir = (*machine)->dir();
  DriverOptions options;
  options.node_name = testing::kNode;
  options.plugin_dir = dir + "/plugins/gpu.nvidia.com";
  options.cdi_root = dir + "/run/cdi";
  options.boot_id_path = dir + "/boot_id";
  options.cdi = testing::CdiOptions();
  const std::string registry_dir = dir + "/plugins_registry";
  for (const std::string& d : {options.plugin_dir, options.cdi_root, registry_dir}) {
    if (Failed(state, MakeDirs(d))) return;
  }
  if (Failed(state,
             WriteFileAtomic(options.boot_id_path, "0b1e4a52-0000-4000-8000-0000000000b1\n")))
    return;
  // The GPUs from NVML per call as the plugin reads them; the CDI inputs the
  // simulated host would yield, without reading a host root.
  auto node_devices = [&gpu_lib]() -> Result<NodeDevices> {
    auto now = gpu_lib.Gpus();
    if (!now.ok()) return now.status();
    return NodeDevices{*now, testing::SimCdiInputs(*now)};
  };
  NoTimeSlicing time_slicer;
  Driver driver(options, ApiClaimFetcher(client), node_devices, time_slicer);
  auto server = kubelet::DraPluginServer::Start(
      &driver, {std::string(kDriverName), options.plugin_dir, registry_dir});
  if (Failed(state, server)) return;
  auto kubelet = sim::DraKubeletClient::Register((*server)->registration_socket());
  if (Failed(state, kubelet)) return;

  std::vector<double> prepare_us, unprepare_us;
  for (auto _ : state) {
    const auto start = Clock::now();
    auto prepared = (*kubelet)->Prepare({*claim});
    const auto mid = Clock::now();
    auto unprepared = (*kubelet)->Unprepare({*claim});
    const auto end = Clock::now();
    if (Failed(state, prepared)) return;
    if (Failed(state, unprepared)) return;
    const kubelet::DraPrepareResult& result = (*prepared)[claim->uid];
    if (!result.error.empty() || result.devices.size() != results.size()) {
      state.SkipWithError(("prepare: " + result.error).c_str());
      return;
    }
    if (!(*unprepared)[claim->uid].empty()) {
      state.SkipWithError(("unprepare: " + (*unprepared)[claim->uid]).c_str());
      return;
    }
    state.SetIterationTime(std::chrono::duration<double>(mid - start).count());
    prepare_us.push_back(std::chrono::duration<double, std::micro>(mid - start).count());
    unprepare_us.push_back(std::chrono::duration<double, std::micro>(end - mid).count());
  }
  state.counters["prepare_p50_us"] = Percentile(prepare_us, 0.50);
  state.counters["prepare_p99_us"] = Percentile(prepare_us, 0.99);
  state.counters["unprepare_p50_us"] = Percentile(unprepare_us, 0.50);
  state.counters["unprepare_p99_us"] = Percentile(unprepare_us, 0.99);
  state.counters["devices"] = static_cast<double>(results.size());
}
BENCHMARK(BM_DraPrepareUnprepare)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("whole_gpus")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The floors under a prepare, measured the same way:
//   - an empty NodePrepareResources over the same sockets (the server answers
//     it without the driver, as it does NVIDIA's health probe);
//   - one WriteFileAtomic of 2 KiB (fsync of the file and of its directory)
//     in a /tmp directory, as the checkpoint and the CDI spec are written: a
//     prepare writes three files, an unprepare one.
class NoDriver final : public kubelet::DraDriver {
 public:
  std::map<std::string, kubelet::DraPrepareResult> Prepare(
      const std::vector<kubelet::DraClaim>&) override {
    return {};
  }
  std::map<std::string, std::string> Unprepare(const std::vector<kubelet::DraClaim>&) override {
    return {};
  }
};

void BM_DraEmptyPrepareCall(benchmark::State& state) {
  ScratchDir dir;
  const std::string plugin_dir = dir.path() + "/plugins/gpu.nvidia.com";
  const std::string registry_dir = dir.path() + "/plugins_registry";
  if (Failed(state, MakeDirs(registry_dir))) return;
  NoDriver driver;
  auto server = kubelet::DraPluginServer::Start(
      &driver, {std::string(kDriverName), plugin_dir, registry_dir});
  if (Failed(state, server)) return;
  auto kubelet = sim::DraKubeletClient::Register((*server)->registration_socket());
  if (Failed(state, kubelet)) return;
  for (auto _ : state) {
    if (Failed(state, (*kubelet)->Prepare({}))) return;
  }
}
BENCHMARK(BM_DraEmptyPrepareCall)->Unit(benchmark::kMicrosecond);

void BM_DraAtomicWrite(benchmark::State& state) {
  ScratchDir dir;
  const std::string content(2048, 'x');
  for (auto _ : state) {
    if (Failed(state, WriteFileAtomic(dir.path() + "/checkpoint.json", content))) return;
  }
}
BENCHMARK(BM_DraAtomicWrite)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuop::dra
