// The caching logic against a fake runtime: no GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "fake_runtime.hpp"
#include "tessel/core/error.hpp"
#include "tessel/memory/caching_allocator.hpp"

using namespace tessel;
using tessel::testing::FakeEvent;
using tessel::testing::make_fake;

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr StreamRef A{100, nullptr};
constexpr StreamRef B{101, nullptr};
constexpr StreamRef C{102, nullptr};

char* cp(void* p) { return static_cast<char*>(p); }
std::int64_t i64(std::size_t n) { return static_cast<std::int64_t>(n); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(CachingAllocator, RoundsTo512AndCarvesSmallSegments) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(1, A);
  void* q = a.allocate(513, A);
  void* z1 = a.allocate(0, A);
  void* z2 = a.allocate(0, A);
  EXPECT_EQ(a.block_size(p), 512u);
  EXPECT_EQ(a.block_size(q), 1024u);
  ASSERT_NE(z1, nullptr);
  ASSERT_NE(z2, nullptr);
  EXPECT_NE(z1, z2);
  EXPECT_EQ(a.block_size(z1), 512u);
  // Best fit from one 2 MiB segment: consecutive addresses.
  EXPECT_EQ(cp(q), cp(p) + 512);
  EXPECT_EQ(cp(z1), cp(q) + 1024);
  EXPECT_EQ(cp(z2), cp(z1) + 512);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 512 + 1024 + 512 + 512);
  EXPECT_EQ(s.requested_bytes, 1 + 513);
  EXPECT_EQ(s.active_allocations, 4);
  EXPECT_EQ(s.reserved_bytes, i64(2 * MiB));
  EXPECT_EQ(s.segments, 1);
  EXPECT_EQ(s.cache_misses, 1);
  EXPECT_EQ(s.cache_hits, 3);
  EXPECT_EQ(f.state->malloc_calls, 1);
  for (void* x : {p, q, z1, z2}) a.free(x);
  EXPECT_EQ(a.stats().allocated_bytes, 0);
}

TEST(CachingAllocator, SmallPoolAddsASegmentWhenFull) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  std::vector<void*> ptrs;
  for (int i = 0; i < 4096; ++i) ptrs.push_back(a.allocate(512, A));
  EXPECT_EQ(a.stats().segments, 1);
  EXPECT_EQ(a.stats().inactive_split_bytes, 0);
  const char* base = cp(ptrs.front());
  for (void* p : ptrs) {
    ASSERT_GE(cp(p), base);
    ASSERT_LT(cp(p), base + 2 * MiB);
  }
  ptrs.push_back(a.allocate(512, A));
  EXPECT_EQ(a.stats().segments, 2);
  EXPECT_EQ(a.stats().reserved_bytes, i64(4 * MiB));
  for (void* p : ptrs) a.free(p);
  // Everything coalesced back into whole segments.
  EXPECT_EQ(a.stats().largest_free_block, i64(2 * MiB));
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
  EXPECT_EQ(f.state->free_calls, 2);
}

TEST(CachingAllocator, LargePoolSegmentSizes) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(i64(MiB + 1), A);  // large: a 20 MiB segment, split
  EXPECT_EQ(a.block_size(p), MiB + 512);
  EXPECT_EQ(a.stats().reserved_bytes, i64(20 * MiB));
  void* q = a.allocate(i64(4 * MiB), A);  // from the same segment
  EXPECT_EQ(cp(q), cp(p) + MiB + 512);
  EXPECT_EQ(a.stats().reserved_bytes, i64(20 * MiB));
  void* s = a.allocate(i64(MiB), A);  // exactly 1 MiB is small: a 2 MiB segment
  EXPECT_EQ(a.stats().reserved_bytes, i64(22 * MiB));
  void* r = a.allocate(i64(11 * MiB), B);  // above 10 MiB: rounded to 2 MiB; a 1 MiB tail is not split
  EXPECT_EQ(a.block_size(r), 12 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, i64(34 * MiB));
  void* t = a.allocate(i64(64 * MiB), C);
  EXPECT_EQ(a.block_size(t), 64 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, i64(98 * MiB));
  EXPECT_EQ(a.stats().segments, 4);
  for (void* x : {p, q, s, r, t}) a.free(x);
}

TEST(CachingAllocator, SmallRequestsDoNotUseTheLargePool) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  a.free(a.allocate(i64(4 * MiB), A));
  void* p = a.allocate(1024, A);
  EXPECT_EQ(a.stats().raw_allocations, 2);
  EXPECT_EQ(a.stats().reserved_bytes, i64(22 * MiB));
  a.free(p);
}

