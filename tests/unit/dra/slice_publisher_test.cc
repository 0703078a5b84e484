#include "dra/slice_publisher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dra/slices.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/sim_node.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

class SlicePublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = testing::StartApiEmulator();
    ASSERT_TRUE(api.ok()) << api.status().ToString();
    api_ = std::move(api).value();
    node_uid_ = CreateNode("node-a");
    ASSERT_FALSE(node_uid_.empty());
  }

  std::string CreateNode(const std::string& name) {
    auto node = api_.client->Create(
        kube::resources::kNodes, "",
        Json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}});
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    return node.ok() ? (*node)["metadata"]["uid"].get<std::string>() : "";
  }

  // The node's devices as the GPU simulator reports them.
  std::vector<Device> DevicesOf(testing::SimNode& node, const DeviceInputs& inputs = {}) {
    auto nvml = node.OpenNvmlOrFail();
    if (nvml == nullptr) return {};
    auto gpus = nvml->Gpus();
    auto system = nvml->System();
    EXPECT_TRUE(gpus.ok() && system.ok());
    if (!gpus.ok() || !system.ok()) return {};
    gpus_ = *gpus;
    auto devices = BuildDevices(*gpus, *system, inputs);
    EXPECT_TRUE(devices.ok()) << devices.status().ToString();
    return devices.ok() ? *devices : std::vector<Device>{};
  }

  std::vector<Json> Slices(const std::string& node = "node-a") {
    kube::ListOptions o;
    o.field_selector = SliceFieldSelector(node);
    auto list = api_.client->List(kube::resources::kResourceSlices, "", o);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (!list.ok()) return {};
    std::sort(list->items.begin(), list->items.end(), [](const Json& a, const Json& b) {
      return a["metadata"]["name"] < b["metadata"]["name"];
    });
    return list->items;
  }

  testing::ApiEmulator api_;
  std::string node_uid_;
  std::vector<nvml::Gpu> gpus_;
};

TEST_F(SlicePublisherTest, PublishesTheNodesGpusOnceAndKeepsTheGeneration) {
  testing::SimNode node("dgx-h100", "dra-publisher");
  ASSERT_TRUE(node.booted());
  const std::vector<Device> devices = DevicesOf(node);
  ASSERT_EQ(devices.size(), 8u);

  SlicePublisher publisher(*api_.client, "node-a");  // reads the Node's uid itself
  ASSERT_TRUE(publisher.Publish(devices).ok());
  EXPECT_EQ(publisher.generation(), 1);
  std::vector<Json> slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  const Json& s = slices[0];
  EXPECT_TRUE(s["metadata"]["name"].get<std::string>().starts_with("node-a-gpu.nvidia.com-"));
  EXPECT_EQ(s["metadata"]["ownerReferences"][0]["uid"], node_uid_);
  EXPECT_EQ(s["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(s["spec"]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(s["spec"]["nodeName"], "node-a");
  EXPECT_EQ(s["spec"]["pool"],
            (Json{{"name", "node-a"}, {"generation", 1}, {"resourceSliceCount", 1}}));
  ASSERT_EQ(s["spec"]["devices"].size(), 8u);
  const Json& gpu0 = s["spec"]["devices"][0];
  EXPECT_EQ(gpu0["name"], "gpu-0");
  EXPECT_EQ(gpu0["attributes"]["productName"], (Json{{"string", "NVIDIA H100 80GB HBM3"}}));
  EXPECT_EQ(gpu0["attributes"]["cudaComputeCapability"], (Json{{"version", "9.0.0"}}));
  EXPECT_EQ(gpu0["capacity"]["memory"], (Json{{"value", "85520809984"}}));

  // The same devices again: no write at all.
  const std::string version = s["metadata"]["resourceVersion"];
  ASSERT_TRUE(publisher.Publish(devices).ok());
  ASSERT_TRUE(publisher.Resync().ok());
  slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["metadata"]["resourceVersion"], version);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 1);

  // A second publisher (a restarted plugin) picks up the pool where it is.
  SlicePublisher restarted(*api_.client, "node-a", node_uid_);
  ASSERT_TRUE(restarted.Publish(devices).ok());
  EXPECT_EQ(restarted.generation(), 1);
  EXPECT_EQ(Slices()[0]["metadata"]["resourceVersion"], version);
}

