#pragma once
// A 128-bit non-cryptographic hash for kernel cache keys: two independent 64-bit lanes (different
// seeds and multipliers), each an xxhash-style multiply-rotate round per 8-byte word, with a
// final avalanche that mixes the lanes. Written for tessel; stable across runs and platforms
// (words are read little-endian), so keys can name files on disk.
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

namespace tessel::jit {

struct Hash128 {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;

  std::string hex() const;  // 32 lowercase hex digits, hi first
  friend bool operator==(const Hash128& a, const Hash128& b) { return a.hi == b.hi && a.lo == b.lo; }
  friend bool operator!=(const Hash128& a, const Hash128& b) { return !(a == b); }
};

struct Hash128Hasher {
  std::size_t operator()(const Hash128& h) const { return static_cast<std::size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull)); }
};

class Hasher {
 public:
  Hasher() = default;
  // Raw bytes, no framing.
  Hasher& bytes(const void* data, std::size_t size);
  // A field: its length first, so ("ab","c") and ("a","bc") differ.
  Hasher& field(std::string_view text);
  Hasher& u64(std::uint64_t value);
  Hash128 finish() const;

 private:
  void word(std::uint64_t w);
  std::uint64_t a_ = 0x243F6A8885A308D3ull;  // digits of pi: arbitrary, fixed seeds
  std::uint64_t b_ = 0x13198A2E03707344ull;
  std::uint64_t length_ = 0;
  unsigned char tail_[8] = {};
  std::size_t tail_size_ = 0;
};

inline Hash128 hash128(std::string_view text) { return Hasher().bytes(text.data(), text.size()).finish(); }

}  // namespace tessel::jit