TEST(CachingAllocator, SplitsAndCoalesces) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* x = a.allocate(i64(2 * MiB), A);
  void* y = a.allocate(i64(2 * MiB), A);
  void* z = a.allocate(i64(2 * MiB), A);
  EXPECT_EQ(cp(y), cp(x) + 2 * MiB);
  EXPECT_EQ(cp(z), cp(y) + 2 * MiB);
  EXPECT_EQ(a.stats().inactive_split_bytes, i64(14 * MiB));
  EXPECT_EQ(a.stats().largest_free_block, i64(14 * MiB));
  a.free(y);
  EXPECT_EQ(a.stats().inactive_split_bytes, i64(16 * MiB));
  EXPECT_EQ(a.stats().largest_free_block, i64(14 * MiB));  // y's hole is not next to the tail
  void* y2 = a.allocate(i64(2 * MiB), A);  // best fit: the hole, not the 14 MiB tail
  EXPECT_EQ(y2, y);
  a.free(y2);
  a.free(x);  // merges with y's hole
  a.free(z);  // merges everything
  EXPECT_EQ(a.stats().largest_free_block, i64(20 * MiB));
  EXPECT_EQ(a.stats().inactive_split_bytes, 0);
  void* whole = a.allocate(i64(20 * MiB), A);
  EXPECT_EQ(whole, x);
  EXPECT_EQ(a.stats().raw_allocations, 1);
  a.free(whole);
}

// More frees than the allocator keeps recycled tree and hash nodes for (1024): the blocks still
// merge back into whole segments, and a second round gets the same memory back.
TEST(CachingAllocator, ManyFreesThenTheSameAllocationsAgain) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  constexpr int kBlocks = 3000;  // 512 B each: one 2 MiB small segment holds 4096
  std::vector<void*> first;
  for (int i = 0; i < kBlocks; ++i) first.push_back(a.allocate(512, A));
  for (void* p : first) a.free(p);
  EXPECT_EQ(a.stats().allocated_bytes, 0);
  EXPECT_EQ(a.stats().largest_free_block, i64(2 * MiB));
  EXPECT_EQ(a.stats().inactive_split_bytes, 0);
  std::set<void*> again;
  for (int i = 0; i < kBlocks; ++i) again.insert(a.allocate(512, A));
  EXPECT_EQ(again, std::set<void*>(first.begin(), first.end()));
  EXPECT_EQ(a.stats().active_allocations, kBlocks);
  EXPECT_EQ(a.stats().segments, 1);
  for (void* p : again) a.free(p);
  EXPECT_EQ(a.stats().active_allocations, 0);
  EXPECT_EQ(a.stats().largest_free_block, i64(2 * MiB));
  EXPECT_EQ(f.state->malloc_calls, 1);
}

TEST(CachingAllocator, MaxSplitSizeKeepsOversizedBlocksWhole) {
  CachingAllocatorOptions o;
  o.max_split_size = 8 * MiB;
  auto f = make_fake(1024 * MiB, o);
  auto& a = *f.alloc;
  void* p = a.allocate(i64(16 * MiB), A);  // oversized: its own 16 MiB segment
  EXPECT_EQ(a.block_size(p), 16 * MiB);
  a.free(p);
  void* q = a.allocate(i64(12 * MiB), A);  // wastes 4 MiB <= min(12, 20) MiB: reused whole
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.block_size(q), 16 * MiB);
  EXPECT_EQ(a.stats().cache_hits, 1);
  a.free(q);
  void* r = a.allocate(i64(4 * MiB), A);  // would waste 12 MiB > 4 MiB: a new segment, capped at 8 MiB
  EXPECT_NE(r, p);
  EXPECT_EQ(a.block_size(r), 4 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, i64(24 * MiB));
  void* s = a.allocate(i64(9 * MiB), A);  // oversized request: the 16 MiB block, not split
  EXPECT_EQ(s, p);
  EXPECT_EQ(a.block_size(s), 16 * MiB);
  void* t = a.allocate(i64(3 * MiB), A);  // the 4 MiB tail of r's segment; a 1 MiB rest is not split
  EXPECT_EQ(cp(t), cp(r) + 4 * MiB);
  EXPECT_EQ(a.block_size(t), 4 * MiB);
  void* u = a.allocate(i64(MiB + 1), B);  // normal large segments never exceed max_split_size
  EXPECT_EQ(a.stats().reserved_bytes, i64(32 * MiB));
  for (void* x : {r, s, t, u}) a.free(x);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
}

