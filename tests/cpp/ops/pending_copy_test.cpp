// A CPU op on an array whose device-to-host copy is still landing must wait for it: the copy is
// queued behind long GPU work, so reading the host buffer early would see stale bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <string>
#include <vector>

#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/fft.hpp"
#include "tessel/ops/random.hpp"
#include "tessel/ops/reduce.hpp"
#include "tessel/ops/sort.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

// A device array whose final values appear only after a long queue of work on the stream.
Array busy_device_array(std::int64_t n) {
  Array x = random::uniform({n}, 1, 2, DType::float32, testing::test_gpu());
  for (int i = 0; i < 40; ++i) x = sqrt(multiply(x, x));  // same values, ~80 passes queued
  return x;
}

TEST(PendingCopy, CpuOpsWaitForALandingDeviceCopy) {
  TESSEL_SKIP_UNAVAILABLE(testing::test_gpu());
  const std::int64_t n = std::int64_t{1} << 24;
  for (const char* op : {"sum", "sort", "cumsum", "fft"}) {
    SCOPED_TRACE(op);
    // The copy is queued behind ~80 passes of device work and read by a CPU op at once; the
    // reference comes afterwards from a second copy of the same device array.
    const Array source = busy_device_array(n);
    const Array on_host = source.to(Device::cpu());  // queued, not yet landed
    auto expected_values = [&] { return source.to(Device::cpu()).to_vector<float>(); };
    if (std::string(op) == "sum") {
      const double got = sum(on_host).item<double>();
      double want = 0;
      for (float v : expected_values()) want += v;
      EXPECT_NEAR(got, want, 1e-4 * want);
    } else if (std::string(op) == "sort") {
      const std::vector<float> got = sort(on_host).to_vector<float>();
      std::vector<float> want = expected_values();
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want);
    } else if (std::string(op) == "cumsum") {
      const std::vector<float> got = cumsum(on_host).to_vector<float>();
      const std::vector<float> expected = expected_values();
      for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, n / 2}) {
        double prefix = 0;
        for (std::int64_t k = 0; k <= i; ++k) prefix += expected[static_cast<std::size_t>(k)];
        EXPECT_NEAR(got[static_cast<std::size_t>(i)], prefix, 1e-3 * prefix);
      }
    } else {
      const auto got_values = fft::fft(on_host.index({Slice(0, 64)})).to_vector<std::complex<float>>();
      const std::vector<float> expected = expected_values();
      const Array want = fft::fft(from_vector(std::vector<float>(expected.begin(), expected.begin() + 64), {64}, Device::cpu()));
      const auto want_values = want.to_vector<std::complex<float>>();
      for (std::size_t i = 0; i < got_values.size(); ++i) EXPECT_LE(std::abs(got_values[i] - want_values[i]), 1e-4f);
    }
  }
}

}  // namespace
}  // namespace tessel::testing
