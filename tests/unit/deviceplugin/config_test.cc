#include "deviceplugin/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace gpuop::deviceplugin {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/deviceplugin/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

// The error text ParseConfig gives for `text`.
std::string ParseError(std::string_view text, std::string_view origin = "cfg") {
  auto c = ParseConfig(text, origin);
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : c.status().message();
}

TEST(DpConfigTest, VersionOnlyGivesUpstreamDefaults) {
  auto c = ParseConfig("version: v1\n", "cfg");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mig_strategy, MigStrategy::kNone);
  EXPECT_TRUE(c->fail_on_init_error);
  EXPECT_EQ(c->nvidia_driver_root, "/");
  EXPECT_EQ(c->DevRoot(), "/");
  EXPECT_FALSE(c->pass_device_specs);
  EXPECT_EQ(c->device_list, DeviceListStrategy{});
  EXPECT_TRUE(c->device_list.envvar);
  EXPECT_EQ(c->id_strategy, DeviceIdStrategy::kUuid);
  EXPECT_EQ(c->cdi_annotation_prefix, "cdi.k8s.io/");
  EXPECT_EQ(c->container_driver_root, "/driver-root");
  EXPECT_EQ(c->shared_policy, SharedAllocationPolicy::kDistributed);
  EXPECT_EQ(c->sharing.kind, Sharing::Kind::kNone);
  EXPECT_TRUE(c->warnings.empty());
}

TEST(DpConfigTest, ReadsEveryFieldOfTheFullFile) {
  auto c = ParseConfig(Fixture("full.yaml"), "full.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mig_strategy, MigStrategy::kMixed);
  EXPECT_FALSE(c->fail_on_init_error);
  EXPECT_EQ(c->nvidia_driver_root, "/run/nvidia/driver");
  EXPECT_EQ(c->DevRoot(), "/");
  EXPECT_EQ(c->mps_root, "/run/nvidia/mps");
  EXPECT_TRUE(c->gdrcopy && c->gds && c->mofed && c->use_node_feature_api);
  EXPECT_EQ(c->device_discovery_strategy, "nvml");
  EXPECT_TRUE(c->pass_device_specs);
  EXPECT_EQ(c->device_list, (DeviceListStrategy{.envvar = true, .cdi_annotations = true}));
  EXPECT_EQ(c->id_strategy, DeviceIdStrategy::kIndex);
  EXPECT_EQ(c->cdi_annotation_prefix, "cdi.example.com/");
  EXPECT_EQ(c->nvidia_ctk_path, "/usr/local/bin/nvidia-ctk");
  EXPECT_EQ(c->container_driver_root, "/host-driver");
  EXPECT_EQ(c->shared_policy, SharedAllocationPolicy::kPacked);
  EXPECT_TRUE(c->gfd.oneshot && c->gfd.no_timestamp);
  EXPECT_EQ(c->gfd.sleep_interval, "30s");
  EXPECT_EQ(c->gfd.output_file, "/tmp/gfd");
  EXPECT_EQ(c->gfd.machine_type_file, "/tmp/product_name");
  EXPECT_EQ(c->imex.channel_ids, std::vector<int>{0});
  EXPECT_TRUE(c->imex.required);
  // Custom resource naming is ignored, as upstream, with a warning.
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("resources"), std::string::npos);
}

TEST(DpConfigTest, DevRootFollowsTheDriverRootUnlessSet) {
  auto c = ParseConfig("version: v1\nflags: {nvidiaDriverRoot: /run/nvidia/driver}\n", "cfg");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->DevRoot(), "/run/nvidia/driver");
}

TEST(DpConfigTest, TimeSlicingWithRenameByDefault) {
  auto c = ParseConfig(Fixture("time-slicing.yaml"), "ts.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sharing.kind, Sharing::Kind::kTimeSlicing);
  EXPECT_TRUE(c->sharing.rename_by_default);
  EXPECT_TRUE(c->sharing.fail_requests_greater_than_one);
  ASSERT_EQ(c->sharing.resources.size(), 1u);
  const ReplicatedResource& r = c->sharing.resources[0];
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.rename, "nvidia.com/gpu.shared");
  EXPECT_EQ(r.replicas, 4);
  EXPECT_TRUE(r.devices.all);
}

