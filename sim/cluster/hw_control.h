// HardwareControl: a simulated node's hardware buttons, for the node's own
// tools. It serves a unix socket in the node's root, /run/gpuop-sim-hw.sock,
// where the node's nvidia-smi stand-in (sim/host/nvidia_smi_sim.c) asks for
// what only the hardware can do. One request line, one answer line:
//
//   reset ID    ID: a GPU index or PCI bus id  ->  "ok <bus id>" | "error <why>"
//
// A reset is sim::ResetGpu: a pending MIG mode takes effect, a lost GPU comes
// back, every context on the GPU ends (as `nvidia-smi -r` on a real node).
//
// Thread-safety: Start and the destructor from one thread; requests are
// served one at a time on the control's own thread.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "sim/nvml/state.h"

namespace gpuop::simcluster {

inline constexpr char kHardwareSocket[] = "/run/gpuop-sim-hw.sock";  // in the node's root

// The answer to one request line (without its newline) against `store`.
std::string HandleHardwareRequest(const std::string& line, sim::StateStore& store);

class HardwareControl {
 public:
  // Serves <node_root>/run/gpuop-sim-hw.sock for the GPUs of `machine` (a
  // preset or file, with the node's GPUOP_SIM_SEED) whose state is in `state_dir`.
  static Result<std::unique_ptr<HardwareControl>> Start(const std::string& node_root,
                                                        const std::string& machine,
                                                        const std::string& seed,
                                                        const std::string& state_dir);
  ~HardwareControl();  // stops serving and removes the socket
  HardwareControl(const HardwareControl&) = delete;
  HardwareControl& operator=(const HardwareControl&) = delete;

 private:
  HardwareControl(int fd, std::string path, std::unique_ptr<sim::StateStore> store);
  void Serve(std::stop_token stop);

  const int fd_;
  const std::string path_;
  std::unique_ptr<sim::StateStore> store_;
  std::jthread thread_;
};

}  // namespace gpuop::simcluster
