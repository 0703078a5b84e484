// The operator's rendered objects for the Helm-default ClusterPolicy
// (deploy/samples/clusterpolicy.yaml), kept as reviewed golden files, one
// per component (tests/fixtures/operator/golden/<component>.json): a change
// to what the operator puts on a cluster shows up in review as a diff.
// Rewrite them with GPUOP_UPDATE_GOLDEN=1 after checking every change.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/files.h"
#include "base/yaml_json.h"
#include "operator/render.h"

namespace gpuop::op {
namespace {

const std::string kGoldenDir = std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/operator/golden/";

// `enable`: spec keys of components the default leaves off, turned on.
RenderInput HelmDefault(Json& owner, Policy& policy, OperatorEnv& env,
                        const std::vector<std::string>& enable = {}) {
  owner = YamlToJson(
      YAML::LoadFile(std::string(GPUOP_SOURCE_DIR) + "/deploy/samples/clusterpolicy.yaml"));
  owner["metadata"]["uid"] = "5f1c2a3e-0d7b-4c8e-9a61-2b3c4d5e6f70";  // as the API server sets it
  for (const std::string& key : enable) owner["spec"][key]["enabled"] = true;
  env.gpuop_image = "ghcr.io/gpuop/gpuop:1.2.3";
  auto p = ParsePolicy(owner, env);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) policy = *p;
  return RenderInput{policy, env, owner, {{"ubuntu", "22.04"}, {"rhel", "9.4"}}, true};
}

std::string Text(const std::vector<RenderedObject>& objects) {
  Json all = Json::array();
  for (const RenderedObject& r : objects) all.push_back(r.object);
  return all.dump(2) + "\n";
}

void ExpectGolden(const std::vector<RenderedObject>& objects, const std::string& name) {
  const std::string path = kGoldenDir + name + ".json";
  const std::string got = Text(objects);
  const char* update = std::getenv("GPUOP_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    ASSERT_TRUE(MakeDirs(kGoldenDir).ok());
    ASSERT_TRUE(WriteFileAtomic(path, got).ok()) << path;
    return;
  }
  auto want = ReadFile(path);
  ASSERT_TRUE(want.ok()) << want.status().ToString()
                         << " (create it with GPUOP_UPDATE_GOLDEN=1, then review it)";
  EXPECT_EQ(got, *want) << "the operator renders " << name << " differently from its golden file "
                        << path
                        << "; if the change is intended, rerun with GPUOP_UPDATE_GOLDEN=1 and "
                           "review the diff";
}

TEST(GoldenManifestsTest, HelmDefaultClusterPolicy) {
  Json owner;
  Policy policy;
  OperatorEnv env;
  const RenderInput in = HelmDefault(owner, policy, env);
  ExpectGolden(RenderPrerequisites(in), "prerequisites");
  ExpectGolden(RenderNodeDiscovery(in), "node-discovery");
  for (Component c : kAllComponents) {
    SCOPED_TRACE(ComponentName(c));
    ExpectGolden(RenderComponent(c, in), ComponentName(c));
  }
}

// The components the default leaves off, each as it renders once enabled.
TEST(GoldenManifestsTest, ComponentsTheDefaultLeavesOff) {
  const std::pair<Component, std::string> kOff[] = {
      {Component::kDraDriver, "draDriver"}, {Component::kNodeStatusExporter, "nodeStatusExporter"}};
  for (const auto& [c, key] : kOff) {
    SCOPED_TRACE(key);
    Json owner;
    Policy policy;
    OperatorEnv env;
    const RenderInput in = HelmDefault(owner, policy, env, {key});
    std::vector<RenderedObject> objects = RenderComponent(c, in);
    EXPECT_FALSE(objects.empty());
    ExpectGolden(objects, ComponentName(c) + "-enabled");
  }
}

}  // namespace
}  // namespace gpuop::op
