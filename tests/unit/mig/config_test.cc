// The mig-parted config parser: upstream-style files parse to the expected
// entries, round-trip through SerializeConfig, and malformed files fail with
// the file, the line and what is wrong.
#include "mig/config.h"

#include <gtest/gtest.h>

#include <string>

#include "base/files.h"

namespace gpuop::mig {
namespace {

const std::string kFixtures = std::string(GPUOP_SOURCE_DIR) + "/tests/fixtures/mig/";

ConfigFile MustParse(const std::string& yaml) {
  auto f = ParseConfig(yaml, "test.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : ConfigFile{};
}

std::string ErrorOf(const std::string& yaml) {
  auto f = ParseConfig(yaml, "test.yaml");
  EXPECT_FALSE(f.ok()) << "parsed:\n" << yaml;
  if (f.ok()) return "";
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  return f.status().message();
}

TEST(MigConfigTest, ParsesUpstreamStyleFile) {
  auto text = ReadFile(kFixtures + "upstream.yaml");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ConfigFile f = MustParse(*text);
  ASSERT_EQ(f.configs.size(), 5u);

  const auto& one = f.configs.at("all-1g.10gb");
  ASSERT_EQ(one.size(), 2u);
  EXPECT_TRUE(one[0].all_devices);
  ASSERT_EQ(one[0].filters.size(), 3u);
  EXPECT_EQ(one[0].filters[2].device_id, 0x233010DEu);
  EXPECT_FALSE(one[0].filters[2].subsystem_id.has_value());
  EXPECT_EQ(one[0].mig_devices.at("1g.10gb"), 7u);
  EXPECT_EQ(one[1].filters.size(), 1u);
  EXPECT_EQ(one[0].line, 17);

  const auto& balanced = f.configs.at("all-balanced");
  ASSERT_EQ(balanced[1].filters.size(), 1u);
  EXPECT_EQ(balanced[1].filters[0].subsystem_id, 0x16C110DEu);
  EXPECT_TRUE(balanced[1].Covers(3, 0x233010DE, 0x16C110DE));
  EXPECT_FALSE(balanced[1].Covers(3, 0x233010DE, 0x12345678));
  EXPECT_FALSE(balanced[0].Covers(0, 0x233010DE, 0x16C110DE));

  const auto& custom = f.configs.at("custom-config");
  ASSERT_EQ(custom.size(), 5u);
  EXPECT_EQ(custom[0].devices, (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_FALSE(custom[0].mig_enabled);
  EXPECT_TRUE(custom[0].Covers(2, 0, 0));
  EXPECT_FALSE(custom[0].Covers(4, 0, 0));
  EXPECT_EQ(custom[3].mig_devices.at("1c.2g.20gb"), 2u);
  EXPECT_EQ(custom[4].mig_devices.at("1g.10gb+me"), 1u);
  EXPECT_EQ(custom[4].mig_devices.size(), 4u);

  EXPECT_TRUE(f.configs.at("all-enabled")[0].mig_devices.empty());
  EXPECT_TRUE(f.configs.at("all-enabled")[0].mig_enabled);
}

TEST(MigConfigTest, SerializeRoundTrips) {
  auto text = ReadFile(kFixtures + "upstream.yaml");
  ASSERT_TRUE(text.ok());
  ConfigFile f = MustParse(*text);
  ConfigFile again = MustParse(SerializeConfig(f));
  EXPECT_EQ(again.configs, f.configs);
}

TEST(MigConfigTest, SelectNamesTheMissingConfig) {
  ConfigFile f =
      MustParse("version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n");
  EXPECT_TRUE(f.Select("a").ok());
  auto missing = f.Select("b");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("\"b\""), std::string::npos);
  EXPECT_NE(missing.status().message().find("it has: a"), std::string::npos);
}

TEST(MigConfigTest, ProfileNames) {
  auto p = ParseProfileName("1c.2g.20gb");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ci_slices, 1u);
  EXPECT_EQ(p->gi_slices, 2u);
  EXPECT_EQ(p->memory_gb, 20u);
  EXPECT_EQ(p->GiName(), "2g.20gb");
  EXPECT_EQ(p->ToString(), "1c.2g.20gb");
  auto me = ParseProfileName("1g.10gb+me");
  ASSERT_TRUE(me.ok());
  EXPECT_EQ(me->suffix, "+me");
  EXPECT_EQ(me->ToString(), "1g.10gb+me");
  // C == G is the plain name.
  EXPECT_EQ(ParseProfileName("3c.3g.40gb")->ToString(), "3g.40gb");
  for (const char* bad : {"", "1g", "g.10gb", "1g.10", "1g.10gb+foo", "3c.2g.20gb", "0g.5gb",
                          "1x.10gb", "1g.gb", "7g.80gbx"}) {
    EXPECT_FALSE(ParseProfileName(bad).ok()) << bad;
  }
}

TEST(MigConfigTest, MalformedFilesNameTheLine) {
  struct Case {
    std::string yaml;
    std::string want;  // in the message, after "test.yaml:"
  };
  const std::string head = "version: v1\nmig-configs:\n  a:\n";
  const std::vector<Case> cases = {
      {head + "    - devices: all\n      mig-enable: true\n", "5: unknown field \"mig-enable\""},
      {"version: v1\nmig-config: {}\n", "2: unknown field \"mig-config\""},
      {"mig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n", "missing \"version\""},
      {"version: v2\nmig-configs: {}\n", "1: unsupported version \"v2\""},
      {head + "    - mig-enabled: false\n", "4: an entry of mig-config \"a\" has no \"devices\""},
      {head + "    - devices: [0, x]\n      mig-enabled: false\n",
       "4: devices: \"x\" is not a GPU index"},
      {head + "    - devices: some\n      mig-enabled: false\n",
       "devices must be \"all\" or a list"},
      {head + "    - devices: all\n", "has no \"mig-enabled\""},
      {head + "    - devices: all\n      mig-enabled: yes-please\n",
       "5: mig-enabled must be true or false"},
      {head + "    - devices: all\n      mig-enabled: true\n",
       "enables MIG but has no \"mig-devices\""},
      {head +
           "    - devices: all\n      mig-enabled: false\n      mig-devices:\n        1g.10gb: 1\n",
       "6: mig-devices must be empty when mig-enabled is false"},
      {head +
           "    - devices: all\n      mig-enabled: true\n      mig-devices:\n        1g.10gb: 0\n",
       "7: mig-devices \"1g.10gb\": the count must be a whole number above 0"},
      {head +
           "    - devices: all\n      mig-enabled: true\n      mig-devices:\n        1g.10gb: -2\n",
       "7: mig-devices \"1g.10gb\""},
      {head +
           "    - devices: all\n      mig-enabled: true\n      mig-devices:\n        1q.10gb: 2\n",
       "7: MIG profile \"1q.10gb\""},
      {head + "    - devices: all\n      device-filter: 0x2330\n      mig-enabled: false\n",
       "5: device-filter \"0x2330\" is not 0xDDDDVVVV"},
      {head +
           "    - devices: all\n      device-filter: \"0x233010DE:zz\"\n      mig-enabled: false\n",
       "5: device-filter \"0x233010DE:zz\": subsystem id"},
      {"version: v1\nmig-configs:\n  a: []\n", "3: mig-config \"a\" must be a non-empty list"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: [0\n", "not valid YAML"},
      {head +
           "    - devices: all\n      mig-enabled: true\n      mig-devices:\n        1g.10gb: 1\n"
           "        1c.1g.10gb: 1\n",
       "8: mig-devices: \"1c.1g.10gb\" is listed twice"},
  };
  for (const auto& c : cases) {
    std::string m = ErrorOf(c.yaml);
    EXPECT_EQ(m.rfind("test.yaml", 0), 0u) << m;
    EXPECT_NE(m.find(c.want), std::string::npos) << "message: " << m << "\nwant: " << c.want;
  }
}

// Found by tests/fuzz: a config name that is not UTF-8 did not read back
// from SerializeConfig.
TEST(MigConfigTest, TextThatIsNotUtf8IsRejected) {
  auto file = ParseConfig(
      "version: v1\nmig-configs:\n  \"a\xe9\x11\":\n    - devices: all\n"
      "      mig-enabled: false\n",
      "mig.yaml");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(), "mig.yaml: byte 29 is not valid UTF-8");
}

}  // namespace
}  // namespace gpuop::mig
