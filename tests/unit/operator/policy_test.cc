#include "operator/policy.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "base/yaml_json.h"

namespace gpuop::op {
namespace {

Json LoadSample(const std::string& name) {
  return YamlToJson(YAML::LoadFile(std::string(GPUOP_SOURCE_DIR) + "/deploy/samples/" + name));
}

OperatorEnv Env() {
  OperatorEnv env;
  env.gpuop_image = "ghcr.io/gpuop/gpuop:1.2.3";
  return env;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(PolicyTest, HelmDefaultsParse) {
  auto p = ParsePolicy(LoadSample("clusterpolicy.yaml"), Env());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Get(Component::kDriver).image, "nvcr.io/nvidia/driver:595.91.07");
  EXPECT_EQ(p->Get(Component::kDevicePlugin).image, "ghcr.io/gpuop/gpuop:1.2.3");
  EXPECT_TRUE(p->Enabled(Component::kDcgmExporter));
  EXPECT_FALSE(p->Enabled(Component::kNodeStatusExporter));
  EXPECT_EQ(p->mig_strategy, "single");
  EXPECT_TRUE(p->cdi_enabled);
  EXPECT_EQ(p->daemonsets.priority_class_name, "system-node-critical");
  EXPECT_TRUE(p->daemonsets.tolerations_set);
  EXPECT_EQ(p->daemonsets.max_unavailable, "1");
  // Only what the chart turns on that gpuop does not do. Not the images
  // NVIDIA's chart names for the components gpuop runs with its own image,
  // nor the empty config names and sandbox components it always writes.
  EXPECT_EQ(p->ignored_fields,
            (std::vector<std::string>{"spec.dcgmExporter.serviceMonitor.enabled"}));
}

// The ClusterPolicy NVIDIA's own chart renders for the seed's install command
// (--set driver.version=535.129.03 ...), as a user applies it unchanged.
TEST(PolicyTest, NvidiaChartSeedParses) {
  auto p = ParsePolicy(YamlToJson(YAML::LoadFile(std::string(GPUOP_SOURCE_DIR) +
                                                 "/tests/fixtures/clusterpolicy/nvidia-v26.7.0/"
                                                 "clusterpolicy-seed-flags.yaml")),
                       Env());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Get(Component::kDriver).image, "nvcr.io/nvidia/driver:535.129.03");
  for (Component c : {Component::kContainerToolkit, Component::kDcgmExporter,
                      Component::kMigManager, Component::kDevicePlugin}) {
    EXPECT_TRUE(p->Enabled(c)) << ComponentName(c);
    EXPECT_EQ(p->Get(c).image, "ghcr.io/gpuop/gpuop:1.2.3") << ComponentName(c);
  }
  EXPECT_EQ(p->ignored_fields,
            (std::vector<std::string>{"spec.dcgmExporter.serviceMonitor.enabled"}));
}

// NVIDIA's image of a component gpuop runs itself is replaced silently at any
// version; a mirror or a fork is reported.
TEST(PolicyTest, ImagesOtherThanNvidiasAreReported) {
  Json nvidias = {
      {"repository", "nvcr.io/nvidia"}, {"image", "k8s-device-plugin"}, {"version", "v0.20.0"}};
  Json cp = {{"spec",
              {{"driver",
                {{"enabled", false},
                 {"manager",
                  {{"repository", "nvcr.io/nvidia/cloud-native"},
                   {"image", "k8s-driver-manager"},
                   {"version", "v0.11.0"}}}}},
               {"devicePlugin", nvidias},
               {"gfd", nvidias},
               {"validator",
                {{"repository", "nvcr.io/nvidia"}, {"image", "gpu-operator"}, {"version", "v9"}}},
               {"migManager", {{"repository", "mirror.local/nvidia"}}}}}};
  cp["spec"]["gfd"]["version"] = "v0.17.0";
  cp["spec"]["dcgmExporter"] = {
      {"repository", "registry.local/fork"}, {"image", "dcgm-exporter"}, {"version", "v1"}};
  auto p = ParsePolicy(cp, Env());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ignored_fields,
            (std::vector<std::string>{"spec.dcgmExporter.repository", "spec.dcgmExporter.image",
                                      "spec.dcgmExporter.version", "spec.migManager.repository"}));
  EXPECT_EQ(p->Get(Component::kGpuFeatureDiscovery).image, "ghcr.io/gpuop/gpuop:1.2.3");
}

