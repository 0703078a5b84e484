// The CDI spec model: minimum versions, deterministic YAML/JSON, strict
// parsing and validation.
#include "toolkit/cdi_spec.h"

#include <gtest/gtest.h>

namespace gpuop::toolkit::cdi {
namespace {

Spec Small() {
  Spec s;
  s.cdi_version = "0.3.0";
  s.kind = "nvidia.com/gpu";
  Device d;
  d.name = "gpu0";
  d.edits.device_nodes.push_back(
      {"/dev/nvidia0", "", "c", 195, 0, 0666, "", std::nullopt, std::nullopt});
  s.devices.push_back(d);
  s.edits.env = {"NVIDIA_VISIBLE_DEVICES=void"};
  s.edits.mounts.push_back({"/usr/lib/libcuda.so.1", "/usr/lib/libcuda.so.1", {"ro", "rbind"}, ""});
  s.edits.hooks.push_back(
      {"createContainer", "/usr/bin/gpuop", {"gpuop", "cdi", "hook", "--link"}, {}, std::nullopt});
  return s;
}

TEST(MinimumVersionTest, Table) {
  struct Case {
    const char* what;
    void (*change)(Spec&);
    const char* want;
  };
  const Case cases[] = {
      {"nothing", [](Spec&) {}, "0.3.0"},
      {"mount type", [](Spec& s) { s.edits.mounts[0].type = "bind"; }, "0.4.0"},
      {"hostPath", [](Spec& s) { s.devices[0].edits.device_nodes[0].host_path = "/r/dev/nvidia0"; },
       "0.5.0"},
      {"hostPath equal to path",
       [](Spec& s) { s.devices[0].edits.device_nodes[0].host_path = "/dev/nvidia0"; }, "0.3.0"},
      {"top-level hostPath",
       [](Spec& s) {
         s.edits.device_nodes.push_back({"/dev/x", "/r/dev/x"});
       },
       "0.5.0"},
      {"digit name", [](Spec& s) { s.devices[0].name = "0"; }, "0.5.0"},
      {"spec annotation", [](Spec& s) { s.annotations["a"] = "b"; }, "0.6.0"},
      {"device annotation", [](Spec& s) { s.devices[0].annotations["a"] = "b"; }, "0.6.0"},
      {"dot in class", [](Spec& s) { s.kind = "nvidia.com/gpu.mig"; }, "0.6.0"},
      {"dot in vendor only", [](Spec& s) { s.kind = "example.nvidia.com/gpu"; }, "0.3.0"},
      {"additionalGids", [](Spec& s) { s.devices[0].edits.additional_gids = {44}; }, "0.7.0"},
      {"gids and digit name",
       [](Spec& s) {
         s.edits.additional_gids = {44};
         s.devices[0].name = "0";
       },
       "0.7.0"},
  };
  for (const Case& c : cases) {
    Spec s = Small();
    c.change(s);
    EXPECT_EQ(MinimumVersion(s), c.want) << c.what;
  }
}

TEST(CompareVersionsTest, Orders) {
  EXPECT_EQ(CompareVersions("0.5.0", "0.10.0"), -1);
  EXPECT_EQ(CompareVersions("1.0.0", "0.8.0"), 1);
  EXPECT_EQ(CompareVersions("0.3.0", "0.3.0"), 0);
  EXPECT_FALSE(CompareVersions("0.3", "0.3.0").has_value());
  EXPECT_FALSE(CompareVersions("a.b.c", "0.3.0").has_value());
}

TEST(RenderTest, YamlIsStableQuotedAndOmitsEqualHostPath) {
  Spec s = Small();
  s.devices[0].name = "0:1";
  s.devices[0].edits.device_nodes[0].host_path = "/dev/nvidia0";
  s.cdi_version = "0.5.0";
  const std::string want = R"(---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0:1"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
      type: c
      major: 195
      minor: 0
      fileMode: 438
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  hooks:
  - hookName: createContainer
    path: /usr/bin/gpuop
    args:
    - gpuop
    - cdi
    - hook
    - --link
  mounts:
  - hostPath: /usr/lib/libcuda.so.1
    containerPath: /usr/lib/libcuda.so.1
    options:
    - ro
    - rbind
)";
  EXPECT_EQ(ToYaml(s), want);
  EXPECT_EQ(ToYaml(s), ToYaml(s));
}

TEST(RenderTest, QuotesWhatYamlWouldMisread) {
  Spec s = Small();
  s.edits.env = {"yes", "0", "null", "a b", "-1", "x: y", "#c", "", "ok/plain-1.2"};
  const std::string y = ToYaml(s);
  for (const char* q :
       {"\"yes\"", "\"0\"", "\"null\"", "\"a b\"", "\"-1\"", "\"x: y\"", "\"#c\"", "\"\""}) {
    EXPECT_NE(y.find(std::string("- ") + q + "\n"), std::string::npos) << q << "\n" << y;
  }
  EXPECT_NE(y.find("- ok/plain-1.2\n"), std::string::npos);
  auto back = Parse(y);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->edits.env, s.edits.env);
}

