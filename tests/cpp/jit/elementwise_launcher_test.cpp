// jit::ElementwiseLauncher and the per-binding launchers of ElementwiseKernel: the layout / index
// width choice (plan_elementwise, CPU), argument errors (CPU), launches on the CPU (host C++), and
// on the GPU repeated launches of
// one launcher across layouts, strides, sizes, scalar bindings and tunings, compared to a host
// reference, with the number of kernels the launcher holds checked (each layout compiled once).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "testing.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/jit/host_compiler.hpp"
#include "tessel/jit/user_kernels.hpp"
#include "tessel/tessel.hpp"

namespace tessel::jit {
namespace {

using Strides64 = std::vector<std::int64_t>;

ElementwisePlan plan_of(const std::vector<std::int64_t>& shape, const std::vector<Strides64>& strides) {
  std::vector<const Strides64*> ptrs;
  for (const auto& s : strides) ptrs.push_back(&s);
  return plan_elementwise(shape, ptrs);
}

TEST(JitElementwisePlan, ContiguousStridedAndBroadcast) {
  // Every operand C-contiguous (size-one axes may have any stride): contiguous, 32-bit.
  ElementwisePlan p = plan_of({4, 1, 6}, {{6, 99, 1}, {6, 6, 1}});
  EXPECT_EQ(p.layout, ElementwiseLayout::contiguous);
  EXPECT_EQ(p.rank, 1);
  EXPECT_TRUE(p.index32);
  // A transposed operand: strided, nothing to collapse.
  p = plan_of({4, 6}, {{6, 1}, {1, 4}});
  EXPECT_EQ(p.layout, ElementwiseLayout::strided);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.dims, (Strides64{4, 6}));
  EXPECT_EQ(p.strides[1], (Strides64{1, 4}));
  EXPECT_TRUE(p.index32);
  // Broadcast (stride 0) on the leading axis of a 3-d launch whose two inner axes every operand
  // steps through as one: collapsed to rank 2.
  p = plan_of({3, 4, 5}, {{20, 5, 1}, {0, 5, 1}});
  EXPECT_EQ(p.layout, ElementwiseLayout::strided);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.dims, (Strides64{3, 20}));
  EXPECT_EQ(p.strides[0], (Strides64{20, 1}));
  EXPECT_EQ(p.strides[1], (Strides64{0, 1}));
  // Negative strides and size-one axes dropped.
  p = plan_of({1, 5}, {{7, -1}});
  EXPECT_EQ(p.layout, ElementwiseLayout::strided);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.strides[0], (Strides64{-1}));
  // A single element, 0-d launch: contiguous.
  EXPECT_EQ(plan_of({}, {{}, {}}).layout, ElementwiseLayout::contiguous);
  // A single element viewed with odd strides: one dimension of extent 1.
  p = plan_of({1, 1}, {{5, 3}});
  EXPECT_EQ(p.layout, ElementwiseLayout::contiguous);
}

TEST(JitElementwisePlan, Index32LimitOnCountAndReach) {
  const std::int64_t limit = kElementwiseIndex32Limit;
  EXPECT_TRUE(plan_of({limit}, {{1}}).index32);
  EXPECT_FALSE(plan_of({limit + 1}, {{1}}).index32);
  EXPECT_FALSE(plan_of({2, limit}, {{limit, 1}}).index32);
  // Strided: few elements but an operand reaching past the limit needs 64-bit offsets.
  ElementwisePlan p = plan_of({3}, {{1}, {limit / 2 + 1}});
  EXPECT_EQ(p.layout, ElementwiseLayout::strided);
  EXPECT_FALSE(p.index32);
  p = plan_of({3}, {{1}, {limit / 2}});  // reach exactly the limit
  EXPECT_TRUE(p.index32);
  p = plan_of({3}, {{1}, {-(limit / 2) - 1}});  // negative strides count by magnitude
  EXPECT_FALSE(p.index32);
  // A broadcast axis reaches nothing.
  p = plan_of({2, 3}, {{3, 1}, {0, limit}});
  EXPECT_EQ(p.layout, ElementwiseLayout::strided);
  EXPECT_FALSE(p.index32);  // 2 * limit on the second axis
  p = plan_of({limit / 4, 2}, {{2, 1}, {1, 0}});
  EXPECT_TRUE(p.index32);
}

