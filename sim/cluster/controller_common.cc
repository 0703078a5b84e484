#include "sim/cluster/controller_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "base/json_field.h"
#include "base/strings.h"

namespace gpuop::simcluster {

const kube::Resource kReplicaSets{"apps", "v1", "replicasets", "ReplicaSet", true};
const kube::Resource kControllerRevisions{"apps", "v1", "controllerrevisions", "ControllerRevision",
                                          true};

namespace {

const Json* At(const Json& obj, std::initializer_list<const char*> path) {
  const Json* cur = &obj;
  for (const char* key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

void AddTo(ResourceList& into, const Json* list) {
  if (list == nullptr || !list->is_object()) return;
  for (const auto& [name, q] : list->items()) {
    if (auto v = ParseQuantityMilli(q)) into[name] += *v;
  }
}

// A container's requests, with limits standing in for missing requests.
ResourceList ContainerRequests(const Json& c) {
  ResourceList out;
  const Json* resources = At(c, {"resources"});
  if (resources == nullptr) return out;
  AddTo(out, At(*resources, {"requests"}));
  ResourceList limits;
  AddTo(limits, At(*resources, {"limits"}));
  for (const auto& [name, v] : limits) out.emplace(name, v);  // only where no request
  return out;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  std::string copy(s);
  long long v = std::strtoll(copy.c_str(), &end, 10);
  if (end == copy.c_str() || *end != '\0') return std::nullopt;
  return v;
}

bool ExpressionMatches(const Json& expr, const std::optional<std::string>& value) {
  const std::string op = StringField(expr, "operator");
  std::vector<std::string> values;
  if (const Json* v = At(expr, {"values"}); v != nullptr && v->is_array()) {
    for (const auto& x : *v) {
      if (x.is_string()) values.push_back(x.get<std::string>());
    }
  }
  auto in = [&] {
    return value && std::find(values.begin(), values.end(), *value) != values.end();
  };
  if (op == "In") return in();
  if (op == "NotIn") return !in();
  if (op == "Exists") return value.has_value();
  if (op == "DoesNotExist") return !value.has_value();
  if (op == "Gt" || op == "Lt") {
    if (!value || values.size() != 1) return false;
    auto have = ParseInt(*value);
    auto want = ParseInt(values[0]);
    if (!have || !want) return false;
    return op == "Gt" ? *have > *want : *have < *want;
  }
  return false;
}

}  // namespace

const Json& Member(const Json& obj, const char* key) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::optional<int64_t> ParseQuantityMilli(const Json& quantity) {
  if (quantity.is_number_integer()) return quantity.get<int64_t>() * 1000;
  if (quantity.is_number()) return static_cast<int64_t>(std::ceil(quantity.get<double>() * 1000));
  if (!quantity.is_string()) return std::nullopt;
  const std::string s = quantity.get<std::string>();
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0 || (i == 1 && (s[0] == '+' || s[0] == '-'))) return std::nullopt;
  char* end = nullptr;
  std::string number = s.substr(0, i);
  long double v = std::strtold(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return std::nullopt;
  const std::string suffix = s.substr(i);
  static const std::map<std::string, long double> kSuffixes = {
      {"", 1.0L},
      {"m", 1e-3L},
      {"u", 1e-6L},
      {"n", 1e-9L},
      {"k", 1e3L},
      {"M", 1e6L},
      {"G", 1e9L},
      {"T", 1e12L},
      {"P", 1e15L},
      {"E", 1e18L},
      {"Ki", 1024.0L},
      {"Mi", 1024.0L * 1024},
      {"Gi", 1024.0L * 1024 * 1024},
      {"Ti", 1024.0L * 1024 * 1024 * 1024},
      {"Pi", 1024.0L * 1024 * 1024 * 1024 * 1024},
      {"Ei", 1024.0L * 1024 * 1024 * 1024 * 1024 * 1024},
  };
  long double scale = 1.0L;
  if (auto it = kSuffixes.find(suffix); it != kSuffixes.end()) {
    scale = it->second;
  } else if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    auto exp = ParseInt(suffix.substr(1));
    if (!exp) return std::nullopt;
    scale = std::pow(10.0L, static_cast<long double>(*exp));
  } else {
    return std::nullopt;
  }
  long double milli = std::ceil(v * scale * 1000.0L - 1e-9L);
  if (milli > 9.2e18L || milli < -9.2e18L) return std::nullopt;
  return static_cast<int64_t>(milli);
}

std::string FormatQuantityMilli(int64_t milli) {
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  return std::to_string(milli) + "m";
}

ResourceList PodRequests(const Json& pod) {
  ResourceList regular;
  if (const Json* cs = At(pod, {"spec", "containers"}); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      for (const auto& [name, v] : ContainerRequests(c)) regular[name] += v;
    }
  }
  if (const Json* cs = At(pod, {"spec", "initContainers"}); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      for (const auto& [name, v] : ContainerRequests(c)) {
        regular[name] = std::max(regular[name], v);
      }
    }
  }
  AddTo(regular, At(pod, {"spec", "overhead"}));
  return regular;
}

