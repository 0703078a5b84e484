#include "dra/slices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/nvml/state.h"
#include "tests/testing/api_emulator.h"
#include "tests/testing/sim_node.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

Device Synthetic(const std::string& name) {
  Device d;
  d.name = name;
  d.uuid = "GPU-" + name;
  d.attributes["type"] = std::string("gpu");
  d.attributes["uuid"] = d.uuid;
  d.capacity["memory"] = 1024;
  return d;
}

std::vector<Device> SyntheticDevices(size_t n) {
  std::vector<Device> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Synthetic("gpu-" + std::to_string(i)));
  return out;
}

std::vector<size_t> DeviceCounts(const std::vector<Json>& slices) {
  std::vector<size_t> out;
  for (const Json& s : slices) out.push_back(s["spec"]["devices"].size());
  return out;
}

TEST(SlicesTest, OneSliceShapedLikeTheHelpers) {
  std::vector<Device> devices = {Synthetic("gpu-1"), Synthetic("gpu-0")};
  devices[0].attributes["resource.kubernetes.io/numaNode"] = int64_t{1};
  devices[0].attributes["cudaComputeCapability"] = Version{"9.0.0"};
  const std::vector<Json> slices = BuildSlices(devices, "worker-1", "uid-1", 7);
  ASSERT_EQ(slices.size(), 1u);
  const Json want = Json::parse(R"({
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {
      "generateName": "worker-1-gpu.nvidia.com-",
      "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "worker-1",
                           "uid": "uid-1", "controller": true}]
    },
    "spec": {
      "driver": "gpu.nvidia.com",
      "nodeName": "worker-1",
      "pool": {"name": "worker-1", "generation": 7, "resourceSliceCount": 1},
      "devices": [
        {"name": "gpu-0",
         "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-gpu-0"}},
         "capacity": {"memory": {"value": "1024"}}},
        {"name": "gpu-1",
         "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-gpu-1"},
                        "resource.kubernetes.io/numaNode": {"int": 1},
                        "cudaComputeCapability": {"version": "9.0.0"}},
         "capacity": {"memory": {"value": "1024"}}}
      ]
    }
  })");
  EXPECT_EQ(slices[0], want) << slices[0].dump(2);
}

TEST(SlicesTest, TaintsCarryKeyValueEffectAndTime) {
  Device d = Synthetic("gpu-0");
  d.taints = {{"gpu.nvidia.com/xid", "48", "NoSchedule", "2026-12-04T07:00:00Z"},
              {"gpu.nvidia.com/gpu-lost", "", "NoSchedule", "2026-12-04T07:00:00Z"}};
  const Json j = DeviceJson(d);
  EXPECT_EQ(j["taints"], Json::parse(R"([
    {"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule",
     "timeAdded": "2026-12-04T07:00:00Z"},
    {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule",
     "timeAdded": "2026-12-04T07:00:00Z"}])"));
  EXPECT_FALSE(DeviceJson(Synthetic("gpu-1")).contains("taints"));
}

TEST(SlicesTest, LargePoolsSplitAt128Or64WithTaints) {
  std::vector<Device> devices = SyntheticDevices(300);
  std::vector<Json> slices = BuildSlices(devices, "n", "u", 1);
  EXPECT_EQ(DeviceCounts(slices), (std::vector<size_t>{128, 128, 44}));
  for (const Json& s : slices) {
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 3);
    EXPECT_EQ(s["spec"]["pool"]["name"], "n");
  }
  // Sorted by name across slices: gpu-0, gpu-1, gpu-10, gpu-100, ...
  std::vector<std::string> names;
  for (const Json& s : slices) {
    for (const Json& d : s["spec"]["devices"]) names.push_back(d["name"]);
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.size(), 300u);

  devices[17].taints = {{"gpu.nvidia.com/xid", "48", "NoSchedule", ""}};
  slices = BuildSlices(devices, "n", "u", 1);
  EXPECT_EQ(DeviceCounts(slices), (std::vector<size_t>{64, 64, 64, 64, 44}));
}

TEST(SlicesTest, ANodeWithoutDevicesHasOneEmptySlice) {
  const std::vector<Json> slices = BuildSlices({}, "n", "u", 3);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["spec"]["devices"], Json::array());
  EXPECT_EQ(slices[0]["spec"]["pool"]["resourceSliceCount"], 1);
}

// What the server would hand back: names, versions, another generation and
// order, quantities in canonical form, taint times set earlier.
std::vector<Json> AsPublished(std::vector<Json> slices, int64_t generation) {
  int i = 0;
  for (Json& s : slices) {
    s["metadata"]["name"] = "n-gpu.nvidia.com-" + std::to_string(i++);
    s["metadata"]["resourceVersion"] = "42";
    s["metadata"].erase("generateName");
    s["spec"]["pool"]["generation"] = generation;
    for (Json& d : s["spec"]["devices"]) {
      if (d["capacity"].contains("memory")) d["capacity"]["memory"]["value"] = "1Ki";
      if (d.contains("taints")) d["taints"][0]["timeAdded"] = "2026-01-01T00:00:00Z";
    }
  }
  std::reverse(slices.begin(), slices.end());
  return slices;
}