TEST(CachingAllocator, WithoutMaxSplitLargeBlocksSplit) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(i64(16 * MiB), A);
  a.free(p);
  void* r = a.allocate(i64(4 * MiB), A);
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.block_size(r), 4 * MiB);
  EXPECT_EQ(a.stats().raw_allocations, 1);
  a.free(r);
}

TEST(CachingAllocator, SameStreamReusesAtOnce) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(1000, A);
  a.free(p);
  void* q = a.allocate(1000, A);
  EXPECT_EQ(q, p);
  EXPECT_EQ(f.state->records, 0);
  EXPECT_EQ(a.stats().cache_hits, 1);
  EXPECT_EQ(a.stats().cache_misses, 1);
  a.free(q);
  // Another stream never takes a block freed on A: A's queued work may still use it.
  void* r = a.allocate(1000, B);
  EXPECT_NE(r, p);
  EXPECT_EQ(a.stats().raw_allocations, 2);
  a.free(r);
}

TEST(CachingAllocator, CrossStreamUseDelaysReuseUntilEventsComplete) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.record_stream(p, B);
  a.record_stream(p, B);  // recorded once
  a.record_stream(p, A);  // the allocation stream: nothing to wait for
  a.free(p);
  EXPECT_EQ(f.state->records, 1);
  EXPECT_EQ(a.stats().allocated_bytes, 0);
  EXPECT_EQ(a.stats().active_allocations, 0);
  void* q = a.allocate(4096, A);
  EXPECT_NE(q, p);
  f.state->complete_stream(C.id);  // an unrelated stream
  void* r = a.allocate(4096, A);
  EXPECT_NE(r, p);
  f.state->complete_stream(B.id);
  void* s = a.allocate(4096, A);
  EXPECT_EQ(s, p);
  for (void* x : {q, r, s}) a.free(x);
  EXPECT_EQ(f.state->records, 1);
}

TEST(CachingAllocator, WaitsForEveryRecordedStream) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.record_stream(p, B);
  a.record_stream(p, C);
  a.free(p);
  EXPECT_EQ(f.state->records, 2);
  f.state->complete_stream(B.id);
  void* q = a.allocate(4096, A);
  EXPECT_NE(q, p);
  f.state->complete_stream(C.id);
  void* r = a.allocate(4096, A);
  EXPECT_EQ(r, p);
  // Once the events are done the block is back on A's pool only.
  a.free(r);
  void* s = a.allocate(4096, B);
  EXPECT_NE(s, p);
  for (void* x : {q, s}) a.free(x);
}

TEST(CachingAllocator, OomLadderFlushesTheCacheAndRetries) {
  auto f = make_fake(64 * MiB);
  auto& a = *f.alloc;
  a.free(a.allocate(i64(40 * MiB), A));  // cached on A
  EXPECT_EQ(a.stats().reserved_bytes, i64(40 * MiB));
  void* q = a.allocate(i64(30 * MiB), B);  // B cannot use A's block; 70 MiB > 64: flush, retry
  ASSERT_NE(q, nullptr);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.cache_flushes, 1);
  EXPECT_EQ(s.raw_frees, 1);
  EXPECT_EQ(s.reserved_bytes, i64(30 * MiB));
  EXPECT_EQ(s.oom_count, 0);
  EXPECT_EQ(f.state->failed_mallocs, 1);
  a.free(q);
}