TEST(DpConfigTest, JsonMpsDefaultsFailRequestsToTrueAndQualifiesNames) {
  auto c = ParseConfig(Fixture("mps.json"), "mps.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sharing.kind, Sharing::Kind::kMps);
  EXPECT_TRUE(c->sharing.fail_requests_greater_than_one);
  EXPECT_EQ(c->sharing.resources.at(0).name, "nvidia.com/gpu");
  EXPECT_EQ(c->sharing.resources.at(0).rename, "");
  EXPECT_EQ(c->device_list, (DeviceListStrategy{.envvar = false, .cdi_cri = true}));

  auto relaxed = ParseConfig(
      "version: v1\nsharing:\n  mps:\n    failRequestsGreaterThanOne: false\n"
      "    resources: [{name: nvidia.com/gpu, replicas: 2}]\n",
      "cfg");
  ASSERT_TRUE(relaxed.ok()) << relaxed.status().ToString();
  EXPECT_FALSE(relaxed->sharing.fail_requests_greater_than_one);
}

TEST(DpConfigTest, MpsWinsOverTimeSlicingWithAWarning) {
  auto c = ParseConfig(
      "version: v1\nsharing:\n"
      "  timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 8}]}\n"
      "  mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}\n",
      "cfg");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sharing.kind, Sharing::Kind::kMps);
  EXPECT_EQ(c->sharing.resources.at(0).replicas, 2);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("mps wins"), std::string::npos);
}

TEST(DpConfigTest, DeviceSelectionForms) {
  auto devices = [](const std::string& yaml) -> Result<ReplicaDevices> {
    auto c = ParseConfig(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "      - {name: nvidia.com/gpu, replicas: 2, rename: gpu.shared, devices: " +
            yaml + "}\n",
        "cfg");
    if (!c.ok()) return c.status();
    return c->sharing.resources.at(0).devices;
  };
  EXPECT_TRUE(devices("all")->all);
  EXPECT_EQ(devices("3")->count, 3);
  EXPECT_FALSE(devices("3")->all);
  auto list = devices(
      "[0, \"1:2\", GPU-3b2a5d0e-7f41-4c1a-9e8b-0d6f2c7a1b33, "
      "MIG-5c8f1e2d-4b3a-5c6d-8e9f-0a1b2c3d4e5f]");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->list,
            (std::vector<std::string>{"0", "1:2", "GPU-3b2a5d0e-7f41-4c1a-9e8b-0d6f2c7a1b33",
                                      "MIG-5c8f1e2d-4b3a-5c6d-8e9f-0a1b2c3d4e5f"}));
  EXPECT_EQ(devices("some").status().message(),
            "cfg: sharing.timeSlicing.resources[0].devices: the only string allowed is \"all\", "
            "got \"some\"; or give a count or a list of indexes/UUIDs");
  EXPECT_EQ(devices("0").status().message(),
            "cfg: sharing.timeSlicing.resources[0].devices: a count of devices must be at least "
            "1, got 0");
  EXPECT_EQ(devices("[0, GPU-nope]").status().message(),
            "cfg: sharing.timeSlicing.resources[0].devices[1]: not a device: \"GPU-nope\"; use a "
            "GPU index (0), a MIG index (\"0:1\") or a GPU-/MIG- UUID");
}

