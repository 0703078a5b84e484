#include "sim/host/sim_kernel.h"

#include "base/strings.h"

namespace gpuop::sim {
namespace {

class SimModules final : public host::KernelModules {
 public:
  explicit SimModules(std::shared_ptr<StateStore> store) : store_(std::move(store)) {}

  Result<std::vector<host::KernelModule>> List() override {
    GPUOP_ASSIGN_OR_RETURN(auto state, store_->Read());
    GPUOP_ASSIGN_OR_RETURN(std::vector<std::string> holders, Holders());
    std::vector<host::KernelModule> out;
    if (state->modeset_loaded) out.push_back({"nvidia_modeset", 0, {}});
    if (state->uvm_loaded) out.push_back({"nvidia_uvm", static_cast<int64_t>(holders.size()), {}});
    if (state->driver_loaded) {
      host::KernelModule nvidia{"nvidia", 0, {}};
      for (const auto& [loaded, name] : {std::pair{state->uvm_loaded, "nvidia_uvm"},
                                         std::pair{state->modeset_loaded, "nvidia_modeset"}}) {
        if (!loaded) continue;
        ++nvidia.refcount;
        nvidia.used_by.push_back(name);
      }
      out.push_back(std::move(nvidia));
    }
    return out;
  }

  Status Unload(const std::string& name) override {
    GPUOP_ASSIGN_OR_RETURN(std::vector<std::string> holders, Holders());
    return store_->Update([&](SimState& s) -> Status {
      auto not_loaded = [&] { return NotFound("kernel module " + name + " is not loaded"); };
      if (name == "nvidia_modeset") {
        if (!s.modeset_loaded) return not_loaded();
        s.modeset_loaded = false;
        return Status::Ok();
      }
      if (name == "nvidia_uvm") {
        if (!s.uvm_loaded) return not_loaded();
        if (!holders.empty()) {
          return FailedPrecondition("kernel module nvidia_uvm is in use by " +
                                    std::to_string(holders.size()) +
                                    " process(es): " + Join(holders, ", ") +
                                    ": stop the GPU workloads on this node first");
        }
        s.uvm_loaded = false;
        return Status::Ok();
      }
      if (name == "nvidia") {
        if (!s.driver_loaded) return not_loaded();
        std::vector<std::string> users;
        if (s.uvm_loaded) users.push_back("nvidia_uvm");
        if (s.modeset_loaded) users.push_back("nvidia_modeset");
        if (!users.empty()) {
          return FailedPrecondition("kernel module nvidia is in use by " + Join(users, ", ") +
                                    ": unload those first");
        }
        return ApplyDriverLoaded(store_->machine(), s, false);
      }
      return not_loaded();
    });
  }

  Result<std::optional<std::string>> NvidiaVersion() override {
    GPUOP_ASSIGN_OR_RETURN(auto state, store_->Read());
    if (!state->driver_loaded) return std::optional<std::string>();
    return std::optional<std::string>(LoadedDriverVersion(store_->machine(), *state));
  }

 private:
  Result<std::vector<std::string>> Holders() {
    if (!store_->shared()) return std::vector<std::string>();
    return LiveDriverHolders(store_->dir());
  }

  std::shared_ptr<StateStore> store_;
};

}  // namespace

std::unique_ptr<host::KernelModules> SimKernelModules(std::shared_ptr<StateStore> store) {
  return std::make_unique<SimModules>(std::move(store));
}

Result<std::unique_ptr<host::KernelModules>> SimKernelModulesFromEnv() {
  GPUOP_ASSIGN_OR_RETURN(std::unique_ptr<StateStore> store, OpenStateFromEnv(true));
  return SimKernelModules(std::shared_ptr<StateStore>(std::move(store)));
}

}  // namespace gpuop::sim
