#include "dra/slice_publisher.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "dra/names.h"
#include "dra/slices.h"

namespace gpuop::dra {
namespace {

using Json = nlohmann::json;

// Conflicting writers (a second plugin instance during a rollout, a user's
// edit) get this many fresh starts before the call gives up; Resync repairs
// the rest.
constexpr int kSyncAttempts = 3;

int64_t PoolGeneration(const Json& slice) {
  return slice.value("spec", Json::object())
      .value("pool", Json::object())
      .value("generation", int64_t{0});
}

std::string SliceName(const Json& slice) {
  return slice.value("metadata", Json::object()).value("name", "");
}

}  // namespace

std::string SliceFieldSelector(const std::string& node_name) {
  return "spec.nodeName=" + node_name + ",spec.driver=" + kDriverName;
}

SlicePublisher::SlicePublisher(kube::Client& client, std::string node_name, std::string node_uid)
    : client_(client), node_name_(std::move(node_name)), node_uid_(std::move(node_uid)) {}

Status SlicePublisher::Publish(std::vector<Device> devices) {
  MutexLock lock(mu_);
  devices_ = std::move(devices);
  published_once_ = true;
  return SyncLocked();
}

Status SlicePublisher::Resync() {
  MutexLock lock(mu_);
  if (!published_once_) return Status::Ok();
  return SyncLocked();
}

int64_t SlicePublisher::generation() const {
  MutexLock lock(mu_);
  return generation_;
}

Status SlicePublisher::EnsureNodeUidLocked() {
  if (!node_uid_.empty()) return Status::Ok();
  auto node = client_.Get(kube::resources::kNodes, "", node_name_);
  if (!node.ok()) {
    return node.status().Annotate("reading Node " + node_name_ +
                                  " for its ResourceSlices' owner reference");
  }
  node_uid_ = node->value("metadata", Json::object()).value("uid", "");
  if (node_uid_.empty()) return Internal("Node " + node_name_ + " has no metadata.uid");
  return Status::Ok();
}

Status SlicePublisher::SyncLocked() {
  GPUOP_RETURN_IF_ERROR(EnsureNodeUidLocked());
  kube::ListOptions options;
  options.field_selector = SliceFieldSelector(node_name_);
  Status written;
  for (int attempt = 0; attempt < kSyncAttempts; ++attempt) {
    auto list = client_.ListAll(kube::resources::kResourceSlices, "", options);
    if (!list.ok()) return list.status().Annotate("listing ResourceSlices of node " + node_name_);
    std::vector<Json>& published = list->items;
    const PoolWrite* previous = last_write_ ? &*last_write_ : nullptr;
    if (SlicesUpToDate(published, BuildSlices(devices_, node_name_, node_uid_, 0), previous)) {
      generation_ = PoolGeneration(published.front());
      return Status::Ok();
    }

    int64_t generation = generation_;
    for (const Json& s : published) generation = std::max(generation, PoolGeneration(s));
    ++generation;
    std::vector<Json> desired = BuildSlices(devices_, node_name_, node_uid_, generation);
    // Reuse slices in name order so a repeated sync touches the same objects.
    std::sort(published.begin(), published.end(),
              [](const Json& a, const Json& b) { return SliceName(a) < SliceName(b); });

    last_write_.reset();
    std::vector<Json> stored;
    written = Status::Ok();
    for (size_t i = 0; i < desired.size() && written.ok(); ++i) {
      if (i < published.size()) {
        Json update = published[i];
        update["spec"] = desired[i]["spec"];
        update["metadata"]["ownerReferences"] = desired[i]["metadata"]["ownerReferences"];
        auto r = client_.Update(kube::resources::kResourceSlices, update);
        if (r.ok()) {
          stored.push_back(std::move(r).value());
        } else {
          written = r.status().Annotate("updating ResourceSlice " + SliceName(update));
        }
      } else {
        auto r = client_.Create(kube::resources::kResourceSlices, "", desired[i]);
        if (r.ok()) {
          stored.push_back(std::move(r).value());
        } else {
          written = r.status().Annotate("creating a ResourceSlice for node " + node_name_);
        }
      }
    }
    for (size_t i = desired.size(); i < published.size() && written.ok(); ++i) {
      kube::DeleteOptions del;
      del.precondition_uid = published[i]["metadata"].value("uid", "");
      Status s = client_.Delete(kube::resources::kResourceSlices, "", SliceName(published[i]), del);
      if (!s.ok() && !kube::IsNotFound(s)) {
        written = s.Annotate("deleting ResourceSlice " + SliceName(published[i]));
      }
    }
    if (written.ok()) {
      generation_ = generation;
      if (!SlicesUpToDate(stored, desired)) {
        LogWarn("the API server dropped fields of the ResourceSlices it stored",
                {{"node", node_name_},
                 {"hint", "device taints need the DRADeviceTaints feature gate"}});
      }
      LogInfo("published ResourceSlices", {{"node", node_name_},
                                           {"generation", generation},
                                           {"slices", desired.size()},
                                           {"devices", devices_.size()}});
      last_write_ = PoolWrite{std::move(desired), std::move(stored)};
      return Status::Ok();
    }
    // Someone else changed or removed a slice meanwhile: start from a fresh list.
    if (!kube::IsConflict(written) && !kube::IsNotFound(written)) return written;
  }
  return written;
}

}  // namespace gpuop::dra
