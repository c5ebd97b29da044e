#include "tessel/ops/random.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "backend/random.hpp"
#include "ops/op_stream.hpp"
#include "tessel/core/error.hpp"
#include "ops/checks.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/profile/range.hpp"

namespace tessel::random {
namespace {

using backend::RandomDistribution;

void check_float_dtype(const char* op, DType dtype) {
  if (!is_floating(dtype)) {
    throw DTypeError(fmt::format("{}: dtype {} is not supported; use float16, bfloat16, float32 or float64", op,
                                 dtype_name(dtype)));
  }
}

void check_finite(const char* op, const char* name, double value) {
  if (!std::isfinite(value)) throw ValueError(fmt::format("{}: {} must be finite, got {}", op, name, value));
}

// The inclusive range an integer dtype holds, as int64 bounds clipped to int64.
std::pair<long double, long double> integer_limits(DType dtype) {
  const auto bits = dtype_info(dtype).bits_of_precision;
  if (is_unsigned_integer(dtype)) return {0.0L, std::ldexp(1.0L, bits) - 1};
  return {-std::ldexp(1.0L, bits - 1), std::ldexp(1.0L, bits - 1) - 1};
}

Array draw(std::uint64_t seed, std::uint64_t offset, const Shape& shape, DType dtype, Device device,
           const OptionalStream& stream, backend::RandomFill fill) {
  const Stream s = detail::op_stream(device, stream, "random");
  Array out = empty(shape, dtype, device, s);
  fill.out = out.data();
  fill.dtype = dtype;
  fill.numel = out.size();
  fill.seed = seed;
  fill.offset = offset;
  if (fill.numel == 0) return out;
  backend::dispatch::random_fill(device, fill, s);
  out.storage()->record_pending_write(s);
  return out;
}

}  // namespace

Array Generator::uniform(const Shape& shape, double low, double high, DType dtype, Device device,
                         const OptionalStream& stream) {
  TESSEL_RANGE("random.uniform", dtype_name(dtype), stream);
  check_float_dtype("uniform", dtype);
  check_finite("uniform", "low", low);
  check_finite("uniform", "high", high);
  if (!(low <= high)) throw ValueError(fmt::format("uniform: low ({}) must be <= high ({})", low, high));
  backend::RandomFill fill;
  fill.distribution = RandomDistribution::uniform;
  fill.a = low;
  fill.b = high;
  return draw(seed_, offset_.fetch_add(1), shape, dtype, device, stream, fill);
}

Array Generator::normal(const Shape& shape, double mean, double stddev, DType dtype, Device device,
                        const OptionalStream& stream) {
  TESSEL_RANGE("random.normal", dtype_name(dtype), stream);
  check_float_dtype("normal", dtype);
  check_finite("normal", "mean", mean);
  check_finite("normal", "stddev", stddev);
  if (stddev < 0) throw ValueError(fmt::format("normal: stddev must be >= 0, got {}", stddev));
  backend::RandomFill fill;
  fill.distribution = RandomDistribution::normal;
  fill.a = mean;
  fill.b = stddev;
  return draw(seed_, offset_.fetch_add(1), shape, dtype, device, stream, fill);
}

Array Generator::integers(const Shape& shape, std::int64_t low, std::int64_t high, DType dtype, Device device,
                          const OptionalStream& stream) {
  TESSEL_RANGE("random.integers", dtype_name(dtype), stream);
  if (!is_integer(dtype)) {
    throw DTypeError(fmt::format("integers: dtype {} is not an integer dtype", dtype_name(dtype)));
  }
  if (low >= high) throw ValueError(fmt::format("integers: low ({}) must be < high ({})", low, high));
  const auto [min, max] = integer_limits(dtype);
  if (static_cast<long double>(low) < min || static_cast<long double>(high) - 1 > max) {
    throw ValueError(fmt::format("integers: [{}, {}) does not fit in {}", low, high, dtype_name(dtype)));
  }
  backend::RandomFill fill;
  fill.distribution = RandomDistribution::integers;
  fill.low = low;
  // high - low can exceed int64 (e.g. the whole int64 range): compute it in uint64.
  fill.range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  return draw(seed_, offset_.fetch_add(1), shape, dtype, device, stream, fill);
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void seed(std::uint64_t value) { default_generator().set_state(value, 0); }

Array uniform(const Shape& shape, double low, double high, DType dtype, Device device, const OptionalStream& stream) {
  return default_generator().uniform(shape, low, high, dtype, device, stream);
}
Array normal(const Shape& shape, double mean, double stddev, DType dtype, Device device, const OptionalStream& stream) {
  return default_generator().normal(shape, mean, stddev, dtype, device, stream);
}
Array integers(const Shape& shape, std::int64_t low, std::int64_t high, DType dtype, Device device,
               const OptionalStream& stream) {
  return default_generator().integers(shape, low, high, dtype, device, stream);
}

}  // namespace tessel::random