TEST(CachingAllocator, OomLadderWaitsForPendingEvents) {
  auto f = make_fake(64 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(i64(40 * MiB), A);
  a.record_stream(p, B);
  a.free(p);  // pending on B
  void* q = a.allocate(i64(30 * MiB), C);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(f.state->syncs, 1);
  EXPECT_EQ(a.stats().raw_frees, 1);
  a.free(q);
}

TEST(CachingAllocator, OomReportsTheNumbers) {
  auto f = make_fake(64 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(i64(40 * MiB), A);
  a.free(a.allocate(1000, A));  // a cached small segment that the ladder releases
  try {
    a.allocate(i64(30 * MiB), A);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "fake:0: out of memory in allocate")) << m;
    EXPECT_TRUE(contains(m, "tried to allocate 30.00 MiB (31457280 bytes)")) << m;
    EXPECT_TRUE(contains(m, "allocated 40.00 MiB (41943040 bytes)")) << m;
    EXPECT_TRUE(contains(m, "reserved 40.00 MiB (41943040 bytes)")) << m;
    EXPECT_TRUE(contains(m, "device free 24.00 MiB (25165824 bytes) of 64.00 MiB (67108864 bytes)")) << m;
    EXPECT_TRUE(contains(m, "largest free block 0 B (0 bytes)")) << m;
  }
  MemoryStats s = a.stats();
  EXPECT_EQ(s.oom_count, 1);
  EXPECT_EQ(s.cache_flushes, 1);
  EXPECT_EQ(s.reserved_bytes, i64(40 * MiB));
  EXPECT_EQ(s.active_allocations, 1);
  // Recovery: free, then the same request succeeds from the cache.
  a.free(p);
  void* q = a.allocate(i64(30 * MiB), A);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().raw_allocations, 2);
  a.free(q);
}

TEST(CachingAllocator, BadSizes) {
  auto f = make_fake(64 * MiB);
  auto& a = *f.alloc;
  try {
    a.allocate(-1, A);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "allocate")) << e.what();
    EXPECT_TRUE(contains(e.what(), "-1")) << e.what();
  }
  try {
    a.allocate(i64(65 * MiB), A);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_TRUE(contains(e.what(), "allocate")) << e.what();
    EXPECT_TRUE(contains(e.what(), "68157440")) << e.what();
    EXPECT_TRUE(contains(e.what(), "total memory")) << e.what();
  }
  EXPECT_THROW(a.allocate(std::numeric_limits<std::int64_t>::max(), A), OutOfMemory);
  EXPECT_EQ(f.state->malloc_calls, 0);
  EXPECT_EQ(a.stats().reserved_bytes, 0);
  void* all = a.allocate(i64(64 * MiB), A);  // exactly the total still works
  EXPECT_NE(all, nullptr);
  a.free(all);
}

TEST(CachingAllocator, MemoryFraction) {
  CachingAllocatorOptions o;
  o.memory_fraction = 0.5;
  auto f = make_fake(100 * MiB, o);
  auto& a = *f.alloc;
  void* p = a.allocate(i64(40 * MiB), A);
  try {
    a.allocate(i64(20 * MiB), A);  // 60 MiB reserved > 50 MiB although the device has room
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_TRUE(contains(e.what(), "memory fraction 0.5")) << e.what();
  }
  EXPECT_EQ(f.state->failed_mallocs, 0);
  a.set_memory_fraction(1.0);
  void* q = a.allocate(i64(20 * MiB), A);
  EXPECT_EQ(a.stats().reserved_bytes, i64(60 * MiB));
  for (double bad : {0.0, -0.1, 1.5, std::nan("")}) {
    EXPECT_THROW(a.set_memory_fraction(bad), ValueError) << bad;
  }
  a.free(p);
  a.free(q);
  CachingAllocatorOptions zero;
  zero.memory_fraction = 0;
  EXPECT_THROW(make_fake(MiB, zero), ValueError);
}

TEST(CachingAllocator, NearTheLimitFallsBackToASegmentOfTheRequestsSize) {
  CachingAllocatorOptions o;
  o.memory_fraction = 0.5;
  auto f = make_fake(64 * MiB, o);
  auto& a = *f.alloc;
  void* p = a.allocate(i64(25 * MiB), A);  // a 26 MiB segment
  void* q = a.allocate(i64(5 * MiB), A);   // 20 MiB would exceed 32 MiB; 6 MiB fits exactly
  EXPECT_EQ(a.block_size(q), 6 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, i64(32 * MiB));
  EXPECT_EQ(a.stats().oom_count, 0);
  a.free(p);
  a.free(q);
}

