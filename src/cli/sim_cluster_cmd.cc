// `gpuop sim cluster up|status|exec|restart-kubelet|down|run`: a simulated Kubernetes cluster
// with GPU nodes (sim/cluster/cluster.h). `up` starts `run` in the background
// and returns once every node is Ready.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/clock.h"
#include "base/files.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/resource.h"
#include "sim/cluster/cluster.h"
#include "sim/host/host_root.h"
#include "sim/nvml/state.h"

namespace gpuop::cli {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

struct ClusterFlags {
  std::string dir = "/tmp/gpuop-cluster";
  std::string nodes = "dgx-h100,l40s-4,cpu";
  std::string config;
  std::string kubeconfig_out;
  int timeout_s = 180;
  bool json = false;
  std::string output = "text";
  std::string node;
  std::vector<std::string> command;
  double down_s = 2;
};

int Fail(const std::string& m) {
  std::fprintf(stderr, "gpuop sim cluster: %s\n", m.c_str());
  return kExitFailure;
}

std::string AbsDir(const std::string& d) {
  std::error_code ec;
  auto p = std::filesystem::absolute(d, ec);
  return (ec ? d : p.lexically_normal().string());
}

Result<Json> ReadState(const std::string& dir) {
  auto text = ReadFile(dir + "/cluster.json");
  if (!text.ok()) {
    return NotFound("no cluster in " + dir + " (start one with `gpuop sim cluster up --dir " + dir +
                    "`)");
  }
  Json j = Json::parse(*text, nullptr, false);
  if (!j.is_object()) return InvalidArgument(dir + "/cluster.json is not valid JSON");
  return j;
}

bool Alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

Result<std::vector<simcluster::NodeSpec>> Nodes(const ClusterFlags& f) {
  if (!f.config.empty()) return simcluster::ParseClusterFile(f.config);
  return simcluster::ParseNodeList(f.nodes);
}

std::string Tail(const std::string& path, size_t lines) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  auto all = Split(*text, '\n');
  size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) out += "  " + all[i] + "\n";
  return out;
}

int Up(const ClusterFlags& f) {
  const std::string dir = AbsDir(f.dir);
  auto nodes = Nodes(f);
  if (!nodes.ok()) return Fail(nodes.status().message());
  if (auto st = ReadState(dir);
      st.ok() && Alive((*st).value("pid", 0)) && (*st).value("state", "") != "down") {
    return Fail("a cluster is already running in " + dir + " (pid " +
                std::to_string((*st).value("pid", 0)) + "): `gpuop sim cluster down --dir " + dir +
                "` first");
  }
  if ((dir + "/nodes/x/root/var/lib/kubelet/device-plugins/kubelet.sock").size() > 100) {
    return Fail("--dir " + dir +
                " is too long: the kubelet's unix sockets under it must stay under 108 bytes");
  }
  if (Status s = MakeDirs(dir); !s.ok()) return Fail(s.message());
  (void)::unlink((dir + "/cluster.json").c_str());

  // `run` in the background, in its own session, logging to cluster.log.
  std::vector<std::string> args = {"/proc/self/exe", "sim", "cluster", "run", "--dir", dir};
  if (!f.config.empty())
    args.insert(args.end(), {"--config", AbsDir(f.config)});
  else
    args.insert(args.end(), {"--nodes", f.nodes});
  pid_t pid = ::fork();
  if (pid < 0) return Fail("fork failed");
  if (pid == 0) {
    ::setsid();
    int log =
        ::open((dir + "/cluster.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return Fail("the cluster process exited during start; " + dir + "/cluster.log ends:\n" +
                  Tail(dir + "/cluster.log", 15));
    }
    auto st = ReadState(dir);
    if (st.ok() && st->value("state", "") == "failed") {
      return Fail("start failed: " + st->value("error", "") + "\n" +
                  Tail(dir + "/cluster.log", 10));
    }
    if (st.ok() && st->value("state", "") == "ready") {
      if (!f.kubeconfig_out.empty()) {
        auto kc = ReadFile(dir + "/kubeconfig");
        if (!kc.ok() || !WriteFileAtomic(f.kubeconfig_out, *kc, 0600).ok()) {
          return Fail("cannot write " + f.kubeconfig_out);
        }
      }
      std::printf("cluster up: %zu nodes, API %s\nexport KUBECONFIG=%s\n", nodes->size(),
                  st->value("api", "").c_str(),
                  (f.kubeconfig_out.empty() ? dir + "/kubeconfig" : f.kubeconfig_out).c_str());
      return kExitOk;
    }
    std::this_thread::sleep_for(200ms);
  }
  ::kill(pid, SIGTERM);
  return Fail("the cluster was not ready within " + std::to_string(f.timeout_s) + " s; " + dir +
              "/cluster.log ends:\n" + Tail(dir + "/cluster.log", 15));
}

