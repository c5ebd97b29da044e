// fuse(): fused against unfused results (random expression graphs, every backend), dtypes,
// the on/off switch, source printing and NVRTC compilation of the fused kernel, bad input; the
// cached launch plans: one kernel called again and again across shapes, layouts, dtypes, tunings
// and from several threads; kernels of several outputs (every backend and dtype against a float64
// reference, split graphs, NVRTC compilation of their source, bad input).
#include "tessel/ops/cast.hpp"
#include "tessel/ops/fuse.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testing.hpp"
#include "tessel/jit/elementwise.hpp"
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
    const auto fused = astype(k(in), DType::float64).to_vector<double>();
    set_fusion_enabled(false);
    const auto unfused = astype(k(in), DType::float64).to_vector<double>();
    ASSERT_EQ(fused.size(), unfused.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      if (std::isnan(unfused[i])) {
        EXPECT_TRUE(std::isnan(fused[i]));
      } else if (std::isinf(unfused[i])) {  // exp chains overflow: both must give the same infinity
        EXPECT_EQ(fused[i], unfused[i]) << "trial " << trial << " element " << i;
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

// ---- several outputs ----
// One graph, five outputs of different dtypes sharing t = v0 * v1: one of them reads only v2 and
// one is an input itself (both come back as new arrays of the common shape). Every backend and
// dtype against a float64 reference over zero-size, 0-d, broadcast, blocked (CPU: several blocks),
// transposed and negatively strided inputs.
FusedKernel five_outputs() {
  return fuse([](const std::vector<Sym>& v) {
    const Sym t = v[0] * v[1];
    return std::vector<Sym>{t + v[2], t > v[2], maximum(t, v[2]) * 2, v[2] * 3, v[1]};
  }, 3);
}

TEST_P(Fuse, SeveralOutputsMatchFloat64Reference) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  std::uniform_int_distribution<int> small(-4, 4);  // exact in every dtype, products included
  const FusedKernel k = five_outputs();
  ASSERT_EQ(k.num_outputs(), 5);
  auto input = [&](const Shape& shape, DType d) {
    std::vector<double> v(static_cast<std::size_t>(numel(shape)));
    for (double& x : v) x = small(rng) * 0.5;
    if (!is_floating(d)) {
      for (double& x : v) x = std::round(x);
    }
    return astype(from_vector(v, shape, device()), d);
  };
  const std::vector<std::vector<Shape>> cases = {
      {{}, {}, {}},                       // 0-d
      {{0}, {0}, {1}},                    // zero-size
      {{3, 0}, {1, 0}, {3, 1}},
      {{3, 1}, {1, 4}, {4}},              // broadcast
      {{2, 3}, {2, 3}, {}},               // v2 0-d: outputs 3 and 4 broadcast to (2, 3)
      {{5, 40000}, {1, 40000}, {5, 1}},   // CPU: blocks under an outer index
      {{100003}, {1}, {100003}},          // CPU: several blocks, a short last one
  };
  for (DType d : {DType::float32, DType::float64, DType::float16, DType::int32}) {
    const std::vector<DType> rts = k.result_dtypes({d, d, d});
    ASSERT_EQ(rts, (std::vector<DType>{d, DType::bool_, d, d, d}));
    for (int layout = 0; layout < 3; ++layout) {
      for (const auto& shapes : cases) {
        std::vector<Array> in;
        for (const Shape& sh : shapes) in.push_back(input(sh, d));
        if (layout == 1 && shapes[0].size() == 2) {  // transposed v0
          in[0] = input({shapes[0][1], shapes[0][0]}, d).permute({1, 0});
        } else if (layout == 2 && shapes[2].size() >= 1 && shapes[2].back() > 1) {  // v2 reversed
          in[2] = in[2].slice(static_cast<std::int64_t>(shapes[2].size()) - 1, Slice(std::nullopt, std::nullopt, -1));
        }
        const std::vector<Array> outs = k.call_outputs(in);
        ASSERT_EQ(outs.size(), 5u);
        const Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape()), in[2].shape());
        std::vector<std::vector<double>> x;
        for (Array& a : in) x.push_back(astype(a.broadcast_to(shape), DType::float64).to(Device::cpu()).to_vector<double>());
        const std::string what = std::string(dtype_name(d)) + " " + shape_str(shape) + " layout " + std::to_string(layout);
        for (std::size_t j = 0; j < 5; ++j) {
          ASSERT_EQ(outs[j].shape(), shape) << what << " output " << j;
          ASSERT_EQ(outs[j].dtype(), rts[j]) << what << " output " << j;
          EXPECT_TRUE(outs[j].is_contiguous()) << what << " output " << j;
          const auto got = astype(outs[j], DType::float64).to(Device::cpu()).to_vector<double>();
          for (std::size_t i = 0; i < got.size(); ++i) {
            const double t = x[0][i] * x[1][i];
            const double want[5] = {t + x[2][i], t > x[2][i] ? 1.0 : 0.0, std::max(t, x[2][i]) * 2, x[2][i] * 3, x[1][i]};
            ASSERT_EQ(got[i], want[j]) << what << " output " << j << " at " << i;  // exact: small halves
          }
        }
        // An output that is an input is a new array, not the input.
        if (outs[4].size() > 0) {
          EXPECT_NE(outs[4].data(), in[1].data()) << what;
        }
      }
    }
  }
}

