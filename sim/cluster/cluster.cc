#include "sim/cluster/cluster.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/files.h"
#include "base/log.h"
#include "base/process.h"
#include "base/strings.h"
#include "base/yaml_json.h"
#include "kube/client.h"
#include "kube/resource.h"
#include "sim/cluster/daemonset_controller.h"
#include "sim/cluster/deployment_controller.h"
#include "sim/cluster/hw_control.h"
#include "sim/cluster/job_controller.h"
#include "sim/cluster/kubelet.h"
#include "sim/cluster/network.h"
#include "sim/cluster/podman.h"
#include "sim/cluster/scheduler.h"
#include "sim/host/elf_stub.h"
#include "sim/host/host_root.h"
#include "sim/kube/kubeconfig.h"
#include "sim/kube/server.h"
#include "sim/nvml/machine.h"
#include "sim/nvml/state.h"

namespace gpuop::simcluster {

using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr int kApiPort = 6443;

bool ValidNodeName(const std::string& n) {
  if (n.empty() || n.size() > 40) return false;
  for (char c : n) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return n.front() != '-' && n.back() != '-';
}

Status CheckNodes(const std::vector<NodeSpec>& nodes) {
  if (nodes.empty())
    return InvalidArgument("a cluster needs at least one node (--nodes dgx-h100,cpu)");
  std::set<std::string> seen;
  for (const NodeSpec& n : nodes) {
    if (!ValidNodeName(n.name)) {
      return InvalidArgument(
          "node name \"" + n.name +
          "\" is not a valid node name here: lower-case letters, digits and '-', "
          "at most 40 characters");
    }
    if (!seen.insert(n.name).second)
      return InvalidArgument("node \"" + n.name + "\" is listed twice");
    if (n.machine != "cpu") {
      auto m = sim::LoadMachine(n.machine, n.name);
      if (!m.ok()) return m.status().Annotate("node " + n.name);
    }
  }
  return Status::Ok();
}

std::string RandomToken() {
  std::random_device rd;
  static const char kHex[] = "0123456789abcdef";
  std::string t;
  for (int i = 0; i < 40; ++i) t += kHex[rd() % 16];
  return t;
}

Status WriteState(const std::string& dir, const Json& state) {
  return WriteFileAtomic(dir + "/cluster.json", state.dump(2) + "\n");
}

// What a node's root needs besides the GPUs' files: the directories the
// kubelet and the components use, and the OS the node runs.
Status LayOutNodeRoot(const std::string& root, const NodeSpec& n) {
  for (const char* d :
       {"/etc", "/etc/cdi", "/var/run/cdi", "/run/nvidia", "/usr/local/nvidia",
        "/var/lib/kubelet/device-plugins", "/var/log", "/dev/char", "/proc", "/sys"}) {
    GPUOP_RETURN_IF_ERROR(MakeDirs(root + d));
  }
  std::string pretty =
      n.os_id == "ubuntu" ? "Ubuntu " + n.os_version + " LTS" : n.os_id + " " + n.os_version;
  return WriteFileAtomic(root + "/etc/os-release", "NAME=\"" + n.os_id + "\"\nID=" + n.os_id +
                                                       "\nVERSION_ID=\"" + n.os_version +
                                                       "\"\nPRETTY_NAME=\"" + pretty + "\"\n");
}

// The nodes' containers, from any run in `dir` (a podman instance without a node view).
std::vector<std::string> ClusterContainers(const std::string& dir, const std::string& key) {
  Podman::Options o;
  o.node_name = "cleanup";
  o.state_dir = dir + "/podman-cleanup";
  auto p = Podman::Create(o);
  if (!p.ok()) return {};
  auto names = p->ListContainers({{"gpuop.sim/cluster", key}});
  std::vector<std::string> out;
  if (!names.ok()) return out;
  for (const auto& n : *names) {
    (void)p->Remove(n);
    out.push_back("container " + n);
  }
  return out;
}

}  // namespace