TEST(SlicesTest, UpToDateComparesWhatTheSlicesSay) {
  std::vector<Device> devices = SyntheticDevices(200);
  devices[3].taints = {{"gpu.nvidia.com/xid", "48", "NoSchedule", "2026-12-04T07:00:00Z"}};
  const std::vector<Json> desired = BuildSlices(devices, "n", "u", 0);
  ASSERT_EQ(desired.size(), 4u);
  const std::vector<Json> published = AsPublished(desired, 5);
  EXPECT_TRUE(SlicesUpToDate(published, desired));

  EXPECT_FALSE(SlicesUpToDate({}, desired));
  std::vector<Json> missing = published;
  missing.pop_back();
  EXPECT_FALSE(SlicesUpToDate(missing, desired));

  std::vector<Json> mixed = published;
  mixed[1]["spec"]["pool"]["generation"] = 4;  // a pool half-way through a change
  EXPECT_FALSE(SlicesUpToDate(mixed, desired));

  std::vector<Json> count = published;
  for (Json& s : count) s["spec"]["pool"]["resourceSliceCount"] = 5;
  EXPECT_FALSE(SlicesUpToDate(count, desired));

  std::vector<Device> changed = devices;
  changed[150].attributes["productName"] = std::string("NVIDIA H100");
  EXPECT_FALSE(SlicesUpToDate(published, BuildSlices(changed, "n", "u", 0)));
  changed = devices;
  changed[3].taints.clear();
  EXPECT_FALSE(SlicesUpToDate(published, BuildSlices(changed, "n", "u", 0)));
  changed = devices;
  changed[3].taints[0].effect = "None";
  EXPECT_FALSE(SlicesUpToDate(published, BuildSlices(changed, "n", "u", 0)));
  changed = devices;
  changed[0].capacity["memory"] = 2048;
  EXPECT_FALSE(SlicesUpToDate(published, BuildSlices(changed, "n", "u", 0)));
}

TEST(SlicesTest, FieldsTheServerDroppedDoNotCauseRewrites) {
  std::vector<Device> devices = SyntheticDevices(3);
  devices[1].taints = {{"gpu.nvidia.com/xid", "48", "NoSchedule", "2026-12-04T07:00:00Z"}};
  const std::vector<Json> sent = BuildSlices(devices, "n", "u", 2);
  // A server without the DRADeviceTaints feature gate stores no taints.
  std::vector<Json> stored = AsPublished(sent, 2);
  for (Json& s : stored) {
    for (Json& d : s["spec"]["devices"]) d.erase("taints");
  }
  const PoolWrite last{sent, stored};
  const std::vector<Json> desired = BuildSlices(devices, "n", "u", 0);
  EXPECT_FALSE(SlicesUpToDate(stored, desired));
  EXPECT_TRUE(SlicesUpToDate(stored, desired, &last));

  // The devices changed since: write.
  std::vector<Device> changed = devices;
  changed.pop_back();
  EXPECT_FALSE(SlicesUpToDate(stored, BuildSlices(changed, "n", "u", 0), &last));
  // Someone changed the slice since: write.
  std::vector<Json> edited = stored;
  edited[0]["spec"]["devices"][0]["attributes"]["type"] = {{"string", "vfio"}};
  EXPECT_FALSE(SlicesUpToDate(edited, desired, &last));
}

TEST(SlicesTest, QuantityValues) {
  EXPECT_EQ(QuantityValue("1024"), 1024);
  EXPECT_EQ(QuantityValue("1Ki"), 1024);
  EXPECT_EQ(QuantityValue("80Gi"), int64_t{80} << 30);
  EXPECT_EQ(QuantityValue("4k"), 4000);
  EXPECT_EQ(QuantityValue("0"), 0);
  EXPECT_EQ(QuantityValue("1.5Gi"), std::nullopt);
  EXPECT_EQ(QuantityValue("Gi"), std::nullopt);
  EXPECT_EQ(QuantityValue("100000Ei"), std::nullopt);  // overflows int64
}

TEST(SlicesTest, TheApiEmulatorAcceptsTaintedMigSlices) {
  testing::SimNode node("dgx-a100", "dra-slices");
  ASSERT_TRUE(node.booted());
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 0, true, std::vector<std::string>(7, "1g.5gb")).ok());
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 1, true, {"7g.40gb"}).ok());
  auto nvml = node.OpenNvmlOrFail();
  ASSERT_NE(nvml, nullptr);
  auto gpus = nvml->Gpus();
  auto system = nvml->System();
  ASSERT_TRUE(gpus.ok() && system.ok());
  DeviceInputs inputs;
  inputs.health[(*gpus)[0].uuid] = GpuHealthState{48, false, "2026-12-04T07:00:00Z"};
  inputs.health[(*gpus)[2].uuid] = GpuHealthState{79, true, "2026-12-04T07:00:00Z"};
  inputs.pcie_roots["0000:07:00.0"] = "pci0000:00";
  auto devices = BuildDevices(*gpus, *system, inputs);
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  ASSERT_EQ(devices->size(), 7u + 1u + 6u);

  auto api = testing::StartApiEmulator();
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  auto node_obj = api->client->Create(
      kube::resources::kNodes, "",
      Json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "dgx-a100-0"}}}});
  ASSERT_TRUE(node_obj.ok()) << node_obj.status().ToString();
  const kube::Resource slices_resource{"resource.k8s.io", "v1", "resourceslices", "ResourceSlice",
                                       false};
  for (const Json& s : BuildSlices(*devices, "dgx-a100-0", (*node_obj)["metadata"]["uid"], 1)) {
    auto created = api->client->Create(slices_resource, "", s);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    EXPECT_EQ((*created)["spec"], s["spec"]);
    EXPECT_TRUE((*created)["metadata"]["name"].get<std::string>().starts_with(
        "dgx-a100-0-gpu.nvidia.com-"));
  }
}

}  // namespace
}  // namespace gpuop::dra
