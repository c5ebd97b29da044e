#pragma once
// The key types of the CPU sort and set backends (the ops layer maps every dtype onto one of
// them, src/ops/sort_keys.hpp), their order, and their order-preserving unsigned images, which
// Highway's vqsort sorts (backend/cpu/sort.cpp).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

// The unsigned integer of the same width as key type T.
template <class T>
using KeyBits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

// An unsigned image of a key whose unsigned order is nan_last_less's order, with its ties:
// - signed integers: the sign bit flipped;
// - floats: negative values bit-inverted, the others with the sign bit set (IEEE order), and
//   then -0.0 mapped to the image of +0.0 and every NaN (any sign, any payload) to the largest
//   image, so that the values nan_last_less calls equal have one image.
// Integers map one to one; floats lose the sign of zero and NaN payloads (key_from_image gives
// +0.0 and the default NaN back), which the sort restores from the input where it matters.
template <class T>
KeyBits<T> key_image(T v) {
  using U = KeyBits<T>;
  constexpr U kSign = U{1} << (8 * sizeof(U) - 1);
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return std::numeric_limits<U>::max();
    if (v == T(0)) return kSign;  // +0.0 and -0.0
    U bits;
    std::memcpy(&bits, &v, sizeof(U));
    return (bits & kSign) ? static_cast<U>(~bits) : static_cast<U>(bits | kSign);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<U>(static_cast<U>(v) ^ kSign);
  } else {
    return v;
  }
}

// The key of an image (the inverse of key_image up to zeros' signs and NaN payloads).
template <class T>
T key_from_image(KeyBits<T> image) {
  using U = KeyBits<T>;
  constexpr U kSign = U{1} << (8 * sizeof(U) - 1);
  if constexpr (std::is_floating_point_v<T>) {
    if (image == std::numeric_limits<U>::max()) return std::numeric_limits<T>::quiet_NaN();
    const U bits = (image & kSign) ? static_cast<U>(image & ~kSign) : static_cast<U>(~image);
    T v;
    std::memcpy(&v, &bits, sizeof(U));
    return v;
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(image ^ kSign);
  } else {
    return image;
  }
}

// Whether key_from_image(key_image(v)) may differ from v in its bits (a zero or a NaN), so that
// the sort copies such keys from the input instead.
template <class T>
bool image_is_lossy(KeyBits<T> image) {
  if constexpr (std::is_floating_point_v<T>) {
    using U = KeyBits<T>;
    return image == std::numeric_limits<U>::max() || image == (U{1} << (8 * sizeof(U) - 1));
  } else {
    return false;
  }
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