Result<std::vector<NodeSpec>> ParseNodeList(const std::string& list) {
  std::vector<NodeSpec> out;
  std::map<std::string, int> count;
  for (const std::string& item : Split(list, ',')) {
    NodeSpec n;
    auto eq = item.find('=');
    if (eq != std::string::npos) {
      n.name = item.substr(0, eq);
      n.machine = item.substr(eq + 1);
    } else {
      n.machine = item;
      int k = ++count[item];
      n.name = k == 1 ? item : item + "-" + std::to_string(k);
    }
    out.push_back(std::move(n));
  }
  GPUOP_RETURN_IF_ERROR(CheckNodes(out));
  return out;
}

Result<std::vector<NodeSpec>> ParseClusterFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto docs = ParseYamlDocuments(*text);
  if (!docs.ok()) return docs.status().Annotate(path);
  Json doc = docs->empty() ? Json() : docs->front();
  const Json nodes = doc.is_object() && doc.contains("nodes") ? doc["nodes"] : Json();
  if (!nodes.is_array())
    return InvalidArgument(path + ": `nodes` must be a list of {name, machine}");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "nodes" && it.key() != "kubelet") {
      return InvalidArgument(path + ": unknown field `" + it.key() + "` (nodes, kubelet)");
    }
  }
  std::chrono::seconds max_restart{300};
  Json period;
  if (doc.contains("kubelet")) {
    // A misspelt key would silently keep the default: name what is allowed.
    const Json& kubelet = doc["kubelet"];
    const std::string shape =
        ": `kubelet` takes {crashLoopBackOff: {maxContainerRestartPeriod: 10s}}";
    if (!kubelet.is_object()) return InvalidArgument(path + shape);
    for (auto it = kubelet.begin(); it != kubelet.end(); ++it) {
      if (it.key() != "crashLoopBackOff") {
        return InvalidArgument(path + ": unknown field `kubelet." + it.key() + "`" + shape);
      }
    }
    if (kubelet.contains("crashLoopBackOff")) {
      const Json& backoff = kubelet["crashLoopBackOff"];
      if (!backoff.is_object()) return InvalidArgument(path + shape);
      for (auto it = backoff.begin(); it != backoff.end(); ++it) {
        if (it.key() != "maxContainerRestartPeriod") {
          return InvalidArgument(path + ": unknown field `kubelet.crashLoopBackOff." + it.key() +
                                 "`" + shape);
        }
      }
      period = backoff.value("maxContainerRestartPeriod", Json());
    }
  }
  if (!period.is_null()) {
    auto d = period.is_string()
                 ? ParseDuration(period.get<std::string>())
                 : Result<std::chrono::milliseconds>(InvalidArgument("not a string"));
    if (!d.ok() || *d < std::chrono::seconds(1) || *d > std::chrono::seconds(300)) {
      return InvalidArgument(path +
                             ": kubelet.crashLoopBackOff.maxContainerRestartPeriod must be "
                             "a duration from 1s to 300s, like \"10s\"");
    }
    max_restart = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  std::vector<NodeSpec> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Json& e = nodes[i];
    NodeSpec n;
    if (!e.is_object() || !e.contains("name") || !e.contains("machine")) {
      return InvalidArgument(path + ": nodes[" + std::to_string(i) +
                             "] needs `name` and `machine`");
    }
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() != "name" && it.key() != "machine" && it.key() != "os" && it.key() != "kernel" &&
          it.key() != "driver") {
        return InvalidArgument(path + ": nodes[" + std::to_string(i) + "]: unknown field `" +
                               it.key() + "` (name, machine, os, kernel, driver)");
      }
    }
    if (e.contains("driver")) {
      const std::string d = e["driver"].is_string() ? e["driver"].get<std::string>() : "";
      if (d != "host" && d != "none") {
        return InvalidArgument(path + ": nodes[" + std::to_string(i) +
                               "].driver must be `host` (a driver installed on the node) or "
                               "`none` (a driver container loads it)");
      }
      n.host_driver = d == "host";
    }
    n.max_restart_period = max_restart;
    n.name = e["name"].get<std::string>();
    n.machine = e["machine"].get<std::string>();
    if (e.contains("os")) {
      n.os_id = e["os"].value("id", n.os_id);
      n.os_version = e["os"].value("version", n.os_version);
    }
    n.kernel = e.value("kernel", n.kernel);
    out.push_back(std::move(n));
  }
  GPUOP_RETURN_IF_ERROR(CheckNodes(out));
  return out;
}

