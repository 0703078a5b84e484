// The pure MIG planner on hand-built H100 and L40S states: untouched GPUs,
// packings that need an order, no-fit errors, keeping instances, assert
// diffs, export and default configs.
#include "mig/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace gpuop::mig {
namespace {

using nvml::GiProfile;
using nvml::Placement;

std::vector<Placement> Starts(std::vector<unsigned> starts, unsigned size) {
  std::vector<Placement> out;
  for (unsigned s : starts) out.push_back({s, size});
  return out;
}

// H100 80GB profile table, as `nvidia-smi mig -lgip` lists it.
std::vector<GiProfile> H100Profiles() {
  auto p = [](unsigned index, unsigned id, std::string name, unsigned slices, unsigned max,
              uint64_t mem, std::vector<Placement> pl) {
    GiProfile g;
    g.index = index;
    g.id = id;
    g.name = std::move(name);
    g.slices = slices;
    g.max_count = max;
    g.memory_mib = mem;
    g.placements = std::move(pl);
    return g;
  };
  return {
      p(0, 19, "1g.10gb", 1, 7, 9984, Starts({0, 1, 2, 3, 4, 5, 6}, 1)),
      p(7, 20, "1g.10gb+me", 1, 1, 9984, Starts({0, 1, 2, 3, 4, 5, 6}, 1)),
      p(9, 15, "1g.20gb", 1, 4, 20096, Starts({0, 2, 4, 6}, 2)),
      p(1, 14, "2g.20gb", 2, 3, 20096, Starts({0, 2, 4}, 2)),
      p(2, 9, "3g.40gb", 3, 2, 40448, Starts({0, 4}, 4)),
      p(3, 5, "4g.40gb", 4, 1, 40448, Starts({0}, 4)),
      p(4, 0, "7g.80gb", 7, 1, 81152, Starts({0}, 8)),
  };
}

GpuState H100(unsigned index) {
  GpuState g;
  g.index = index;
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_device_id = 0x233010DE;
  g.pci_subsystem_id = 0x16C110DE;
  g.mig_capable = true;
  g.mig_enabled = g.mig_pending = true;
  g.profiles = H100Profiles();
  return g;
}

GpuState L40S(unsigned index) {
  GpuState g;
  g.index = index;
  g.name = "NVIDIA L40S";
  g.pci_device_id = 0x26B910DE;
  return g;
}

// Adds a GI of `profile` at `start` with one full compute instance.
void AddInstance(GpuState& g, const std::string& profile, unsigned start, unsigned id) {
  for (const auto& p : g.profiles) {
    if (p.name != profile) continue;
    nvml::GpuInstance gi;
    gi.id = id;
    gi.profile_id = p.id;
    gi.profile_index = p.index;
    gi.profile_name = p.name;
    gi.placement = {start, p.placements.front().size};
    nvml::ComputeInstance ci;
    ci.slices = p.slices;
    ci.profile_name = p.name;
    gi.compute_instances.push_back(ci);
    g.instances.push_back(gi);
    return;
  }
  ADD_FAILURE() << "no profile " << profile;
}

// Checks a packing against the placement rules, independently of the packer.
void ExpectValidPacking(const GpuState& g, const std::vector<CreateOp>& ops,
                        const std::vector<nvml::GpuInstance>& kept = {}) {
  std::vector<std::pair<unsigned, unsigned>> ranges;
  unsigned compute = 0;
  for (const auto& gi : kept) {
    ranges.push_back({gi.placement.start, gi.placement.size});
    for (const auto& p : g.profiles) {
      if (p.id == gi.profile_id) compute += p.slices;
    }
  }
  for (const auto& op : ops) {
    const GiProfile* p = nullptr;
    for (const auto& q : g.profiles) {
      if (q.id == op.gi_profile_id) p = &q;
    }
    ASSERT_NE(p, nullptr);
    EXPECT_NE(std::find(p->placements.begin(), p->placements.end(), op.placement),
              p->placements.end())
        << op.device << " at " << op.placement.start;
    ranges.push_back({op.placement.start, op.placement.size});
    compute += p->slices;
  }
  EXPECT_LE(compute, 7u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      bool overlap = ranges[i].first < ranges[j].first + ranges[j].second &&
                     ranges[j].first < ranges[i].first + ranges[i].second;
      EXPECT_FALSE(overlap) << "instances " << i << " and " << j << " overlap";
    }
  }
}

