#include "sim/cluster/dra_allocator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/json_field.h"
#include "sim/cluster/controller_common.h"

namespace gpuop::simcluster {

using kube::Json;

namespace {

const Json& Items(const Json& obj, const char* key) {
  static const Json kEmpty = Json::array();
  const Json& v = Member(obj, key);
  return v.is_array() ? v : kEmpty;
}

std::string ClaimName(const Json& claim) {
  return "resourceclaim " + kube::Namespace(claim) + "/" + kube::Name(claim);
}

bool IsAllocated(const Json& claim) {
  return Member(Member(claim, "status"), "allocation").is_object();
}

// The CEL expressions of a class or request's selectors[].
std::vector<std::string> Expressions(const Json& selectors) {
  std::vector<std::string> out;
  for (const auto& s : selectors) out.push_back(StringField(Member(s, "cel"), "expression"));
  return out;
}

// A device of the node, with where it came from.
struct Candidate {
  DeviceRef ref;
  const Json* device = nullptr;
};

// The devices of the slices of each (driver, pool)'s highest generation, in
// slice order.
std::vector<Candidate> NodeDevices(const std::string& node,
                                   const std::vector<const Json*>& slices) {
  std::map<std::pair<std::string, std::string>, int64_t> newest;
  auto pool_of = [](const Json& spec) {
    return std::make_pair(StringField(spec, "driver"), StringField(Member(spec, "pool"), "name"));
  };
  auto generation_of = [](const Json& spec) {
    const Json& g = Member(Member(spec, "pool"), "generation");
    return g.is_number_integer() ? g.get<int64_t>() : 0;
  };
  for (const Json* slice : slices) {
    const Json& spec = Member(*slice, "spec");
    if (StringField(spec, "nodeName") != node) continue;
    auto [it, added] = newest.emplace(pool_of(spec), generation_of(spec));
    if (!added) it->second = std::max(it->second, generation_of(spec));
  }
  std::vector<Candidate> out;
  for (const Json* slice : slices) {
    const Json& spec = Member(*slice, "spec");
    if (StringField(spec, "nodeName") != node) continue;
    auto pool = pool_of(spec);
    if (newest[pool] != generation_of(spec)) continue;
    for (const auto& d : Items(spec, "devices")) {
      out.push_back({{pool.first, pool.second, StringField(d, "name")}, &d});
    }
  }
  return out;
}

// NoSchedule and NoExecute device taints must be tolerated; None is advice.
bool TaintsTolerated(const Json& device, const Json& tolerations) {
  for (const auto& t : Items(device, "taints")) {
    kube::Taint taint{StringField(t, "key"), StringField(t, "value"), StringField(t, "effect")};
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    if (!ToleratesTaint(tolerations, taint)) return false;
  }
  return true;
}

// The device's value of a fully qualified attribute ("gpu.nvidia.com/x");
// the driver's own attributes may be stored without their domain.
const Json* QualifiedAttribute(const Candidate& c, const std::string& name) {
  const Json& attrs = Member(*c.device, "attributes");
  if (!attrs.is_object()) return nullptr;
  if (auto it = attrs.find(name); it != attrs.end()) return &*it;
  const std::string own = c.ref.driver + "/";
  if (name.compare(0, own.size(), own) == 0) {
    if (auto it = attrs.find(name.substr(own.size())); it != attrs.end()) return &*it;
  }
  return nullptr;
}

// One request of one claim, and the devices that may serve it.
struct Slot {
  size_t claim = 0;
  std::string request;
  std::vector<size_t> candidates;  // indexes into the node's devices
  size_t need = 0;
  std::vector<size_t> chosen;
};

struct Constraint {
  size_t claim = 0;
  std::set<std::string> requests;  // empty: all of the claim's
  std::string attribute;
  std::optional<Json> value;  // set by the first device chosen
};

class Search {
 public:
  Search(const std::vector<Candidate>& devices, std::vector<Slot>& slots,
         std::vector<Constraint>& constraints)
      : devices_(devices), slots_(slots), constraints_(constraints), used_(devices.size()) {}

  bool Run() { return Step(0, 0); }

 private:
  bool Step(size_t s, size_t from) {
    if (s == slots_.size()) return true;
    Slot& slot = slots_[s];
    if (slot.chosen.size() == slot.need) return Step(s + 1, 0);
    for (size_t i = from; i < slot.candidates.size(); ++i) {
      if (slot.need - slot.chosen.size() > slot.candidates.size() - i) return false;
      const size_t d = slot.candidates[i];
      if (used_[d]) continue;
      std::vector<size_t> fixed;
      if (!Constrain(slot, devices_[d], &fixed)) continue;
      used_[d] = true;
      slot.chosen.push_back(d);
      if (Step(s, i + 1)) return true;
      slot.chosen.pop_back();
      used_[d] = false;
      for (size_t c : fixed) constraints_[c].value.reset();
    }
    return false;
  }

