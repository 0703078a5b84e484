// The validator's workload pods, NVIDIA's way: a pod bound to this node
// (nodeName, no scheduler), owner and tolerations copied from the
// nvidia-operator-validator DaemonSet, service account
// nvidia-operator-validator, restartPolicy OnFailure, runtime class from
// VALIDATOR_RUNTIME_CLASS. gpuop's pods run gpuop's own image: the CUDA pod
// runs `gpuop cuda vector-add` on one allocated nvidia.com/gpu (a real device
// allocation, where NVIDIA's asks for none), the plugin pod the same on one
// device of the resource the plugin advertises.
//
// BuildWorkloadPod and PodOutcome are pure; RunWorkloadPod is the adapter
// (delete a leftover, create, watch until done).
//
// Thread-safety: pure functions and a stateless adapter.
#pragma once

#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <vector>

#include "base/status.h"
#include "kube/client.h"
#include "validator/options.h"

namespace gpuop::validator {

struct WorkloadPodSpec {
  std::string name_prefix;  // kCudaPodPrefix or kPluginPodPrefix
  std::string app;          // kCudaPodApp or kPluginPodApp
  std::string check;        // "cuda" or "plugin": the container is <check>-validation
  std::string node_name;
  std::string namespace_;
  std::string image;
  std::string image_pull_policy;  // "" → IfNotPresent
  std::vector<std::string> image_pull_secrets;
  std::string runtime_class;  // "" → none
  std::string resource = kGpuResource;  // "": none requested, NVIDIA_VISIBLE_DEVICES=all
  std::string require_cuda;  // "12.4" → --require-cuda 12.4
  nlohmann::json owner_references = nlohmann::json::array();
  nlohmann::json tolerations = nlohmann::json::array();
};

nlohmann::json BuildWorkloadPod(const WorkloadPodSpec& spec);

struct PodOutcome {
  bool done = false;  // Succeeded, or failed for good
  bool succeeded = false;
  std::string message;  // why it failed, or what it waits for
};
// What a workload pod's status says: Succeeded → done; Failed → done with
// the container's termination message or reason; a container that exited
// non-zero (restartPolicy OnFailure restarts it, so the pod never turns
// Failed) → done, failed, with its message; otherwise not done.
PodOutcome EvaluateWorkloadPod(const nlohmann::json& pod);

// The image the workload pods run: VALIDATOR_IMAGE, else this pod's own
// (read from the API: pod POD_NAME in OPERATOR_NAMESPACE).
Result<std::string> WorkloadImage(kube::Client& client, const Options& o);

// Deletes leftovers (same app label on this node, grace 0), creates the pod,
// and watches it until EvaluateWorkloadPod says done, `retries` ×
// sleep_interval_seconds pass (DeadlineExceeded), or `stop`. The error names
// the pod and the reason.
Status RunWorkloadPod(kube::Client& client, const Options& o, WorkloadPodSpec spec, int retries,
                      std::stop_token stop);

// The CUDA and plugin workload pods with the DaemonSet's owner/tolerations
// and the image filled in.
Status RunCudaWorkload(kube::Client& client, const Options& o, std::stop_token stop);
Status RunPluginWorkload(kube::Client& client, const Options& o, const std::string& resource,
                         std::stop_token stop);

}  // namespace gpuop::validator
