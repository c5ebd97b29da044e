// At the end of the ops test program, the CUDA backend's process-lifetime caches that hold device
// or page-locked memory are released (and the allocators' pending frees completed), so compute-sanitizer's leak check (scripts/gpu-check.sh)
// reports only real leaks.
#include <gtest/gtest.h>

#if defined(TESSEL_HAVE_CUDA)
#include "backend/cuda/stream_cache.hpp"
#endif
#include "tessel/core/device.hpp"
#include "tessel/memory/caching_allocator.hpp"

namespace tessel::testing {
namespace {

class ReleaseCudaCaches : public ::testing::Environment {
 public:
  void TearDown() override {
#if defined(TESSEL_HAVE_CUDA)
    if (!cuda_available()) return;
    backend::cuda::release_stream_caches();
    // Blocks freed while their copies were in flight wait for the copy's event: complete and release them.
    pinned_allocator().empty_cache();
    for (int i = 0; i < device_count(); ++i) device_allocator(i).empty_cache();
#endif
  }
};

::testing::Environment* const release_cuda_caches = ::testing::AddGlobalTestEnvironment(new ReleaseCudaCaches);

}  // namespace
}  // namespace tessel::testing
