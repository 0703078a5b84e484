// The NVML binding (nvml::Client) against the GPU simulator, libnvml-sim.so,
// loaded through the same dlopen path as the driver's libnvidia-ml.so.1.
// Each test gets its own simulated machine and state directory; the
// simulator's control functions (sim/nvml/state.h) stand in for what happens
// to real GPUs: resets, XIDs, ECC errors, a GPU falling off the bus.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nvml/client.h"
#include "nvml/format.h"
#include "sim/nvml/state.h"
#include "tests/testing/sim_env.h"

namespace gpuop::nvml {
namespace {

using testing::kSimNvml;

class NvmlSimTest : public ::testing::Test {
 protected:
  // Points the simulator at `machine` with a fresh state directory. The
  // simulator reads these when NVML is first initialised in the process, so
  // any previous Client must be gone.
  // A seed per state directory gives its GPUs their own UUIDs, so nothing
  // one simulated node handed out in this process is mistaken for another's.
  void UseMachine(const std::string& machine) {
    client_.reset();
    sim_.Point(machine, sim_.dir(), machine);
  }

  Client& Open(const std::string& machine) {
    UseMachine(machine);
    auto c = sim_.OpenNvml();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    client_ = std::move(c).value();
    return *client_;
  }

  // What a GPU reset does on the node (nvidia-smi -r), through the shared state.
  void ResetGpu(unsigned gpu) {
    auto store = sim::OpenStateFromEnv(true);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(sim::ResetGpu(**store, gpu).ok());
  }

  std::unique_ptr<sim::StateStore> Store() {
    auto store = sim::OpenStateFromEnv(true);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Enables MIG on `gpu`, resetting it when NVML says a reset is needed.
  void EnableMig(Client& c, unsigned gpu) {
    auto change = c.SetMigMode(gpu, true);
    ASSERT_TRUE(change.ok()) << change.status().ToString();
    EXPECT_TRUE(change->enabled);
    if (change->reset_required) ResetGpu(gpu);
    auto g = c.GpuByIndex(gpu);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(g->mig_enabled);
  }

  testing::SimEnv sim_;
  std::unique_ptr<Client> client_;
};

TEST_F(NvmlSimTest, DgxH100HasEightDistinctH100s) {
  Client& c = Open("dgx-h100");
  EXPECT_TRUE(c.simulated());  // the simulator says so (hints name its commands)
  auto gpus = c.Gpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 8u);
  std::set<std::string> uuids, buses;
  std::set<int> minors;
  for (unsigned i = 0; i < gpus->size(); ++i) {
    const Gpu& g = (*gpus)[i];
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(g.uuid.rfind("GPU-", 0), 0u) << g.uuid;
    EXPECT_EQ(g.uuid.size(), 40u) << g.uuid;
    uuids.insert(g.uuid);
    buses.insert(g.pci.bus_id);
    minors.insert(g.minor);
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);
  EXPECT_EQ(minors.size(), 8u);

  auto sys = c.System();
  ASSERT_TRUE(sys.ok()) << sys.status().ToString();
  EXPECT_FALSE(sys->driver_version.empty());
  EXPECT_GT(sys->cuda_driver_version, 0);
  EXPECT_EQ(sys->cuda_version, CudaVersionString(sys->cuda_driver_version));