  // Whether `device` keeps every constraint on the slot's request; records
  // the constraints it fixed a value for in `fixed` (undone on backtracking).
  bool Constrain(const Slot& slot, const Candidate& device, std::vector<size_t>* fixed) {
    for (size_t c = 0; c < constraints_.size(); ++c) {
      Constraint& con = constraints_[c];
      if (con.claim != slot.claim) continue;
      if (!con.requests.empty() && con.requests.count(slot.request) == 0) continue;
      const Json* value = QualifiedAttribute(device, con.attribute);
      if (value == nullptr || (con.value && *con.value != *value)) {
        for (size_t f : *fixed) constraints_[f].value.reset();
        fixed->clear();
        return false;
      }
      if (!con.value) {
        con.value = *value;
        fixed->push_back(c);
      }
    }
    return true;
  }

  const std::vector<Candidate>& devices_;
  std::vector<Slot>& slots_;
  std::vector<Constraint>& constraints_;
  std::vector<bool> used_;
};

}  // namespace

std::vector<DeviceRef> AllocatedDevices(const Json& claim) {
  std::vector<DeviceRef> out;
  const Json& results =
      Member(Member(Member(Member(claim, "status"), "allocation"), "devices"), "results");
  if (!results.is_array()) return out;
  for (const auto& r : results) {
    out.push_back({StringField(r, "driver"), StringField(r, "pool"), StringField(r, "device")});
  }
  return out;
}

Result<const CelSelector*> DraAllocator::Selector(const std::string& expression) {
  if (auto it = selectors_.find(expression); it != selectors_.end()) return &it->second;
  GPUOP_ASSIGN_OR_RETURN(CelSelector parsed, CelSelector::Parse(expression));
  return &selectors_.emplace(expression, std::move(parsed)).first->second;
}

Status DraAllocator::Check(const std::vector<const Json*>& claims, const DeviceClasses& classes) {
  for (const Json* claim : claims) {
    if (IsAllocated(*claim)) continue;
    const Json& devices = Member(Member(*claim, "spec"), "devices");
    for (const auto& request : Items(devices, "requests")) {
      const std::string where = ClaimName(*claim) + " request " + StringField(request, "name");
      if (Member(request, "firstAvailable").is_array()) {
        return InvalidArgument(where +
                               ": firstAvailable is not supported by the simulator; use exactly");
      }
      const Json& exactly = Member(request, "exactly");
      if (!exactly.is_object()) return InvalidArgument(where + ": has no exactly");
      const Json& admin = Member(exactly, "adminAccess");
      if (admin.is_boolean() && admin.get<bool>()) {
        return InvalidArgument(where + ": adminAccess is not supported by the simulator");
      }
      if (Member(exactly, "capacity").is_object()) {
        return InvalidArgument(where + ": capacity requests are not supported by the simulator");
      }
      const std::string mode = StringField(exactly, "allocationMode");
      if (!mode.empty() && mode != "ExactCount" && mode != "All") {
        return InvalidArgument(where + ": allocationMode " + mode +
                               " is unknown; use ExactCount or All");
      }
      const std::string class_name = StringField(exactly, "deviceClassName");
      auto cls = classes.find(class_name);
      if (cls == classes.end()) {
        return NotFound(where + ": device class " + class_name + " does not exist");
      }
      std::vector<std::string> exprs =
          Expressions(Items(Member(*cls->second, "spec"), "selectors"));
      for (auto& e : Expressions(Items(exactly, "selectors"))) exprs.push_back(std::move(e));
      for (const auto& e : exprs) {
        auto parsed = Selector(e);
        if (!parsed.ok())
          return parsed.status().Annotate(where + " (device class " + class_name + ")");
      }
    }
    for (const auto& c : Items(devices, "constraints")) {
      if (Member(c, "distinctAttribute").is_string()) {
        return InvalidArgument(ClaimName(*claim) +
                               ": constraint distinctAttribute is not supported by the simulator");
      }
      if (!Member(c, "matchAttribute").is_string()) {
        return InvalidArgument(ClaimName(*claim) + ": a constraint has no matchAttribute");
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<Json>> DraAllocator::Allocate(const std::vector<const Json*>& claims,
                                                 const DeviceClasses& classes,
                                                 const std::string& node,
                                                 const std::vector<const Json*>& slices,
                                                 const std::set<DeviceRef>& in_use) {
  GPUOP_RETURN_IF_ERROR(Check(claims, classes));
  const std::vector<Candidate> devices = NodeDevices(node, slices);
  std::vector<Slot> slots;
  std::vector<Constraint> constraints;
  std::string first_error;  // a selector's evaluation error, reported with the failure
  auto fail = [&](const std::string& why) {
    std::string message = "cannot allocate all claims on node " + node + ": " + why;
    if (!first_error.empty()) message += " (" + first_error + ")";
    return FailedPrecondition(message);
  };
  for (size_t ci = 0; ci < claims.size(); ++ci) {
    const Json& claim = *claims[ci];
    if (IsAllocated(claim)) continue;
    const Json& spec_devices = Member(Member(claim, "spec"), "devices");
    for (const auto& request : Items(spec_devices, "requests")) {
      const Json& exactly = Member(request, "exactly");
      const Json& cls = *classes.at(StringField(exactly, "deviceClassName"));
      std::vector<const CelSelector*> selectors;
      std::vector<std::string> exprs = Expressions(Items(Member(cls, "spec"), "selectors"));
      for (auto& e : Expressions(Items(exactly, "selectors"))) exprs.push_back(std::move(e));
      for (const auto& e : exprs) selectors.push_back(*Selector(e));  // parsed by Check

      Slot slot;
      slot.claim = ci;
      slot.request = StringField(request, "name");
      const std::string where = ClaimName(claim) + " request " + slot.request;
      const bool all = StringField(exactly, "allocationMode") == "All";
      size_t matching = 0;
      for (size_t d = 0; d < devices.size(); ++d) {
        bool match = true;
        for (const CelSelector* sel : selectors) {
          Result<bool> m = sel->Evaluate(*devices[d].device, devices[d].ref.driver);
          if (!m.ok() && first_error.empty()) {
            first_error = "device " + devices[d].ref.device + ": " + m.status().message();
          }
          if (!m.ok() || !*m) {
            match = false;
            break;
          }
        }
        if (!match || !TaintsTolerated(*devices[d].device, Member(exactly, "tolerations"))) {
          continue;
        }
        ++matching;
        if (in_use.count(devices[d].ref) > 0) {
          if (all) {
            return fail(where + ": allocationMode All, but device " + devices[d].ref.device +
                        " is allocated to another claim");
          }
          continue;
        }
        slot.candidates.push_back(d);
      }
      const Json& count = Member(exactly, "count");
      slot.need = all ? slot.candidates.size()
                      : static_cast<size_t>(count.is_number_integer() ? count.get<int64_t>() : 1);
      if (all && slot.need == 0) return fail(where + ": allocationMode All, but no device matches");
      if (slot.candidates.size() < slot.need) {
        return fail(where + ": " + std::to_string(matching) + " device(s) match, " +
                    std::to_string(slot.candidates.size()) + " of them free, " +
                    std::to_string(slot.need) + " wanted");
      }
      slots.push_back(std::move(slot));
    }
    for (const auto& c : Items(spec_devices, "constraints")) {
      Constraint con;
      con.claim = ci;
      for (const auto& r : Items(c, "requests")) {
        if (r.is_string()) con.requests.insert(r.get<std::string>());
      }
      con.attribute = StringField(c, "matchAttribute");
      constraints.push_back(std::move(con));
    }
  }
  if (!Search(devices, slots, constraints).Run()) {
    return fail(
        "no choice of free devices serves every request (each device once) and keeps "
        "every constraint");
  }

  std::vector<Json> out(claims.size());
  for (size_t ci = 0; ci < claims.size(); ++ci) {
    const Json& claim = *claims[ci];
    if (IsAllocated(claim)) continue;
    Json results = Json::array(), config = Json::array();
    const Json& spec_devices = Member(Member(claim, "spec"), "devices");
    for (const auto& slot : slots) {
      if (slot.claim != ci) continue;
      for (size_t d : slot.chosen) {
        const DeviceRef& ref = devices[d].ref;
        results.push_back({{"request", slot.request},
                           {"driver", ref.driver},
                           {"pool", ref.pool},
                           {"device", ref.device}});
      }
    }
    for (const auto& request : Items(spec_devices, "requests")) {
      const Json& cls = *classes.at(StringField(Member(request, "exactly"), "deviceClassName"));
      for (const auto& c : Items(Member(cls, "spec"), "config")) {
        Json entry = c;
        entry["source"] = "FromClass";
        entry["requests"] = Json::array({StringField(request, "name")});
        config.push_back(std::move(entry));
      }
    }
    for (const auto& c : Items(spec_devices, "config")) {
      Json entry = c;
      entry["source"] = "FromClaim";
      config.push_back(std::move(entry));
    }
    Json devices_out = {{"results", results}};
    if (!config.empty()) devices_out["config"] = config;
    out[ci] = {
        {"devices", devices_out},
        {"nodeSelector",
         {{"nodeSelectorTerms",
           Json::array({{{"matchFields", Json::array({{{"key", "metadata.name"},
                                                       {"operator", "In"},
                                                       {"values", Json::array({node})}}})}}})}}}};
  }
  return out;
}

}  // namespace gpuop::simcluster