// The outputs of one call agree with each output fused alone, and with fusion off.
TEST_P(Fuse, SeveralOutputsMatchSingleOutputKernels) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TESSEL_SEEDED_RNG(rng);
  std::uniform_real_distribution<double> uni(-2, 2);
  auto random_array = [&](const Shape& shape) {
    std::vector<double> v(static_cast<std::size_t>(numel(shape)));
    for (double& x : v) x = uni(rng);
    return astype(from_vector(v, shape, device()), DType::float32);
  };
  auto body = [](const std::vector<Sym>& v) {
    const Sym s = sigmoid(v[0]);
    return std::vector<Sym>{s * v[1], s * (1.0 - s) * v[1] * v[2], exp(-v[2])};
  };
  const FusedKernel k = fuse(body, 3);
  for (const Shape& shape : {Shape{7}, Shape{40, 2000}}) {
    const std::vector<Array> in = {random_array(shape), random_array(shape), random_array({1})};
    set_fusion_enabled(true);
    const std::vector<Array> fused = k.call_outputs(in);
    set_fusion_enabled(false);
    const std::vector<Array> unfused = k.call_outputs(in);
    set_fusion_enabled(true);
    for (std::size_t j = 0; j < 3; ++j) {
      const FusedKernel alone = fuse([&](const std::vector<Sym>& v) { return body(v)[j]; }, 3);
      const auto f = fused[j].to(Device::cpu()).to_vector<float>();
      const auto u = unfused[j].to(Device::cpu()).to_vector<float>();
      const auto a = alone(in).to(Device::cpu()).to_vector<float>();
      ASSERT_EQ(f.size(), u.size());
      for (std::size_t i = 0; i < f.size(); ++i) {
        ASSERT_NEAR(f[i], u[i], 1e-6f * (1 + std::fabs(u[i]))) << "output " << j << " at " << i;
        ASSERT_NEAR(f[i], a[i], 1e-6f * (1 + std::fabs(a[i]))) << "output " << j << " at " << i;
      }
    }
  }
}

// A graph too large for one kernel still gives every output (split kernels, shared cut nodes).
TEST_P(Fuse, SeveralOutputsOfASplitGraph) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const int n = 40;  // more inputs than one kernel takes
  const FusedKernel k = fuse([&](const std::vector<Sym>& v) {
    Sym sum = v[0];
    for (int i = 1; i < n; ++i) sum = sum + v[static_cast<std::size_t>(i)];
    return std::vector<Sym>{sum, sum * 2, v[0] - v[1]};
  }, n);
  EXPECT_GE(k.num_kernels(), 2);
  std::vector<Array> in;
  for (int i = 0; i < n; ++i) in.push_back(full({3}, static_cast<double>(i), DType::float64, device()));
  const std::vector<Array> outs = k.call_outputs(in);
  const double total = n * (n - 1) / 2.0;
  EXPECT_EQ(outs[0].to(Device::cpu()).to_vector<double>(), std::vector<double>(3, total));
  EXPECT_EQ(outs[1].to(Device::cpu()).to_vector<double>(), std::vector<double>(3, 2 * total));
  EXPECT_EQ(outs[2].to(Device::cpu()).to_vector<double>(), std::vector<double>(3, -1.0));
}