int Down(const ClusterFlags& f) {
  const std::string dir = AbsDir(f.dir);
  auto st = ReadState(dir);
  if (st.ok()) {
    pid_t pid = st->value("pid", 0);
    if (Alive(pid) && st->value("state", "") != "down") {
      ::kill(pid, SIGTERM);
      for (int i = 0; i < 1200 && Alive(pid); ++i) std::this_thread::sleep_for(100ms);
      if (Alive(pid)) {
        std::fprintf(stderr,
                     "gpuop sim cluster: the cluster process did not stop in 120 s; killing it\n");
        ::kill(pid, SIGKILL);
      }
    }
  }
  auto left = simcluster::CleanUpCluster(dir);
  for (const auto& what : left) std::printf("removed a leftover %s\n", what.c_str());
  std::printf("cluster in %s is down\n", dir.c_str());
  return kExitOk;
}

int Status_(const ClusterFlags& f) {
  const std::string dir = AbsDir(f.dir);
  auto st = ReadState(dir);
  if (!st.ok()) return Fail(st.status().message());
  bool alive = Alive(st->value("pid", 0));
  Json out = {{"dir", dir},
              {"state", alive ? st->value("state", "") : std::string("down")},
              {"api", st->value("api", "")},
              {"kubeconfig", st->value("kubeconfig", "")},
              {"nodes", Json::array()}};
  // Node readiness from the API, GPUs from each node's simulator state.
  std::map<std::string, Json> api_nodes;
  if (alive) {
    auto rc = kube::LoadKubeconfig(dir + "/kubeconfig");
    if (rc.ok()) {
      auto client = kube::Client::New(*rc);
      if (client.ok()) {
        auto list = (*client)->List(kube::resources::kNodes, "");
        if (list.ok()) {
          for (const Json& n : list->items) api_nodes[n["metadata"].value("name", "")] = n;
        }
      }
    }
  }
  for (const Json& n : st->value("nodes", Json::array())) {
    Json node = {{"name", n.value("name", "")},
                 {"machine", n.value("machine", "")},
                 {"address", n.value("address", "")},
                 {"hostRoot", n.value("root", "")}};
    auto it = api_nodes.find(node["name"].get<std::string>());
    std::string ready = "Unknown";
    if (it != api_nodes.end()) {
      for (const Json& c : it->second["status"].value("conditions", Json::array())) {
        if (c.value("type", "") == "Ready")
          ready = c.value("status", "") == "True" ? "Ready" : "NotReady";
      }
      node["allocatableGPUs"] = it->second["status"]["allocatable"].value("nvidia.com/gpu", "0");
    }
    node["status"] = ready;
    std::string sim_dir = n.value("sim_state", "");
    Json gpus = Json::array();
    if (!sim_dir.empty()) {
      auto machine = sim::LoadMachine(n.value("machine", ""), n.value("seed", ""));
      if (machine.ok()) {
        auto store = sim::StateStore::Open(*machine, sim_dir, NowUnixMillis());
        if (store.ok()) {
          auto s = (*store)->Read();
          if (s.ok()) {
            for (size_t i = 0; i < machine->gpus.size(); ++i) {
              const auto& g = (*s)->gpus[i];
              gpus.push_back({{"index", i},
                              {"uuid", machine->gpus[i].uuid},
                              {"state", g.lost ? "lost (XID 79)" : "ok"}});
            }
            node["driver"] = (*s)->driver_loaded ? "loaded" : "unloaded";
          }
        }
      }
    }
    node["gpus"] = gpus;
    out["nodes"].push_back(node);
  }
  if (f.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("cluster %s: %s, API %s\n", dir.c_str(), out["state"].get<std::string>().c_str(),
              out["api"].get<std::string>().c_str());
  std::printf("%-16s %-10s %-12s %-14s %-6s %s\n", "NODE", "STATUS", "MACHINE", "ADDRESS", "GPUS",
              "GPU STATE");
  for (const Json& n : out["nodes"]) {
    int lost = 0;
    for (const Json& g : n["gpus"]) lost += g["state"] != "ok";
    std::string gs = n["gpus"].empty() ? "-" : (lost ? std::to_string(lost) + " lost" : "all ok");
    if (n.contains("driver") && n["driver"] == "unloaded") gs += ", driver unloaded";
    std::printf("%-16s %-10s %-12s %-14s %-6zu %s\n", n["name"].get<std::string>().c_str(),
                n["status"].get<std::string>().c_str(), n["machine"].get<std::string>().c_str(),
                n["address"].get<std::string>().c_str(), n["gpus"].size(), gs.c_str());
  }
  return kExitOk;
}

int Exec(const GlobalOptions& g, const ClusterFlags& f) {
  const std::string dir = AbsDir(f.dir);
  auto st = ReadState(dir);
  if (!st.ok()) return Fail(st.status().message());
  if (f.command.empty())
    return Fail("exec needs a command: gpuop sim cluster exec --node N -- CMD...");
  for (const Json& n : st->value("nodes", Json::array())) {
    if (n.value("name", "") != f.node) continue;
    std::string root = n.value("root", "");
    ::setenv("GPUOP_HOST_ROOT", root.c_str(), 1);
    ::setenv("KUBECONFIG", (dir + "/kubeconfig").c_str(), 1);
    ::setenv("NODE_NAME", f.node.c_str(), 1);
    if (!n.value("sim_state", "").empty()) {
      ::setenv("GPUOP_SIM_MACHINE", n.value("machine", "").c_str(), 1);
      ::setenv("GPUOP_SIM_STATE", n.value("sim_state", "").c_str(), 1);
      ::setenv("GPUOP_SIM_SEED", n.value("seed", "").c_str(), 1);
      std::string nvml = sim::NvmlSimBesideExecutable();
      if (!nvml.empty() && g.nvml_lib.empty()) ::setenv("GPUOP_NVML_LIB", nvml.c_str(), 1);
    }
    std::vector<std::string> argv = {"ip", "netns", "exec", n.value("netns", "")};
    argv.insert(argv.end(), f.command.begin(), f.command.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execvp("ip", cargv.data());
    return Fail("cannot run ip netns exec: " + std::string(std::strerror(errno)));
  }
  return Fail("no node \"" + f.node + "\" in the cluster in " + dir +
              " (see gpuop sim cluster status)");
}

int RestartKubelet(const ClusterFlags& f) {
  const std::string dir = AbsDir(f.dir);
  auto st = ReadState(dir);
  if (!st.ok()) return Fail(st.status().message());
  if (!Alive(st->value("pid", 0))) {
    return Fail("the cluster in " + dir + " is not running (gpuop sim cluster status --dir " + dir +
                ")");
  }
  auto rc = kube::LoadKubeconfig(dir + "/kubeconfig");
  if (!rc.ok()) return Fail(rc.status().message());
  auto client = kube::Client::New(*rc);
  if (!client.ok()) return Fail(client.status().message());
  auto r = (*client)->Raw("POST", "/gpuop-sim/nodes/" + f.node + "/restart-kubelet",
                          Json{{"downSeconds", f.down_s}}.dump());
  if (!r.ok()) return Fail("restart the kubelet of node " + f.node + ": " + r.status().message());
  std::printf("kubelet of node %s restarted\n", f.node.c_str());
  return kExitOk;
}

int Run(const ClusterFlags& f) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto nodes = Nodes(f);
  if (!nodes.ok()) return Fail(nodes.status().message());
  simcluster::ClusterSpec spec;
  spec.dir = AbsDir(f.dir);
  spec.nodes = *nodes;
  spec.nvml_sim = sim::NvmlSimBesideExecutable();
  spec.cuda_sim = sim::CudaSimBesideExecutable();
  spec.nvidia_smi = sim::NvidiaSmiSimBesideExecutable();
  std::stop_source stop;
  std::jthread waiter([&stop, &stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    stop.request_stop();
  });
  Status s = simcluster::RunCluster(spec, stop.get_token());
  if (!s.ok()) {
    std::fprintf(stderr, "gpuop sim cluster: %s\n", s.message().c_str());
    std::_Exit(kExitFailure);  // the signal waiter cannot be joined
  }
  std::_Exit(kExitOk);
}

}  // namespace

