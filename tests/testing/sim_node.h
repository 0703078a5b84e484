// A simulated GPU node for tests: SimEnv (temporary directory, GPUOP_SIM_*)
// plus the simulator's shared state store, through which tests do to the
// GPUs what happens on a real node (XIDs, resets, MIG layouts, lost GPUs).
// Header-only; the test binary links gpuop_simstate. Not thread-safe.
//
//   gpuop::testing::SimNode node("dgx-h100", "my-test");  // or SimNode + Boot
//   ASSERT_TRUE(node.booted());
//   sim::InjectXid(node.store(), 0, 48, std::nullopt, std::nullopt);
//   auto nvml = node.OpenNvml();
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sim/nvml/state.h"
#include "tests/testing/sim_env.h"

namespace gpuop::testing {

class SimNode : public SimEnv {
 public:
  // The directory only; Boot picks the machine.
  SimNode() = default;
  // Boots `machine` at once; a failure is recorded in the test (see booted()).
  SimNode(const std::string& machine, const std::string& seed) { Boot(machine, seed); }
  ~SimNode() { store_.reset(); }  // before SimEnv unsets the variables

  // Points the simulator at `machine` (SimEnv::Point) and opens its shared
  // state, creating it when absent. False, with the error recorded in the
  // test, when it cannot.
  bool Boot(const std::string& machine, const std::string& seed,
            const std::string& state = "state") {
    store_.reset();
    Point(machine, seed, state);
    auto store = sim::OpenStateFromEnv(true);
    EXPECT_TRUE(store.ok()) << machine << ": " << store.status().ToString();
    if (!store.ok()) return false;
    store_ = std::move(store).value();
    return true;
  }

  bool booted() const { return store_ != nullptr; }
  // REQUIRES: booted().
  sim::StateStore& store() { return *store_; }

 private:
  std::unique_ptr<sim::StateStore> store_;
};

}  // namespace gpuop::testing
