// The public FFT functions: validation, dtype casts, n / s padding and cropping, axes, norm,
// and the decomposition of every transform into batched 1-D transforms (backend/fft.hpp), the
// way numpy.fft does it: c2c axes last-to-first; rfftn = r2c on the last axis, then c2c on the
// others; irfftn = c2c on the others, then c2r on the last axis.
//
// Each 1-D step moves its axis last (a view) and hands the backend one batch dimension with
// one stride (cuFFT's advanced layout: istride / idist) when the other axes collapse into one;
// otherwise it copies the input to contiguous rows first. Outputs are fresh contiguous rows,
// returned as a view in the caller's axis order.
#include "tessel/ops/cast.hpp"
#include "tessel/ops/fft.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "array/backend.hpp"
#include "backend/fft.hpp"
#include "ops/axis_last.hpp"
#include "ops/op_stream.hpp"
#include "tessel/core/error.hpp"
#include "ops/checks.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel::fft {
namespace {

using backend::FFTKind;

struct Step {
  FFTKind kind = FFTKind::c2c;
  bool inverse = false;
  std::int64_t axis = 0;
  std::int64_t n = 0;  // logical length
  double scale = 1.0;
};

// A transform resolved against an input's ndim and shape: the dtype the input is cast to,
// the complex dtype of the computation and the 1-D steps in execution order.
struct Resolved {
  DType input_dtype = DType::complex64;
  DType complex_dtype = DType::complex64;
  std::vector<Step> steps;
};

double norm_scale(Norm norm, std::int64_t n, bool inverse) {
  switch (norm) {
    case Norm::ortho:
      return 1.0 / std::sqrt(static_cast<double>(n));
    case Norm::forward:
      return inverse ? 1.0 : 1.0 / static_cast<double>(n);
    case Norm::backward:
    default:
      return inverse ? 1.0 / static_cast<double>(n) : 1.0;
  }
}

// NumPy's casts: integers and bool to float64/complex128, half types to float32/complex64.
DType real_dtype_for(DType dtype, const char* op) {
  if (is_complex(dtype)) {
    throw DTypeError(fmt::format("{}: input dtype {} is complex; this transform takes real input (use fft)", op,
                                 dtype_name(dtype)));
  }
  if (dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16) return DType::float32;
  return DType::float64;  // float64, integers, bool
}

DType complex_dtype_for(DType dtype) {
  if (dtype == DType::complex64 || dtype == DType::complex128) return dtype;
  if (dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16) return DType::complex64;
  return DType::complex128;
}

std::string axes_str(const std::vector<std::int64_t>& v) { return fmt::format("({})", fmt::join(v, ", ")); }

// Resolves s / axes as numpy.fft's _cook_nd_args does, and builds the steps.
Resolved resolve(const Array& x, Transform transform, const OptionalAxes& s_arg, const OptionalAxes& axes_arg,
                 Norm norm, const char* op) {
  const std::int64_t ndim = x.ndim();
  std::vector<std::int64_t> axes;
  if (axes_arg) {
    axes = *axes_arg;
    if (s_arg && s_arg->size() != axes.size()) {
      throw ValueError(fmt::format("{}: s {} and axes {} must have the same length", op, axes_str(*s_arg),
                                   axes_str(axes)));
    }
  } else if (s_arg) {
    if (static_cast<std::int64_t>(s_arg->size()) > ndim) {
      throw ValueError(fmt::format("{}: s {} has more entries than the input has axes (shape {})", op,
                                   axes_str(*s_arg), shape_str(x.shape())));
    }
    for (std::int64_t i = ndim - static_cast<std::int64_t>(s_arg->size()); i < ndim; ++i) axes.push_back(i);
  } else {
    for (std::int64_t i = 0; i < ndim; ++i) axes.push_back(i);
  }
  const bool real_transform = transform == Transform::rfft || transform == Transform::irfft;
  if (axes.empty() && real_transform) {
    throw ValueError(fmt::format("{}: at least one axis is required (input shape {})", op, shape_str(x.shape())));
  }
  for (std::int64_t& axis : axes) axis = normalize_axis(axis, ndim, op);
  std::vector<std::int64_t> s(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::int64_t m = x.shape()[static_cast<std::size_t>(axes[i])];
    if (m == 0) {
      throw ValueError(fmt::format("{}: the input is empty along axis {} (shape {})", op, axes[i], shape_str(x.shape())));
    }
    if (s_arg) {
      s[i] = (*s_arg)[i];
    } else if (transform == Transform::irfft && i + 1 == axes.size()) {
      s[i] = 2 * (m - 1);
    } else {
      s[i] = m;
    }
    if (s[i] < 1) {
      throw ValueError(fmt::format("{}: invalid number of data points {} along axis {} (must be >= 1{})", op, s[i],
                                   axes[i],
                                   !s_arg && transform == Transform::irfft ? "; the default n = 2 * (m - 1) needs m >= 2" : ""));
    }
  }
  Resolved r;
  const std::size_t k = axes.size();
  auto c2c = [&](std::size_t i, bool inverse) {
    r.steps.push_back({FFTKind::c2c, inverse, axes[i], s[i], norm_scale(norm, s[i], inverse)});
  };
  switch (transform) {
    case Transform::fft:
    case Transform::ifft:
      r.input_dtype = r.complex_dtype = complex_dtype_for(x.dtype());
      for (std::size_t i = k; i-- > 0;) c2c(i, transform == Transform::ifft);
      break;
    case Transform::rfft:
      r.input_dtype = real_dtype_for(x.dtype(), op);
      r.complex_dtype = to_complex(r.input_dtype);
      r.steps.push_back({FFTKind::r2c, false, axes[k - 1], s[k - 1], norm_scale(norm, s[k - 1], false)});
      for (std::size_t i = k - 1; i-- > 0;) c2c(i, false);
      break;
    case Transform::irfft:
      r.input_dtype = r.complex_dtype = complex_dtype_for(x.dtype());
      for (std::size_t i = k - 1; i-- > 0;) c2c(i, true);
      r.steps.push_back({FFTKind::c2r, true, axes[k - 1], s[k - 1], norm_scale(norm, s[k - 1], true)});
      break;
  }
  return r;
}

// Pads with zeros or crops `x` along `axis` to `length`.
Array resize_axis(const Array& x, std::int64_t axis, std::int64_t length, const Stream& stream, bool& owned) {
  const std::int64_t current = x.shape()[static_cast<std::size_t>(axis)];
  if (current == length) return x;
  if (current > length) return x.slice(axis, Slice(0, length));
  Shape shape = x.shape();
  shape[static_cast<std::size_t>(axis)] = length;
  Array padded = zeros(shape, x.dtype(), x.device(), stream);
  copyto(padded.slice(axis, Slice(0, current)), x, stream);
  owned = true;
  return padded;
}

// The batch dimensions of `rows` (all but the last) as one (count, dist), or false when their
// strides do not allow it. Size-1 dimensions are ignored; strides must be positive.
bool collapse_batch(const Array& rows, std::int64_t& count, std::int64_t& dist) {
  count = 1;
  dist = 0;
  std::int64_t expected = 0;  // the stride the next kept dimension must have times its size
  bool first = true;
  const std::size_t batch_dims = rows.shape().size() - 1;
  for (std::size_t i = 0; i < batch_dims; ++i) {
    const std::int64_t size = rows.shape()[i], stride = rows.strides()[i];
    if (size == 1) continue;
    if (size == 0) {
      count = 0;
      return true;
    }
    if (stride <= 0) return false;
    if (!first && expected != stride * size) return false;
    first = false;
    expected = stride;
    count *= size;
    dist = stride;
  }
  return true;
}

// One batched 1-D transform of `x` along step.axis. `plan_slot` (may be null) holds the
// backend plan a Plan object keeps for this step.
Array run_step(Array x, const Step& step, DType complex_dtype, bool& owned, const Stream& stream,
               std::shared_ptr<void>* plan_slot) {
  const Device device = x.device();
  const std::int64_t half = step.n / 2 + 1;
  const std::int64_t in_length = step.kind == FFTKind::c2r ? half : step.n;
  const std::int64_t out_length = step.kind == FFTKind::r2c ? half : step.n;
  x = resize_axis(x, step.axis, in_length, stream, owned);
  const auto [order, inverse] = detail::move_axis_last(x.ndim(), step.axis);
  Array rows = x.permute(order);

  backend::FFTProblem problem;
  problem.kind = step.kind;
  problem.dtype = complex_dtype;
  problem.inverse = step.inverse;
  problem.n = step.n;
  problem.scale = step.scale;
  std::int64_t batch = 0, dist = 0;
  std::int64_t axis_stride = rows.strides().back();
  if (in_length == 1) axis_stride = 1;
  // cuFFT overwrites the input of c2r transforms: never hand it the caller's data.
  const bool must_copy = step.kind == FFTKind::c2r && device.is_cuda() && !owned;
  if (must_copy || axis_stride <= 0 || !collapse_batch(rows, batch, dist)) {
    rows = rows.contiguous(stream);
    if (rows.storage() == x.storage() && must_copy) rows = rows.copy(stream);
    owned = true;
    axis_stride = 1;
    collapse_batch(rows, batch, dist);
  }
  if (batch == 1 || dist == 0) dist = in_length * axis_stride;  // ignored for one transform, but positive
  problem.batch = batch;
  problem.in = rows.data();
  problem.in_stride = axis_stride;
  problem.in_dist = dist;

  Shape out_shape = rows.shape();
  out_shape.back() = out_length;
  const DType out_dtype = step.kind == FFTKind::c2r ? to_real(complex_dtype) : complex_dtype;
  Array out = empty(out_shape, out_dtype, device, stream);
  problem.out = out.data();
  problem.out_stride = 1;
  problem.out_dist = out_length;
  if (batch > 0) {
    rows.storage()->wait_on_stream(stream);  // on the CPU, a host wait for a copy still landing
    // Only CUDA has plans (cuFFT's), and it leaves the scale to this layer.
    const bool cuda = device.is_cuda();
    if (cuda && plan_slot && !*plan_slot && problem.n > 1) *plan_slot = backend::cuda::fft_plan(problem, stream);
    backend::dispatch::fft(device, problem, cuda && plan_slot ? *plan_slot : std::shared_ptr<void>(), stream);
    out.storage()->record_pending_write(stream);  // nothing to record on the CPU
    if (cuda && step.scale != 1.0) multiply(out, Scalar(step.scale), out, stream);
  }
  owned = true;
  return out.permute(inverse);
}

// Runs resolved steps on x (cast first). plan_slots, when given, has one entry per step.
Array execute(const Array& x, const Resolved& r, const Stream& stream, std::vector<std::shared_ptr<void>>* plan_slots) {
  bool owned = false;
  Array current = x;
  if (current.dtype() != r.input_dtype) {
    current = astype(current, r.input_dtype, stream);
    owned = true;
  }
  if (r.steps.empty()) return owned ? current : current.copy(stream);
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    current = run_step(current, r.steps[i], r.complex_dtype, owned, stream, plan_slots ? &(*plan_slots)[i] : nullptr);
  }
  return current;
}

