#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "testing.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/core/version.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

using namespace tessel;

namespace {
// The GPU these tests run on (testing.hpp: TESSEL_TEST_DEVICES picks it).
Device gpu() { return tessel::testing::test_gpu(); }
}  // namespace

#define SKIP_WITHOUT_GPU() TESSEL_SKIP_UNAVAILABLE(gpu())

TEST(Device, ParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), gpu());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_EQ(Device::cpu().str(), "cpu");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CUDA:0", "", "cuda:99999999"}) {
    try {
      Device::parse(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Device, AvailabilityIsConsistent) {
  // Runs everywhere: without a GPU everything answers for the CPU and nothing throws.
  if (cuda_available()) {
    EXPECT_GT(device_count(), 0);
    EXPECT_TRUE(cuda_unavailable_reason().empty());
    EXPECT_TRUE(current_device().is_cuda());
    EXPECT_GT(runtime_version(), 0);
  } else {
    EXPECT_EQ(device_count(), 0);
    EXPECT_FALSE(cuda_unavailable_reason().empty());
    EXPECT_EQ(current_device(), Device::cpu());
    EXPECT_EQ(default_device(), Device::cpu());
    EXPECT_NO_THROW(synchronize());
  }
}

TEST(Device, InvalidIndexIsClearError) {
  for (int bad : {-1, device_count(), 1000}) {
    try {
      device_properties(bad);
      FAIL() << "accepted index " << bad;
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("device_properties"), std::string::npos) << what;
      EXPECT_NE(what.find(std::to_string(bad)), std::string::npos) << what;
    }
    EXPECT_THROW(set_current_device(bad), DeviceError);
    EXPECT_THROW(Stream::create(Device::cuda(bad)), DeviceError);
  }
}

TEST(Device, BuildInfo) {
  const auto info = build_info();
  EXPECT_EQ(info.version, version());
  EXPECT_FALSE(info.build_type.empty());
}

TEST(Stream, CpuStreamAndEventsWork) {
  Stream s = Stream::cpu();
  EXPECT_TRUE(s.device().is_cpu());
  EXPECT_TRUE(s.query());
  s.synchronize();
  Event start(Device::cpu()), stop(Device::cpu());
  EXPECT_THROW(start.elapsed_ms(stop), Error);  // not recorded yet
  start.record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop.record(s);
  EXPECT_GE(start.elapsed_ms(stop), 4.0f);
  EXPECT_LT(start.elapsed_ms(stop), 5000.0f);
}

TEST(Stream, IdsAreUniqueAndGuardRestores) {
  SKIP_WITHOUT_GPU();
  Stream a = Stream::create(gpu());
  Stream b = Stream::create(gpu());
  EXPECT_NE(a.id(), b.id());
  EXPECT_TRUE(a.owned());
  EXPECT_NE(a.handle(), nullptr);
  EXPECT_TRUE(detail::stream_alive(a.id()));
  const auto before = current_stream(gpu());
  {
    StreamGuard guard(a);
    EXPECT_EQ(current_stream(gpu()), a);
  }
  EXPECT_EQ(current_stream(gpu()), before);
  const std::uint64_t id = b.id();
  b = a;  // drops the last handle of the old b: destroyed
  EXPECT_FALSE(detail::stream_alive(id));
  // Adopting the same handle twice gives the same identity.
  EXPECT_EQ(Stream::from_handle(a.handle(), gpu()).id(), Stream::from_handle(a.handle(), gpu()).id());
}

TEST(Stream, PrioritiesAreClamped) {
  SKIP_WITHOUT_GPU();
  const auto [greatest, least] = Stream::priority_range(gpu());
  EXPECT_LE(greatest, least);
  EXPECT_EQ(Stream::create(gpu(), greatest - 100).priority(), greatest);
  EXPECT_EQ(Stream::create(gpu(), least + 100).priority(), least);
}

