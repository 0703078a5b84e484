// The API emulator's store at the scale gpuop is measured at: 5,000 nodes.
// get/list/patch throughput, the list body as the server writes it (and
// gzips it), watch fan-out to 100 watchers, and memory per 1,000 node
// objects. Run: build/bin/gpuop_bench --benchmark_filter=Store
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <optional>
#include <thread>

#include "sim/kube/server.h"
#include "sim/kube/store.h"

namespace gpuop::simkube {
namespace {

using nlohmann::json;

constexpr int kNodes = 5000;

ResourceInfo NodesInfo() {
  ResourceInfo r;
  r.version = "v1";
  r.kind = "Node";
  r.plural = "nodes";
  r.singular = "node";
  r.list_kind = "NodeList";
  r.namespaced = false;
  r.subresources.status = true;
  ApplyDefaultBehaviour(r);
  return r;
}

std::string NodeName(int i) { return "gpu-node-" + std::to_string(i); }

// A node as a GPU cluster has it: GFD labels, capacity, conditions, node info.
json MakeNode(int i) {
  json labels = {{"kubernetes.io/hostname", NodeName(i)},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"node.kubernetes.io/instance-type", "p5.48xlarge"},
                 {"topology.kubernetes.io/zone", "zone-" + std::to_string(i % 3)},
                 {"nvidia.com/gpu.present", "true"},
                 {"nvidia.com/gpu.count", "8"},
                 {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
                 {"nvidia.com/gpu.memory", "81559"},
                 {"nvidia.com/gpu.family", "hopper"},
                 {"nvidia.com/gpu.compute.major", "9"},
                 {"nvidia.com/gpu.compute.minor", "0"},
                 {"nvidia.com/cuda.driver.major", "550"},
                 {"nvidia.com/cuda.driver.minor", "90"},
                 {"nvidia.com/cuda.driver.rev", "07"},
                 {"nvidia.com/cuda.runtime.major", "12"},
                 {"nvidia.com/cuda.runtime.minor", "4"},
                 {"nvidia.com/mig.capable", "true"},
                 {"nvidia.com/mig.strategy", "single"},
                 {"nvidia.com/gpu.deploy.driver", "true"},
                 {"nvidia.com/gpu.deploy.container-toolkit", "true"},
                 {"nvidia.com/gpu.deploy.device-plugin", "true"},
                 {"nvidia.com/gpu.deploy.gpu-feature-discovery", "true"},
                 {"nvidia.com/gpu.deploy.dcgm-exporter", "true"},
                 {"nvidia.com/gpu.deploy.operator-validator", "true"},
                 {"pool", i % 2 == 0 ? "a" : "b"}};
  json conditions = json::array();
  for (const char* c : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
    conditions.push_back({{"type", c},
                          {"status", std::string(c) == "Ready" ? "True" : "False"},
                          {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                          {"lastTransitionTime", "2026-01-01T00:00:00Z"},
                          {"reason", std::string("Kubelet") + c},
                          {"message", "kubelet is posting ready status"}});
  }
  json res = {{"cpu", "192"},
              {"memory", "2113428Mi"},
              {"pods", "110"},
              {"nvidia.com/gpu", "8"},
              {"ephemeral-storage", "3750Gi"}};
  return {{"metadata",
           {{"name", NodeName(i)},
            {"labels", labels},
            {"annotations", {{"node.alpha.kubernetes.io/ttl", "0"}}}}},
          {"spec", {{"podCIDR", "10.0." + std::to_string(i % 256) + ".0/24"}}},
          {"status",
           {{"capacity", res},
            {"allocatable", res},
            {"conditions", conditions},
            {"addresses",
             {{{"type", "InternalIP"}, {"address", "10.1." + std::to_string(i % 256) + ".1"}},
              {{"type", "Hostname"}, {"address", NodeName(i)}}}},
            {"nodeInfo",
             {{"kernelVersion", "6.1.0-18-amd64"},
              {"osImage", "Debian GNU/Linux 12 (bookworm)"},
              {"containerRuntimeVersion", "containerd://1.6.20"},
              {"kubeletVersion", "v1.35.0"},
              {"architecture", "amd64"},
              {"operatingSystem", "linux"}}}}}};
}

Store& SharedStore() {
  static Store* store = [] {
    StoreOptions o;
    o.seed = 7;
    auto* s = new Store(o);
    for (int i = 0; i < kNodes; ++i) (void)s->Create(NodesInfo(), "", MakeNode(i));
    return s;
  }();
  return *store;
}

void BM_StoreGetNode(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  int i = 0;
  for (auto _ : state) {
    auto o = store.Get(r, "", NodeName(i++ % kNodes));
    benchmark::DoNotOptimize(o);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StoreGetNode)->ThreadRange(1, 4)->UseRealTime();

void BM_StoreListNodes(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  ListOptions opts;
  opts.limit = state.range(0);
  for (auto _ : state) {
    auto l = store.List(r, "", opts);
    benchmark::DoNotOptimize(l);
  }
  state.SetItemsProcessed(state.iterations() * (opts.limit ? opts.limit : kNodes));
}
BENCHMARK(BM_StoreListNodes)->Arg(0)->Arg(500)->Unit(benchmark::kMicrosecond);

void BM_StoreListNodesLabelSelector(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  ListOptions opts;
  opts.label_selector = "nvidia.com/gpu.present=true,pool in (a)";
  for (auto _ : state) {
    auto l = store.List(r, "", opts);
    benchmark::DoNotOptimize(l);
  }
  state.SetItemsProcessed(state.iterations() * kNodes);
}
BENCHMARK(BM_StoreListNodesLabelSelector)->Unit(benchmark::kMicrosecond);

// The list body as the HTTP layer writes it: listed, then the items' stored
// JSON concatenated into the envelope (ListResult::Dump). The objects'
// JSON was made by an earlier list (the cold case is the next row).
void BM_StoreListNodesSerialized(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  size_t bytes = 0;
  for (auto _ : state) {
    auto l = store.List(r, "", {});
    std::string body = l->Dump(r);
    bytes = body.size();
    benchmark::DoNotOptimize(body);
  }
  state.counters["body_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_StoreListNodesSerialized)->Unit(benchmark::kMillisecond);

// The first list after every object was written: it makes each item's JSON
// (once; later lists and watch events reuse it).
void BM_StoreListNodesSerializedCold(benchmark::State& state) {
  const ResourceInfo r = NodesInfo();
  for (auto _ : state) {
    state.PauseTiming();
    StoreOptions o;
    o.gc_thread = false;
    o.history_size = 1;
    o.seed = 1;
    auto store = std::make_unique<Store>(o);
    for (int i = 0; i < kNodes; ++i) (void)store->Create(r, "", MakeNode(i));
    state.ResumeTiming();
    std::string body = store->List(r, "", {})->Dump(r);
    benchmark::DoNotOptimize(body);
    state.PauseTiming();
    store.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_StoreListNodesSerializedCold)->Iterations(2)->Unit(benchmark::kMillisecond);

// The HTTP layer's own cost for that body when the client accepts gzip
// (GzipLevel1, as the server compresses it).
void BM_StoreListNodesGzip(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  const std::string body = store.List(r, "", {})->Dump(r);
  size_t packed = 0;
  for (auto _ : state) {
    std::optional<std::string> out = GzipLevel1(body);
    packed = out ? out->size() : 0;
    benchmark::DoNotOptimize(out);
  }
  state.counters["gzip_bytes"] = static_cast<double>(packed);
}
BENCHMARK(BM_StoreListNodesGzip)->Unit(benchmark::kMillisecond);

void BM_StorePatchNodeLabel(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  static int i = 0;
  PatchOptions po{PatchType::kMerge};
  for (auto _ : state) {
    json patch = {{"metadata", {{"labels", {{"gpuop.bench/v", std::to_string(i)}}}}}};
    auto o = store.Patch(r, "", NodeName(i % kNodes), patch, po);
    if (!o.ok()) state.SkipWithError(o.error().ToString().c_str());
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StorePatchNodeLabel);

void BM_StorePatchNodeStatusHeartbeat(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  static int i = 0;
  PatchOptions po{PatchType::kMerge};
  po.subresource = "status";
  for (auto _ : state) {
    json patch = {{"status", {{"nodeInfo", {{"bootID", std::to_string(i)}}}}}};
    auto o = store.Patch(r, "", NodeName(i % kNodes), patch, po);
    if (!o.ok()) state.SkipWithError(o.error().ToString().c_str());
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StorePatchNodeStatusHeartbeat);

// One writer patching nodes, N watchers each on its own thread (as HTTP
// watch streams are). Items = events delivered to watchers.
void BM_StoreWatchFanout(benchmark::State& state) {
  Store& store = SharedStore();
  const ResourceInfo r = NodesInfo();
  const int watchers = static_cast<int>(state.range(0));
  std::vector<std::unique_ptr<Watcher>> ws;
  WatchOptions wo;
  wo.send_initial_events = false;
  for (int i = 0; i < watchers; ++i) ws.push_back(std::move(store.Watch(r, "", wo)).value());
  std::atomic<uint64_t> target{0};
  std::vector<std::atomic<uint64_t>> last(watchers);
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < watchers; ++i) {
    readers.emplace_back([&, i] {
      while (!stop.load()) {
        auto ev = ws[i]->Next(std::chrono::milliseconds(50));
        if (ev) last[i].store(ev->resource_version);
      }
    });
  }
  PatchOptions po{PatchType::kMerge};
  // Unique values across runs: a patch that changes nothing writes nothing
  // (no new resourceVersion, no event).
  static int n = 0;
  for (auto _ : state) {
    json patch = {{"metadata", {{"labels", {{"gpuop.bench/fanout", std::to_string(n)}}}}}};
    auto o = store.Patch(r, "", NodeName(n % kNodes), patch, po);
    if (!o.ok()) state.SkipWithError(o.error().ToString().c_str());
    target.store(std::stoull((**o)["metadata"]["resourceVersion"].get<std::string>()));
    ++n;
  }
  // All watchers have every event before the clock stops.
  for (int i = 0; i < watchers; ++i) {
    while (last[i].load() < target.load()) std::this_thread::yield();
  }
  stop = true;
  for (auto& t : readers) t.join();
  uint64_t slow = store.Counters().watchers_closed_slow;
  state.SetItemsProcessed(state.iterations() * watchers);
  state.counters["closed_slow"] = static_cast<double>(slow);
}
BENCHMARK(BM_StoreWatchFanout)->Arg(1)->Arg(100)->UseRealTime();

// Heap and serialized bytes per 1,000 node objects; then the heap once a
// list has serialised every object (the JSON the store keeps for later lists
// and watch events).
void BM_StoreMemoryPer1000Nodes(benchmark::State& state) {
  double heap = 0, heap_listed = 0, json_bytes = 0;
  for (auto _ : state) {
    StoreOptions o;
    o.gc_thread = false;
    o.history_size = 1;  // count objects, not the watch history
    o.seed = 1;
    auto store = std::make_unique<Store>(o);
    const ResourceInfo r = NodesInfo();
    malloc_trim(0);
    const size_t before = mallinfo2().uordblks;
    for (int i = 0; i < 1000; ++i) (void)store->Create(r, "", MakeNode(i));
    const size_t after = mallinfo2().uordblks;
    benchmark::DoNotOptimize(store->List(r, "", {})->Dump(r));
    const size_t listed = mallinfo2().uordblks;
    heap = static_cast<double>(after - before);
    heap_listed = static_cast<double>(listed - before);
    json_bytes = static_cast<double>(store->Counters().approx_bytes);
  }
  state.counters["heap_bytes_per_1000"] = heap;
  state.counters["heap_bytes_per_1000_listed"] = heap_listed;
  state.counters["json_bytes_per_1000"] = json_bytes;
}
BENCHMARK(BM_StoreMemoryPer1000Nodes)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpuop::simkube
