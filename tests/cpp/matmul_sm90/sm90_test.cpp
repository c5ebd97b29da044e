// tessel's own Hopper GEMM (src/backend/cuda/matmul_sm90.cu) against a float64 host reference.
// GPU cases skip without a CUDA device and on devices other than compute capability 9.0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessel/array/half.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"
#include "testing.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "tessel/ops/matmul_kernels.hpp"

namespace tessel {
namespace {

using internal::sm90::Epilogue;
using internal::sm90::GemmArgs;

#define SKIP_UNLESS_HOPPER()                                                                   \
  do {                                                                                         \
    TESSEL_SKIP_UNAVAILABLE(testing::test_gpu());                                                  \
    const DeviceProperties& props = device_properties(testing::test_gpu().index);                                      \
    if (props.cc_major != 9 || props.cc_minor != 0)                                            \
      GTEST_SKIP() << "matmul_sm90 needs compute capability 9.0, device 0 is " << props.name;  \
  } while (0)

std::uint16_t to_bits(double v, int dtype) { return dtype == 1 ? bfloat16(v).bits : float16(v).bits; }
double from_bits(std::uint16_t b, int dtype) {
  return dtype == 1 ? static_cast<double>(bfloat16::from_bits(b)) : static_cast<double>(float16::from_bits(b));
}

bool uses_bias(Epilogue e) {
  return e == Epilogue::bias || e == Epilogue::bias_relu || e == Epilogue::bias_gelu || e == Epilogue::bias_gelu_tanh;
}

double activation(double x, Epilogue e) {
  switch (e) {
    case Epilogue::relu:
    case Epilogue::bias_relu: return x > 0 ? x : 0;
    case Epilogue::gelu:
    case Epilogue::bias_gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Epilogue::gelu_tanh:
    case Epilogue::bias_gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return x;
  }
}

struct Problem {
  std::int64_t m, n, k, batch;
  int dtype;
  bool b_k_contiguous;
  Epilogue epilogue;
  float alpha;
  int config;
  int rows_checked = 0;  // 0: every row; else about this many evenly spaced rows
};

std::int64_t round8(std::int64_t x) { return (x + 7) / 8 * 8; }

// Device copies of random inputs (never zeros) and a NaN-poisoned output.
struct Operands {
  std::vector<std::uint16_t> a, b, bias;
  std::shared_ptr<Buffer> da, db, dd, dbias;
  GemmArgs args{};
};

Operands make_operands(const Problem& p, std::mt19937_64& rng, const Stream& stream) {
  Operands o;
  std::uniform_real_distribution<double> uniform(0.05, 1.0);
  std::bernoulli_distribution sign(0.5);
  auto fill = [&](std::vector<std::uint16_t>& v, std::int64_t count) {
    v.resize(count);
    for (auto& x : v) x = to_bits(sign(rng) ? uniform(rng) : -uniform(rng), p.dtype);
  };
  const std::int64_t lda = round8(p.k) + 8, ldb = p.b_k_contiguous ? round8(p.k) + 8 : round8(p.n) + 8;
  const std::int64_t ldd = round8(p.n);
  const std::int64_t sa = p.m * lda, sb = (p.b_k_contiguous ? p.n : p.k) * ldb, sd = p.m * ldd;
  fill(o.a, sa * p.batch);
  fill(o.b, sb * p.batch);
  fill(o.bias, p.n);
  const Device gpu = testing::test_gpu();
  auto upload = [&](const std::vector<std::uint16_t>& v) {
    auto buffer = Buffer::allocate(gpu, static_cast<std::int64_t>(v.size() * 2), stream);
    EXPECT_EQ(cudaMemcpyAsync(buffer->data(), v.data(), v.size() * 2, cudaMemcpyHostToDevice,
                              static_cast<cudaStream_t>(stream.handle())), cudaSuccess);
    return buffer;
  };
  o.da = upload(o.a);
  o.db = upload(o.b);
  o.dbias = upload(o.bias);
  o.dd = Buffer::allocate(gpu, sd * p.batch * 2, stream);
  EXPECT_EQ(cudaMemsetAsync(o.dd->data(), 0xFF, sd * p.batch * 2, static_cast<cudaStream_t>(stream.handle())),
            cudaSuccess);  // 0xFFFF is a NaN in both formats
  GemmArgs& g = o.args;
  g.m = p.m; g.n = p.n; g.k = p.k; g.batch = p.batch; g.dtype = p.dtype;
  g.a = o.da->data(); g.lda = lda; g.batch_stride_a = sa;
  g.b = o.db->data(); g.ldb = ldb; g.batch_stride_b = sb; g.b_k_contiguous = p.b_k_contiguous;
  g.d = o.dd->data(); g.ldd = ldd; g.batch_stride_d = sd;
  g.bias = uses_bias(p.epilogue) ? o.dbias->data() : nullptr;
  g.alpha = p.alpha;
  g.epilogue = p.epilogue;
  return o;
}

// Runs the problem and compares with a float64 reference: norm-wise relative error < 1e-2,
// every output element written (no poison left).
void check_problem(const Problem& p) {
  TESSEL_SEEDED_RNG(rng);
  SCOPED_TRACE(std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) + " batch " +
               std::to_string(p.batch) + (p.dtype ? " bf16" : " fp16") + (p.b_k_contiguous ? " B k-contiguous" : " B n-contiguous") +
               " epilogue " + std::to_string(static_cast<int>(p.epilogue)) + " config " +
               internal::sm90::config_name(p.config));
  const Stream stream = current_stream(testing::test_gpu());
  Operands o = make_operands(p, rng, stream);
  const GemmArgs& g = o.args;
  ASSERT_TRUE(internal::sm90::can_implement(g, p.config));
  internal::sm90::run(g, p.config, stream.handle());
  std::vector<std::uint16_t> d(static_cast<std::size_t>(g.batch_stride_d * p.batch));
  ASSERT_EQ(cudaMemcpyAsync(d.data(), g.d, d.size() * 2, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream.handle())),
            cudaSuccess);
  stream.synchronize();

