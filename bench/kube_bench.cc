// The controller runtime's event path at 5,000 GPU nodes, without the
// network: node update events go through Informer::ApplyEvent (the step the
// watch loop takes for every event: cache, indexes, handlers), a Controller's
// handler enqueues the node's key, and reconcile reads the node back from the
// cache. Items = node updates through the whole path.
// Run: build/bin/gpuop_bench --benchmark_filter='Informer|WorkQueue'
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bench/kube_nodes.h"
#include "kube/controller.h"
#include "kube/informer.h"
#include "kube/object.h"

namespace gpuop::kube {
namespace {

constexpr int kNodes = 5000;

InformerOptions NodeInformerOptions() {
  InformerOptions o;
  o.resource = resources::kNodes;
  return o;
}

Json NodeAt(int i, int64_t resource_version) {
  Json node = bench::GpuNode(i, resource_version);
  node["metadata"]["resourceVersion"] = std::to_string(resource_version);
  return node;
}

// An informer holding kNodes nodes (resourceVersions 1..kNodes).
void Fill(Informer& informer) {
  std::vector<Json> nodes;
  nodes.reserve(kNodes);
  for (int i = 0; i < kNodes; ++i) nodes.push_back(NodeAt(i, i + 1));
  informer.Replace(std::move(nodes), std::to_string(kNodes));
}

// The next `count` update events, for distinct nodes (so the queue does not
// fold them together), built outside the timed region.
std::vector<WatchEvent> NextUpdates(int count, int* next_node, int64_t* resource_version) {
  std::vector<WatchEvent> events;
  events.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    events.push_back({WatchEvent::Type::kModified, NodeAt(*next_node, ++*resource_version)});
    *next_node = (*next_node + 1) % kNodes;
  }
  return events;
}

// What a node reconcile reads: the node from the cache and a few fields.
bool ReadNode(const Informer& informer, const std::string& key) {
  ObjectPtr node = informer.Get(key);
  if (!node) return false;
  return IsNodeReady(*node) && Label(*node, "nvidia.com/gpu.present").has_value();
}

// One thread does everything: apply a batch of events, then reconcile every
// queued key. The work per update, with no thread hand-off.
void BM_InformerToReconcileOneThread(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  Informer informer(nullptr, NodeInformerOptions());
  Fill(informer);
  int64_t ready = 0;
  Controller controller("bench", {}, 1, [&](const std::string& key) {
    ready += ReadNode(informer, key) ? 1 : 0;
    return ReconcileResult::Ok();
  });
  controller.Watch(informer);
  while (controller.queue().Len() > 0) controller.ProcessNextItem();  // the initial adds

  int next_node = 0;
  int64_t resource_version = kNodes;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<WatchEvent> events = NextUpdates(batch, &next_node, &resource_version);
    state.ResumeTiming();
    for (WatchEvent& event : events) informer.ApplyEvent(std::move(event));
    while (controller.queue().Len() > 0) controller.ProcessNextItem();
    state.PauseTiming();
    events.clear();  // the replaced node snapshots are freed here, untimed
    state.ResumeTiming();
  }
  benchmark::DoNotOptimize(ready);
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_InformerToReconcileOneThread)->Arg(1000)->Unit(benchmark::kMillisecond);

// As deployed: the informer's thread applies events while a worker thread
// (Controller::Run) reconciles; the batch is done when every key has been
// reconciled.
void BM_InformerToReconcileWorkerThread(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  Informer informer(nullptr, NodeInformerOptions());
  Fill(informer);
  std::atomic<int64_t> reconciled{0};
  Controller controller("bench", {}, 1, [&](const std::string& key) {
    benchmark::DoNotOptimize(ReadNode(informer, key));
    reconciled.fetch_add(1, std::memory_order_release);
    return ReconcileResult::Ok();
  });
  controller.Watch(informer);
  std::jthread worker([&](std::stop_token stop) { (void)controller.Run(stop); });
  while (reconciled.load() < kNodes) std::this_thread::yield();  // the initial adds

  int next_node = 0;
  int64_t resource_version = kNodes;
  int64_t expected = kNodes;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<WatchEvent> events = NextUpdates(batch, &next_node, &resource_version);
    state.ResumeTiming();
    for (WatchEvent& event : events) informer.ApplyEvent(std::move(event));
    expected += batch;
    while (reconciled.load(std::memory_order_acquire) < expected) std::this_thread::yield();
    state.PauseTiming();
    events.clear();
    state.ResumeTiming();
  }
  worker.request_stop();
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_InformerToReconcileWorkerThread)
    ->Arg(1000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The informer alone: cache + indexes + one handler that does nothing.
void BM_InformerApplyNodeUpdate(benchmark::State& state) {
  Informer informer(nullptr, NodeInformerOptions());
  Fill(informer);
  informer.AddEventHandler({.on_update = [](const ObjectPtr&, const ObjectPtr&) {}});
  const int batch = 1000;
  int next_node = 0;
  int64_t resource_version = kNodes;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<WatchEvent> events = NextUpdates(batch, &next_node, &resource_version);
    state.ResumeTiming();
    for (WatchEvent& event : events) informer.ApplyEvent(std::move(event));
    state.PauseTiming();
    events.clear();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_InformerApplyNodeUpdate)->Unit(benchmark::kMillisecond);

// The work queue alone: Add, Get, Done of distinct keys.
void BM_WorkQueueAddGetDone(benchmark::State& state) {
  WorkQueue queue;
  std::vector<std::string> keys;
  for (int i = 0; i < kNodes; ++i) keys.push_back(bench::GpuNodeName(i));
  size_t i = 0;
  for (auto _ : state) {
    queue.Add(keys[i++ % keys.size()]);
    auto key = queue.Get();
    queue.Done(*key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WorkQueueAddGetDone);

}  // namespace
}  // namespace gpuop::kube