TEST(DpConfigTest, UnknownFieldIsAnErrorNamingItsPath) {
  EXPECT_EQ(ParseError(Fixture("bad-unknown-field.yaml"), "config file /etc/dp/config.yaml"),
            "config file /etc/dp/config.yaml: flags.plugin.deviceListStrategyy: unknown field; "
            "the fields here are passDeviceSpecs, deviceListStrategy, deviceIDStrategy, "
            "cdiAnnotationPrefix, nvidiaCTKPath, nvidiaCDIHookPath, containerDriverRoot, "
            "sharedDevicesAllocationPolicy");
  EXPECT_EQ(ParseError("version: v1\nsharing:\n  timeslicing: {}\n"),
            "cfg: sharing.timeslicing: unknown field; the fields here are timeSlicing, mps");
  EXPECT_EQ(ParseError("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                       "      - {name: nvidia.com/gpu, replicas: 2, memoryGB: 24}\n"),
            "cfg: sharing.timeSlicing.resources[0].memoryGB: unknown field; the fields here are "
            "name, rename, devices, replicas");
}

TEST(DpConfigTest, ReplicasBelowTwoIsAnError) {
  EXPECT_EQ(ParseError(Fixture("bad-replicas.yaml"), "bad-replicas.yaml"),
            "bad-replicas.yaml: sharing.timeSlicing.resources[0].replicas: must be at least 2, "
            "got 1");
  EXPECT_EQ(ParseError("version: v1\nsharing: {timeSlicing: {resources: [{name: gpu}]}}\n"),
            "cfg: sharing.timeSlicing.resources[0].replicas: missing; set replicas: 2 or more");
  EXPECT_EQ(ParseError("version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, "
                       "replicas: \"4\"}]}}\n"),
            "cfg: sharing.timeSlicing.resources[0].replicas: must be an integer, got \"4\"");
  EXPECT_EQ(ParseError("version: v1\nsharing: {timeSlicing: {resources: []}}\n"),
            "cfg: sharing.timeSlicing.resources: no resources listed; add one, e.g. {name: "
            "nvidia.com/gpu, replicas: 4}");
}

TEST(DpConfigTest, VersionMustBeV1) {
  EXPECT_EQ(ParseError(Fixture("bad-version.yaml"), "bad-version.yaml"),
            "bad-version.yaml: version: unknown version \"v2\"; this plugin reads v1");
  EXPECT_EQ(ParseError("flags: {migStrategy: single}\n"),
            "cfg: version: missing; add version: v1 at the top");
}

TEST(DpConfigTest, BadValuesNameTheFieldAndTheChoices) {
  EXPECT_EQ(ParseError("version: v1\nflags: {migStrategy: both}\n"),
            "cfg: flags.migStrategy: unknown MIG strategy \"both\"; use none, single or mixed");
  EXPECT_EQ(ParseError("version: v1\nflags: {failOnInitError: \"yes\"}\n"),
            "cfg: flags.failOnInitError: must be true or false, got \"yes\"");
  EXPECT_EQ(ParseError("version: v1\nflags: {plugin: {deviceListStrategy: [envvar, cdi]}}\n"),
            "cfg: flags.plugin.deviceListStrategy: unknown device list strategy \"cdi\"; use "
            "envvar, volume-mounts, cdi-annotations or cdi-cri");
  EXPECT_EQ(ParseError("version: v1\nflags: {plugin: {deviceIDStrategy: serial}}\n"),
            "cfg: flags.plugin.deviceIDStrategy: unknown device ID strategy \"serial\"; use uuid "
            "or index");
  EXPECT_EQ(ParseError("version: v1\nimex: {channelIDs: [1, 2]}\n"),
            "cfg: imex.channelIDs: must be [] or [0], got [1,2]");
  EXPECT_EQ(ParseError("version: v1\nflags: [1]\n"), "cfg: flags: must be a mapping, got [1]");
  EXPECT_NE(ParseError("version: v1\nflags: {migStrategy: [\n").find("cfg: not valid YAML"),
            std::string::npos);
}

TEST(DpConfigTest, ResourceNamesAreQualifiedAndChecked) {
  auto name_error = [](const std::string& name) {
    return ParseError("version: v1\nsharing: {timeSlicing: {resources: [{name: " + name +
                      ", replicas: 2}]}}\n");
  };
  EXPECT_EQ(name_error("GPU"),
            "cfg: sharing.timeSlicing.resources[0].name: resource name \"nvidia.com/GPU\" is not "
            "valid: after \"nvidia.com/\" use lowercase letters, digits, '-' and '.'");
  EXPECT_EQ(name_error(std::string(60, 'a')),
            "cfg: sharing.timeSlicing.resources[0].name: resource name \"nvidia.com/" +
                std::string(60, 'a') + "\" is 71 characters; the limit is 63");
  EXPECT_EQ(ParseError("version: v1\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: "
                       "2}, {name: nvidia.com/gpu, replicas: 3}]}}\n"),
            "cfg: sharing.timeSlicing.resources[1].name: \"nvidia.com/gpu\" is listed twice; keep "
            "one entry per resource");
}

TEST(DpConfigTest, MpsIsRejectedWithMixedMig) {
  EXPECT_EQ(ParseError("version: v1\nflags: {migStrategy: mixed, mpsRoot: /run/nvidia/mps}\n"
                       "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n"),
            "cfg: sharing.mps: MPS sharing is not supported with migStrategy mixed; use "
            "timeSlicing or migStrategy none");
}

TEST(DpConfigTest, ParsesTheDeviceListStrategyCommaList) {
  auto s =
      ParseDeviceListStrategy(std::string_view("envvar, volume-mounts,cdi-annotations,cdi-cri"));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->envvar && s->volume_mounts && s->cdi_annotations && s->cdi_cri);
  EXPECT_FALSE(s->AllCdi());
  auto cdi = ParseDeviceListStrategy(std::string_view("cdi-annotations,cdi-cri"));
  ASSERT_TRUE(cdi.ok());
  EXPECT_TRUE(cdi->AllCdi());
  EXPECT_EQ(DeviceListStrategyString(*cdi), "cdi-annotations,cdi-cri");
  // The file's string form takes the same comma list.
  auto file = ParseConfig(
      "version: v1\nflags: {plugin: {deviceListStrategy: \"envvar,cdi-cri\"}}\n", "cfg");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->device_list, (DeviceListStrategy{.envvar = true, .cdi_cri = true}));
  EXPECT_EQ(ParseDeviceListStrategy(std::string_view("")).status().message(),
            "no device list strategy; give at least one of envvar, volume-mounts, "
            "cdi-annotations, cdi-cri");
}

