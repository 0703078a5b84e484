// The cluster simulator's pure parts: node lists, the network plan, CRI log
// text, the runtime handler check and the CDI view of a node's specs.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "base/files.h"
#include "sim/cluster/cdi_view.h"
#include "sim/cluster/cluster.h"
#include "sim/cluster/kubelet.h"
#include "sim/cluster/network.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::simcluster {
namespace {

using Json = nlohmann::json;

TEST(NodeListTest, NamesFromMachinesAndExplicitNames) {
  auto nodes = ParseNodeList("dgx-h100,l40s-4,cpu,dgx-h100,gpu-a=a100-80gb");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  std::vector<std::string> names;
  for (const auto& n : *nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dgx-h100", "l40s-4", "cpu", "dgx-h100-2", "gpu-a"}));
  EXPECT_EQ((*nodes)[4].machine, "a100-80gb");
  EXPECT_EQ((*nodes)[2].machine, "cpu");
}

TEST(NodeListTest, BadListsAreRefusedWithTheReason) {
  auto dup = ParseNodeList("a=dgx-h100,a=cpu");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("\"a\" is listed twice"), std::string::npos);
  auto bad_name = ParseNodeList("GPU_Node=cpu");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_NE(bad_name.status().message().find("lower-case letters"), std::string::npos);
  auto bad_machine = ParseNodeList("n1=no-such-machine");
  ASSERT_FALSE(bad_machine.ok());
  EXPECT_NE(bad_machine.status().message().find("node n1"), std::string::npos);
  EXPECT_FALSE(ParseNodeList("").ok());
}

TEST(NodeListTest, ClusterFile) {
  testing::TempDir tmp;
  std::string path = tmp.path() + "/cluster.yaml";
  ASSERT_TRUE(
      WriteFileAtomic(path,
                      "nodes:\n"
                      "- name: h100-1\n  machine: dgx-h100\n  os: {id: rhel, version: \"9.4\"}\n"
                      "  kernel: 5.14.0-427.el9.x86_64\n"
                      "- {name: cpu-1, machine: cpu}\n")
          .ok());
  auto nodes = ParseClusterFile(path);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].os_id, "rhel");
  EXPECT_EQ((*nodes)[0].os_version, "9.4");
  EXPECT_EQ((*nodes)[0].kernel, "5.14.0-427.el9.x86_64");
  ASSERT_TRUE(WriteFileAtomic(path, "nodes:\n- {name: x, machine: cpu, gpus: 3}\n").ok());
  auto bad = ParseClusterFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown field `gpus`"), std::string::npos);
}

TEST(NodeListTest, ClusterFileDriverAndKubelet) {
  testing::TempDir tmp;
  const std::string path = tmp.path() + "/cluster.yaml";
  ASSERT_TRUE(WriteFileAtomic(path,
                              "kubelet: {crashLoopBackOff: {maxContainerRestartPeriod: 2s}}\n"
                              "nodes:\n"
                              "- {name: bare, machine: dgx-h100, driver: none}\n"
                              "- {name: installed, machine: dgx-h100, driver: host}\n"
                              "- {name: plain, machine: cpu}\n")
                  .ok());
  auto nodes = ParseClusterFile(path);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_FALSE((*nodes)[0].host_driver);
  EXPECT_TRUE((*nodes)[1].host_driver);
  EXPECT_TRUE((*nodes)[2].host_driver);  // the default: a driver on the host
  for (const NodeSpec& n : *nodes) EXPECT_EQ(n.max_restart_period, std::chrono::seconds(2));

  ASSERT_TRUE(WriteFileAtomic(path, "nodes:\n- {name: x, machine: cpu}\n").ok());
  nodes = ParseClusterFile(path);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ((*nodes)[0].max_restart_period, std::chrono::seconds(300));  // the kubelet's default
}