bool NodeSelectorTermMatches(const Json& term, const Json& node) {
  if (!term.is_object()) return false;
  const Json* exprs = At(term, {"matchExpressions"});
  const Json* fields = At(term, {"matchFields"});
  const bool has_exprs = exprs != nullptr && exprs->is_array() && !exprs->empty();
  const bool has_fields = fields != nullptr && fields->is_array() && !fields->empty();
  if (!has_exprs && !has_fields) return false;
  const auto labels = kube::Labels(node);
  if (has_exprs) {
    for (const auto& e : *exprs) {
      auto it = labels.find(StringField(e, "key"));
      std::optional<std::string> value;
      if (it != labels.end()) value = it->second;
      if (!ExpressionMatches(e, value)) return false;
    }
  }
  if (has_fields) {
    for (const auto& f : *fields) {
      if (StringField(f, "key") != "metadata.name") return false;  // the only field kube supports
      if (!ExpressionMatches(f, kube::Name(node))) return false;
    }
  }
  return true;
}

bool PodMatchesNodeSelectorAndAffinity(const Json& pod_spec, const Json& node) {
  if (const Json* sel = At(pod_spec, {"nodeSelector"}); sel != nullptr && sel->is_object()) {
    const auto labels = kube::Labels(node);
    for (const auto& [k, v] : sel->items()) {
      auto it = labels.find(k);
      if (it == labels.end() || !v.is_string() || it->second != v.get<std::string>()) return false;
    }
  }
  const Json* terms =
      At(pod_spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                    "nodeSelectorTerms"});
  if (terms == nullptr || !terms->is_array()) return true;
  for (const auto& term : *terms) {
    if (NodeSelectorTermMatches(term, node)) return true;
  }
  return false;
}

bool ToleratesTaint(const Json& tolerations, const kube::Taint& taint) {
  if (!tolerations.is_array()) return false;
  for (const auto& t : tolerations) {
    if (!t.is_object()) continue;
    const std::string effect = StringField(t, "effect");
    if (!effect.empty() && effect != taint.effect) continue;
    const std::string key = StringField(t, "key");
    std::string op = StringField(t, "operator");
    if (op.empty()) op = "Equal";
    if (key.empty()) {
      if (op == "Exists") return true;  // an empty key with Exists tolerates everything
      continue;
    }
    if (key != taint.key) continue;
    if (op == "Exists") return true;
    if (op == "Equal" && StringField(t, "value") == taint.value) return true;
  }
  return false;
}

std::optional<kube::Taint> FirstUntoleratedTaint(const Json& tolerations,
                                                 const std::vector<kube::Taint>& taints,
                                                 const std::set<std::string>& effects) {
  for (const auto& taint : taints) {
    if (effects.count(taint.effect) == 0) continue;
    if (!ToleratesTaint(tolerations, taint)) return taint;
  }
  return std::nullopt;
}