TEST_F(SlicePublisherTest, AnXidTaintsTheGpuAndBumpsTheGeneration) {
  testing::SimNode node("dgx-h100", "dra-publisher");
  ASSERT_TRUE(node.booted());
  SlicePublisher publisher(*api_.client, "node-a", node_uid_);
  ASSERT_TRUE(publisher.Publish(DevicesOf(node)).ok());
  const std::string name = Slices()[0]["metadata"]["name"];

  DeviceInputs inputs;
  inputs.health[gpus_[3].uuid] = GpuHealthState{48, false, "2026-12-04T07:00:00Z"};
  ASSERT_TRUE(publisher.Publish(DevicesOf(node, inputs)).ok());
  EXPECT_EQ(publisher.generation(), 2);
  const std::vector<Json> slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["metadata"]["name"], name);  // updated in place
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);
  const Json& gpu3 = slices[0]["spec"]["devices"][3];
  EXPECT_EQ(gpu3["name"], "gpu-3");
  EXPECT_EQ(gpu3["taints"], Json::parse(R"([{"key": "gpu.nvidia.com/xid", "value": "48",
      "effect": "NoSchedule", "timeAdded": "2026-12-04T07:00:00Z"}])"));
  EXPECT_FALSE(slices[0]["spec"]["devices"][2].contains("taints"));

  // Healthy again.
  ASSERT_TRUE(publisher.Publish(DevicesOf(node)).ok());
  EXPECT_EQ(publisher.generation(), 3);
  EXPECT_FALSE(Slices()[0]["spec"]["devices"][3].contains("taints"));
}

TEST_F(SlicePublisherTest, ResyncBringsBackADeletedSlice) {
  testing::SimNode node("l40s-4", "dra-publisher");
  ASSERT_TRUE(node.booted());
  SlicePublisher publisher(*api_.client, "node-a", node_uid_);
  ASSERT_TRUE(publisher.Publish(DevicesOf(node)).ok());
  const std::string name = Slices()[0]["metadata"]["name"];

  // What the kubelet does to a plugin's slices when it restarts.
  ASSERT_TRUE(api_.client->Delete(kube::resources::kResourceSlices, "", name).ok());
  ASSERT_TRUE(Slices().empty());
  ASSERT_TRUE(publisher.Resync().ok());
  const std::vector<Json> slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_NE(slices[0]["metadata"]["name"], name);
  EXPECT_EQ(slices[0]["spec"]["pool"]["generation"], 2);
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 4u);
  EXPECT_EQ(publisher.generation(), 2);
}

TEST_F(SlicePublisherTest, MigLayoutChangeRepublishes) {
  testing::SimNode node("dgx-a100", "dra-publisher");
  ASSERT_TRUE(node.booted());
  SlicePublisher publisher(*api_.client, "node-a", node_uid_);
  ASSERT_TRUE(publisher.Publish(DevicesOf(node)).ok());
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 0, true, std::vector<std::string>(7, "1g.5gb")).ok());
  ASSERT_TRUE(publisher.Publish(DevicesOf(node)).ok());
  EXPECT_EQ(publisher.generation(), 2);
  const std::vector<Json> slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  std::vector<std::string> names;
  for (const Json& d : slices[0]["spec"]["devices"]) names.push_back(d["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1",
                                             "gpu-0-mig-1g5gb-19-2", "gpu-0-mig-1g5gb-19-3",
                                             "gpu-0-mig-1g5gb-19-4", "gpu-0-mig-1g5gb-19-5",
                                             "gpu-0-mig-1g5gb-19-6", "gpu-1", "gpu-2", "gpu-3",
                                             "gpu-4", "gpu-5", "gpu-6", "gpu-7"}));
  EXPECT_EQ(slices[0]["spec"]["devices"][2]["capacity"]["memorySlice2"], (Json{{"value", "1"}}));
}

