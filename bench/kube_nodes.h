// Node objects as a GPU cluster has them, for the informer benches
// (kube_bench.cc, informer_sync.cc): kubelet's metadata and status plus the
// labels gpu-feature-discovery and the operator put on a GPU node. About
// 2.6 KB of JSON each; the same shape the API emulator's store bench uses, so
// figures compare. Pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace gpuop::bench {

inline std::string GpuNodeName(int i) { return "gpu-node-" + std::to_string(i); }

// Node number `i`; `revision` changes a heartbeat-like field so successive
// revisions differ (0: the node as created).
inline nlohmann::json GpuNode(int i, int64_t revision = 0) {
  using nlohmann::json;
  const std::string name = GpuNodeName(i);
  json labels = json::object();
  labels["kubernetes.io/hostname"] = name;
  labels["kubernetes.io/os"] = "linux";
  labels["kubernetes.io/arch"] = "amd64";
  labels["node.kubernetes.io/instance-type"] = "p5.48xlarge";
  labels["topology.kubernetes.io/zone"] = "zone-" + std::to_string(i % 3);
  labels["pool"] = i % 2 == 0 ? "a" : "b";
  const char* gfd[][2] = {{"gpu.present", "true"},
                          {"gpu.count", "8"},
                          {"gpu.product", "NVIDIA-H100-80GB-HBM3"},
                          {"gpu.memory", "81559"},
                          {"gpu.family", "hopper"},
                          {"gpu.compute.major", "9"},
                          {"gpu.compute.minor", "0"},
                          {"cuda.driver.major", "550"},
                          {"cuda.driver.minor", "90"},
                          {"cuda.driver.rev", "07"},
                          {"cuda.runtime.major", "12"},
                          {"cuda.runtime.minor", "4"},
                          {"mig.capable", "true"},
                          {"mig.strategy", "single"},
                          {"gpu.deploy.driver", "true"},
                          {"gpu.deploy.container-toolkit", "true"},
                          {"gpu.deploy.device-plugin", "true"},
                          {"gpu.deploy.gpu-feature-discovery", "true"},
                          {"gpu.deploy.dcgm-exporter", "true"},
                          {"gpu.deploy.operator-validator", "true"}};
  for (const auto& [key, value] : gfd) labels[std::string("nvidia.com/") + key] = value;

  json conditions = json::array();
  for (const std::string type : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
    const bool ready = type == "Ready";
    conditions.push_back({{"type", type},
                          {"status", ready ? "True" : "False"},
                          {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                          {"lastTransitionTime", "2026-01-01T00:00:00Z"},
                          {"reason", ready ? "KubeletReady" : "KubeletHasSufficient" + type},
                          {"message", ready ? "kubelet is posting ready status"
                                            : "kubelet has sufficient resources"}});
  }
  const json resources = {{"cpu", "192"},
                          {"memory", "2113428Mi"},
                          {"pods", "110"},
                          {"ephemeral-storage", "3750Gi"},
                          {"nvidia.com/gpu", "8"}};
  const std::string subnet = std::to_string(i / 256 % 256) + "." + std::to_string(i % 256);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels", labels},
            {"annotations",
             {{"node.alpha.kubernetes.io/ttl", "0"},
              {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}}}}},
          {"spec", {{"podCIDR", "10.244." + std::to_string(i % 256) + ".0/24"}}},
          {"status",
           {{"capacity", resources},
            {"allocatable", resources},
            {"conditions", conditions},
            {"addresses",
             {{{"type", "InternalIP"}, {"address", "10.1." + subnet}},
              {{"type", "Hostname"}, {"address", name}}}},
            {"nodeInfo",
             {{"bootID", "boot-" + std::to_string(revision)},
              {"kernelVersion", "6.1.0-18-amd64"},
              {"osImage", "Debian GNU/Linux 12 (bookworm)"},
              {"containerRuntimeVersion", "containerd://1.6.20"},
              {"kubeletVersion", "v1.35.0"},
              {"architecture", "amd64"},
              {"operatingSystem", "linux"}}}}}};
}

}  // namespace gpuop::bench
