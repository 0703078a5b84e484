// Hand-built Machines for the host-root tests, so the layout is checked
// against known inputs independent of the preset tables in machine.cc.
#pragma once

#include <string>
#include <vector>

#include "sim/nvml/machine.h"

namespace gpuop::sim::testing {

inline GpuModel H100Model() {
  GpuModel m;
  m.key = "h100-80gb";
  m.name = "NVIDIA H100 80GB HBM3";
  m.pci_device_id = 0x233010DE;
  m.pci_subsystem_id = 0x16C110DE;
  m.memory_slices = 8;
  GiProfile p;
  p.id = 19;
  p.name = "1g.10gb";
  p.slices = 1;
  p.max_count = 7;
  m.mig_profiles.push_back(p);
  return m;
}

inline GpuModel A100Model() {
  GpuModel m = H100Model();
  m.key = "a100-40gb";
  m.name = "NVIDIA A100-SXM4-40GB";
  m.pci_device_id = 0x20B010DE;
  m.pci_subsystem_id = 0x134F10DE;
  m.mig_profiles[0].name = "1g.5gb";
  return m;
}

inline GpuModel L40sModel() {
  GpuModel m;
  m.key = "l40s";
  m.name = "NVIDIA L40S";
  m.pci_device_id = 0x26B910DE;
  m.pci_subsystem_id = 0x185110DE;
  return m;  // no MIG
}

inline Machine MakeMachine(const std::string& name, const GpuModel& model,
                           const std::vector<std::string>& bus_ids) {
  Machine machine;
  machine.name = name;
  machine.driver_version = "570.172.08";
  for (size_t i = 0; i < bus_ids.size(); ++i) {
    SimGpu g;
    g.model = model;
    g.index = static_cast<unsigned>(i);
    g.minor = static_cast<unsigned>(i);
    g.uuid = "GPU-0000000" + std::to_string(i) + "-1111-2222-3333-444444444444";
    g.bus_id = bus_ids[i];
    g.numa_node = i < bus_ids.size() / 2 ? 0 : 1;
    machine.gpus.push_back(g);
  }
  return machine;
}

inline Machine DgxH100() {
  return MakeMachine(
      "dgx-h100", H100Model(),
      {"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
       "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"});
}

inline Machine OneA100() { return MakeMachine("a100-40gb", A100Model(), {"00000000:07:00.0"}); }

inline Machine FourL40s() {
  return MakeMachine(
      "l40s-4", L40sModel(),
      {"00000000:01:00.0", "00000000:41:00.0", "00000000:81:00.0", "00000000:C1:00.0"});
}

}  // namespace gpuop::sim::testing
