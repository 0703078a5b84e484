#include "discovery/pci.h"

#include <charconv>
#include <cstdio>

#include "base/strings.h"
#include "discovery/system.h"

namespace gpuop::discovery {
namespace {

// NFD matches its whitelists as prefixes of the 4-digit class string.
constexpr const char* kClassLabelClasses[] = {"03", "0b40", "12"};     // NFD's default
constexpr const char* kVendorLabelClasses[] = {"02", "0300", "0302"};  // GPU Operator chart
constexpr std::string_view kPresentSuffix = ".present";

// "0302" for 0x030200: class and subclass, without the programming interface.
std::string ClassString(uint32_t class_code) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04x", static_cast<unsigned>((class_code >> 8) & 0xffff));
  return buf;
}

bool MatchesAny(const std::string& cls, const auto& prefixes) {
  for (const char* p : prefixes) {
    if (StartsWith(cls, p)) return true;
  }
  return false;
}

Result<uint64_t> ParseHex(std::string_view content, std::string_view what, uint64_t max) {
  std::string_view s = Trim(content);
  if (StartsWith(s, "0x") || StartsWith(s, "0X")) s.remove_prefix(2);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v > max) {
    return InvalidArgument(std::string(what) + ": want a hex number like 0x" +
                           (max == 0xffff ? "10de" : "030200") + ", got \"" +
                           std::string(Trim(content)) + "\"");
  }
  return v;
}

}  // namespace

Result<uint16_t> ParsePciVendor(std::string_view content) {
  GPUOP_ASSIGN_OR_RETURN(uint64_t v, ParseHex(content, "PCI vendor", 0xffff));
  return static_cast<uint16_t>(v);
}

Result<uint32_t> ParsePciClass(std::string_view content) {
  GPUOP_ASSIGN_OR_RETURN(uint64_t v, ParseHex(content, "PCI class", 0xffffff));
  return static_cast<uint32_t>(v);
}

std::string ClassVendorLabel(uint32_t class_code, uint16_t vendor) {
  char v[8];
  std::snprintf(v, sizeof(v), "%04x", static_cast<unsigned>(vendor));
  return kPciLabelPrefix + ClassString(class_code) + "_" + v + std::string(kPresentSuffix);
}

Labels NvidiaPciLabels(const std::vector<PciDevice>& devices) {
  Labels labels;
  for (const PciDevice& d : devices) {
    if (d.vendor != kNvidiaVendor) continue;
    const std::string cls = ClassString(d.class_code);
    if (MatchesAny(cls, kClassLabelClasses))
      labels[ClassVendorLabel(d.class_code, d.vendor)] = "true";
    if (MatchesAny(cls, kVendorLabelClasses)) labels[kNvidiaPresentLabel] = "true";
  }
  return labels;
}

bool IsManagedLabel(std::string_view key) {
  if (key == kNvidiaPresentLabel || IsSystemLabel(key)) return true;
  // pci-<cccc>_10de.present with <cccc> a class NvidiaPciLabels labels.
  constexpr std::string_view kVendorSuffix = "_10de.present";
  if (!StartsWith(key, kPciLabelPrefix) || !EndsWith(key, kVendorSuffix)) return false;
  std::string_view cls = key.substr(std::string_view(kPciLabelPrefix).size());
  cls.remove_suffix(kVendorSuffix.size());
  if (cls.size() != 4) return false;
  for (char c : cls) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return MatchesAny(std::string(cls), kClassLabelClasses);
}

LabelChanges PlanLabelChanges(const Labels& current, const Labels& wanted) {
  LabelChanges changes;
  for (const auto& [key, value] : wanted) {
    auto it = current.find(key);
    if (it == current.end() || it->second != value) changes[key] = value;
  }
  for (const auto& [key, value] : current) {
    if (IsManagedLabel(key) && !wanted.count(key)) changes[key] = std::nullopt;
  }
  return changes;
}

nlohmann::json LabelPatch(const LabelChanges& changes) {
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [key, value] : changes) {
    labels[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  }
  return {{"metadata", {{"labels", labels}}}};
}

}  // namespace gpuop::discovery
