#include "sim/cluster/dra_manager.h"

#include <sys/stat.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include "base/clock.h"
#include "base/json_field.h"
#include "base/log.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "sim/kubelet/dra_kubelet.h"

namespace gpuop::simcluster {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string PodRef(const Json& pod) { return kube::Namespace(pod) + "/" + kube::Name(pod); }

// The drivers a claim's allocation names, in order.
std::vector<std::string> AllocatedDrivers(const Json& claim) {
  std::vector<std::string> out;
  const Json& results =
      Field(Field(Field(Field(claim, "status"), "allocation"), "devices"), "results");
  if (!results.is_array()) return out;
  for (const Json& r : results) {
    std::string driver = StringField(r, "driver");
    if (!driver.empty() && std::find(out.begin(), out.end(), driver) == out.end()) {
      out.push_back(driver);
    }
  }
  return out;
}

ino_t SocketInode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

Result<std::vector<PodClaim>> ResolvePodClaims(const Json& pod) {
  std::vector<PodClaim> out;
  const Json& entries = Field(Field(pod, "spec"), "resourceClaims");
  if (!entries.is_array()) return out;
  std::map<std::string, std::string> generated;
  const Json& statuses = Field(Field(pod, "status"), "resourceClaimStatuses");
  if (statuses.is_array()) {
    for (const Json& s : statuses)
      generated[StringField(s, "name")] = StringField(s, "resourceClaimName");
  }
  for (const Json& e : entries) {
    PodClaim c{StringField(e, "name"), StringField(e, "resourceClaimName")};
    if (c.claim.empty()) {
      const std::string tmpl = StringField(e, "resourceClaimTemplateName");
      auto it = generated.find(c.entry);
      if (tmpl.empty() || it == generated.end() || it->second.empty()) {
        return FailedPrecondition("pod " + PodRef(pod) + ": waiting for the ResourceClaim of " +
                                  "spec.resourceClaims entry \"" + c.entry + "\"" +
                                  (tmpl.empty() ? "" : " (template " + tmpl + ")") +
                                  " to be created");
      }
      c.claim = it->second;
    }
    out.push_back(std::move(c));
  }
  return out;
}

Status CheckClaimForPod(const Json& claim, const Json& pod) {
  const std::string ref = kube::Namespace(claim) + "/" + kube::Name(claim);
  if (!Field(Field(claim, "status"), "allocation").is_object()) {
    return FailedPrecondition("resource claim " + ref + " is not allocated");
  }
  const std::string uid = StringField(Field(pod, "metadata"), "uid");
  const Json& reserved = Field(Field(claim, "status"), "reservedFor");
  if (reserved.is_array()) {
    for (const Json& r : reserved) {
      if (StringField(r, "uid") == uid && StringField(r, "resource") == "pods") return Status::Ok();
    }
  }
  return FailedPrecondition("pod " + PodRef(pod) + " (" + uid +
                            ") is not allowed to use resource claim " + ref +
                            ": it is not reserved for the pod");
}

std::map<std::string, std::vector<std::string>> ContainerCdiDevices(
    const Json& pod, const std::vector<PodClaim>& claims,
    const std::map<std::string, std::vector<kubelet::DraPreparedDevice>>& prepared_by_claim) {
  std::map<std::string, std::string> claim_of_entry;
  for (const PodClaim& c : claims) claim_of_entry[c.entry] = c.claim;
  std::map<std::string, std::vector<std::string>> out;
  for (const char* list : {"initContainers", "containers"}) {
    const Json& containers = Field(Field(pod, "spec"), list);
    if (!containers.is_array()) continue;
    for (const Json& c : containers) {
      const Json& refs = Field(Field(c, "resources"), "claims");
      if (!refs.is_array()) continue;
      std::vector<std::string>& ids = out[StringField(c, "name")];
      for (const Json& ref : refs) {
        auto entry = claim_of_entry.find(StringField(ref, "name"));
        if (entry == claim_of_entry.end()) continue;
        auto prepared = prepared_by_claim.find(entry->second);
        if (prepared == prepared_by_claim.end()) continue;
        const std::string request = StringField(ref, "request");
        for (const kubelet::DraPreparedDevice& d : prepared->second) {
          const bool serves = request.empty() || d.request_names.empty() ||
                              std::find(d.request_names.begin(), d.request_names.end(), request) !=
                                  d.request_names.end();
          if (!serves) continue;
          for (const std::string& id : d.cdi_device_ids) {
            if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
          }
        }
      }
    }
  }
  return out;
}

class DraManager::Impl {
 public:
  Impl(DraManagerOptions o, kube::Client* client) : opt_(std::move(o)), client_(client) {}

  Status Start() {
    // A kubelet starting removes its node's slices; the plugins republish.
    DeleteSlices("");
    thread_ = std::jthread([this](std::stop_token st) { Loop(st); });
    return Status::Ok();
  }

  void Stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }

  void Restart() {
    Stop();
    {
      std::lock_guard l(mu_);
      plugins_.clear();
      sockets_.clear();
      gone_since_.clear();
      failed_.clear();
    }
    (void)Start();
  }