// Each field gpuop keeps but does not act on is reported once set, and not
// while it holds the "off" or empty value NVIDIA's chart writes.
TEST(PolicyTest, FieldsGpuopDoesNotActOnAreReportedWhenSet) {
  struct Case {
    const char* path;  // under spec
    Json set;
    Json unset;
  };
  const Case cases[] = {
      {"operator.metrics.serviceMonitor.enabled", true, false},
      {"driver.useNvidiaDriverCRD", true, false},
      {"driver.usePrecompiled", true, false},
      {"driver.useOpenKernelModules", true, false},
      {"driver.secretEnv", "driver-env", ""},
      {"driver.repoConfig.configMapName", "repo-config", ""},
      {"driver.certConfig.name", "certs", ""},
      {"driver.licensingConfig.configMapName", "licensing", ""},
      {"driver.licensingConfig.secretName", "licensing", ""},
      {"driver.kernelModuleConfig.name", "kmod-params", ""},
      {"driver.virtualTopology.config", "topology", ""},
      {"driver.rdma.enabled", true, false},
      {"driver.livenessProbe", {{"periodSeconds", 30}}, Json::object()},
      {"driver.readinessProbe", {{"periodSeconds", 30}}, Json::object()},
      {"dcgmExporter.serviceMonitor.enabled", true, false},
      {"dcgmExporter.enablePodLabels", true, false},
      {"dcgmExporter.enablePodUID", true, false},
      {"dcgmExporter.podLabelAllowlistRegex", Json::array({"^app$"}), Json::array()},
      {"dcgmExporter.hpcJobMapping.enabled", true, false},
      {"dcgmExporter.annotations", {{"team", "ml"}}, Json::object()},
      {"cdi.nriPluginEnabled", true, false},
  };
  for (const Case& c : cases) {
    std::string pointer = std::string("/spec/") + c.path;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    Json cp = {{"spec", {{"driver", {{"enabled", false}}}}}};
    cp[Json::json_pointer(pointer)] = c.unset;
    auto p = ParsePolicy(cp, Env());
    ASSERT_TRUE(p.ok()) << c.path << ": " << p.status().ToString();
    EXPECT_TRUE(p->ignored_fields.empty()) << c.path << " reported while unset";
    cp[Json::json_pointer(pointer)] = c.set;
    p = ParsePolicy(cp, Env());
    ASSERT_TRUE(p.ok()) << c.path << ": " << p.status().ToString();
    EXPECT_EQ(p->ignored_fields, std::vector<std::string>{"spec." + std::string(c.path)});
  }
}

TEST(PolicyTest, MinimalHasDefaults) {
  auto p = ParsePolicy(LoadSample("clusterpolicy-minimal.yaml"), Env());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->Enabled(Component::kDriver));
  for (Component c :
       {Component::kContainerToolkit, Component::kOperatorValidator, Component::kDevicePlugin,
        Component::kDcgmExporter, Component::kGpuFeatureDiscovery, Component::kMigManager}) {
    EXPECT_TRUE(p->Enabled(c)) << ComponentName(c);
  }
  EXPECT_EQ(p->mig_manager_config_default, "all-disabled");
  EXPECT_EQ(p->toolkit_install_dir, "/usr/local/nvidia");
  EXPECT_EQ(p->daemonsets.update_strategy, "RollingUpdate");
  EXPECT_TRUE(p->ignored_fields.empty());
}

TEST(PolicyTest, ImageResolution) {
  Json cp = {
      {"spec",
       {{"driver", {{"repository", "r.io/x"}, {"image", "driver"}, {"version", "sha256:ab"}}}}}};
  auto p = ParsePolicy(cp, Env());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Get(Component::kDriver).image, "r.io/x/driver@sha256:ab");

  cp["spec"]["driver"] = {{"image", "mirror.local/nv/driver:550"}};
  EXPECT_EQ(ParsePolicy(cp, Env())->Get(Component::kDriver).image, "mirror.local/nv/driver:550");

  cp["spec"]["driver"] = Json::object();
  auto missing = ParsePolicy(cp, Env());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("DRIVER_IMAGE"), std::string::npos);

  OperatorEnv env = Env();
  env.driver_image_fallback = "nvcr.io/nvidia/driver:580";
  EXPECT_EQ(ParsePolicy(cp, env)->Get(Component::kDriver).image, "nvcr.io/nvidia/driver:580");

  OperatorEnv no_image;
  Json no_driver = {{"spec", {{"driver", {{"enabled", false}}}}}};
  auto r = ParsePolicy(no_driver, no_image);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GPUOP_IMAGE"), std::string::npos);
}