Array transform_nd(const Array& x, Transform transform, const OptionalAxes& s, const OptionalAxes& axes,
                   std::string_view norm, const OptionalStream& stream_arg, const char* op) {
  const Norm parsed = parse_norm(norm, op);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  const Resolved r = resolve(x, transform, s, axes, parsed, op);
  return execute(x, r, stream, nullptr);
}

Array transform_1d(const Array& x, Transform transform, OptionalLength n, std::int64_t axis, std::string_view norm,
                   const OptionalStream& stream, const char* op) {
  if (x.ndim() == 0) {
    throw IndexError(fmt::format("{}: axis {} is out of bounds for a 0-d array", op, axis));
  }
  OptionalAxes s;
  if (n) s = std::vector<std::int64_t>{*n};
  return transform_nd(x, transform, s, std::vector<std::int64_t>{axis}, norm, stream, op);
}

std::string_view swapped_norm(std::string_view norm, const char* op) {
  switch (parse_norm(norm, op)) {
    case Norm::backward:
      return "forward";
    case Norm::forward:
      return "backward";
    case Norm::ortho:
    default:
      return "ortho";
  }
}

std::string layout_str(const Shape& shape, const Strides& strides, DType dtype, Device device) {
  return fmt::format("shape {} strides {} {} on {}", shape_str(shape), shape_str(strides), dtype_name(dtype),
                     device.str());
}

}  // namespace