#if defined(TESSEL_HAVE_CUDA)
TEST(Event, GpuTimingsArePositive) {
  SKIP_WITHOUT_GPU();
  Stream s = Stream::create(gpu());
  Event start(gpu()), stop(gpu());
  EXPECT_THROW(Event(gpu()).record(Stream::cpu()), DeviceError);
  start.record(s);
  // Some real device work between the events: a 256 MiB device-to-device copy.
  void* a = nullptr;
  void* b = nullptr;
  // Core tests sit below the memory layer, so they use the runtime directly here.
  ASSERT_EQ(cudaMalloc(&a, 256 << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 256 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(a, 1, 256 << 20, static_cast<cudaStream_t>(s.handle())), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b, a, 256 << 20, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(s.handle())), cudaSuccess);
  stop.record(s);
  const float ms = start.elapsed_ms(stop);
  EXPECT_GT(ms, 0.0f);
  EXPECT_TRUE(stop.query());
  // Another stream waits on the event: its work is ordered after the copy.
  Stream other = Stream::create(gpu());
  other.wait(stop);
  other.synchronize();
  EXPECT_TRUE(s.query());
  Event no_timing(gpu(), false);
  no_timing.record(s);
  EXPECT_THROW(start.elapsed_ms(no_timing), Error);
  cudaFree(a);
  cudaFree(b);
  synchronize(gpu());
}
#endif

TEST(Device, PropertiesAndPeaks) {
  SKIP_WITHOUT_GPU();
  const auto& p = device_properties(gpu().index);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.multiprocessors, 0);
  EXPECT_GT(p.total_memory, std::size_t{1} << 30);
  EXPECT_GT(p.l2_cache, 0u);
  EXPECT_GT(p.clock_khz, 0);
  EXPECT_GT(p.peak_bandwidth_bytes_per_s, 1e11);
  EXPECT_GT(p.peak_fp32_flops, 1e12);
  EXPECT_GT(driver_version(), 0);
}

#if defined(TESSEL_HAVE_CUDA)
#define SKIP_UNLESS_TWO_GPUS()                                                                            \
  if (!cuda_available() || device_count() < 2)                                                            \
  GTEST_SKIP() << "needs two CUDA devices, found " << (cuda_available() ? device_count() : 0)

int runtime_device() {
  int index = -1;
  EXPECT_EQ(cudaGetDevice(&index), cudaSuccess);
  return index;
}

// These tests set the current device themselves; the next test finds it as it was.
struct KeepCurrentDevice {
  int index = runtime_device();
  ~KeepCurrentDevice() { cudaSetDevice(index); }
};

TEST(DeviceGuard, SwitchesNestsAndRestoresTheCallersDevice) {
  SKIP_UNLESS_TWO_GPUS();
  const KeepCurrentDevice keep;
  set_current_device(0);
  {
    DeviceGuard outer(Device::cuda(1));
    EXPECT_EQ(runtime_device(), 1);
    {
      DeviceGuard inner(Device::cuda(0));
      EXPECT_EQ(runtime_device(), 0);
      DeviceGuard same(Device::cuda(0));  // already current: changes nothing
      EXPECT_EQ(runtime_device(), 0);
    }
    EXPECT_EQ(runtime_device(), 1);
    DeviceGuard cpu(Device::cpu());
    EXPECT_EQ(runtime_device(), 1);
  }
  EXPECT_EQ(runtime_device(), 0);
  EXPECT_EQ(current_device(), Device::cuda(0));
}

// Another library (PyTorch, CuPy, plain cudaSetDevice) changes the current device between tessel
// calls: the next guard still switches to its own device and then restores the other library's.
TEST(DeviceGuard, SeesDeviceChangesMadeOutsideTessel) {
  SKIP_UNLESS_TWO_GPUS();
  const KeepCurrentDevice keep;
  { DeviceGuard learn(Device::cuda(1)); }  // both devices' contexts are known now
  { DeviceGuard learn(Device::cuda(0)); }
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  {
    DeviceGuard guard(Device::cuda(0));
    EXPECT_EQ(runtime_device(), 0);
  }
  EXPECT_EQ(runtime_device(), 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    DeviceGuard guard(Device::cuda(1));
    EXPECT_EQ(runtime_device(), 1);
  }
  EXPECT_EQ(runtime_device(), 0);
}

// A new thread has no context yet (the runtime calls it device 0): the guard binds the device
// and leaves device 0 current afterwards.
TEST(DeviceGuard, WorksOnAFreshThread) {
  SKIP_UNLESS_TWO_GPUS();
  std::thread([] {
    {
      DeviceGuard guard(Device::cuda(1));
      EXPECT_EQ(runtime_device(), 1);
    }
    EXPECT_EQ(runtime_device(), 0);
  }).join();
}

