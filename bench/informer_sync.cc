// gpuop_informer_sync: how long an informer takes to sync a collection from an
// API server, and what the process weighs once it holds it.
//
//   gpuop_informer_sync --kubeconfig FILE [--resource nodes] [--namespace NS]
//                       [--page-size N]
//     runs an informer until synced, then prints one JSON line:
//     {"resource":"nodes","objects":N,"sync_ms":...,"cpu_ms":...,"rss_kib":...,"hwm_kib":...}
//     sync_ms: wall time from start to synced; cpu_ms: this process's CPU time
//     (the client's and the informer's share of it); VmRSS and VmHWM from
//     /proc/self/status, with the informer still watching; start_rss_kib:
//     VmRSS before the informer started; heap_used_kib and heap_free_kib:
//     glibc's mallinfo2 (uordblks, fordblks) at the end.
//
//     --project-nodes keeps only what a GPU operator reads of a node (ProjectNode).
//     --compact keeps each object as bytes decoded on read (Storage::kCompact).
//
//   gpuop_informer_sync --kubeconfig FILE --create-nodes N [--threads T]
//     creates N GPU nodes (bench/kube_nodes.h) to sync, T requests at a time,
//     and prints {"created":N,"ms":...}.
//
// scripts/bench_informer.sh runs both against `gpuop sim apiserver`.
#include <malloc.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/kube_nodes.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"

namespace gpuop::kube {
namespace {

struct Flags {
  std::string kubeconfig;
  std::string resource = "nodes";
  std::string ns;
  int64_t page_size = 500;
  int create_nodes = 0;
  int threads = 8;
  bool project = false;
  bool compact = false;
};

constexpr const char* kUsage =
    "usage: gpuop_informer_sync --kubeconfig FILE [--resource nodes] [--namespace NS] "
    "[--page-size N] [--project-nodes] [--compact]\n"
    "       gpuop_informer_sync --kubeconfig FILE --create-nodes N [--threads T]\n";

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (arg == "--kubeconfig" && (v = value())) {
      flags->kubeconfig = v;
    } else if (arg == "--resource" && (v = value())) {
      flags->resource = v;
    } else if (arg == "--namespace" && (v = value())) {
      flags->ns = v;
    } else if (arg == "--page-size" && (v = value())) {
      flags->page_size = std::atoll(v);
    } else if (arg == "--create-nodes" && (v = value())) {
      flags->create_nodes = std::atoi(v);
    } else if (arg == "--project-nodes") {
      flags->project = true;
    } else if (arg == "--compact") {
      flags->compact = true;
    } else if (arg == "--threads" && (v = value())) {
      flags->threads = std::max(1, std::atoi(v));
    } else {
      return false;
    }
  }
  return !flags->kubeconfig.empty();
}

const Resource* FindResource(std::string_view plural) {
  static const Resource* const kKnown[] = {
      &resources::kNodes,        &resources::kPods,           &resources::kNamespaces,
      &resources::kConfigMaps,   &resources::kSecrets,        &resources::kServices,
      &resources::kDaemonSets,   &resources::kDeployments,    &resources::kLeases,
      &resources::kNodeFeatures, &resources::kClusterPolicies};
  for (const Resource* r : kKnown) {
    if (r->resource == plural) return r;
  }
  return nullptr;
}

// A "VmRSS:" style line of /proc/self/status, in KiB.
int64_t ProcStatusKib(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, field.size(), field) == 0 && line.size() > field.size() &&
        line[field.size()] == ':') {
      return std::atoll(line.c_str() + field.size() + 1);
    }
  }
  return -1;
}

// CPU time (user + system) this process has used, in ms: the informer's and
// the client's own cost, apart from the time spent waiting for the server.
double CpuMillis() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

int CreateNodes(Client& client, const Flags& flags) {
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < flags.threads; ++t) {
      workers.emplace_back([&] {
        for (int i; (i = next.fetch_add(1)) < flags.create_nodes;) {
          auto created = client.Create(resources::kNodes, "", bench::GpuNode(i));
          if (!created.ok() && !IsAlreadyExists(created.status())) {
            if (failed.fetch_add(1) == 0) {
              std::fprintf(stderr, "error: %s\n", created.status().ToString().c_str());
            }
          }
        }
      });
    }
  }
  std::printf("{\"created\":%d,\"failed\":%d,\"ms\":%.1f}\n", flags.create_nodes - failed.load(),
              failed.load(), MillisSince(start));
  return failed.load() == 0 ? 0 : 1;
}

