// The elementwise dispatch fast paths (src/ops/elementwise.cpp, src/backend/cuda/elementwise.cpp):
// inputs used in place when they already have the result's shape and dtype, out= used by
// reference, size-1 axes still broadcast, operand-count errors from every entry point, and (CUDA)
// a change of the launch tuning after a kernel was cached.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "../array/array_testing.hpp"
#include "backend/elementwise.hpp"
#include "ops/elementwise_operands.hpp"
#include "testing.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/tessel.hpp"

namespace tessel {
namespace {

class ElementwiseDispatch : public testing::BackendTest {};

std::vector<float> host(const Array& a) { return a.to(Device::cpu()).to_vector<float>(); }

Array uniform_on(const Shape& shape, Device dev, std::mt19937_64& rng) {
  random::Generator gen(rng());
  return gen.uniform(shape, -2, 2, DType::float32, dev);
}

TEST_P(ElementwiseDispatch, OutIsWrittenAndReturned) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  Array a = uniform_on({33, 5}, dev, rng), b = uniform_on({33, 5}, dev, rng);
  Array out = empty({33, 5}, DType::float32, dev);
  testing::poison(out);
  Array r = add(a, b, out);
  EXPECT_EQ(r.data(), out.data());  // out= itself, not a copy
  const auto av = host(a), bv = host(b), ov = host(out);
  for (std::size_t i = 0; i < ov.size(); ++i) ASSERT_EQ(ov[i], av[i] + bv[i]) << i;
  // Without out=: a fresh array, the inputs untouched.
  Array fresh = subtract(a, b);
  EXPECT_NE(fresh.data(), a.data());
  EXPECT_NE(fresh.data(), b.data());
  const auto fv = host(fresh);
  for (std::size_t i = 0; i < fv.size(); ++i) ASSERT_EQ(fv[i], av[i] - bv[i]) << i;
  EXPECT_EQ(host(a), av);
}

// Same shapes with size-1 axes, and a cast input: both go through the staged (broadcast / astype)
// path rather than the in-place one; the results must not differ.
TEST_P(ElementwiseDispatch, SizeOneAxesAndCastsStillStage) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  Array a = uniform_on({4, 1, 3}, dev, rng), b = uniform_on({4, 1, 3}, dev, rng);
  Array out = empty({4, 1, 3}, DType::float32, dev);
  testing::poison(out);
  multiply(a, b, out);
  const auto av = host(a), bv = host(b), ov = host(out);
  for (std::size_t i = 0; i < ov.size(); ++i) ASSERT_EQ(ov[i], av[i] * bv[i]) << i;

  Array i32 = arange(0, 12, 1, DType::int32, dev).reshape({4, 1, 3});
  Array mixed = add(a, i32);  // float32 + int32 -> float64 (NumPy)
  EXPECT_EQ(mixed.dtype(), DType::float64);
  const auto mv = mixed.to(Device::cpu()).to_vector<double>();
  for (std::size_t i = 0; i < mv.size(); ++i) ASSERT_DOUBLE_EQ(mv[i], double(av[i]) + double(i)) << i;

  // Scalars on either side, and a 3-operand where with a broadcast condition.
  Array s = add(2.5, a);
  const auto sv = host(s);
  for (std::size_t i = 0; i < sv.size(); ++i) ASSERT_EQ(sv[i], 2.5f + av[i]) << i;
  Array cond = greater(uniform_on({1, 1, 3}, dev, rng), 0.0);
  Array w = where(cond, a, b);
  const auto cv = cond.to(Device::cpu()).to_vector<bool>();
  const auto wv = host(w);
  for (std::size_t i = 0; i < wv.size(); ++i) ASSERT_EQ(wv[i], cv[i % 3] ? av[i] : bv[i]) << i;
}

TEST_P(ElementwiseDispatch, OperandCountIsChecked) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Device dev = device();
  Array a = ones({3}, DType::float32, dev);
  testing::expect_error<ValueError>([&] { elementwise(ElementwiseOp::add, {a}); }, {"add", "takes 2 inputs, got 1"});
  testing::expect_error<ValueError>([&] { elementwise(ElementwiseOp::negative, {a, a}); },
                                    {"negative", "takes 1 inputs, got 2"});
  testing::expect_error<ValueError>(
      [&] { detail::elementwise_operands(ElementwiseOp::where, {{a, std::nullopt}}, std::nullopt, std::nullopt); },
      {"where", "takes 3 inputs, got 1"});
  testing::expect_error<ValueError>(
      [&] {
        detail::elementwise_operands(ElementwiseOp::add, {{Array(), Scalar(1)}, {Array(), Scalar(2)}}, std::nullopt,
                                     std::nullopt);
      },
      {"add", "at least one array"});
}

INSTANTIATE_TEST_SUITE_P(, ElementwiseDispatch, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

#ifdef TESSEL_HAVE_CUDA
// The kernel cache keeps the launch shape computed for the tuning in force when the kernel was
// cached; a later tuning change must take effect (and stay correct), including a block size
// above what the cached entry used.
TEST(ElementwiseDispatchCuda, TuningChangeAfterCaching) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  TESSEL_SEEDED_RNG(rng);
  const Device dev = testing::test_gpu();
  const jit::ElementwiseTuning saved = jit::elementwise_tuning();
  Array a = uniform_on({100003}, dev, rng), b = uniform_on({100003}, dev, rng);
  const auto av = host(a), bv = host(b);
  for (const jit::ElementwiseTuning t : {saved, jit::ElementwiseTuning{64, saved.unroll, 1},
                                         jit::ElementwiseTuning{1024, saved.unroll, 2}, saved}) {
    jit::set_elementwise_tuning(t);
    Array out = empty({100003}, DType::float32, dev);
    testing::poison(out);
    add(a, b, out);
    const auto ov = host(out);
    for (std::size_t i = 0; i < ov.size(); ++i) {
      ASSERT_EQ(ov[i], av[i] + bv[i]) << "block " << t.block << " waves " << t.waves << " at " << i;
    }
  }
  jit::set_elementwise_tuning(saved);
}
#endif

}  // namespace
}  // namespace tessel
