// fuse(): fused against unfused results (random expression graphs, every backend), dtypes,
// the on/off switch, source printing and NVRTC compilation of the fused kernel, bad input.
#include "tessel/ops/fuse.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "testing.hpp"
#ifdef TESSEL_HAVE_CUDA
#include "tessel/jit/compiler.hpp"
#endif

namespace tessel {
namespace {

class Fuse : public testing::BackendTest {};

// Restores the switch whatever a test does.
struct FusionSwitch {
  bool saved = fusion_enabled();
  ~FusionSwitch() { set_fusion_enabled(saved); }
};

TEST_P(Fuse, ReluAxpbTimesC) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const Device dev = device();
  auto k = fuse([](const std::vector<Sym>& v) { return relu(v[0] * v[1] + v[2]) * v[3]; }, 4);
  Array a = from_vector(std::vector<float>{1, -2, 3, -4}, {4}, dev);
  Array x = from_vector(std::vector<float>{2, 2, 2, 2}, {4}, dev);
  Array b = full({}, 1.0f, DType::float32, dev);  // broadcast 0-d input
  Array c = from_vector(std::vector<float>{1, 1, 10, 10}, {4}, dev);
  EXPECT_EQ(k({a, x, b, c}).to_vector<float>(), (std::vector<float>{3, 0, 70, 0}));
  EXPECT_EQ(k.result_dtype({DType::float16, DType::float16, DType::float16, DType::float16}), DType::float16);
  EXPECT_EQ(k.result_dtype({DType::int32, DType::int32, DType::int32, DType::float32}), DType::float64);
}

TEST_P(Fuse, ScalarsAreWeak) {
  TESSEL_SKIP_UNAVAILABLE(device());
  auto k = fuse([](const std::vector<Sym>& v) { return v[0] * 2 + 1.5; }, 1);
  EXPECT_EQ(k.result_dtype({DType::float16}), DType::float16);
  EXPECT_EQ(k.result_dtype({DType::int8}), DType::float64);
  Array a = from_vector(std::vector<float>{1, 2}, {2}, device());
  EXPECT_EQ(k({a}).to_vector<float>(), (std::vector<float>{3.5f, 5.5f}));
}

// Random graphs over float32 inputs: fused and unfused agree.
TEST_P(Fuse, RandomGraphsMatchUnfused) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TESSEL_SEEDED_RNG(rng);
  const std::vector<ElementwiseOp> unary{ElementwiseOp::exp, ElementwiseOp::tanh, ElementwiseOp::relu,
                                         ElementwiseOp::negative, ElementwiseOp::sigmoid, ElementwiseOp::abs};
  const std::vector<ElementwiseOp> binary{ElementwiseOp::add, ElementwiseOp::multiply, ElementwiseOp::maximum,
                                          ElementwiseOp::subtract, ElementwiseOp::minimum};
  for (int trial = 0; trial < 10; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 3);
    const std::uint64_t graph_seed = rng();
    auto k = fuse(
        [&](const std::vector<Sym>& v) {
          std::mt19937_64 g(graph_seed);
          std::vector<Sym> pool(v.begin(), v.end());
          for (int step = 0; step < 6; ++step) {
            const Sym a = pool[g() % pool.size()];
            if (g() % 2) {
              pool.push_back(Sym::apply(unary[g() % unary.size()], {a}));
            } else {
              const Sym b = (g() % 4 == 0) ? Sym(0.5) : pool[g() % pool.size()];
              pool.push_back(Sym::apply(binary[g() % binary.size()], {a, b}));
            }
          }
          return pool.back();
        },
        n);
    std::vector<Array> in;
    std::uniform_real_distribution<float> uni(-2, 2);
    for (int i = 0; i < n; ++i) {
      std::vector<float> vals(24);
      for (float& f : vals) f = uni(rng);
      in.push_back(from_vector(vals, {2, 3, 4}, device()).slice(2, Slice(none, none, -1)));
    }
    set_fusion_enabled(true);
    const auto fused = k(in).astype(DType::float64).to_vector<double>();
    set_fusion_enabled(false);
    const auto unfused = k(in).astype(DType::float64).to_vector<double>();
    ASSERT_EQ(fused.size(), unfused.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      if (std::isnan(unfused[i])) {
        EXPECT_TRUE(std::isnan(fused[i]));
      } else {
        EXPECT_NEAR(fused[i], unfused[i], 1e-5 * (1 + std::fabs(unfused[i]))) << "trial " << trial << " element " << i;
      }
    }
  }
}