// A kernel made from a vector of one output: call_outputs and operator() in either order share
// its plans, and call_outputs returns a new array even for an output that is an input.
TEST_P(Fuse, OneOutputFromAVector) {
  TESSEL_SKIP_UNAVAILABLE(device());
  Array x = from_vector(std::vector<float>{1, -2, 3}, {3}, device());
  for (int order = 0; order < 2; ++order) {
    const FusedKernel k(std::vector<Sym>{Sym::input(0) * 2}, 1);
    EXPECT_TRUE(k.multi_output());
    EXPECT_EQ(k.num_kernels(), 1);
    for (int call = 0; call < 2; ++call) {
      const bool outputs = (call == 0) == (order == 0);
      const Array y = outputs ? k.call_outputs({x}).at(0) : k({x});
      EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, -4, 6})) << order << call;
    }
  }
  const FusedKernel same(std::vector<Sym>{Sym::input(0)}, 1);
  const std::vector<Array> copy = same.call_outputs({x});
  EXPECT_NE(copy.at(0).data(), x.data());
  EXPECT_EQ(copy.at(0).to_vector<float>(), x.to_vector<float>());
}

TEST_P(Fuse, SeveralOutputsBadInput) {
  TESSEL_SKIP_UNAVAILABLE(device());
  const FusedKernel k = five_outputs();
  Array f = ones({2}, DType::float32, device());
  testing::expect_error<ValueError>([&] { k({f, f, f}); }, {"fuse", "5 outputs", "call_outputs"});
  testing::expect_error<ValueError>([&] { k.call_outputs({f}); }, {"fuse", "3 inputs", "got 1"});
  testing::expect_error<ShapeError>([&] { k.call_outputs({f, f, ones({3}, DType::float32, device())}); },
                                    {"(2,)", "(3,)"});
  const FusedKernel bits = fuse([](const std::vector<Sym>& v) { return std::vector<Sym>{v[0] + 1, bitwise_and(v[0], v[0])}; }, 1);
  testing::expect_error<DTypeError>([&] { bits.call_outputs({f}); }, {"bitwise_and", "float32"});
  const FusedKernel constant = fuse([](const std::vector<Sym>& v) { return std::vector<Sym>{v[0] + 1, Sym(2.0)}; }, 1);
  testing::expect_error<ValueError>([&] { constant.call_outputs({f}); }, {"fuse", "constant"});
  testing::expect_error<ValueError>([] { FusedKernel(std::vector<Sym>{}, 1); }, {"fuse", "no outputs"});
}

// ---- the cached launch plans ----
struct TuningGuard {
  jit::ElementwiseTuning saved = jit::elementwise_tuning();
  ~TuningGuard() { jit::set_elementwise_tuning(saved); }
};

// x0 + x1*0.5 - x2 + x3*0.5 - ...: with n = 40 inputs, more arrays than one kernel takes, so it splits.
FusedKernel alternating_sum(int n) {
  return fuse(
      [](const std::vector<Sym>& v) {
        Sym acc = v[0];
        for (std::size_t i = 1; i < v.size(); ++i) acc = (i % 2) ? acc + v[i] * 0.5 : acc - v[i];
        return acc;
      },
      n);
}

FusedKernel relu_axpb_c() {
  return fuse([](const std::vector<Sym>& v) { return relu(v[0] * 1.75 + v[1]) * v[2]; }, 3);
}

Array random_array(const Shape& shape, DType dtype, std::mt19937_64& rng, Device device) {
  std::uniform_real_distribution<double> uni(-2, 2);
  std::vector<double> v(static_cast<std::size_t>(numel(shape)));
  for (double& x : v) x = uni(rng);
  return astype(from_vector(v, shape, device), dtype);
}

// Fused against the same graph op by op (the eager ops, NumPy semantics): same shape, dtype and
// values (float rounding of the GPU's per-op math aside).
void expect_matches_unfused(const FusedKernel& k, const std::vector<Array>& in, const std::string& what) {
  set_fusion_enabled(true);
  const Array fused = k(in);
  set_fusion_enabled(false);
  const Array unfused = k(in);
  set_fusion_enabled(true);
  ASSERT_EQ(fused.shape(), unfused.shape()) << what;
  ASSERT_EQ(fused.dtype(), unfused.dtype()) << what;
  const auto f = astype(fused, DType::float64).to(Device::cpu()).to_vector<double>();
  const auto u = astype(unfused, DType::float64).to(Device::cpu()).to_vector<double>();
  // The tolerance of the least precise float among the inputs and the result: fused kernels keep
  // float16/bfloat16 intermediates in float (rounded once, at the store), eager ops round each.
  double tol = 1e-12;
  std::vector<DType> dtypes{fused.dtype()};
  for (const Array& a : in) dtypes.push_back(a.dtype());
  for (DType d : dtypes) {
    if (d == DType::bfloat16) tol = std::max(tol, 1e-2);
    if (d == DType::float16) tol = std::max(tol, 2e-3);
    if (d == DType::float32 || d == DType::complex64) tol = std::max(tol, 1e-6);
  }
  for (std::size_t i = 0; i < f.size(); ++i) {
    ASSERT_NEAR(f[i], u[i], tol * (1 + std::fabs(u[i]))) << what << " at " << i;
  }
}

