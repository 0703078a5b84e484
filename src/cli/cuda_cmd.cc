// `gpuop cuda vector-add`: the CUDA check (cuda/vector_add.h) as a command,
// what the validator's CUDA workload pod runs. One line per fact, "Test
// PASSED" as cuda-samples' vectorAdd prints it; the error and exit 1 otherwise.
// With --repeat-every, a steady GPU workload: the check again and again until
// SIGTERM (exit 0), the process holding the GPU throughout as a job does.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "cli/cli.h"
#include "cuda/vector_add.h"

namespace gpuop::cli {

void RegisterCudaCommand(CLI::App& app, const GlobalOptions& g, Action* action) {
  auto* cuda = app.add_subcommand("cuda", "Checks through the CUDA driver API (libcuda.so.1)");
  cuda->require_subcommand(1);
  auto* cmd = cuda->add_subcommand(
      "vector-add", "Run a vector-add kernel on one GPU and check every element of the result");
  struct Flags {
    int device = 0;
    size_t elements = 50000;
    std::string require_cuda;
    std::string cuda_lib;
    double repeat_every_s = 0;
  };
  auto flags = std::make_shared<Flags>();
  cmd->add_option("--device", flags->device, "CUDA device ordinal to run on")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--elements", flags->elements, "Vector length")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 28));
  cmd->add_option("--require-cuda", flags->require_cuda,
                  "Fail unless the driver supports this CUDA version (e.g. 12.4)");
  cmd->add_option("--cuda-lib", flags->cuda_lib,
                  "CUDA driver library to load (default libcuda.so.1)")
      ->envname("GPUOP_CUDA_LIB");
  cmd->add_option("--repeat-every", flags->repeat_every_s,
                  "Run again every SECONDS until SIGTERM (a steady workload); 0: once")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->callback([action, flags, &g] {
    *action = [flags, &g] {
      cuda::VectorAddOptions o;
      if (!flags->cuda_lib.empty()) o.library = flags->cuda_lib;
      o.nvml_library = NvmlLibraryPath(g);
      o.device = flags->device;
      o.elements = flags->elements;
      if (!flags->require_cuda.empty()) {
        auto v = cuda::ParseCudaVersion(flags->require_cuda);
        if (!v.ok()) {
          std::fprintf(stderr, "gpuop cuda vector-add: --require-cuda: %s\n",
                       v.status().message().c_str());
          return kExitUsage;
        }
        o.required_cuda_version = *v;
      }
      std::optional<StopSignals> signals;
      if (flags->repeat_every_s > 0) signals.emplace();
      for (;;) {
        auto r = cuda::RunVectorAdd(o);
        if (!r.ok()) {
          std::fprintf(stderr, "gpuop cuda vector-add: %s\n", r.status().message().c_str());
          std::printf("Test FAILED\n");
          return kExitFailure;
        }
        std::printf(
            "CUDA driver version: %s%s\n", cuda::CudaVersionText(r->driver_cuda_version).c_str(),
            r->driver_version.empty() ? "" : (" (driver " + r->driver_version + ")").c_str());
        std::printf("CUDA devices visible: %d\n", r->device_count);
        std::printf("Device %d: %s (%s), compute capability %d.%d\n", r->device,
                    r->device_name.c_str(), r->uuid.c_str(), r->cc_major, r->cc_minor);
        std::printf("Vector addition of %zu elements: %u blocks of %u threads\n", r->elements,
                    r->blocks, r->threads_per_block);
        std::printf("Test PASSED\n");
        std::fflush(stdout);
        if (!signals) break;
        const auto every =
            std::chrono::milliseconds(static_cast<int64_t>(flags->repeat_every_s * 1000));
        if (signals->WaitFor(every) != 0) break;
      }
      return kExitOk;
    };
  });
}

}  // namespace gpuop::cli
