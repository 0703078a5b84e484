// How an NVML return code becomes a gpuop Status.
//
// Pure functions, safe from any thread. The message keeps NVML's own text and
// names the object the call was about, so a log line reads
//   GPU 3 (GPU-5d5ba0d6-...): nvmlDeviceGetPowerUsage: GPU is lost
// and the code tells the caller what to do: kUnavailable is worth retrying,
// kNotSupported means "skip this on this GPU", kFailedPrecondition means the
// GPU is in a state where this cannot work now.
#pragma once

#include <string_view>

#include "base/status.h"

namespace gpuop::nvml {

// The StatusCode for an nvmlReturn_t value (an int so that callers need not
// see the C ABI). NVML_SUCCESS maps to kOk.
StatusCode StatusCodeForNvmlReturn(int ret);

// The status for a failed call: "<object>: <symbol>: <nvml_text>", or
// "<symbol>: <nvml_text>" when object is empty.
Status NvmlStatus(int ret, std::string_view nvml_text, std::string_view object,
                  std::string_view symbol);

}  // namespace gpuop::nvml
