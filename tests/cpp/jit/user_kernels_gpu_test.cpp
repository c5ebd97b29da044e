// RawKernel / ElementwiseKernel on the GPU (skipped without one), and RawKernel's CPU-backend error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "testing.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/jit/kernel_cache.hpp"
#include "tessel/jit/user_kernels.hpp"

namespace tessel::jit {
namespace {

// |fma(a, b, c) - (a * b + c)| is at most one rounding of the product and one of the sum:
// bound it by the operands' magnitudes, which stays meaningful under cancellation.
template <class T>
T fma_tolerance(T product, T addend) {
  return 2 * std::numeric_limits<T>::epsilon() * (std::abs(product) + std::abs(addend));
}


#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason()

// RawKernel is CUDA-only; ElementwiseKernel runs on the CPU backend (host_compiler_test.cpp).
TEST(JitUserKernels, CpuBackendRawKernelRaisesNeedsCuda) {
  RawKernel raw("extern \"C\" __global__ void k() {}", "k");
  if (!cuda_available()) {
    try {
      raw.launch(1, 1, {});
      FAIL() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("RawKernel 'k': needs a CUDA device"), std::string::npos) << e.what();
    }
  }
}

#if defined(TESSEL_HAVE_CUDA)
template <class T>
struct DeviceVector {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceVector(std::size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<std::size_t>(1, n) * sizeof(T)), cudaSuccess);
  }
  ~DeviceVector() { cudaFree(ptr); }
  void upload(const std::vector<T>& v) { ASSERT_EQ(cudaMemcpy(ptr, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  void poison() { ASSERT_EQ(cudaMemset(ptr, 0xFF, n * sizeof(T)), cudaSuccess); }  // NaN for floats
  std::vector<T> download() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-10.f, 10.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(JitUserKernelsGpu, RawKernelAxpy) {
  REQUIRE_GPU();
  const std::size_t n = 1000003;
  RawKernel k(R"(
extern "C" __global__ void axpy(float a, const float* x, const float* y, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
})",
              "axpy");
  const auto x = random_floats(n, 1), y = random_floats(n, 2);
  DeviceVector<float> dx(n), dy(n), dout(n);
  dx.upload(x);
  dy.upload(y);
  dout.poison();
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  k.launch(blocks, 256, {2.5f, dx.ptr, dy.ptr, dout.ptr, static_cast<long long>(n)});
  const auto out = dout.download();
  // The device may fuse the multiply-add: allow the rounding of the separate steps.
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_NEAR(out[i], 2.5f * x[i] + y[i], fma_tolerance<float>(2.5f * x[i], y[i])) << i;
}

// After the first launch, a RawKernel (and its copies) launch from the kernel loaded for the
// device: the global cache, which hashes the source per lookup, is not consulted again.
TEST(JitUserKernelsGpu, RawKernelRelaunchSkipsTheCacheLookup) {
  REQUIRE_GPU();
  const std::size_t n = 4099;
  RawKernel k(R"(
extern "C" __global__ void add_one(const int* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + 1;
})",
              "add_one");
  std::mt19937 rng(11);
  std::vector<int> x(n);
  for (int& v : x) v = static_cast<int>(rng() % 100000);
  DeviceVector<int> dx(n), dout(n);
  dx.upload(x);
  const unsigned blocks = static_cast<unsigned>((n + 127) / 128);
  k.launch(blocks, 128, {dx.ptr, dout.ptr, static_cast<int>(n)});  // compiles or loads
  // Launches take the driver's cuLaunchKernel (the cheaper path) once the kernel is loaded.
  EXPECT_TRUE(k.kernel(testing::test_gpu()).launches_through_driver());
  const CacheStats before = KernelCache::global().stats();
  const RawKernel copy = k;
  for (const RawKernel* kernel : std::vector<const RawKernel*>{&k, &copy, &k}) {
    dout.poison();
    kernel->launch(blocks, 128, {dx.ptr, dout.ptr, static_cast<int>(n)});
    const auto out = dout.download();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + 1) << i;
  }
  const CacheStats after = KernelCache::global().stats();
  EXPECT_EQ(after.memory_hits, before.memory_hits);
  EXPECT_EQ(after.disk_hits, before.disk_hits);
  EXPECT_EQ(after.misses, before.misses);
}

