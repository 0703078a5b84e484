#include "nvml/errors.h"

#include <string>

#include "nvml/nvml_abi.h"

namespace gpuop::nvml {

StatusCode StatusCodeForNvmlReturn(int ret) {
  switch (static_cast<nvmlReturn_t>(ret)) {
    case NVML_SUCCESS:
      return StatusCode::kOk;
    case NVML_ERROR_INVALID_ARGUMENT:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return StatusCode::kInvalidArgument;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
    case NVML_ERROR_DEPRECATED:
      return StatusCode::kNotSupported;
    case NVML_ERROR_NO_PERMISSION:
      return StatusCode::kPermissionDenied;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND:
      return StatusCode::kNotFound;
    case NVML_ERROR_ALREADY_INITIALIZED:
      return StatusCode::kAlreadyExists;
    // Transient or hardware-gone: a later retry (or a reset) may work.
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_NOT_READY:
    case NVML_ERROR_NO_DATA:
    case NVML_ERROR_IRQ_ISSUE:
    case NVML_ERROR_INSUFFICIENT_POWER:
      return StatusCode::kUnavailable;
    case NVML_ERROR_TIMEOUT:
      return StatusCode::kDeadlineExceeded;
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_INVALID_STATE:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_CORRUPTED_INFOROM:
      return StatusCode::kFailedPrecondition;
    case NVML_ERROR_INSUFFICIENT_SIZE:  // our buffer was too small: a bug here
    case NVML_ERROR_OPERATING_SYSTEM:
    case NVML_ERROR_MEMORY:
    case NVML_ERROR_UNKNOWN:
      return StatusCode::kInternal;
  }
  return StatusCode::kInternal;
}

Status NvmlStatus(int ret, std::string_view nvml_text, std::string_view object,
                  std::string_view symbol) {
  std::string msg;
  if (!object.empty()) {
    msg.append(object);
    msg.append(": ");
  }
  msg.append(symbol);
  msg.append(": ");
  if (nvml_text.empty()) {
    msg.append("NVML error " + std::to_string(ret));
  } else {
    msg.append(nvml_text);
  }
  StatusCode code = StatusCodeForNvmlReturn(ret);
  if (code == StatusCode::kOk) code = StatusCode::kInternal;  // never an OK status for a failure
  return {code, std::move(msg)};
}

}  // namespace gpuop::nvml
