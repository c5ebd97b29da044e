#pragma once
// The sort keys shared by sort, argsort, searchsorted, unique and isin: the six key dtypes the
// backends instantiate (bool/int8/int16 -> int32, uint8/uint16 -> uint32, float16/bfloat16 ->
// float32; the widening is exact) and the dispatch of one sort to the array's device.
#include <fmt/format.h>

#include "backend/sort.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"

namespace tessel::detail {

struct SortKeyRule {
  DType from;
  DType key;
};
inline constexpr SortKeyRule sort_key_rules[] = {
    {DType::bool_, DType::int32},     {DType::int8, DType::int32},       {DType::int16, DType::int32},
    {DType::int32, DType::int32},     {DType::int64, DType::int64},      {DType::uint8, DType::uint32},
    {DType::uint16, DType::uint32},   {DType::uint32, DType::uint32},    {DType::uint64, DType::uint64},
    {DType::float16, DType::float32}, {DType::bfloat16, DType::float32}, {DType::float32, DType::float32},
    {DType::float64, DType::float64},
};

// The key dtype of `dtype`; DTypeError naming `op` for complex dtypes.
inline DType sort_key_dtype(DType dtype, const char* op) {
  for (const SortKeyRule& rule : sort_key_rules) {
    if (rule.from == dtype) return rule.key;
  }
  throw DTypeError(fmt::format("{}: dtype {} is not supported (complex sorting is not implemented)", op,
                               dtype_name(dtype)));
}

inline void run_sort(const backend::SortProblem& problem, Device device, const Stream& stream) {
  backend::dispatch::sort(device, problem, stream);
}

}  // namespace tessel::detail
