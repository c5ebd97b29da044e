// sort, argsort, searchsorted and unique: validation, key widening and backend dispatch.
// Keys are widened to one of six key dtypes (see backend/sort.hpp) so CUB is instantiated for
// those only: bool/int8/int16 -> int32, uint8/uint16 -> uint32, float16/bfloat16 -> float32.
// The widening is exact, so sorted keys cast back unchanged.
#include "tessel/ops/cast.hpp"
#include "tessel/ops/sort.hpp"

#include <cmath>
#include <complex>
#include <cstring>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "array/backend.hpp"
#include "ops/axis_last.hpp"
#include "ops/op_stream.hpp"
#include "ops/sort_keys.hpp"
#include "backend/sort.hpp"
#include "tessel/core/error.hpp"
#include "ops/checks.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/profile/range.hpp"

namespace tessel {
namespace {

using detail::run_sort;

DType key_dtype(DType dtype, const char* op) { return detail::sort_key_dtype(dtype, op); }

// Sorts (want_keys) and/or argsorts (want_indices) along `axis`.
std::pair<Array, Array> sort_along(const Array& a, std::int64_t axis_arg, bool want_keys, bool want_indices,
                                   const char* op, const OptionalStream& stream_arg) {
  const DType key = key_dtype(a.dtype(), op);
  const Stream stream = detail::op_stream(a, stream_arg, op);
  Array input = a;
  if (a.ndim() == 0) input = a.reshape({1}, stream);  // NumPy sorts a 0-d array as one element
  const std::int64_t axis = normalize_axis(axis_arg, a.ndim() == 0 ? 1 : a.ndim(), op);
  const std::int64_t ndim = input.ndim();
  const auto [order, inverse] = detail::move_axis_last(ndim, axis);
  Array rows = input.permute(order);
  rows = rows.dtype() == key ? rows.contiguous(stream) : astype(rows, key, stream);
  Array keys_out, indices_out;
  if (want_keys) keys_out = empty(rows.shape(), key, a.device(), stream);
  if (want_indices) indices_out = empty(rows.shape(), DType::int64, a.device(), stream);
  if (rows.size() > 0) {
    rows.storage()->wait_on_stream(stream);  // the CPU waits too: rows may be landing from a device copy
    backend::SortProblem problem;
    problem.dtype = key;
    problem.keys_in = rows.data();
    problem.keys_out = want_keys ? keys_out.data() : nullptr;
    problem.indices_out = want_indices ? indices_out.data_as<std::int64_t>() : nullptr;
    problem.len = rows.shape().back();
    problem.rows = rows.size() / problem.len;
    run_sort(problem, a.device(), stream);
    if (a.device().is_cuda()) {
      if (want_keys) keys_out.storage()->record_pending_write(stream);
      if (want_indices) indices_out.storage()->record_pending_write(stream);
    }
  }
  auto restore = [&](const Array& r, DType dtype) {
    Array back = r.permute(inverse);
    back = back.dtype() == dtype ? back.contiguous(stream) : astype(back, dtype, stream);
    return a.ndim() == 0 ? back.reshape({}, stream) : back;
  };
  Array keys_result = want_keys ? restore(keys_out, a.dtype()) : Array();
  Array indices_result = want_indices ? restore(indices_out, DType::int64) : Array();
  return {keys_result, indices_result};
}

}  // namespace

Array sort(const Array& a, std::int64_t axis, const OptionalStream& stream) {
  TESSEL_RANGE("sort", a, stream);
  return TESSEL_RESULT(sort_along(a, axis, true, false, "sort", stream).first);
}

Array argsort(const Array& a, std::int64_t axis, const OptionalStream& stream) {
  TESSEL_RANGE("argsort", a, stream);
  return sort_along(a, axis, false, true, "argsort", stream).second;
}

Array searchsorted(const Array& sorted, const Array& values, bool right, const OptionalStream& stream_arg) {
  TESSEL_RANGE("searchsorted", sorted, values, stream_arg);
  if (sorted.ndim() != 1) {
    throw ValueError(fmt::format("searchsorted: the sorted array must be 1-D, got shape {}", shape_str(sorted.shape())));
  }
  if (sorted.device() != values.device()) {
    throw DeviceError(fmt::format("searchsorted: the sorted array is on {} but the values are on {}",
                                  sorted.device().str(), values.device().str()));
  }
  key_dtype(sorted.dtype(), "searchsorted");
  key_dtype(values.dtype(), "searchsorted");
  const DType key = key_dtype(result_type(sorted.dtype(), values.dtype()), "searchsorted");
  const Stream stream = detail::op_stream(sorted, stream_arg, "searchsorted");
  const Array s = sorted.dtype() == key ? sorted.contiguous(stream) : astype(sorted, key, stream);
  const Array v = values.dtype() == key ? values.contiguous(stream) : astype(values, key, stream);
  Array out = empty(values.shape(), DType::int64, values.device(), stream);
  if (out.size() > 0) {
    backend::SearchProblem problem;
    problem.dtype = key;
    problem.sorted = s.data();
    problem.sorted_len = s.size();
    problem.values = v.data();
    problem.count = v.size();
    problem.out = out.data_as<std::int64_t>();
    problem.right = right;
    if (out.device().is_cuda()) {
      s.storage()->wait_on_stream(stream);
      v.storage()->wait_on_stream(stream);
    }
    backend::dispatch::searchsorted(out.device(), problem, stream);
    out.storage()->record_pending_write(stream);
  }
  return out;
}

UniqueResult unique(const Array& a, bool return_counts, const OptionalStream& stream_arg) {
  TESSEL_RANGE("unique", a, stream_arg);
  key_dtype(a.dtype(), "unique");
  const Stream stream = detail::op_stream(a, stream_arg, "unique");
  // The output size depends on the data: sort on the device, then find the runs on the host
  // (one read of the sorted keys, which a device run-length encode would also need for its count).
  const Array sorted = sort(a.reshape({a.size()}, stream), -1, stream);
  const Array host = sorted.to(Device::cpu(), stream);
  host.wait();
  const std::int64_t n = host.size();
  const std::int64_t width = host.itemsize();
  const auto* bytes = static_cast<const unsigned char*>(host.data());
  std::vector<std::int64_t> starts;
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto value = [&](std::int64_t i) {
      T x;
      std::memcpy(&x, bytes + i * width, sizeof(T));
      return x;
    };
    // Compared as a comparable host type (half types as float); complex never gets here
    // (key_dtype rejected it above) but has to compile.
    auto widen = [](const T& x) {
      if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
        return static_cast<double>(static_cast<float>(x));
      } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        return static_cast<double>(x.real());
      } else {
        return x;
      }
    };
    auto nan = [&](const T& x) {
      const auto w = widen(x);
      if constexpr (std::is_floating_point_v<decltype(w)>) {
        return std::isnan(w);
      } else {
        return false;
      }
    };
    for (std::int64_t i = 0; i < n; ++i) {
      if (i == 0) {
        starts.push_back(0);
        continue;
      }
      const T prev = value(i - 1), cur = value(i);
      const bool same = (nan(prev) && nan(cur)) || (!nan(prev) && !nan(cur) && widen(prev) == widen(cur));
      if (!same) starts.push_back(i);
    }
  });
  const std::int64_t runs = static_cast<std::int64_t>(starts.size());
  std::vector<unsigned char> unique_bytes(static_cast<std::size_t>(runs * width));
  std::vector<std::int64_t> counts(static_cast<std::size_t>(runs));
  for (std::int64_t r = 0; r < runs; ++r) {
    const std::int64_t start = starts[static_cast<std::size_t>(r)];
    const std::int64_t end = r + 1 < runs ? starts[static_cast<std::size_t>(r + 1)] : n;
    std::memcpy(unique_bytes.data() + r * width, bytes + start * width, static_cast<std::size_t>(width));
    counts[static_cast<std::size_t>(r)] = end - start;
  }
  UniqueResult result;
  result.values = from_host(unique_bytes.data(), {runs}, a.dtype(), a.device(), stream);
  if (return_counts) result.counts = from_host(counts.data(), {runs}, DType::int64, a.device(), stream);
  return result;
}

}  // namespace tessel