TEST(CachingAllocator, StatsFollowEveryStep) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(100, A);
  void* q = a.allocate(i64(3 * MiB), A);
  void* r = a.allocate(100, A);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes, i64(3 * MiB + 1024));
  EXPECT_EQ(s.requested_bytes, i64(3 * MiB + 200));
  EXPECT_EQ(s.allocated_peak, i64(3 * MiB + 1024));
  EXPECT_EQ(s.reserved_bytes, i64(22 * MiB));
  EXPECT_EQ(s.reserved_peak, i64(22 * MiB));
  EXPECT_EQ(s.active_allocations, 3);
  EXPECT_EQ(s.allocation_count, 3);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.cache_misses, 2);
  EXPECT_EQ(s.raw_allocations, 2);
  EXPECT_EQ(s.segments, 2);
  EXPECT_NEAR(s.fragmentation(), 1.0 - double(3 * MiB + 1024) / double(22 * MiB), 1e-12);
  for (void* x : {p, q, r}) a.free(x);
  s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.requested_bytes, 0);
  EXPECT_EQ(s.active_allocations, 0);
  EXPECT_EQ(s.free_count, 3);
  EXPECT_EQ(s.allocated_peak, i64(3 * MiB + 1024));
  EXPECT_EQ(s.reserved_bytes, i64(22 * MiB));
  EXPECT_DOUBLE_EQ(s.fragmentation(), 1.0);
  EXPECT_EQ(s.largest_free_block, i64(20 * MiB));
  EXPECT_EQ(s.inactive_split_bytes, 0);
  a.reset_peak_stats();
  EXPECT_EQ(a.stats().allocated_peak, 0);
  EXPECT_EQ(a.stats().reserved_peak, i64(22 * MiB));
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.segments, 0);
  EXPECT_EQ(s.raw_frees, 2);
  EXPECT_DOUBLE_EQ(s.fragmentation(), 0.0);
  EXPECT_EQ(f.state->used, 0u);
  EXPECT_FALSE(s.str().empty());
}

TEST(CachingAllocator, EmptyCacheKeepsSegmentsInUse) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(100, A);
  a.free(a.allocate(i64(4 * MiB), A));
  void* r = a.allocate(i64(30 * MiB), A);
  a.record_stream(r, B);
  a.free(r);  // pending on B: empty_cache waits for it
  a.empty_cache();
  EXPECT_EQ(f.state->syncs, 1);
  EXPECT_EQ(a.stats().raw_frees, 2);
  EXPECT_EQ(a.stats().reserved_bytes, i64(2 * MiB));
  EXPECT_EQ(a.block_size(p), 512u);
  a.free(p);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
  EXPECT_TRUE(f.state->live.empty());
}

TEST(CachingAllocator, DirectModeGoesStraightToTheRuntime) {
  CachingAllocatorOptions o;
  o.caching = false;
  auto f = make_fake(64 * MiB, o);
  auto& a = *f.alloc;
  void* p = a.allocate(1000, A);
  EXPECT_EQ(a.block_size(p), 1000u);  // exact size, so a sanitizer sees overruns
  EXPECT_EQ(a.stats().reserved_bytes, 1000);
  a.free(p);
  EXPECT_EQ(f.state->free_calls, 1);
  EXPECT_EQ(a.stats().reserved_bytes, 0);
  void* q = a.allocate(1000, A);
  EXPECT_EQ(f.state->malloc_calls, 2);
  void* z1 = a.allocate(0, A);
  void* z2 = a.allocate(0, A);
  EXPECT_NE(z1, nullptr);
  EXPECT_NE(z1, z2);
  a.record_stream(q, B);
  a.free(q);  // waits for B before the raw free
  EXPECT_EQ(f.state->records, 1);
  EXPECT_EQ(f.state->syncs, 1);
  EXPECT_EQ(f.state->free_calls, 2);
  void* big = a.allocate(i64(60 * MiB), A);
  EXPECT_THROW(a.allocate(i64(10 * MiB), A), OutOfMemory);
  for (void* x : {z1, z2, big}) a.free(x);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.cache_hits, 0);
  EXPECT_EQ(s.cache_misses, s.allocation_count);
  EXPECT_EQ(s.allocation_count, 5);
  EXPECT_EQ(s.oom_count, 1);
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(f.state->used, 0u);
}

TEST(CachingAllocator, DoubleFreeIsAnErrorAndChangesNothing) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* keep = a.allocate(4096, A);
  void* p = a.allocate(4096, A);
  a.free(p);
  const MemoryStats before = a.stats();
  try {
    a.free(p);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), fmt::format("{}", p))) << e.what();
    EXPECT_TRUE(contains(e.what(), "double free")) << e.what();
  }
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.free_count, before.free_count);
  EXPECT_EQ(after.largest_free_block, before.largest_free_block);
  EXPECT_EQ(a.allocate(4096, A), p);  // the pool is intact
  a.free(p);
  a.free(keep);
  EXPECT_EQ(f.state->bad_frees, 0);
}