TEST(PolicyTest, BadValuesNameTheField) {
  Json cp = {{"spec", {{"driver", {{"enabled", false}}}, {"mig", {{"strategy", "triple"}}}}}};
  auto r = ParsePolicy(cp, Env());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("spec.mig.strategy"), std::string::npos);
  cp["spec"]["mig"]["strategy"] = "mixed";
  cp["spec"]["daemonsets"] = {{"updateStrategy", "Sometimes"}};
  r = ParsePolicy(cp, Env());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("spec.daemonsets.updateStrategy"), std::string::npos);
}

// The component settings render.cc acts on are read once, typed, with
// NVIDIA's defaults where they are absent or "" (as the chart writes them).
TEST(PolicyTest, ComponentSettingsAreTypedWithDefaults) {
  auto d = ParsePolicy(LoadSample("clusterpolicy-minimal.yaml"), Env());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->driver.kernel_module_type, "auto");
  EXPECT_EQ(d->driver.startup_probe.initial_delay_seconds, 60);
  EXPECT_EQ(d->driver.startup_probe.period_seconds, 10);
  EXPECT_EQ(d->driver.startup_probe.timeout_seconds, 60);
  EXPECT_EQ(d->driver.startup_probe.failure_threshold, 120);
  EXPECT_EQ(d->driver.manager.image_pull_policy, "IfNotPresent");
  EXPECT_TRUE(d->driver.manager.env.empty());
  EXPECT_FALSE(d->dcgm_exporter.host_pid);
  EXPECT_TRUE(d->dcgm_exporter.pod_labels.empty());
  EXPECT_EQ(d->dcgm_exporter.service_type, "");
  EXPECT_TRUE(d->validator_check_env.empty());
  EXPECT_EQ(d->device_plugin_mps_root, "");
  EXPECT_EQ(d->mig_manager_gpu_clients_config, "");
  EXPECT_FALSE(d->Get(Component::kDevicePlugin).host_network);

  Json cp = Json::parse(R"({"spec": {
    "driver": {"enabled": false, "kernelModuleType": "", "startupProbe": {"periodSeconds": 2},
               "manager": {"imagePullPolicy": "Always", "imagePullSecrets": ["regcred"],
                           "env": [{"name": "X", "value": "1"}]}},
    "dcgmExporter": {"hostPID": true, "podLabels": {"scrape": "yes"},
                     "podAnnotations": {"a": "b"},
                     "service": {"type": "NodePort", "internalTrafficPolicy": ""}},
    "validator": {"cuda": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}},
    "devicePlugin": {"hostNetwork": true, "mps": {"root": "/run/nvidia/mps"}},
    "migManager": {"gpuClientsConfig": {"name": "clients"}}}})");
  auto p = ParsePolicy(cp, Env());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->driver.kernel_module_type, "auto");  // "" is unset
  EXPECT_EQ(p->driver.startup_probe.period_seconds, 2);
  EXPECT_EQ(p->driver.startup_probe.initial_delay_seconds, 60);
  EXPECT_EQ(p->driver.manager.image_pull_policy, "Always");
  EXPECT_EQ(p->driver.manager.image_pull_secrets, (std::vector<std::string>{"regcred"}));
  EXPECT_EQ(p->driver.manager.env, Json::parse(R"([{"name": "X", "value": "1"}])"));
  EXPECT_TRUE(p->dcgm_exporter.host_pid);
  EXPECT_EQ(p->dcgm_exporter.pod_labels, (std::map<std::string, std::string>{{"scrape", "yes"}}));
  EXPECT_EQ(p->dcgm_exporter.pod_annotations, (std::map<std::string, std::string>{{"a", "b"}}));
  EXPECT_EQ(p->dcgm_exporter.service_type, "NodePort");
  EXPECT_EQ(p->dcgm_exporter.service_internal_traffic_policy, "");
  ASSERT_EQ(p->validator_check_env.size(), 1u);
  EXPECT_EQ(p->validator_check_env.at("cuda")[0]["name"], "WITH_WORKLOAD");
  EXPECT_TRUE(p->Get(Component::kDevicePlugin).host_network);
  EXPECT_FALSE(p->Get(Component::kDcgmExporter).host_network);
  EXPECT_EQ(p->device_plugin_mps_root, "/run/nvidia/mps");
  EXPECT_EQ(p->mig_manager_gpu_clients_config, "clients");
}

