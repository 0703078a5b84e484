#include "gfd/labels.h"

#include <algorithm>
#include <cstdio>

#include "base/log.h"
#include "base/strings.h"
#include "deviceplugin/resources.h"

namespace gpuop::gfd {
namespace {

using Labels = std::map<std::string, std::string>;
using deviceplugin::MigStrategy;
using deviceplugin::Sharing;

constexpr size_t kMaxLabelValue = 63;
constexpr std::string_view kGpuResource = "nvidia.com/gpu";

bool IsAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

std::string TrimToAlnum(std::string s) {
  size_t b = 0;
  while (b < s.size() && !IsAlnum(s[b])) ++b;
  size_t e = s.size();
  while (e > b && !IsAlnum(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string SharingName(Sharing::Kind k) {
  switch (k) {
    case Sharing::Kind::kTimeSlicing:
      return "time-slicing";
    case Sharing::Kind::kMps:
      return "mps";
    case Sharing::Kind::kNone:
      break;
  }
  return "none";
}

// How the device plugin shares one resource: what the replicas,
// sharing-strategy and -SHARED product suffix say.
struct Share {
  int replicas = 1;
  bool renamed = false;
  Sharing::Kind kind = Sharing::Kind::kNone;
};

// The share of the unit `uuid`, as `resources` (from BuildResources) place it;
// `base` is the name the unit has before sharing.
Share ShareOf(const std::vector<deviceplugin::Resource>& resources, std::string_view base,
              std::string_view uuid) {
  for (const auto& r : resources) {
    for (const auto& u : r.units) {
      if (u.uuid != uuid) continue;
      Share s;
      s.replicas = r.replicas;
      s.renamed = r.name != base;
      s.kind = r.shared() ? r.sharing : Sharing::Kind::kNone;
      return s;
    }
  }
  return {};
}

// One resource's labels under `key` ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"):
// product, count, replicas, sharing-strategy. `share` nullopt: sharing does
// not apply (MIG-enabled parents: replicas 0).
void BaseLabels(const std::string& key, const std::string& product, size_t count,
                const std::optional<Share>& share, Labels* out) {
  std::string p = product;
  int replicas = 0;
  std::string strategy = "none";
  if (share) {
    replicas = share->replicas;
    if (share->replicas > 1) {
      strategy = SharingName(share->kind);
      if (!share->renamed) p += "-SHARED";
    }
  }
  (*out)[key + ".product"] = SanitiseLabelValue(p);
  (*out)[key + ".count"] = std::to_string(count);
  (*out)[key + ".replicas"] = std::to_string(replicas);
  (*out)[key + ".sharing-strategy"] = strategy;
}

void MigAttributeLabels(const std::string& key, const nvml::MigDevice& m, Labels* out) {
  (*out)[key + ".memory"] = std::to_string(m.memory_mib);
  (*out)[key + ".multiprocessors"] = std::to_string(m.multiprocessors);
  (*out)[key + ".slices.gi"] = std::to_string(m.gi_slices);
  (*out)[key + ".slices.ci"] = std::to_string(m.ci_slices);
  (*out)[key + ".engines.copy"] = std::to_string(m.engines.copy);
  (*out)[key + ".engines.decoder"] = std::to_string(m.engines.decoders);
  (*out)[key + ".engines.encoder"] = std::to_string(m.engines.encoders);
  (*out)[key + ".engines.jpeg"] = std::to_string(m.engines.jpegs);
  (*out)[key + ".engines.ofa"] = std::to_string(m.engines.ofas);
}

Status VersionLabels(const nvml::SystemInfo& sys, Labels* out) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = sys.driver_version.find('.', start);
    parts.push_back(sys.driver_version.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() || parts[1].empty()) {
    return InvalidArgument("driver version \"" + sys.driver_version +
                           "\" is not like X.Y[.Z] (e.g. 570.172.08); check the NVIDIA driver "
                           "install (nvidia-smi)");
  }
  const std::string rev = parts.size() == 3 ? parts[2] : "";
  const std::string p(kLabelPrefix);
  (*out)[p + "cuda.driver.major"] = parts[0];
  (*out)[p + "cuda.driver.minor"] = parts[1];
  (*out)[p + "cuda.driver.rev"] = rev;
  (*out)[p + "cuda.driver-version.major"] = parts[0];
  (*out)[p + "cuda.driver-version.minor"] = parts[1];
  (*out)[p + "cuda.driver-version.revision"] = rev;
  (*out)[p + "cuda.driver-version.full"] = sys.driver_version;
  // 0: NVML could not ask libcuda (not installed); no CUDA labels, not "0.0".
  const int v = sys.cuda_driver_version;
  if (v == 0) return Status::Ok();
  const std::string major = std::to_string(v / 1000), minor = std::to_string((v % 1000) / 10);
  (*out)[p + "cuda.runtime.major"] = major;
  (*out)[p + "cuda.runtime.minor"] = minor;
  (*out)[p + "cuda.runtime-version.major"] = major;
  (*out)[p + "cuda.runtime-version.minor"] = minor;
  (*out)[p + "cuda.runtime-version.full"] = major + "." + minor;
  return Status::Ok();
}

std::string GpuMode(const LabelInput& in, const nvml::Gpu& g) {
  auto it = in.pci_class.find(g.pci.bus_id);
  if (it == in.pci_class.end()) return "unknown";
  unsigned c = it->second > 0xFFFF ? it->second >> 8 : it->second;  // sysfs: 0x030200
  if (c == 0x0302) return "compute";
  if (c == 0x0300) return "graphics";
  return "unknown";
}

// The GPUs of one model (NVML name), in index order.
struct Model {
  std::string name;
  std::vector<const nvml::Gpu*> gpus;
};

// Why a single-strategy layout is invalid; empty when it is valid.
std::string InvalidSingleReason(const std::vector<const nvml::Gpu*>& gpus) {
  bool any_on = false, any_off = false;
  std::string profile;
  for (const nvml::Gpu* g : gpus) {
    (g->mig_enabled ? any_on : any_off) = true;
    if (g->mig_enabled && g->mig_devices.empty()) return "a MIG-enabled GPU has no MIG devices";
    for (const auto& m : g->mig_devices) {
      if (!profile.empty() && m.profile != profile) return "more than one MIG profile";
      profile = m.profile;
    }
  }
  if (any_on && any_off) return "MIG enabled on some GPUs only";
  return "";
}

// MIG devices grouped by profile, the first device (lowest GPU, MIG index)
// describing the group, as upstream's first occurrence.
struct MigGroup {
  const nvml::Gpu* parent = nullptr;
  const nvml::MigDevice* first = nullptr;
  size_t count = 0;
};

Status MigLabels(const LabelInput& in, const std::vector<const nvml::Gpu*>& sorted, Labels* out) {
  std::map<std::string, MigGroup> groups;
  for (const nvml::Gpu* g : sorted) {
    if (!g->mig_enabled) continue;
    for (const auto& m : g->mig_devices) {
      MigGroup& grp = groups[m.profile];
      if (grp.first == nullptr) {
        grp.parent = g;
        grp.first = &m;
      }
      ++grp.count;
    }
  }
  if (groups.empty()) return Status::Ok();  // no MIG devices: as strategy none
  std::vector<deviceplugin::Resource> resources;
  if (in.config.sharing.kind != Sharing::Kind::kNone) {
    std::vector<nvml::Gpu> all;
    for (const nvml::Gpu* g : sorted) all.push_back(*g);
    GPUOP_ASSIGN_OR_RETURN(resources, deviceplugin::BuildResources(all, in.config, nullptr));
  }
  const bool single = in.config.mig_strategy == MigStrategy::kSingle;
  for (const auto& [profile, grp] : groups) {
    const std::string base =
        single ? std::string(kGpuResource) : deviceplugin::MigResourceName(profile);
    const Share share = ShareOf(resources, base, grp.first->uuid);
    const std::string product =
        SanitiseProduct(grp.parent->name) + "-MIG-" + SanitiseProduct(profile);
    BaseLabels(base, product, grp.count, share, out);
    MigAttributeLabels(base, *grp.first, out);
  }
  return Status::Ok();
}

}  // namespace

std::string SanitiseProduct(std::string_view name) {
  std::string out;
  bool pending_space = false;
  for (char c : name) {
    if (c == ' ') {
      pending_space = !out.empty();
      continue;
    }
    if (!(IsAlnum(c) || c == '-' || c == '_' || c == '.')) continue;
    if (pending_space) out += '-';
    pending_space = false;
    out += c;
  }
  return out;
}

std::string SanitiseLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == ' ') {
      out += '-';
    } else if (IsAlnum(c) || c == '-' || c == '_' || c == '.') {
      out += c;
    }
  }
  out = TrimToAlnum(std::move(out));
  if (out.size() > kMaxLabelValue) out = TrimToAlnum(out.substr(0, kMaxLabelValue));
  return out;
}

