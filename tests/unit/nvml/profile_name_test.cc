// NVIDIA's MIG profile naming rule, checked against the names nvidia-smi
// prints for the numbers NVML reports on each GPU (memorySizeMB per profile,
// total memory of the GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nvml/device.h"
#include "nvml/nvml_abi.h"

namespace gpuop::nvml {
namespace {

constexpr uint64_t MiB(uint64_t n) { return n << 20; }

struct Case {
  unsigned index;   // NVML_GPU_INSTANCE_PROFILE_*
  unsigned slices;  // G
  uint64_t memory_mib;
  const char* want;
};

void CheckGpu(uint64_t total_mib, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    EXPECT_EQ(MigProfileName(c.slices, c.slices, c.memory_mib, MiB(total_mib), c.index), c.want)
        << "total " << total_mib << " MiB, profile " << c.index << ", " << c.memory_mib << " MiB";
  }
}

TEST(MigProfileNameTest, A100_40GB) {
  CheckGpu(40960, {
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 1, 4864, "1g.5gb"},
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 4864, "1g.5gb+me"},
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 1, 9856, "1g.10gb"},
                      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 2, 9856, "2g.10gb"},
                      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 3, 19968, "3g.20gb"},
                      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 4, 19968, "4g.20gb"},
                      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 7, 40192, "7g.40gb"},
                  });
}

TEST(MigProfileNameTest, A100_80GB) {
  CheckGpu(81920, {
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 1, 9856, "1g.10gb"},
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 9856, "1g.10gb+me"},
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 1, 19968, "1g.20gb"},
                      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 2, 19968, "2g.20gb"},
                      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 3, 40192, "3g.40gb"},
                      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 4, 40192, "4g.40gb"},
                      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 7, 80384, "7g.80gb"},
                  });
}

TEST(MigProfileNameTest, H100_80GB) {
  // nvidia-smi: 81559 MiB total; profile memory 9.75, 19.62, 39.5, 79.25 GiB.
  CheckGpu(81559, {
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 1, 9984, "1g.10gb"},
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 9984, "1g.10gb+me"},
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 1, 20096, "1g.20gb"},
                      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 2, 20096, "2g.20gb"},
                      {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 3, 40448, "3g.40gb"},
                      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 4, 40448, "4g.40gb"},
                      {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 7, 81152, "7g.80gb"},
                  });
}

TEST(MigProfileNameTest, H200_141GB) {
  // 143771 MiB total; 16, 32.25, 69.5 and ~139.5 GiB profiles. 3g rounds
  // 70.5 up to 71, which is what NVIDIA prints.
  CheckGpu(143771, {
                       {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 1, 16384, "1g.18gb"},
                       {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 16384, "1g.18gb+me"},
                       {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 1, 33024, "1g.35gb"},
                       {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 2, 33024, "2g.35gb"},
                       {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 3, 71168, "3g.71gb"},
                       {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 4, 71168, "4g.71gb"},
                       {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 7, 142848, "7g.141gb"},
                   });
}

TEST(MigProfileNameTest, A30) {
  // Four memory slices; the 2-slice media profile is 2_SLICE_REV1.
  CheckGpu(24576, {
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 1, 5952, "1g.6gb"},
                      {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 5952, "1g.6gb+me"},
                      {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 2, 12160, "2g.12gb"},
                      {NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, 2, 12160, "2g.12gb+me"},
                      {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 4, 24320, "4g.24gb"},
                  });
  // A30 boards that report 24258 MiB name the same profiles.
  EXPECT_EQ(MigProfileName(1, 1, 5836, MiB(24258), NVML_GPU_INSTANCE_PROFILE_1_SLICE), "1g.6gb");
}