// A setting of the wrong type is an error naming it, not a silent default.
TEST(PolicyTest, ComponentSettingsOfTheWrongTypeNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"driver": {"enabled": false, "startupProbe": {"periodSeconds": "10"}}})",
       "spec.driver.startupProbe.periodSeconds: want a whole number of seconds"},
      {R"({"driver": {"enabled": false, "manager": {"env": {"X": "1"}}}})",
       "spec.driver.manager.env: want a list"},
      {R"({"driver": {"enabled": false, "manager": {"imagePullSecrets": "regcred"}}})",
       "spec.driver.manager.imagePullSecrets: want a list of strings"},
      {R"({"driver": {"enabled": false}, "dcgmExporter": {"hostPID": "true"}})",
       "spec.dcgmExporter.hostPID: want true or false"},
      {R"({"driver": {"enabled": false}, "dcgmExporter": {"podLabels": {"a": 1}}})",
       "spec.dcgmExporter.podLabels: want an object of strings"},
      {R"({"driver": {"enabled": false}, "validator": {"plugin": {"env": "X=1"}}})",
       "spec.validator.plugin.env: want a list"},
      {R"({"driver": {"enabled": false}, "devicePlugin": {"hostNetwork": 1}})",
       "spec.devicePlugin.hostNetwork: want true or false"},
      {R"({"driver": {"enabled": false}, "migManager": {"gpuClientsConfig": {"name": 3}}})",
       "spec.migManager.gpuClientsConfig.name: want a string"},
  };
  for (const auto& [spec, want] : cases) {
    auto r = ParsePolicy(Json{{"spec", Json::parse(spec)}}, Env());
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << spec << ": " << r.status().message();
  }
}

TEST(PolicyTest, ValidatorCannotBeDisabledAndIgnoredFieldsListed) {
  Json cp = {
      {"spec",
       {{"driver", {{"enabled", false}, {"usePrecompiled", true}, {"rdma", {{"enabled", true}}}}},
        {"validator", {{"enabled", false}}},
        {"dcgm", {{"enabled", true}}},
        {"gds", {{"enabled", false}}},
        {"sandboxWorkloads", {{"enabled", true}}},
        {"vfioManager", {{"enabled", true}}}}}};
  auto p = ParsePolicy(cp, Env());
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->Enabled(Component::kOperatorValidator));
  for (const char* f :
       {"spec.driver.usePrecompiled", "spec.driver.rdma.enabled", "spec.dcgm.enabled",
        "spec.sandboxWorkloads.enabled", "spec.vfioManager.enabled"}) {
    EXPECT_TRUE(Contains(p->ignored_fields, f)) << f;
  }
  EXPECT_FALSE(Contains(p->ignored_fields, "spec.gds.enabled"));
}

TEST(PolicyTest, ActivePolicyIsOldestThenLowestName) {
  auto cp = [](const char* name, const char* created) {
    return Json{{"metadata", {{"name", name}, {"creationTimestamp", created}}}};
  };
  EXPECT_EQ(ActivePolicyIndex({}), -1);
  EXPECT_EQ(ActivePolicyIndex({cp("b", "2026-01-02T00:00:00Z"), cp("a", "2026-01-03T00:00:00Z")}),
            0);
  EXPECT_EQ(ActivePolicyIndex({cp("b", "2026-01-02T00:00:00Z"), cp("a", "2026-01-02T00:00:00Z")}),
            1);
}

}  // namespace
}  // namespace gpuop::op