  double err2 = 0, ref2 = 0;
  std::int64_t unwritten = 0;
  const std::int64_t step = p.rows_checked > 0 ? std::max<std::int64_t>(1, p.m / p.rows_checked) : 1;
  for (std::int64_t bt = 0; bt < p.batch; ++bt) {
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j)
        if (std::isnan(from_bits(d[bt * g.batch_stride_d + i * g.ldd + j], p.dtype))) ++unwritten;
    // B as float64, [j][kk], once per batch.
    std::vector<double> bt_k(static_cast<std::size_t>(p.n * p.k)), arow(static_cast<std::size_t>(p.k));
    for (std::int64_t j = 0; j < p.n; ++j)
      for (std::int64_t kk = 0; kk < p.k; ++kk)
        bt_k[j * p.k + kk] = from_bits(p.b_k_contiguous ? o.b[bt * g.batch_stride_b + j * g.ldb + kk]
                                                        : o.b[bt * g.batch_stride_b + kk * g.ldb + j], p.dtype);
    for (std::int64_t i = 0; i < p.m; i += step) {
      for (std::int64_t kk = 0; kk < p.k; ++kk) arow[kk] = from_bits(o.a[bt * g.batch_stride_a + i * g.lda + kk], p.dtype);
      for (std::int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (std::int64_t kk = 0; kk < p.k; ++kk) sum += arow[kk] * bt_k[j * p.k + kk];
        const double ref = activation(p.alpha * sum + (uses_bias(p.epilogue) ? from_bits(o.bias[j], p.dtype) : 0.0), p.epilogue);
        const double got = from_bits(d[bt * g.batch_stride_d + i * g.ldd + j], p.dtype);
        err2 += (got - ref) * (got - ref);
        ref2 += ref * ref;
      }
    }
  }
  EXPECT_EQ(unwritten, 0) << "output elements left unwritten (NaN poison)";
  ASSERT_GT(ref2, 0);
  const double rel = std::sqrt(err2 / ref2);
  EXPECT_LT(rel, 1e-2);
  EXPECT_TRUE(std::isfinite(rel));
}