// Graphs beyond one kernel's budgets are split (CUDA) and still equal the unfused result.
TEST_P(Fuse, WideAndDeepGraphsSplitAndMatchUnfused) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TESSEL_SEEDED_RNG(rng);
  std::uniform_real_distribution<float> uni(-1, 1);
  auto random_array = [&](const Shape& shape) {
    std::vector<float> v(static_cast<std::size_t>(numel(shape)));
    for (float& x : v) x = uni(rng);
    return from_vector(v, shape, device());
  };
  // 200 inputs, summed with alternating signs and a few products: 7 kernels of <= 31 inputs.
  const int wide_n = 200;
  auto wide = fuse(
      [](const std::vector<Sym>& v) {
        Sym acc = v[0];
        for (std::size_t i = 1; i < v.size(); ++i) acc = (i % 7 == 0) ? acc * (v[i] * 0.5 + 1.0) : (i % 2 ? acc + v[i] : acc - v[i]);
        return acc;
      },
      wide_n);
  EXPECT_GE(wide.num_kernels(), (wide_n + kFusedMaxArrays - 3) / (kFusedMaxArrays - 2));
  // A deep chain of 2000 op nodes (1000 steps) on 2 inputs: split by the op budget.
  auto deep = fuse(
      [](const std::vector<Sym>& v) {
        Sym x = v[0];
        for (int i = 0; i < 1000; ++i) x = (i % 3 == 0) ? tanh(x * 1.01 + v[1]) : (i % 3 == 1 ? x - v[1] * 0.5 : maximum(x, -0.9));
        return x;
      },
      2);
  EXPECT_GE(deep.num_kernels(), 2000 / kFusedMaxOps);
  EXPECT_LE(wide.num_kernels(), 2 * wide_n / (kFusedMaxArrays - 2));
  EXPECT_LE(deep.num_kernels(), 2 * 2000 / kFusedMaxOps);
  auto small = fuse([](const std::vector<Sym>& v) { return v[0] * v[1] + 1; }, 2);
  EXPECT_EQ(small.num_kernels(), 1);

  std::vector<Array> wide_in;
  for (int i = 0; i < wide_n; ++i) wide_in.push_back(random_array(i % 5 == 0 ? Shape{1, 33} : Shape{4, 33}));
  const std::vector<Array> deep_in{random_array({1000}), random_array({1000})};
  for (auto* k : {&wide, &deep}) {
    const std::vector<Array>& in = k == &wide ? wide_in : deep_in;
    set_fusion_enabled(true);
    const std::vector<float> fused = (*k)(in).to(Device::cpu()).to_vector<float>();
    set_fusion_enabled(false);
    const std::vector<float> unfused = (*k)(in).to(Device::cpu()).to_vector<float>();
    ASSERT_EQ(fused.size(), unfused.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      // Same float32 roundings per op; the GPU's tanh may differ by an ulp or two per step.
      ASSERT_NEAR(fused[i], unfused[i], 1e-4 * (1 + std::fabs(unfused[i]))) << (k == &wide ? "wide" : "deep") << " at " << i;
    }
  }
}