std::string ModelCountKey(std::string_view model_name) {
  constexpr std::string_view kStem = "gpu.count.";
  constexpr size_t kMaxName = 63;
  std::string product = SanitiseLabelValue(SanitiseProduct(model_name));
  if (product.empty()) product = "unknown";
  if (kStem.size() + product.size() > kMaxName) {
    char hash[16];
    std::snprintf(hash, sizeof(hash), "-%08x", Fnv1a32(product));
    product = TrimToAlnum(product.substr(0, kMaxName - kStem.size() - 9)) + hash;
  }
  return std::string(kLabelPrefix) + std::string(kStem) + product;
}

std::string ArchFamily(int cc_major, int cc_minor) {
  switch (cc_major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return cc_minor < 5 ? "volta" : "turing";
    case 8:
      return cc_minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    case 13:
      return "rubin";
    default:
      break;
  }
  return "undefined";
}

Result<std::optional<std::string>> FabricClique(const std::vector<nvml::Gpu>& gpus) {
  // value → GPU indices, for the message when they disagree.
  std::map<std::string, std::vector<unsigned>> clusters, cliques;
  for (const auto& g : gpus) {
    if (!g.fabric || !nvml::FabricAttached(*g.fabric)) continue;
    clusters[g.fabric->cluster_uuid].push_back(g.index);
    cliques[std::to_string(g.fabric->clique_id)].push_back(g.index);
  }
  if (clusters.empty()) return std::optional<std::string>();
  auto describe = [](const std::map<std::string, std::vector<unsigned>>& m) {
    std::string out;
    for (const auto& [value, idx] : m) {
      if (!out.empty()) out += "; ";
      out += value + " on GPU";
      for (size_t i = 0; i < idx.size(); ++i) out += (i ? "," : " ") + std::to_string(idx[i]);
    }
    return out;
  };
  if (clusters.size() > 1) {
    return FailedPrecondition("GPUs are in different NVLink fabric clusters (" +
                              describe(clusters) +
                              "); no gpu.clique label until the fabric manager registers every "
                              "GPU of the node in one cluster");
  }
  if (cliques.size() > 1) {
    return FailedPrecondition("GPUs are in different NVLink fabric cliques (" + describe(cliques) +
                              "); no gpu.clique label until the fabric manager registers every "
                              "GPU of the node in one clique");
  }
  return std::optional<std::string>(clusters.begin()->first + "." + cliques.begin()->first);
}

