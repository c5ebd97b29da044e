// FusedKernel's launch plans (kept per input-dtype vector on CUDA): one kernel object called again
// and again across shapes, layouts (contiguous, strided, broadcast, 0-d, empty), dtypes, a graph
// split in several kernels, a changed tuning and from several threads, against the unfused ops.
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
#include "tessel/ops/fuse.hpp"

namespace tessel {
namespace {

class FuseCache : public testing::BackendTest {};

struct FusionSwitch {
  bool saved = fusion_enabled();
  ~FusionSwitch() { set_fusion_enabled(saved); }
};

struct TuningGuard {
  jit::ElementwiseTuning saved = jit::elementwise_tuning();
  ~TuningGuard() { jit::set_elementwise_tuning(saved); }
};

FusedKernel relu_axpb_c() {
  return fuse([](const std::vector<Sym>& v) { return relu(v[0] * 1.75 + v[1]) * v[2]; }, 3);
}

Array random_array(const Shape& shape, DType dtype, std::mt19937_64& rng, Device device) {
  std::uniform_real_distribution<double> uni(-2, 2);
  std::vector<double> v(static_cast<std::size_t>(numel(shape)));
  for (double& x : v) x = uni(rng);
  return from_vector(v, shape, device).astype(dtype);
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
  const auto f = fused.astype(DType::float64).to(Device::cpu()).to_vector<double>();
  const auto u = unfused.astype(DType::float64).to(Device::cpu()).to_vector<double>();
  const double tol = fused.dtype() == DType::float16 ? 2e-3 : (fused.dtype() == DType::float32 ? 1e-6 : 1e-12);
  for (std::size_t i = 0; i < f.size(); ++i) {
    ASSERT_NEAR(f[i], u[i], tol * (1 + std::fabs(u[i]))) << what << " at " << i;
  }
}

TEST_P(FuseCache, RepeatedCallsAcrossShapesLayoutsAndDtypes) {
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
TEST_P(FuseCache, SplitGraphRepeatedCalls) {
  TESSEL_SKIP_UNAVAILABLE(device());
  FusionSwitch restore;
  TESSEL_SEEDED_RNG(rng);
  const int n = 40;
  const FusedKernel wide = fuse(
      [](const std::vector<Sym>& v) {
        Sym acc = v[0];
        for (std::size_t i = 1; i < v.size(); ++i) acc = (i % 2) ? acc + v[i] * 0.5 : acc - v[i];
        return acc;
      },
      n);
  ASSERT_GE(wide.num_kernels(), 2);
  for (const Shape& shape : {Shape{3, 5}, Shape{2, 3, 5}, Shape{5}}) {
    std::vector<Array> in;
    for (int i = 0; i < n; ++i) in.push_back(random_array(i % 3 == 0 ? Shape{5} : shape, DType::float32, rng, device()));
    expect_matches_unfused(wide, in, "split graph " + shape_str(shape));
  }
}

TEST_P(FuseCache, ChangedUnrollStillLaunchesCorrectly) {
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
TEST_P(FuseCache, ThreadsShareOneKernel) {
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
          const auto got = kernel({x_view, b, c}).astype(DType::float64).to(Device::cpu()).to_vector<double>();
          const auto xv = x_view.astype(DType::float64).to(Device::cpu()).to_vector<double>();
          const auto bv = b.astype(DType::float64).to(Device::cpu()).to_vector<double>();
          const double cv = c.astype(DType::float64).to(Device::cpu()).to_vector<double>()[0];
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

INSTANTIATE_TEST_SUITE_P(, FuseCache, ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

#ifdef TESSEL_HAVE_CUDA
// source() does not go through (or fill) the plans: the same text before and after calls.
TEST(FuseCacheSource, SourceUnchangedByCalls) {
  const FusedKernel k = relu_axpb_c();
  const std::vector<DType> f32{DType::float32, DType::float32, DType::float32};
  const std::string before = k.source(f32);
  EXPECT_NE(before.find("tessel_fused"), std::string::npos);
  EXPECT_EQ(k.num_kernels(), 1);
  if (cuda_available()) {
    const Device gpu = Device::cuda(0);
    (void)k({ones({8}, DType::float32, gpu), ones({8}, DType::float32, gpu), ones({8}, DType::float32, gpu)});
  }
  EXPECT_EQ(k.source(f32), before);
  EXPECT_EQ(k.num_kernels(), 1);
}
#endif

}  // namespace
}  // namespace tessel