TEST(CachingAllocator, ForeignPointers) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  int local = 0;
  EXPECT_THROW(a.free(&local), Error);
  EXPECT_THROW(a.record_stream(&local, B), Error);
  EXPECT_EQ(a.block_size(&local), 0u);
  void* p = a.allocate(1024, A);
  EXPECT_THROW(a.free(cp(p) + 512), Error);  // interior pointer
  EXPECT_NO_THROW(a.free(nullptr));
  EXPECT_EQ(a.stats().active_allocations, 1);
  a.free(p);
}

TEST(CachingAllocator, RuntimeFailureInFreeLeavesTheBlockLive) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.record_stream(p, B);
  f.state->fail_record = true;
  EXPECT_THROW(a.free(p), CudaError);
  EXPECT_EQ(a.block_size(p), 4096u);
  EXPECT_EQ(a.stats().active_allocations, 1);
  f.state->fail_record = false;
  a.free(p);
  EXPECT_EQ(a.stats().active_allocations, 0);
}

TEST(CachingAllocatorStreamDestroyed, CachedBlocksAreReHomed) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.free(p);
  void* q = a.allocate(4096, B);
  EXPECT_NE(q, p);
  a.on_stream_destroyed(A.id);
  void* r = a.allocate(4096, C);  // adopts A's idle segment
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.stats().raw_allocations, 2);
  a.free(r);
  void* s = a.allocate(4096, C);  // the segment now belongs to C
  EXPECT_EQ(s, p);
  a.free(s);
  a.free(q);
}

TEST(CachingAllocatorStreamDestroyed, PendingUsesCountAsDone) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.record_stream(p, B);
  a.free(p);
  a.on_stream_destroyed(B.id);
  EXPECT_EQ(a.allocate(4096, A), p);
  a.free(p);
}

TEST(CachingAllocatorStreamDestroyed, LiveBlockUsedOnDestroyedStream) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.record_stream(p, B);
  a.on_stream_destroyed(B.id);
  a.free(p);  // no event may be recorded on the destroyed stream
  EXPECT_EQ(f.state->records, 0);
  EXPECT_EQ(a.allocate(4096, A), p);
  a.free(p);
}

TEST(CachingAllocatorStreamDestroyed, FreeAfterAllocationStreamDestroyed) {
  auto f = make_fake(1024 * MiB);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.on_stream_destroyed(A.id);
  try {
    a.free(p);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_TRUE(contains(e.what(), "stream #100")) << e.what();
    EXPECT_TRUE(contains(e.what(), "destroyed")) << e.what();
    EXPECT_TRUE(contains(e.what(), "reclaimed")) << e.what();
  }
  // Reclaimed: accounted for, not live, and reusable by another stream.
  EXPECT_EQ(a.stats().allocated_bytes, 0);
  EXPECT_EQ(a.stats().active_allocations, 0);
  EXPECT_EQ(a.block_size(p), 0u);
  EXPECT_THROW(a.free(p), Error);
  EXPECT_EQ(a.allocate(4096, C), p);
  EXPECT_EQ(a.stats().raw_allocations, 1);
  a.free(p);
}

TEST(CachingAllocatorStreamDestroyed, DirectModeFreeAfterDestroyIsReported) {
  CachingAllocatorOptions o;
  o.caching = false;
  auto f = make_fake(64 * MiB, o);
  auto& a = *f.alloc;
  void* p = a.allocate(4096, A);
  a.on_stream_destroyed(A.id);
  EXPECT_THROW(a.free(p), DeviceError);
  EXPECT_EQ(f.state->used, 0u);
  EXPECT_EQ(a.stats().active_allocations, 0);
}

// ---- randomized stress against a model ----

