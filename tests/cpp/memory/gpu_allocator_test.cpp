// The real allocators on a GPU. Each test skips with the reason when no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testing.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/memory/caching_allocator.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

using namespace tessel;

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason()

namespace {
constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST(GpuAllocator, InvalidDeviceIndex) {
  for (int bad : {-1, device_count(), 1000}) {
    try {
      device_allocator(bad);
      FAIL() << "accepted device index " << bad;
    } catch (const DeviceError& e) {
      EXPECT_TRUE(contains(e.what(), "device_allocator")) << e.what();
    }
  }
  EXPECT_THROW(make_cuda_device_runtime(-1), DeviceError);
  EXPECT_THROW(Buffer::allocate(Device::cuda(1000), 16), DeviceError);
  if (!cuda_available()) {
    EXPECT_THROW(pinned_allocator(), DeviceError);
    EXPECT_THROW(make_cuda_pinned_runtime(), DeviceError);
  }
}

#if defined(TESSEL_HAVE_CUDA)
#define CUDA_OK(expr)                                                               \
  do {                                                                              \
    const cudaError_t status_ = (expr);                                             \
    ASSERT_EQ(status_, cudaSuccess) << #expr << ": " << cudaGetErrorString(status_); \
  } while (0)

namespace {
cudaStream_t raw(const Stream& s) { return static_cast<cudaStream_t>(s.handle()); }

// Blocks a stream from the host until `open` is set (or 30 s pass, so a bug cannot hang the run).
void CUDART_CB wait_for_gate(void* gate) {
  auto* open = static_cast<std::atomic<int>*>(gate);
  const auto start = std::chrono::steady_clock::now();
  while (open->load() == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace
#endif

// Stream B still has to read X when X is freed: no allocation, on any stream, may get X until B is done.
TEST(GpuAllocator, PendingCrossStreamReadSurvivesReuse) {
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  auto& alloc = device_allocator(tessel::testing::test_gpu().index);
  if (!alloc.options().caching) GTEST_SKIP() << "TESSEL_ALLOCATOR=direct: a free waits for B, which waits for us";
  const Device dev = tessel::testing::test_gpu();
  Stream a = Stream::create(dev), b = Stream::create(dev), c = Stream::create(dev);
  const std::size_t n = 8 * MiB;
  void* x = alloc.allocate(static_cast<std::int64_t>(n), stream_ref(a));
  CUDA_OK(cudaMemsetAsync(x, 0xAB, n, raw(a)));
  Event filled(dev, false);
  filled.record(a);
  b.wait(filled);
  std::atomic<int> gate{0};
  CUDA_OK(cudaLaunchHostFunc(raw(b), wait_for_gate, &gate));
  void* host = nullptr;
  CUDA_OK(cudaMallocHost(&host, n));
  std::memset(host, 0, n);
  CUDA_OK(cudaMemcpyAsync(host, x, n, cudaMemcpyDeviceToHost, raw(b)));
  alloc.record_stream(x, stream_ref(b));
  alloc.free(x);
  std::vector<void*> taken;
  for (int i = 0; i < 8; ++i) {
    const Stream& s = (i % 2) ? a : c;
    void* y = alloc.allocate(static_cast<std::int64_t>(n), stream_ref(s));
    const char* lo = static_cast<const char*>(y);
    const char* xlo = static_cast<const char*>(x);
    EXPECT_TRUE(lo + n <= xlo || lo >= xlo + n) << "block handed out while stream B still reads it";
    CUDA_OK(cudaMemsetAsync(y, 0xCD, n, raw(s)));
    taken.push_back(y);
  }
  gate = 1;
  b.synchronize();
  a.synchronize();
  c.synchronize();
  const auto* bytes = static_cast<const unsigned char*>(host);
  EXPECT_EQ(std::count(bytes, bytes + n, 0xAB), static_cast<std::ptrdiff_t>(n)) << "B's pending copy was clobbered";
  for (void* y : taken) alloc.free(y);
  CUDA_OK(cudaFreeHost(host));
#endif
}

TEST(GpuAllocator, StressFourStreamsWithCrossStreamUse) {
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  const Device dev = tessel::testing::test_gpu();
  auto& alloc = device_allocator(tessel::testing::test_gpu().index);
  const MemoryStats base = alloc.stats();
  std::vector<Stream> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(Stream::create(dev));
  const int iters = 1500;
  const std::size_t slot = 4096;
  void* check = nullptr;
  CUDA_OK(cudaMalloc(&check, iters * slot));
  CUDA_OK(cudaMemset(check, 0, iters * slot));
  struct Held {
    void* p;
    std::size_t n;
  };
  std::vector<Held> held;
  std::map<const char*, const char*> live;  // lo -> hi
  std::vector<std::pair<unsigned char, std::size_t>> expected(iters);
  std::mt19937 rng(7);
  for (int i = 0; i < iters; ++i) {
    const int s = static_cast<int>(rng() % 4);
    const unsigned r = rng() % 100;
    const std::size_t n = r < 60 ? 1 + rng() % (64 * KiB) : r < 95 ? 64 * KiB + rng() % (4 * MiB) : 8 * MiB + rng() % (24 * MiB);
    void* p = alloc.allocate(static_cast<std::int64_t>(n), stream_ref(streams[s]));
    const char* lo = static_cast<const char*>(p);
    const char* hi = lo + n;
    auto next = live.lower_bound(lo);
    ASSERT_TRUE(next == live.end() || hi <= next->first) << "overlapping live blocks";
    ASSERT_TRUE(next == live.begin() || std::prev(next)->second <= lo) << "overlapping live blocks";
    live[lo] = hi;
    const auto value = static_cast<unsigned char>(1 + i % 255);
    CUDA_OK(cudaMemsetAsync(p, value, n, raw(streams[s])));
    const std::size_t copy = std::min(n, slot);
    char* dst = static_cast<char*>(check) + static_cast<std::size_t>(i) * slot;
    if (rng() % 2) {
      // Read on another stream after the fill, and tell the allocator.
      const int o = (s + 1 + static_cast<int>(rng() % 3)) % 4;
      Event filled(dev, false);
      filled.record(streams[s]);
      streams[o].wait(filled);
      CUDA_OK(cudaMemcpyAsync(dst, p, copy, cudaMemcpyDeviceToDevice, raw(streams[o])));
      alloc.record_stream(p, stream_ref(streams[o]));
    } else {
      CUDA_OK(cudaMemcpyAsync(dst, p, copy, cudaMemcpyDeviceToDevice, raw(streams[s])));
    }
    expected[static_cast<std::size_t>(i)] = {value, copy};
    held.push_back({p, n});
    while (held.size() > 24 || (!held.empty() && rng() % 3 == 0)) {
      const std::size_t k = rng() % held.size();
      live.erase(static_cast<const char*>(held[k].p));
      alloc.free(held[k].p);
      held[k] = held.back();
      held.pop_back();
    }
  }
  for (const Held& h : held) {
    live.erase(static_cast<const char*>(h.p));
    alloc.free(h.p);
  }
  for (auto& s : streams) s.synchronize();
  std::vector<unsigned char> out(iters * slot);
  CUDA_OK(cudaMemcpy(out.data(), check, iters * slot, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(check));
  int bad = 0;
  for (int i = 0; i < iters; ++i) {
    const auto [value, copy] = expected[static_cast<std::size_t>(i)];
    const unsigned char* got = out.data() + static_cast<std::size_t>(i) * slot;
    if (std::count(got, got + copy, value) != static_cast<std::ptrdiff_t>(copy)) ++bad;
  }
  EXPECT_EQ(bad, 0) << "copies that saw another allocation's data";
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(s.requested_bytes, base.requested_bytes);
  EXPECT_EQ(s.active_allocations, base.active_allocations);
  EXPECT_EQ(s.allocation_count - base.allocation_count, iters);
  if (alloc.options().caching) {
    EXPECT_GT(s.cache_hits, base.cache_hits);
  }
#endif
}

TEST(GpuAllocator, OutOfMemoryRecovery) {
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  CachingAllocatorOptions o;
  const Device gpu = tessel::testing::test_gpu();
  o.name = gpu.str();
  CachingAllocator alloc(make_cuda_device_runtime(gpu.index), o);
  Stream s = Stream::create(tessel::testing::test_gpu());
  const std::int64_t chunk = std::int64_t(1) << 30;
  std::vector<void*> held;
  std::string message;
  for (int i = 0; i < 4096 && message.empty(); ++i) {
    try {
      held.push_back(alloc.allocate(chunk, stream_ref(s)));
    } catch (const OutOfMemory& e) {
      message = e.what();
    }
  }
  ASSERT_FALSE(message.empty()) << "never ran out of memory";
  EXPECT_FALSE(held.empty());
  EXPECT_TRUE(contains(message, gpu.str() + ": out of memory in allocate")) << message;
  EXPECT_TRUE(contains(message, "1.00 GiB (1073741824 bytes)")) << message;
  EXPECT_TRUE(contains(message, "reserved")) << message;
  EXPECT_TRUE(contains(message, "device free")) << message;
  EXPECT_TRUE(contains(message, "largest free block")) << message;
  EXPECT_EQ(alloc.stats().oom_count, 1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed cudaMalloc left an error behind";
  for (void* p : held) alloc.free(p);
  // Cached 1 GiB blocks cannot serve 2 GiB: the ladder has to release them.
  const auto flushes = alloc.stats().cache_flushes;
  void* big = alloc.allocate(2 * chunk, stream_ref(s));
  EXPECT_NE(big, nullptr);
  EXPECT_GT(alloc.stats().cache_flushes, flushes);
  CUDA_OK(cudaMemsetAsync(big, 1, static_cast<std::size_t>(2 * chunk), raw(s)));
  s.synchronize();
  alloc.free(big);
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
#endif
}

TEST(GpuAllocator, StatsReturnToBaseline) {
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  auto& alloc = device_allocator(tessel::testing::test_gpu().index);
  const MemoryStats base = alloc.stats();
  Stream s1 = Stream::create(tessel::testing::test_gpu()), s2 = Stream::create(tessel::testing::test_gpu());
  std::vector<void*> ptrs;
  for (std::size_t n : {std::size_t(0), std::size_t(1), 100 * KiB, 3 * MiB, 40 * MiB}) {
    ptrs.push_back(alloc.allocate(static_cast<std::int64_t>(n), stream_ref(s1)));
    void* q = alloc.allocate(static_cast<std::int64_t>(n), stream_ref(s2));
    alloc.record_stream(q, stream_ref(s1));
    ptrs.push_back(q);
  }
  EXPECT_EQ(alloc.stats().active_allocations, base.active_allocations + 10);
  for (void* p : ptrs) alloc.free(p);
  s1.synchronize();
  s2.synchronize();
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(s.requested_bytes, base.requested_bytes);
  EXPECT_EQ(s.active_allocations, base.active_allocations);
  EXPECT_EQ(s.free_count - base.free_count, 10);
  alloc.empty_cache();
  s = alloc.stats();
  if (base.active_allocations == 0) {
    EXPECT_EQ(s.reserved_bytes, 0);
    EXPECT_EQ(s.segments, 0);
  }
  EXPECT_LE(s.allocated_bytes, s.reserved_bytes);
#endif
}

TEST(GpuAllocator, BufferRaiiKeepsItsStreamAlive) {
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  const Device dev = tessel::testing::test_gpu();
  auto& alloc = device_allocator(tessel::testing::test_gpu().index);
  const MemoryStats base = alloc.stats();
  Stream s = Stream::create(dev);
  const std::uint64_t id = s.id();
  {
    auto buf = Buffer::allocate(dev, static_cast<std::int64_t>(MiB), s);
    EXPECT_EQ(buf->kind(), MemoryKind::device);
    EXPECT_EQ(buf->device(), dev);
    EXPECT_EQ(buf->stream().id(), id);
    EXPECT_EQ(alloc.block_size(buf->data()), MiB);
    EXPECT_EQ(alloc.stats().active_allocations, base.active_allocations + 1);
    CUDA_OK(cudaMemsetAsync(buf->data(), 3, MiB, raw(s)));
    s = Stream::create(dev);  // drop our handle: the buffer keeps the stream
    EXPECT_TRUE(detail::stream_alive(id));
    buf->record_stream(s);
    auto plain = Buffer::allocate(dev, 100);  // on the current stream
    EXPECT_EQ(plain->stream(), current_stream(dev));
  }
  EXPECT_FALSE(detail::stream_alive(id));
  s.synchronize();
  EXPECT_EQ(alloc.stats().active_allocations, base.active_allocations);
  EXPECT_EQ(alloc.stats().allocated_bytes, base.allocated_bytes);
  EXPECT_THROW(Buffer::allocate(dev, 16, Stream::cpu()), DeviceError);
  EXPECT_THROW(Buffer::allocate(dev, -1), ValueError);
#endif
}

TEST(GpuAllocator, PinnedRoundTrip) {
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  const Device dev = tessel::testing::test_gpu();
  auto& pinned = pinned_allocator();
  const MemoryStats base = pinned.stats();
  Stream s = Stream::create(dev);
  const std::size_t n = MiB + 123;
  auto* h1 = static_cast<unsigned char*>(pinned.allocate(static_cast<std::int64_t>(n), stream_ref(s)));
  auto* h2 = static_cast<unsigned char*>(pinned.allocate(static_cast<std::int64_t>(n), stream_ref(s)));
  cudaPointerAttributes attr{};
  CUDA_OK(cudaPointerGetAttributes(&attr, h1));
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  for (std::size_t i = 0; i < n; ++i) h1[i] = static_cast<unsigned char>(i * 7 + 1);
  std::memset(h2, 0, n);
  void* d = device_allocator(tessel::testing::test_gpu().index).allocate(static_cast<std::int64_t>(n), stream_ref(s));
  CUDA_OK(cudaMemcpyAsync(d, h1, n, cudaMemcpyHostToDevice, raw(s)));
  CUDA_OK(cudaMemcpyAsync(h2, d, n, cudaMemcpyDeviceToHost, raw(s)));
  s.synchronize();
  EXPECT_EQ(std::memcmp(h1, h2, n), 0);
  device_allocator(tessel::testing::test_gpu().index).free(d);
  pinned.free(h1);
  pinned.free(h2);
  EXPECT_EQ(pinned.stats().allocated_bytes, base.allocated_bytes);
  EXPECT_EQ(pinned.stats().active_allocations, base.active_allocations);
  auto buf = Buffer::allocate_pinned(4096);
  EXPECT_EQ(buf->kind(), MemoryKind::pinned_host);
  std::memset(buf->data(), 1, 4096);
  buf.reset();
  EXPECT_EQ(pinned.stats().active_allocations, base.active_allocations);
#endif
}

TEST(GpuAllocator, DestroyedStreams) {
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  const Device dev = tessel::testing::test_gpu();
  auto& alloc = device_allocator(tessel::testing::test_gpu().index);
  {
    Stream s = Stream::create(dev);
    alloc.free(alloc.allocate(static_cast<std::int64_t>(30 * MiB), stream_ref(s)));
  }  // s is destroyed: its cached segment becomes adoptable
  Stream t = Stream::create(dev);
  const MemoryStats before = alloc.stats();
  void* q = alloc.allocate(static_cast<std::int64_t>(30 * MiB), stream_ref(t));
  if (alloc.options().caching) {
    EXPECT_EQ(alloc.stats().raw_allocations, before.raw_allocations);
  }
  alloc.free(q);
  void* r = nullptr;
  {
    Stream s2 = Stream::create(dev);
    r = alloc.allocate(4096, stream_ref(s2));
  }
  EXPECT_THROW(alloc.free(r), DeviceError);
  EXPECT_EQ(alloc.stats().active_allocations, before.active_allocations);
  EXPECT_EQ(alloc.block_size(r), 0u);
#endif
}

// Wrapped host memory counts as page-locked only when its owner locked it; the pinned pool always.
TEST(GpuAllocator, PageLockedHostMemoryIsRecognized) {
  std::vector<float> plain(1 << 16, 1.5f);
  auto wrapped_plain = Buffer::wrap(plain.data(), static_cast<std::int64_t>(plain.size() * sizeof(float)),
                                    Device::cpu(), MemoryKind::host, nullptr);
  EXPECT_FALSE(wrapped_plain->page_locked());
  SKIP_WITHOUT_GPU();
#if defined(TESSEL_HAVE_CUDA)
  EXPECT_TRUE(Buffer::allocate_pinned(4096)->page_locked());
  std::vector<float> registered(1 << 16, 2.5f);
  const std::size_t bytes = registered.size() * sizeof(float);
  ASSERT_EQ(cudaHostRegister(registered.data(), bytes, cudaHostRegisterDefault), cudaSuccess);
  auto wrapped = Buffer::wrap(registered.data(), static_cast<std::int64_t>(bytes), Device::cpu(), MemoryKind::host,
                              nullptr);
  EXPECT_TRUE(wrapped->page_locked());
  wrapped.reset();
  ASSERT_EQ(cudaHostUnregister(registered.data()), cudaSuccess);
  EXPECT_FALSE(wrapped_plain->page_locked());
#endif
}