  Result<std::map<std::string, std::vector<std::string>>> PreparePod(const Json& pod) {
    GPUOP_ASSIGN_OR_RETURN(std::vector<PodClaim> claims, ResolvePodClaims(pod));
    if (claims.empty()) return std::map<std::string, std::vector<std::string>>{};
    const std::string pod_uid = StringField(Field(pod, "metadata"), "uid");
    const std::string ns = kube::Namespace(pod);

    // Each claim as the API has it now; per driver, the claims to prepare.
    std::map<std::string, std::vector<kubelet::DraClaim>> to_prepare;
    std::map<std::string, std::vector<std::string>> drivers_of;  // claim uid → drivers
    std::map<std::string, std::string> uid_of;                   // claim name → uid
    for (const PodClaim& c : claims) {
      auto claim = client_->Get(kube::resources::kResourceClaims, ns, c.claim);
      if (!claim.ok()) {
        return claim.status().Annotate("fetching resource claim " + ns + "/" + c.claim);
      }
      GPUOP_RETURN_IF_ERROR(CheckClaimForPod(*claim, pod));
      const std::string uid = StringField(Field(*claim, "metadata"), "uid");
      uid_of[c.claim] = uid;
      drivers_of[uid] = AllocatedDrivers(*claim);
      std::lock_guard l(mu_);
      if (prepared_.count(uid)) continue;
      for (const std::string& d : drivers_of[uid]) to_prepare[d].push_back({ns, uid, c.claim});
    }

    // One call per driver, outside the lock (up to 45 s each).
    std::map<std::string, std::vector<kubelet::DraPreparedDevice>> fresh;  // claim uid → devices
    for (const auto& [driver, list] : to_prepare) {
      std::shared_ptr<sim::DraKubeletClient> plugin = PluginFor(driver);
      if (plugin == nullptr) {
        return Unavailable("DRA driver " + driver + " is not registered on node " + opt_.node_name +
                           " (no " + driver + "-reg.sock in " + opt_.registry_dir + ")");
      }
      auto answer = plugin->Prepare(list);
      if (!answer.ok()) {
        return answer.status().Annotate("NodePrepareResources of DRA driver " + driver);
      }
      for (const kubelet::DraClaim& c : list) {
        const kubelet::DraPrepareResult& r = answer->at(c.uid);
        if (!r.error.empty()) {
          return Unavailable("NodePrepareResources failed for claim " + c.ns + "/" + c.name + ": " +
                             r.error);
        }
        auto& devices = fresh[c.uid];
        devices.insert(devices.end(), r.devices.begin(), r.devices.end());
      }
    }

    std::map<std::string, std::vector<kubelet::DraPreparedDevice>> by_name;
    {
      std::lock_guard l(mu_);
      for (const PodClaim& c : claims) {
        const std::string& uid = uid_of[c.claim];
        auto it = prepared_.find(uid);
        if (it == prepared_.end()) {
          Prepared p{ns, c.claim, drivers_of[uid], {}, fresh[uid]};
          it = prepared_.emplace(uid, std::move(p)).first;
        }
        it->second.users.insert(pod_uid);
        by_name[c.claim] = it->second.devices;
      }
    }
    return ContainerCdiDevices(pod, claims, by_name);
  }

  void ReleasePod(const std::string& pod_uid) {
    {
      std::lock_guard l(mu_);
      for (auto it = prepared_.begin(); it != prepared_.end();) {
        it->second.users.erase(pod_uid);
        if (it->second.users.empty()) {
          unprepare_.emplace(it->first, std::move(it->second));
          it = prepared_.erase(it);
        } else {
          ++it;
        }
      }
    }
    UnpreparePending();
  }

  std::vector<std::string> Drivers() const {
    std::lock_guard l(mu_);
    std::vector<std::string> out;
    for (const auto& [driver, _] : plugins_) out.push_back(driver);
    return out;
  }

 private:
  struct Prepared {
    std::string ns, name;
    std::vector<std::string> drivers;
    std::set<std::string> users;  // pod UIDs
    std::vector<kubelet::DraPreparedDevice> devices;
  };
  struct Socket {
    std::string driver;
    ino_t inode = 0;
  };

  std::shared_ptr<sim::DraKubeletClient> PluginFor(const std::string& driver) {
    std::lock_guard l(mu_);
    auto it = plugins_.find(driver);
    return it == plugins_.end() ? nullptr : it->second;
  }

  // Unprepares every claim no pod uses; what fails stays for the next scan.
  void UnpreparePending() {
    std::map<std::string, Prepared> work;
    {
      std::lock_guard l(mu_);
      work.swap(unprepare_);
    }
    for (auto& [uid, p] : work) {
      bool done = true;
      for (const std::string& driver : p.drivers) {
        std::shared_ptr<sim::DraKubeletClient> plugin = PluginFor(driver);
        Status s;
        if (plugin == nullptr) {
          s = Unavailable("DRA driver " + driver + " is not registered");
        } else {
          auto answer = plugin->Unprepare({{p.ns, uid, p.name}});
          if (!answer.ok()) {
            s = answer.status();
          } else if (!answer->at(uid).empty()) {
            s = Unavailable(answer->at(uid));
          }
        }
        if (!s.ok()) {
          LogWarn("kubelet: NodeUnprepareResources failed, retrying",
                  {{"node", opt_.node_name}, {"claim", p.ns + "/" + p.name}, {"error", s}});
          done = false;
        }
      }
      if (!done) {
        std::lock_guard l(mu_);
        unprepare_.emplace(uid, std::move(p));
      }
    }
  }