TEST(NodeListTest, ClusterFileBadDriverAndKubeletValues) {
  testing::TempDir tmp;
  const std::string path = tmp.path() + "/cluster.yaml";
  auto error_of = [&](const std::string& yaml) {
    EXPECT_TRUE(WriteFileAtomic(path, yaml).ok());
    auto nodes = ParseClusterFile(path);
    EXPECT_FALSE(nodes.ok()) << yaml;
    return nodes.ok() ? std::string() : nodes.status().message();
  };
  for (const char* driver : {"containerized", "true", "[host]"}) {
    std::string msg =
        error_of(std::string("nodes:\n- {name: x, machine: cpu, driver: ") + driver + "}\n");
    EXPECT_NE(msg.find("nodes[0].driver must be `host`"), std::string::npos) << msg;
    EXPECT_NE(msg.find("`none`"), std::string::npos) << msg;
  }
  for (const char* period : {"0s", "10m", "5", "[2s]", "soon"}) {
    std::string msg =
        error_of(std::string("kubelet: {crashLoopBackOff: {maxContainerRestartPeriod: ") + period +
                 "}}\nnodes:\n- {name: x, machine: cpu}\n");
    EXPECT_NE(msg.find("kubelet.crashLoopBackOff.maxContainerRestartPeriod must be a duration "
                       "from 1s to 300s"),
              std::string::npos)
        << period << ": " << msg;
  }
  for (const char* kubelet : {"kubelet: 2s\n", "kubelet: {crashLoopBackoff: {}}\n",
                              "kubelet: {crashLoopBackOff: {maxRestartPeriod: 2s}}\n",
                              "kubelet: {crashLoopBackOff: 2s}\n"}) {
    std::string msg = error_of(std::string(kubelet) + "nodes:\n- {name: x, machine: cpu}\n");
    EXPECT_NE(msg.find("`kubelet` takes {crashLoopBackOff: {maxContainerRestartPeriod: 10s}}"),
              std::string::npos)
        << kubelet << ": " << msg;
  }
  std::string msg = error_of("nodes:\n- {name: x, machine: cpu}\nnetwork: {mtu: 1400}\n");
  EXPECT_NE(msg.find("unknown field `network` (nodes, kubelet)"), std::string::npos) << msg;
}

TEST(NetworkPlanTest, DistinctNamesAndAddressesWithinLimits) {
  std::string key = ClusterKey("/tmp/gpuop-cluster");
  EXPECT_EQ(key, ClusterKey("/tmp/gpuop-cluster"));  // stable
  EXPECT_NE(key, ClusterKey("/tmp/other"));
  auto plan = PlanNetwork(key, {"dgx-h100", "l40s-4", "cpu"});
  ASSERT_EQ(plan.nodes.size(), 3u);
  std::set<std::string> addrs, veths;
  for (const auto& n : plan.nodes) {
    addrs.insert(n.address);
    veths.insert(n.veth_host);
    EXPECT_LE(n.veth_host.size(), 15u);  // IFNAMSIZ - 1
    EXPECT_EQ(n.address.substr(0, n.address.rfind('.')),
              plan.gateway.substr(0, plan.gateway.rfind('.')));
  }
  EXPECT_EQ(addrs.size(), 3u);
  EXPECT_EQ(veths.size(), 3u);
  EXPECT_FALSE(addrs.count(plan.gateway));
  EXPECT_LE(plan.bridge.size(), 15u);
  ASSERT_NE(plan.Find("cpu"), nullptr);
  EXPECT_EQ(plan.Find("nope"), nullptr);
}

TEST(CriLogTest, JoinsPartialLinesAndDropsPrefixes) {
  std::string file =
      "2026-12-03T18:00:00.000000001Z stdout F GPU 0: NVIDIA H100\n"
      "2026-12-03T18:00:00.000000002Z stderr P half \n"
      "2026-12-03T18:00:00.000000003Z stderr F and the rest\n"
      "2026-12-03T18:00:00.000000004Z stdout F\n";
  EXPECT_EQ(CriLogText(file), "GPU 0: NVIDIA H100\nhalf and the rest\n\n");
}

