#include "runtime/containerd.h"

#include <gtest/gtest.h>

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

const std::string kMain(kContainerdConfigPath);
const std::string kDropIn(kContainerdDropInPath);

ContainerdInputs InputsFrom(const Tree& t) {
  ContainerdInputs in;
  in.config_path = kMain;
  in.drop_in_path = kDropIn;
  in.main = Get(t, kMain);
  in.drop_in = Get(t, kDropIn);
  for (const auto& [path, bytes] : t) {  // the fixtures import conf.d/*.toml when they import
    if (path.rfind("/etc/containerd/conf.d/", 0) == 0 && path != kDropIn) {
      in.imported.push_back({path, bytes});
    }
  }
  return in;
}

ConfigureOptions Opts(bool cdi, bool set_default, bool revert = false) {
  ConfigureOptions o;
  o.runtime = RuntimeKind::kContainerd;
  o.cdi_enabled = cdi;
  o.set_as_default = set_default;
  o.revert = revert;
  return o;
}

Tree Configure(Tree t, const ConfigureOptions& o) {
  auto plan = PlanContainerd(InputsFrom(t), o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) Apply(*plan, &t);
  return t;
}

class ContainerdGolden : public ::testing::TestWithParam<std::string> {};

// Each fixture: configure --cdi-enabled --set-as-default gives the golden
// files; running it again changes nothing; --revert gives back the exact
// original bytes of every file.
TEST_P(ContainerdGolden, ConfigureMatchesGoldenAndRevertRestoresBytes) {
  const Tree original = ReadTree(FixtureDir(GetParam()) / "root");
  Tree configured = Configure(original, Opts(true, true));
  ExpectGolden(configured, FixtureDir(GetParam()) / "want");

  auto again = PlanContainerd(InputsFrom(configured), Opts(true, true));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->changes.empty()) << RenderPlanDiff(*again);

  Tree reverted = Configure(configured, Opts(false, false, true));
  EXPECT_EQ(reverted, original);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ContainerdGolden,
                         ::testing::Values("containerd-v2", "containerd-v3", "containerd-imports",
                                           "containerd-none"));

