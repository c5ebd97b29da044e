#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tessel/jit/hash.hpp"

namespace tessel::jit {
namespace {

TEST(JitHash, DeterministicAndHex) {
  const Hash128 a = hash128("hello");
  EXPECT_EQ(a, hash128("hello"));
  EXPECT_EQ(a.hex().size(), 32u);
  EXPECT_NE(a, hash128("hellp"));
  EXPECT_NE(hash128(""), hash128(std::string(1, '\0')));
  EXPECT_NE(hash128("a"), hash128(std::string("a\0", 2)));
}

TEST(JitHash, ChunkingDoesNotMatter) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  const Hash128 whole = hash128(text);
  for (std::size_t split : {1u, 3u, 7u, 8u, 9u, 500u, 999u}) {
    Hasher h;
    h.bytes(text.data(), split).bytes(text.data() + split, text.size() - split);
    EXPECT_EQ(h.finish(), whole) << "split " << split;
  }
}

TEST(JitHash, FieldsAreFramed) {
  EXPECT_NE(Hasher().field("ab").field("c").finish(), Hasher().field("a").field("bc").finish());
}

TEST(JitHash, NoCollisionsOnSimilarInputsAndBothHalvesVary) {
  std::set<std::uint64_t> his, los;
  for (int i = 0; i < 20000; ++i) {
    const Hash128 h = Hasher().field("kernel").u64(static_cast<std::uint64_t>(i)).finish();
    his.insert(h.hi);
    los.insert(h.lo);
  }
  EXPECT_EQ(his.size(), 20000u);
  EXPECT_EQ(los.size(), 20000u);
}

TEST(JitHash, SingleBitFlipsChangeAboutHalfTheBits) {
  const std::string base(64, 'x');
  const Hash128 h0 = hash128(base);
  double total = 0;
  int flips = 0;
  for (std::size_t byte = 0; byte < base.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string t = base;
      t[byte] = static_cast<char>(t[byte] ^ (1 << bit));
      const Hash128 h = hash128(t);
      total += __builtin_popcountll(h.hi ^ h0.hi) + __builtin_popcountll(h.lo ^ h0.lo);
      ++flips;
    }
  }
  const double mean = total / flips;
  EXPECT_GT(mean, 60.0);
  EXPECT_LT(mean, 68.0);
}

}  // namespace
}  // namespace tessel::jit
