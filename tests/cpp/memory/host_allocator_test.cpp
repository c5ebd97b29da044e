#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/memory/host_allocator.hpp"
#include "tessel/memory/stats.hpp"

using namespace tessel;

TEST(HostAllocator, AlignedAndWritable) {
  std::vector<void*> ptrs;
  for (std::int64_t n : {0, 1, 63, 64, 65, 1000, 1 << 20}) {
    void* p = host_allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % host_alignment, 0u) << n;
    std::memset(p, 0x5a, static_cast<std::size_t>(n));
    ptrs.push_back(p);
  }
  EXPECT_NE(ptrs[0], ptrs[1]);
  for (void* p : ptrs) host_free(p);
}

TEST(HostAllocator, Stats) {
  const MemoryStats base = host_memory_stats();
  void* p = host_allocate(100);  // rounded to 128
  void* q = host_allocate(64);
  MemoryStats s = host_memory_stats();
  EXPECT_EQ(s.allocated_bytes - base.allocated_bytes, 192);
  EXPECT_EQ(s.requested_bytes - base.requested_bytes, 164);
  EXPECT_EQ(s.active_allocations - base.active_allocations, 2);
  EXPECT_EQ(s.allocation_count - base.allocation_count, 2);
  EXPECT_EQ(s.reserved_bytes, s.allocated_bytes);
  EXPECT_GE(s.allocated_peak, s.allocated_bytes);
  host_free(p);
  host_free(q);
  s = host_memory_stats();
  EXPECT_EQ(s.allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(s.active_allocations, base.active_allocations);
  EXPECT_EQ(s.free_count - base.free_count, 2);
  reset_host_peak_stats();
  EXPECT_EQ(host_memory_stats().allocated_peak, s.allocated_bytes);
}

TEST(HostAllocator, DoubleFreeAndForeignPointer) {
  void* p = host_allocate(256);
  host_free(p);
  const MemoryStats before = host_memory_stats();
  try {
    host_free(p);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("{}", p)), std::string::npos) << e.what();
  }
  int local = 0;
  EXPECT_THROW(host_free(&local), Error);
  EXPECT_NO_THROW(host_free(nullptr));
  EXPECT_EQ(host_memory_stats().free_count, before.free_count);
}

TEST(HostAllocator, BadSizes) {
  EXPECT_THROW(host_allocate(-1), ValueError);
  try {
    host_allocate(std::numeric_limits<std::int64_t>::max());
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("9223372036854775807"), std::string::npos) << e.what();
  }
}

TEST(Buffer, HostRaii) {
  const MemoryStats base = host_memory_stats();
  {
    auto b = Buffer::allocate(Device::cpu(), 1000);
    EXPECT_EQ(b->kind(), MemoryKind::host);
    EXPECT_EQ(b->size(), 1000);
    EXPECT_EQ(b->device(), Device::cpu());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->data()) % host_alignment, 0u);
    std::memset(b->data(), 1, 1000);
    b->record_stream(Stream::cpu());  // a no-op for host memory
    EXPECT_EQ(host_memory_stats().active_allocations, base.active_allocations + 1);
  }
  EXPECT_EQ(host_memory_stats().active_allocations, base.active_allocations);
  EXPECT_EQ(host_memory_stats().allocated_bytes, base.allocated_bytes);
  EXPECT_THROW(Buffer::allocate(Device::cpu(), -5), ValueError);
}

TEST(Buffer, WrapRunsTheDeleter) {
  static int deleted = 0;
  deleted = 0;
  std::vector<char> storage(64);
  {
    std::shared_ptr<void> owner(storage.data(), [](void*) { ++deleted; });
    auto b = Buffer::wrap(storage.data(), 64, Device::cpu(), MemoryKind::host, std::move(owner));
    EXPECT_EQ(b->data(), storage.data());
    EXPECT_EQ(deleted, 0);
  }
  EXPECT_EQ(deleted, 1);
  auto empty = Buffer::wrap(storage.data(), 64, Device::cpu(), MemoryKind::host, nullptr);
  empty.reset();  // nothing to release, nothing freed
  EXPECT_THROW(Buffer::wrap(nullptr, -1, Device::cpu(), MemoryKind::host, nullptr), ValueError);
}

TEST(Buffer, PinnedFallsBackToHostWithoutCuda) {
  if (cuda_available()) GTEST_SKIP() << "CUDA is available: covered by the GPU tests";
  auto b = Buffer::allocate_pinned(4096);
  EXPECT_EQ(b->kind(), MemoryKind::host);
  EXPECT_EQ(b->size(), 4096);
}

TEST(FormatBytes, HumanUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(std::int64_t(3) << 30), "3.00 GiB");
}

// Blocks of 4 MiB and more are kept when freed and serve the next allocation of about their size.
TEST(HostAllocator, LargeBlocksAreCached) {
  if (!config().caching_allocator) GTEST_SKIP() << "TESSEL_ALLOCATOR=direct: nothing is cached";
  empty_host_cache();
  const MemoryStats base = host_memory_stats();
  const std::int64_t big = std::int64_t{8} << 20;
  void* p = host_allocate(big);
  std::memset(p, 1, static_cast<std::size_t>(big));
  host_free(p);
  MemoryStats s = host_memory_stats();
  EXPECT_EQ(s.allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(s.reserved_bytes - base.reserved_bytes, big);  // held in the cache
  EXPECT_EQ(s.largest_free_block, big);
  void* q = host_allocate(big - 4096);  // close enough in size: the same block
  EXPECT_EQ(q, p);
  EXPECT_EQ(host_memory_stats().cache_hits - base.cache_hits, 1);
  EXPECT_EQ(host_memory_stats().allocated_bytes - base.allocated_bytes, big);
  void* small = host_allocate(big / 2);  // too small for the (now live) block anyway: a new one
  EXPECT_NE(small, q);
  host_free(small);
  host_free(q);
  void* r = host_allocate(big / 2);  // half the size: not from the 8 MiB block
  EXPECT_NE(r, q);
  host_free(r);
  empty_host_cache();
  s = host_memory_stats();
  EXPECT_EQ(s.reserved_bytes, s.allocated_bytes);
  EXPECT_EQ(s.largest_free_block, 0);
}
