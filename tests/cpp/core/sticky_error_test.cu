// A kernel that faults must surface as a CudaError marked fatal to the context, with the op name
// and file:line. It runs in a death-test child so the corrupted context dies with it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/cuda_check.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"

namespace {

__global__ void write_through_bad_pointer(int* p) { p[threadIdx.x] = 1; }

void launch_fault_and_report() {
  try {
    write_through_bad_pointer<<<1, 32>>>(reinterpret_cast<int*>(0x10));
    TESSEL_CUDA_CHECK_LAUNCH(nullptr, "sticky_test_op");
    TESSEL_CUDA_CHECK(cudaDeviceSynchronize(), "sticky_test_op");
  } catch (const tessel::CudaError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(e.fatal() ? 3 : 4);
  }
  std::exit(5);
}

void fault_with_sync_after_ops() {
  tessel::set_sync_after_ops(true);
  try {
    write_through_bad_pointer<<<1, 32>>>(reinterpret_cast<int*>(0x10));
    TESSEL_CUDA_CHECK_LAUNCH(nullptr, "sync_test_op");
  } catch (const tessel::CudaError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(std::string(e.what()).find("TESSEL_SYNC") != std::string::npos ? 3 : 4);
  }
  std::exit(5);
}

}  // namespace

TEST(StickyError, IllegalAddressIsFatal) {
  if (!tessel::cuda_available()) GTEST_SKIP() << "no CUDA device: " << tessel::cuda_unavailable_reason();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(launch_fault_and_report(), ::testing::ExitedWithCode(3),
              "sticky_test_op: cudaErrorIllegalAddress.*sticky_error_test.cu.*fatal to the CUDA context");
}

TEST(StickyError, SyncAfterOpsReportsFaultAtTheLaunch) {
  if (!tessel::cuda_available()) GTEST_SKIP() << "no CUDA device: " << tessel::cuda_unavailable_reason();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // With TESSEL_SYNC on, the launch check itself synchronizes and reports the fault.
  EXPECT_EXIT(fault_with_sync_after_ops(), ::testing::ExitedWithCode(3), "sync_test_op");
}