// Events and the legacy default stream of a device that is not current: recorded, waited on and
// synchronized in that device's context.
TEST(DeviceGuard, EventsAndDefaultStreamsOfAnotherDevice) {
  SKIP_UNLESS_TWO_GPUS();
  const KeepCurrentDevice keep;
  set_current_device(0);
  const Stream default1 = Stream::default_stream(Device::cuda(1));
  Event event(Device::cuda(1), false);
  event.record(default1);
  Stream::default_stream(Device::cuda(0)).wait(event);  // a wait across devices
  const Stream created1 = Stream::create(Device::cuda(1));
  created1.wait(event);
  default1.synchronize();
  EXPECT_TRUE(default1.query());
  event.synchronize();
  EXPECT_TRUE(event.query());
  Event start(Device::cuda(1)), stop(Device::cuda(1));
  start.record(default1);
  stop.record(default1);
  EXPECT_GE(start.elapsed_ms(stop), 0.0f);
  EXPECT_THROW(Event(Device::cuda(0)).record(default1), DeviceError);
  synchronize(Device::cuda(1));
  EXPECT_EQ(runtime_device(), 0);
}

TEST(PeerAccess, EnabledOncePerPairAndStable) {
  SKIP_UNLESS_TWO_GPUS();
  int can01 = 0, can10 = 0;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can01, 0, 1), cudaSuccess);
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can10, 1, 0), cudaSuccess);
  const char* env = std::getenv("TESSEL_PEER_ACCESS");
  const bool allowed = env == nullptr || *env == '\0' || std::string(env) != "0";
  const bool direct = peer_access(Device::cuda(0), Device::cuda(1));
  EXPECT_EQ(direct, allowed && can01 == 1 && can10 == 1);
  EXPECT_EQ(peer_access(Device::cuda(1), Device::cuda(0)), direct);
  EXPECT_TRUE(peer_access(Device::cuda(1), Device::cuda(1)));
  EXPECT_EQ(runtime_device(), current_device().index);
}
#endif

TEST(PeerAccess, BadDevicesAreClearErrors) {
  EXPECT_THROW(peer_access(Device::cpu(), Device::cuda(0)), DeviceError);
  EXPECT_THROW(peer_access(Device::cuda(0), Device::cuda(1000)), DeviceError);
}

// The check that turns a GPU a wheel has no code for into "CUDA unavailable: ..." (CPU backend).
TEST(CudaArchitectures, CoverWhatRuns) {
  using tessel::detail::cuda_architectures_cover;
  const std::string wheel = "75-real;80-real;86-real;89-real;90a-real;100-real;120-real;120-virtual";
  EXPECT_TRUE(cuda_architectures_cover(wheel, 7, 5));
  EXPECT_FALSE(cuda_architectures_cover(wheel, 7, 0));   // Volta: CUDA 13 has no code for it
  EXPECT_TRUE(cuda_architectures_cover(wheel, 8, 7));    // sm_86 SASS runs on 8.7
  EXPECT_TRUE(cuda_architectures_cover(wheel, 9, 0));
  EXPECT_TRUE(cuda_architectures_cover(wheel, 10, 3));   // sm_100 SASS on B300
  EXPECT_FALSE(cuda_architectures_cover(wheel, 11, 0));  // no sm_110 SASS, and PTX 120 is newer
  EXPECT_TRUE(cuda_architectures_cover(wheel, 12, 1));
  EXPECT_TRUE(cuda_architectures_cover(wheel, 13, 0));   // compute_120 PTX, compiled by the driver
  EXPECT_TRUE(cuda_architectures_cover("90a", 9, 0));
  EXPECT_FALSE(cuda_architectures_cover("90a", 10, 0));  // an `a` image runs on its own GPU only
  EXPECT_FALSE(cuda_architectures_cover("90a-real", 12, 0));
  EXPECT_TRUE(cuda_architectures_cover("80", 9, 0));     // plain 80 carries PTX
  EXPECT_FALSE(cuda_architectures_cover("80-real", 9, 0));
  EXPECT_TRUE(cuda_architectures_cover("native", 5, 0));
  EXPECT_FALSE(cuda_architectures_cover("", 9, 0));
}
