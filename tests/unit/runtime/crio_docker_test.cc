#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/crio.h"
#include "runtime/docker.h"
#include "runtime/toml_util.h"
#include "tree.h"

namespace gpuop::runtime {
namespace {

using testing::Apply;
using testing::ExpectGolden;
using testing::FixtureDir;
using testing::Get;
using testing::ReadTree;
using testing::Tree;

const std::string kCrio(kCrioDropInPath);
const std::string kDaemon(kDockerConfigPath);
const std::string kRecord = kDaemon + std::string(kDockerRecordSuffix);

ConfigureOptions Opts(RuntimeKind kind, bool cdi, bool set_default, bool revert = false) {
  ConfigureOptions o;
  o.runtime = kind;
  o.cdi_enabled = cdi;
  o.set_as_default = set_default;
  o.revert = revert;
  return o;
}

Tree Crio(Tree t, const ConfigureOptions& o) {
  auto plan = PlanCrio({kCrio, Get(t, kCrio), "/usr/bin/runc"}, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) Apply(*plan, &t);
  return t;
}

Tree Docker(Tree t, const ConfigureOptions& o, std::string runc = "/usr/bin/runc") {
  auto plan = PlanDocker({kDaemon, Get(t, kDaemon), Get(t, kRecord), runc}, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) Apply(*plan, &t);
  return t;
}

TEST(Crio, DropInMatchesGoldenAndRevertRestores) {
  const Tree original = ReadTree(FixtureDir("crio") / "root");
  Tree t = Crio(original, Opts(RuntimeKind::kCrio, true, true));
  ExpectGolden(t, FixtureDir("crio") / "want");
  auto d = ParseToml(kCrio, t[kCrio]);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)["crio"]["runtime"]["default_runtime"].value<std::string>(), "nvidia");
  auto h = (*d)["crio"]["runtime"]["runtimes"]["nvidia"];
  EXPECT_EQ(h["runtime_path"].value<std::string>(), "/usr/bin/runc");
  EXPECT_EQ(h["runtime_type"].value<std::string>(), "oci");
  EXPECT_EQ(Crio(t, Opts(RuntimeKind::kCrio, true, true)), t);  // idempotent
  EXPECT_EQ(Crio(t, Opts(RuntimeKind::kCrio, false, false, true)), original);
}

// When crio.conf.d (and here /etc/crio) did not exist, configure creates
// them, records that in the drop-in, and --revert removes them again, child
// first (each is left when not empty).
TEST(Crio, RevertRemovesTheDirectoryConfigureCreated) {
  CrioInputs in{kCrio, std::nullopt, "/usr/bin/runc", {"/etc/crio/crio.conf.d", "/etc/crio"}};
  auto plan = PlanCrio(in, Opts(RuntimeKind::kCrio, false, false));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->changes.size(), 1u);
  const std::string drop_in = *plan->changes[0].after;
  EXPECT_NE(drop_in.find("# gpuop created directory: /etc/crio/crio.conf.d\n"
                         "# gpuop created directory: /etc/crio\n"),
            std::string::npos)
      << drop_in;
  // A second run keeps the record although the directory exists by then.
  auto again =
      PlanCrio({kCrio, drop_in, "/usr/bin/runc", {}}, Opts(RuntimeKind::kCrio, false, false));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->changes.empty());
  auto revert =
      PlanCrio({kCrio, drop_in, "/usr/bin/runc", {}}, Opts(RuntimeKind::kCrio, false, false, true));
  ASSERT_TRUE(revert.ok());
  ASSERT_EQ(revert->changes.size(), 3u);
  EXPECT_EQ(revert->changes[0].path, kCrio);
  EXPECT_FALSE(revert->changes[0].after.has_value());
  EXPECT_EQ(revert->changes[1].path, "/etc/crio/crio.conf.d");
  EXPECT_TRUE(revert->changes[1].directory);
  EXPECT_EQ(revert->changes[2].path, "/etc/crio");  // the parent after its child
  EXPECT_TRUE(revert->changes[2].directory);
}

TEST(Crio, WithoutSetAsDefaultLeavesDefaultRuntimeAlone) {
  Tree t = Crio({}, Opts(RuntimeKind::kCrio, false, false));
  EXPECT_EQ(t[kCrio].find("default_runtime"), std::string::npos);
}

TEST(Crio, RefusesAForeignDropIn) {
  auto plan = PlanCrio({kCrio, std::string("[crio.runtime]\n"), ""},
                       Opts(RuntimeKind::kCrio, false, false));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
}