TEST(JitUserKernelsGpu, RawKernelTemplateSharedMemAndStream) {
  REQUIRE_GPU();
  RawKernel k(R"(
template <class T> __global__ void reverse_block(const T* in, T* out) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  s[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
})",
              "reverse_block<double>");
  const std::size_t n = 128 * 64;
  std::vector<double> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<double>(i) * 0.5;
  DeviceVector<double> din(n), dout(n);
  din.upload(in);
  dout.poison();
  const Stream s = Stream::create(testing::test_gpu());
  k.launch(64, 128, {din.ptr, dout.ptr}, 128 * sizeof(double), s);
  s.synchronize();
  const auto out = dout.download();
  for (std::size_t b = 0; b < 64; ++b)
    for (std::size_t t = 0; t < 128; ++t) ASSERT_EQ(out[b * 128 + t], in[b * 128 + 127 - t]);
}

TEST(JitUserKernelsGpu, ElementwiseContiguousAlignedAndUnaligned) {
  REQUIRE_GPU();
  ElementwiseKernel k("float32 x, float32 y", "float32 z", "z = x * y + 1", "mul_add_test");
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1 << 20}, std::size_t{1000001}}) {
    for (std::size_t shift : {std::size_t{0}, std::size_t{1}}) {  // shift 1: not 16-byte aligned
      const auto x = random_floats(n + 1, 3), y = random_floats(n + 1, 4);
      DeviceVector<float> dx(n + 1), dy(n + 1), dz(n + 1);
      dx.upload(x);
      dy.upload(y);
      dz.poison();
      const std::int64_t len = static_cast<std::int64_t>(n);
      k.launch({len}, {ElementwiseArg::array(dx.ptr + shift, {1}), ElementwiseArg::array(dy.ptr + shift, {1}),
                       ElementwiseArg::array(dz.ptr + shift, {1})},
               testing::test_gpu());
      const auto z = dz.download();
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_NEAR(z[i + shift], x[i + shift] * y[i + shift] + 1, fma_tolerance<float>(x[i + shift] * y[i + shift], 1.0f))
            << n << " " << i;
    }
  }
}

TEST(JitUserKernelsGpu, ElementwiseStridedBroadcastNegativeAndScalar) {
  REQUIRE_GPU();
  // z[i, j] = x[i, rows-1-j... ] : x is a transposed, reversed view; y broadcast along rows; a scalar.
  ElementwiseKernel k("float64 x, float64 y, float64 a", "float64 z", "z = a * x - y", "strided_test");
  const std::int64_t rows = 37, cols = 53;
  std::vector<double> x(static_cast<std::size_t>(rows * cols)), y(static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<double>(i) * 0.25;
  DeviceVector<double> dx(x.size()), dy(y.size()), dz(x.size());
  dx.upload(x);
  dy.upload(y);
  dz.poison();
  // Storage of x is (cols, rows) row-major; view it as (rows, cols) transposed with columns reversed:
  // view[i][j] = storage[(cols-1-j) * rows + i].
  double* x0 = dx.ptr + (cols - 1) * rows;
  k.launch({rows, cols},
           {ElementwiseArg::array(x0, {1, -rows}), ElementwiseArg::array(dy.ptr, {0, 1}), ElementwiseArg::value(3.0),
            ElementwiseArg::array(dz.ptr, {cols, 1})},
           testing::test_gpu());
  const auto z = dz.download();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double expect = 3.0 * x[static_cast<std::size_t>((cols - 1 - j) * rows + i)] - y[static_cast<std::size_t>(j)];
      const double product = 3.0 * x[static_cast<std::size_t>((cols - 1 - j) * rows + i)];
      ASSERT_NEAR(z[static_cast<std::size_t>(i * cols + j)], expect, fma_tolerance<double>(product, y[static_cast<std::size_t>(j)]))
          << i << "," << j;
    }
}

// Runs `body` over float32 x and z (z updated in place) on 4099 random elements (an odd length:
// the vectorized contiguous path and its tail); returns x, z before and z after.
struct InPlaceRun {
  std::vector<float> x, z0, z;
};
InPlaceRun run_in_place(const char* body, const char* name, unsigned seed) {
  ElementwiseKernel k("float32 x", "float32 z", body, name);
  const std::size_t n = 4099;
  InPlaceRun r{random_floats(n, seed), random_floats(n, seed + 1), {}};
  DeviceVector<float> dx(n), dz(n);
  dx.upload(r.x);
  dz.upload(r.z0);
  k.launch({static_cast<std::int64_t>(n)}, {ElementwiseArg::array(dx.ptr, {1}), ElementwiseArg::array(dz.ptr, {1})},
           testing::test_gpu());
  r.z = dz.download();
  return r;
}