TEST(ParseTest, RoundTripsYamlAndJson) {
  Spec s = Small();
  s.annotations["cdi.k8s.io/x"] = "1";
  s.devices[0].edits.device_nodes[0].host_path = "/driver/dev/nvidia0";
  s.devices[0].edits.device_nodes[0].gid = 44;
  s.devices[0].edits.additional_gids = {44, 45};
  s.edits.hooks[0].timeout = 5;
  s.edits.hooks[0].env = {"A=1"};
  s.edits.mounts[0].type = "bind";
  s.cdi_version = MinimumVersion(s);
  for (const std::string& text : {ToYaml(s), ToJson(s)}) {
    auto back = Parse(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    EXPECT_EQ(*back, s) << text;
  }
}

TEST(ParseTest, UnknownFieldsAreRejectedByName) {
  auto r = Parse(
      "cdiVersion: 0.3.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
      "    mountz: []\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("devices[0].containerEdits.mountz: unknown field"),
            std::string::npos)
      << r.status().message();
  auto top = Parse("cdiVersion: 0.3.0\nkind: a.com/b\nextra: 1\ndevices: []\n");
  ASSERT_FALSE(top.ok());
  EXPECT_NE(top.status().message().find("extra: unknown field"), std::string::npos);
  auto type = Parse(
      "cdiVersion: 0.3.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
      "    deviceNodes:\n    - path: /dev/x\n      major: abc\n");
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find("deviceNodes[0].major"), std::string::npos);
  EXPECT_FALSE(Parse("{not yaml").ok());
  EXPECT_FALSE(Parse("- a list\n").ok());
}

TEST(ValidateTest, CatchesWhatAConsumerRejects) {
  EXPECT_TRUE(Validate(Small()).ok()) << Validate(Small()).ToString();
  struct Case {
    const char* what;
    void (*change)(Spec&);
    const char* error;
  };
  const Case cases[] = {
      {"old version", [](Spec& s) { s.devices[0].name = "0"; }, "0.5.0 or later is needed"},
      {"unknown version", [](Spec& s) { s.cdi_version = "0.2.0"; }, "not a known version"},
      {"kind", [](Spec& s) { s.kind = "nvidia.com"; }, "is not vendor/class"},
      {"vendor", [](Spec& s) { s.kind = "-x/gpu"; }, "vendor \"-x\""},
      {"no devices", [](Spec& s) { s.devices.clear(); }, "no devices"},
      {"empty edits", [](Spec& s) { s.devices[0].edits = {}; }, "empty containerEdits"},
      {"duplicate", [](Spec& s) { s.devices.push_back(s.devices[0]); }, "duplicate name"},
      {"bad name", [](Spec& s) { s.devices[0].name = "a/b"; }, "a device name"},
      {"relative node", [](Spec& s) { s.devices[0].edits.device_nodes[0].path = "dev/x"; },
       "is not absolute"},
      {"hook name", [](Spec& s) { s.edits.hooks[0].hook_name = "prestart"; },
       "hookName \"prestart\""},
      {"timeout", [](Spec& s) { s.edits.hooks[0].timeout = 0; }, "timeout must be positive"},
  };
  for (const Case& c : cases) {
    Spec s = Small();
    c.change(s);
    Status st = Validate(s);
    ASSERT_FALSE(st.ok()) << c.what;
    EXPECT_NE(st.message().find(c.error), std::string::npos) << c.what << ": " << st.message();
  }
}

// Found by tests/fuzz: a string that is not UTF-8 parsed, and ToJson then
// threw (nlohmann::json cannot write it).
TEST(ParseTest, TextThatIsNotUtf8IsRejected) {
  auto spec = Parse("cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"\xff\"\n"
                    "  containerEdits: {env: [A=1]}\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(), "CDI spec: byte 57 is not valid UTF-8");
}

}  // namespace
}  // namespace gpuop::toolkit::cdi
