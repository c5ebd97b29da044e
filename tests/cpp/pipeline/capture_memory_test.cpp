// The capture-aware mode of the caching allocator, without a GPU (a fake runtime): while a
// capture is active on the thread, cached blocks (the reservation) serve requests, the raw
// allocator is never called, and an exhausted reservation raises OutOfMemory naming the capture.
// Host synchronization points name themselves while a capture is active.
#include <gtest/gtest.h>

#include <thread>

#include "../memory/fake_runtime.hpp"
#include "testing.hpp"
#include "tessel/memory/capture.hpp"
#include "tessel/tessel.hpp"

namespace {

using namespace tessel;
using tessel::testing::expect_error;

// Installs a capture state on this thread for a scope.
struct ActiveCapture {
  detail::CaptureState state;
  detail::CaptureState* previous;
  explicit ActiveCapture(std::uint64_t stream_id) {
    state.stream_id = stream_id;
    previous = detail::set_active_capture(&state);
  }
  ~ActiveCapture() { detail::set_active_capture(previous); }
};

TEST(CaptureMemory, ReservationServesCaptureWithoutRawAllocations) {
  for (bool small : {true, false}) {
    SCOPED_TRACE(small ? "small pool" : "large pool");
    auto f = tessel::testing::make_fake(std::size_t(1) << 30);
    const StreamRef s{1u << 21, nullptr};
    const std::int64_t reserve = small ? (512 << 10) : (32 << 20);
    f.alloc->free(f.alloc->allocate(reserve, s));  // the reservation, cached for stream s
    const int mallocs = f.state->malloc_calls;
    {
      ActiveCapture capture(s.id);
      void* a = f.alloc->allocate(small ? 1000 : (4 << 20), s);
      void* b = f.alloc->allocate(small ? 2000 : (8 << 20), s);
      EXPECT_EQ(f.state->malloc_calls, mallocs) << "no raw allocation during capture";
      expect_error<OutOfMemory>([&] { f.alloc->allocate(std::int64_t(256) << 20, s); },
                                {"during CUDA graph capture", "256.00 MiB", "reserve_bytes"});
      EXPECT_EQ(f.state->malloc_calls, mallocs);
      f.alloc->free(a);
      f.alloc->free(b);
    }
    // After the capture the raw allocator is used again.
    void* big = f.alloc->allocate(std::int64_t(256) << 20, s);
    EXPECT_GT(f.state->malloc_calls, mallocs);
    f.alloc->free(big);
    EXPECT_EQ(f.alloc->stats().allocated_bytes, 0);
  }
}

TEST(CaptureMemory, UncachedModeRefusesDuringCapture) {
  CachingAllocatorOptions options;
  options.caching = false;
  auto f = tessel::testing::make_fake(std::size_t(1) << 30, options);
  ActiveCapture capture(7);
  expect_error<OutOfMemory>([&] { f.alloc->allocate(1024, StreamRef{7, nullptr}); }, {"caching disabled", "graph capture"});
  EXPECT_EQ(f.state->malloc_calls, 0);
}

TEST(CaptureMemory, SynchronizationPointsNameThemselves) {
  EXPECT_NO_THROW(detail::check_not_capturing("anything"));
  {
    ActiveCapture capture(99);
    EXPECT_EQ(detail::thread_capture_stream(), 99u);
    expect_error<Error>([] { detail::check_not_capturing("to_host"); }, {"to_host", "cannot be captured", "#99"});
    // CPU work is never captured: host reads of CPU arrays still work.
    Array a = from_vector(std::vector<float>{1, 2, 3}, {3}, Device::cpu());
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3}));
    // A capture does not leak to other threads.
    std::thread([] { EXPECT_EQ(detail::thread_capture_stream(), 0u); }).join();
  }
  EXPECT_EQ(detail::thread_capture_stream(), 0u);
}

TEST(CaptureMemory, GraphKeyNamesLayoutAndPointer) {
  Array a = zeros({2, 3}, DType::float32, Device::cpu());
  Array b = zeros({2, 3}, DType::float64, Device::cpu());
  const std::string ka = graph_key({a});
  EXPECT_NE(ka.find("float32"), std::string::npos) << ka;
  EXPECT_NE(ka, graph_key({b}));
  EXPECT_NE(ka, graph_key({a.T()}));
  EXPECT_EQ(ka, graph_key({a}));
}

}  // namespace
