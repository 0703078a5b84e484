#include "sim/nvml/mig_engine.h"

#include <gtest/gtest.h>

namespace gpuop::sim {
namespace {

GpuModel Model(const std::string& key) { return FindModel(key).value(); }

// Creates GIs of the named profiles one after another with automatic placement;
// returns how many fit.
size_t Pack(const GpuModel& m, const std::vector<std::string>& names,
            std::vector<GiRecord>* layout) {
  size_t n = 0;
  for (const auto& name : names) {
    const GiProfile* p = nullptr;
    for (const auto& q : m.mig_profiles) {
      if (q.name == name) p = &q;
    }
    EXPECT_NE(p, nullptr) << name;
    if (p == nullptr) return n;
    GiRecord gi;
    if (PlanGpuInstance(m, *layout, *p, std::nullopt, &gi) != MigVerdict::kOk) return n;
    gi.serial = layout->size() + 1;
    layout->push_back(gi);
    ++n;
  }
  return n;
}

TEST(MigEngineTest, GiIdsFollowThePlacementRule) {
  GpuModel h = Model("h100-80gb");
  EXPECT_EQ(GiIdFor(h, 0, 8), 0u);  // 7g
  EXPECT_EQ(GiIdFor(h, 0, 4), 1u);  // 4g or 3g at 0
  EXPECT_EQ(GiIdFor(h, 4, 4), 2u);  // 3g at 4
  EXPECT_EQ(GiIdFor(h, 2, 2), 4u);
  for (unsigned p = 0; p < 7; ++p) EXPECT_EQ(GiIdFor(h, p, 1), 7 + p);  // 1g → 7..13
  GpuModel a30 = Model("a30");
  EXPECT_EQ(GiIdFor(a30, 0, 4), 0u);
  EXPECT_EQ(GiIdFor(a30, 2, 2), 2u);
  EXPECT_EQ(GiIdFor(a30, 3, 1), 6u);
}

TEST(MigEngineTest, ValidPackingsFill) {
  GpuModel h = Model("h100-80gb");
  std::vector<GiRecord> l;
  EXPECT_EQ(Pack(h, std::vector<std::string>(7, "1g.10gb"), &l), 7u);
  EXPECT_TRUE(LayoutValid(h, l));
  std::vector<unsigned> ids;
  for (const auto& gi : l) ids.push_back(gi.id);
  EXPECT_EQ(ids, (std::vector<unsigned>{7, 8, 9, 10, 11, 12, 13}));

  l.clear();
  EXPECT_EQ(Pack(h, {"4g.40gb", "3g.40gb"}, &l), 2u);
  EXPECT_EQ(l[0].id, 1u);
  EXPECT_EQ(l[1].id, 2u);
  EXPECT_EQ(l[1].start, 4u);

  // all-balanced on A100-40GB: 2x 1g.5gb, 1x 2g.10gb, 1x 3g.20gb. First-fit placement
  // takes the lower half for the 3g, leaving 1g no start at 7: mig-parted therefore
  // tries other orders, and small-first fits.
  l.clear();
  GpuModel a = Model("a100-40gb");
  EXPECT_EQ(Pack(a, {"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"}, &l), 3u);
  l.clear();
  EXPECT_EQ(Pack(a, {"1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"}, &l), 4u);
  EXPECT_TRUE(LayoutValid(a, l));
  EXPECT_EQ(l[3].id, 2u);  // the 3g went to the upper half

  l.clear();
  EXPECT_EQ(Pack(a, std::vector<std::string>(4, "1g.10gb"), &l), 4u);
  EXPECT_EQ(l[3].start, 6u);
  EXPECT_EQ(l[3].id, 6u);

  l.clear();
  EXPECT_EQ(Pack(a, {"2g.10gb", "2g.10gb", "3g.20gb"}, &l), 3u);
}

TEST(MigEngineTest, OverfullLayoutsAreRefused) {
  GpuModel h = Model("h100-80gb");
  std::vector<GiRecord> l;
  EXPECT_EQ(Pack(h, std::vector<std::string>(8, "1g.10gb"), &l), 7u);
  l.clear();
  EXPECT_EQ(Pack(h, {"7g.80gb", "1g.10gb"}, &l), 1u);
  l.clear();
  EXPECT_EQ(Pack(h, {"4g.40gb", "4g.40gb"}, &l), 1u);  // max count 1
  l.clear();
  EXPECT_EQ(Pack(h, {"3g.40gb", "3g.40gb", "1g.10gb"}, &l), 2u);  // memory is full
  l.clear();
  EXPECT_EQ(Pack(h, std::vector<std::string>(5, "1g.20gb"), &l), 4u);
  l.clear();
  // 2g at 0, 2, 4 and 1g at 6: 7 compute slices, then nothing.
  EXPECT_EQ(Pack(h, {"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb", "1g.10gb"}, &l), 4u);

  // An explicit placement outside the profile's starts is invalid; an overlap is no room.
  const GiProfile* g3 = h.ProfileById(9);
  GiRecord gi;
  EXPECT_EQ(PlanGpuInstance(h, {}, *g3, 2u, &gi), MigVerdict::kInvalid);
  l.clear();
  Pack(h, {"1g.10gb"}, &l);
  EXPECT_EQ(PlanGpuInstance(h, l, *g3, 0u, &gi), MigVerdict::kNoRoom);
  EXPECT_EQ(PlanGpuInstance(h, l, *g3, 4u, &gi), MigVerdict::kOk);
  EXPECT_EQ(gi.id, 2u);
}

TEST(MigEngineTest, MediaExtensionsAtMostOnce) {
  GpuModel h = Model("h100-80gb");
  std::vector<GiRecord> l;
  EXPECT_EQ(Pack(h, {"1g.10gb+me", "1g.10gb+me"}, &l), 1u);
  EXPECT_EQ(Pack(h, {"1g.10gb", "1g.10gb"}, &l), 2u);
  GpuModel a30 = Model("a30");
  l.clear();
  EXPECT_EQ(Pack(a30, {"1g.6gb+me", "2g.12gb+me"}, &l), 1u);  // one media engine set per GPU
  l.clear();
  EXPECT_EQ(Pack(a30, {"2g.12gb+me", "1g.6gb", "1g.6gb", "1g.6gb"}, &l), 3u);
}

TEST(MigEngineTest, A30HasFourSlices) {
  GpuModel a30 = Model("a30");
  std::vector<GiRecord> l;
  EXPECT_EQ(Pack(a30, std::vector<std::string>(5, "1g.6gb"), &l), 4u);
  std::vector<unsigned> ids;
  for (const auto& gi : l) ids.push_back(gi.id);
  EXPECT_EQ(ids, (std::vector<unsigned>{3, 4, 5, 6}));
  l.clear();
  EXPECT_EQ(Pack(a30, {"4g.24gb", "1g.6gb"}, &l), 1u);
  EXPECT_EQ(l[0].id, 0u);
  l.clear();
  EXPECT_EQ(Pack(a30, {"2g.12gb", "2g.12gb", "2g.12gb"}, &l), 2u);
  EXPECT_EQ(l[1].id, 2u);
}

TEST(MigEngineTest, RemainingCapacity) {
  GpuModel h = Model("h100-80gb");
  std::vector<GiRecord> l;
  EXPECT_EQ(GpuInstanceRemainingCapacity(h, l, *h.ProfileById(19)), 7u);
  EXPECT_EQ(GpuInstanceRemainingCapacity(h, l, *h.ProfileById(9)), 2u);
  Pack(h, {"3g.40gb"}, &l);  // at 0: 1g fits at 4, 5 and 6 (no 1g starts at 7)
  EXPECT_EQ(GpuInstanceRemainingCapacity(h, l, *h.ProfileById(19)), 3u);
  EXPECT_EQ(GpuInstanceRemainingCapacity(h, l, *h.ProfileById(0)), 0u);
  EXPECT_EQ(GpuInstanceRemainingCapacity(h, l, *h.ProfileById(20)), 1u);
}

TEST(MigEngineTest, ComputeInstances) {
  GpuModel h = Model("h100-80gb");
  const GiProfile& g7 = *h.ProfileById(0);
  GiRecord gi;
  ASSERT_EQ(PlanGpuInstance(h, {}, g7, std::nullopt, &gi), MigVerdict::kOk);

  auto c1 = CiProfileFor(g7, 0);
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->instance_count, 7u);
  EXPECT_EQ(c1->multiprocessors, 132u / 7);
  auto c3 = CiProfileFor(g7, 2);
  ASSERT_TRUE(c3);
  EXPECT_EQ(c3->instance_count, 2u);
  EXPECT_FALSE(CiProfileFor(g7, 5));                  // 8-slice CI: not on these GPUs
  EXPECT_FALSE(CiProfileFor(*h.ProfileById(14), 2));  // 3 slices > 2g