ElementwiseSpec fma_spec() {
  ElementwiseSpec spec;
  spec.name = "launcher_fma";
  spec.operands = {{"x", DType::float32, false, false}, {"y", DType::float32, false, true}, {"z", DType::float32, true, false}};
  spec.body = "z = x * y + 1.0f;";
  return spec;
}

TEST(JitElementwiseLauncher, ArgumentErrorsAsBefore) {
  const ElementwiseLauncher launcher(fma_spec());
  EXPECT_EQ(launcher.spec().name, "launcher_fma");
  float data[4] = {1, 2, 3, 4};
  const Stream stream = current_stream(Device::cpu());
  testing::expect_error<ValueError>([&] { launcher.launch({4}, {ElementwiseArg::array(data, {1})}, Device::cpu(), stream); },
                                    {"elementwise kernel 'launcher_fma'", "3 operands but 1 arguments"});
  const std::vector<ElementwiseArg> scalar_for_array{ElementwiseArg::value(2.0f), ElementwiseArg::value(2.0f),
                                                     ElementwiseArg::array(data, {1})};
  testing::expect_error<ValueError>([&] { launcher.launch({4}, scalar_for_array, Device::cpu(), stream); },
                                    {"operand 'x' is declared an array but given a scalar"});
  const std::vector<ElementwiseArg> bad_rank{ElementwiseArg::array(data, {1, 1}), ElementwiseArg::value(2.0f),
                                             ElementwiseArg::array(data, {1})};
  testing::expect_error<ShapeError>([&] { launcher.launch({4}, bad_rank, Device::cpu(), stream); },
                                    {"operand 'x' has 2 strides for a rank-1 launch"});
  const std::vector<ElementwiseArg> ok{ElementwiseArg::array(data, {1}), ElementwiseArg::value(2.0f),
                                       ElementwiseArg::array(data, {1})};
  testing::expect_error<ShapeError>([&] { launcher.launch({-1}, ok, Device::cpu(), stream); }, {"negative dimension"});
  EXPECT_EQ(launcher.num_cached_kernels(), 0u);
}

// On the CPU the launcher runs the spec as host C++ (host_compiler.hpp), with the same parameters:
// one host kernel per layout and rank, each compiled once.
TEST(JitElementwiseLauncher, RunsOnTheCpuThroughTheHostCompiler) {
  if (!host_compiler_available()) GTEST_SKIP() << "no host C++ compiler";
  const ElementwiseLauncher launcher(fma_spec());
  const Stream stream = current_stream(Device::cpu());
  std::vector<float> x(12), z(12, -1.0f);
  for (int i = 0; i < 12; ++i) x[static_cast<std::size_t>(i)] = 0.5f * static_cast<float>(i) - 2.0f;
  const std::vector<ElementwiseArg> contiguous{ElementwiseArg::array(x.data(), {1}), ElementwiseArg::value(3.0f),
                                               ElementwiseArg::array(z.data(), {1})};
  launcher.launch({12}, contiguous, Device::cpu(), stream);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(z[i], x[i] * 3.0f + 1.0f) << i;
  // x reversed and read as 3 x 4 column-major into a 3 x 4 output: strided, rank 2.
  std::fill(z.begin(), z.end(), -1.0f);
  const std::vector<ElementwiseArg> strided{ElementwiseArg::array(x.data() + 11, {-1, -3}), ElementwiseArg::value(2.0f),
                                            ElementwiseArg::array(z.data(), {4, 1})};
  launcher.launch({3, 4}, strided, Device::cpu(), stream);
  for (std::size_t r = 0; r < 3; ++r) {
    for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(z[r * 4 + c], x[11 - r - 3 * c] * 2.0f + 1.0f) << r << "," << c;
  }
  launcher.launch({12}, contiguous, Device::cpu(), stream);
  EXPECT_EQ(launcher.num_cached_kernels(), 2u);
}

