// unique_all, isin and repeat: validation, key widening, the sort, and backend dispatch.
// The sort is the one of sort/argsort (radix sort on CUDA) through ops/sort_keys.hpp.
#include "tessel/ops/set_ops.hpp"

#include <vector>

#include <fmt/format.h>

#include "array/backend.hpp"
#include "backend/set_ops.hpp"
#include "ops/op_stream.hpp"
#include "ops/sort_keys.hpp"
#include "tessel/core/error.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/reduce.hpp"

namespace tessel {
namespace {

// A flat contiguous copy (or view) of `a` in the key dtype.
Array flat_keys(const Array& a, DType key, const Stream& stream) {
  Array flat = a.reshape({a.size()}, stream);
  return flat.dtype() == key ? flat.contiguous(stream) : astype(flat, key, stream);
}

void check_same_device(const Array& a, const Array& b, const char* op, const char* a_name, const char* b_name) {
  if (a.device() != b.device()) {
    throw DeviceError(fmt::format("{}: {} is on {} but {} is on {}", op, a_name, a.device().str(), b_name,
                                  b.device().str()));
  }
}

}  // namespace

UniqueAllResult unique_all(const Array& x, UniqueParts parts, const OptionalStream& stream_arg) {
  TESSEL_RANGE("unique_all");
  const char* op = "unique_all";
  const DType key = detail::sort_key_dtype(x.dtype(), op);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  const Device device = x.device();
  const std::int64_t n = x.size();
  UniqueAllResult result;
  if (n == 0) {
    result.values = empty({0}, x.dtype(), device, stream);
    if (parts.indices) result.indices = empty({0}, DType::int64, device, stream);
    if (parts.inverse) result.inverse_indices = empty(x.shape(), DType::int64, device, stream);
    if (parts.counts) result.counts = empty({0}, DType::int64, device, stream);
    return result;
  }
  const bool want_order = parts.indices || parts.inverse;
  const Array keys = flat_keys(x, key, stream);
  keys.storage()->wait_on_stream(stream);  // the CPU waits too: the keys may be landing from a device copy
  const Array sorted = empty({n}, key, device, stream);
  const Array order = want_order ? empty({n}, DType::int64, device, stream) : Array();
  backend::SortProblem sort;
  sort.dtype = key;
  sort.keys_in = keys.data();
  sort.keys_out = sorted.data();
  sort.indices_out = want_order ? order.data_as<std::int64_t>() : nullptr;
  sort.rows = 1;
  sort.len = n;
  detail::run_sort(sort, device, stream);

  const Array rank = empty({n}, DType::int64, device, stream);
  backend::UniqueProblem problem;
  problem.dtype = key;
  problem.sorted = sorted.data();
  problem.order = want_order ? order.data_as<std::int64_t>() : nullptr;
  problem.n = n;
  problem.rank = rank.data_as<std::int64_t>();
  const std::int64_t count = backend::dispatch::unique_rank(device, problem, stream);

  Array values = empty({count}, key, device, stream);
  backend::UniqueOutputs out;
  out.values = values.data();
  Array starts;
  if (parts.indices) {
    result.indices = empty({count}, DType::int64, device, stream);
    out.indices = result.indices.data_as<std::int64_t>();
  }
  if (parts.inverse) {
    result.inverse_indices = empty({n}, DType::int64, device, stream);
    out.inverse = result.inverse_indices.data_as<std::int64_t>();
  }
  if (parts.counts) {
    result.counts = empty({count}, DType::int64, device, stream);
    starts = empty({count}, DType::int64, device, stream);
    out.counts = result.counts.data_as<std::int64_t>();
    out.starts = starts.data_as<std::int64_t>();
  }
  backend::dispatch::unique_write(device, problem, out, count, stream);
  if (device.is_cuda()) {
    for (const Array* a : {&values, &result.indices, &result.inverse_indices, &result.counts}) {
      if (a->storage()) a->storage()->record_pending_write(stream);
    }
  }
  result.values = key == x.dtype() ? values : astype(values, x.dtype(), stream);
  if (parts.inverse) result.inverse_indices = result.inverse_indices.reshape(x.shape(), stream);
  return result;
}

Array isin(const Array& x1, const Array& x2, bool invert, const OptionalStream& stream_arg) {
  TESSEL_RANGE("isin");
  const char* op = "isin";
  check_same_device(x1, x2, op, "x1", "x2");
  detail::sort_key_dtype(x1.dtype(), op);
  detail::sort_key_dtype(x2.dtype(), op);
  const DType key = detail::sort_key_dtype(result_type(x1.dtype(), x2.dtype()), op);
  const Stream stream = detail::op_stream(x1, stream_arg, op);
  const Device device = x1.device();
  if (x1.size() == 0 || x2.size() == 0) return full(x1.shape(), Scalar(invert), DType::bool_, device, stream);
  const Array values = flat_keys(x1, key, stream);
  const Array keys = flat_keys(x2, key, stream);
  values.storage()->wait_on_stream(stream);
  keys.storage()->wait_on_stream(stream);
  const Array sorted = empty({keys.size()}, key, device, stream);
  backend::SortProblem sort;
  sort.dtype = key;
  sort.keys_in = keys.data();
  sort.keys_out = sorted.data();
  sort.rows = 1;
  sort.len = keys.size();
  detail::run_sort(sort, device, stream);
  Array out = empty(x1.shape(), DType::bool_, device, stream);
  backend::IsinProblem problem;
  problem.dtype = key;
  problem.sorted = sorted.data();
  problem.n2 = sorted.size();
  problem.values = values.data();
  problem.n1 = values.size();
  problem.out = out.data_as<bool>();
  problem.invert = invert;
  backend::dispatch::isin(device, problem, stream);
  if (device.is_cuda()) out.storage()->record_pending_write(stream);
  return out;
}

namespace {

struct RepeatAxis {
  Array source;       // x, flattened when there is no axis
  std::int64_t axis;  // normalized
};

RepeatAxis repeat_axis(const Array& x, std::optional<std::int64_t> axis, const Stream& stream) {
  if (!axis) return {x.reshape({x.size()}, stream), 0};
  if (x.ndim() == 0) {
    throw ValueError(fmt::format("repeat: axis {} is out of bounds for a 0-d array (use axis=None)", *axis));
  }
  return {x, normalize_axis(*axis, x.ndim(), "repeat")};
}

Shape with_axis(Shape shape, std::int64_t axis, std::int64_t size) {
  shape[static_cast<std::size_t>(axis)] = size;
  return shape;
}

}  // namespace

Array repeat(const Array& x, std::int64_t repeats, std::optional<std::int64_t> axis, const OptionalStream& stream_arg) {
  TESSEL_RANGE("repeat");
  if (repeats < 0) throw ValueError(fmt::format("repeat: repeats must be non-negative, got {}", repeats));
  const Stream stream = detail::op_stream(x, stream_arg, "repeat");
  const RepeatAxis r = repeat_axis(x, axis, stream);
  const Shape& shape = r.source.shape();
  const auto a = static_cast<std::size_t>(r.axis);
  // (..., len, 1, ...) broadcast to (..., len, repeats, ...), then one contiguous copy.
  Shape expanded(shape.begin(), shape.end());
  expanded.insert(expanded.begin() + static_cast<std::ptrdiff_t>(a) + 1, 1);
  Shape broadcast = expanded;
  broadcast[a + 1] = repeats;
  const Array wide = r.source.reshape(expanded, stream).broadcast_to(broadcast).copy(stream);
  return wide.reshape(with_axis(shape, r.axis, shape[a] * repeats), stream);
}

Array repeat(const Array& x, const Array& repeats, std::optional<std::int64_t> axis, const OptionalStream& stream_arg) {
  TESSEL_RANGE("repeat");
  const char* op = "repeat";
  check_same_device(x, repeats, op, "x", "repeats");
  const DTypeKind kind = dtype_kind(repeats.dtype());
  if (kind != DTypeKind::signed_int && kind != DTypeKind::unsigned_int) {
    throw DTypeError(fmt::format("repeat: repeats must have an integer dtype, got {}", dtype_name(repeats.dtype())));
  }
  const Stream stream = detail::op_stream(x, stream_arg, op);
  const RepeatAxis r = repeat_axis(x, axis, stream);
  const Shape& shape = r.source.shape();
  const auto a = static_cast<std::size_t>(r.axis);
  const std::int64_t len = shape[a];
  if (repeats.ndim() > 1 || (repeats.size() != 1 && repeats.size() != len)) {
    throw ShapeError(fmt::format("repeat: repeats of shape {} does not broadcast to the {} elements along {}",
                                 shape_str(repeats.shape()), len, axis ? fmt::format("axis {}", *axis) : "the flattened x"));
  }
  const Array counts = astype(repeats.reshape({repeats.size()}, stream), DType::int64, stream)
                           .broadcast_to({len})
                           .contiguous(stream);
  if (len == 0) return empty(shape, x.dtype(), x.device(), stream);
  const Array ends = cumsum(counts, 0, stream);
  // The smallest count and the total come back together: the op's one synchronization.
  const Array stats = concatenate({min(counts, std::nullopt, false, stream).reshape({1}, stream),
                                   ends.slice(0, Slice(len - 1, len))},
                                  0, std::nullopt, stream);
  const std::vector<std::int64_t> host = stats.to(Device::cpu(), stream).to_vector<std::int64_t>();
  if (host[0] < 0) throw ValueError(fmt::format("repeat: repeats must be non-negative, got {}", host[0]));
  const std::int64_t total = host[1];
  const Array in = r.source.contiguous(stream);
  Array out = empty(with_axis(shape, r.axis, total), x.dtype(), x.device(), stream);
  if (out.size() == 0) return out;
  in.storage()->wait_on_stream(stream);
  ends.storage()->wait_on_stream(stream);
  backend::RepeatProblem problem;
  problem.in = in.data();
  problem.out = out.data();
  problem.ends = ends.data_as<std::int64_t>();
  problem.len = len;
  problem.total = total;
  problem.itemsize = x.itemsize();
  for (std::size_t i = 0; i < a; ++i) problem.outer *= shape[i];
  for (std::size_t i = a + 1; i < shape.size(); ++i) problem.inner *= shape[i];
  backend::dispatch::repeat(x.device(), problem, stream);
  if (x.device().is_cuda()) out.storage()->record_pending_write(stream);
  return out;
}

}  // namespace tessel