  // `gpuop nvml list` shows one line per GPU.
  std::string list = FormatGpuList(*gpus);
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 8);
  EXPECT_NE(list.find("GPU 7: NVIDIA H100 80GB HBM3 (UUID: " + (*gpus)[7].uuid + ")\n"),
            std::string::npos);
}

struct ModelCase {
  const char* key;
  const char* name;
  uint64_t memory_mib;
  int cc_major, cc_minor;
  uint32_t pci_device_id;
  const char* architecture;
  bool mig;
};

TEST_F(NvmlSimTest, EachModelReportsItsRealIdentity) {
  const ModelCase cases[] = {
      {"a100-40gb", "NVIDIA A100-SXM4-40GB", 40960, 8, 0, 0x20B010DE, "Ampere", true},
      {"a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, 8, 0, 0x20B210DE, "Ampere", true},
      {"h100-80gb", "NVIDIA H100 80GB HBM3", 81559, 9, 0, 0x233010DE, "Hopper", true},
      {"h200-141gb", "NVIDIA H200", 143771, 9, 0, 0x233510DE, "Hopper", true},
      {"l40s", "NVIDIA L40S", 46068, 8, 9, 0x26B910DE, "Ada Lovelace", false},
      {"t4", "Tesla T4", 15360, 7, 5, 0x1EB810DE, "Turing", false},
      {"a30", "NVIDIA A30", 24576, 8, 0, 0x20B710DE, "Ampere", true},
  };
  for (const ModelCase& m : cases) {
    SCOPED_TRACE(m.key);
    Client& c = Open(m.key);
    auto gpus = c.Gpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    ASSERT_GE(gpus->size(), 1u);
    const Gpu& g = (*gpus)[0];
    EXPECT_EQ(g.name, m.name);
    EXPECT_EQ(g.memory_mib, m.memory_mib);
    EXPECT_EQ(g.cc_major, m.cc_major);
    EXPECT_EQ(g.cc_minor, m.cc_minor);
    EXPECT_EQ(g.pci.device_id, m.pci_device_id);
    EXPECT_EQ(g.architecture, m.architecture);
    EXPECT_EQ(g.mig_capable, m.mig);
    EXPECT_FALSE(g.mig_enabled);
  }
}

struct MigCase {
  const char* key;
  std::vector<std::string> profiles;  // GI profile names NVML lists, by NVML enum order
  unsigned small_id;                  // driver id of the 1-slice profile
  const char* small_name;
  unsigned mid_id;  // a multi-slice profile for a 1c.<G>g CI
  const char* mid_ci_name;
};

TEST_F(NvmlSimTest, MigCreateAndDestroyThroughTheClient) {
  const MigCase cases[] = {
      {"a100-40gb",
       {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", "1g.5gb+me", "1g.10gb"},
       19,
       "1g.5gb",
       9,
       "1c.3g.20gb"},
      {"a100-80gb",
       {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "1g.20gb"},
       19,
       "1g.10gb",
       9,
       "1c.3g.40gb"},
      {"h100-80gb",
       {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "1g.20gb"},
       19,
       "1g.10gb",
       9,
       "1c.3g.40gb"},
      {"h200-141gb",
       {"1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", "1g.18gb+me", "1g.35gb"},
       19,
       "1g.18gb",
       9,
       "1c.3g.71gb"},
      {"a30",
       {"1g.6gb", "2g.12gb", "4g.24gb", "1g.6gb+me", "2g.12gb+me"},
       14,
       "1g.6gb",
       5,
       "1c.2g.12gb"},
  };
  for (const MigCase& m : cases) {
    SCOPED_TRACE(m.key);
    Client& c = Open(m.key);
    EnableMig(c, 0);

    auto profiles = c.GiProfiles(0);
    ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
    std::vector<std::string> names;
    for (const auto& p : *profiles) names.push_back(p.name);
    EXPECT_EQ(names, m.profiles);
    for (const auto& p : *profiles) EXPECT_FALSE(p.placements.empty()) << p.name;

    // A 1-slice GI with one full CI: a MIG device the device plugin would list.
    auto gi = c.CreateGpuInstance(0, m.small_id);
    ASSERT_TRUE(gi.ok()) << gi.status().ToString();
    EXPECT_EQ(gi->profile_id, m.small_id);
    EXPECT_EQ(gi->profile_name, m.small_name);
    auto ci = c.CreateComputeInstance(0, gi->id, *CiProfileIndexForSlices(1));
    ASSERT_TRUE(ci.ok()) << ci.status().ToString();
    EXPECT_EQ(ci->profile_name, m.small_name);

    // A bigger GI split with a 1-slice CI gets the <C>c.<G>g name.
    auto mid = c.CreateGpuInstance(0, m.mid_id);
    ASSERT_TRUE(mid.ok()) << mid.status().ToString();
    auto mid_ci = c.CreateComputeInstance(0, mid->id, *CiProfileIndexForSlices(1));
    ASSERT_TRUE(mid_ci.ok()) << mid_ci.status().ToString();
    EXPECT_EQ(mid_ci->profile_name, m.mid_ci_name);

    auto g = c.GpuByIndex(0);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_EQ(g->mig_devices.size(), 2u);
    std::set<std::string> mig_profiles;
    for (const MigDevice& d : g->mig_devices) {
      EXPECT_EQ(d.uuid.rfind("MIG-", 0), 0u) << d.uuid;
      mig_profiles.insert(d.profile);
      if (d.gi_id == gi->id) {
        EXPECT_EQ(d.ci_id, ci->id);
        EXPECT_EQ(d.gi_profile_id, m.small_id);
        EXPECT_EQ(d.placement, gi->placement);
        EXPECT_GT(d.memory_mib, 0u);
        EXPECT_GT(d.multiprocessors, 0u);
      }
    }
    EXPECT_EQ(mig_profiles, (std::set<std::string>{m.small_name, m.mid_ci_name}));
    std::string list = FormatGpuList({*g});
    EXPECT_NE(list.find(std::string("  MIG ") + m.small_name), std::string::npos) << list;

    auto gis = c.GpuInstances(0);
    ASSERT_TRUE(gis.ok()) << gis.status().ToString();
    ASSERT_EQ(gis->size(), 2u);
    for (const auto& x : *gis) EXPECT_EQ(x.compute_instances.size(), 1u);

    // A GI with a CI in it cannot go; NVML says it is in use.
    Status busy = c.DestroyGpuInstance(0, gi->id);
    EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.ToString();

    ASSERT_TRUE(c.DestroyComputeInstance(0, gi->id, ci->id).ok());
    ASSERT_TRUE(c.DestroyGpuInstance(0, gi->id).ok());
    ASSERT_TRUE(c.DestroyComputeInstance(0, mid->id, mid_ci->id).ok());
    ASSERT_TRUE(c.DestroyGpuInstance(0, mid->id).ok());
    gis = c.GpuInstances(0);
    ASSERT_TRUE(gis.ok()) << gis.status().ToString();
    EXPECT_TRUE(gis->empty());
    EXPECT_EQ(c.DestroyGpuInstance(0, gi->id).code(), StatusCode::kNotFound);
  }
}

TEST_F(NvmlSimTest, MigPlacementAndBadProfile) {
  Client& c = Open("h100-80gb");
  EnableMig(c, 0);
  auto gi = c.CreateGpuInstance(0, 19, Placement{3, 1});
  ASSERT_TRUE(gi.ok()) << gi.status().ToString();
  EXPECT_EQ(gi->placement, (Placement{3, 1}));
  auto bad = c.CreateGpuInstance(0, 77);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("19 (1g.10gb)"), std::string::npos)
      << bad.status().message();
}

TEST_F(NvmlSimTest, MigNeedsMigModeFirst) {
  Client& c = Open("a100-40gb");
  auto gi = c.CreateGpuInstance(0, 19);
  ASSERT_FALSE(gi.ok());
  EXPECT_EQ(gi.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(gi.status().message().find("has MIG disabled"), std::string::npos);

  auto change = c.SetMigMode(0, true);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_TRUE(change->reset_required);
  EXPECT_FALSE(change->current);
  auto g = c.GpuByIndex(0);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->mig_enabled);
  EXPECT_TRUE(g->mig_pending);
}

TEST_F(NvmlSimTest, MigIsNotSupportedOnL40sAndT4) {
  for (const char* key : {"l40s", "t4"}) {
    SCOPED_TRACE(key);
    Client& c = Open(key);
    auto change = c.SetMigMode(0, true);
    ASSERT_FALSE(change.ok());
    EXPECT_EQ(change.status().code(), StatusCode::kNotSupported);
    auto g = c.GpuByIndex(0);
    ASSERT_TRUE(g.ok());
    EXPECT_NE(change.status().message().find("(" + g->name + ") does not support MIG"),
              std::string::npos)
        << change.status().message();
    EXPECT_EQ(c.GiProfiles(0).status().code(), StatusCode::kNotSupported);
    EXPECT_EQ(c.CreateGpuInstance(0, 19).status().code(), StatusCode::kNotSupported);
  }
}

TEST_F(NvmlSimTest, TelemetryFieldsPresentWhereTheGpuHasThem) {
  Client& c = Open("dgx-h100");
  auto t = c.ReadTelemetry(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->gpu_temp_c && t->memory_temp_c);
  EXPECT_GT(*t->gpu_temp_c, 0u);
  ASSERT_TRUE(t->gpu_util_pct && t->mem_util_pct && t->enc_util_pct && t->dec_util_pct);
  EXPECT_LE(*t->gpu_util_pct, 100u);
  ASSERT_TRUE(t->power_w && t->power_limit_w);
  EXPECT_GT(*t->power_w, 0.0);
  EXPECT_LE(*t->power_w, *t->power_limit_w);
  EXPECT_TRUE(t->total_energy_mj.has_value());
  ASSERT_TRUE(t->sm_clock_mhz && t->mem_clock_mhz);
  ASSERT_TRUE(t->fb_total_mib && t->fb_free_mib && t->fb_used_mib && t->fb_reserved_mib);
  EXPECT_EQ(*t->fb_total_mib, 81559u);
  EXPECT_LE(*t->fb_used_mib + *t->fb_free_mib, *t->fb_total_mib);
  EXPECT_EQ(t->ecc_dbe_volatile, 0u);
  EXPECT_EQ(t->ecc_sbe_aggregate, 0u);
  EXPECT_EQ(t->remapped_rows_uncorrectable, 0u);
  EXPECT_EQ(t->remapped_rows_failure, false);
  EXPECT_TRUE(t->pcie_replay && t->pcie_tx_kbps && t->pcie_rx_kbps);
  EXPECT_EQ(t->nvlink_active_links, 18u);
  EXPECT_TRUE(t->nvlink_tx_kib && t->nvlink_rx_kib);
  EXPECT_TRUE(t->clock_event_reasons.has_value());
}

TEST_F(NvmlSimTest, TelemetryLeavesUnsupportedFieldsEmpty) {
  Client& c = Open("t4");
  auto t = c.ReadTelemetry(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->gpu_temp_c.has_value());
  EXPECT_TRUE(t->power_w.has_value());
  // A PCIe-only Turing board: no NVLink and no row remapping.
  EXPECT_FALSE(t->nvlink_active_links.has_value());
  EXPECT_FALSE(t->nvlink_tx_kib.has_value());
  EXPECT_FALSE(t->remapped_rows_correctable.has_value());
  EXPECT_FALSE(t->remapped_rows_pending.has_value());
}

TEST_F(NvmlSimTest, EccErrorsShowInTelemetry) {
  Client& c = Open("a100-80gb");
  auto store = Store();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(sim::InjectEcc(*store, 0, /*double_bit=*/true).ok());
  auto t = c.ReadTelemetry(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ecc_dbe_volatile, 1u);
  EXPECT_EQ(t->ecc_dbe_aggregate, 1u);
  EXPECT_EQ(t->remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(t->remapped_rows_pending, true);
}

TEST_F(NvmlSimTest, MigDeviceTelemetryIsMostlyUnsupported) {
  Client& c = Open("a100-40gb");
  EnableMig(c, 0);
  auto gi = c.CreateGpuInstance(0, 19);
  ASSERT_TRUE(gi.ok()) << gi.status().ToString();
  ASSERT_TRUE(c.CreateComputeInstance(0, gi->id, *CiProfileIndexForSlices(1)).ok());
  auto t = c.ReadMigTelemetry(0, 0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->gpu_temp_c.has_value());
  EXPECT_FALSE(t->power_w.has_value());
  EXPECT_EQ(c.ReadMigTelemetry(0, 5).status().code(), StatusCode::kNotFound);
}

TEST_F(NvmlSimTest, LostGpuIsUnavailableAndNamed) {
  Client& c = Open("dgx-h100");
  auto g = c.GpuByIndex(3);
  ASSERT_TRUE(g.ok());
  auto store = Store();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(sim::MarkGpuLost(*store, 3).ok());
  auto t = c.ReadTelemetry(3);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
  // "GPU 3 (GPU-...): nvmlDevice...: GPU is lost"
  const std::string& m = t.status().message();
  EXPECT_EQ(m.rfind("GPU 3", 0), 0u) << m;
  EXPECT_NE(m.find(": GPU is lost"), std::string::npos) << m;
  // The other GPUs still answer.
  EXPECT_TRUE(c.ReadTelemetry(2).ok());
}

TEST_F(NvmlSimTest, EventsCarryGpuXidAndMigInstance) {
  Client& c = Open("dgx-h100");
  auto watcher = c.NewEventWatcher();
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  for (unsigned i = 0; i < 8; ++i) {
    auto mask = (*watcher)->Register(i, kHealthEvents);
    ASSERT_TRUE(mask.ok()) << mask.status().ToString();
    EXPECT_EQ(*mask & kEventXid, kEventXid);
  }
  // Nothing happened yet: the wait times out with no event.
  auto none = (*watcher)->Wait(10);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  auto g5 = c.GpuByIndex(5);
  ASSERT_TRUE(g5.ok());
  auto store = Store();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(sim::InjectXid(*store, 5, 79, std::nullopt, std::nullopt).ok());
  auto ev = (*watcher)->Wait(30000);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_TRUE(ev->has_value());
  EXPECT_EQ((*ev)->gpu, 5u);
  EXPECT_EQ((*ev)->uuid, g5->uuid);
  EXPECT_EQ((*ev)->type, kEventXid);
  EXPECT_EQ((*ev)->xid, 79u);
  EXPECT_FALSE((*ev)->gi_id.has_value());
  EXPECT_FALSE((*ev)->ci_id.has_value());

  ASSERT_TRUE(sim::InjectEcc(*store, 2, /*double_bit=*/false).ok());
  ev = (*watcher)->Wait(30000);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_TRUE(ev->has_value());
  EXPECT_EQ((*ev)->gpu, 2u);
  EXPECT_EQ((*ev)->type, kEventSingleBitEcc);
}

TEST_F(NvmlSimTest, MigXidEventNamesTheInstance) {
  Client& c = Open("h100-80gb");
  EnableMig(c, 0);
  auto gi = c.CreateGpuInstance(0, 19);
  ASSERT_TRUE(gi.ok()) << gi.status().ToString();
  auto ci = c.CreateComputeInstance(0, gi->id, *CiProfileIndexForSlices(1));
  ASSERT_TRUE(ci.ok()) << ci.status().ToString();
  auto watcher = c.NewEventWatcher();
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  ASSERT_TRUE((*watcher)->Register(0, kEventXid).ok());
  auto store = Store();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(sim::InjectXid(*store, 0, 43, gi->id, ci->id).ok());
  auto ev = (*watcher)->Wait(30000);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  ASSERT_TRUE(ev->has_value());
  EXPECT_EQ((*ev)->xid, 43u);
  EXPECT_EQ((*ev)->gi_id, gi->id);
  EXPECT_EQ((*ev)->ci_id, ci->id);
}

TEST_F(NvmlSimTest, UnloadedDriverFailsOpenWithTheFix) {
  UseMachine("dgx-h100");
  setenv("GPUOP_SIM_DRIVER", "unloaded", 1);
  auto c = Client::Open(kSimNvml);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c.status().message(),
            "NVIDIA driver is not loaded (nvmlInit: Driver Not Loaded): load the nvidia kernel "
            "module or wait for the driver container");
}

TEST_F(NvmlSimTest, ClientIsUsableFromManyThreads) {
  Client& c = Open("dgx-h100");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (unsigned i = 0; i < 8; ++i) {
    threads.emplace_back([&c, &failures, i] {
      for (int round = 0; round < 5; ++round) {
        if (!c.ReadTelemetry(i).ok() || !c.GpuByIndex(i).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace gpuop::nvml