#if defined(TESSEL_HAVE_CUDA)
#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason()

// Restores the process-wide tuning whatever a test does.
struct TuningGuard {
  ElementwiseTuning saved = elementwise_tuning();
  ~TuningGuard() { set_elementwise_tuning(saved); }
};

Array random_f32(const Shape& shape, std::mt19937_64& rng, Device device) {
  std::uniform_real_distribution<float> uni(-2, 2);
  std::vector<float> v(static_cast<std::size_t>(numel(shape)));
  for (float& x : v) x = uni(rng);
  return from_vector(v, shape, device);
}

// z = x * 0.5 + 1 over `shape` (x broadcast to it, y the scalar 0.5, z a fresh contiguous array poisoned with
// NaN), through the launcher, against float64 on the host.
void check_fma(const ElementwiseLauncher& launcher, const Array& x, const Shape& shape, const std::string& what) {
  const Device gpu = testing::test_gpu();
  const Stream stream = current_stream(gpu);
  Array z = full(shape, NAN, DType::float32, gpu);
  const Array xb = x.broadcast_to(shape);
  launcher.launch(shape, {ElementwiseArg::array(xb.data(), xb.strides()), ElementwiseArg::value(0.5f),
                          ElementwiseArg::array(z.data(), z.strides())},
                  gpu, stream);
  const auto xv = xb.contiguous().to(Device::cpu()).to_vector<float>();
  const auto zv = z.to(Device::cpu()).to_vector<float>();
  ASSERT_EQ(xv.size(), zv.size()) << what;
  for (std::size_t i = 0; i < zv.size(); ++i) {
    const double want = double(xv[i]) * 0.5 + 1.0;
    ASSERT_NEAR(zv[i], want, 1e-6 * (1 + std::fabs(want))) << what << " at " << i;
  }
}

TEST(JitElementwiseLauncherGpu, RepeatedLaunchesCompileEachLayoutOnce) {
  REQUIRE_GPU();
  TESSEL_SEEDED_RNG(rng);
  TuningGuard guard;
  const Device gpu = testing::test_gpu();
  const ElementwiseLauncher launcher(fma_spec());
  for (int round = 0; round < 3; ++round) {
    check_fma(launcher, random_f32({1000}, rng, gpu), {1000}, "contiguous");
    check_fma(launcher, random_f32({7}, rng, gpu), {7}, "contiguous, other size");
    check_fma(launcher, random_f32({40, 30}, rng, gpu).permute({1, 0}), {30, 40}, "transposed (rank 2)");
    check_fma(launcher, random_f32({33}, rng, gpu).slice(0, Slice(none, none, -1)), {33}, "negative stride");
    check_fma(launcher, random_f32({1, 6}, rng, gpu), {5, 6}, "broadcast (rank 2)");
  }
  // contiguous 32-bit; strided rank 2; strided rank 1 (negative stride); all 32-bit.
  EXPECT_EQ(launcher.num_cached_kernels(), 3u);
  // A new unroll compiles the contiguous layout again, and launches correctly.
  ElementwiseTuning t = elementwise_tuning();
  t.unroll = t.unroll == 4 ? 1 : 4;
  set_elementwise_tuning(t);
  check_fma(launcher, random_f32({4099}, rng, gpu), {4099}, "contiguous, new unroll");
  check_fma(launcher, random_f32({40, 30}, rng, gpu).permute({1, 0}), {30, 40}, "strided, new unroll");
  EXPECT_EQ(launcher.num_cached_kernels(), 4u);  // the strided kernel does not depend on the unroll
  // Zero-size launches compile nothing.
  check_fma(launcher, random_f32({0}, rng, gpu), {0}, "empty");
  EXPECT_EQ(launcher.num_cached_kernels(), 4u);
}