  CiRecord ci;
  ASSERT_EQ(PlanComputeInstance(g7, gi, 3, &ci), MigVerdict::kOk);  // 4c at 0
  EXPECT_EQ(ci.id, 0u);
  EXPECT_EQ(ci.start, 0u);
  gi.cis.push_back(ci);
  ASSERT_EQ(PlanComputeInstance(g7, gi, 2, &ci), MigVerdict::kOk);  // 3c at 4
  EXPECT_EQ(ci.id, 1u);
  EXPECT_EQ(ci.start, 4u);
  gi.cis.push_back(ci);
  EXPECT_EQ(PlanComputeInstance(g7, gi, 0, &ci), MigVerdict::kNoRoom);
  EXPECT_EQ(ComputeInstanceRemainingCapacity(g7, gi, 0), 0u);
  EXPECT_EQ(PlanComputeInstance(g7, gi, 4, &ci), MigVerdict::kNoRoom);

  gi.cis.erase(gi.cis.begin());  // lowest free id is reused
  ASSERT_EQ(PlanComputeInstance(g7, gi, 0, &ci), MigVerdict::kOk);
  EXPECT_EQ(ci.id, 0u);
  EXPECT_EQ(ComputeInstanceRemainingCapacity(g7, gi, 0), 4u);

  EXPECT_EQ(MigDeviceProfileName(h, *h.ProfileById(14), 1), "1c.2g.20gb");
  EXPECT_EQ(MigDeviceProfileName(h, *h.ProfileById(14), 2), "2g.20gb");
}

TEST(MigEngineTest, LayoutValidRejectsBadLayouts) {
  GpuModel h = Model("h100-80gb");
  GiRecord a{.id = 1, .profile_id = 9, .start = 0, .size = 4};
  GiRecord b{.id = 1, .profile_id = 5, .start = 0, .size = 4};
  EXPECT_TRUE(LayoutValid(h, {a}));
  EXPECT_FALSE(LayoutValid(h, {a, b}));  // overlap
  GiRecord wrong_id{.id = 3, .profile_id = 9, .start = 4, .size = 4};
  EXPECT_FALSE(LayoutValid(h, {wrong_id}));
  GiRecord unknown{.id = 0, .profile_id = 99, .start = 0, .size = 8};
  EXPECT_FALSE(LayoutValid(h, {unknown}));
}

}  // namespace
}  // namespace gpuop::sim
