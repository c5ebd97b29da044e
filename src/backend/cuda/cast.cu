// CUDA backend of the casting ops. A cast is one generated elementwise kernel per dtype pair,
// launched through its jit::ElementwiseLauncher (the one launch path of generated kernels).
// arange and linspace are generated on the device with the CPU backend's formulas, in int64,
// double or complex<double>, then cast.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <complex>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "array/cast.hpp"
#include "backend/cast.hpp"
#include "backend/cuda/grid_stride.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {

using detail::cast_value;

namespace {

// One launcher per (source, destination) dtype pair, built on first use and kept for the process.
const jit::ElementwiseLauncher& cast_launcher(DType from, DType to) {
  static std::mutex mutex;
  static auto* launchers = new std::map<std::pair<DType, DType>, std::unique_ptr<jit::ElementwiseLauncher>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& launcher = (*launchers)[{from, to}];
  if (!launcher) {
    const jit::Expr value = jit::Expr::cast(jit::Expr::input(0, from), to);
    launcher = std::make_unique<jit::ElementwiseLauncher>(jit::lower_expressions("tessel_cast", {from}, {}, {value}, {to}));
  }
  return *launcher;
}



}  // namespace

void cast(const StridedRef& dst, const StridedRef& src, const Stream& stream) {
  if (dst.shape != src.shape) {
    throw ShapeError("astype: destination shape " + shape_str(dst.shape) + " differs from source shape " +
                     shape_str(src.shape));
  }
  const jit::ElementwiseArgView operands[2] = {{dst.data, dst.strides.data(), dst.strides.size(), nullptr},
                                              {src.data, src.strides.data(), src.strides.size(), nullptr}};
  cast_launcher(src.dtype, dst.dtype).launch(dst.shape, operands, 2, stream.device(), stream);
}

// arange and linspace are generated on the device with the CPU backend's formulas (NumPy's):
// values in int64, double or complex<double>, then cast to the dtype by the cast kernel (or
// written directly when the dtype is the compute type). The double arithmetic uses explicit
// round-to-nearest intrinsics so that no multiply-add is contracted: bit-identical to the CPU.
namespace {

struct AffineDouble {
  double first, step, last, span;
  long long divisions;
  bool end_at_last;  // linspace with endpoint: the last element is `last` exactly
  bool use_span;     // linspace whose step underflowed: first + i * span / divisions
  bool floor_values; // linspace into an integer dtype (NumPy 2 floors before the cast)
};

__global__ void arange_int64_kernel(long long* out, long long stride, long long first, long long delta, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i * stride] = static_cast<long long>(static_cast<unsigned long long>(first) +
                                             static_cast<unsigned long long>(i) * static_cast<unsigned long long>(delta));
  }
}

__device__ __forceinline__ double affine_value(const AffineDouble& p, long long i, long long n) {
  if (p.end_at_last && i == n - 1 && n > 1) return p.last;
  const double x = static_cast<double>(i);
  const double v = p.use_span ? __dadd_rn(p.first, __ddiv_rn(__dmul_rn(x, p.span), static_cast<double>(p.divisions)))
                              : __dadd_rn(p.first, __dmul_rn(x, p.step));
  return p.floor_values ? floor(v) : v;
}

__global__ void affine_double_kernel(double* out, long long stride, AffineDouble p, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    out[i * stride] = affine_value(p, i, n);
  }
}

__global__ void affine_complex_kernel(double2* out, long long stride, double2 first, double2 step, double2 last,
                                      bool end_at_last, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const double x = static_cast<double>(i);
    out[i * stride] = (end_at_last && i == n - 1 && n > 1)
                          ? last
                          : make_double2(__dadd_rn(first.x, __dmul_rn(x, step.x)), __dadd_rn(first.y, __dmul_rn(x, step.y)));
  }
}