TEST(Docker, DaemonJsonMatchesGoldenAndRevertRestoresTheOriginalBytes) {
  const Tree original = ReadTree(FixtureDir("docker") / "root");
  Tree t = Docker(original, Opts(RuntimeKind::kDocker, true, true));
  ExpectGolden(t, FixtureDir("docker") / "want");
  auto j = nlohmann::ordered_json::parse(t[kDaemon]);
  EXPECT_EQ(j["runtimes"]["nvidia"]["path"], "/usr/bin/runc");
  EXPECT_EQ(j["default-runtime"], "nvidia");
  EXPECT_EQ(j["features"]["cdi"], true);
  EXPECT_EQ(j["registry-mirrors"][0], "https://mirror.example.com");
  EXPECT_EQ(j.begin().key(), "log-driver");                         // the user's key order is kept
  EXPECT_EQ(Docker(t, Opts(RuntimeKind::kDocker, true, true)), t);  // idempotent
  EXPECT_EQ(Docker(t, Opts(RuntimeKind::kDocker, false, false, true)), original);
}

TEST(Docker, RevertAfterAUserEditRemovesOnlyGpuopKeys) {
  Tree original{{kDaemon, "{\"default-runtime\": \"runc\", \"features\": {\"buildkit\": true}}"}};
  Tree t = Docker(original, Opts(RuntimeKind::kDocker, true, true));
  auto j = nlohmann::ordered_json::parse(t[kDaemon]);
  j["debug"] = true;
  t[kDaemon] = j.dump();
  Tree reverted = Docker(t, Opts(RuntimeKind::kDocker, false, false, true));
  auto r = nlohmann::ordered_json::parse(reverted[kDaemon]);
  EXPECT_EQ(r,
            nlohmann::ordered_json::parse(
                R"({"default-runtime": "runc", "features": {"buildkit": true}, "debug": true})"));
  EXPECT_FALSE(reverted.count(kRecord));
}

TEST(Docker, RevertNeverLeavesTheRemovedRuntimeAsDefault) {
  Tree t = Docker({}, Opts(RuntimeKind::kDocker, false, true));
  t[kDaemon].insert(1, "\"debug\": true, ");  // edited since: key-level revert
  Tree reverted = Docker(t, Opts(RuntimeKind::kDocker, false, false, true));
  auto r = nlohmann::ordered_json::parse(reverted[kDaemon]);
  EXPECT_FALSE(r.contains("default-runtime"));
  EXPECT_FALSE(r.contains("runtimes"));
  // An absent daemon.json comes back absent when unchanged.
  Tree fresh = Docker({}, Opts(RuntimeKind::kDocker, true, true));
  EXPECT_EQ(Docker(fresh, Opts(RuntimeKind::kDocker, false, false, true)), Tree{});
}

TEST(Docker, MalformedJsonIsOneErrorWithFileAndLine) {
  Tree t{{kDaemon, "{\n  \"a\": 1,\n  \"b\": ,\n}\n"}};
  auto plan = PlanDocker({kDaemon, Get(t, kDaemon), std::nullopt, ""},
                         Opts(RuntimeKind::kDocker, false, false));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message().rfind("/etc/docker/daemon.json:3:8: ", 0), 0u)
      << plan.status().message();
  EXPECT_EQ(plan.status().message().find('\n'), std::string::npos);
}

TEST(Docker, RuntimePathFallsBackToRuncOnPath) {
  Tree t = Docker({}, Opts(RuntimeKind::kDocker, false, false), "");
  EXPECT_EQ(nlohmann::json::parse(t[kDaemon])["runtimes"]["nvidia"]["path"], "runc");
}

// Found by tests/fuzz: nlohmann's parser ends at a NUL, so bytes after one
// (not UTF-8 here) went into the record, whose JSON then could not be written.
TEST(Docker, DaemonJsonWithANulByteIsRejected) {
  Tree t{{kDaemon, std::string("{}\n\0\x8a", 5)}};
  auto plan = PlanDocker({kDaemon, Get(t, kDaemon), Get(t, kRecord), "/usr/bin/runc"},
                         Opts(RuntimeKind::kDocker, true, true));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            kDaemon + ":2:1: a NUL byte (fix the file; nothing was written)");
}

// Found by tests/fuzz: a number past a double's range is nlohmann's
// out_of_range, not a parse_error, and went uncaught.
TEST(Docker, DaemonJsonWithAHugeNumberIsAnError) {
  Tree t{{kDaemon, "{\"log-opts\": 1e999}"}};
  auto plan = PlanDocker({kDaemon, Get(t, kDaemon), Get(t, kRecord), "/usr/bin/runc"},
                         Opts(RuntimeKind::kDocker, true, true));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("number overflow"), std::string::npos)
      << plan.status().message();
}

}  // namespace
}  // namespace gpuop::runtime