void RegisterSimClusterCommand(CLI::App& sim, const GlobalOptions& g, Action* action) {
  auto f = std::make_shared<ClusterFlags>();
  auto* cluster = sim.add_subcommand("cluster",
                                     "A simulated Kubernetes cluster with GPU nodes that runs real "
                                     "pods (docs/simulated-cluster.md)");
  cluster->require_subcommand(1);
  auto dir_flag = [&](CLI::App* c) {
    c->add_option("--dir", f->dir, "The cluster's directory")->capture_default_str();
  };
  auto* up = cluster->add_subcommand(
      "up", "Start a cluster in the background; returns once every node is Ready");
  dir_flag(up);
  up->add_option("--nodes", f->nodes,
                 "Nodes: MACHINE or NAME=MACHINE, comma-separated (cpu: no GPU)")
      ->capture_default_str();
  up->add_option("--config", f->config,
                 "cluster.yaml with nodes: [{name, machine, os: {id, version}, kernel}]");
  up->add_option("--kubeconfig-out", f->kubeconfig_out, "Also write the kubeconfig to FILE");
  up->add_option("--timeout", f->timeout_s, "Seconds to wait for the nodes")->capture_default_str();
  up->callback([f, action] { *action = [f] { return Up(*f); }; });

  auto* down = cluster->add_subcommand(
      "down", "Stop the cluster and remove every container, namespace and link");
  dir_flag(down);
  down->callback([f, action] { *action = [f] { return Down(*f); }; });

  auto* status = cluster->add_subcommand("status", "Nodes, addresses, host roots and GPU states");
  dir_flag(status);
  status->add_option("--output,-o", f->output, "Output format: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  status->callback([f, action] {
    f->json = f->output == "json";
    *action = [f] { return Status_(*f); };
  });

  auto* exec = cluster->add_subcommand(
      "exec", "Run a command with a node's simulated hardware, host root and network: -- CMD...");
  dir_flag(exec);
  exec->add_option("--node", f->node, "The node")->required();
  exec->add_option("command", f->command, "The command")->required();
  exec->callback([f, action, &g] { *action = [f, &g] { return Exec(g, *f); }; });

  auto* restart = cluster->add_subcommand(
      "restart-kubelet",
      "Restart a node's kubelet: its sockets go away, plugins must register again; pods keep "
      "running");
  dir_flag(restart);
  restart->add_option("--node", f->node, "The node")->required();
  restart->add_option("--down", f->down_s, "Seconds the kubelet stays down (0 to 60)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60.0));
  restart->callback([f, action] { *action = [f] { return RestartKubelet(*f); }; });

  auto* run =
      cluster->add_subcommand("run", "Run the cluster in the foreground (what `up` starts)");
  dir_flag(run);
  run->add_option("--nodes", f->nodes, "As for up")->capture_default_str();
  run->add_option("--config", f->config, "As for up");
  run->callback([f, action] { *action = [f] { return Run(*f); }; });
}

}  // namespace gpuop::cli