std::vector<std::string> CleanUpCluster(const std::string& dir) {
  std::vector<std::string> removed;
  const std::string key = ClusterKey(dir);
  for (auto& c : ClusterContainers(dir, key)) removed.push_back(std::move(c));
  std::vector<std::string> nodes;
  auto state = ReadFile(dir + "/cluster.json");
  if (state.ok()) {
    Json j = Json::parse(*state, nullptr, false);
    if (j.is_object() && j["nodes"].is_array()) {
      for (const Json& n : j["nodes"]) nodes.push_back(n.value("name", ""));
    }
  }
  NetworkPlan plan = PlanNetwork(key, nodes);
  for (const std::string& ns : LeftoverNamespaces(key)) {
    removed.push_back("network namespace " + ns);
    (void)RunCommand({"ip", "netns", "del", ns});
  }
  bool bridge = std::filesystem::exists("/sys/class/net/" + plan.bridge);
  TearDownNetwork(plan);
  if (bridge) removed.push_back("bridge " + plan.bridge);
  return removed;
}

Status RunCluster(const ClusterSpec& spec, std::stop_token stop) {
  const std::string dir = spec.dir;
  const std::string key = ClusterKey(dir);
  GPUOP_RETURN_IF_ERROR(CheckNodes(spec.nodes));
  for (const std::string& what : CleanUpCluster(dir)) {
    LogInfo("cluster: removed what an earlier run left", {{"what", what}});
  }
  std::vector<std::string> names;
  for (const auto& n : spec.nodes) names.push_back(n.name);
  const NetworkPlan net = PlanNetwork(key, names);
  Json state = {{"state", "starting"}, {"pid", ::getpid()}, {"key", key}, {"dir", dir}};
  Json nodes_json = Json::array();
  for (const auto& n : spec.nodes) {
    const NodeNetwork* nn = net.Find(n.name);
    nodes_json.push_back(
        {{"name", n.name},
         {"machine", n.machine},
         {"driver", n.host_driver ? "host" : "none"},
         {"address", nn->address},
         {"netns", nn->netns},
         {"root", dir + "/nodes/" + n.name + "/root"},
         {"sim_state", n.machine == "cpu" ? "" : dir + "/nodes/" + n.name + "/sim"},
         {"seed", n.name}});
  }
  state["nodes"] = nodes_json;
  GPUOP_RETURN_IF_ERROR(WriteState(dir, state));
  auto fail = [&](const Status& s) {
    state["state"] = "failed";
    state["error"] = s.message();
    (void)WriteState(dir, state);
    TearDownNetwork(net);
    return s;
  };

  // Nodes' roots and GPUs.
  auto elf = sim::HostElfMachine();
  if (!elf.ok()) return fail(elf.status());
  for (const auto& n : spec.nodes) {
    const std::string root = dir + "/nodes/" + n.name + "/root";
    GPUOP_RETURN_IF_ERROR(MakeDirs(root));
    if (n.machine != "cpu") {
      auto machine = sim::LoadMachine(n.machine, n.name);
      if (!machine.ok()) return fail(machine.status());
      sim::HostRootOptions ho;
      ho.elf_machine = *elf;
      ho.nvml_sim_library = spec.nvml_sim;
      ho.cuda_sim_library = spec.cuda_sim;
      ho.nvidia_smi = spec.nvidia_smi;
      auto plan = sim::PlanHostRoot(*machine, ho);
      if (!plan.ok()) return fail(plan.status());
      auto written =
          sim::WriteHostRoot(root, n.host_driver ? *plan : sim::WithoutDriverFiles(*plan));
      if (!written.ok()) return fail(written.status().Annotate("node " + n.name));
      const std::string sim_dir = dir + "/nodes/" + n.name + "/sim";
      GPUOP_RETURN_IF_ERROR(MakeDirs(sim_dir));
      if (!n.host_driver) {  // a bare node: no module loaded until a driver container loads one
        auto store = sim::StateStore::Open(*machine, sim_dir, NowUnixMillis());
        if (!store.ok()) return fail(store.status().Annotate("node " + n.name));
        if (Status s = sim::SetDriverLoaded(**store, false); !s.ok()) return fail(s);
      }
    }
    if (Status s = LayOutNodeRoot(root, n); !s.ok()) return fail(s);
  }

  if (Status s = SetUpNetwork(net); !s.ok()) return fail(s);

  // The API server, on the gateway: reachable from this machine and every node.
  simkube::ServerOptions so;
  so.listen = net.gateway + ":" + std::to_string(kApiPort);
  so.tls = true;
  so.token = RandomToken();
  so.rbac = true;  // pods get their ServiceAccount's token; the simulator's own parts are admin
  so.audit_log = dir + "/audit.log";  // who asked for what (tests check least privilege with it)
  auto server = simkube::ApiServer::Start(so);
  if (!server.ok()) return fail(server.status());
  simkube::KubeconfigParams kp = (*server)->kubeconfig();
  kp.name = "gpuop-sim-" + key;
  if (Status s = simkube::WriteKubeconfig(dir + "/kubeconfig", kp); !s.ok()) return fail(s);
  if (Status s = WriteFileAtomic(dir + "/ca.crt", kp.ca_cert_pem); !s.ok()) return fail(s);
  if (Status s = WriteFileAtomic(dir + "/token", so.token, 0600); !s.ok()) return fail(s);
  state["api"] = (*server)->url();
  state["kubeconfig"] = dir + "/kubeconfig";

  kube::RestConfig rc;
  rc.server = (*server)->url();
  rc.ca_pem = kp.ca_cert_pem;
  rc.token = so.token;
  rc.qps = 200;
  rc.burst = 400;
  rc.user_agent = "gpuop-sim-cluster";
  auto client_or = kube::Client::New(rc);
  if (!client_or.ok()) return fail(client_or.status());
  std::unique_ptr<kube::Client> client = std::move(client_or).value();

  // What a cluster has before anyone installs anything.
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    (void)client->Create(
        kube::resources::kNamespaces, "",
        Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  }

  auto scheduler = Scheduler::Start(*client, {});
  if (!scheduler.ok()) return fail(scheduler.status());
  auto daemonsets = DaemonSetController::Start(*client, {});
  if (!daemonsets.ok()) return fail(daemonsets.status());
  auto replicasets = ReplicaSetController::Start(*client);
  if (!replicasets.ok()) return fail(replicasets.status());
  auto deployments = DeploymentController::Start(*client);
  if (!deployments.ok()) return fail(deployments.status());
  auto jobs = JobController::Start(*client);
  if (!jobs.ok()) return fail(jobs.status());

  // Each GPU node's hardware buttons (its nvidia-smi's GPU reset).
  std::vector<std::unique_ptr<HardwareControl>> hardware;
  for (const auto& n : spec.nodes) {
    if (n.machine == "cpu") continue;
    auto hw = HardwareControl::Start(dir + "/nodes/" + n.name + "/root", n.machine, n.name,
                                     dir + "/nodes/" + n.name + "/sim");
    if (!hw.ok()) return fail(hw.status().Annotate("node " + n.name));
    hardware.push_back(std::move(hw).value());
  }

  std::vector<std::unique_ptr<Kubelet>> kubelets;
  for (const auto& n : spec.nodes) {
    const NodeNetwork* nn = net.Find(n.name);
    KubeletOptions ko;
    ko.node_name = n.name;
    ko.node_ip = nn->address;
    ko.netns = nn->netns;
    ko.host_root = dir + "/nodes/" + n.name + "/root";
    ko.state_dir = dir + "/nodes/" + n.name;
    ko.sim_machine = n.machine == "cpu" ? "" : n.machine;
    ko.sim_state_dir = n.machine == "cpu" ? "" : dir + "/nodes/" + n.name + "/sim";
    ko.sim_seed = n.name;
    ko.cluster_key = key;
    ko.api_host = net.gateway;
    ko.api_port = kApiPort;
    ko.ca_file = dir + "/ca.crt";
    ko.os_image =
        n.os_id == "ubuntu" ? "Ubuntu " + n.os_version + " LTS" : n.os_id + " " + n.os_version;
    ko.kernel_version = n.kernel;
    ko.max_restart_period = n.max_restart_period;
    auto k = Kubelet::Start(ko, client.get());
    if (!k.ok()) {
      for (auto& kl : kubelets) kl->Stop();
      return fail(k.status().Annotate("node " + n.name));
    }
    kubelets.push_back(std::move(k).value());
  }
  (*server)->SetLogProvider(
      [&kubelets, &spec](const std::string& ns, const std::string& pod, const std::string& node,
                         const std::string& container, bool previous) -> Result<std::string> {
        for (size_t i = 0; i < spec.nodes.size(); ++i) {
          if (spec.nodes[i].name == node) return kubelets[i]->Logs(ns, pod, container, previous);
        }
        return NotFound("pod " + ns + "/" + pod + " is not on a node of this cluster");
      });

  // `gpuop sim cluster restart-kubelet`: POST /gpuop-sim/nodes/<node>/restart-kubelet
  // {"downSeconds": S}.
  (*server)->SetNodeAction([&kubelets, &spec](const std::string& node, const std::string& action,
                                              const Json& params) -> Status {
    size_t i = 0;
    while (i < spec.nodes.size() && spec.nodes[i].name != node) ++i;
    if (i == spec.nodes.size()) return NotFound("no node \"" + node + "\" in this cluster");
    if (action != "restart-kubelet") {
      return NotFound("no node action \"" + action + "\" (there is restart-kubelet)");
    }
    const Json& down = params.contains("downSeconds") ? params["downSeconds"] : Json(2);
    if (!down.is_number() || down.get<double>() < 0 || down.get<double>() > 60) {
      return InvalidArgument("downSeconds must be a number of seconds from 0 to 60");
    }
    return kubelets[i]->Restart(std::chrono::milliseconds(std::lround(down.get<double>() * 1000)));
  });

  // Ready once every node reports Ready.
  for (int i = 0; i < 600 && !stop.stop_requested(); ++i) {
    auto list = client->List(kube::resources::kNodes, "");
    size_t ready = 0;
    if (list.ok()) {
      for (const Json& n : list->items) {
        for (const Json& c : n.value("status", Json::object()).value("conditions", Json::array())) {
          if (c.value("type", "") == "Ready" && c.value("status", "") == "True") ready++;
        }
      }
    }
    if (ready == spec.nodes.size()) break;
    std::this_thread::sleep_for(100ms);
  }
  state["state"] = "ready";
  (void)WriteState(dir, state);
  LogInfo("cluster: ready",
          {{"api", (*server)->url()}, {"nodes", std::to_string(spec.nodes.size())}});

  WaitForStop(stop);

  LogInfo("cluster: stopping");
  (*server)->SetNodeAction(nullptr);
  for (auto& k : kubelets) k->Stop();
  (*jobs)->Stop();
  (*deployments)->Stop();
  (*replicasets)->Stop();
  (*daemonsets)->Stop();
  (*scheduler)->Stop();
  kubelets.clear();
  (*server)->Stop();
  TearDownNetwork(net);
  for (const std::string& what : CleanUpCluster(dir)) {
    LogWarn("cluster: removed a leftover at shutdown", {{"what", what}});
  }
  state["state"] = "down";
  (void)WriteState(dir, state);
  return Status::Ok();
}

}  // namespace gpuop::simcluster
