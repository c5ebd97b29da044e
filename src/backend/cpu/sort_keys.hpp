#pragma once
// The key types of the CPU sort and set backends (the ops layer maps every dtype onto one of
// them, src/ops/sort_keys.hpp) and their order.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {

// a < b with every NaN greater than every number (and NaNs equal to each other).
template <class T>
bool nan_last_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// f(TypeTag<T>{}) for the key type of `dtype`; `op` names the caller in the internal error.
template <class F>
void dispatch_sort_key(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::int32: return f(TypeTag<std::int32_t>{});
    case DType::int64: return f(TypeTag<std::int64_t>{});
    case DType::uint32: return f(TypeTag<std::uint32_t>{});
    case DType::uint64: return f(TypeTag<std::uint64_t>{});
    case DType::float32: return f(TypeTag<float>{});
    case DType::float64: return f(TypeTag<double>{});
    default: throw DTypeError(std::string(op) + ": internal error, key dtype " + dtype_name(dtype));
  }
}

}  // namespace tessel::backend::cpu
