// At the end of the ops test program, the CUDA backend's process-lifetime caches that hold device
// or page-locked memory are released, so compute-sanitizer's leak check (scripts/gpu-check.sh)
// reports only real leaks.
#include <gtest/gtest.h>

#include "backend/indexing.hpp"
#include "backend/linalg.hpp"
#include "tessel/core/device.hpp"

namespace tessel::testing {
namespace {

class ReleaseCudaCaches : public ::testing::Environment {
 public:
  void TearDown() override {
#if defined(TESSEL_HAVE_CUDA)
    if (!cuda_available()) return;
    backend::cuda::release_linalg_handles();
    backend::cuda::release_status_words();
#endif
  }
};

::testing::Environment* const release_cuda_caches = ::testing::AddGlobalTestEnvironment(new ReleaseCudaCaches);

}  // namespace
}  // namespace tessel::testing