TEST_P(Fuse, RepeatedCallsAcrossShapesLayoutsAndDtypes) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TESSEL_SEEDED_RNG(rng);
  const Device dev = device();
  const FusedKernel k = relu_axpb_c();
  auto arr = [&](const Shape& s, DType d = DType::float32) { return random_array(s, d, rng, dev); };
  for (int round = 0; round < 2; ++round) {
    expect_matches_unfused(k, {arr({1000}), arr({1000}), arr({1000})}, "contiguous");
    expect_matches_unfused(k, {arr({40, 30}).permute({1, 0}), arr({40}), arr({30, 40})}, "transposed, broadcast row");
    expect_matches_unfused(k, {arr({65}).slice(0, Slice(none, none, -2)), arr({33}), arr({})}, "negative stride, 0-d");
    expect_matches_unfused(k, {arr({5, 1, 7}), arr({1, 6, 1}), arr({})}, "broadcast 3-d");
    expect_matches_unfused(k, {arr({7}), arr({7}), arr({7})}, "contiguous, small");
    expect_matches_unfused(k, {arr({}), arr({}), arr({})}, "0-d");
    expect_matches_unfused(k, {arr({0, 3}), arr({3}), arr({})}, "empty");
    expect_matches_unfused(k, {arr({300}, DType::float64), arr({300}, DType::float64), arr({300}, DType::float64)},
                           "float64");
    expect_matches_unfused(k, {arr({300}, DType::float16), arr({300}, DType::float32), arr({300}, DType::int32)},
                           "float16, float32, int32");
    expect_matches_unfused(k, {arr({16, 16}, DType::float16).permute({1, 0}), arr({16}, DType::float16), arr({1}, DType::float16)},
                           "float16 strided");
    expect_matches_unfused(k, {arr({1000}), arr({1000}), arr({1000})}, "contiguous again");
  }
  // The plans cache nothing that changes the result dtype or the errors.
  EXPECT_EQ(k({arr({4}, DType::int8), arr({4}, DType::int8), arr({4}, DType::int8)}).dtype(), DType::float64);
  auto bad = fuse([](const std::vector<Sym>& v) { return bitwise_and(v[0], v[1]); }, 2);
  for (int i = 0; i < 2; ++i) {
    testing::expect_error<DTypeError>([&] { bad({arr({2}), arr({2})}); }, {"bitwise_and", "float32"});
  }
  EXPECT_EQ(bad({arr({2}, DType::int32), arr({2}, DType::int32)}).dtype(), DType::int32);
}

// A graph split into several kernels (a cut node feeds the root's kernel): plans per region.
TEST_P(Fuse, SplitGraphRepeatedCalls) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TESSEL_SEEDED_RNG(rng);
  const int n = 40;
  const FusedKernel wide = alternating_sum(n);
  ASSERT_GE(wide.num_kernels(), 2);
  for (const Shape& shape : {Shape{3, 5}, Shape{2, 3, 5}, Shape{5}}) {
    std::vector<Array> in;
    for (int i = 0; i < n; ++i) in.push_back(random_array(i % 3 == 0 ? Shape{5} : shape, DType::float32, rng, device()));
    expect_matches_unfused(wide, in, "split graph " + shape_str(shape));
  }
}

TEST_P(Fuse, ChangedUnrollStillLaunchesCorrectly) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TuningGuard guard;
  TESSEL_SEEDED_RNG(rng);
  const FusedKernel k = relu_axpb_c();
  for (int unroll : {1, 2, 4, 8, 3}) {
    jit::ElementwiseTuning t = jit::elementwise_tuning();
    t.unroll = unroll;
    jit::set_elementwise_tuning(t);
    for (std::int64_t size : {std::int64_t{1}, std::int64_t{1027}, std::int64_t{70001}}) {
      const Shape s{size};
      expect_matches_unfused(k, {random_array(s, DType::float32, rng, device()), random_array(s, DType::float32, rng, device()),
                                 random_array(s, DType::float32, rng, device())},
                             "unroll " + std::to_string(unroll) + " size " + std::to_string(size));
    }
  }
}

