// Several GPUs: copies between cuda:0 and cuda:1 both ways, host copies to either, work on one
// device while the other is busy, two threads each driving a device, a pinned source freed while
// its copy is pending, and the errors for a device that does not exist or for mixed devices.
// Tests that need two GPUs skip with the reason on a machine with fewer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <complex>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "testing.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/jit/user_kernels.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/ops/elementwise.hpp"
#include "tessel/ops/fft.hpp"
#include "tessel/ops/matmul.hpp"
#include "tessel/ops/random.hpp"
#include "tessel/ops/reduce.hpp"
#include "tessel/ops/sort.hpp"
#include "tessel/pipeline/pipeline.hpp"
#include "tessel/sim/particles.hpp"

namespace tessel {
namespace {

const Device d0 = Device::cuda(0);
const Device d1 = Device::cuda(1);

Array iota(std::int64_t n, Device device, const OptionalStream& stream = std::nullopt) {
  return arange(0, n, 1, DType::int32, device, stream);
}

void expect_iota(const Array& a, std::int64_t n) {
  ASSERT_EQ(a.shape(), Shape{n});
  const std::vector<std::int32_t> values = a.to_vector<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(values[static_cast<std::size_t>(i)], i) << "element " << i;
}

// Keeps `stream` busy for at least `seconds` (clock64 runs at no more than 2 GHz) and returns an
// event recorded after it.
std::unique_ptr<Event> keep_busy(const Stream& stream, double seconds) {
  static const jit::RawKernel spin(R"(
extern "C" __global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
})",
                                   "spin");
  spin.launch(1, 1, {static_cast<long long>(seconds * 2e9)}, 0, stream);
  auto done = std::make_unique<Event>(stream.device(), false);
  done->record(stream);
  return done;
}

// Free memory on a device, after giving back what tessel's pool caches.
std::int64_t free_bytes(Device device) {
  device_allocator(device.index).empty_cache();
  const MemoryStats stats = device_allocator(device.index).stats();
  return static_cast<std::int64_t>(device_properties(device.index).total_memory) - stats.reserved_bytes;
}

TEST(MultiGpu, CopiesBothWaysAtEverySize) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const Device before = current_device();
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1001}, std::int64_t{65537},
                               std::int64_t{64} << 20}) {
    for (const auto& [from, to] : {std::pair{d0, d1}, std::pair{d1, d0}}) {
      SCOPED_TRACE(std::to_string(n) + " int32 from " + from.str() + " to " + to.str());
      const Array source = iota(n, from);
      const Array moved = source.to(to);
      EXPECT_EQ(moved.device(), to);
      expect_iota(moved, n);
      // On a stream of the source device, and through a reversed (strided) view.
      expect_iota(source.to(to, current_stream(from)), n);
      const Array reversed = source.index({Slice(none, none, -1)}).to(to, current_stream(to));
      expect_iota(reversed.index({Slice(none, none, -1)}), n);
      // copyto across devices, with a cast on the destination.
      const Array widened = empty({n}, DType::int64, to);
      copyto(widened, source);
      expect_iota(astype(widened, DType::int32), n);
    }
  }
  EXPECT_EQ(current_device(), before);
}

TEST(MultiGpu, CopiesBackToBackKeepStreamOrder) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  // Writes on the source right after the copy must not reach the copy (it runs on the source's
  // stream), and reads on the destination must see the copy (its stream waits for it).
  const std::int64_t n = 1 << 24;
  Array a = iota(n, d0);
  std::vector<Array> copies;
  for (int round = 0; round < 4; ++round) {
    copies.push_back(a.to(d1));
    a = add(a, 1);
  }
  for (int round = 0; round < 4; ++round) {
    const Array expected = add(iota(n, d1), round);
    EXPECT_TRUE(all(equal(copies[static_cast<std::size_t>(round)], expected)).item<bool>()) << "round " << round;
  }
}

