// The DRA checkpoint: round trip, corruption detected by the checksum and
// named with the fix, a checkpoint of another boot dropped.
#include "dra/checkpoint.h"

#include <gtest/gtest.h>

#include "base/files.h"
#include "tests/testing/temp_dir.h"

namespace gpuop::dra {
namespace {

Checkpoint Sample() {
  Checkpoint cp;
  cp.node_boot_id = "boot-1";
  CheckpointClaim a;
  a.state = PrepareState::kCompleted;
  a.name = "train";
  a.ns = "team-a";
  a.time_slice_applied = true;
  CheckpointDevice gpu;
  gpu.requests = {"gpu"};
  gpu.pool = "node-a";
  gpu.device = "gpu-0";
  gpu.cdi_ids = {"k8s.gpu.nvidia.com/claim=uid-a-gpu-0"};
  gpu.uuid = "GPU-0000";
  CheckpointDevice mig;
  mig.requests = {"small"};
  mig.pool = "node-a";
  mig.device = "gpu-1-mig-1g5gb-19-0";
  mig.admin_access = true;
  mig.cdi_ids = {"k8s.gpu.nvidia.com/claim=uid-a-gpu-1-mig-1g5gb-19-0"};
  mig.type = DeviceType::kMig;
  mig.uuid = "GPU-1111";
  mig.mig_uuid = "MIG-2222";
  a.devices = {gpu, mig};
  cp.claims["uid-a"] = a;
  CheckpointClaim b;
  b.name = "infer";
  b.ns = "team-b";
  cp.claims["uid-b"] = b;  // PrepareStarted, no devices yet
  return cp;
}

TEST(Checkpoint, RoundTrip) {
  const Checkpoint cp = Sample();
  const std::string text = SerializeCheckpoint(cp);
  auto back = ParseCheckpoint(text, "cp.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, cp);
  EXPECT_NE(text.find("\"PrepareStarted\""), std::string::npos);
  EXPECT_NE(text.find("\"migUUID\": \"MIG-2222\""), std::string::npos);
  EXPECT_EQ(SerializeCheckpoint(*back), text);  // canonical
}

TEST(Checkpoint, CorruptionIsReportedWithTheFix) {
  std::string text = SerializeCheckpoint(Sample());
  // An edit that keeps the JSON valid: only the checksum notices.
  std::string edited = text;
  edited.replace(edited.find("gpu-0\""), 6, "gpu-7\"");
  auto r = ParseCheckpoint(edited, "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("DRA checkpoint "
                                      "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json is "
                                      "corrupt: checksum"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("move it away"), std::string::npos);

  auto torn = ParseCheckpoint(text.substr(0, text.size() / 2), "cp.json");
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find("cp.json is corrupt: not a JSON object"),
            std::string::npos);

  auto other = ParseCheckpoint(R"({"v1":{},"checksum":123})", "cp.json");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("is not a gpuop checkpoint"), std::string::npos);

  std::string newer = text;
  newer.replace(newer.find("\"version\": 1"), 12, "\"version\": 2");
  auto v2 = ParseCheckpoint(newer, "cp.json");
  ASSERT_FALSE(v2.ok());
  EXPECT_NE(v2.status().message().find("has version 2; this gpuop reads version 1"),
            std::string::npos);
}

TEST(Checkpoint, ShapeErrorsBehindAValidChecksumAreCorruption) {
  // A file with the right checksum over a wrong shape (a bug, not a disk
  // error) is still one clear error, not an exception.
  Checkpoint cp = Sample();
  std::string text = SerializeCheckpoint(cp);
  text.replace(text.find("\"PrepareCompleted\""), 18, "\"PrepareFinished\"");
  auto r = ParseCheckpoint(text, "cp.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is corrupt"), std::string::npos);
}

TEST(CheckpointFile, LoadSaveAndBootId) {
  gpuop::testing::TempDir dir("dra-cp");
  const std::string boot = dir.path() + "/boot_id";
  ASSERT_TRUE(WriteFileAtomic(boot, "boot-1\n").ok());
  CheckpointFile file(dir.path() + "/checkpoint.json", boot);

  auto empty = file.Load();
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->node_boot_id, "boot-1");
  EXPECT_TRUE(empty->claims.empty());

  ASSERT_TRUE(file.Save(Sample()).ok());
  auto loaded = file.Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, Sample());

  // After a reboot every preparation is gone; so is the checkpoint's content.
  ASSERT_TRUE(WriteFileAtomic(boot, "boot-2\n").ok());
  auto rebooted = file.Load();
  ASSERT_TRUE(rebooted.ok()) << rebooted.status().ToString();
  EXPECT_EQ(rebooted->node_boot_id, "boot-2");
  EXPECT_TRUE(rebooted->claims.empty());

  ASSERT_TRUE(WriteFileAtomic(file.path(), "{\"kind\":").ok());
  auto corrupt = file.Load();
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find(file.path() + " is corrupt"), std::string::npos);

  CheckpointFile no_boot(file.path(), dir.path() + "/missing");
  auto unreadable = no_boot.Load();
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.status().message().find("boot ID"), std::string::npos);
}

}  // namespace
}  // namespace gpuop::dra
