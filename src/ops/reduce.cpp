// Reductions and scans: validation, result dtypes, layout planning and backend dispatch.
//
// Every reduction is brought to one canonical problem: a contiguous (outer, len, inner) block
// in one of four compute dtypes, reduced over len. A contiguous input whose reduced axes are
// consecutive is viewed that way without a copy (this covers full, inner and outer-axis
// reductions, the common cases); anything else is permuted (kept axes first) and copied once.
// Narrow dtypes are widened to the compute dtype first, so the backends instantiate only
// int64, uint64, float32 and float64.
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "array/backend.hpp"
#include "ops/axis_last.hpp"
#include "ops/op_stream.hpp"
#include "backend/reduce.hpp"
#include "tessel/core/error.hpp"
#include "ops/checks.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/profile/range.hpp"

namespace tessel {
namespace {

using backend::ReduceOp;

enum class Family { accumulate, extremum, logical, arg, mean, var };

// The dtype support and semantics of each reduction, as data.
struct ReduceInfo {
  ReduceOp op;
  const char* name;
  Family family;
  bool has_identity;  // false: an empty reduction raises ValueError
};

constexpr ReduceInfo reduce_table[] = {
    {ReduceOp::sum, "sum", Family::accumulate, true},
    {ReduceOp::prod, "prod", Family::accumulate, true},
    {ReduceOp::min, "min", Family::extremum, false},
    {ReduceOp::max, "max", Family::extremum, false},
    {ReduceOp::nansum, "nansum", Family::accumulate, true},
    {ReduceOp::nanprod, "nanprod", Family::accumulate, true},
    {ReduceOp::nanmin, "nanmin", Family::extremum, false},
    {ReduceOp::nanmax, "nanmax", Family::extremum, false},
    {ReduceOp::any, "any", Family::logical, true},
    {ReduceOp::all, "all", Family::logical, true},
    {ReduceOp::argmin, "argmin", Family::arg, false},
    {ReduceOp::argmax, "argmax", Family::arg, false},
    {ReduceOp::nanargmin, "nanargmin", Family::arg, false},
    {ReduceOp::nanargmax, "nanargmax", Family::arg, false},
    {ReduceOp::mean, "mean", Family::mean, true},
    {ReduceOp::nanmean, "nanmean", Family::mean, true},
    {ReduceOp::var, "var", Family::var, true},
    {ReduceOp::nanvar, "nanvar", Family::var, true},
    {ReduceOp::std, "std", Family::var, true},
    {ReduceOp::nanstd, "nanstd", Family::var, true},
};

const ReduceInfo& info_of(ReduceOp op) {
  for (const ReduceInfo& info : reduce_table) {
    if (info.op == op) return info;
  }
  throw Error("reduce: unknown op");
}

// Complex reductions other than all/any (reduce() reads those as x != 0) are not implemented.
void check_dtype(const char* op, DType dtype) {
  if (is_complex(dtype)) {
    throw DTypeError(fmt::format("{}: dtype {} is not supported (complex reductions are not implemented)", op,
                                 dtype_name(dtype)));
  }
}

// Integer-like inputs accumulate in 64 bits; floats in float32 (float16, bfloat16, float32) or
// float64. Mean and variance of integers are computed in float64, as NumPy.
DType compute_dtype(DType dtype, Family family) {
  if (is_floating(dtype)) return dtype == DType::float64 ? DType::float64 : DType::float32;
  if (family == Family::mean || family == Family::var) return DType::float64;
  return is_unsigned_integer(dtype) ? DType::uint64 : DType::int64;
}

DType result_dtype(DType dtype, Family family) {
  switch (family) {
    case Family::accumulate:
      if (is_floating(dtype)) return dtype;
      return is_unsigned_integer(dtype) ? DType::uint64 : DType::int64;
    case Family::extremum: return dtype;
    case Family::logical: return DType::bool_;
    case Family::arg: return DType::int64;
    case Family::mean:
    case Family::var: return is_floating(dtype) ? dtype : DType::float64;
  }
  return dtype;
}


// The complex array (dtype) with real part re and imaginary part im (one shape, the real dtype of
// `dtype`), written through real views of its storage: re + im * 1j would turn an infinite
// imaginary part into a NaN real part (inf * 0).
Array complex_from_parts(const Array& re, const Array& im, DType dtype, const Stream& stream) {
  Array out = empty(re.shape(), dtype, re.device(), stream);
  Strides strides = out.strides();
  for (auto& s : strides) s *= 2;
  const DType part = to_real(dtype);
  copyto(Array(out.storage(), out.shape(), strides, 2 * out.offset(), part), re, stream);
  copyto(Array(out.storage(), out.shape(), strides, 2 * out.offset() + 1, part), im, stream);
  return out;
}

// The product of complex values over the reduced axes by pairwise multiplication: ceil(log2 n)
// multiply launches over the reduced elements laid out as one trailing axis (the reduction
// backends accumulate real values only).
Array complex_prod(const Array& a, const std::vector<bool>& reduced, bool keepdims, const Stream& stream) {
  std::vector<std::int64_t> order;
  Shape kept, kept_dims;
  std::int64_t n = 1;
  for (std::int64_t i = 0; i < a.ndim(); ++i) {
    const bool r = reduced[static_cast<std::size_t>(i)];
    if (!r) {
      order.push_back(i);
      kept.push_back(a.shape()[static_cast<std::size_t>(i)]);
    }
    kept_dims.push_back(r ? 1 : a.shape()[static_cast<std::size_t>(i)]);
  }
  for (std::int64_t i = 0; i < a.ndim(); ++i) {
    if (reduced[static_cast<std::size_t>(i)]) {
      order.push_back(i);
      n *= a.shape()[static_cast<std::size_t>(i)];
    }
  }
  Shape one = kept;
  one.push_back(1);
  Shape flat = kept;
  flat.push_back(n);
  const auto last = static_cast<std::int64_t>(kept.size());
  Array y = n == 0 ? full(one, Scalar(1), a.dtype(), a.device(), stream) : a.permute(order).reshape(flat, stream);
  while (y.shape()[static_cast<std::size_t>(last)] > 1) {
    if (y.shape()[static_cast<std::size_t>(last)] % 2 != 0) {
      y = concatenate({y, full(one, Scalar(1), a.dtype(), a.device(), stream)}, last, std::nullopt, stream);
    }
    y = multiply(y.slice(last, Slice(0, none, 2)), y.slice(last, Slice(1, none, 2)), std::nullopt, stream);
  }
  return y.reshape(keepdims ? kept_dims : kept, stream);
}

// Which axes are reduced; IndexError for an axis out of range, ValueError for a duplicate.
std::vector<bool> reduced_axes(const Axes& axes, std::int64_t ndim, const char* op) {
  std::vector<bool> reduced(static_cast<std::size_t>(ndim), !axes.has_value());
  if (!axes) return reduced;
  for (std::int64_t axis : *axes) {
    if (axis < -ndim || axis >= ndim) {
      throw IndexError(fmt::format("{}: axis {} is out of bounds for array of dimension {}", op, axis, ndim));
    }
    const std::int64_t a = axis < 0 ? axis + ndim : axis;
    if (reduced[static_cast<std::size_t>(a)]) throw ValueError(fmt::format("{}: duplicate value in axis: {}", op, axis));
    reduced[static_cast<std::size_t>(a)] = true;
  }
  return reduced;
}

struct Block {
  Array array;  // contiguous
  std::int64_t outer = 1, len = 1, inner = 1;
};

// The (outer, len, inner) view of `a` (already in the compute dtype), copying only when the
// reduced axes are not one consecutive run of a contiguous array.
Block plan_block(const Array& a, const std::vector<bool>& reduced, const Stream& stream) {
  const std::int64_t ndim = a.ndim();
  std::int64_t first = ndim, last = -1;
  for (std::int64_t i = 0; i < ndim; ++i) {
    if (reduced[static_cast<std::size_t>(i)]) {
      first = std::min(first, i);
      last = i;
    }
  }
  bool consecutive = true;
  for (std::int64_t i = first; i <= last; ++i) consecutive = consecutive && reduced[static_cast<std::size_t>(i)];
  Block block;
  if (a.is_contiguous() && consecutive) {
    if (last < 0) first = last = ndim;  // nothing reduced: len 1
    for (std::int64_t i = 0; i < ndim; ++i) {
      const std::int64_t d = a.shape()[static_cast<std::size_t>(i)];
      if (i < first) block.outer *= d;
      else if (i <= last && last < ndim) block.len *= d;
      else block.inner *= d;
    }
    block.array = a;
    return block;
  }
  std::vector<std::int64_t> order;
  for (std::int64_t i = 0; i < ndim; ++i) {
    if (!reduced[static_cast<std::size_t>(i)]) {
      order.push_back(i);
      block.outer *= a.shape()[static_cast<std::size_t>(i)];
    }
  }
  for (std::int64_t i = 0; i < ndim; ++i) {
    if (reduced[static_cast<std::size_t>(i)]) {
      order.push_back(i);
      block.len *= a.shape()[static_cast<std::size_t>(i)];
    }
  }
  block.array = a.permute(order).contiguous(stream);
  return block;
}

void run_reduce(const backend::ReduceProblem& problem, const Array& out, const Stream& stream) {
  backend::dispatch::reduce(out.device(), problem, stream);
  out.storage()->record_pending_write(stream);  // nothing to record on the CPU
}

Array reduce(ReduceOp op, const Array& a, const Axes& axes, bool keepdims, double ddof,
             const OptionalStream& stream_arg) {
  const ReduceInfo& info = info_of(op);
  if (info.family == Family::logical && is_complex(a.dtype())) {
    // all/any of complex values: whether each is nonzero (NaN components count as nonzero).
    const Stream stream = detail::op_stream(a, stream_arg, info.name);
    return reduce(op, not_equal(a, Scalar(0), std::nullopt, stream), axes, keepdims, ddof, stream);
  }
  if (is_complex(a.dtype()) && op == ReduceOp::prod) {
    const Stream stream = detail::op_stream(a, stream_arg, info.name);
    return complex_prod(a, reduced_axes(axes, a.ndim(), info.name), keepdims, stream);
  }
  if (is_complex(a.dtype()) && (op == ReduceOp::sum || op == ReduceOp::mean)) {
    return complex_from_parts(reduce(op, real(a, std::nullopt, stream_arg), axes, keepdims, ddof, stream_arg),
                              reduce(op, imag(a, std::nullopt, stream_arg), axes, keepdims, ddof, stream_arg),
                              a.dtype(), detail::op_stream(a, stream_arg, info.name));
  }
  check_dtype(info.name, a.dtype());
  const std::vector<bool> reduced = reduced_axes(axes, a.ndim(), info.name);
  const Stream stream = detail::op_stream(a, stream_arg, info.name);

  Shape out_shape;
  for (std::int64_t i = 0; i < a.ndim(); ++i) {
    const bool r = reduced[static_cast<std::size_t>(i)];
    if (!r) out_shape.push_back(a.shape()[static_cast<std::size_t>(i)]);
    else if (keepdims) out_shape.push_back(1);
  }
  const std::int64_t out_size = numel(out_shape);
  std::int64_t len = 1;
  for (std::int64_t i = 0; i < a.ndim(); ++i) {
    if (reduced[static_cast<std::size_t>(i)]) len *= a.shape()[static_cast<std::size_t>(i)];
  }
  if (len == 0 && out_size > 0 && !info.has_identity) {
    if (info.family == Family::arg) {
      throw ValueError(fmt::format("{}: attempt to get {} of an empty sequence", info.name, info.name));
    }
    throw ValueError(
        fmt::format("{}: zero-size array to reduction operation {} which has no identity", info.name, info.name));
  }

  const DType work = compute_dtype(a.dtype(), info.family);
  const DType final_dtype = result_dtype(a.dtype(), info.family);
  const DType out_dtype = info.family == Family::logical ? DType::bool_
                          : info.family == Family::arg   ? DType::int64
                                                         : work;
  Array out = empty(out_shape, out_dtype, a.device(), stream);
  if (out_size > 0) {
    const Array widened = a.dtype() == work ? a : astype(a, work, stream);
    const Block block = plan_block(widened, reduced, stream);
    block.array.storage()->wait_on_stream(stream);  // the CPU waits too: the data may be landing from a device copy
    backend::ReduceProblem problem;
    problem.op = op;
    problem.dtype = work;
    problem.in = block.array.data();
    problem.outer = block.outer;
    problem.len = block.len;
    problem.inner = block.inner;
    problem.out = out.data();
    problem.ddof = ddof;
    Array means;
    if (info.family == Family::var) {
      // Two passes (mean, then squared deviations) for accuracy, as NumPy.
      means = empty({out_size}, work, a.device(), stream);
      backend::ReduceProblem mean_problem = problem;
      const bool nan = op == ReduceOp::nanvar || op == ReduceOp::nanstd;
      mean_problem.op = nan ? ReduceOp::nanmean : ReduceOp::mean;
      mean_problem.out = means.data();
      run_reduce(mean_problem, means, stream);
      problem.mean = means.data();
    }
    run_reduce(problem, out, stream);
  }
  return out.dtype() == final_dtype ? out : astype(out, final_dtype, stream);
}

std::optional<std::vector<std::int64_t>> one_axis(std::optional<std::int64_t> axis) {
  if (!axis) return std::nullopt;
  return std::vector<std::int64_t>{*axis};
}

Array arg_reduce(ReduceOp op, const char* name, const Array& a, std::optional<std::int64_t> axis, bool keepdims,
                 const OptionalStream& stream) {
  // NumPy keeps every axis with size one when axis is None and keepdims is set.
  Array result = (!axis && keepdims) ? reduce(op, a, std::nullopt, true, 0, stream)
                                     : reduce(op, a, one_axis(axis), keepdims, 0, stream);
  // The backends mark a slice with no non-NaN value by index -1; NumPy raises for it. Checking
  // needs the smallest index on the host (one sync), only for the NaN variants of float input.
  if ((op == ReduceOp::nanargmin || op == ReduceOp::nanargmax) && (is_floating(a.dtype()) || is_complex(a.dtype())) &&
      result.size() > 0) {
    const std::int64_t lowest = reduce(ReduceOp::min, result, std::nullopt, false, 0, stream).item<std::int64_t>();
    if (lowest < 0) throw ValueError(std::string(name) + ": All-NaN slice encountered");
  }
  return result;
}

DType scan_dtype(DType dtype) {
  if (is_floating(dtype)) return dtype;
  return is_unsigned_integer(dtype) ? DType::uint64 : DType::int64;
}

Array scan(backend::ScanOp op, const char* name, const Array& a, std::optional<std::int64_t> axis_arg,
           const OptionalStream& stream_arg) {
  if (is_complex(a.dtype()) && op == backend::ScanOp::cumsum) {  // linear: the parts' running sums
    return complex_from_parts(scan(op, name, real(a, std::nullopt, stream_arg), axis_arg, stream_arg),
                              scan(op, name, imag(a, std::nullopt, stream_arg), axis_arg, stream_arg), a.dtype(),
                              detail::op_stream(a, stream_arg, name));
  }
  check_dtype(name, a.dtype());
  const Stream stream = detail::op_stream(a, stream_arg, name);
  Array input = a;
  std::int64_t axis = 0;
  if (!axis_arg) {
    input = a.reshape({a.size()}, stream);
  } else {
    axis = normalize_axis(*axis_arg, a.ndim(), name);
  }
  const DType final_dtype = scan_dtype(a.dtype());
  const DType work = compute_dtype(final_dtype, Family::accumulate);
  if (input.dtype() != work) input = astype(input, work, stream);
  // Move the scanned axis last and make the rows contiguous.
  const std::int64_t ndim = input.ndim();
  const auto [order, inverse] = detail::move_axis_last(ndim, axis);
  const Array rows = input.permute(order).contiguous(stream);
  Array out = empty(rows.shape(), work, a.device(), stream);
  if (out.size() > 0) {
    rows.storage()->wait_on_stream(stream);  // the CPU waits too: rows may be landing from a device copy
    backend::ScanProblem problem;
    problem.op = op;
    problem.dtype = work;
    problem.in = rows.data();
    problem.out = out.data();
    problem.len = rows.shape().back();
    problem.rows = rows.size() / problem.len;
    backend::dispatch::scan(out.device(), problem, stream);
    out.storage()->record_pending_write(stream);
  }
  Array result = out.permute(inverse);
  if (result.dtype() != final_dtype) return astype(result, final_dtype, stream);
  return result.contiguous(stream);
}

}  // namespace

}  // namespace tessel

