#include "tessel/jit/hash.hpp"

namespace tessel::jit {
namespace {

constexpr std::uint64_t kA1 = 0x9E3779B185EBCA87ull;
constexpr std::uint64_t kA2 = 0xC2B2AE3D27D4EB4Full;
constexpr std::uint64_t kB1 = 0xD6E8FEB86659FD93ull;
constexpr std::uint64_t kB2 = 0xFF51AFD7ED558CCDull;

constexpr std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Final avalanche (every input bit affects every output bit with probability ~1/2).
constexpr std::uint64_t avalanche(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 29;
  x *= 0xC4CEB9FE1A85EC53ull;
  x ^= x >> 32;
  return x;
}

std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = (w << 8) | p[i];
  return w;
}

}  // namespace

std::string Hash128::hex() const {
  static const char digits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[static_cast<std::size_t>(15 - i)] = digits[(hi >> (4 * i)) & 0xF];
    out[static_cast<std::size_t>(31 - i)] = digits[(lo >> (4 * i)) & 0xF];
  }
  return out;
}

void Hasher::word(std::uint64_t w) {
  a_ = rotl(a_ + w * kA2, 31) * kA1;
  b_ = rotl(b_ ^ (w * kB1), 27) * kB2 + 0x52DCE729ull;
}

Hasher& Hasher::bytes(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += size;
  if (tail_size_ > 0) {
    while (size > 0 && tail_size_ < 8) {
      tail_[tail_size_++] = *p++;
      --size;
    }
    if (tail_size_ < 8) return *this;
    word(load_le64(tail_));
    tail_size_ = 0;
  }
  for (; size >= 8; size -= 8, p += 8) word(load_le64(p));
  std::memcpy(tail_, p, size);
  tail_size_ = size;
  return *this;
}

Hasher& Hasher::field(std::string_view text) {
  u64(text.size());
  return bytes(text.data(), text.size());
}

Hasher& Hasher::u64(std::uint64_t value) {
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(value >> (8 * i));
  return bytes(le, 8);
}

Hash128 Hasher::finish() const {
  std::uint64_t a = a_, b = b_;
  // Pad the tail with its length so "a" and "a\0" differ even without framing.
  unsigned char last[8] = {};
  std::memcpy(last, tail_, tail_size_);
  const std::uint64_t w = load_le64(last) ^ (static_cast<std::uint64_t>(tail_size_) << 56);
  a = rotl(a + w * kA2, 31) * kA1;
  b = rotl(b ^ (w * kB1), 27) * kB2;
  a ^= length_ * kB1;
  b ^= length_ * kA1;
  const std::uint64_t ha = avalanche(a + rotl(b, 17));
  const std::uint64_t hb = avalanche(b ^ rotl(ha, 41) ^ 0x9E3779B97F4A7C15ull);
  return {ha, hb};
}

}  // namespace tessel::jit
