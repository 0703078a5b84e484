// Kubelet: the simulated node's kubelet. It knows nothing of gpuop: it runs
// whatever pods are bound to its node, as real OCI containers (podman.h),
// and reports them to the API server the way a kubelet does.
//
//   - Registers its Node (capacity, allocatable, nodeInfo, addresses,
//     conditions, kubernetes.io/{hostname,os,arch} labels) and renews its
//     Lease in kube-node-lease.
//   - Device plugins: serves <root>/var/lib/kubelet/device-plugins/kubelet.sock
//     (sim/kubelet/fake_kubelet.h speaks the real v1beta1 protocol); healthy
//     devices become the node's allocatable; containers that request them get
//     Allocate's answer (env, mounts, device specs, CDI names resolved by
//     podman from the node's CDI specs); the pod-resources API is served on
//     <root>/var/lib/kubelet/pod-resources/kubelet.sock.
//   - Pods: volumes (FailedMount), images from the local store only
//     (ErrImagePull / ImagePullBackOff), init containers in order,
//     restartPolicy with the kubelet's back-off (CrashLoopBackOff), startup,
//     readiness and liveness probes (exec, httpGet, tcpSocket), graceful
//     termination (preStop, SIGTERM, grace period, SIGKILL), pod status,
//     conditions, restart counts, Events like a kubelet's, CRI-format logs
//     under <root>/var/log/pods. A RuntimeClass handler must be configured
//     in the node's containerd config (<root>/etc/containerd), as containerd
//     requires; the `nvidia` handler turns NVIDIA_VISIBLE_DEVICES into CDI
//     devices (nvidia.com/gpu=...), as nvidia-container-runtime does in CDI mode.
//   - The simulated GPUs are the only hardware a node adds: every container
//     gets the node's simulator state (GPUOP_SIM_* and /run/gpuop-sim), and
//     privileged containers the node's /dev/nvidia* device nodes, as they
//     would see the host's /dev. docs/simulated-cluster.md.
//
// Thread-safety: Start and Stop from one thread; the kubelet runs its own
// threads (a pod worker per pod, a node status loop).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "kube/client.h"

namespace gpuop::simcluster {

struct KubeletOptions {
  std::string node_name;
  std::string node_ip;
  std::string netns;          // the node's network namespace
  std::string host_root;      // the node's root directory
  std::string state_dir;      // the kubelet's own files (podman config)
  std::string sim_machine;    // GPUOP_SIM_MACHINE of the node
  std::string sim_state_dir;  // GPUOP_SIM_STATE of the node; "" : a node without GPUs
  std::string sim_seed;       // GPUOP_SIM_SEED of the node (distinct UUIDs per node)
  std::string cluster_key;    // containers are labelled gpuop.sim/cluster=<key>
  // In-cluster API access for pods: KUBERNETES_SERVICE_HOST/PORT and the CA;
  // each pod's token comes from the TokenRequest API for its ServiceAccount.
  std::string api_host;
  int api_port = 0;
  std::string ca_file;
  // Node description.
  std::string cpu = "16", memory = "64Gi", pods = "110", ephemeral_storage = "100Gi";
  std::string os_image = "Ubuntu 22.04.4 LTS", kernel_version = "5.15.0-105-generic";
  nlohmann::json extra_labels = nlohmann::json::object();
  // KubeletConfiguration crashLoopBackOff.maxContainerRestartPeriod.
  std::chrono::seconds max_restart_period{300};
};

class Kubelet {
 public:
  // Registers the node and starts serving. `client` must outlive the kubelet.
  static Result<std::unique_ptr<Kubelet>> Start(KubeletOptions options, kube::Client* client);
  ~Kubelet();  // Stop()
  Kubelet(const Kubelet&) = delete;
  Kubelet& operator=(const Kubelet&) = delete;

  // Stops every pod's containers (SIGKILL), removes them, stops serving.
  void Stop();

  // A restart of the kubelet, as the node's plugins see it: its sockets are
  // gone for `down`, then the device-plugin directory is emptied and served
  // anew, the pod-resources API comes back and DRA plugins register again.
  // Pods keep running and keep their devices. FailedPrecondition once
  // stopping.
  Status Restart(std::chrono::milliseconds down);

  // The text of a container's log (CRI prefixes stripped); `previous`: the
  // run before the current one. NotFound naming the pod and container.
  Result<std::string> Logs(const std::string& ns, const std::string& pod,
                           const std::string& container, bool previous) const;

  class Impl;

 private:
  explicit Kubelet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The text of a CRI-format log file: each "<time> <stream> <F|P> <text>"
// line's text, partial (P) lines joined to the next.
std::string CriLogText(const std::string& file_content);

// Whether the node's containerd configuration (any *.toml under
// <host_root>/etc/containerd) defines a runtime named `handler`.
bool RuntimeHandlerConfigured(const std::string& host_root, const std::string& handler);

}  // namespace gpuop::simcluster
