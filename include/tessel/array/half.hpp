#pragma once
// Host storage types for the 16-bit floats: tessel::float16 (IEEE binary16) and
// tessel::bfloat16 (the top half of a float32). Conversions round to nearest, ties to even,
// keep the sign of zero, map overflow to infinity and keep NaN a (quiet) NaN. Conversion from
// double rounds once, directly (not through float), so float64 -> float16 matches NumPy.
#include <cstdint>
#include <cstring>

namespace tessel {

namespace detail {

inline std::uint64_t double_bits(double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float float_from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Rounds a double to a binary format with kExponentBits and kMantissaBits (stored bits, without
// the implicit one) in at most 16 bits. Every float is exactly a double, so this serves both.
template <int kExponentBits, int kMantissaBits>
std::uint16_t round_to_small_float(double value) {
  constexpr int bias = (1 << (kExponentBits - 1)) - 1;
  constexpr std::uint64_t infinity_bits = ((std::uint64_t{1} << kExponentBits) - 1) << kMantissaBits;
  constexpr int double_mantissa_bits = 52;
  const std::uint64_t bits = double_bits(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 63) << (kExponentBits + kMantissaBits));
  const std::uint64_t magnitude = bits & 0x7fffffffffffffffULL;
  if (magnitude >= 0x7ff0000000000000ULL) {
    if (magnitude == 0x7ff0000000000000ULL) return static_cast<std::uint16_t>(sign | infinity_bits);
    // NaN: keep the top payload bits and force the quiet bit so it never becomes infinity.
    const std::uint64_t payload = (magnitude >> (double_mantissa_bits - kMantissaBits)) &
                                  ((std::uint64_t{1} << kMantissaBits) - 1);
    return static_cast<std::uint16_t>(sign | infinity_bits | payload |
                                      (std::uint64_t{1} << (kMantissaBits - 1)));
  }
  // Double subnormals (and zero) are far below half the smallest target subnormal.
  if (magnitude < 0x0010000000000000ULL) return sign;
  const int biased_exponent = static_cast<int>(magnitude >> double_mantissa_bits) - 1023 + bias;
  const std::uint64_t significand =
      (magnitude & ((std::uint64_t{1} << double_mantissa_bits) - 1)) | (std::uint64_t{1} << double_mantissa_bits);
  // Low significand bits to drop: more of them when the result is subnormal.
  int dropped = double_mantissa_bits - kMantissaBits;
  if (biased_exponent < 1) dropped += 1 - biased_exponent;
  if (dropped > double_mantissa_bits + 1) return sign;  // below half the smallest subnormal
  std::uint64_t kept = significand >> dropped;
  const std::uint64_t remainder = significand & ((std::uint64_t{1} << dropped) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (dropped - 1);
  if (remainder > halfway || (remainder == halfway && (kept & 1))) ++kept;
  // For normals the implicit one in `kept` adds one to the exponent field; a carry out of the
  // mantissa moves to the next binade (or from the largest subnormal to the smallest normal).
  const std::uint64_t result =
      biased_exponent >= 1 ? (static_cast<std::uint64_t>(biased_exponent - 1) << kMantissaBits) + kept : kept;
  if (result >= infinity_bits) return static_cast<std::uint16_t>(sign | infinity_bits);
  return static_cast<std::uint16_t>(sign | result);
}

inline float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace detail

struct float16 {
  std::uint16_t bits = 0;

  float16() = default;
  explicit float16(double value) : bits(detail::round_to_small_float<5, 10>(value)) {}
  explicit float16(float value) : float16(static_cast<double>(value)) {}
  static float16 from_bits(std::uint16_t raw) {
    float16 result;
    result.bits = raw;
    return result;
  }
  explicit operator float() const { return detail::half_bits_to_float(bits); }
  explicit operator double() const { return static_cast<double>(static_cast<float>(*this)); }
};

struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(double value) : bits(detail::round_to_small_float<8, 7>(value)) {}
  explicit bfloat16(float value) : bfloat16(static_cast<double>(value)) {}
  static bfloat16 from_bits(std::uint16_t raw) {
    bfloat16 result;
    result.bits = raw;
    return result;
  }
  explicit operator float() const { return detail::float_from_bits(static_cast<std::uint32_t>(bits) << 16); }
  explicit operator double() const { return static_cast<double>(static_cast<float>(*this)); }
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2, "16-bit float storage must be 2 bytes");

}  // namespace tessel