// What a GPU operator reads of a node, and nothing else: metadata without
// managedFields, taints and unschedulable, condition types and statuses, the
// allocatable resources. An example of a projection transform (controller-
// runtime's cache transforms): readers of such a cache must patch, never write
// a cached object back whole.
void ProjectNode(Json& node) {
  Json projected = Json::object();
  if (auto meta = node.find("metadata"); meta != node.end() && meta->is_object()) {
    Json& m = projected["metadata"];
    for (const char* field : {"name", "uid", "resourceVersion", "generation", "labels",
                              "annotations", "deletionTimestamp"}) {
      if (auto it = meta->find(field); it != meta->end()) m[field] = std::move(*it);
    }
  }
  if (auto spec = node.find("spec"); spec != node.end() && spec->is_object()) {
    for (const char* field : {"taints", "unschedulable"}) {
      if (auto it = spec->find(field); it != spec->end()) projected["spec"][field] = std::move(*it);
    }
  }
  if (auto status = node.find("status"); status != node.end() && status->is_object()) {
    if (auto it = status->find("allocatable"); it != status->end()) {
      projected["status"]["allocatable"] = std::move(*it);
    }
    if (auto it = status->find("conditions"); it != status->end() && it->is_array()) {
      Json& conditions = projected["status"]["conditions"] = Json::array();
      for (Json& c : *it) {
        conditions.push_back({{"type", c.value("type", "")}, {"status", c.value("status", "")}});
      }
    }
  }
  node = std::move(projected);
}

int Sync(Client& client, const Flags& flags) {
  const Resource* resource = FindResource(flags.resource);
  if (resource == nullptr) {
    std::fprintf(stderr, "error: unknown resource \"%s\"\n", flags.resource.c_str());
    return 2;
  }
  InformerOptions options;
  options.resource = *resource;
  options.ns = flags.ns;
  options.page_size = flags.page_size;
  if (flags.project) options.transform = ProjectNode;
  if (flags.compact) options.storage = Storage::kCompact;
  Informer informer(&client, options);
  const int64_t start_rss = ProcStatusKib("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  informer.Start();
  if (!informer.WaitForSync(std::chrono::minutes(5))) {
    std::fprintf(stderr, "error: %s did not sync within 5 minutes\n", informer.name().c_str());
    return 1;
  }
  const double sync_ms = MillisSince(start);
  const struct mallinfo2 heap = mallinfo2();
  std::printf(
      "{\"resource\":\"%s\",\"storage\":\"%s\",\"objects\":%zu,\"sync_ms\":%.1f,\"cpu_ms\":%.1f,"
      "\"rss_kib\":%lld,\"hwm_kib\":%lld,\"start_rss_kib\":%lld,\"heap_used_kib\":%zu,"
      "\"heap_free_kib\":%zu}\n",
      flags.resource.c_str(), flags.compact ? "compact" : "tree", informer.Size(), sync_ms,
      CpuMillis(), static_cast<long long>(ProcStatusKib("VmRSS")),
      static_cast<long long>(ProcStatusKib("VmHWM")), static_cast<long long>(start_rss),
      heap.uordblks / 1024, heap.fordblks / 1024);
  informer.Stop();
  return 0;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  auto config = LoadKubeconfig(flags.kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().ToString().c_str());
    return 1;
  }
  // Seeding is not what is measured: no client-side limit. The sync keeps the
  // defaults the operator runs with.
  if (flags.create_nodes > 0) config->qps = 0;
  auto client = Client::New(*config);
  if (!client.ok()) {
    std::fprintf(stderr, "error: %s\n", client.status().ToString().c_str());
    return 1;
  }
  if (flags.create_nodes > 0) return CreateNodes(**client, flags);
  return Sync(**client, flags);
}

}  // namespace
}  // namespace gpuop::kube

int main(int argc, char** argv) { return gpuop::kube::Main(argc, argv); }