TEST(MatmulSm90, ConfigsAreNamed) {
  ASSERT_GE(internal::sm90::num_configs(), 1);
  for (int c = 0; c < internal::sm90::num_configs(); ++c) EXPECT_NE(std::string(internal::sm90::config_name(c)), "invalid");
  EXPECT_EQ(std::string(internal::sm90::config_name(-1)), "invalid");
}

// Runs everywhere: without a Hopper GPU (or without sm_90a code) nothing is accepted, and the
// argument checks reject bad problems before the device is even looked at.
TEST(MatmulSm90, CanImplementChecksArgumentsAndDevice) {
  alignas(16) static std::uint16_t storage[3][128 * 128];
  GemmArgs g{};
  g.m = 128; g.n = 128; g.k = 64; g.batch = 1; g.dtype = 1;
  g.a = storage[0]; g.lda = 64; g.b = storage[1]; g.ldb = 64; g.b_k_contiguous = true;
  g.d = storage[2]; g.ldd = 128; g.alpha = 1.0f; g.epilogue = Epilogue::none;
  const bool hopper = cuda_available() && device_properties(testing::test_gpu().index).cc_major == 9 && device_properties(testing::test_gpu().index).cc_minor == 0;
  if (!hopper) {
    EXPECT_FALSE(internal::sm90::can_implement(g, 0));
  }
  GemmArgs bad = g;
  bad.a = reinterpret_cast<const char*>(storage[0]) + 8;
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  bad = g;
  bad.k = 0;
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  bad = g;
  bad.epilogue = Epilogue::bias_gelu;  // no bias pointer
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  bad = g;
  bad.a = reinterpret_cast<const char*>(storage[0]) + 8;
  testing::expect_error<ValueError>([&] { internal::sm90::run(bad, 0, nullptr); }, {"matmul_sm90", "16-byte aligned"});
}

TEST(MatmulSm90, SmallTileEveryConfigAndDtype) {
  SKIP_UNLESS_HOPPER();
  for (int c = 0; c < internal::sm90::num_configs(); ++c)
    for (int dtype : {0, 1})
      for (bool bk : {true, false}) check_problem({128, 128, 64, 1, dtype, bk, Epilogue::none, 1.0f, c});
}

TEST(MatmulSm90, OddSizesBothLayouts) {
  SKIP_UNLESS_HOPPER();
  for (int c = 0; c < internal::sm90::num_configs(); ++c)
    for (int dtype : {0, 1})
      for (bool bk : {true, false}) check_problem({1000, 520, 328, 1, dtype, bk, Epilogue::bias_relu, 0.5f, c});
  // N, K and M not multiples of 8 (the leading dimensions are), M = K = 1.
  check_problem({77, 1001, 203, 1, 1, true, Epilogue::bias_gelu, 1.0f, 0});
  check_problem({1, 8, 1, 1, 1, true, Epilogue::bias, 1.0f, 1});
  check_problem({5, 24, 40, 1, 0, false, Epilogue::relu, 1.0f, 2});
}

TEST(MatmulSm90, Batched) {
  SKIP_UNLESS_HOPPER();
  for (int c = 0; c < internal::sm90::num_configs(); ++c)
    for (bool bk : {true, false}) {
      check_problem({300, 264, 136, 3, 1, bk, Epilogue::bias, 1.0f, c});
    }
}

