// The internal kernel entry points of tessel/ops/matmul_kernels.hpp, over the CUDA backend's
// kernels (backend/cuda/matmul_simt.cu, matmul_sm90.cu). Without CUDA they raise the DeviceError of
// backend/dispatch.hpp, and sm90 has no configuration (backend/dispatch.cpp).
#include "tessel/ops/matmul_kernels.hpp"

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/matmul_simt_kernel.cuh"
#include "backend/matmul.hpp"
#include "tessel/core/error.hpp"

namespace tessel::internal {
namespace {

void check_simt_operand(const Array& x, const char* what, std::int64_t rows, std::int64_t cols) {
  const Shape want = cols < 0 ? Shape{rows} : Shape{rows, cols};
  if (x.dtype() != DType::float32 || x.shape() != want || !x.is_contiguous()) {
    throw ValueError(fmt::format("launch_simt_sgemm: {} must be a contiguous float32 array of shape {}, got {} {}{}",
                                 what, shape_str(want), dtype_name(x.dtype()), shape_str(x.shape()),
                                 x.is_contiguous() ? "" : " (not contiguous)"));
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

void naive_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k,
                 const Stream& stream) {
  backend::cuda::naive_sgemm(a, b, d, m, n, k, stream.handle());
}
void naive_uncoalesced_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n,
                             std::int64_t k, const Stream& stream) {
  backend::cuda::naive_uncoalesced_sgemm(a, b, d, m, n, k, stream.handle());
}
void tiled_sgemm(const float* a, const float* b, float* d, std::int64_t m, std::int64_t n, std::int64_t k,
                 const Stream& stream) {
  backend::cuda::tiled_sgemm(a, b, d, m, n, k, stream.handle());
}

std::string simt_sgemm_name(const SimtTile& tile) {
  return fmt::format("tessel_simt::simt_gemm_kernel<{}, {}, {}, {}, {}, {}>", tile.bm, tile.bn, tile.bk, tile.tm,
                     tile.tn, tile.warp_x);
}

void launch_simt_sgemm(const jit::Kernel& kernel, const SimtTile& tile, const Array& a, const Array& b,
                       const Array& d, const Array& bias, SimtEpilogue epilogue, const Stream& stream) {
  if (a.ndim() != 2 || b.ndim() != 2) {
    throw ValueError(fmt::format("launch_simt_sgemm: a and b must be 2-D, got {} and {}", shape_str(a.shape()),
                                 shape_str(b.shape())));
  }
  const std::int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  check_simt_operand(a, "a", m, k);
  check_simt_operand(b, "b", k, n);
  check_simt_operand(d, "d", m, n);
  if (bias.defined()) check_simt_operand(bias, "bias", n, -1);
  tessel_simt::SimtArgs args{};
  args.a = a.data_as<float>();
  args.lda = k;
  args.b = b.data_as<float>();
  args.ldb = n;
  args.d = d.data_as<float>();
  args.ldd = n;
  args.bias = bias.defined() ? bias.data_as<float>() : nullptr;
  args.m = static_cast<int>(m);
  args.n = static_cast<int>(n);
  args.k = static_cast<int>(k);
  args.alpha = 1.0f;
  args.beta = 0.0f;
  args.epilogue = static_cast<int>(epilogue);
  args.vec_a = k % 4 == 0 && aligned16(args.a);  // float4 loads need 16-byte aligned rows
  args.vec_b = n % 4 == 0 && aligned16(args.b);
  void* params[] = {&args};
  const jit::LaunchConfig config{jit::Dim3(static_cast<unsigned>((n + tile.bn - 1) / tile.bn),
                                           static_cast<unsigned>((m + tile.bm - 1) / tile.bm), 1),
                                 jit::Dim3(static_cast<unsigned>(tile.threads())), 0};
  kernel.launch(config, params, stream);
}

}  // namespace tessel::internal