namespace {

struct LiveBlock {
  std::uintptr_t hi;
  std::size_t size;
  std::size_t requested;
  std::uint64_t stream;
  std::set<std::uint64_t> uses;  // other streams that used it
};

// Memory freed on a stream: usable again only by that stream once its recorded events are done,
// or by anyone once the runtime has freed it.
struct Restricted {
  std::uintptr_t lo, hi;
  std::uint64_t stream;
  std::vector<FakeEvent*> events;
};

void run_stress(unsigned seed, CachingAllocatorOptions options, std::size_t capacity) {
  SCOPED_TRACE(fmt::format("seed {} max_split {} fraction {}", seed, options.max_split_size,
                           options.memory_fraction));
  auto f = make_fake(capacity, options);
  auto& a = *f.alloc;
  auto& st = *f.state;
  std::mt19937_64 rng(seed);
  auto uniform = [&](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
  const StreamRef streams[4] = {{100, nullptr}, {101, nullptr}, {102, nullptr}, {103, nullptr}};
  std::map<std::uintptr_t, LiveBlock> live;
  std::vector<Restricted> restricted;
  int ooms = 0;

  // Forgets restrictions that no longer apply: raw-freed memory, completed events.
  auto prune = [&] {
    for (auto& [lo, n] : st.freed) {
      const std::uintptr_t hi = lo + n;
      restricted.erase(std::remove_if(restricted.begin(), restricted.end(),
                                      [&](const Restricted& r) { return r.lo >= lo && r.hi <= hi; }),
                       restricted.end());
    }
    st.freed.clear();
    for (auto& r : restricted) {
      r.events.erase(std::remove_if(r.events.begin(), r.events.end(), [](FakeEvent* e) { return e->done; }),
                     r.events.end());
    }
  };
  auto check_stats = [&] {
    const MemoryStats s = a.stats();
    std::int64_t allocated = 0, requested = 0;
    for (auto& [lo, b] : live) {
      allocated += static_cast<std::int64_t>(b.size);
      requested += static_cast<std::int64_t>(b.requested);
    }
    ASSERT_EQ(s.allocated_bytes, allocated);
    ASSERT_EQ(s.requested_bytes, requested);
    ASSERT_EQ(s.active_allocations, static_cast<std::int64_t>(live.size()));
    ASSERT_EQ(s.reserved_bytes, static_cast<std::int64_t>(st.used));
    ASSERT_EQ(s.segments, static_cast<std::int64_t>(st.live.size()));
    ASSERT_LE(s.allocated_bytes + s.inactive_split_bytes, s.reserved_bytes);
    ASSERT_LE(static_cast<double>(s.reserved_bytes), options.memory_fraction * static_cast<double>(capacity));
    ASSERT_EQ(st.bad_frees, 0);
  };
  auto after_op = [&] {
    prune();
    check_stats();
  };

  for (int op = 0; op < 6000; ++op) {
    const std::size_t dice = uniform(0, 99);
    if (dice < 45 && live.size() < 80) {
      const StreamRef s = streams[uniform(0, 3)];
      const std::size_t kind = uniform(0, 9);
      const std::size_t want = kind < 6 ? uniform(0, 8192) : kind < 9 ? uniform(8193, 3 * MiB) : uniform(3 * MiB, 40 * MiB);
      void* p = nullptr;
      try {
        p = a.allocate(static_cast<std::int64_t>(want), s);
      } catch (const OutOfMemory&) {
        ++ooms;
        after_op();
        continue;
      }
      prune();
      ASSERT_NE(p, nullptr);
      const auto lo = reinterpret_cast<std::uintptr_t>(p);
      const std::size_t size = a.block_size(p);
      const std::uintptr_t hi = lo + size;
      ASSERT_GE(size, std::max<std::size_t>(want, 1));
      if (options.caching) {
        ASSERT_EQ(size % 512, 0u);
      }
      // No overlap with live blocks.
      auto next = live.lower_bound(lo);
      if (next != live.end()) {
        ASSERT_LE(hi, next->first) << "overlaps a live block";
      }
      if (next != live.begin()) {
        ASSERT_LE(std::prev(next)->second.hi, lo) << "overlaps a live block";
      }
      // Inside one raw segment.
      auto seg = st.live.upper_bound(lo);
      ASSERT_NE(seg, st.live.begin());
      --seg;
      ASSERT_LE(hi, seg->first + seg->second) << "crosses a segment boundary";
      // Never memory another stream may still be using.
      std::vector<Restricted> kept;
      for (auto& r : restricted) {
        if (r.hi <= lo || r.lo >= hi) {
          kept.push_back(r);
          continue;
        }
        ASSERT_TRUE(r.events.empty()) << "reused before its cross-stream events completed";
        ASSERT_EQ(r.stream, s.id) << "reused on another stream than the one it was freed on";
        if (r.lo < lo) kept.push_back({r.lo, lo, r.stream, {}});
        if (r.hi > hi) kept.push_back({hi, r.hi, r.stream, {}});
      }
      restricted = std::move(kept);
      live[lo] = LiveBlock{hi, size, want, s.id, {}};
      check_stats();
    } else if (dice < 80 && !live.empty()) {
      auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(uniform(0, live.size() - 1)));
      st.recorded.clear();
      a.free(reinterpret_cast<void*>(it->first));
      // One event per other stream that used the block, recorded on that stream.
      std::set<std::uint64_t> event_streams;
      for (FakeEvent* e : st.recorded) event_streams.insert(e->stream);
      ASSERT_EQ(st.recorded.size(), it->second.uses.size());
      ASSERT_EQ(event_streams, it->second.uses);
      restricted.push_back({it->first, it->second.hi, it->second.stream, st.recorded});
      live.erase(it);
      after_op();
    } else if (dice < 90 && !live.empty()) {
      auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(uniform(0, live.size() - 1)));
      const StreamRef user = streams[uniform(0, 3)];
      a.record_stream(reinterpret_cast<void*>(it->first), user);
      if (user.id != it->second.stream) it->second.uses.insert(user.id);
      after_op();
    } else if (dice < 97) {
      st.complete_stream(streams[uniform(0, 3)].id);
      after_op();
    } else if (dice < 98) {
      st.complete_all();
      after_op();
    } else {
      a.empty_cache();
      after_op();
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (auto& [lo, b] : live) a.free(reinterpret_cast<void*>(lo));
  live.clear();
  st.complete_all();
  a.empty_cache();
  after_op();
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.raw_allocations, s.raw_frees);
  EXPECT_EQ(s.allocation_count, s.free_count);
  EXPECT_TRUE(st.live.empty());
  if (options.caching) {
    EXPECT_GT(s.cache_hits, 0);
  } else {
    EXPECT_EQ(s.cache_hits, 0);
  }
  EXPECT_GT(s.cache_misses, 0);
  EXPECT_GT(ooms, 0) << "the stress never reached the OOM ladder; lower the capacity";
  EXPECT_EQ(s.oom_count, ooms);
}

}  // namespace