TEST(Containerd, DropInKeepsEveryCriSettingOfAVersion2Config) {
  Tree t = Configure(ReadTree(FixtureDir("containerd-v2") / "root"), Opts(true, false));
  auto drop_in = ParseToml(kDropIn, t[kDropIn]);
  ASSERT_TRUE(drop_in.ok()) << drop_in.status().ToString();
  const toml::table& d = *drop_in;
  auto cri = d["plugins"]["io.containerd.grpc.v1.cri"];
  EXPECT_EQ(d["version"].value<int64_t>(), 2);
  EXPECT_EQ(cri["sandbox_image"].value<std::string>(), "registry.k8s.io/pause:3.9");
  EXPECT_EQ(cri["cni"]["bin_dir"].value<std::string>(), "/opt/cni/custom-bin");
  EXPECT_EQ(cri["cni"]["conf_dir"].value<std::string>(), "/etc/cni/custom.d");
  EXPECT_EQ(cri["registry"]["mirrors"]["docker.io"]["endpoint"][0].value<std::string>(),
            "https://mirror.example.com");
  EXPECT_EQ(cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"].value<bool>(), true);
  // The handler is runc with the default runtime's options.
  auto nvidia = cri["containerd"]["runtimes"]["nvidia"];
  EXPECT_EQ(nvidia["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ(nvidia["options"]["SystemdCgroup"].value<bool>(), true);
  EXPECT_EQ(nvidia["options"]["BinaryName"].value<std::string>(), "/usr/bin/runc");
  // Without --set-as-default the default runtime stays runc.
  EXPECT_EQ(cri["containerd"]["default_runtime_name"].value<std::string>(), "runc");
  EXPECT_EQ(cri["enable_cdi"].value<bool>(), true);
  EXPECT_EQ(cri["cdi_spec_dirs"][1].value<std::string>(), "/var/run/cdi");
}

TEST(Containerd, Version2DropInDefinesRuncWhenTheMainConfigHasNoRuntimes) {
  Tree t{{kMain, "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nbin_dir = \"/x\"\n"}};
  t = Configure(t, Opts(false, false));
  auto d = ParseToml(kDropIn, t[kDropIn]);
  ASSERT_TRUE(d.ok());
  auto runtimes = (*d)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"];
  EXPECT_EQ(runtimes["runc"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ(runtimes["nvidia"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_EQ((*d)["plugins"]["io.containerd.grpc.v1.cri"]["cni"]["bin_dir"].value<std::string>(),
            "/x");
}

TEST(Containerd, Version3DropInHoldsOnlyGpuopKeys) {
  Tree t = Configure(ReadTree(FixtureDir("containerd-v3") / "root"), Opts(false, false));
  auto d = ParseToml(kDropIn, t[kDropIn]);
  ASSERT_TRUE(d.ok());
  auto cri = (*d)["plugins"]["io.containerd.cri.v1.runtime"];
  EXPECT_FALSE(cri["cni"]);
  EXPECT_FALSE(cri["containerd"]["runtimes"]["runc"]);
  EXPECT_FALSE(cri["containerd"]["default_runtime_name"]);
  EXPECT_EQ(cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"].value<bool>(),
            true);
}

TEST(Containerd, AppendsToAnExistingImportsArrayAndRevertRemovesOnlyThat) {
  struct Case {
    std::string before, after;
  };
  const std::string p = "\"/etc/containerd/conf.d/99-nvidia.toml\"";
  for (const Case& c : std::vector<Case>{
           {"version = 2\nimports = [\"/etc/a.toml\"]\n",
            "version = 2\nimports = [\"/etc/a.toml\", " + p + "]\n"},
           {"version = 2\nimports = []\n", "version = 2\nimports = [" + p + "]\n"},
           {"version = 2\nimports = [\n  \"/etc/a.toml\", # a\n]\n",
            "version = 2\nimports = [\n  \"/etc/a.toml\", " + p + ", # a\n]\n"},
           {"version = 2\nimports = [ '/etc/b.toml' ]  # ]\n",
            "version = 2\nimports = [ '/etc/b.toml', " + p + " ]  # ]\n"},
       }) {
    Tree t{{kMain, c.before}, {"/etc/a.toml", "version = 2\n"}};
    Tree done = Configure(t, Opts(false, false));
    EXPECT_EQ(done[kMain], c.after);
    EXPECT_EQ(Configure(done, Opts(false, false, true)), t) << c.before;
  }
}

TEST(Containerd, InsertsAnImportsLineAfterVersionWithAMarker) {
  Tree t{{kMain, "# top\nversion = 2 # v\n[plugins]\n"}};
  Tree done = Configure(t, Opts(false, false));
  EXPECT_EQ(done[kMain],
            "# top\nversion = 2 # v\nimports = [\"/etc/containerd/conf.d/99-nvidia.toml\"]  "
            "# added by gpuop runtime configure\n[plugins]\n");
  Tree no_newline{{kMain, "version = 2"}};
  Tree done2 = Configure(no_newline, Opts(false, false));
  EXPECT_EQ(done2[kMain],
            "version = 2\nimports = [\"/etc/containerd/conf.d/99-nvidia.toml\"]  "
            "# added by gpuop runtime configure");
  EXPECT_EQ(Configure(done2, Opts(false, false, true)), no_newline);
}

TEST(Containerd, RevertKeepsUserEditsMadeAfterConfigure) {
  const Tree original = ReadTree(FixtureDir("containerd-v2") / "root");
  Tree t = Configure(original, Opts(true, true));
  t[kMain] += "\n# a line the admin added later\n";
  t[kMain].replace(t[kMain].find("oom_score = -999"), 16, "oom_score = -500");
  Tree reverted = Configure(t, Opts(false, false, true));
  std::string want = original.at(kMain) + "\n# a line the admin added later\n";
  want.replace(want.find("oom_score = -999"), 16, "oom_score = -500");
  EXPECT_EQ(reverted[kMain], want);
  EXPECT_FALSE(reverted.count(kDropIn));
}

TEST(Containerd, RevertWithoutTheRecordRemovesTheMarkedLine) {
  const Tree original = ReadTree(FixtureDir("containerd-v2") / "root");
  Tree t = Configure(original, Opts(false, false));
  t.erase(kDropIn);  // someone deleted the drop-in by hand
  EXPECT_EQ(Configure(t, Opts(false, false, true)), original);
}

TEST(Containerd, RevertOfACreatedConfigKeepsItWhenTheUserEditedIt) {
  Tree t = Configure(Tree{}, Opts(false, false));
  ASSERT_TRUE(t.count(kMain));
  EXPECT_EQ(t[kMain].rfind("version = 2\nimports = [", 0), 0u) << t[kMain];
  t[kMain] += "oom_score = 1\n";
  Tree reverted = Configure(t, Opts(false, false, true));
  EXPECT_EQ(reverted, (Tree{{kMain, "version = 2\noom_score = 1\n"}}));
}

TEST(Containerd, RevertRemovesTheDropInDirectoryGpuopCreated) {
  Tree t{{kMain, "version = 2\n"}};
  ContainerdInputs in = InputsFrom(t);
  in.missing_dirs = {"/etc/containerd/conf.d"};
  auto plan = PlanContainerd(in, Opts(false, false));
  ASSERT_TRUE(plan.ok());
  Apply(*plan, &t);
  auto revert = PlanContainerd(InputsFrom(t), Opts(false, false, true));
  ASSERT_TRUE(revert.ok());
  ASSERT_EQ(revert->changes.size(), 3u);
  EXPECT_TRUE(revert->changes[2].directory);
  EXPECT_EQ(revert->changes[2].path, "/etc/containerd/conf.d");
  EXPECT_EQ(RenderPlanDiff(*revert).find("conf.d\n"), std::string::npos);
  // Without a created directory in the record, revert leaves directories alone.
  Tree u = Configure(Tree{{kMain, "version = 2\n"}}, Opts(false, false));
  auto r2 = PlanContainerd(InputsFrom(u), Opts(false, false, true));
  ASSERT_TRUE(r2.ok());
  for (const auto& c : r2->changes) EXPECT_FALSE(c.directory);
}

// A host without /etc/containerd: configure creates it, its conf.d and the
// config; --revert removes all three (the child directory first), and reads
// the one-directory record earlier gpuop versions wrote.
TEST(Containerd, RevertRemovesEveryDirectoryGpuopCreatedChildFirst) {
  Tree t;
  ContainerdInputs in = InputsFrom(t);
  in.missing_dirs = {"/etc/containerd/conf.d", "/etc/containerd"};
  auto plan = PlanContainerd(in, Opts(false, false));
  ASSERT_TRUE(plan.ok());
  Apply(*plan, &t);
  auto revert = PlanContainerd(InputsFrom(t), Opts(false, false, true));
  ASSERT_TRUE(revert.ok());
  std::vector<std::string> dirs;
  for (const auto& c : revert->changes) {
    if (c.directory) dirs.push_back(c.path);
  }
  EXPECT_EQ(dirs, (std::vector<std::string>{"/etc/containerd/conf.d", "/etc/containerd"}));

  std::string old_record = t[kDropIn];
  const std::string list = R"("created_dirs":["/etc/containerd/conf.d","/etc/containerd"])";
  ASSERT_NE(old_record.find(list), std::string::npos) << old_record;
  old_record.replace(old_record.find(list), list.size(),
                     R"("created_dir":"/etc/containerd/conf.d")");
  t[kDropIn] = old_record;
  auto old_revert = PlanContainerd(InputsFrom(t), Opts(false, false, true));
  ASSERT_TRUE(old_revert.ok());
  dirs.clear();
  for (const auto& c : old_revert->changes) {
    if (c.directory) dirs.push_back(c.path);
  }
  EXPECT_EQ(dirs, (std::vector<std::string>{"/etc/containerd/conf.d"}));
}

TEST(Containerd, NewConfigUsesVersion3ForContainerd2) {
  ContainerdInputs in = InputsFrom(Tree{});
  in.installed_major = 2;
  auto plan = PlanContainerd(in, Opts(false, false));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->changes.size(), 2u);
  EXPECT_EQ(plan->changes[1].after->rfind("version = 3\n", 0), 0u);
}

TEST(Containerd, MalformedConfigIsOneErrorWithFileAndLine) {
  Tree t{{kMain, "version = 2\n[plugins\nx = 1\n"}};
  auto plan = PlanContainerd(InputsFrom(t), Opts(true, true));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message().rfind("/etc/containerd/config.toml:2:", 0), 0u)
      << plan.status().message();
  EXPECT_EQ(plan.status().message().find('\n'), std::string::npos);
}

TEST(Containerd, MalformedImportedFileNamesThatFile) {
  Tree t = ReadTree(FixtureDir("containerd-imports") / "root");
  t["/etc/containerd/conf.d/10-gc.toml"] = "version = 2\n[broken\n";
  auto plan = PlanContainerd(InputsFrom(t), Opts(false, false));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message().rfind("/etc/containerd/conf.d/10-gc.toml:2:", 0), 0u)
      << plan.status().message();
}

TEST(Containerd, RefusesConfigsWithoutVersionAndForeignDropIns) {
  auto no_version = PlanContainerd(InputsFrom(Tree{{kMain, "root = \"/x\"\n"}}), Opts(0, 0));
  ASSERT_FALSE(no_version.ok());
  EXPECT_NE(no_version.status().message().find("add `version = 2`"), std::string::npos);

  Tree foreign{{kMain, "version = 2\n"}, {kDropIn, "version = 2\n# from nvidia-ctk\n"}};
  auto plan = PlanContainerd(InputsFrom(foreign), Opts(0, 0));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  auto revert = PlanContainerd(InputsFrom(foreign), Opts(0, 0, true));
  ASSERT_TRUE(revert.ok());
  EXPECT_TRUE(revert->changes.empty());
}

TEST(Containerd, RefusesWhenALaterImportReplacesTheCriSection) {
  Tree t = ReadTree(FixtureDir("containerd-imports") / "root");
  t["/etc/containerd/conf.d/zz-late.toml"] =
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"x\"\n";
  auto plan = PlanContainerd(InputsFrom(t), Opts(0, 0));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("zz-late.toml is imported after"), std::string::npos);
}

TEST(Containerd, RevertWarnsWhenTheMainConfigItselfDefaultsToTheHandler) {
  Tree t{{kMain,
          "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
          "default_runtime_name = \"nvidia\"\n"}};
  Tree done = Configure(t, Opts(false, true));
  auto revert = PlanContainerd(InputsFrom(done), Opts(false, false, true));
  ASSERT_TRUE(revert.ok());
  bool warned = false;
  for (const auto& n : revert->notes) warned = warned || n.find("warning") == 0;
  EXPECT_TRUE(warned);
}

TEST(Containerd, NotesNameTheRuntimeClassHandlerAndTheRestart) {
  auto plan = PlanContainerd(InputsFrom(ReadTree(FixtureDir("containerd-v2") / "root")),
                             Opts(false, false));
  ASSERT_TRUE(plan.ok());
  ASSERT_GE(plan->notes.size(), 2u);
  EXPECT_EQ(plan->notes[0],
            "configured containerd runtime handler 'nvidia' (RuntimeClass handler: nvidia)");
  EXPECT_NE(plan->notes.back().find("systemctl restart containerd"), std::string::npos);
}

TEST(Containerd, DryRunDiffMatchesGolden) {
  auto plan =
      PlanContainerd(InputsFrom(ReadTree(FixtureDir("containerd-v2") / "root")), Opts(true, true));
  ASSERT_TRUE(plan.ok());
  ExpectGolden(Tree{{"/dry-run.diff", RenderPlanDiff(*plan)}}, FixtureDir("containerd-v2/diff"));
}

TEST(ContainerdImports, ResolvesRelativePathsAndGlobs) {
  auto imports = ContainerdImports("/etc/containerd/config.toml",
                                   "version = 2\nimports = [\"conf.d/*.toml\", \"/abs.toml\"]\n");
  ASSERT_TRUE(imports.ok());
  EXPECT_EQ(*imports, (std::vector<std::string>{"/etc/containerd/conf.d/*.toml", "/abs.toml"}));
  EXPECT_TRUE(ImportsCover(*imports, "/etc/containerd/conf.d/99-nvidia.toml"));
  EXPECT_FALSE(ImportsCover(*imports, "/etc/containerd/conf.d/sub/99-nvidia.toml"));
  EXPECT_FALSE(ImportsCover(*imports, "/etc/containerd/conf.d/99-nvidia.conf"));
}

}  // namespace
}  // namespace gpuop::runtime