TEST(MultiGpu, HostCopiesToEitherDeviceFromPageableAndPinnedMemory) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const Device before = current_device();
  const std::int64_t n = (1 << 20) + 3;
  std::vector<std::int32_t> host(static_cast<std::size_t>(n));
  std::iota(host.begin(), host.end(), 0);
  Array pinned = empty_pinned({n}, DType::int32);
  std::copy(host.begin(), host.end(), pinned.data_as<std::int32_t>());
  for (Device device : {d0, d1}) {
    SCOPED_TRACE(device.str());
    expect_iota(from_vector(host, {n}, device), n);
    expect_iota(pinned.to(device), n);
    const Array back = iota(n, device).to(Device::cpu());
    EXPECT_EQ(back.to_vector<std::int32_t>(), host);
  }
  EXPECT_EQ(current_device(), before);
}

// One copy of more than 4 GiB each way (byte offsets past 2^32).
TEST(MultiGpu, HugeCopyAbove4GiBBothWays) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const std::int64_t n = (std::int64_t{4} << 30) + 4099;  // uint8 elements
  const std::int64_t headroom = std::int64_t{1} << 30;
  if (free_bytes(d0) < 2 * n + headroom || free_bytes(d1) < n + headroom) {
    GTEST_SKIP() << "needs " << (2 * n + headroom) / 1e9 << " GB free on cuda:0 and " << (n + headroom) / 1e9
                 << " GB on cuda:1";
  }
  Array source = full({n}, 7, DType::uint8, d0);
  const std::vector<std::int64_t> marks = {0, (std::int64_t{1} << 32) - 1, std::int64_t{1} << 32, n - 1};
  for (std::size_t i = 0; i < marks.size(); ++i) {
    fill(source.slice(0, Slice(marks[i], marks[i] + 1)), static_cast<int>(i + 1));
  }
  auto check = [&](const Array& a) {
    for (std::size_t i = 0; i < marks.size(); ++i) {
      EXPECT_EQ(a.slice(0, Slice(marks[i], marks[i] + 1)).item<int>(), static_cast<int>(i + 1)) << marks[i];
    }
    EXPECT_EQ(sum(a, std::nullopt, false).item<std::int64_t>(), 7 * (n - 4) + 1 + 2 + 3 + 4);
  };
  Array moved = source.to(d1);
  check(moved);
  source = Array();
  check(moved.to(d0));
}

// Work on cuda:1 finishes while cuda:0 is still busy: nothing on the path to cuda:1 waits for
// cuda:0 (no device-wide synchronization, no work queued on the wrong device).
TEST(MultiGpu, OpsOnDevice1WhileDevice0IsBusy) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const std::int64_t n = 1 << 20;
  auto work = [&] {
    const Array x = iota(n, d1);
    const Array y = add(multiply(x, 2), 1);
    EXPECT_EQ(sum(astype(y, DType::int64)).item<std::int64_t>(), n * n);
    EXPECT_EQ(sort(negative(x)).slice(0, Slice(0, 1)).item<std::int32_t>(), -(n - 1));
    const Array m = matmul(ones({64, 32}, DType::float32, d1), ones({32, 16}, DType::float32, d1));
    EXPECT_EQ(m.slice(0, Slice(0, 1)).slice(1, Slice(0, 1)).item<float>(), 32.0f);
    const Array f = fft::fft(ones({256}, DType::complex64, d1));
    EXPECT_EQ(f.slice(0, Slice(0, 1)).item<std::complex<float>>(), std::complex<float>(256.0f, 0.0f));
    const Array r = random::uniform({n}, 0, 1, DType::float32, d1);
    EXPECT_LT(max(r).item<float>(), 1.0f);
  };
  work();  // compiles and loads the kernels first, so the timed part below is only their work
  const std::unique_ptr<Event> busy = keep_busy(current_stream(d0), 3.0);
  work();
  EXPECT_FALSE(busy->query()) << "cuda:1's work waited for cuda:0";
  busy->synchronize();
}

// A pinned source freed while its copy to another device is still queued: the copy holds the
// block, so a new pinned allocation cannot reuse (and overwrite) it before the copy has run.
TEST(MultiGpu, PinnedSourceFreedWhileItsCopyIsPending) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const std::int64_t n = (1 << 22) + 1;
  for (Device device : {d1, d0}) {
    SCOPED_TRACE(device.str());
    const std::unique_ptr<Event> busy = keep_busy(current_stream(device), 1.0);
    Array pinned = empty_pinned({n}, DType::int32);
    std::iota(pinned.data_as<std::int32_t>(), pinned.data_as<std::int32_t>() + n, 0);
    const Array moved = pinned.to(device);  // queued behind the busy kernel
    pinned = Array();
    for (int i = 0; i < 4; ++i) {
      Array scribble = empty_pinned({n}, DType::int32);
      std::fill(scribble.data_as<std::int32_t>(), scribble.data_as<std::int32_t>() + n, -1);
    }
    EXPECT_FALSE(busy->query()) << "the copy ran before the source was freed; the test proves nothing";
    expect_iota(moved, n);
  }
}