// Several threads call one FusedKernel (and copies of it, which share its plans) at once; every
// result is checked against float64 on the host.
TEST_P(Fuse, ThreadsShareOneKernel) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  set_fusion_enabled(true);
  const FusedKernel k = relu_axpb_c();
  const std::uint64_t seed = testing::test_seed();
  constexpr int kThreads = 4;
  constexpr int kCalls = 25;
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        const FusedKernel copy = k;
        const FusedKernel& kernel = t % 2 ? k : copy;  // half of them through a copy
        std::mt19937_64 rng(seed + static_cast<std::uint64_t>(t));
        for (int call = 0; call < kCalls; ++call) {
          const std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 3000);
          const bool f64 = (call + t) % 3 == 0;  // two dtype vectors raced for their plans
          const DType d = f64 ? DType::float64 : DType::float32;
          const Array x = random_array({n}, d, rng, device()), b = random_array({n}, d, rng, device());
          const Array c = random_array({1}, d, rng, device());
          const Array x_view = call % 2 ? x : x.slice(0, Slice(none, none, -1));  // contiguous and strided
          const auto got = astype(kernel({x_view, b, c}), DType::float64).to(Device::cpu()).to_vector<double>();
          const auto xv = astype(x_view, DType::float64).to(Device::cpu()).to_vector<double>();
          const auto bv = astype(b, DType::float64).to(Device::cpu()).to_vector<double>();
          const double cv = astype(c, DType::float64).to(Device::cpu()).to_vector<double>()[0];
          for (std::size_t i = 0; i < got.size(); ++i) {
            const double want = std::max(0.0, xv[i] * 1.75 + bv[i]) * cv;
            const double tol = f64 ? 1e-12 : 2e-6;
            if (!(std::fabs(got[i] - want) <= tol * (1 + std::fabs(want)))) {
              std::lock_guard<std::mutex> lock(failures_mutex);
              failures.push_back("thread " + std::to_string(t) + " call " + std::to_string(call) + " at " +
                                 std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(want));
              return;
            }
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(failures_mutex);
        failures.push_back("thread " + std::to_string(t) + ": " + e.what());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE(failures.empty()) << (failures.empty() ? std::string() : failures.front());
}

INSTANTIATE_TEST_SUITE_P(, Fuse, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

#ifdef TESSEL_HAVE_CUDA
// Compiles a fused kernel's printed source for sm_90 and fails the test (naming `what`, with the
// source) when NVRTC rejects it or returns no cubin. Nothing to check without NVRTC.
void expect_fused_source_compiles(const std::string& source, const std::string& what) {
  if (!jit::nvrtc_available()) return;
  jit::CompileRequest r;
  r.source = source;
  r.name = "tessel_fused_c";
  r.arch = "sm_90";
  try {
    EXPECT_FALSE(jit::compile_to_cubin(r).cubin.empty()) << what;
  } catch (const CompileError& e) {
    ADD_FAILURE() << what << ": " << e.what() << "\n" << source;
  }
}

TEST(FuseSource, PrintsAndCompiles) {
  auto k = fuse([](const std::vector<Sym>& v) { return where(v[0] > 0, gelu(v[0]) * v[1], -v[1] + 2.5); }, 2);
  for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64, DType::int32}) {
    const std::string src = k.source({d, d});
    EXPECT_NE(src.find("tessel_fused"), std::string::npos);
    EXPECT_NE(src.find("tessel_ops::gelu"), std::string::npos);
    expect_fused_source_compiles(src, dtype_name(d));
  }
}
// A graph split into several kernels prints every one of them, in launch order, and each
// compiles; a single-kernel graph prints no kernel headers.
TEST(FuseSource, SplitGraphPrintsEveryKernel) {
  const int n = 40;
  const FusedKernel wide = alternating_sum(n);
  const int kernels = wide.num_kernels();
  ASSERT_GE(kernels, 2);
  const std::string src = wide.source(std::vector<DType>(n, DType::float32));
  std::vector<std::size_t> headers;
  for (std::size_t at = src.find("// ---- kernel "); at != std::string::npos; at = src.find("// ---- kernel ", at + 1)) {
    headers.push_back(at);
  }
  ASSERT_EQ(static_cast<int>(headers.size()), kernels) << src;
  EXPECT_NE(src.find("// ---- kernel " + std::to_string(kernels) + " of " + std::to_string(kernels)), std::string::npos);
  EXPECT_NE(src.find("(the result)"), std::string::npos);
  EXPECT_EQ(src.find("(the result)"), src.rfind("(the result)")) << "only the last kernel writes the result";
  headers.push_back(src.size());
  for (std::size_t i = 0; i + 1 < headers.size(); ++i) {
    const std::string one = src.substr(headers[i], headers[i + 1] - headers[i]);
    EXPECT_NE(one.find("tessel_fused"), std::string::npos) << "kernel " << i + 1;
    expect_fused_source_compiles(one, "kernel " + std::to_string(i + 1));
  }
  testing::expect_error<ValueError>([&] { (void)wide.source({DType::float32}); }, {"fuse", "40 inputs", "1 dtypes"});
  EXPECT_EQ(relu_axpb_c().source({DType::float32, DType::float32, DType::float32}).find("// ---- kernel"), std::string::npos);
}