std::vector<ConfigEntry> Entries(const std::string& yaml, const std::string& name) {
  auto f = ParseConfig("version: v1\nmig-configs:\n  " + name + ":\n" + yaml, "test.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? f->configs.at(name) : std::vector<ConfigEntry>{};
}

TEST(MigPackTest, FindsThePackingThatNeedsAnOrder) {
  // In the listed order, first fit puts 3g at 0, 2g at 4, 1g at 6 and has no
  // room for the last 1g; a packing exists with 3g at 4.
  GpuState g = H100(0);
  auto ops = Pack(g, {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, {});
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  ASSERT_EQ(ops->size(), 4u);
  ExpectValidPacking(g, *ops);
  auto three = std::find_if(ops->begin(), ops->end(),
                            [](const CreateOp& o) { return o.gi_profile == "3g.40gb"; });
  EXPECT_EQ(three->placement.start, 4u);
}

TEST(MigPackTest, MixedProfilesWithMediaExtension) {
  GpuState g = H100(0);
  auto ops = Pack(g, {"1g.10gb+me", "1g.10gb", "1g.20gb", "4g.40gb"}, {});
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  ExpectValidPacking(g, *ops);
  // Only one media-extension instance per GPU.
  auto two_me = Pack(g, {"1g.10gb+me", "1g.10gb+me"}, {});
  ASSERT_FALSE(two_me.ok());
  EXPECT_NE(two_me.status().message().find("1g.10gb+me fits at most 1"), std::string::npos)
      << two_me.status().message();
}

TEST(MigPackTest, NoFitNamesTheGpuAndProfiles) {
  GpuState g = H100(2);
  auto r = Pack(g, {"4g.40gb", "3g.40gb", "1g.10gb"}, {});
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("GPU 2 (NVIDIA H100 80GB HBM3)"), std::string::npos) << m;
  EXPECT_NE(m.find("1x 1g.10gb, 1x 3g.40gb, 1x 4g.40gb"), std::string::npos) << m;
  EXPECT_NE(m.find("do not fit"), std::string::npos) << m;

  auto too_many = Pack(g, std::vector<std::string>(8, "1g.10gb"), {});
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("1g.10gb fits at most 7"), std::string::npos);

  auto unknown = Pack(g, {"1g.5gb"}, {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(
      unknown.status().message().find("GPU 2 (NVIDIA H100 80GB HBM3) has no MIG profile 1g.5gb"),
      std::string::npos)
      << unknown.status().message();
}

TEST(MigPackTest, PacksAroundKeptInstances) {
  GpuState g = H100(0);
  AddInstance(g, "1g.10gb", 0, 7);
  AddInstance(g, "1g.10gb", 1, 8);
  auto ops = Pack(g, {"3g.40gb", "2g.20gb"}, g.instances);
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  ExpectValidPacking(g, *ops, g.instances);
}

TEST(MigPlanTest, MatchingGpusGetNoOperations) {
  std::vector<GpuState> gpus = {H100(0), H100(1), L40S(2)};
  // GPU 0 has the layout at placements the packer would not choose.
  AddInstance(gpus[0], "1g.10gb", 6, 13);
  AddInstance(gpus[0], "2g.20gb", 4, 5);
  for (unsigned s = 0; s < 2; ++s) AddInstance(gpus[1], "3g.40gb", s * 4, 1 + s);
  auto wants = SelectWants(Entries("    - devices: [0]\n      mig-enabled: true\n"
                                   "      mig-devices: {\"1g.10gb\": 1, \"2g.20gb\": 1}\n"
                                   "    - devices: [1]\n      mig-enabled: true\n"
                                   "      mig-devices: {\"1g.10gb\": 7}\n",
                                   "c"),
                           gpus, "c");
  ASSERT_TRUE(wants.ok()) << wants.status().ToString();
  ASSERT_EQ(wants->size(), 2u);  // GPU 2 is in no entry
  auto plan = PlanAll(gpus, *wants, false);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->gpus.size(), 1u);
  const GpuPlan& p = plan->gpus[0];
  EXPECT_EQ(p.gpu, 1u);
  EXPECT_EQ(p.destroy_gis, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(p.destroy_cis.size(), 2u);
  EXPECT_EQ(p.creates.size(), 7u);
  EXPECT_FALSE(p.set_mode.has_value());
  ExpectValidPacking(gpus[1], p.creates);
  EXPECT_TRUE(CheckWants(gpus, {(*wants)[0]}, false).ok());
}

TEST(MigPlanTest, KeepsInstancesTheNewLayoutHas) {
  GpuState g = H100(3);
  for (unsigned s = 0; s < 7; ++s) AddInstance(g, "1g.10gb", s, 7 + s);
  GpuWant w{3, true, {{"1g.10gb", 2}, {"2g.20gb", 1}, {"3g.40gb", 1}}};
  auto p = PlanGpu(g, w, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kept_gis.size(), 2u);
  EXPECT_EQ(p->destroy_gis.size(), 5u);
  EXPECT_EQ(p->creates.size(), 2u);
  std::vector<nvml::GpuInstance> kept;
  for (const auto& gi : g.instances) {
    if (std::find(p->kept_gis.begin(), p->kept_gis.end(), gi.id) != p->kept_gis.end()) {
      kept.push_back(gi);
    }
  }
  ExpectValidPacking(g, p->creates, kept);
}

TEST(MigPlanTest, RepacksWhenKeptInstancesBlock) {
  // The 1g at slice 2 sits where the 4g must go: keep nothing, repack.
  GpuState g = H100(0);
  AddInstance(g, "1g.10gb", 2, 9);
  GpuWant w{0, true, {{"1g.10gb", 1}, {"4g.40gb", 1}}};
  auto p = PlanGpu(g, w, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ExpectValidPacking(g, p->creates, {});
  EXPECT_TRUE(p->kept_gis.empty());
  EXPECT_EQ(p->destroy_gis, (std::vector<unsigned>{9}));
  EXPECT_EQ(p->creates.size(), 2u);
}

TEST(MigPlanTest, ModeChanges) {
  GpuState off = H100(0);
  off.mig_enabled = off.mig_pending = false;
  GpuWant on{0, true, {{"7g.80gb", 1}}};
  auto p = PlanGpu(off, on, false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->set_mode, true);
  ASSERT_TRUE(p->after_reset.has_value());
  EXPECT_TRUE(p->creates.empty());
  auto mode_only = PlanGpu(off, on, true);
  EXPECT_FALSE(mode_only->after_reset.has_value());

  GpuState used = H100(1);
  AddInstance(used, "7g.80gb", 0, 0);
  auto disable = PlanGpu(used, GpuWant{1, false, {}}, false);
  ASSERT_TRUE(disable.ok());
  EXPECT_EQ(disable->destroy_gis, (std::vector<unsigned>{0}));
  EXPECT_EQ(disable->set_mode, false);

  GpuState pending_off = H100(2);
  pending_off.mig_pending = false;
  auto cancel = PlanGpu(pending_off, GpuWant{2, true, {}}, false);
  EXPECT_EQ(cancel->set_mode, true);

  GpuState l40s = L40S(3);
  EXPECT_TRUE(PlanGpu(l40s, GpuWant{3, false, {}}, false)->empty());
}

TEST(MigSelectTest, ErrorsNameGpuModelProfileAndConfig) {
  std::vector<GpuState> gpus = {H100(0), L40S(1)};
  auto on_l40s = SelectWants(
      Entries("    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 7}\n",
              "all-1g.10gb"),
      gpus, "all-1g.10gb");
  ASSERT_FALSE(on_l40s.ok());
  EXPECT_EQ(on_l40s.status().message(),
            "GPU 1 (NVIDIA L40S) does not support MIG; remove it from mig-config "
            "\"all-1g.10gb\" (line 4) or add a device-filter");

  // all-disabled covers the L40S too: nothing to do there.
  auto disabled =
      SelectWants(Entries("    - devices: all\n      mig-enabled: false\n", "off"), gpus, "off");
  ASSERT_TRUE(disabled.ok());
  EXPECT_EQ(disabled->size(), 1u);

  auto filtered = SelectWants(Entries("    - devices: all\n      device-filter: \"0x233010DE\"\n"
                                      "      mig-enabled: true\n      mig-devices: {}\n",
                                      "f"),
                              gpus, "f");
  ASSERT_TRUE(filtered.ok());
  ASSERT_EQ(filtered->size(), 1u);
  EXPECT_EQ((*filtered)[0].gpu, 0u);

  auto lacks = SelectWants(Entries("    - devices: [0]\n      mig-enabled: true\n"
                                   "      mig-devices: {\"1g.5gb\": 7}\n",
                                   "a100ish"),
                           gpus, "a100ish");
  ASSERT_FALSE(lacks.ok());
  EXPECT_NE(
      lacks.status().message().find("GPU 0 (NVIDIA H100 80GB HBM3) has no MIG profile 1g.5gb"),
      std::string::npos)
      << lacks.status().message();
  EXPECT_NE(lacks.status().message().find("mig-config \"a100ish\""), std::string::npos);

  auto no_fit =
      SelectWants(Entries("    - devices: [0]\n      mig-enabled: true\n"
                          "      mig-devices: {\"4g.40gb\": 1, \"3g.40gb\": 1, \"1g.10gb\": 1}\n",
                          "big"),
                  gpus, "big");
  ASSERT_FALSE(no_fit.ok());
  EXPECT_NE(no_fit.status().message().find("do not fit"), std::string::npos);
}

TEST(MigAssertTest, DiffSaysWhatDiffers) {
  std::vector<GpuState> gpus = {H100(0), H100(1)};
  for (unsigned s = 0; s < 7; ++s) AddInstance(gpus[0], "1g.10gb", s, 7 + s);
  gpus[1].mig_enabled = false;
  std::vector<GpuWant> wants = {{0, true, {{"7g.80gb", 1}}}, {1, true, {}}};
  Status s = CheckWants(gpus, wants, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("GPU 0 (NVIDIA H100 80GB HBM3): has 7x 1g.10gb, want 1x 7g.80gb"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("GPU 1 (NVIDIA H100 80GB HBM3): MIG mode is disabled, want enabled "
                             "(pending: reset required)"),
            std::string::npos)
      << s.message();
  // Mode only: GPU 0 is fine, GPU 1 is not.
  Status m = CheckWants(gpus, wants, true);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message().find("GPU 0"), std::string::npos);
}

TEST(MigExportTest, GroupsGpusAndRoundTrips) {
  std::vector<GpuState> gpus = {H100(0), H100(1), H100(2), L40S(3)};
  for (unsigned g = 0; g < 2; ++g) {
    for (unsigned s = 0; s < 7; ++s) AddInstance(gpus[g], "1g.10gb", s, 7 + s);
  }
  gpus[2].mig_enabled = gpus[2].mig_pending = false;
  ConfigFile exported = ExportConfig(gpus, "now");
  auto parsed = ParseConfig(SerializeConfig(exported), "export");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& entries = parsed->configs.at("now");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].devices, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(entries[0].mig_devices.at("1g.10gb"), 7u);
  EXPECT_EQ(entries[1].devices, (std::vector<unsigned>{2}));
  auto wants = SelectWants(entries, gpus, "now");
  ASSERT_TRUE(wants.ok()) << wants.status().ToString();
  EXPECT_TRUE(CheckWants(gpus, *wants, false).ok());
}

TEST(MigDefaultsTest, BalancedAndFullLayoutsPerModel) {
  std::vector<GpuState> gpus = {H100(0), L40S(1)};
  ConfigFile d = DefaultConfigs(gpus);
  auto parsed = ParseConfig(SerializeConfig(d), "defaults");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  for (const char* name :
       {"all-disabled", "all-enabled", "all-1g.10gb", "all-1g.10gb.me", "all-1g.20gb",
        "all-2g.20gb", "all-3g.40gb", "all-4g.40gb", "all-7g.80gb", "all-balanced"}) {
    EXPECT_TRUE(parsed->configs.contains(name)) << name;
  }
  const auto& balanced = parsed->configs.at("all-balanced");
  ASSERT_EQ(balanced.size(), 1u);
  EXPECT_EQ(balanced[0].filters[0].device_id, 0x233010DEu);
  EXPECT_EQ(balanced[0].mig_devices,
            (std::map<std::string, unsigned>{{"1g.10gb", 2}, {"2g.20gb", 1}, {"3g.40gb", 1}}));
  EXPECT_EQ(parsed->configs.at("all-1g.10gb")[0].mig_devices.at("1g.10gb"), 7u);
  EXPECT_EQ(parsed->configs.at("all-2g.20gb")[0].mig_devices.at("2g.20gb"), 3u);
  EXPECT_EQ(parsed->configs.at("all-1g.20gb")[0].mig_devices.at("1g.20gb"), 4u);
  // Every default selects and packs on these GPUs (the L40S is filtered out).
  for (const auto& [name, entries] : parsed->configs) {
    auto w = SelectWants(entries, gpus, name);
    EXPECT_TRUE(w.ok()) << name << ": " << w.status().ToString();
  }
}

}  // namespace
}  // namespace gpuop::mig
