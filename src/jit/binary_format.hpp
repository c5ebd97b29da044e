#pragma once
// The byte layout of the jit layer's disk cache entries (internal): little-endian u64 words,
// length-prefixed strings, and a trailing 128-bit hash of everything before it, so a truncated or
// corrupted file is detected and compiled again. The CUBIN cache (kernel_cache.cpp) and the host
// library cache (host_compiler.cpp) write their entries with it.
#include <cstdint>
#include <string>

#include "tessel/jit/hash.hpp"

namespace tessel::jit::detail {

inline void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

// Appends the checksum of `out` (all of it) to `out`.
inline void seal(std::string& out) {
  const Hash128 check = Hasher().bytes(out.data(), out.size()).finish();
  put_u64(out, check.hi);
  put_u64(out, check.lo);
}

// Reads words and strings from `data`, from `at`; `ok` turns false (and stays) at the first read
// past the end.
struct Reader {
  const std::string& data;
  std::size_t at = 0;
  bool ok = true;
  std::uint64_t u64() {
    if (data.size() < at || data.size() - at < 8) {
      ok = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(data[at + static_cast<std::size_t>(i)]);
    at += 8;
    return v;
  }
  std::string string() {
    const std::uint64_t n = u64();
    if (!ok || data.size() - at < n) {
      ok = false;
      return "";
    }
    std::string s = data.substr(at, n);
    at += n;
    return s;
  }
};

// True when `data` starts with the 8-byte `magic` and ends with the checksum of the rest; `body`
// is then the size before the checksum. False for a truncated or corrupted file (`why` says which).
inline bool check_sealed(const std::string& data, const char (&magic)[8], std::size_t& body, std::string& why) {
  if (data.size() < sizeof magic + 16 || data.compare(0, sizeof magic, magic, sizeof magic) != 0) {
    why = "bad magic or truncated";
    return false;
  }
  body = data.size() - 16;
  const Hash128 check = Hasher().bytes(data.data(), body).finish();
  Reader tail{data, body};
  if (tail.u64() != check.hi || tail.u64() != check.lo) {
    why = "checksum mismatch (truncated or corrupt)";
    return false;
  }
  return true;
}

}  // namespace tessel::jit::detail