// Arrays larger than one CPU block (32768 elements): the CPU evaluates block by block along
// different axes; broadcast, transposed and unused inputs. Same values as unfused.
TEST_P(Fuse, BlockedEvaluationMatchesUnfused) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TESSEL_SEEDED_RNG(rng);
  std::uniform_real_distribution<double> uni(-2, 2);
  auto random_array = [&](const Shape& shape) {
    std::vector<double> v(static_cast<std::size_t>(numel(shape)));
    for (double& x : v) x = uni(rng);
    return from_vector(v, shape, device());
  };
  // v[2] is unused: the result still has the broadcast shape of every input.
  auto k = fuse([](const std::vector<Sym>& v) { return where(v[0] > 0, exp(-v[0]) * v[1], tanh(v[1]) - v[0] * 3); }, 3);
  const std::vector<std::vector<Shape>> cases = {
      {{20011}, {20011}, {1}},
      {{100003}, {100003}, {1}},                 // several blocks of 32768, a short last one
      {{5, 40000}, {1, 40000}, {5, 1}},          // blocks along the last axis under an outer index
      {{3, 5000}, {1, 5000}, {3, 1}},
      {{2, 3, 9000}, {3, 9000}, {2, 1, 1}},
      {{7, 1, 3000}, {1, 4, 1}, {7, 4, 3000}},
  };
  for (const auto& shapes : cases) {
    std::vector<Array> in;
    for (const Shape& sh : shapes) in.push_back(random_array(sh));
    if (shapes[0].size() == 2) in[0] = random_array({shapes[0][1], shapes[0][0]}).permute({1, 0});  // transposed
    set_fusion_enabled(true);
    const Array fused = k(in);
    set_fusion_enabled(false);
    const Array unfused = k(in);
    ASSERT_EQ(fused.shape(), unfused.shape());
    ASSERT_EQ(fused.dtype(), DType::float64);
    const auto f = fused.to(Device::cpu()).to_vector<double>(), u = unfused.to(Device::cpu()).to_vector<double>();
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (device().is_cpu()) {
        ASSERT_EQ(f[i], u[i]) << shape_str(fused.shape()) << " at " << i;  // the same loops, bit for bit
      } else {
        ASSERT_NEAR(f[i], u[i], 1e-13 * (1 + std::fabs(u[i]))) << shape_str(fused.shape()) << " at " << i;
      }
    }
  }
}

TEST_P(Fuse, BadInput) {
  TESSEL_SKIP_UNAVAILABLE(device());
  auto k = fuse([](const std::vector<Sym>& v) { return bitwise_and(v[0], v[1]); }, 2);
  Array f = ones({2}, DType::float32, device());
  testing::expect_error<ValueError>([&] { k({f}); }, {"fuse", "2 inputs", "got 1"});
  testing::expect_error<DTypeError>([&] { k({f, f}); }, {"bitwise_and", "float32"});
  testing::expect_error<ShapeError>([&] { k({ones({2}, DType::int32, device()), ones({3}, DType::int32, device())}); },
                                    {"(2,)", "(3,)"});
}

INSTANTIATE_TEST_SUITE_P(, Fuse, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

#ifdef TESSEL_HAVE_CUDA
TEST(FuseSource, PrintsAndCompiles) {
  auto k = fuse([](const std::vector<Sym>& v) { return where(v[0] > 0, gelu(v[0]) * v[1], -v[1] + 2.5); }, 2);
  for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64, DType::int32}) {
    const std::string src = k.source({d, d});
    EXPECT_NE(src.find("tessel_fused"), std::string::npos);
    EXPECT_NE(src.find("tessel_ops::gelu"), std::string::npos);
    if (!jit::nvrtc_available()) continue;
    jit::CompileRequest r;
    r.source = src;
    r.name = "tessel_fused_c";
    r.arch = "sm_90";
    try {
      EXPECT_FALSE(jit::compile_to_cubin(r).cubin.empty());
    } catch (const CompileError& e) {
      ADD_FAILURE() << dtype_name(d) << ": " << e.what() << "\n" << src;
    }
  }
}
#endif

}  // namespace
}  // namespace tessel