TEST(MigProfileNameTest, ComputeInstanceNamesCarryTheirSliceCount) {
  EXPECT_EQ(MigProfileName(1, 2, 20096, MiB(81559), NVML_GPU_INSTANCE_PROFILE_2_SLICE),
            "1c.2g.20gb");
  EXPECT_EQ(MigProfileName(2, 3, 19968, MiB(40960), NVML_GPU_INSTANCE_PROFILE_3_SLICE),
            "2c.3g.20gb");
  EXPECT_EQ(MigProfileName(3, 7, 81152, MiB(81559), NVML_GPU_INSTANCE_PROFILE_7_SLICE),
            "3c.7g.80gb");
  // A full CI has the plain GI name.
  EXPECT_EQ(MigProfileName(4, 4, 40448, MiB(81559), NVML_GPU_INSTANCE_PROFILE_4_SLICE), "4g.40gb");
}

// The profile kinds of the RTX PRO 6000 Blackwell (NVML 13.3 indices 0xA-0x11),
// suffixed as nvidia-smi, go-nvlib and mig-parted write them.
TEST(MigProfileNameTest, NewProfileKindsCarryTheirSuffix) {
  const uint64_t total = MiB(97887);
  EXPECT_EQ(MigProfileName(1, 1, 24186, total, NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX),
            "1g.24gb+gfx");
  EXPECT_EQ(MigProfileName(2, 2, 48517, total, NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX),
            "2g.48gb+gfx");
  EXPECT_EQ(MigProfileName(4, 4, 97280, total, NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX),
            "4g.96gb+gfx");
  EXPECT_EQ(MigProfileName(3, 3, 72000, total, NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX),
            "3g.72gb+gfx");
  EXPECT_EQ(MigProfileName(1, 1, 24186, total, NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME),
            "1g.24gb-me");
  EXPECT_EQ(MigProfileName(2, 2, 48517, total, NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME),
            "2g.48gb-me");
  EXPECT_EQ(MigProfileName(1, 1, 24186, total, NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME),
            "1g.24gb+me.all");
  EXPECT_EQ(MigProfileName(1, 2, 48517, total, NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME),
            "1c.2g.48gb+me.all");
  EXPECT_EQ(MigProfileName(1, 1, 24186, total, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1),
            "1g.24gb+me");
}

TEST(MigProfileNameTest, MemoryGbEdges) {
  EXPECT_EQ(MigMemoryGb(0, MiB(81559)), 0u);
  EXPECT_EQ(MigMemoryGb(100, 0), 0u);  // no division by zero
  EXPECT_EQ(MigMemoryGb(81559, MiB(81559)), 80u);
}

TEST(CiProfileIndexTest, MapsSlicesToNvmlEnum) {
  EXPECT_EQ(CiProfileIndexForSlices(1), NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE);
  EXPECT_EQ(CiProfileIndexForSlices(2), NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE);
  EXPECT_EQ(CiProfileIndexForSlices(3), NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE);
  EXPECT_EQ(CiProfileIndexForSlices(4), NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE);
  EXPECT_EQ(CiProfileIndexForSlices(6), NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE);
  EXPECT_EQ(CiProfileIndexForSlices(7), NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE);
  EXPECT_EQ(CiProfileIndexForSlices(8), NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE);
  EXPECT_FALSE(CiProfileIndexForSlices(5).has_value());
  EXPECT_FALSE(CiProfileIndexForSlices(0).has_value());
}

TEST(NamesTest, ArchitectureBrandCuda) {
  EXPECT_EQ(ArchitectureName(NVML_DEVICE_ARCH_HOPPER), "Hopper");
  EXPECT_EQ(ArchitectureName(NVML_DEVICE_ARCH_AMPERE), "Ampere");
  EXPECT_EQ(ArchitectureName(NVML_DEVICE_ARCH_RUBIN), "Rubin");
  EXPECT_EQ(ArchitectureName(NVML_DEVICE_ARCH_UNKNOWN), "Unknown");
  EXPECT_EQ(BrandName(NVML_BRAND_TESLA), "Tesla");
  EXPECT_EQ(BrandName(NVML_BRAND_NVIDIA), "NVIDIA");
  EXPECT_EQ(CudaVersionString(12080), "12.8");
  EXPECT_EQ(CudaVersionString(12050), "12.5");
  EXPECT_EQ(CudaVersionString(11040), "11.4");
  EXPECT_EQ(CudaVersionString(0), "");
}

}  // namespace
}  // namespace gpuop::nvml