// Two threads, one per device, each running mixed ops and copies to the other device for
// TESSEL_MULTI_GPU_SECONDS (default 30). Each thread starts with the *other* device current, so
// every op depends on the guards.
TEST(MultiGpu, TwoThreadsOnTwoDevicesRunMixedOps) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const char* env = std::getenv("TESSEL_MULTI_GPU_SECONDS");
  const double seconds = env != nullptr && *env != '\0' ? std::atof(env) : 30.0;
  std::mutex mutex;
  std::vector<std::string> failures;
  std::atomic<std::int64_t> rounds{0};
  auto work = [&](Device mine, Device other) {
    try {
      set_current_device(other.index);
      const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
      for (std::int64_t round = 0; std::chrono::steady_clock::now() < stop; ++round) {
        const std::int64_t n = (1 << 18) + round % 7;
        const Array x = iota(n, mine);
        const Array y = add(multiply(astype(x, DType::float64), 2.0), 1.0);  // 2i + 1
        if (sum(y).item<double>() != static_cast<double>(n) * static_cast<double>(n)) throw Error("sum is wrong");
        if (argsort(negative(x)).slice(0, Slice(0, 1)).item<std::int64_t>() != n - 1) throw Error("argsort is wrong");
        const Array m = matmul(ones({48, 40}, DType::float32, mine), full({40, 24}, 0.5, DType::float32, mine));
        if (min(m).item<float>() != 20.0f || max(m).item<float>() != 20.0f) throw Error("matmul is wrong");
        const Array f = fft::fft(ones({n}, DType::complex128, mine));
        if (std::abs(f.slice(0, Slice(0, 1)).item<std::complex<double>>() - std::complex<double>(double(n), 0)) > 1e-6) {
          throw Error("fft is wrong");
        }
        const Array there = y.to(other);
        if (there.device() != other || !all(equal(there.to(mine), y)).item<bool>()) throw Error("copy is wrong");
        if (random::normal({n}, 0, 1, DType::float32, mine).device() != mine) throw Error("random is on the wrong device");
        if (current_device() != other) throw Error("the current device was not restored");
        ++rounds;
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex);
      failures.push_back(mine.str() + ": " + e.what());
    }
  };
  std::thread t0(work, d0, d1), t1(work, d1, d0);
  t0.join();
  t1.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_GT(rounds.load(), 1);
}

TEST(MultiGpu, PipelineOnDevice1) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const Device before = current_device();
  const std::int64_t rows = 10000;
  std::vector<float> host(static_cast<std::size_t>(rows * 33));
  std::iota(host.begin(), host.end(), 0.0f);
  const Array input = from_vector(host, {rows, 33}, Device::cpu());
  PipelineOptions options;
  options.device = d1;
  options.chunk_elems = 33 * 997;
  options.num_streams = 3;
  Pipeline pipeline(
      [](const Array& x, const Stream& s) {
        if (x.device() != d1 || s.device() != d1) throw Error("the chunk is not on cuda:1");
        return add(x, 1.0f, std::nullopt, s);
      },
      options);
  const Array out = pipeline.run(input);
  const std::vector<float> values = out.to_vector<float>();
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], host[i] + 1.0f) << i;
  EXPECT_EQ(pipeline.report().device, "cuda:1");
  EXPECT_EQ(current_device(), before);
}

TEST(MultiGpu, ParticlesBenchmarkSetupOnDevice1) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const Device before = current_device();
  const sim::BenchmarkSetup setup = sim::benchmark_setup(100000);
  sim::Particles on0(setup.state, setup.config, d0);
  sim::Particles on1(setup.state, setup.config, d1);
  on0.step(20);
  on1.step(20);
  const sim::Diagnostics a = on0.diagnostics(), b = on1.diagnostics();
  EXPECT_EQ(b.step, 20);
  EXPECT_NEAR(b.kinetic, a.kinetic, 1e-4 * std::abs(a.kinetic));
  EXPECT_NEAR(b.total_energy(), a.total_energy(), 1e-4 * std::abs(a.total_energy()));
  EXPECT_EQ(current_device(), before);
}