Device Synthetic(const std::string& name) {
  Device d;
  d.name = name;
  d.attributes["type"] = std::string("gpu");
  d.capacity["memory"] = uint64_t{1} << 30;
  return d;
}

TEST_F(SlicePublisherTest, GrowingAndShrinkingPoolsAddAndDeleteSlices) {
  SlicePublisher publisher(*api_.client, "node-a", node_uid_);
  std::vector<Device> many;
  for (int i = 0; i < 300; ++i) many.push_back(Synthetic("dev-" + std::to_string(i)));
  ASSERT_TRUE(publisher.Publish(many).ok());
  std::vector<Json> slices = Slices();
  ASSERT_EQ(slices.size(), 3u);
  for (const Json& s : slices) {
    EXPECT_EQ(s["spec"]["pool"]["generation"], 1);
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 3);
  }
  ASSERT_TRUE(publisher.Publish(many).ok());
  EXPECT_EQ(publisher.generation(), 1);

  ASSERT_TRUE(publisher.Publish({Synthetic("dev-0"), Synthetic("dev-1")}).ok());
  slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["pool"],
            (Json{{"name", "node-a"}, {"generation", 2}, {"resourceSliceCount", 1}}));
  EXPECT_EQ(slices[0]["spec"]["devices"].size(), 2u);

  // No devices at all: the pool says so with one empty slice.
  ASSERT_TRUE(publisher.Publish({}).ok());
  slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_FALSE(slices[0]["spec"].contains("devices") && !slices[0]["spec"]["devices"].empty());
  EXPECT_EQ(publisher.generation(), 3);
}

TEST_F(SlicePublisherTest, OtherNodesAndDriversAreLeftAlone) {
  const std::string uid_b = CreateNode("node-b");
  SlicePublisher b(*api_.client, "node-b", uid_b);
  ASSERT_TRUE(b.Publish({Synthetic("gpu-0")}).ok());
  Json other = BuildSlices({Synthetic("nic-0")}, "node-a", node_uid_, 1)[0];
  other["metadata"]["generateName"] = "node-a-nic.example.com-";
  other["spec"]["driver"] = "nic.example.com";
  ASSERT_TRUE(api_.client->Create(kube::resources::kResourceSlices, "", other).ok());

  SlicePublisher a(*api_.client, "node-a", node_uid_);
  ASSERT_TRUE(a.Publish({Synthetic("gpu-0"), Synthetic("gpu-1")}).ok());
  EXPECT_EQ(a.generation(), 1);  // the other driver's slice is not ours to count
  ASSERT_TRUE(a.Publish({}).ok());

  auto all = api_.client->List(kube::resources::kResourceSlices, "");
  ASSERT_TRUE(all.ok());
  int node_b = 0, nic = 0;
  for (const Json& s : all->items) {
    if (s["spec"]["nodeName"] == "node-b") ++node_b;
    if (s["spec"]["driver"] == "nic.example.com") ++nic;
  }
  EXPECT_EQ(node_b, 1);
  EXPECT_EQ(nic, 1);
  EXPECT_EQ(Slices("node-b")[0]["spec"]["devices"].size(), 1u);
}

TEST_F(SlicePublisherTest, AMissingNodeIsAnErrorNamingIt) {
  SlicePublisher publisher(*api_.client, "no-such-node");
  const Status s = publisher.Publish({Synthetic("gpu-0")});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Node no-such-node"), std::string::npos) << s.ToString();
  EXPECT_TRUE(Slices("no-such-node").empty());
}

}  // namespace
}  // namespace gpuop::dra
