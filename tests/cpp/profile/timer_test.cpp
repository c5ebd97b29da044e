// profile::time_on_stream / time_on_host: warm-up runs are not timed, every repeat is, and the
// median is the middle of the sorted times.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tessel/core/error.hpp"
#include "tessel/profile/timer.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

TEST(ProfileTimer, CountsWarmupAndRepeatsAndTakesTheMedian) {
  int calls = 0;
  const profile::Timing t = profile::time_on_host(
      [&] {
        ++calls;
        // Every third timed call is slow: the median must ignore it.
        const bool slow = calls > 2 && (calls - 2) % 3 == 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(slow ? 30 : 2));
      },
      {2, 9});
  EXPECT_EQ(calls, 11);
  EXPECT_EQ(t.repeats, 9);
  EXPECT_GE(t.median_ms, 1.9);
  EXPECT_LT(t.median_ms, 20.0);
  EXPECT_GE(t.max_ms, 29.0);
  EXPECT_LE(t.min_ms, t.median_ms);
}

TEST(ProfileTimer, StreamTimingOnTheCpuStream) {
  int calls = 0;
  const profile::Timing t = profile::time_on_stream(
      [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      },
      Stream::cpu(), {1, 5});
  EXPECT_EQ(calls, 6);
  EXPECT_GE(t.median_ms, 2.9);
}

TEST(ProfileTimer, BadOptionsAreErrors) {
  expect_error<ValueError>([] { profile::time_on_host([] {}, {0, 0}); }, {"time_on_host", "repeats"});
  expect_error<ValueError>([] { profile::time_on_stream([] {}, Stream::cpu(), {-1, 3}); }, {"time_on_stream", "warmup"});
}

}  // namespace
}  // namespace tessel::testing
