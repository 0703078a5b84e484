#include "nvml/errors.h"

#include <gtest/gtest.h>

#include "nvml/library.h"
#include "nvml/nvml_abi.h"

namespace gpuop::nvml {
namespace {

TEST(NvmlErrorsTest, MapsReturnCodes) {
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_SUCCESS), StatusCode::kOk);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_NOT_SUPPORTED), StatusCode::kNotSupported);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_NOT_FOUND), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_GPU_NOT_FOUND), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_GPU_IS_LOST), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_INVALID_ARGUMENT), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_NO_PERMISSION), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_INSUFFICIENT_RESOURCES),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_IN_USE), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_INVALID_STATE), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_RESET_REQUIRED), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_TIMEOUT), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_DRIVER_NOT_LOADED), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForNvmlReturn(NVML_ERROR_UNKNOWN), StatusCode::kInternal);
  // A code newer than this build still maps to something, never to OK.
  EXPECT_EQ(StatusCodeForNvmlReturn(4242), StatusCode::kInternal);
}

TEST(NvmlErrorsTest, EveryDefinedCodeMapsToAFailure) {
  for (int ret = 1; ret <= NVML_ERROR_RESET_TYPE_NOT_SUPPORTED; ++ret) {
    EXPECT_NE(StatusCodeForNvmlReturn(ret), StatusCode::kOk) << ret;
  }
}

TEST(NvmlErrorsTest, MessageNamesObjectCallAndNvmlText) {
  Status s =
      NvmlStatus(NVML_ERROR_GPU_IS_LOST, "GPU is lost",
                 "GPU 3 (GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)", "nvmlDeviceGetPowerUsage");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(
      s.message(),
      "GPU 3 (GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77): nvmlDeviceGetPowerUsage: GPU is lost");

  Status bare = NvmlStatus(NVML_ERROR_UNINITIALIZED, "", "", "nvmlDeviceGetCount_v2");
  EXPECT_EQ(bare.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bare.message(), "nvmlDeviceGetCount_v2: NVML error 1");

  // Misuse (a "failure" with SUCCESS) must still not produce an OK status.
  EXPECT_FALSE(NvmlStatus(NVML_SUCCESS, "Success", "x", "y").ok());
}

TEST(LibraryTest, MissingFileFailsWithOneClearLine) {
  auto lib = Library::Load("/nonexistent/dir/libnvidia-ml.so.1");
  ASSERT_FALSE(lib.ok());
  const std::string& m = lib.status().message();
  EXPECT_EQ(lib.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(m.rfind("cannot load NVML from /nonexistent/dir/libnvidia-ml.so.1: ", 0), 0u) << m;
  EXPECT_NE(m.find("No such file"), std::string::npos) << m;
  EXPECT_NE(m.find("is the NVIDIA driver installed? (set --nvml-lib or GPUOP_NVML_LIB"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST(LibraryTest, ALibraryThatIsNotNvmlFailsOnTheFirstRequiredSymbol) {
  // libc is loadable but exports no NVML function.
  auto lib = Library::Load("libc.so.6");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(lib.status().message(),
            "NVML library libc.so.6 has no nvmlInit_v2 (needed for initialising NVML): it is not a "
            "usable NVML; install a current NVIDIA driver");
}

}  // namespace
}  // namespace gpuop::nvml