Result<std::map<std::string, std::string>> GenerateLabels(const LabelInput& in) {
  Labels out;
  const std::string p(kLabelPrefix);
  if (in.timestamp) out[p + "gfd.timestamp"] = std::to_string(*in.timestamp);
  if (in.gpus.empty()) return out;  // upstream: no GPUs, no device labels

  std::vector<const nvml::Gpu*> sorted;
  for (const auto& g : in.gpus) sorted.push_back(&g);
  std::sort(sorted.begin(), sorted.end(),
            [](const nvml::Gpu* a, const nvml::Gpu* b) { return a->index < b->index; });

  GPUOP_RETURN_IF_ERROR(VersionLabels(in.system, &out));
  std::string machine = SanitiseLabelValue(SanitiseProduct(in.machine_type));
  out[p + "gpu.machine"] = machine.empty() ? "unknown" : machine;

  bool mig_capable = false, any_mig_enabled = false;
  for (const nvml::Gpu* g : sorted) {
    mig_capable = mig_capable || g->mig_capable;
    any_mig_enabled = any_mig_enabled || g->mig_enabled;
  }
  out[p + "mig.capable"] = mig_capable ? "true" : "false";
  out[p + "mps.capable"] =
      in.config.sharing.kind == Sharing::Kind::kMps && !any_mig_enabled ? "true" : "false";

  // Models, first seen in index order; the primary has the most GPUs.
  std::vector<Model> models;
  for (const nvml::Gpu* g : sorted) {
    auto it = std::find_if(models.begin(), models.end(),
                           [&](const Model& m) { return m.name == g->name; });
    if (it == models.end()) {
      models.push_back({g->name, {}});
      it = models.end() - 1;
    }
    it->gpus.push_back(g);
  }
  const Model& primary = *std::max_element(
      models.begin(), models.end(),
      [](const Model& a, const Model& b) { return a.gpus.size() < b.gpus.size(); });
  for (const Model& m : models) out[ModelCountKey(m.name)] = std::to_string(m.gpus.size());

  // Full-GPU labels of the primary model. Its whole GPUs (MIG off) decide
  // sharing as the plugin sees them; a model whose GPUs all have MIG on is
  // labelled without sharing (replicas 0), as upstream.
  const nvml::Gpu* whole = nullptr;
  for (const nvml::Gpu* g : primary.gpus) {
    if (!g->mig_enabled) {
      whole = g;
      break;
    }
  }
  std::optional<Share> share;
  if (whole) {
    share = Share{};
    if (in.config.sharing.kind != Sharing::Kind::kNone) {
      std::vector<nvml::Gpu> whole_gpus;
      for (const nvml::Gpu* g : sorted) {
        if (!g->mig_enabled) whole_gpus.push_back(*g);
      }
      deviceplugin::Config c = in.config;
      c.mig_strategy = MigStrategy::kNone;
      GPUOP_ASSIGN_OR_RETURN(auto resources, deviceplugin::BuildResources(whole_gpus, c, nullptr));
      share = ShareOf(resources, kGpuResource, whole->uuid);
    }
  }
  const nvml::Gpu& rep = whole ? *whole : *primary.gpus.front();
  const std::string gpu(std::string(kLabelPrefix) + "gpu");
  BaseLabels(gpu, SanitiseProduct(rep.name), primary.gpus.size(), share, &out);
  if (rep.memory_mib != 0) out[gpu + ".memory"] = std::to_string(rep.memory_mib);
  if (rep.cc_major != 0) {
    out[gpu + ".family"] = ArchFamily(rep.cc_major, rep.cc_minor);
    out[gpu + ".compute.major"] = std::to_string(rep.cc_major);
    out[gpu + ".compute.minor"] = std::to_string(rep.cc_minor);
  }
  out[gpu + ".mode"] = GpuMode(in, *primary.gpus.front());

  // A fabric that does not add up costs this one label, not the node's labels.
  if (auto clique = FabricClique(in.gpus); !clique.ok()) {
    LogWarn("gpu.clique label omitted", {{"error", clique.status()}});
  } else if (*clique) {
    out[gpu + ".clique"] = **clique;
  }

  switch (in.config.mig_strategy) {
    case MigStrategy::kNone:
      break;
    case MigStrategy::kSingle: {
      out[p + "mig.strategy"] = "single";
      if (!any_mig_enabled) break;  // as strategy none
      if (std::string why = InvalidSingleReason(sorted); !why.empty()) {
        // Upstream names the first MIG-enabled GPU's model.
        const nvml::Gpu* first = *std::find_if(sorted.begin(), sorted.end(),
                                               [](const nvml::Gpu* g) { return g->mig_enabled; });
        out[gpu + ".product"] = SanitiseLabelValue(SanitiseProduct(first->name) + "-MIG-INVALID");
        out[gpu + ".count"] = "0";
        out[gpu + ".replicas"] = "0";
        out[gpu + ".memory"] = "0";
        break;
      }
      GPUOP_RETURN_IF_ERROR(MigLabels(in, sorted, &out));
      break;
    }
    case MigStrategy::kMixed:
      out[p + "mig.strategy"] = "mixed";
      GPUOP_RETURN_IF_ERROR(MigLabels(in, sorted, &out));
      break;
  }
  return out;
}

}  // namespace gpuop::gfd
