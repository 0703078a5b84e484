// Shared by the DRA prepare tests (claims, config, claim_cdi, checkpoint,
// driver): ResourceClaim objects as the scheduler leaves them, opaque
// GpuConfig parameters, and the toolkit's CDI inputs for the simulator's GPUs
// (the device nodes and capability minors the simulated host has), built
// without a host root so no test needs mknod.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dra/names.h"
#include "nvml/device.h"
#include "sim/host/host_root.h"
#include "toolkit/cdi_build.h"

namespace gpuop::dra::testing {

using Json = nlohmann::json;

inline constexpr char kNode[] = "node-a";

// One allocation result of ours on kNode.
inline Json Result(const std::string& request, const std::string& device,
                   const std::string& driver = kDriverName, const std::string& pool = kNode) {
  return {{"request", request}, {"driver", driver}, {"pool", pool}, {"device", device}};
}

// A FromClaim/FromClass entry of status.allocation.devices.config.
inline Json ConfigEntryJson(const std::string& source, const std::vector<std::string>& requests,
                            const Json& parameters, const std::string& driver = kDriverName) {
  Json e = {{"source", source}, {"opaque", {{"driver", driver}, {"parameters", parameters}}}};
  if (!requests.empty()) e["requests"] = requests;
  return e;
}

inline Json GpuTimeSlicing(const std::string& interval) {
  return {
      {"apiVersion", "resource.nvidia.com/v1beta1"},
      {"kind", "GpuConfig"},
      {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", interval}}}}}};
}

// A resource.k8s.io/v1 ResourceClaim with one request "gpu" (or the given
// ones) of class gpu.nvidia.com.
inline Json ClaimObject(const std::string& ns, const std::string& name,
                        const std::vector<std::string>& requests = {"gpu"}) {
  Json reqs = Json::array();
  for (const std::string& r : requests) {
    reqs.push_back({{"name", r}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"devices", {{"requests", reqs}}}}}};
}

// `claim` allocated with `results` and `config` on kNode.
// (Vectors, not Json: a one-element braced list would not make a Json array.)
inline Json Allocated(Json claim, const std::vector<Json>& results,
                      const std::vector<Json>& config = {}) {
  Json devices = {{"results", results}};
  if (!config.empty()) devices["config"] = config;
  claim["status"]["allocation"] = {
      {"devices", devices},
      {"nodeSelector",
       {{"nodeSelectorTerms",
         {{{"matchFields",
            {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {kNode}}}}}}}}}}};
  return claim;
}

inline host::DeviceNodeInfo Node(uint32_t major, uint32_t minor, uint32_t mode = 0666) {
  host::DeviceNodeInfo n;
  n.major = major;
  n.minor = minor;
  n.mode = mode;
  return n;
}

// What DiscoverCdiInputs finds on a simulated host for `gpus`.
inline toolkit::CdiInputs SimCdiInputs(const std::vector<nvml::Gpu>& gpus) {
  toolkit::CdiInputs in;
  in.driver_version = "570.172.08";
  in.device_nodes["/dev/nvidiactl"] = Node(sim::kNvidiaMajor, sim::kNvidiaCtlMinor);
  in.device_nodes["/dev/nvidia-uvm"] = Node(sim::kNvidiaUvmMajor, 0);
  for (const nvml::Gpu& g : gpus) {
    toolkit::CdiGpuInput gi;
    gi.index = g.index;
    gi.minor = g.minor;
    gi.uuid = g.uuid;
    gi.mig_enabled = g.mig_enabled;
    in.device_nodes["/dev/nvidia" + std::to_string(g.minor)] =
        Node(sim::kNvidiaMajor, static_cast<uint32_t>(g.minor));
    for (const nvml::MigDevice& m : g.mig_devices) {
      gi.migs.push_back({m.index, m.gi_id, m.ci_id, m.uuid, m.profile});
      const unsigned minor = static_cast<unsigned>(g.minor);
      const unsigned gi_cap = sim::MigGiCapMinor(minor, m.gi_id);
      const unsigned ci_cap = sim::MigCiCapMinor(minor, m.gi_id, m.ci_id);
      in.cap_minors.Add(minor, m.gi_id, -1, gi_cap);
      in.cap_minors.Add(minor, m.gi_id, static_cast<int>(m.ci_id), ci_cap);
      for (unsigned cap : {gi_cap, ci_cap}) {
        in.device_nodes["/dev/nvidia-caps/nvidia-cap" + std::to_string(cap)] =
            Node(sim::kNvidiaCapsMajor, cap, 0444);
      }
    }
    in.gpus.push_back(std::move(gi));
  }
  in.libraries = {"/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08",
                  "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.172.08"};
  in.libcuda_dir = "/usr/lib/x86_64-linux-gnu";
  return in;
}

inline toolkit::CdiBuildOptions CdiOptions() {
  toolkit::CdiBuildOptions o;
  o.hook_path = "/usr/local/nvidia/toolkit/gpuop";
  return o;
}

}  // namespace gpuop::dra::testing