TEST(DpConfigTest, EnvOverridesTheFile) {
  auto c = ParseConfig(Fixture("full.yaml"), "full.yaml");
  ASSERT_TRUE(c.ok());
  std::map<std::string, std::string> env = {
      {"MIG_STRATEGY", "single"},
      {"FAIL_ON_INIT_ERROR", "TRUE"},
      {"NVIDIA_DRIVER_ROOT", "/"},
      {"NVIDIA_DEV_ROOT", "/host"},
      {"PASS_DEVICE_SPECS", "0"},
      {"DEVICE_LIST_STRATEGY", "volume-mounts,cdi-cri"},
      {"DEVICE_ID_STRATEGY", "uuid"},
      {"CDI_ANNOTATION_PREFIX", "cdi.k8s.io/"},
      {"CONTAINER_DRIVER_ROOT", "/driver-root"},
      {"MPS_ROOT", "/var/mps"},
      {"GDS_ENABLED", "false"},
      {"UNRELATED", "x"},
  };
  ASSERT_TRUE(ApplyEnv(env, &*c).ok());
  EXPECT_EQ(c->mig_strategy, MigStrategy::kSingle);
  EXPECT_TRUE(c->fail_on_init_error);
  EXPECT_EQ(c->nvidia_driver_root, "/");
  EXPECT_EQ(c->DevRoot(), "/host");
  EXPECT_FALSE(c->pass_device_specs);
  EXPECT_EQ(c->device_list,
            (DeviceListStrategy{.envvar = false, .volume_mounts = true, .cdi_cri = true}));
  EXPECT_EQ(c->id_strategy, DeviceIdStrategy::kUuid);
  EXPECT_EQ(c->cdi_annotation_prefix, "cdi.k8s.io/");
  EXPECT_EQ(c->container_driver_root, "/driver-root");
  EXPECT_EQ(c->mps_root, "/var/mps");
  EXPECT_FALSE(c->gds);
  EXPECT_TRUE(c->mofed);  // not in env: the file's value stays
}

TEST(DpConfigTest, EmptyEnvValuesCountAsUnset) {
  Config c;
  c.mig_strategy = MigStrategy::kMixed;
  ASSERT_TRUE(ApplyEnv({{"MIG_STRATEGY", ""}, {"PASS_DEVICE_SPECS", ""}}, &c).ok());
  EXPECT_EQ(c.mig_strategy, MigStrategy::kMixed);
}