// A 0-d input broadcast to every place (all strides 0; the gradient of a sum in autograd) keeps the
// contiguous layout: one more kernel, the uniform variant, whose values match the host; with a
// non-contiguous operand beside it the strided layout reads it through its 0 strides.
TEST(JitElementwiseLauncherGpu, ZeroStrideInputKeepsContiguousLayout) {
  REQUIRE_GPU();
  TESSEL_SEEDED_RNG(rng);
  const Device gpu = testing::test_gpu();
  const Stream stream = current_stream(gpu);
  ElementwiseSpec spec;
  spec.name = "launcher_uniform";
  spec.operands = {{"x", DType::float32, false, false}, {"y", DType::float32, false, false}, {"z", DType::float32, true, false}};
  spec.body = "z = x * y + 1.0f;";
  const ElementwiseLauncher k(spec);
  auto run = [&](const Array& x, const Array& y, const Shape& shape, const std::string& what) {
    Array z = full(shape, NAN, DType::float32, gpu);
    const Array xb = x.broadcast_to(shape), yb = y.broadcast_to(shape);
    k.launch(shape,
             {ElementwiseArg::array(xb.data(), xb.strides()), ElementwiseArg::array(yb.data(), yb.strides()),
              ElementwiseArg::array(z.data(), z.strides())},
             gpu, stream);
    const auto xv = xb.contiguous().to(Device::cpu()).to_vector<float>();
    const auto yv = yb.contiguous().to(Device::cpu()).to_vector<float>();
    const auto zv = z.to(Device::cpu()).to_vector<float>();
    for (std::size_t i = 0; i < zv.size(); ++i) {
      const double want = double(xv[i]) * yv[i] + 1.0;
      ASSERT_NEAR(zv[i], want, 1e-6 * (1 + std::fabs(want))) << what << " at " << i;
    }
  };
  const Array y0 = random_f32({}, rng, gpu);
  run(random_f32({4099}, rng, gpu), random_f32({4099}, rng, gpu), {4099}, "contiguous");
  run(random_f32({4099}, rng, gpu), y0, {4099}, "0-d y");
  run(random_f32({3, 5, 7}, rng, gpu), random_f32({1, 1, 1}, rng, gpu), {3, 5, 7}, "size-one y, rank 3");
  run(random_f32({8}, rng, gpu).slice(0, Slice(1, none)), y0, {7}, "unaligned x, 0-d y");
  run(random_f32({20, 12}, rng, gpu).permute({1, 0}), y0, {12, 20}, "transposed x, 0-d y: strided");
  // The element-wise contiguous kernel, the uniform one (aligned or not: one kernel), the strided one.
  EXPECT_EQ(k.num_cached_kernels(), 3u);
}

// x * 3 + y over int8: x read through a view of a 2 GiB buffer with a 2^20 stride (few elements,
// offsets past 2^31: the 64-bit strided kernel), then with stride 3 (the 32-bit one), then the
// wide one again, all through one ElementwiseKernel.
TEST(JitElementwiseLauncherGpu, ReachPast2To31NeedsWideIndex) {
  REQUIRE_GPU();
  TESSEL_SEEDED_RNG(rng);
  const Device gpu = testing::test_gpu();
  const std::int64_t big = (std::int64_t{1} << 31) + 4096;
  Array base;
  try {
    base = zeros({big}, DType::int8, gpu);
  } catch (const OutOfMemory& e) {
    GTEST_SKIP() << "needs 2 GiB on " << testing::test_gpu().str() << ": " << e.what();
  }
  ElementwiseKernel k("int8 x, int8 y", "int32 z", "z = int(x) * 3 + int(y)", "launcher_reach");
  const Stream stream = current_stream(gpu);
  std::uniform_int_distribution<int> small(-100, 100);
  for (std::int64_t step : {std::int64_t{1} << 20, std::int64_t{3}, std::int64_t{1} << 20}) {
    const Array x = base.slice(0, Slice(0, step == 3 ? 3 * 5000 : big, step));
    const std::int64_t n = x.size();
    std::vector<std::int8_t> xv(static_cast<std::size_t>(n)), yv(static_cast<std::size_t>(n));
    for (auto& v : xv) v = static_cast<std::int8_t>(small(rng));
    for (auto& v : yv) v = static_cast<std::int8_t>(small(rng));
    copyto(x, from_vector(xv, {n}, gpu));
    const Array y = from_vector(yv, {n}, gpu);
    Array z = full({n}, -7, DType::int32, gpu);
    k.launch({n},
             {ElementwiseArg::array(x.data(), x.strides()), ElementwiseArg::array(y.data(), y.strides()),
              ElementwiseArg::array(z.data(), z.strides())},
             gpu, stream);
    const auto zv = z.to(Device::cpu()).to_vector<std::int32_t>();
    for (std::size_t i = 0; i < zv.size(); ++i) {
      ASSERT_EQ(zv[i], int(xv[i]) * 3 + int(yv[i])) << "step " << step << " at " << i;
    }
  }
  EXPECT_GT((big - 1) / (std::int64_t{1} << 20) * (std::int64_t{1} << 20), kElementwiseIndex32Limit);  // the reach
}