TEST(MatmulSm90, BroadcastB) {
  SKIP_UNLESS_HOPPER();
  TESSEL_SEEDED_RNG(rng);
  // batch_stride_b = 0: every batch uses the same B; compare batch 1 with batch 0's layout.
  const Problem p{256, 128, 96, 2, 1, true, Epilogue::none, 1.0f, 0};
  const Stream stream = current_stream(testing::test_gpu());
  Operands o = make_operands(p, rng, stream);
  o.args.batch_stride_b = 0;
  ASSERT_TRUE(internal::sm90::can_implement(o.args, 0));
  internal::sm90::run(o.args, 0, stream.handle());
  std::vector<std::uint16_t> d(static_cast<std::size_t>(o.args.batch_stride_d * 2));
  ASSERT_EQ(cudaMemcpyAsync(d.data(), o.args.d, d.size() * 2, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream.handle())),
            cudaSuccess);
  stream.synchronize();
  double err2 = 0, ref2 = 0;
  for (std::int64_t bt = 0; bt < 2; ++bt)
    for (std::int64_t i = 0; i < p.m; i += 7)
      for (std::int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (std::int64_t kk = 0; kk < p.k; ++kk)
          sum += from_bits(o.a[bt * o.args.batch_stride_a + i * o.args.lda + kk], 1) * from_bits(o.b[j * o.args.ldb + kk], 1);
        const double got = from_bits(d[bt * o.args.batch_stride_d + i * o.args.ldd + j], 1);
        err2 += (got - sum) * (got - sum);
        ref2 += sum * sum;
      }
  EXPECT_LT(std::sqrt(err2 / ref2), 1e-2);
}

TEST(MatmulSm90, EveryEpilogue) {
  SKIP_UNLESS_HOPPER();
  for (int e = 0; e <= static_cast<int>(Epilogue::gelu_tanh); ++e)
    for (bool bk : {true, false})
      check_problem({300, 264, 136, 2, e % 2, bk, static_cast<Epilogue>(e), 0.75f, e % internal::sm90::num_configs()});
}

TEST(MatmulSm90, LargeSpotRows) {
  SKIP_UNLESS_HOPPER();
  check_problem({8192, 8192, 512, 1, 1, true, Epilogue::bias_gelu_tanh, 1.0f, 0, 24});
  check_problem({8192, 8192, 512, 1, 0, false, Epilogue::bias_relu, 1.0f, 1, 24});
  check_problem({8192, 8192, 512, 1, 1, false, Epilogue::bias_gelu, 1.0f, 3, 24});
}

// More tiles than CTAs, so each persistent CTA (and each ping-pong consumer) runs several tiles
// and the stage ring wraps across tiles; every row checked.
TEST(MatmulSm90, ManyTilesPerCta) {
  SKIP_UNLESS_HOPPER();
  for (int c = 0; c < internal::sm90::num_configs(); ++c) {
    check_problem({2000, 1736, 264, 1, 1, c % 2 == 0, Epilogue::bias_relu, 1.0f, c});
  }
}

TEST(MatmulSm90, RejectsWhatItCannotRun) {
  SKIP_UNLESS_HOPPER();
  TESSEL_SEEDED_RNG(rng);
  const Stream stream = current_stream(testing::test_gpu());
  Operands o = make_operands({128, 128, 64, 1, 1, true, Epilogue::bias_relu, 1.0f, 0}, rng, stream);
  ASSERT_TRUE(internal::sm90::can_implement(o.args, 0));
  GemmArgs bad = o.args;
  bad.a = static_cast<const char*>(o.args.a) + 8;  // 8-byte aligned only
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  bad = o.args;
  bad.d = static_cast<char*>(o.args.d) + 1;  // D is written with plain stores: 2-byte elements suffice
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  GemmArgs odd_d = o.args;
  odd_d.ldd = 129;  // odd row stride: element stores instead of pairs
  EXPECT_TRUE(internal::sm90::can_implement(odd_d, 0));
  bad = o.args;
  bad.lda = 68;  // not a multiple of 8 elements (TMA strides are multiples of 16 bytes)
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  bad = o.args;
  bad.bias = nullptr;  // bias epilogue without a bias
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  bad = o.args;
  bad.dtype = 2;
  EXPECT_FALSE(internal::sm90::can_implement(bad, 0));
  EXPECT_FALSE(internal::sm90::can_implement(o.args, internal::sm90::num_configs()));
  bad = o.args;
  bad.a = static_cast<const char*>(o.args.a) + 8;
  testing::expect_error<ValueError>([&] { internal::sm90::run(bad, 0, stream.handle()); }, {"matmul_sm90", "16-byte aligned"});
}

}  // namespace
}  // namespace tessel

#else
TEST(MatmulSm90, RequiresCuda) { GTEST_SKIP() << "tessel was built without CUDA"; }
#endif
