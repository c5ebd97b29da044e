#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/core/version.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

using namespace tessel;

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason()

TEST(Device, ParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
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
  Stream a = Stream::create(Device::cuda(0));
  Stream b = Stream::create(Device::cuda(0));
  EXPECT_NE(a.id(), b.id());
  EXPECT_TRUE(a.owned());
  EXPECT_NE(a.handle(), nullptr);
  EXPECT_TRUE(detail::stream_alive(a.id()));
  const auto before = current_stream(Device::cuda(0));
  {
    StreamGuard guard(a);
    EXPECT_EQ(current_stream(Device::cuda(0)), a);
  }
  EXPECT_EQ(current_stream(Device::cuda(0)), before);
  const std::uint64_t id = b.id();
  b = a;  // drops the last handle of the old b: destroyed
  EXPECT_FALSE(detail::stream_alive(id));
  // Adopting the same handle twice gives the same identity.
  EXPECT_EQ(Stream::from_handle(a.handle(), Device::cuda(0)).id(), Stream::from_handle(a.handle(), Device::cuda(0)).id());
}

TEST(Stream, PrioritiesAreClamped) {
  SKIP_WITHOUT_GPU();
  const auto [greatest, least] = Stream::priority_range(Device::cuda(0));
  EXPECT_LE(greatest, least);
  EXPECT_EQ(Stream::create(Device::cuda(0), greatest - 100).priority(), greatest);
  EXPECT_EQ(Stream::create(Device::cuda(0), least + 100).priority(), least);
}

#if defined(TESSEL_HAVE_CUDA)
TEST(Event, GpuTimingsArePositive) {
  SKIP_WITHOUT_GPU();
  Stream s = Stream::create(Device::cuda(0));
  Event start(Device::cuda(0)), stop(Device::cuda(0));
  EXPECT_THROW(Event(Device::cuda(0)).record(Stream::cpu()), DeviceError);
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
  Stream other = Stream::create(Device::cuda(0));
  other.wait(stop);
  other.synchronize();
  EXPECT_TRUE(s.query());
  Event no_timing(Device::cuda(0), false);
  no_timing.record(s);
  EXPECT_THROW(start.elapsed_ms(no_timing), Error);
  cudaFree(a);
  cudaFree(b);
  synchronize(Device::cuda(0));
}
#endif

TEST(Device, PropertiesAndPeaks) {
  SKIP_WITHOUT_GPU();
  const auto& p = device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.multiprocessors, 0);
  EXPECT_GT(p.total_memory, std::size_t{1} << 30);
  EXPECT_GT(p.l2_cache, 0u);
  EXPECT_GT(p.clock_khz, 0);
  EXPECT_GT(p.peak_bandwidth_bytes_per_s, 1e11);
  EXPECT_GT(p.peak_fp32_flops, 1e12);
  EXPECT_GT(driver_version(), 0);
}