// The public functions, one per row of reduce_list.hpp by its shape. Defined by qualified name
// outside the namespace, so that a row without its declaration in reduce.hpp does not compile.
#define TESSEL_DEFINE_REDUCTION(name)                                                                        \
  tessel::Array tessel::name(const Array& a, const Axes& axes, bool keepdims, const OptionalStream& stream) { \
    TESSEL_RANGE(#name, a, stream);                                                                          \
    return TESSEL_RESULT(reduce(ReduceOp::name, a, axes, keepdims, 0, stream));                              \
  }
#define TESSEL_DEFINE_dtype(name) TESSEL_DEFINE_REDUCTION(name)
#define TESSEL_DEFINE_plain(name) TESSEL_DEFINE_REDUCTION(name)
#define TESSEL_DEFINE_variance(name)                                                                          \
  tessel::Array tessel::name(const Array& a, const Axes& axes, double ddof, bool keepdims,                   \
                             const OptionalStream& stream) {                                                  \
    TESSEL_RANGE(#name, a, stream);                                                                           \
    return TESSEL_RESULT(reduce(ReduceOp::name, a, axes, keepdims, ddof, stream));                            \
  }
#define TESSEL_DEFINE_arg(name)                                                                               \
  tessel::Array tessel::name(const Array& a, std::optional<std::int64_t> axis, bool keepdims,                \
                             const OptionalStream& stream) {                                                  \
    TESSEL_RANGE(#name, a, stream);                                                                           \
    return arg_reduce(ReduceOp::name, #name, a, axis, keepdims, stream);                                      \
  }
#define TESSEL_DEFINE_scan(name)                                                                              \
  tessel::Array tessel::name(const Array& a, std::optional<std::int64_t> axis, const OptionalStream& stream) { \
    TESSEL_RANGE(#name, a, stream);                                                                           \
    return TESSEL_RESULT(scan(backend::ScanOp::name, #name, a, axis, stream));                                \
  }
#define TESSEL_DEFINE(name, python_name, shape, doc) TESSEL_DEFINE_##shape(name)
TESSEL_REDUCTION_OPS(TESSEL_DEFINE)
#undef TESSEL_DEFINE
#undef TESSEL_DEFINE_scan
#undef TESSEL_DEFINE_arg
#undef TESSEL_DEFINE_variance
#undef TESSEL_DEFINE_plain
#undef TESSEL_DEFINE_dtype
#undef TESSEL_DEFINE_REDUCTION
