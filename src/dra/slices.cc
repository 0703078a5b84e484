#include "dra/slices.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include "dra/names.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

Json AttributeJson(const AttributeValue& v) {
  struct Visitor {
    Json operator()(const std::string& s) const { return {{"string", s}}; }
    Json operator()(int64_t i) const { return {{"int", i}}; }
    Json operator()(bool b) const { return {{"bool", b}}; }
    Json operator()(const Version& v) const { return {{"version", v.semver}}; }
  };
  return std::visit(Visitor{}, v);
}

// A device entry reduced to what SlicesUpToDate compares.
Json NormalizedDevice(const Json& device) {
  Json out = Json::object();
  out["name"] = device.value("name", "");
  out["attributes"] = device.value("attributes", Json::object());
  Json capacity = Json::object();
  const Json published_capacity = device.value("capacity", Json::object());
  for (const auto& [key, cap] : published_capacity.items()) {
    const Json value = cap.is_object() ? cap.value("value", Json()) : Json();
    std::optional<int64_t> n;
    if (value.is_string()) n = QuantityValue(value.get<std::string>());
    if (value.is_number_integer()) n = value.get<int64_t>();
    capacity[key] = n ? Json(*n) : value;
  }
  out["capacity"] = std::move(capacity);
  Json taints = Json::array();
  for (const Json& t : device.value("taints", Json::array())) {
    taints.push_back({{"key", t.value("key", "")},
                      {"value", t.value("value", "")},
                      {"effect", t.value("effect", "")}});
  }
  out["taints"] = std::move(taints);
  return out;
}

Json NormalizedSlice(const Json& slice) {
  const Json spec = slice.value("spec", Json::object());
  Json devices = Json::array();
  for (const Json& d : spec.value("devices", Json::array())) devices.push_back(NormalizedDevice(d));
  const Json pool = spec.value("pool", Json::object());
  return {{"driver", spec.value("driver", "")},
          {"nodeName", spec.value("nodeName", "")},
          {"pool", pool.value("name", "")},
          {"devices", std::move(devices)}};
}

std::string FirstDeviceName(const Json& normalized) {
  const Json& devices = normalized["devices"];
  return devices.empty() ? "" : devices[0]["name"].get<std::string>();
}

// Every slice of the pool there, at one generation: not half-way through a
// change.
bool CompletePool(const std::vector<Json>& slices) {
  if (slices.empty()) return false;
  std::optional<int64_t> generation;
  for (const Json& s : slices) {
    const Json pool = s.value("spec", Json::object()).value("pool", Json::object());
    const int64_t g = pool.value("generation", int64_t{-1});
    if (generation && *generation != g) return false;
    generation = g;
    if (pool.value("resourceSliceCount", int64_t{0}) != static_cast<int64_t>(slices.size())) {
      return false;
    }
  }
  return true;
}

// The same devices in the same slices, whatever order the slices come in.
bool SameContent(const std::vector<Json>& a, const std::vector<Json>& b) {
  if (a.size() != b.size()) return false;
  std::vector<Json> left, right;
  for (const Json& s : a) left.push_back(NormalizedSlice(s));
  for (const Json& s : b) right.push_back(NormalizedSlice(s));
  auto by_first_device = [](const Json& x, const Json& y) {
    return FirstDeviceName(x) < FirstDeviceName(y);
  };
  std::sort(left.begin(), left.end(), by_first_device);
  std::sort(right.begin(), right.end(), by_first_device);
  return left == right;
}

}  // namespace

Json DeviceJson(const Device& device) {
  Json d = {{"name", device.name}};
  Json attributes = Json::object();
  for (const auto& [key, value] : device.attributes) attributes[key] = AttributeJson(value);
  d["attributes"] = std::move(attributes);
  Json capacity = Json::object();
  for (const auto& [key, value] : device.capacity) {
    capacity[key] = {{"value", std::to_string(value)}};
  }
  d["capacity"] = std::move(capacity);
  if (!device.taints.empty()) {
    Json taints = Json::array();
    for (const DeviceTaint& t : device.taints) {
      Json taint = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) taint["value"] = t.value;
      if (!t.time_added.empty()) taint["timeAdded"] = t.time_added;
      taints.push_back(std::move(taint));
    }
    d["taints"] = std::move(taints);
  }
  return d;
}