std::string ComputeHash(const Json& object, std::optional<int64_t> collision_count) {
  // FNV-1a (32 bit) over the canonical JSON (keys sorted), then the
  // collision count's 4 little-endian bytes, like kube's controller.ComputeHash.
  uint32_t h = Fnv1a32(object.dump());
  if (collision_count) {
    const uint32_t cc = static_cast<uint32_t>(*collision_count);
    const char bytes[4] = {static_cast<char>(cc & 0xff), static_cast<char>((cc >> 8) & 0xff),
                           static_cast<char>((cc >> 16) & 0xff),
                           static_cast<char>((cc >> 24) & 0xff)};
    h = Fnv1a32(std::string_view(bytes, 4), h);
  }
  // kube's rand.SafeEncodeString of the decimal value: no vowels, no look-alikes.
  static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (char c : std::to_string(h)) {
    out += kAlphabet[static_cast<unsigned char>(c) % kAlphabet.size()];
  }
  return out;
}

int64_t ResolveIntOrPercent(const Json& value, int64_t total, bool round_up, int64_t fallback) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_string()) return fallback;
  std::string s = value.get<std::string>();
  if (s.empty()) return fallback;
  if (s.back() != '%') return ParseInt(s).value_or(fallback);
  auto pct = ParseInt(std::string_view(s).substr(0, s.size() - 1));
  if (!pct) return fallback;
  const int64_t scaled = *pct * total;
  return round_up ? (scaled + 99) / 100 : scaled / 100;
}

bool IsPodAvailable(const Json& pod, int64_t min_ready_seconds,
                    std::chrono::system_clock::time_point now) {
  auto ready = kube::FindCondition(pod, "Ready");
  if (!ready || ready->status != "True") return false;
  if (min_ready_seconds <= 0) return true;
  auto since = kube::ParseRfc3339(ready->last_transition_time);
  return since && *since + std::chrono::seconds(min_ready_seconds) < now;
}

bool IsPodActive(const Json& pod) {
  return !kube::IsPodTerminal(pod) && !kube::IsBeingDeleted(pod);
}

std::string ControllerUid(const Json& obj) {
  for (const auto& ref : kube::OwnerReferences(obj)) {
    if (ref.controller) return ref.uid;
  }
  return "";
}

std::vector<std::string> IndexByControllerUid(const Json& obj) {
  std::string uid = ControllerUid(obj);
  if (uid.empty()) return {};
  return {uid};
}

Json ControllerRef(const Json& owner, const char* api_version, const char* kind) {
  return {{"apiVersion", api_version}, {"kind", kind},       {"name", kube::Name(owner)},
          {"uid", kube::Uid(owner)},   {"controller", true}, {"blockOwnerDeletion", true}};
}

std::chrono::system_clock::time_point CreationTime(const Json& obj) {
  const Json* ts = At(obj, {"metadata", "creationTimestamp"});
  if (ts == nullptr || !ts->is_string()) return {};
  return kube::ParseRfc3339(ts->get<std::string>())
      .value_or(std::chrono::system_clock::time_point{});
}

void Expectations::ExpectCreation(const std::string& key, const std::string& created_key) {
  std::lock_guard lock(mu_);
  Entry& e = entries_[key];
  if (e.creations.empty() && e.deletions.empty()) e.since = std::chrono::steady_clock::now();
  e.creations.insert(created_key);
}

void Expectations::ExpectDeletion(const std::string& key, const std::string& deleted_key,
                                  const std::string& uid) {
  std::lock_guard lock(mu_);
  Entry& e = entries_[key];
  if (e.creations.empty() && e.deletions.empty()) e.since = std::chrono::steady_clock::now();
  e.deletions[deleted_key] = uid;
}

bool Expectations::Satisfied(const std::string& key, const kube::Informer& cache) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return true;
  Entry& e = it->second;
  for (auto c = e.creations.begin(); c != e.creations.end();) {
    c = cache.Get(*c) ? e.creations.erase(c) : std::next(c);
  }
  for (auto d = e.deletions.begin(); d != e.deletions.end();) {
    kube::ObjectPtr obj = cache.Get(d->first);
    const bool gone = !obj || kube::Uid(*obj) != d->second || kube::IsBeingDeleted(*obj);
    d = gone ? e.deletions.erase(d) : std::next(d);
  }
  if (e.creations.empty() && e.deletions.empty()) {
    entries_.erase(it);
    return true;
  }
  if (std::chrono::steady_clock::now() - e.since > timeout_) {
    entries_.erase(it);
    return true;
  }
  return false;
}

void Expectations::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  entries_.erase(key);
}

}  // namespace gpuop::simcluster