Norm parse_norm(std::string_view norm, const char* op) {
  if (norm == "backward") return Norm::backward;
  if (norm == "ortho") return Norm::ortho;
  if (norm == "forward") return Norm::forward;
  throw ValueError(fmt::format("{}: invalid norm \"{}\" (expected \"backward\", \"ortho\" or \"forward\")", op, norm));
}

Transform parse_transform(std::string_view name) {
  if (name == "fft") return Transform::fft;
  if (name == "ifft") return Transform::ifft;
  if (name == "rfft") return Transform::rfft;
  if (name == "irfft") return Transform::irfft;
  throw ValueError(fmt::format("fft.Plan: invalid transform \"{}\" (expected fft, ifft, rfft or irfft)", name));
}

Array fft(const Array& x, OptionalLength n, std::int64_t axis, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("fft", x, stream);
  return TESSEL_RESULT(transform_1d(x, Transform::fft, n, axis, norm, stream, "fft"));
}
Array ifft(const Array& x, OptionalLength n, std::int64_t axis, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("ifft", x, stream);
  return TESSEL_RESULT(transform_1d(x, Transform::ifft, n, axis, norm, stream, "ifft"));
}
Array rfft(const Array& x, OptionalLength n, std::int64_t axis, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("rfft", x, stream);
  return TESSEL_RESULT(transform_1d(x, Transform::rfft, n, axis, norm, stream, "rfft"));
}
Array irfft(const Array& x, OptionalLength n, std::int64_t axis, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("irfft", x, stream);
  return TESSEL_RESULT(transform_1d(x, Transform::irfft, n, axis, norm, stream, "irfft"));
}
Array hfft(const Array& x, OptionalLength n, std::int64_t axis, std::string_view norm, const OptionalStream& stream_arg) {
  TESSEL_RANGE("hfft", x, stream_arg);
  const Stream stream = detail::op_stream(x, stream_arg, "hfft");
  const std::string_view swapped = swapped_norm(norm, "hfft");
  const Array c = astype(x, complex_dtype_for(x.dtype()), stream);
  return TESSEL_RESULT(transform_1d(conj(c, std::nullopt, stream), Transform::irfft, n, axis, swapped, stream, "hfft"));
}
Array ihfft(const Array& x, OptionalLength n, std::int64_t axis, std::string_view norm, const OptionalStream& stream_arg) {
  TESSEL_RANGE("ihfft", x, stream_arg);
  const Stream stream = detail::op_stream(x, stream_arg, "ihfft");
  const std::string_view swapped = swapped_norm(norm, "ihfft");
  const Array spectrum = transform_1d(x, Transform::rfft, n, axis, swapped, stream, "ihfft");
  return TESSEL_RESULT(conj(spectrum, spectrum, stream));
}