TEST(JitUserKernelsGpu, ElementwiseHalfInPlace) {
  REQUIRE_GPU();
  const InPlaceRun r = run_in_place("z += x", "inplace_test", 5);
  for (std::size_t i = 0; i < r.x.size(); ++i) ASSERT_EQ(r.z[i], r.z0[i] + r.x[i]);
}

// A conditional write leaves the skipped elements as they were (the output is loaded first).
TEST(JitUserKernelsGpu, ElementwiseConditionalWriteKeepsSkippedElements) {
  REQUIRE_GPU();
  const InPlaceRun r = run_in_place("if (x > 0.5f) z = x;", "conditional_test", 7);
  std::size_t written = 0;
  for (std::size_t i = 0; i < r.x.size(); ++i) {
    ASSERT_EQ(r.z[i], r.x[i] > 0.5f ? r.x[i] : r.z0[i]) << i;
    written += r.x[i] > 0.5f ? 1 : 0;
  }
  ASSERT_GT(written, 0u);
  ASSERT_LT(written, r.x.size());
}

TEST(JitUserKernelsGpu, LaunchConfigFromOccupancy) {
  REQUIRE_GPU();
  RawKernel k("extern \"C\" __global__ void noop(int* p) { if (p) p[threadIdx.x] = 0; }", "noop");
  const Kernel kernel = k.kernel(testing::test_gpu());
  const LaunchConfig c = kernel.launch_config_1d(1 << 24);
  EXPECT_GE(c.block.x, 32u);
  EXPECT_EQ(c.block.x % 32, 0u);
  EXPECT_GE(c.grid.x, 1u);
  EXPECT_GT(kernel.attributes().max_threads_per_block, 0);
}

// launch_config_fixed clamps the requested block to the kernel's maxThreadsPerBlock
// (__launch_bounds__(128) here): a 1024-thread block would fail to launch. The clamped launch
// covers every element (grid-stride over blockDim, as the generated kernels do).
TEST(JitUserKernelsGpu, LaunchConfigFixedClampsBlock) {
  REQUIRE_GPU();
  RawKernel k(
      "extern \"C\" __global__ void __launch_bounds__(128) iota(long long n, int* p) {"
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;"
      "       i += (long long)gridDim.x * blockDim.x) p[i] = (int)i; }",
      "iota");
  const Device gpu = testing::test_gpu();
  const Kernel kernel = k.kernel(gpu);
  ASSERT_LE(kernel.attributes().max_threads_per_block, 128);
  const long long n = 1 << 20;
  const LaunchConfig c = kernel.launch_config_fixed(n, 1024, 1);
  EXPECT_EQ(c.block.x, static_cast<unsigned>(kernel.attributes().max_threads_per_block));
  EXPECT_LE(c.grid.x, static_cast<unsigned>(device_properties(testing::test_gpu().index).multiprocessors * kernel.max_active_blocks(c.block.x)));
  const LaunchConfig small = kernel.launch_config_fixed(100, 64, 1);  // under the limit: as asked
  EXPECT_EQ(small.block.x, 64u);
  EXPECT_EQ(small.grid.x, 2u);
  int* p = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(p, 0xff, n * sizeof(int)), cudaSuccess);
  long long count = n;
  void* args[] = {&count, &p};
  const Stream stream = current_stream(gpu);
  kernel.launch(c, args, stream);
  stream.synchronize();
  std::vector<int> host(static_cast<std::size_t>(n));
  ASSERT_EQ(cudaMemcpy(host.data(), p, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(p);
  for (long long i = 0; i < n; ++i) ASSERT_EQ(host[static_cast<std::size_t>(i)], static_cast<int>(i)) << i;
}

TEST(JitUserKernelsGpu, CompileErrorFromRawKernel) {
  REQUIRE_GPU();
  RawKernel k("extern \"C\" __global__ void oops() { int x = ; }", "oops");
  EXPECT_THROW(k.launch(1, 1, {}), CompileError);
}
#endif

}  // namespace
}  // namespace tessel::jit