TEST(DpConfigTest, BadEnvValuesAreClearErrors) {
  Config c;
  EXPECT_EQ(ApplyEnv({{"MIG_STRATEGY", "all"}}, &c).message(),
            "environment MIG_STRATEGY=\"all\": unknown MIG strategy \"all\"; use none, single or "
            "mixed");
  EXPECT_EQ(ApplyEnv({{"PASS_DEVICE_SPECS", "yes"}}, &c).message(),
            "environment PASS_DEVICE_SPECS=\"yes\": not a boolean; use true or false");
  EXPECT_EQ(ApplyEnv({{"DEVICE_LIST_STRATEGY", "envvar,cdi"}}, &c).message(),
            "environment DEVICE_LIST_STRATEGY=\"envvar,cdi\": unknown device list strategy "
            "\"cdi\"; use envvar, volume-mounts, cdi-annotations or cdi-cri");
  EXPECT_EQ(ApplyEnv({{"DEVICE_ID_STRATEGY", "minor"}}, &c).message(),
            "environment DEVICE_ID_STRATEGY=\"minor\": unknown device ID strategy \"minor\"; use "
            "uuid or index");
}

TEST(DpConfigTest, CliFlagsBeatEnvAndFile) {
  auto c = ResolveConfig(
      "version: v1\nflags:\n  migStrategy: single\n  plugin: {deviceIDStrategy: index}\n", "cfg",
      {{"MIG_STRATEGY", "mixed"}, {"DEVICE_LIST_STRATEGY", "cdi-cri"}, {"PASS_DEVICE_SPECS", "1"}},
      ConfigOverrides{.mig_strategy = "none",
                      .device_list_strategy = "envvar,cdi-annotations",
                      .device_id_strategy = std::nullopt,
                      .pass_device_specs = false});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mig_strategy, MigStrategy::kNone);  // flag > env > file
  EXPECT_EQ(c->device_list, (DeviceListStrategy{.envvar = true, .cdi_annotations = true}));
  EXPECT_EQ(c->id_strategy, DeviceIdStrategy::kIndex);  // file only
  EXPECT_FALSE(c->pass_device_specs);                   // flag false beats env true

  auto env_only = ResolveConfig(std::nullopt, "", {{"MIG_STRATEGY", "mixed"}}, {});
  ASSERT_TRUE(env_only.ok());
  EXPECT_EQ(env_only->mig_strategy, MigStrategy::kMixed);

  Config d;
  EXPECT_EQ(ApplyOverrides({.mig_strategy = "Mixed"}, &d).message(),
            "--mig-strategy \"Mixed\": unknown MIG strategy \"Mixed\"; use none, single or mixed");
  EXPECT_EQ(ApplyOverrides({.device_list_strategy = ""}, &d).message(),
            "--device-list-strategy \"\": no device list strategy; give at least one of envvar, "
            "volume-mounts, cdi-annotations, cdi-cri");
}

TEST(DpConfigTest, ValidateChecksMpsAcrossLayers) {
  const std::string mps = "version: v1\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n";
  auto no_root = ResolveConfig(mps, "cfg", {}, {});
  ASSERT_FALSE(no_root.ok());
  EXPECT_EQ(no_root.status().message(),
            "MPS sharing needs an MPS root; set flags.mpsRoot or MPS_ROOT (the chart uses "
            "/run/nvidia/mps)");
  EXPECT_TRUE(ResolveConfig(mps, "cfg", {{"MPS_ROOT", "/run/nvidia/mps"}}, {}).ok());
  auto mixed = ResolveConfig(mps, "cfg", {{"MPS_ROOT", "/run/nvidia/mps"}},
                             ConfigOverrides{.mig_strategy = "mixed"});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().message(),
            "MPS sharing is not supported with mig-strategy mixed; use time-slicing or "
            "mig-strategy none");
}

// Upstream reads a number as Go's Duration in nanoseconds; gfd's
// ParseDuration must accept what it becomes.
TEST(DpConfigTest, GfdSleepIntervalAsANumberIsNanoseconds) {
  auto c = ParseConfig("version: v1\nflags:\n  gfd:\n    sleepInterval: 30000000000\n", "cfg");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gfd.sleep_interval, "30s");
  c = ParseConfig("version: v1\nflags:\n  gfd:\n    sleepInterval: 5430250000000\n", "cfg");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gfd.sleep_interval, "1h30m30s250ms");
  EXPECT_FALSE(c->gfd.output_file.has_value());  // not in the file: gfd's own default
  const std::string tiny = ParseError("version: v1\nflags:\n  gfd:\n    sleepInterval: 999\n");
  EXPECT_NE(tiny.find("flags.gfd.sleepInterval"), std::string::npos) << tiny;
  EXPECT_NE(tiny.find("\"60s\""), std::string::npos) << tiny;
}

}  // namespace
}  // namespace gpuop::deviceplugin