std::vector<Json> BuildSlices(const std::vector<Device>& devices, const std::string& node_name,
                              const std::string& node_uid, int64_t generation) {
  std::vector<const Device*> sorted;
  for (const Device& d : devices) sorted.push_back(&d);
  std::sort(sorted.begin(), sorted.end(),
            [](const Device* a, const Device* b) { return a->name < b->name; });
  // One limit for the whole pool keeps the split stable when one device's
  // taints come and go inside a large pool.
  const bool tainted =
      std::any_of(sorted.begin(), sorted.end(), [](const Device* d) { return !d->taints.empty(); });
  const size_t per_slice = tainted ? kMaxTaintedDevicesPerSlice : kMaxDevicesPerSlice;

  std::vector<std::vector<const Device*>> chunks;
  for (size_t i = 0; i < sorted.size(); i += per_slice) {
    chunks.emplace_back(
        sorted.begin() + static_cast<std::ptrdiff_t>(i),
        sorted.begin() + static_cast<std::ptrdiff_t>(std::min(i + per_slice, sorted.size())));
  }
  if (chunks.empty()) chunks.emplace_back();

  std::vector<Json> slices;
  for (const auto& chunk : chunks) {
    Json device_list = Json::array();
    for (const Device* d : chunk) device_list.push_back(DeviceJson(*d));
    Json slice = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceSlice"},
                  {"metadata",
                   {{"generateName", node_name + "-" + kDriverName + "-"},
                    {"ownerReferences", Json::array({{{"apiVersion", "v1"},
                                                      {"kind", "Node"},
                                                      {"name", node_name},
                                                      {"uid", node_uid},
                                                      {"controller", true}}})}}},
                  {"spec",
                   {{"driver", kDriverName},
                    {"nodeName", node_name},
                    {"pool",
                     {{"name", node_name},
                      {"generation", generation},
                      {"resourceSliceCount", static_cast<int64_t>(chunks.size())}}},
                    {"devices", std::move(device_list)}}}};
    slices.push_back(std::move(slice));
  }
  return slices;
}

bool SlicesUpToDate(const std::vector<Json>& published, const std::vector<Json>& desired,
                    const PoolWrite* last) {
  if (!CompletePool(published)) return false;
  if (SameContent(published, desired)) return true;
  return last != nullptr && SameContent(desired, last->sent) &&
         SameContent(published, last->stored);
}

std::optional<int64_t> QuantityValue(const std::string& quantity) {
  static const std::pair<const char*, int64_t> kSuffixes[] = {{"Ki", int64_t{1} << 10},
                                                              {"Mi", int64_t{1} << 20},
                                                              {"Gi", int64_t{1} << 30},
                                                              {"Ti", int64_t{1} << 40},
                                                              {"Pi", int64_t{1} << 50},
                                                              {"Ei", int64_t{1} << 60},
                                                              {"k", 1000},
                                                              {"M", 1000000},
                                                              {"G", 1000000000},
                                                              {"T", 1000000000000},
                                                              {"P", 1000000000000000},
                                                              {"E", 1000000000000000000}};
  std::string_view digits = quantity;
  int64_t multiplier = 1;
  for (const auto& [suffix, factor] : kSuffixes) {
    if (digits.ends_with(suffix)) {
      digits.remove_suffix(std::string_view(suffix).size());
      multiplier = factor;
      break;
    }
  }
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    return std::nullopt;
  }
  if (n != 0 && multiplier > std::numeric_limits<int64_t>::max() / (n < 0 ? -n : n)) {
    return std::nullopt;
  }
  return n * multiplier;
}

}  // namespace gpuop::dra
