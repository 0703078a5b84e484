#include "sim/nvml/machine.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "base/files.h"
#include "base/strings.h"

namespace gpuop::sim {
namespace {

// NVML enum values, kept here so the tables read like the facts they come from.
constexpr unsigned kArchTuring = 6, kArchAmpere = 7, kArchAda = 8, kArchHopper = 9,
                   kArchBlackwell = 10;
constexpr unsigned kBrandTesla = 2, kBrandNvidiaRtx = 13, kBrandNvidia = 14;

constexpr unsigned kMaxGpusPerMachine = 32;

struct ProfileRow {
  unsigned nvml_index, id;
  const char* name;
  unsigned slices, max_count, sms, ce, dec, enc, jpeg, ofa;
  uint64_t mem_mib;
  unsigned psize;
  std::vector<unsigned> starts;
};

std::vector<GiProfile> Profiles(const std::vector<ProfileRow>& rows) {
  std::vector<GiProfile> out;
  for (const auto& r : rows) {
    GiProfile p;
    p.nvml_index = r.nvml_index;
    p.id = r.id;
    p.name = r.name;
    p.slices = r.slices;
    p.max_count = r.max_count;
    p.multiprocessors = r.sms;
    p.copy_engines = r.ce;
    p.decoders = r.dec;
    p.encoders = r.enc;
    p.jpegs = r.jpeg;
    p.ofas = r.ofa;
    p.memory_mib = r.mem_mib;
    p.placement_size = r.psize;
    p.placement_starts = r.starts;
    out.push_back(std::move(p));
  }
  return out;
}

const std::vector<unsigned> k0to6 = {0, 1, 2, 3, 4, 5, 6};

std::vector<GiProfile> A100_40Profiles() {
  return Profiles({
      {0, 19, "1g.5gb", 1, 7, 14, 1, 0, 0, 0, 0, 4864, 1, k0to6},
      {7, 20, "1g.5gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 4864, 1, k0to6},
      {9, 15, "1g.10gb", 1, 4, 14, 1, 1, 0, 0, 0, 9856, 2, {0, 2, 4, 6}},
      {1, 14, "2g.10gb", 2, 3, 28, 2, 1, 0, 0, 0, 9856, 2, {0, 2, 4}},
      {2, 9, "3g.20gb", 3, 2, 42, 3, 2, 0, 0, 0, 19968, 4, {0, 4}},
      {3, 5, "4g.20gb", 4, 1, 56, 4, 2, 0, 0, 0, 19968, 4, {0}},
      {4, 0, "7g.40gb", 7, 1, 98, 7, 5, 0, 1, 1, 40192, 8, {0}},
  });
}

std::vector<GiProfile> A100_80Profiles() {
  return Profiles({
      {0, 19, "1g.10gb", 1, 7, 14, 1, 1, 0, 0, 0, 9856, 1, k0to6},
      {7, 20, "1g.10gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 9856, 1, k0to6},
      {9, 15, "1g.20gb", 1, 4, 14, 1, 1, 0, 0, 0, 19968, 2, {0, 2, 4, 6}},
      {1, 14, "2g.20gb", 2, 3, 28, 2, 1, 0, 0, 0, 19968, 2, {0, 2, 4}},
      {2, 9, "3g.40gb", 3, 2, 42, 3, 2, 0, 0, 0, 40192, 4, {0, 4}},
      {3, 5, "4g.40gb", 4, 1, 56, 4, 2, 0, 0, 0, 40192, 4, {0}},
      {4, 0, "7g.80gb", 7, 1, 98, 7, 5, 0, 1, 1, 80384, 8, {0}},
  });
}

// H100 and H200 share the layout: DEC = CE = JPEG = G, 7g has CE 8 and OFA 1.
std::vector<GiProfile> HopperProfiles(const char* g1, const char* g1me, const char* g1x2,
                                      const char* g2, const char* g3, const char* g4,
                                      const char* g7, uint64_t m1, uint64_t m2, uint64_t m4,
                                      uint64_t m8) {
  return Profiles({
      {0, 19, g1, 1, 7, 16, 1, 1, 0, 1, 0, m1, 1, k0to6},
      {7, 20, g1me, 1, 1, 16, 1, 1, 0, 1, 1, m1, 1, k0to6},
      {9, 15, g1x2, 1, 4, 26, 1, 1, 0, 1, 0, m2, 2, {0, 2, 4, 6}},
      {1, 14, g2, 2, 3, 32, 2, 2, 0, 2, 0, m2, 2, {0, 2, 4}},
      {2, 9, g3, 3, 2, 60, 3, 3, 0, 3, 0, m4, 4, {0, 4}},
      {3, 5, g4, 4, 1, 64, 4, 4, 0, 4, 0, m4, 4, {0}},
      {4, 0, g7, 7, 1, 132, 8, 7, 0, 7, 1, m8, 8, {0}},
  });
}

std::vector<GiProfile> A30Profiles() {
  return Profiles({
      {0, 14, "1g.6gb", 1, 4, 14, 1, 0, 0, 0, 0, 5952, 1, {0, 1, 2, 3}},
      {7, 21, "1g.6gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 5952, 1, {0, 1, 2, 3}},
      {1, 5, "2g.12gb", 2, 2, 28, 2, 2, 0, 0, 0, 12160, 2, {0, 2}},
      {8, 6, "2g.12gb+me", 2, 1, 28, 2, 2, 0, 1, 1, 12160, 2, {0, 2}},
      {3, 0, "4g.24gb", 4, 1, 56, 4, 4, 0, 1, 1, 24320, 4, {0}},
  });
}

// B200, from NVIDIA's MIG user guide (supported profiles on the B200 180 GB):
// 1g takes 1/8 of the memory and 1/7 of the SMs, two copy engines, one NVDEC
// and one JPEG; +me and 7g add the OFA; CE 3/6/8/16 for 2g/3g/4g/7g;
// instance counts 7/1/4/3/2/1/1 and the Hopper placements (eight memory
// slices). The B200 has none of the +gfx, -me and +me.all kinds: NVIDIA lists
// them for the RTX PRO Blackwell boards only.
// GUESS: the profile ids (taken as on H100), the memory sizes (the H100's
// shares of the total, scaled to the B200's 183359 MiB; they give NVIDIA's
// names) and the SMs per profile (148/8 per slice).
std::vector<GiProfile> B200Profiles() {
  return Profiles({
      {0, 19, "1g.23gb", 1, 7, 18, 2, 1, 0, 1, 0, 22446, 1, k0to6},
      {7, 20, "1g.23gb+me", 1, 1, 18, 2, 1, 0, 1, 1, 22446, 1, k0to6},
      {9, 15, "1g.45gb", 1, 4, 18, 2, 1, 0, 1, 0, 45179, 2, {0, 2, 4, 6}},
      {1, 14, "2g.45gb", 2, 3, 36, 3, 1, 0, 1, 0, 45179, 2, {0, 2, 4}},
      {2, 9, "3g.90gb", 3, 2, 54, 6, 1, 0, 1, 0, 90935, 4, {0, 4}},
      {3, 5, "4g.90gb", 4, 1, 72, 8, 1, 0, 1, 0, 90935, 4, {0}},
      {4, 0, "7g.180gb", 7, 1, 148, 16, 1, 0, 1, 1, 182444, 8, {0}},
  });
}

// RTX PRO 6000 Blackwell (Server Edition), from NVIDIA's MIG user guide and
// `nvidia-smi mig -lgip` on that board: four slices; every size has a +gfx
// twin (graphics APIs), 1g and 2g a -me twin (no media engines) and a
// +me.all one (all of them, one instance); 1g also has +me (one OFA).
// Memory: 23.62, 47.38 and 95.00 GiB.
std::vector<GiProfile> RtxPro6000Profiles() {
  const std::vector<unsigned> k0to3 = {0, 1, 2, 3};
  return Profiles({
      {0x0, 14, "1g.24gb", 1, 4, 46, 1, 1, 1, 1, 0, 24186, 1, k0to3},
      {0x7, 21, "1g.24gb+me", 1, 1, 46, 1, 1, 1, 1, 1, 24186, 1, k0to3},
      {0xA, 47, "1g.24gb+gfx", 1, 4, 46, 1, 1, 1, 1, 0, 24186, 1, k0to3},
      {0xF, 65, "1g.24gb+me.all", 1, 1, 46, 1, 4, 4, 4, 1, 24186, 1, k0to3},
      {0xD, 67, "1g.24gb-me", 1, 4, 46, 1, 0, 0, 0, 0, 24186, 1, k0to3},
      {0x1, 5, "2g.48gb", 2, 2, 94, 2, 2, 2, 2, 0, 48517, 2, {0, 2}},
      {0xB, 35, "2g.48gb+gfx", 2, 2, 94, 2, 2, 2, 2, 0, 48517, 2, {0, 2}},
      {0x10, 64, "2g.48gb+me.all", 2, 1, 94, 2, 4, 4, 4, 1, 48517, 2, {0, 2}},
      {0xE, 66, "2g.48gb-me", 2, 2, 94, 2, 0, 0, 0, 0, 48517, 2, {0, 2}},
      {0x3, 0, "4g.96gb", 4, 1, 188, 4, 4, 4, 4, 1, 97280, 4, {0}},
      {0xC, 32, "4g.96gb+gfx", 4, 1, 188, 4, 4, 4, 4, 1, 97280, 4, {0}},
  });
}

std::vector<GpuModel> MakeModels() {
  std::vector<GpuModel> v;
  auto add = [&](const char* key, const char* name, uint64_t mem, int ccmaj, int ccmin,
                 uint32_t pci, uint32_t subsys, unsigned arch, unsigned brand, unsigned sms,
                 unsigned watts, unsigned sm_mhz, unsigned mem_mhz, unsigned nvlinks,
                 unsigned encoders) -> GpuModel& {
    GpuModel m;
    m.key = key;
    m.name = name;
    m.memory_mib = mem;
    m.cc_major = ccmaj;
    m.cc_minor = ccmin;
    m.pci_device_id = pci;
    m.pci_subsystem_id = subsys;
    m.architecture = arch;
    m.brand = brand;
    m.multiprocessors = sms;
    m.power_limit_w = watts;
    m.max_sm_clock_mhz = sm_mhz;
    m.max_mem_clock_mhz = mem_mhz;
    m.nvlinks = nvlinks;
    m.encoders = encoders;
    v.push_back(std::move(m));
    return v.back();
  };
  auto mig = [](GpuModel& m, unsigned mem_slices, unsigned compute_slices,
                std::vector<GiProfile> profiles) {
    m.memory_slices = mem_slices;
    m.compute_slices = compute_slices;
    m.mig_profiles = std::move(profiles);
  };
  mig(add("a100-40gb", "NVIDIA A100-SXM4-40GB", 40960, 8, 0, 0x20B010DE, 0x134F10DE, kArchAmpere,
          kBrandNvidia, 108, 400, 1410, 1215, 12, 0),
      8, 7, A100_40Profiles());
  mig(add("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, 8, 0, 0x20B210DE, 0x147F10DE, kArchAmpere,
          kBrandNvidia, 108, 400, 1410, 1593, 12, 0),
      8, 7, A100_80Profiles());
  mig(add("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, 9, 0, 0x233010DE, 0x16C110DE, kArchHopper,
          kBrandNvidia, 132, 700, 1980, 2619, 18, 0),
      8, 7,
      HopperProfiles("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
                     9984, 20096, 40448, 81152));
  mig(add("h200-141gb", "NVIDIA H200", 143771, 9, 0, 0x233510DE, 0x18A010DE, kArchHopper,
          kBrandNvidia, 132, 700, 1980, 3201, 18, 0),
      8, 7,
      HopperProfiles("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb",
                     "7g.141gb", 16384, 33024, 71168, 142848));
  add("l40s", "NVIDIA L40S", 46068, 8, 9, 0x26B910DE, 0x185110DE, kArchAda, kBrandNvidia, 142, 350,
      2520, 9001, 0, 3);
  add("t4", "Tesla T4", 15360, 7, 5, 0x1EB810DE, 0x12A210DE, kArchTuring, kBrandTesla, 40, 70, 1590,
      5001, 0, 1);
  // The PCIe card of the NVLink-bridged pairs. Its MIG table is not modelled:
  // the simulator offers MIG on the SXM models.
  add("h100-nvl", "NVIDIA H100 NVL", 95830, 9, 0, 0x232110DE, 0x183910DE, kArchHopper, kBrandNvidia,
      132, 400, 1785, 2619, 12, 0);
  mig(add("a30", "NVIDIA A30", 24576, 8, 0, 0x20B710DE, 0x153210DE, kArchAmpere, kBrandNvidia, 56,
          165, 1440, 1215, 0, 0),
      4, 4, A30Profiles());
  // One Blackwell GPU of a Grace-Blackwell superchip (nvidia-smi: "NVIDIA
  // GB200", 189471 MiB, 1200 W; PCI 10de:2941). It joins the rack's NVLink
  // fabric. MIG exists on GB200 but its table is not modelled.
  add("gb200", "NVIDIA GB200", 189471, 10, 0, 0x294110DE, 0x204610DE, kArchBlackwell, kBrandNvidia,
      148, 1200, 1965, 3996, 18, 0)
      .fabric_capable = true;
  // The HGX/DGX B200 board GPU: nvidia-smi "NVIDIA B200", 183359 MiB, 148 SMs,
  // 1000 W, 1965 MHz; PCI 10de:2901. GUESS: the subsystem id and the memory
  // clock (the GB200's).
  mig(add("b200", "NVIDIA B200", 183359, 10, 0, 0x290110DE, 0x199910DE, kArchBlackwell,
          kBrandNvidia, 148, 1000, 1965, 3996, 18, 0),
      8, 7, B200Profiles());
  // A PCIe board, no NVLink. GUESS: the memory size (97887 MiB), the PCI ids
  // (10de:2bb5), the brand (NVIDIA RTX), power and clocks.
  mig(add("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, 12, 0, 0x2BB510DE,
          0x204E10DE, kArchBlackwell, kBrandNvidiaRtx, 188, 600, 2617, 14001, 0, 4),
      4, 4, RtxPro6000Profiles());
  return v;
}

struct PresetGpus {
  std::string model_key;
  unsigned count;
};

// How a machine's GPUs are wired (see SimGpu).
enum class Wiring {
  // Pairs of GPUs share a PCIe switch; NVLink GPUs reach every NVSwitch.
  kSwitchedPairs,
  // Each GPU on its own root port; NVLink bridges join GPUs 2k and 2k+1.
  kBridgedPairs,
};

struct Preset {
  std::string name;
  std::vector<PresetGpus> gpus;
  std::vector<unsigned> buses;  // empty: default buses
  Wiring wiring = Wiring::kSwitchedPairs;
  bool gb200_fabric = false;   // every GPU registered in Gb200ClusterUuid()/kGb200CliqueId
  std::string driver_version;  // empty: Machine's default
};

// A 580-branch driver (CUDA 13.0) for the Blackwell MIG boards: it knows the
// +gfx, -me and +me.all profiles (570 and 575 branches), which the default
// 570 driver partly lacks.
constexpr const char* kBlackwellDriver = "580.95.05";

const std::vector<unsigned> kDgxA100Buses = {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD};
const std::vector<unsigned> kDgxH100Buses = {0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB};

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> presets = [] {
    std::vector<Preset> p = {
        {"dgx-a100", {{"a100-40gb", 8}}, kDgxA100Buses},
        {"dgx-h100", {{"h100-80gb", 8}}, kDgxH100Buses},
        {"hgx-h200", {{"h200-141gb", 8}}, kDgxH100Buses},
        {"h100-nvl-8",
         {{"h100-nvl", 8}},
         {0x17, 0x2A, 0x3D, 0x63, 0x98, 0xAB, 0xBD, 0xE3},
         Wiring::kBridgedPairs},
        {"l40s-4", {{"l40s", 4}}, {0x01, 0x25, 0xC1, 0xE1}},
        {"t4-1", {{"t4", 1}}, {0x3B}},
        {"gb200-nvl4", {{"gb200", 4}}, {}, Wiring::kSwitchedPairs, true},
        {"dgx-b200", {{"b200", 8}}, kDgxH100Buses, Wiring::kSwitchedPairs, false, kBlackwellDriver},
    };
    for (const auto& m : BuiltinModels()) {
      const bool blackwell_mig = m.architecture == kArchBlackwell && m.mig_capable();
      p.push_back({m.key,
                   {{m.key, 1}},
                   {},
                   Wiring::kSwitchedPairs,
                   false,
                   blackwell_mig ? kBlackwellDriver : ""});
    }
    return p;
  }();
  return presets;
}

unsigned DefaultBus(unsigned index, unsigned total) {
  if (total <= kDgxH100Buses.size()) return kDgxH100Buses[index];
  return 0x08 + 0x07 * index;  // 32 GPUs at most: stays below 0x100
}

uint64_t Fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

std::string ModelKeys() {
  std::vector<std::string> keys;
  for (const auto& m : BuiltinModels()) keys.push_back(m.key);
  return Join(keys, ", ");
}

struct GpuSpec {
  GpuModel model;
  bool mig_enabled = false;
  std::optional<SimFabric> fabric;
};

// NVSwitches of the switched machines: four, as on HGX A100/H100 boards
// (which have four to six); link l of every GPU goes to switch l % 4.
constexpr unsigned kNvSwitches = 4;

void Wire(Machine& m, Wiring wiring) {
  bool any_nvlink = false;
  for (SimGpu& g : m.gpus) {
    const unsigned i = g.index;
    const unsigned links = g.model.nvlinks;
    switch (wiring) {
      case Wiring::kSwitchedPairs:
        g.pcie_switch = static_cast<int>(i / 2);
        g.host_bridge = static_cast<int>(i / 2);
        for (unsigned l = 0; l < links; ++l) g.nvlinks.push_back({true, l % kNvSwitches});
        any_nvlink = any_nvlink || links > 0;
        break;
      case Wiring::kBridgedPairs: {
        g.pcie_switch = -1;
        g.host_bridge = static_cast<int>(i);
        const unsigned peer = i ^ 1u;
        if (peer < m.gpus.size() && m.gpus[peer].model.nvlinks == links) {
          for (unsigned l = 0; l < links; ++l) g.nvlinks.push_back({false, peer});
        }
        break;
      }
    }
  }
  if (any_nvlink) {
    for (unsigned s = 0; s < kNvSwitches; ++s) {
      char bus_id[32];
      std::snprintf(bus_id, sizeof(bus_id), "00000000:%02X:00.0", 0xC0 + s * 8);
      m.nvswitches.push_back(bus_id);
    }
  }
}

Machine Build(const std::string& name, const std::vector<GpuSpec>& specs,
              const std::vector<unsigned>& buses, const std::string& seed,
              Wiring wiring = Wiring::kSwitchedPairs) {
  Machine m;
  m.name = name;
  const unsigned n = static_cast<unsigned>(specs.size());
  for (unsigned i = 0; i < n; ++i) {
    SimGpu g;
    g.model = specs[i].model;
    g.index = i;
    g.minor = i;
    std::string key = seed + '\0' + name + '\0' + std::to_string(i);
    g.uuid = "GPU-" + HashUuid(key);
    uint64_t h = Fnv1a(key + "|serial", 0xCBF29CE484222325ULL);
    char serial[32];
    std::snprintf(serial, sizeof(serial), "1650%09llu",
                  static_cast<unsigned long long>(h % 1000000000ULL));
    g.serial = serial;
    unsigned bus = i < buses.size() ? buses[i] : DefaultBus(i, n);
    char bus_id[32];
    std::snprintf(bus_id, sizeof(bus_id), "00000000:%02X:00.0", bus);
    g.bus_id = bus_id;
    g.numa_node = (2 * i < n) ? 0 : 1;
    g.mig_enabled_at_boot = specs[i].mig_enabled;
    g.fabric = specs[i].fabric;
    m.gpus.push_back(std::move(g));
  }
  Wire(m, wiring);
  return m;
}

std::string Line(const YAML::Node& n) { return "line " + std::to_string(n.Mark().line + 1); }

Status CheckKeys(const YAML::Node& map, const std::vector<std::string>& allowed,
                 const std::string& file, const std::string& what) {
  for (const auto& kv : map) {
    std::string k = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      return InvalidArgument(file + " " + Line(kv.first) + ": unknown key '" + k + "' in " + what +
                             "; valid keys: " + Join(allowed, ", "));
    }
  }
  return Status::Ok();
}

Result<Machine> ParseMachineFile(const std::string& path, const std::string& seed) {
  GPUOP_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("machine file " + path + ": " + e.what());
  }
  try {
    if (!root.IsMap()) {
      return InvalidArgument("machine file " + path +
                             ": expected a map with `gpus:` (and optional name, driverVersion, "
                             "cudaVersion)");
    }
    GPUOP_RETURN_IF_ERROR(
        CheckKeys(root, {"name", "driverVersion", "cudaVersion", "gpus"}, path, "the machine"));
    Machine defaults;
    std::string name = root["name"] ? root["name"].as<std::string>() : "";
    if (name.empty()) {
      size_t slash = path.rfind('/');
      name = slash == std::string::npos ? path : path.substr(slash + 1);
    }
    std::string driver =
        root["driverVersion"] ? root["driverVersion"].as<std::string>() : defaults.driver_version;
    int cuda = defaults.cuda_driver_version;
    // A driver version without a CUDA version: the CUDA version that driver has.
    if (root["driverVersion"] && !root["cudaVersion"] && CudaVersionForDriver(driver) > 0) {
      cuda = CudaVersionForDriver(driver);
    }
    if (const auto& c = root["cudaVersion"]) {
      std::string cs = c.as<std::string>();
      auto parts = Split(cs, '.');
      uint64_t major = 0, minor = 0;
      bool ok = !parts.empty() && parts.size() <= 2;
      if (ok) {
        auto ma = ParseUint(parts[0]);
        auto mi = parts.size() == 2 ? ParseUint(parts[1]) : std::optional<uint64_t>(0);
        ok = ma.has_value() && mi.has_value() && *mi <= 99;
        major = ma.value_or(0);
        minor = mi.value_or(0);
      }
      if (!ok) {
        return InvalidArgument(path + " " + Line(c) + ": cudaVersion '" + cs +
                               "' is not like 12.8 or 12080");
      }
      cuda =
          parts.size() == 2 ? static_cast<int>(major * 1000 + minor * 10) : static_cast<int>(major);
    }
    const auto& gpus = root["gpus"];
    if (!gpus || !gpus.IsSequence() || gpus.size() == 0) {
      return InvalidArgument("machine file " + path +
                             ": `gpus` must be a non-empty list of {model, count?, migEnabled?}");
    }
    std::vector<GpuSpec> specs;
    for (const auto& entry : gpus) {
      if (!entry.IsMap()) {
        return InvalidArgument(path + " " + Line(entry) +
                               ": each gpus entry is a map {model, count?, migEnabled?}");
      }
      GPUOP_RETURN_IF_ERROR(
          CheckKeys(entry, {"model", "count", "migEnabled", "fabric"}, path, "a gpus entry"));
      if (!entry["model"]) return InvalidArgument(path + " " + Line(entry) + ": missing `model`");
      std::string model_name = entry["model"].as<std::string>();
      auto model = FindModel(model_name);
      if (!model.ok()) {
        return InvalidArgument(path + " " + Line(entry["model"]) + ": " + model.status().message());
      }
      unsigned count = 1;
      if (const auto& c = entry["count"]) {
        auto v = ParseUint(c.as<std::string>());
        if (!v || *v == 0 || *v > kMaxGpusPerMachine) {
          return InvalidArgument(path + " " + Line(c) + ": count must be 1.." +
                                 std::to_string(kMaxGpusPerMachine));
        }
        count = static_cast<unsigned>(*v);
      }
      bool mig = entry["migEnabled"] ? entry["migEnabled"].as<bool>() : false;
      if (mig && !model->mig_capable()) {
        return InvalidArgument(path + " " + Line(entry["migEnabled"]) + ": " + model->name +
                               " does not support MIG; remove migEnabled");
      }
      std::optional<SimFabric> fabric;
      if (const auto& f = entry["fabric"]) {
        if (!model->fabric_capable) {
          return InvalidArgument(path + " " + Line(f) + ": " + model->name +
                                 " has no NVLink fabric; remove `fabric`");
        }
        if (!f.IsMap() || !f["clusterUuid"] || !f["cliqueId"]) {
          return InvalidArgument(path + " " + Line(f) +
                                 ": `fabric` is a map {clusterUuid, cliqueId}");
        }
        GPUOP_RETURN_IF_ERROR(CheckKeys(f, {"clusterUuid", "cliqueId"}, path, "a fabric"));
        SimFabric sf;
        sf.cluster_uuid = ToLower(f["clusterUuid"].as<std::string>());
        unsigned char bytes[16];
        if (!ParseUuidBytes(sf.cluster_uuid, bytes)) {
          return InvalidArgument(path + " " + Line(f["clusterUuid"]) + ": clusterUuid '" +
                                 sf.cluster_uuid +
                                 "' is not like 8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b");
        }
        auto id = ParseUint(f["cliqueId"].as<std::string>());
        if (!id || *id > 0xFFFFFFFFULL) {
          return InvalidArgument(path + " " + Line(f["cliqueId"]) +
                                 ": cliqueId must be an unsigned 32-bit number");
        }
        sf.clique_id = static_cast<unsigned>(*id);
        fabric = sf;
      }
      for (unsigned i = 0; i < count; ++i) specs.push_back({*model, mig, fabric});
    }
    if (specs.size() > kMaxGpusPerMachine) {
      return InvalidArgument("machine file " + path + ": more than " +
                             std::to_string(kMaxGpusPerMachine) + " GPUs");
    }
    Machine m = Build(name, specs, {}, seed);
    m.driver_version = driver;
    m.cuda_driver_version = cuda;
    return m;
  } catch (const YAML::Exception& e) {
    return InvalidArgument("machine file " + path + ": " + e.what());
  }
}

}  // namespace

unsigned DriverBranch(std::string_view driver_version) {
  unsigned branch = 0;
  size_t digits = 0;
  while (digits < driver_version.size() && digits < 4 && driver_version[digits] >= '0' &&
         driver_version[digits] <= '9') {
    branch = branch * 10 + static_cast<unsigned>(driver_version[digits] - '0');
    ++digits;
  }
  return branch;
}

int CudaVersionForDriver(std::string_view driver_version) {
  const unsigned branch = DriverBranch(driver_version);
  if (branch == 0) return 0;
  // (first driver branch, CUDA version it brought), newest first.
  static constexpr std::pair<unsigned, int> kBranches[] = {
      {590, 13010}, {580, 13000}, {575, 12090}, {570, 12080}, {565, 12070}, {560, 12060},
      {555, 12050}, {550, 12040}, {545, 12030}, {535, 12020}, {530, 12010}, {525, 12000},
      {520, 11080}, {515, 11070}, {510, 11060}, {495, 11050}, {470, 11040}, {465, 11030},
      {460, 11020}, {455, 11010}, {450, 11000}, {440, 10020}, {418, 10010}, {410, 10000}};
  for (const auto& [first, cuda] : kBranches) {
    if (branch >= first) return cuda;
  }
  return 0;
}

const GiProfile* GpuModel::ProfileById(unsigned profile_id) const {
  for (const auto& p : mig_profiles) {
    if (p.id == profile_id) return &p;
  }
  return nullptr;
}

const GiProfile* GpuModel::ProfileByNvmlIndex(unsigned nvml_index) const {
  for (const auto& p : mig_profiles) {
    if (p.nvml_index == nvml_index) return &p;
  }
  return nullptr;
}

const std::vector<GpuModel>& BuiltinModels() {
  static const std::vector<GpuModel> models = MakeModels();
  return models;
}

Result<GpuModel> FindModel(const std::string& key_or_name) {
  for (const auto& m : BuiltinModels()) {
    if (m.key == key_or_name || m.name == key_or_name) return m;
  }
  return NotFound("unknown GPU model '" + key_or_name + "'; valid models: " + ModelKeys() +
                  " (or their full NVML names)");
}

unsigned TopologyLevel(const Machine& m, unsigned a, unsigned b) {
  // NVML_TOPOLOGY_* values.
  constexpr unsigned kInternal = 0, kSingle = 10, kHostBridge = 30, kNode = 40, kSystem = 50;
  if (a == b) return kInternal;
  const SimGpu& x = m.gpus[a];
  const SimGpu& y = m.gpus[b];
  if (x.pcie_switch >= 0 && x.pcie_switch == y.pcie_switch) return kSingle;
  if (x.host_bridge >= 0 && x.host_bridge == y.host_bridge) return kHostBridge;
  if (x.numa_node >= 0 && x.numa_node == y.numa_node) return kNode;
  return kSystem;
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> out;
  for (const auto& p : Presets()) out.push_back(p.name);
  return out;
}

std::string MigProfileName(unsigned c, unsigned g, uint64_t profile_memory_mib,
                           uint64_t total_memory_mib) {
  const double total_bytes = static_cast<double>(total_memory_mib) * 1048576.0;
  const double eighths =
      std::ceil(8.0 * static_cast<double>(profile_memory_mib) * 1048576.0 / total_bytes);
  const double total_gib = std::ceil(total_bytes / 1073741824.0);
  const auto gb = static_cast<long long>(std::round(eighths / 8.0 * total_gib));
  std::string name = std::to_string(g) + "g." + std::to_string(gb) + "gb";
  if (c != g) name = std::to_string(c) + "c." + name;
  return name;
}

std::string HashUuid(std::string_view key) {
  // FNV-1a spreads little on short keys that differ in the last byte; a
  // splitmix64 finaliser makes every bit depend on every input byte.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  uint64_t a = mix(Fnv1a(key, 0xCBF29CE484222325ULL));
  uint64_t b = mix(Fnv1a(key, a ^ 0x9E3779B97F4A7C15ULL));
  char out[40];
  std::snprintf(
      out, sizeof(out), "%08llx-%04llx-%04llx-%04llx-%012llx",
      static_cast<unsigned long long>(a >> 32), static_cast<unsigned long long>((a >> 16) & 0xFFFF),
      static_cast<unsigned long long>(a & 0xFFFF), static_cast<unsigned long long>(b >> 48),
      static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFULL));
  return out;
}