Array fftn(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("fftn", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::fft, s, axes, norm, stream, "fftn"));
}
Array ifftn(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("ifftn", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::ifft, s, axes, norm, stream, "ifftn"));
}
Array rfftn(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("rfftn", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::rfft, s, axes, norm, stream, "rfftn"));
}
Array irfftn(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("irfftn", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::irfft, s, axes, norm, stream, "irfftn"));
}
Array fft2(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("fft2", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::fft, s, axes, norm, stream, "fft2"));
}
Array ifft2(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("ifft2", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::ifft, s, axes, norm, stream, "ifft2"));
}
Array rfft2(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("rfft2", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::rfft, s, axes, norm, stream, "rfft2"));
}
Array irfft2(const Array& x, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm, const OptionalStream& stream) {
  TESSEL_RANGE("irfft2", x, stream);
  return TESSEL_RESULT(transform_nd(x, Transform::irfft, s, axes, norm, stream, "irfft2"));
}

namespace {
Array frequencies(std::int64_t n, double d, DType dtype, Device device, const OptionalStream& stream, bool real,
                  const char* op) {
  if (n < 1) throw ValueError(fmt::format("{}: n must be >= 1, got {}", op, n));
  if (dtype != DType::float32 && dtype != DType::float64) {
    throw DTypeError(fmt::format("{}: dtype must be float32 or float64, got {}", op, dtype_name(dtype)));
  }
  const std::int64_t count = real ? n / 2 + 1 : n;
  std::vector<double> values(static_cast<std::size_t>(count));
  const double step = 1.0 / (static_cast<double>(n) * d);
  const std::int64_t positive = (n - 1) / 2 + 1;  // 0 .. ceil(n/2) - 1
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t k = real || i < positive ? i : i - n;
    values[static_cast<std::size_t>(i)] = static_cast<double>(k) * step;
  }
  Array result = from_host(values.data(), {count}, DType::float64, device, stream);
  return dtype == DType::float64 ? result : astype(result, dtype, stream);
}

Array roll_halves(const Array& x, const OptionalAxes& axes_arg, bool inverse, const OptionalStream& stream_arg,
                  const char* op) {
  const Stream stream = detail::op_stream(x, stream_arg, op);
  std::vector<std::int64_t> axes;
  if (axes_arg) {
    for (std::int64_t axis : *axes_arg) axes.push_back(normalize_axis(axis, x.ndim(), op));
  } else {
    for (std::int64_t i = 0; i < x.ndim(); ++i) axes.push_back(i);
  }
  Array result = x;
  bool copied = false;
  for (std::int64_t axis : axes) {
    const std::int64_t size = result.shape()[static_cast<std::size_t>(axis)];
    // fftshift rolls by size / 2: the last size / 2 elements move to the front; ifftshift rolls
    // back: the first size / 2 elements move to the end.
    const std::int64_t split = inverse ? size / 2 : size - size / 2;
    if (split == 0 || split == size) continue;
    result = concatenate({result.slice(axis, Slice(split, std::nullopt)), result.slice(axis, Slice(0, split))}, axis,
                         std::nullopt, stream);
    copied = true;
  }
  return copied ? result : x.copy(stream);
}
}  // namespace