// ElementwiseKernel: array and scalar bindings of one operand, contiguous / strided / broadcast,
// sizes and a tuning change, launch after launch, against the host.
TEST(JitElementwiseLauncherGpu, UserKernelRepeatedLaunches) {
  REQUIRE_GPU();
  TESSEL_SEEDED_RNG(rng);
  TuningGuard guard;
  const Device gpu = testing::test_gpu();
  const Stream stream = current_stream(gpu);
  ElementwiseKernel k("float32 x, float32 y", "float32 z", "z = x * y + 1", "launcher_user");
  const ElementwiseKernel copy = k;  // copies share the launchers
  auto run = [&](const ElementwiseKernel& kernel, const Array& x, const Array* y, float y_value, const Shape& shape,
                 const std::string& what) {
    Array z = full(shape, NAN, DType::float32, gpu);
    const Array xb = x.broadcast_to(shape);
    std::vector<ElementwiseArg> args{ElementwiseArg::array(xb.data(), xb.strides())};
    Array yb;
    if (y) {
      yb = y->broadcast_to(shape);
      args.push_back(ElementwiseArg::array(yb.data(), yb.strides()));
    } else {
      args.push_back(ElementwiseArg::value(y_value));
    }
    args.push_back(ElementwiseArg::array(z.data(), z.strides()));
    kernel.launch(shape, args, gpu, stream);
    const auto xv = xb.contiguous().to(Device::cpu()).to_vector<float>();
    const auto yv = y ? yb.contiguous().to(Device::cpu()).to_vector<float>() : std::vector<float>(xv.size(), y_value);
    const auto zv = z.to(Device::cpu()).to_vector<float>();
    for (std::size_t i = 0; i < zv.size(); ++i) {
      const double want = double(xv[i]) * yv[i] + 1.0;
      ASSERT_NEAR(zv[i], want, 1e-6 * (1 + std::fabs(want))) << what << " at " << i;
    }
  };
  for (int round = 0; round < 2; ++round) {
    const ElementwiseKernel& kernel = round == 0 ? k : copy;
    Array x = random_f32({513}, rng, gpu), y = random_f32({513}, rng, gpu);
    run(kernel, x, &y, 0, {513}, "contiguous arrays");
    run(kernel, x, nullptr, 1.25f, {513}, "scalar y");
    run(kernel, random_f32({9}, rng, gpu), nullptr, -3.0f, {9}, "scalar y, other size");
    Array xt = random_f32({20, 12}, rng, gpu).permute({1, 0});
    Array yr = random_f32({20}, rng, gpu);
    run(kernel, xt, &yr, 0, {12, 20}, "transposed and broadcast");
    run(kernel, xt, nullptr, 0.5f, {12, 20}, "transposed, scalar y");
    Array y0 = random_f32({}, rng, gpu);
    run(kernel, random_f32({3, 1, 4}, rng, gpu), &y0, 0, {3, 5, 4}, "broadcast x and 0-d y");
    ElementwiseTuning t = elementwise_tuning();
    t.unroll = round == 0 ? 1 : 8;
    t.block = round == 0 ? 64 : 512;
    set_elementwise_tuning(t);
    run(kernel, random_f32({10001}, rng, gpu), nullptr, 2.0f, {10001}, "new tuning");
    run(kernel, x, &y, 0, {513}, "contiguous arrays, new tuning");
  }
}
#endif

}  // namespace
}  // namespace tessel::jit