// A device index that does not exist is a clear error at every entry (also with one GPU or none).
TEST(MultiGpu, MissingDeviceIsAClearErrorEverywhere) {
  const Device missing = Device::cuda(7);
  if (cuda_available() && device_count() > 7) GTEST_SKIP() << "cuda:7 exists here";
  const std::vector<std::string> parts = {"7"};
  testing::expect_error<DeviceError>([&] { zeros({2}, DType::float32, missing); }, parts);
  testing::expect_error<DeviceError>([&] { iota(3, missing); }, parts);
  testing::expect_error<DeviceError>([&] { from_vector(std::vector<float>{1, 2}, {2}, missing); }, parts);
  testing::expect_error<DeviceError>([&] { ones({2}, DType::float32, Device::cpu()).to(missing); }, parts);
  testing::expect_error<DeviceError>([&] { Stream::create(missing); }, parts);
  testing::expect_error<DeviceError>([&] { Event event(missing); }, parts);
  testing::expect_error<DeviceError>([&] { random::uniform({2}, 0, 1, DType::float32, missing); }, parts);
  PipelineOptions options;
  options.device = missing;
  testing::expect_error<DeviceError>([&] { Pipeline([](const Array& x, const Stream&) { return x; }, options); }, parts);
  if (cuda_available()) {
    testing::expect_error<DeviceError>([&] { ones({2}, DType::float32, testing::test_gpu()).to(missing); }, parts);
    testing::expect_error<DeviceError>([&] { DeviceGuard guard(missing); }, parts);
  }
}

// Mixing cuda:0 and cuda:1 in one op names both devices, as the CPU/GPU boundary does.
TEST(MultiGpu, MixedDevicesInOneOpNameBoth) {
  TESSEL_SKIP_UNLESS_TWO_GPUS();
  const std::vector<std::string> both = {"cuda:0", "cuda:1"};
  const Array a0 = ones({4, 4}, DType::float32, d0), a1 = ones({4, 4}, DType::float32, d1);
  testing::expect_error<DeviceError>([&] { add(a0, a1); }, both);
  testing::expect_error<DeviceError>([&] { add(a0, 1.0, a1); }, both);  // out on the other device
  testing::expect_error<DeviceError>([&] { where(greater(a0, 0.0), a0, a1); }, both);
  testing::expect_error<DeviceError>([&] { matmul(a0, a1); }, both);
  MatmulOptions bias;
  bias.bias = ones({4}, DType::float32, d1);
  testing::expect_error<DeviceError>([&] { matmul(a0, a0, bias); }, both);
  testing::expect_error<DeviceError>([&] { concatenate({a0, a1}); }, both);
  testing::expect_error<DeviceError>([&] { stack({a0, a1}); }, both);
  const Array c0 = astype(a0, DType::complex64);
  const fft::Plan plan(c0, fft::Transform::fft);
  testing::expect_error<DeviceError>([&] { plan.execute(c0.to(d1)); }, both);
  testing::expect_error<DeviceError>([&] { fft::fft(c0, std::nullopt, -1, "backward", current_stream(d1)); }, both);
  testing::expect_error<DeviceError>([&] { sum(a0, std::nullopt, false, current_stream(d1)); }, both);
  testing::expect_error<DeviceError>([&] { Event(d0).record(current_stream(d1)); }, both);
  // A Pipeline on cuda:1 whose compute mixes in a cuda:0 array, or returns one.
  PipelineOptions options;
  options.device = d1;
  const Array host = ones({8, 4}, DType::float32, Device::cpu());
  Pipeline mixing([&](const Array& x, const Stream& s) { return add(x, a0, std::nullopt, s); }, options);
  testing::expect_error<DeviceError>([&] { mixing.run(host); }, {"Pipeline.run", "cuda:0", "cuda:1"});
  Pipeline returning([&](const Array&, const Stream&) { return ones({8, 4}, DType::float32, d0); }, options);
  testing::expect_error<DeviceError>([&] { returning.run(host); }, {"Pipeline.run", "cuda:0", "cuda:1"});
}

}  // namespace
}  // namespace tessel