Array fftfreq(std::int64_t n, double d, DType dtype, Device device, const OptionalStream& stream) {
  TESSEL_RANGE("fftfreq", stream);
  return frequencies(n, d, dtype, device, stream, false, "fftfreq");
}
Array rfftfreq(std::int64_t n, double d, DType dtype, Device device, const OptionalStream& stream) {
  TESSEL_RANGE("rfftfreq", stream);
  return frequencies(n, d, dtype, device, stream, true, "rfftfreq");
}
Array fftshift(const Array& x, const OptionalAxes& axes, const OptionalStream& stream) {
  TESSEL_RANGE("fftshift", x, stream);
  return roll_halves(x, axes, false, stream, "fftshift");
}
Array ifftshift(const Array& x, const OptionalAxes& axes, const OptionalStream& stream) {
  TESSEL_RANGE("ifftshift", x, stream);
  return roll_halves(x, axes, true, stream, "ifftshift");
}

// ---- Plan ----
struct Plan::Impl {
  Shape shape;
  Strides strides;
  DType dtype;
  Device device;
  Transform transform;
  Resolved resolved;
  // Backend plans, one per step, created on the first execution (on CUDA) and held from then
  // on, so the plan cache may evict them without affecting this plan.
  mutable std::mutex mutex;
  mutable std::vector<std::shared_ptr<void>> backend_plans;
};

Plan::Plan(const Array& like, Transform transform, const OptionalAxes& s, const OptionalAxes& axes, std::string_view norm)
    : impl_(std::make_unique<Impl>()) {
  const char* op = "fft.Plan";
  impl_->shape = like.shape();
  impl_->strides = like.strides();
  impl_->dtype = like.dtype();
  impl_->device = like.device();
  impl_->transform = transform;
  if (transform == Transform::irfft && axes && axes->empty()) {
    throw ValueError("fft.Plan: irfft needs at least one axis");
  }
  impl_->resolved = resolve(like, transform, s, axes, parse_norm(norm, op), op);
  impl_->backend_plans.resize(impl_->resolved.steps.size());
}

Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

std::string Plan::layout() const {
  return layout_str(impl_->shape, impl_->strides, impl_->dtype, impl_->device);
}
Transform Plan::transform() const { return impl_->transform; }

Array Plan::execute(const Array& x, const OptionalStream& stream_arg) const {
  TESSEL_RANGE("fft.Plan.execute", x, stream_arg);
  const Impl& p = *impl_;
  if (x.device() != p.device) {
    throw DeviceError(fmt::format("fft.Plan.execute: the plan is for {} but the array is on {}", p.device.str(),
                                  x.device().str()));
  }
  if (x.shape() != p.shape || x.strides() != p.strides || x.dtype() != p.dtype || x.device() != p.device) {
    throw ValueError(fmt::format("fft.Plan.execute: the plan is for {}, got {}", layout(),
                                 layout_str(x.shape(), x.strides(), x.dtype(), x.device())));
  }
  const Stream stream = detail::op_stream(x, stream_arg, "fft.Plan.execute");
  std::lock_guard<std::mutex> lock(p.mutex);
  return TESSEL_RESULT(fft::execute(x, p.resolved, stream, &p.backend_plans));
}

// ---- plan cache ----
PlanCacheInfo plan_cache_info(Device device) {
  PlanCacheInfo info;
  if (device.is_cuda() && cuda_available()) {  // never without CUDA
    const auto c = backend::cuda::fft_plan_cache_info(device.index);
    info = {c.plans, c.max_plans, c.workspace_bytes, c.max_workspace_bytes, c.hits, c.misses, c.evictions};
  }
  return info;
}

void set_plan_cache_limits(Device device, std::size_t max_plans, std::size_t max_workspace_bytes) {
  if (device.is_cuda() && cuda_available()) backend::cuda::set_fft_plan_cache_limits(device.index, max_plans, max_workspace_bytes);
}

void clear_plan_cache(Device device) {
  if (device.is_cuda() && cuda_available()) backend::cuda::clear_fft_plan_cache(device.index);
}

}  // namespace tessel::fft
