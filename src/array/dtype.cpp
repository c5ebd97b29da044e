#include "tessel/array/dtype.hpp"

#include <string>

#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel {

namespace {

struct DTypeAlias {
  const char* text;
  DType dtype;
};
// NumPy's other spellings of the same dtypes ("float" is Python's float, i.e. float64).
constexpr DTypeAlias dtype_aliases[] = {
    {"bool_", DType::bool_},      {"half", DType::float16},       {"single", DType::float32},
    {"double", DType::float64},   {"float", DType::float64},      {"int", DType::int64},
    {"complex", DType::complex128}, {"cfloat", DType::complex128}, {"csingle", DType::complex64},
    {"cdouble", DType::complex128}, {"byte", DType::int8},        {"ubyte", DType::uint8},
    {"short", DType::int16},      {"ushort", DType::uint16},      {"intc", DType::int32},
    {"uintc", DType::uint32},     {"longlong", DType::int64},     {"ulonglong", DType::uint64},
    {"f2", DType::float16},       {"f4", DType::float32},         {"f8", DType::float64},
    {"i1", DType::int8},          {"i2", DType::int16},           {"i4", DType::int32},
    {"i8", DType::int64},         {"u1", DType::uint8},           {"u2", DType::uint16},
    {"u4", DType::uint32},        {"u8", DType::uint64},          {"c8", DType::complex64},
    {"c16", DType::complex128},   {"?", DType::bool_},
};

// The smallest float (of float16/bfloat16 kind `floating`, then float32, then float64) that
// holds every value of an integer dtype exactly: significand bits >= integer value bits.
DType float_holding_integer(DType floating, DType integer) {
  const int needed = dtype_info(integer).bits_of_precision;
  for (DType candidate : {floating, DType::float32, DType::float64}) {
    if (itemsize(candidate) >= itemsize(floating) && dtype_info(candidate).bits_of_precision >= needed) {
      return candidate;
    }
  }
  return DType::float64;  // int64/uint64 go to float64 in NumPy, inexactly
}

DType promote_floats(DType a, DType b) {
  if (a == b) return a;
  // float16 and bfloat16 trade range for precision: neither holds the other.
  if (itemsize(a) == itemsize(b)) return DType::float32;
  return itemsize(a) > itemsize(b) ? a : b;
}

DType signed_integer_of_size(std::int64_t bytes) {
  switch (bytes) {
    case 1: return DType::int8;
    case 2: return DType::int16;
    case 4: return DType::int32;
    case 8: return DType::int64;
    default: return DType::float64;  // beyond int64: NumPy falls back to float64
  }
}

DType promote_integers(DType a, DType b) {
  if (is_signed_integer(a) == is_signed_integer(b)) return itemsize(a) >= itemsize(b) ? a : b;
  const DType signed_one = is_signed_integer(a) ? a : b;
  const DType unsigned_one = is_signed_integer(a) ? b : a;
  if (itemsize(signed_one) > itemsize(unsigned_one)) return signed_one;
  return signed_integer_of_size(2 * itemsize(unsigned_one));
}

// The promotion rules; result_type reads the table built from them once.
DType compute_result_type(DType a, DType b) {
  if (a == b) return a;
  if (is_bool(a)) return b;
  if (is_bool(b)) return a;
  if (is_complex(a) || is_complex(b)) {
    return to_complex(compute_result_type(to_real(a), to_real(b)));
  }
  if (is_floating(a) && is_floating(b)) return promote_floats(a, b);
  if (is_floating(a)) return float_holding_integer(a, b);
  if (is_floating(b)) return float_holding_integer(b, a);
  return promote_integers(a, b);
}

struct PromotionTable {
  DType entries[num_dtypes][num_dtypes];
  PromotionTable() {
    for (int i = 0; i < num_dtypes; ++i) {
      for (int j = 0; j < num_dtypes; ++j) {
        entries[i][j] = compute_result_type(static_cast<DType>(i), static_cast<DType>(j));
      }
    }
  }
};

const PromotionTable& promotion_table() {
  static const PromotionTable table;
  return table;
}

void check_dtype(DType dtype, const char* op) {
  if (static_cast<unsigned>(dtype) >= static_cast<unsigned>(num_dtypes)) {
    throw DTypeError(std::string(op) + ": invalid dtype value " + std::to_string(static_cast<int>(dtype)));
  }
}

}  // namespace

namespace detail {
void throw_invalid_dtype(int value) {
  throw DTypeError("invalid dtype value " + std::to_string(value) + " (not one of the " +
                   std::to_string(num_dtypes) + " tessel dtypes)");
}
}  // namespace detail

DType parse_dtype(std::string_view text) {
  for (const DTypeInfo& info : dtype_table) {
    if (text == info.name) return info.dtype;
  }
  for (const DTypeAlias& alias : dtype_aliases) {
    if (text == alias.text) return alias.dtype;
  }
  std::string known;
  for (const DTypeInfo& info : dtype_table) {
    known += known.empty() ? "" : ", ";
    known += info.name;
  }
  throw DTypeError("unsupported dtype '" + std::string(text) + "' (tessel dtypes: " + known + ")");
}

std::string str(DType dtype) {
  check_dtype(dtype, "str");
  return dtype_name(dtype);
}

DType to_complex(DType dtype) {
  switch (dtype) {
    case DType::float16:
    case DType::bfloat16:
    case DType::float32:
    case DType::complex64: return DType::complex64;
    default: return DType::complex128;  // float64, complex128, and the integers as NumPy promotes them
  }
}

DType to_real(DType dtype) {
  if (dtype == DType::complex64) return DType::float32;
  if (dtype == DType::complex128) return DType::float64;
  return dtype;
}

DType result_type(DType a, DType b) {
  check_dtype(a, "result_type");
  check_dtype(b, "result_type");
  return promotion_table().entries[static_cast<int>(a)][static_cast<int>(b)];
}

DType result_type(DType array, ScalarKind scalar) {
  check_dtype(array, "result_type");
  switch (scalar) {
    case ScalarKind::bool_: return array;
    case ScalarKind::int_: return is_bool(array) ? DType::int64 : array;
    case ScalarKind::float_: return is_inexact(array) ? array : DType::float64;
    case ScalarKind::complex_: return is_inexact(array) ? to_complex(array) : DType::complex128;
  }
  throw DTypeError("result_type: invalid scalar kind " + std::to_string(static_cast<int>(scalar)));
}

bool can_cast_safely(DType from, DType to) { return result_type(from, to) == to; }

bool can_cast_same_kind(DType from, DType to) {
  auto kind_rank = [](DType d) {
    switch (dtype_kind(d)) {
      case DTypeKind::boolean: return 0;
      case DTypeKind::unsigned_int: return 1;
      case DTypeKind::signed_int: return 2;
      case DTypeKind::floating: return 3;
      case DTypeKind::complex: return 4;
    }
    return 0;
  };
  return can_cast_safely(from, to) || kind_rank(from) <= kind_rank(to);
}

}  // namespace tessel
