// The plain values of the kubelet's DRA protocol (k8s.io/kubelet
// pkg/apis/dra/v1), shared by the plugin's gRPC server (dra_server.h), the
// driver that implements it (src/dra) and the simulated kubelet that calls it.
// No gRPC types here, so the driver's core stays testable without a socket.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpuop::kubelet {

// What the kubelet sends per claim: only its identity; the plugin reads the
// claim itself from the API server.
struct DraClaim {
  std::string ns, uid, name;
  bool operator==(const DraClaim&) const = default;
};

struct DraPreparedDevice {
  std::vector<std::string> request_names;  // empty: the device serves every request
  std::string pool_name, device_name;
  std::vector<std::string> cdi_device_ids;
  std::string share_id;  // v1 only; empty: not shared
  bool operator==(const DraPreparedDevice&) const = default;
};

// One claim's answer: devices, or a non-empty error (devices then ignored).
struct DraPrepareResult {
  std::vector<DraPreparedDevice> devices;
  std::string error;
  bool operator==(const DraPrepareResult&) const = default;
};

// The driver behind a DRA plugin socket. Every claim asked for gets an entry
// keyed by its UID; both calls are idempotent (the kubelet repeats them after
// its own and the plugin's restarts) and unpreparing an unknown claim is
// success. Implementations are called from gRPC threads concurrently.
class DraDriver {
 public:
  virtual ~DraDriver() = default;
  virtual std::map<std::string, DraPrepareResult> Prepare(const std::vector<DraClaim>& claims) = 0;
  // UID → error ("" when unprepared).
  virtual std::map<std::string, std::string> Unprepare(const std::vector<DraClaim>& claims) = 0;
};

}  // namespace gpuop::kubelet