  void DeleteSlices(const std::string& driver) {
    kube::ListOptions lo;
    lo.field_selector = "spec.nodeName=" + opt_.node_name;
    if (!driver.empty()) lo.field_selector += ",spec.driver=" + driver;
    auto list = client_->List(kube::resources::kResourceSlices, "", lo);
    if (!list.ok()) {
      LogWarn("kubelet: listing ResourceSlices",
              {{"node", opt_.node_name}, {"error", list.status()}});
      return;
    }
    for (const Json& slice : list->items) {
      Status s = client_->Delete(kube::resources::kResourceSlices, "", kube::Name(slice));
      if (!s.ok() && !kube::IsNotFound(s)) {
        LogWarn("kubelet: deleting a ResourceSlice",
                {{"node", opt_.node_name}, {"slice", kube::Name(slice)}, {"error", s}});
      }
    }
  }

  void Scan() {
    std::vector<std::string> present = sim::ListDraRegistrationSockets(opt_.registry_dir);
    // Gone, or replaced by a new socket of a restarted plugin.
    {
      std::lock_guard l(mu_);
      for (auto it = sockets_.begin(); it != sockets_.end();) {
        const bool there = std::find(present.begin(), present.end(), it->first) != present.end();
        if (there && SocketInode(it->first) == it->second.inode) {
          ++it;
          continue;
        }
        plugins_.erase(it->second.driver);
        gone_since_[it->second.driver] = Clock::now();
        LogInfo("kubelet: DRA plugin gone",
                {{"node", opt_.node_name}, {"driver", it->second.driver}});
        it = sockets_.erase(it);
      }
    }
    for (const std::string& path : present) {
      {
        std::lock_guard l(mu_);
        if (sockets_.count(path)) continue;
      }
      const ino_t inode = SocketInode(path);
      sim::DraKubeletOptions ko;
      ko.node_root = opt_.node_root;
      auto plugin = sim::DraKubeletClient::Register(path, ko);
      if (!plugin.ok()) {
        if (failed_.insert(path + "@" + std::to_string(inode)).second) {
          LogWarn("kubelet: DRA plugin registration failed",
                  {{"node", opt_.node_name}, {"socket", path}, {"error", plugin.status()}});
        }
        continue;
      }
      const std::string driver = (*plugin)->registration().driver_name;
      LogInfo("kubelet: DRA plugin registered", {{"node", opt_.node_name}, {"driver", driver}});
      std::lock_guard l(mu_);
      sockets_[path] = {driver, inode};
      plugins_[driver] = std::shared_ptr<sim::DraKubeletClient>(std::move(plugin).value());
      gone_since_.erase(driver);
    }
    // Slices of a driver gone for the wiping delay.
    std::vector<std::string> wipe;
    {
      std::lock_guard l(mu_);
      for (auto it = gone_since_.begin(); it != gone_since_.end();) {
        if (Clock::now() - it->second < opt_.wiping_delay) {
          ++it;
          continue;
        }
        wipe.push_back(it->first);
        it = gone_since_.erase(it);
      }
    }
    for (const std::string& driver : wipe) DeleteSlices(driver);
    UnpreparePending();
  }

  void Loop(std::stop_token stop) {
    while (!stop.stop_requested()) {
      Scan();
      RealClock().SleepFor(opt_.scan_interval, stop);
    }
  }

  const DraManagerOptions opt_;
  kube::Client* const client_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<sim::DraKubeletClient>> plugins_;  // by driver
  std::map<std::string, Socket> sockets_;                                  // by path
  std::map<std::string, Clock::time_point> gone_since_;                    // by driver
  std::set<std::string> failed_;               // registration failures already logged
  std::map<std::string, Prepared> prepared_;   // by claim UID
  std::map<std::string, Prepared> unprepare_;  // by claim UID: no pod uses them
  std::jthread thread_;
};

Result<std::unique_ptr<DraManager>> DraManager::Start(DraManagerOptions options,
                                                      kube::Client* client) {
  auto impl = std::make_unique<Impl>(std::move(options), client);
  GPUOP_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<DraManager>(new DraManager(std::move(impl)));
}

DraManager::DraManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DraManager::~DraManager() { impl_->Stop(); }

Result<std::map<std::string, std::vector<std::string>>> DraManager::PreparePod(const Json& pod) {
  return impl_->PreparePod(pod);
}
void DraManager::ReleasePod(const std::string& pod_uid) { impl_->ReleasePod(pod_uid); }
void DraManager::Restart() { impl_->Restart(); }
std::vector<std::string> DraManager::Drivers() const { return impl_->Drivers(); }

}  // namespace gpuop::simcluster
