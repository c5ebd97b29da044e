// CPU backend of the casting ops: dtype conversion over strided operands, arange and linspace.
#include <cmath>
#include <complex>

#include "backend/cast.hpp"
#include "backend/cpu/strided_loop.hpp"
#include "backend/elementwise.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {

void cast(const StridedRef& dst, const StridedRef& src, const Stream&) {
  if (dst.shape != src.shape) {
    throw ShapeError("astype: destination shape " + shape_str(dst.shape) + " differs from source shape " +
                     shape_str(src.shape));
  }
  const CollapsedDims dims = collapse_dims(dst.shape, {dst.strides, src.strides});
  if (dims.shape.back() == 0) return;
  dispatch_dtype(dst.dtype, [&](auto dst_tag) {
    dispatch_dtype(src.dtype, [&](auto src_tag) {
      cast_copy<typename decltype(dst_tag)::type, typename decltype(src_tag)::type>(dst, src, dims);
    });
  });
}

CastKernel cast_kernel(DType to, DType from) {
  CastKernel kernel = nullptr;
  dispatch_dtype(to, [&](auto dst_tag) {
    dispatch_dtype(from, [&](auto src_tag) {
      using Dst = typename decltype(dst_tag)::type;
      using Src = typename decltype(src_tag)::type;
      kernel = [](void* out, std::int64_t so, const void* in, std::int64_t si, std::int64_t n) {
        Dst* o = static_cast<Dst*>(out);
        const Src* a = static_cast<const Src*>(in);
        if (so == 1 && si == 1) {
#pragma omp simd
          for (std::int64_t i = 0; i < n; ++i) o[i] = cast_value<Dst>(a[i]);
        } else if (so == 1 && si == 0) {
          const Dst v = cast_value<Dst>(a[0]);
          for (std::int64_t i = 0; i < n; ++i) o[i] = v;
        } else {
          for (std::int64_t i = 0; i < n; ++i) o[i * so] = cast_value<Dst>(a[i * si]);
        }
      };
    });
  });
  return kernel;
}

namespace {
void check_one_axis(const StridedRef& dst, const char* op) {
  if (dst.shape.size() != 1) {
    throw ShapeError(std::string(op) + ": expects a 1-d destination, got shape " + shape_str(dst.shape));
  }
}

// dst[i] = value(i) over a 1-d destination, computed in Compute and cast once to the dtype.
template <class Compute, class ValueAt>
void generate(const StridedRef& dst, ValueAt value_at) {
  const std::int64_t n = dst.shape[0];
  const std::int64_t stride = dst.strides[0];
  dispatch_dtype(dst.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = static_cast<T*>(dst.data);
    const int threads = loop_threads(n, kMinElementsPerThread);
    const std::int64_t piece = std::max<std::int64_t>(kMinPieceElements, n / (std::int64_t{threads} * kPiecesPerThread));
    parallel_pieces((n + piece - 1) / piece, threads, [&](std::int64_t p) {
      for (std::int64_t i = p * piece; i < std::min(n, (p + 1) * piece); ++i) {
        out[i * stride] = cast_value<T>(static_cast<Compute>(value_at(i)));
      }
    });
  });
}
}  // namespace

void arange(const StridedRef& dst, const Scalar& start, const Scalar& step, const Stream&) {
  check_one_axis(dst, "arange");
  if (is_integer(dst.dtype) || is_bool(dst.dtype)) {
    // Exact integer arithmetic (wrapping like NumPy's int64 fill) when both bounds are integers.
    // As NumPy: the first two values are cast to the dtype and their difference is the step,
    // so arange(0.5, 3, 0.5, int64) counts 0, 1, 2, ...
    const bool exact = start.scalar_kind() == ScalarKind::int_ && step.scalar_kind() == ScalarKind::int_;
    const std::int64_t first = start.to_int64();
    const std::int64_t delta =
        exact ? step.to_int64() : cast_value<std::int64_t>(start.to_double() + step.to_double()) - first;
    generate<std::int64_t>(dst, [&](std::int64_t i) {
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(first) +
                                       static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(delta));
    });
  } else if (is_complex(dst.dtype)) {
    const std::complex<double> first = start.to_complex();
    const std::complex<double> delta = step.to_complex();
    generate<std::complex<double>>(dst, [&](std::int64_t i) { return first + static_cast<double>(i) * delta; });
  } else {
    const double first = start.to_double();
    const double delta = step.to_double();
    generate<double>(dst, [&](std::int64_t i) { return first + static_cast<double>(i) * delta; });
  }
}

void linspace(const StridedRef& dst, const Scalar& start, const Scalar& stop, bool endpoint, const Stream&) {
  check_one_axis(dst, "linspace");
  const std::int64_t num = dst.shape[0];
  const std::int64_t divisions = endpoint ? num - 1 : num;
  // As NumPy: step = (stop - start) / div, y = start + i * step, and the last element is stop
  // exactly when endpoint is set.
  if (is_complex(dst.dtype)) {
    const std::complex<double> first = start.to_complex();
    const std::complex<double> last = stop.to_complex();
    const std::complex<double> step = divisions > 0 ? (last - first) / static_cast<double>(divisions) : 0.0;
    generate<std::complex<double>>(dst, [&](std::int64_t i) {
      return (endpoint && i == num - 1 && num > 1) ? last : first + static_cast<double>(i) * step;
    });
  } else {
    const double first = start.to_double();
    const double last = stop.to_double();
    const double span = last - first;
    const double step = divisions > 0 ? span / static_cast<double>(divisions) : 0.0;
    auto linspace_value = [&](std::int64_t i) {
      if (endpoint && i == num - 1 && num > 1) return last;
      // NumPy multiplies by the step unless it underflowed to zero, then scales the span.
      return (step != 0.0 || divisions == 0) ? first + static_cast<double>(i) * step
                         : first + static_cast<double>(i) * span / static_cast<double>(divisions);
    };
    // NumPy 2 floors the values for an integer dtype before the cast.
    const bool floor_values = is_integer(dst.dtype);
    generate<double>(dst, [&](std::int64_t i) {
      const double value = linspace_value(i);
      return floor_values ? std::floor(value) : value;
    });
  }
}

}  // namespace tessel::backend::cpu