// Runs `launch(out, stride)` into dst directly when its dtype is `compute`, else into a
// contiguous temporary that is then cast into dst.
template <class Launch>
void generate_on_device(const StridedRef& dst, DType compute, const Stream& stream, const char* op, Launch launch) {
  if (dst.shape.size() != 1) {
    throw ShapeError(std::string(op) + ": expects a 1-d destination, got shape " + shape_str(dst.shape));
  }
  const std::int64_t n = dst.shape[0];
  if (n == 0) return;
  DeviceGuard guard(stream.device());
  const unsigned grid = grid_stride_blocks(n, stream.device());
  if (dst.dtype == compute) {
    launch(dst.data, dst.strides[0], grid);
    TESSEL_CUDA_CHECK_LAUNCH(detail::cuda_stream(stream), op);
    return;
  }
  std::shared_ptr<Buffer> values = Buffer::allocate(stream.device(), n * itemsize(compute), stream);
  launch(values->data(), std::int64_t{1}, grid);
  TESSEL_CUDA_CHECK_LAUNCH(detail::cuda_stream(stream), op);
  cast(dst, StridedRef{values->data(), compute, dst.shape, contiguous_strides(dst.shape)}, stream);
}  // `values` goes back to the stream-ordered cache after the cast kernel is queued

}  // namespace

void arange(const StridedRef& dst, const Scalar& start, const Scalar& step, const Stream& stream) {
  if (is_integer(dst.dtype) || is_bool(dst.dtype)) {
    // As the CPU backend: exact when both bounds are integers, else the cast first two values.
    const bool exact = start.scalar_kind() == ScalarKind::int_ && step.scalar_kind() == ScalarKind::int_;
    const std::int64_t first = start.to_int64();
    std::int64_t delta = step.to_int64();
    if (!exact) {
      const double second = start.to_double() + step.to_double();
      delta = cast_value<std::int64_t>(second) - first;
    }
    generate_on_device(dst, DType::int64, stream, "arange", [&](void* out, std::int64_t stride, unsigned grid) {
      arange_int64_kernel<<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(static_cast<long long*>(out), stride, first, delta,
                                                                       dst.shape[0]);
    });
  } else if (is_complex(dst.dtype)) {
    const std::complex<double> f = start.to_complex(), d = step.to_complex();
    generate_on_device(dst, DType::complex128, stream, "arange", [&](void* out, std::int64_t stride, unsigned grid) {
      affine_complex_kernel<<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(
          static_cast<double2*>(out), stride, make_double2(f.real(), f.imag()), make_double2(d.real(), d.imag()),
          make_double2(0, 0), false, dst.shape[0]);
    });
  } else {
    const AffineDouble p{start.to_double(), step.to_double(), 0.0, 0.0, 0, false, false, false};
    generate_on_device(dst, DType::float64, stream, "arange", [&](void* out, std::int64_t stride, unsigned grid) {
      affine_double_kernel<<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(static_cast<double*>(out), stride, p, dst.shape[0]);
    });
  }
}

void linspace(const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint, const Stream& stream) {
  if (dst.shape.size() != 1) {
    throw ShapeError("linspace: expects a 1-d destination, got shape " + shape_str(dst.shape));
  }
  const std::int64_t num = dst.shape[0];
  const std::int64_t divisions = endpoint ? num - 1 : num;
  if (is_complex(dst.dtype)) {
    const std::complex<double> first = start.to_complex(), last = stop.to_complex();
    const std::complex<double> step = divisions > 0 ? (last - first) / static_cast<double>(divisions) : 0.0;
    generate_on_device(dst, DType::complex128, stream, "linspace", [&](void* out, std::int64_t stride, unsigned grid) {
      affine_complex_kernel<<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(
          static_cast<double2*>(out), stride, make_double2(first.real(), first.imag()), make_double2(step.real(), step.imag()),
          make_double2(last.real(), last.imag()), endpoint, num);
    });
    return;
  }
  AffineDouble p{};
  p.first = start.to_double();
  p.last = stop.to_double();
  p.span = p.last - p.first;
  p.step = divisions > 0 ? p.span / static_cast<double>(divisions) : 0.0;
  p.divisions = divisions;
  p.end_at_last = endpoint;
  p.use_span = !(p.step != 0.0 || divisions == 0);
  p.floor_values = is_integer(dst.dtype);
  generate_on_device(dst, DType::float64, stream, "linspace", [&](void* out, std::int64_t stride, unsigned grid) {
    affine_double_kernel<<<grid, threads_per_block, 0, detail::cuda_stream(stream)>>>(static_cast<double*>(out), stride, p, num);
  });
}

}  // namespace tessel::backend::cuda
