// SlicePublisher: keeps the API server's ResourceSlices for one node and the
// gpu.nvidia.com driver equal to the node's DRA devices, as the Kubernetes
// DRA helper does for NVIDIA's plugin (k8s.io/dynamic-resource-allocation):
//   - it lists the node's slices by the fields spec.nodeName and spec.driver;
//   - when they say something else than the devices (a device came, went or
//     changed, a taint was added, a slice was deleted or edited), it writes
//     the whole pool again at the next generation: existing slices are
//     updated in place, missing ones created, surplus ones deleted;
//   - when they already say it, it writes nothing, so the generation stays.
//
// Publish is idempotent. Resync re-checks the last devices published; the
// plugin calls it on a watch event for its slices (SliceWatchOptions) and on
// a timer as a backstop, which brings back slices a kubelet restart deleted.
//
// Thread-safety: Publish and Resync may be called from any thread; calls are
// serialised.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "dra/devices.h"
#include "dra/slices.h"
#include "kube/client.h"

namespace gpuop::dra {

// "spec.nodeName=<node>,spec.driver=gpu.nvidia.com": this node's slices.
std::string SliceFieldSelector(const std::string& node_name);

class SlicePublisher {
 public:
  // `node_uid` may be empty: the Node is then read once, on the first write,
  // for the slices' owner reference. `client` must outlive the publisher.
  SlicePublisher(kube::Client& client, std::string node_name, std::string node_uid = "");

  // Makes the node's slices say `devices`. Errors name the slice and the
  // verb; the next Publish or Resync tries again from what the server holds.
  Status Publish(std::vector<Device> devices);
  // Publish of the last devices again; nothing before the first Publish.
  Status Resync();

  // The pool generation the server holds after the last successful call; 0
  // before one.
  int64_t generation() const;

 private:
  Status SyncLocked() GPUOP_REQUIRES(mu_);
  Status EnsureNodeUidLocked() GPUOP_REQUIRES(mu_);

  kube::Client& client_;
  const std::string node_name_;

  mutable Mutex mu_;
  std::string node_uid_ GPUOP_GUARDED_BY(mu_);
  std::vector<Device> devices_ GPUOP_GUARDED_BY(mu_);
  bool published_once_ GPUOP_GUARDED_BY(mu_) = false;
  int64_t generation_ GPUOP_GUARDED_BY(mu_) = 0;
  // The last complete write and what the server stored of it.
  std::optional<PoolWrite> last_write_ GPUOP_GUARDED_BY(mu_);
};

}  // namespace gpuop::dra