TEST(CachingAllocatorStress, RandomizedAgainstModel) { run_stress(1, {}, 256 * MiB); }

TEST(CachingAllocatorStress, RandomizedWithMaxSplitSize) {
  CachingAllocatorOptions o;
  o.max_split_size = 6 * MiB;
  run_stress(2, o, 256 * MiB);
}

TEST(CachingAllocatorStress, RandomizedWithMemoryFraction) {
  CachingAllocatorOptions o;
  o.memory_fraction = 0.6;
  run_stress(3, o, 256 * MiB);
}

TEST(CachingAllocatorStress, RandomizedDirectMode) {
  CachingAllocatorOptions o;
  o.caching = false;
  run_stress(4, o, 256 * MiB);
}

TEST(CachingAllocatorStress, ThreadsShareOneAllocator) {
  auto f = make_fake(std::size_t(16) << 30);
  auto& a = *f.alloc;
  std::mutex mutex;
  std::map<std::uintptr_t, std::uintptr_t> live;  // lo -> hi, across threads
  bool overlap = false;
  auto worker = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    const StreamRef mine{200 + static_cast<std::uint64_t>(t), nullptr};
    const StreamRef other{200 + static_cast<std::uint64_t>((t + 1) % 4), nullptr};
    std::vector<void*> held;
    for (int i = 0; i < 3000; ++i) {
      if (held.size() < 16 && rng() % 2 == 0) {
        void* p = a.allocate(static_cast<std::int64_t>(rng() % (256 * KiB)), mine);
        const auto lo = reinterpret_cast<std::uintptr_t>(p);
        const auto hi = lo + a.block_size(p);
        std::lock_guard<std::mutex> lock(mutex);
        auto next = live.lower_bound(lo);
        if (next != live.end() && next->first < hi) overlap = true;
        if (next != live.begin() && std::prev(next)->second > lo) overlap = true;
        live[lo] = hi;
        held.push_back(p);
      } else if (!held.empty()) {
        void* p = held.back();
        held.pop_back();
        if (rng() % 4 == 0) a.record_stream(p, other);
        {
          std::lock_guard<std::mutex> lock(mutex);
          live.erase(reinterpret_cast<std::uintptr_t>(p));
        }
        a.free(p);
      }
    }
    for (void* p : held) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        live.erase(reinterpret_cast<std::uintptr_t>(p));
      }
      a.free(p);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_FALSE(overlap);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.active_allocations, 0);
  EXPECT_EQ(s.allocation_count, s.free_count);
  f.state->complete_all();
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
}
