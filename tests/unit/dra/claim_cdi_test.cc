// The per-claim CDI spec for the simulator's GPUs: kind, file name, one
// device per prepared device named <claimUID>-<device>, the GPU's own node or
// a MIG device's GI/CI capability nodes, and nothing of the claim's
// neighbours; the spec validates and reads back.
#include "dra/claim_cdi.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sim/nvml/state.h"
#include "tests/testing/sim_node.h"
#include "tests/unit/dra/prepare_fixtures.h"

namespace gpuop::dra {
namespace {

namespace cdi = toolkit::cdi;
using Json = nlohmann::json;
using testing::CdiOptions;
using testing::SimCdiInputs;

constexpr char kUid[] = "8d3e4b2a-1c1f-4c8e-9a7b-2f6d5e4c3b2a";

std::vector<std::string> NodePaths(const cdi::ContainerEdits& e) {
  std::vector<std::string> out;
  for (const auto& n : e.device_nodes) out.push_back(n.path);
  return out;
}

std::vector<nvml::Gpu> Gpus(gpuop::testing::SimNode& node) {
  auto nvml = node.OpenNvmlOrFail();
  if (!nvml) return {};
  auto gpus = nvml->Gpus();
  EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
  return gpus.ok() ? *gpus : std::vector<nvml::Gpu>{};
}

TEST(ClaimCdi, NamesAndIds) {
  EXPECT_EQ(ClaimCdiFileName(kUid), std::string("k8s.gpu.nvidia.com-claim_") + kUid + ".yaml");
  EXPECT_EQ(ClaimCdiDeviceId(kUid, "gpu-3"),
            std::string("k8s.gpu.nvidia.com/claim=") + kUid + "-gpu-3");
}

TEST(ClaimCdi, WholeGpusGetTheirOwnNodes) {
  gpuop::testing::SimNode node("dgx-h100", "claim-cdi");
  std::vector<nvml::Gpu> gpus = Gpus(node);
  ASSERT_EQ(gpus.size(), 8u);
  std::vector<ResolvedDevice> devices;
  for (unsigned i : {5u, 2u}) {
    auto d = ResolveDevice(gpus, GpuDeviceName(gpus[i]));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    devices.push_back(*d);
  }
  auto spec = BuildClaimCdiSpec(kUid, devices, SimCdiInputs(gpus), CdiOptions());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, "k8s.gpu.nvidia.com/claim");
  EXPECT_TRUE(cdi::Validate(*spec).ok());
  ASSERT_EQ(spec->devices.size(), 2u);  // no "all"
  for (unsigned i : {2u, 5u}) {
    const std::string name = std::string(kUid) + "-gpu-" + std::to_string(gpus[i].minor);
    auto dev = std::find_if(spec->devices.begin(), spec->devices.end(),
                            [&](const cdi::Device& d) { return d.name == name; });
    ASSERT_NE(dev, spec->devices.end()) << name;
    EXPECT_EQ(NodePaths(dev->edits),
              std::vector<std::string>{"/dev/nvidia" + std::to_string(gpus[i].minor)});
  }
  // The other GPUs are nowhere in the spec; the driver's files are spec-wide.
  const std::string yaml = cdi::ToYaml(*spec);
  EXPECT_EQ(yaml.find("/dev/nvidia" + std::to_string(gpus[0].minor) + "\n"), std::string::npos);
  EXPECT_NE(
      std::find(NodePaths(spec->edits).begin(), NodePaths(spec->edits).end(), "/dev/nvidiactl"),
      NodePaths(spec->edits).end());
  EXPECT_FALSE(spec->edits.mounts.empty());
  // What a runtime reads back is what was built.
  auto parsed = cdi::Parse(yaml);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, *spec);
  EXPECT_EQ(spec->cdi_version, "0.5.0");  // the UID may start with a digit
}

TEST(ClaimCdi, MigDeviceGetsItsCapabilities) {
  gpuop::testing::SimNode node("dgx-a100", "claim-cdi-mig");
  ASSERT_TRUE(sim::SetMigLayout(node.store(), 1, true, {"3g.20gb", "1g.5gb", "1g.5gb"}).ok());
  std::vector<nvml::Gpu> gpus = Gpus(node);
  ASSERT_EQ(gpus.size(), 8u);
  const nvml::Gpu& parent = gpus[1];
  ASSERT_EQ(parent.mig_devices.size(), 3u);
  const nvml::MigDevice& mig = parent.mig_devices[2];
  auto d = ResolveDevice(gpus, MigDeviceName(parent, mig));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto spec = BuildClaimCdiSpec(kUid, {*d}, SimCdiInputs(gpus), CdiOptions());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(cdi::Validate(*spec).ok());
  ASSERT_EQ(spec->devices.size(), 1u);
  EXPECT_EQ(spec->devices[0].name, std::string(kUid) + "-" + MigDeviceName(parent, mig));
  const unsigned minor = static_cast<unsigned>(parent.minor);
  EXPECT_EQ(
      NodePaths(spec->devices[0].edits),
      (std::vector<std::string>{
          "/dev/nvidia" + std::to_string(minor),
          "/dev/nvidia-caps/nvidia-cap" + std::to_string(sim::MigGiCapMinor(minor, mig.gi_id)),
          "/dev/nvidia-caps/nvidia-cap" +
              std::to_string(sim::MigCiCapMinor(minor, mig.gi_id, mig.ci_id))}));
  // The claim's sibling MIG devices are not in it.
  const std::string yaml = cdi::ToYaml(*spec);
  for (unsigned j : {0u, 1u}) {
    const auto& other = parent.mig_devices[j];
    EXPECT_EQ(
        yaml.find("nvidia-cap" + std::to_string(sim::MigGiCapMinor(minor, other.gi_id)) + "\n"),
        std::string::npos);
  }
}

TEST(ClaimCdi, DeviceMissingFromTheInputsIsAnError) {
  gpuop::testing::SimNode node("dgx-h100", "claim-cdi-missing");
  std::vector<nvml::Gpu> gpus = Gpus(node);
  ASSERT_FALSE(gpus.empty());
  auto d = ResolveDevice(gpus, GpuDeviceName(gpus[0]));
  ASSERT_TRUE(d.ok());
  toolkit::CdiInputs inputs = SimCdiInputs({gpus[1]});
  auto spec = BuildClaimCdiSpec(kUid, {*d}, inputs, CdiOptions());
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("is not among the GPUs found for the CDI spec"),
            std::string::npos);
  // The toolkit's own checks still apply: a GPU without its device node.
  inputs = SimCdiInputs(gpus);
  inputs.device_nodes.erase("/dev/nvidia" + std::to_string(gpus[0].minor));
  spec = BuildClaimCdiSpec(kUid, {*d}, inputs, CdiOptions());
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("is missing"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::dra
