// Random draws: statistics, reproducibility, CPU/GPU agreement and bad input, over backend x dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "testing.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/random.hpp"

using namespace tessel;

namespace {

std::vector<Device> backends() { return tessel::testing::available_backends(); }

// The array's values as doubles, whatever its floating or integer dtype.
std::vector<double> values(const Array& a) {
  const Array f = astype(a.to(Device::cpu()), DType::float64);
  return f.to_vector<double>();
}

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};
Moments moments(const std::vector<double>& v) {
  Moments m{0, 0, v.at(0), v.at(0)};
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= double(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= double(v.size() - 1);
  return m;
}

class RandomTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {};

TEST_P(RandomTest, UniformMomentsAndRange) {
  const auto [device, dtype] = GetParam();
  random::Generator gen(1234);
  const std::int64_t n = 1 << 20;
  const Array a = gen.uniform({n}, -2.0, 3.0, dtype, device);
  ASSERT_EQ(a.shape(), Shape({n}));
  ASSERT_EQ(a.dtype(), dtype);
  const auto m = moments(values(a));
  // Mean 0.5, variance 25/12; 6 standard errors. float16 rounding widens the range test only.
  EXPECT_NEAR(m.mean, 0.5, 6 * std::sqrt(25.0 / 12 / n));
  EXPECT_NEAR(m.var, 25.0 / 12, 0.02);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LE(m.max, 3.0);
  EXPECT_LT(m.min, -1.99);
  EXPECT_GT(m.max, 2.99);
}

TEST_P(RandomTest, NormalMoments) {
  const auto [device, dtype] = GetParam();
  random::Generator gen(99);
  const std::int64_t n = 1 << 20;
  const auto v = values(gen.normal({n}, 1.5, 2.0, dtype, device));
  const auto m = moments(v);
  EXPECT_NEAR(m.mean, 1.5, 6 * 2.0 / std::sqrt(double(n)));
  EXPECT_NEAR(std::sqrt(m.var), 2.0, 0.01);
  // Tails exist but are not absurd: 1e6 draws reach about 4.9 sigma.
  EXPECT_LT(m.min, 1.5 - 4 * 2.0);
  EXPECT_GT(m.max, 1.5 + 4 * 2.0);
  EXPECT_GT(m.min, 1.5 - 7 * 2.0);
  for (double x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST_P(RandomTest, SameSeedSameNumbersAndDrawsDiffer) {
  const auto [device, dtype] = GetParam();
  random::Generator a(7), b(7), c(8);
  const auto first = values(a.uniform({1000}, 0, 1, dtype, device));
  EXPECT_EQ(first, values(b.uniform({1000}, 0, 1, dtype, device)));
  EXPECT_NE(first, values(c.uniform({1000}, 0, 1, dtype, device)));
  EXPECT_NE(first, values(a.uniform({1000}, 0, 1, dtype, device)));  // next draw of a
  EXPECT_EQ(a.offset(), 2u);
}

INSTANTIATE_TEST_SUITE_P(BackendsAndDtypes, RandomTest,
                         ::testing::Combine(::testing::ValuesIn(backends()),
                                            ::testing::Values(DType::float16, DType::bfloat16, DType::float32,
                                                              DType::float64)),
                         [](const auto& info) {
                           return ::tessel::testing::device_label(std::get<0>(info.param)) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

class RandomIntegerTest : public ::testing::TestWithParam<std::tuple<Device, DType>> {};

TEST_P(RandomIntegerTest, EveryValueInRangeAppears) {
  const auto [device, dtype] = GetParam();
  random::Generator gen(5);
  const std::int64_t low = is_unsigned_integer(dtype) ? 3 : -5, high = low + 11;
  const auto v = values(gen.integers({100000}, low, high, dtype, device));
  std::set<double> seen(v.begin(), v.end());
  EXPECT_EQ(seen.size(), 11u);
  EXPECT_EQ(*seen.begin(), double(low));
  EXPECT_EQ(*seen.rbegin(), double(high - 1));
}

INSTANTIATE_TEST_SUITE_P(BackendsAndDtypes, RandomIntegerTest,
                         ::testing::Combine(::testing::ValuesIn(backends()),
                                            ::testing::Values(DType::int8, DType::int16, DType::int32, DType::int64,
                                                              DType::uint8, DType::uint16, DType::uint32, DType::uint64)),
                         [](const auto& info) {
                           return ::tessel::testing::device_label(std::get<0>(info.param)) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST(Random, FullInt64RangeAndShapes) {
  for (Device device : backends()) {
    random::Generator gen(3);
    const Array big = gen.integers({4096}, std::numeric_limits<std::int64_t>::min(),
                                   std::numeric_limits<std::int64_t>::max(), DType::int64, device);
    const auto v = big.to(Device::cpu()).to_vector<std::int64_t>();
    std::int64_t negatives = 0;
    for (auto x : v) negatives += x < 0;
    EXPECT_GT(negatives, 1800);
    EXPECT_LT(negatives, 2300);
    EXPECT_EQ(gen.uniform({0, 3}, 0, 1, DType::float32, device).size(), 0);
    const Array scalar = gen.uniform({}, 0, 1, DType::float64, device);
    EXPECT_EQ(scalar.ndim(), 0);
    const double x = scalar.to(Device::cpu()).item<double>();
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
  }
}

TEST(Random, CpuAndGpuAgree) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  for (DType dtype : {DType::float16, DType::bfloat16, DType::float32, DType::float64}) {
    random::Generator cpu_gen(42), gpu_gen(42);
    // Uniform: bit for bit.
    EXPECT_EQ(values(cpu_gen.uniform({100003}, -1, 4, dtype, Device::cpu())),
              values(gpu_gen.uniform({100003}, -1, 4, dtype, tessel::testing::test_gpu())))
        << dtype_name(dtype);
    // Normal: within a few ulp of the dtype.
    const auto c = values(cpu_gen.normal({100003}, 0, 1, dtype, Device::cpu()));
    const auto g = values(gpu_gen.normal({100003}, 0, 1, dtype, tessel::testing::test_gpu()));
    const double tol = dtype == DType::float64 ? 1e-12 : dtype == DType::float32 ? 2e-6 : 2e-2;
    for (std::size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], g[i], tol * (1 + std::abs(c[i]))) << i;
  }
  random::Generator cpu_gen(9), gpu_gen(9);
  EXPECT_EQ(values(cpu_gen.integers({100001}, -1000, 1000, DType::int32, Device::cpu())),
            values(gpu_gen.integers({100001}, -1000, 1000, DType::int32, tessel::testing::test_gpu())));
}

TEST(Random, BadInputIsClearError) {
  random::Generator gen(1);
  auto expect_message = [](auto&& call, const std::string& text) {
    try {
      call();
      FAIL() << "no error; expected: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_message([&] { gen.uniform({4}, 0, 1, DType::int32, Device::cpu()); }, "uniform: dtype int32 is not supported");
  expect_message([&] { gen.normal({4}, 0, -1, DType::float32, Device::cpu()); }, "normal: stddev must be >= 0");
  expect_message([&] { gen.uniform({4}, 2, 1, DType::float32, Device::cpu()); }, "uniform: low (2) must be <= high (1)");
  expect_message([&] { gen.uniform({4}, 0, INFINITY, DType::float32, Device::cpu()); }, "high must be finite");
  expect_message([&] { gen.integers({4}, 5, 5, DType::int32, Device::cpu()); }, "integers: low (5) must be < high (5)");
  expect_message([&] { gen.integers({4}, 0, 300, DType::uint8, Device::cpu()); }, "[0, 300) does not fit in uint8");
  expect_message([&] { gen.integers({4}, -1, 3, DType::uint32, Device::cpu()); }, "does not fit in uint32");
  expect_message([&] { gen.integers({4}, 0, 3, DType::float32, Device::cpu()); }, "not an integer dtype");
  EXPECT_THROW(gen.uniform({-1}, 0, 1, DType::float32, Device::cpu()), Error);
}

}  // namespace