// Several outputs: one kernel writing every output, which NVRTC compiles, for each dtype.
TEST(FuseSource, SeveralOutputsPrintOneKernelAndCompile) {
  const FusedKernel k = five_outputs();
  EXPECT_EQ(k.num_kernels(), 1);
  for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64, DType::int32}) {
    const std::string src = k.source({d, d, d});
    EXPECT_EQ(src.find("// ---- kernel"), std::string::npos) << src;
    for (int j = 0; j < 5; ++j) EXPECT_NE(src.find("out" + std::to_string(j)), std::string::npos) << src;
    expect_fused_source_compiles(src, std::string("five outputs ") + dtype_name(d));
  }
  // A subexpression the outputs share is emitted once: as many sigmoid calls as in one output's kernel.
  auto count = [](const std::string& text, const std::string& what) {
    int c = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++c;
    return c;
  };
  const FusedKernel both = fuse([](const std::vector<Sym>& v) {
    const Sym s = sigmoid(v[0]);
    return std::vector<Sym>{s * v[1], s * (1.0 - s)};
  }, 2);
  const FusedKernel one = fuse([](const std::vector<Sym>& v) { return sigmoid(v[0]) * v[1]; }, 2);
  const std::string both_src = both.source({DType::float32, DType::float32});
  const std::string one_src = one.source({DType::float32, DType::float32});
  ASSERT_GT(count(one_src, "tessel_ops::sigmoid("), 0);
  EXPECT_EQ(count(both_src, "tessel_ops::sigmoid("), count(one_src, "tessel_ops::sigmoid(")) << both_src;
}

// Several outputs of a graph too large for one kernel: every kernel printed in launch order, each
// compiling; one of them writes the outputs.
TEST(FuseSource, SeveralOutputsOfASplitGraphPrintEveryKernel) {
  const int n = 40;
  const FusedKernel k = fuse([&](const std::vector<Sym>& v) {
    Sym sum = v[0];
    for (int i = 1; i < n; ++i) sum = sum + v[static_cast<std::size_t>(i)];
    return std::vector<Sym>{sum, sum * 2, v[0] - v[1]};
  }, n);
  const int kernels = k.num_kernels();
  ASSERT_GE(kernels, 2);
  const std::string src = k.source(std::vector<DType>(n, DType::float32));
  std::vector<std::size_t> headers;
  for (std::size_t at = src.find("// ---- kernel "); at != std::string::npos; at = src.find("// ---- kernel ", at + 1)) {
    headers.push_back(at);
  }
  ASSERT_EQ(static_cast<int>(headers.size()), kernels) << src;
  headers.push_back(src.size());
  for (std::size_t i = 0; i + 1 < headers.size(); ++i) {
    expect_fused_source_compiles(src.substr(headers[i], headers[i + 1] - headers[i]), "kernel " + std::to_string(i + 1));
  }
}

// source() does not go through (or fill) the plans: the same text before and after calls.
TEST(FuseCacheSource, SourceUnchangedByCalls) {
  const FusedKernel k = relu_axpb_c();
  const std::vector<DType> f32{DType::float32, DType::float32, DType::float32};
  const std::string before = k.source(f32);
  EXPECT_NE(before.find("tessel_fused"), std::string::npos);
  EXPECT_EQ(k.num_kernels(), 1);
  if (cuda_available()) {
    const Device gpu = testing::test_gpu();
    (void)k({ones({8}, DType::float32, gpu), ones({8}, DType::float32, gpu), ones({8}, DType::float32, gpu)});
  }
  EXPECT_EQ(k.source(f32), before);
  EXPECT_EQ(k.num_kernels(), 1);
}
#endif

}  // namespace
}  // namespace tessel