std::string DescribePresets() {
  std::string out;
  for (const auto& p : Presets()) {
    out += p.name + ":";
    for (const auto& g : p.gpus) {
      auto model = FindModel(g.model_key);
      out += ' ';
      out += std::to_string(g.count);
      out += "x ";
      out += model->name;
      if (model->mig_capable()) out += " (MIG)";
    }
    out += "\n";
  }
  return out;
}

std::string Gb200ClusterUuid() { return HashUuid("gb200-nvl4|fabric cluster"); }

bool ParseUuidBytes(std::string_view text, unsigned char out[16]) {
  if (text.size() != 36) return false;
  unsigned n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash_here = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_here) {
      if (text[i] != '-') return false;
      continue;
    }
    char c = text[i];
    int v = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (v < 0) return false;
    if (n % 2 == 0) {
      out[n / 2] = static_cast<unsigned char>(v << 4);
    } else {
      out[n / 2] = static_cast<unsigned char>(out[n / 2] | v);
    }
    ++n;
  }
  return n == 32;
}

Result<Machine> LoadMachine(const std::string& preset_or_file, const std::string& seed) {
  for (const auto& p : Presets()) {
    if (p.name != preset_or_file) continue;
    std::vector<GpuSpec> specs;
    for (const auto& g : p.gpus) {
      GPUOP_ASSIGN_OR_RETURN(GpuModel model, FindModel(g.model_key));
      std::optional<SimFabric> fabric;
      // The rack's fabric is the same for every node (not seeded): the
      // simulated nodes of one cluster share one NVL72 domain.
      if (p.gb200_fabric) fabric = SimFabric{Gb200ClusterUuid(), kGb200CliqueId};
      for (unsigned i = 0; i < g.count; ++i) specs.push_back({model, false, fabric});
    }
    Machine m = Build(p.name, specs, p.buses, seed, p.wiring);
    if (!p.driver_version.empty()) {
      m.driver_version = p.driver_version;
      m.cuda_driver_version = CudaVersionForDriver(p.driver_version);
    }
    return m;
  }
  if (PathExists(preset_or_file)) return ParseMachineFile(preset_or_file, seed);
  return NotFound("unknown machine '" + preset_or_file + "': not a preset (" +
                  Join(PresetNames(), ", ") + ") and no such YAML file");
}

}  // namespace gpuop::sim