TEST(RuntimeHandlerTest, FoundInTheNodesContainerdConfig) {
  testing::TempDir tmp;
  EXPECT_FALSE(RuntimeHandlerConfigured(tmp.path(), "nvidia"));
  ASSERT_TRUE(MakeDirs(tmp.path() + "/etc/containerd/conf.d").ok());
  ASSERT_TRUE(WriteFileAtomic(tmp.path() + "/etc/containerd/conf.d/99-nvidia.toml",
                              "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n"
                              "runtime_type = \"io.containerd.runc.v2\"\n")
                  .ok());
  EXPECT_TRUE(RuntimeHandlerConfigured(tmp.path(), "nvidia"));
  EXPECT_FALSE(RuntimeHandlerConfigured(tmp.path(), "nvidia-cdi"));
}

TEST(CdiViewTest, HostPathsMoveUnderTheNodeRoot) {
  Json spec = Json::parse(R"({
    "cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
    "containerEdits": {
      "env": ["NVIDIA_VISIBLE_DEVICES=void"],
      "mounts": [{"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08",
                  "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08"}],
      "hooks": [{"hookName": "createContainer", "path": "/usr/local/nvidia/toolkit/gpuop",
                 "args": ["gpuop", "cdi", "hook", "update-ldcache"]}],
      "deviceNodes": [{"path": "/dev/nvidiactl"}]},
    "devices": [{"name": "0", "containerEdits": {
      "deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/dev/nvidia0"}, {"path": "/dev/dri/card0"}]}}]})");
  Json view = TranslateCdiSpec(spec, "/c/nodes/n1/root");
  const Json& e = view["containerEdits"];
  EXPECT_EQ(e["mounts"][0]["hostPath"],
            "/c/nodes/n1/root/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08");
  EXPECT_EQ(e["mounts"][0]["containerPath"], "/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08");
  EXPECT_EQ(e["hooks"][0]["path"], "/c/nodes/n1/root/usr/local/nvidia/toolkit/gpuop");
  EXPECT_EQ(e["hooks"][0]["args"], spec["containerEdits"]["hooks"][0]["args"]);
  EXPECT_EQ(e["deviceNodes"][0]["path"], "/dev/nvidiactl");
  EXPECT_EQ(e["deviceNodes"][0]["hostPath"], "/c/nodes/n1/root/dev/nvidiactl");
  EXPECT_EQ(e["env"], spec["containerEdits"]["env"]);
  const Json& d = view["devices"][0]["containerEdits"]["deviceNodes"];
  EXPECT_EQ(d[0]["hostPath"], "/c/nodes/n1/root/dev/nvidia0");
  EXPECT_EQ(d[1]["hostPath"], "/c/nodes/n1/root/dev/dri/card0");
  EXPECT_EQ(view["devices"][0]["name"], "0");
}

TEST(CdiViewTest, SyncFollowsTheNodesSpecs) {
  testing::TempDir tmp;
  const std::string root = tmp.path() + "/root", view = tmp.path() + "/view";
  ASSERT_TRUE(MakeDirs(root + "/var/run/cdi").ok());
  ASSERT_TRUE(MakeDirs(root + "/etc/cdi").ok());
  ASSERT_TRUE(WriteFileAtomic(
                  root + "/var/run/cdi/nvidia.yaml",
                  "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
                  "- name: all\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n")
                  .ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/etc/cdi/broken.yaml", "cdiVersion: [\n").ok());
  Status s = SyncCdiView(root, view);
  EXPECT_FALSE(s.ok());  // the broken one is named...
  EXPECT_NE(s.message().find("broken.yaml"), std::string::npos);
  auto text = ReadFile(view + "/nvidia.json");  // ...and the good one is there
  ASSERT_TRUE(text.ok());
  Json j = Json::parse(*text);
  EXPECT_EQ(j["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"], root + "/dev/nvidia0");
  ASSERT_TRUE(::unlink((root + "/var/run/cdi/nvidia.yaml").c_str()) == 0);
  ASSERT_TRUE(::unlink((root + "/etc/cdi/broken.yaml").c_str()) == 0);
  EXPECT_TRUE(SyncCdiView(root, view).ok());
  EXPECT_FALSE(ReadFile(view + "/nvidia.json").ok());  // gone with its spec
}

}  // namespace
}  // namespace gpuop::simcluster
