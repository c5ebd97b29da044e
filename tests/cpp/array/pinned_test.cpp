// empty_pinned: a contiguous, writable host array in page-locked memory that round-trips through
// every backend.
#include <gtest/gtest.h>

#include <vector>

#include "tessel/array/array.hpp"
#include "testing.hpp"

namespace tessel::testing {
namespace {

class PinnedTest : public BackendTest {};

TEST_P(PinnedTest, EmptyPinnedIsAWritableHostArrayThatRoundTrips) {
  TESSEL_SKIP_UNAVAILABLE(device());
  Array h = empty_pinned({3, 5}, DType::float64);
  EXPECT_EQ(h.device(), Device::cpu());
  EXPECT_EQ(h.shape(), (Shape{3, 5}));
  EXPECT_EQ(h.dtype(), DType::float64);
  EXPECT_TRUE(h.is_contiguous());
  TESSEL_SEEDED_RNG(rng);
  std::uniform_real_distribution<double> dist(-9, 9);
  std::vector<double> values(15);
  for (double& v : values) v = dist(rng);
  std::copy(values.begin(), values.end(), h.data_as<double>());
  const Array back = h.to(device()).to(Device::cpu());
  EXPECT_EQ(back.to_vector<double>(), values);
  EXPECT_EQ(empty_pinned({0}, DType::int8).size(), 0);
  expect_error<ShapeError>([] { empty_pinned({2, -1}); }, {"negative dimension"});
}

INSTANTIATE_TEST_SUITE_P(All, PinnedTest, ::testing::ValuesIn(all_backends()), backend_name);

}  // namespace
}  // namespace tessel::testing
