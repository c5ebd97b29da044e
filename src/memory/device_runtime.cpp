#include "tessel/memory/device_runtime.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include "tessel/core/device.hpp"
#include "core/not_built.hpp"
#include "tessel/core/error.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "core/cuda_check.hpp"
#endif

namespace tessel {

#if defined(TESSEL_HAVE_CUDA)
namespace {

cudaStream_t to_stream(StreamRef s) { return static_cast<cudaStream_t>(s.handle); }

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  explicit CudaDeviceRuntime(int index) : device_(Device::cuda(index)) {}

  void* malloc(std::size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky; clear it so later checks do not see it
      return nullptr;
    }
    TESSEL_CUDA_CHECK(status, "cudaMalloc");
    return ptr;
  }
  void free(void* ptr) override {
    DeviceGuard guard(device_);
    TESSEL_CUDA_CHECK(cudaFree(ptr), "cudaFree");
  }
  void mem_info(std::size_t* free_bytes, std::size_t* total_bytes) override {
    DeviceGuard guard(device_);
    TESSEL_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
  }
  void* event_create() override {
    DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    return event;
  }
  void event_destroy(void* event) override {
    DeviceGuard guard(device_);
    TESSEL_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
  }
  void event_record(void* event, StreamRef stream) override {
    DeviceGuard guard(device_);  // a null handle means this device's legacy default stream
    TESSEL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), to_stream(stream)), "cudaEventRecord");
  }
  bool event_query(void* event) override {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) return false;
    TESSEL_CUDA_CHECK(status, "cudaEventQuery");
    return true;
  }
  void event_synchronize(void* event) override {
    TESSEL_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
  }

 private:
  Device device_;
};

// Pinned blocks may be used on streams of any device, and an event must be recorded on a stream
// of its own device: each event is (re)created on the device of the stream it is recorded on.
struct PinnedEvent {
  cudaEvent_t event = nullptr;
  int device = -1;
};

class CudaPinnedRuntime final : public DeviceRuntime {
 public:
  void* malloc(std::size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t status = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    TESSEL_CUDA_CHECK(status, "cudaHostAlloc");
    return ptr;
  }
  void free(void* ptr) override { TESSEL_CUDA_CHECK(cudaFreeHost(ptr), "cudaFreeHost"); }
  void mem_info(std::size_t* free_bytes, std::size_t* total_bytes) override {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    *free_bytes = static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page;
    *total_bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page;
  }
  void* event_create() override { return new PinnedEvent(); }
  void event_destroy(void* event) override {
    auto* e = static_cast<PinnedEvent*>(event);
    if (e->event) {
      DeviceGuard guard(Device::cuda(e->device));
      (void)cudaEventDestroy(e->event);
    }
    delete e;
  }
  void event_record(void* event, StreamRef stream) override {
    auto* e = static_cast<PinnedEvent*>(event);
    int device = stream.device;
    if (device < 0 && stream.handle) {
      TESSEL_CUDA_CHECK(cudaStreamGetDevice(to_stream(stream), &device), "cudaStreamGetDevice");
    } else if (device < 0) {
      TESSEL_CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
    }
    DeviceGuard guard(Device::cuda(device));
    if (e->event && e->device != device) {
      DeviceGuard old(Device::cuda(e->device));
      TESSEL_CUDA_CHECK(cudaEventDestroy(e->event), "cudaEventDestroy");
      e->event = nullptr;
    }
    if (!e->event) {
      TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming), "cudaEventCreate");
      e->device = device;
    }
    TESSEL_CUDA_CHECK(cudaEventRecord(e->event, to_stream(stream)), "cudaEventRecord");
  }
  bool event_query(void* event) override {
    auto* e = static_cast<PinnedEvent*>(event);
    if (!e->event) return true;
    const cudaError_t status = cudaEventQuery(e->event);
    if (status == cudaErrorNotReady) return false;
    TESSEL_CUDA_CHECK(status, "cudaEventQuery");
    return true;
  }
  void event_synchronize(void* event) override {
    auto* e = static_cast<PinnedEvent*>(event);
    if (e->event) TESSEL_CUDA_CHECK(cudaEventSynchronize(e->event), "cudaEventSynchronize");
  }
};

}  // namespace

std::unique_ptr<DeviceRuntime> make_cuda_device_runtime(int index) {
  check_device_index(index, "make_cuda_device_runtime");
  return std::make_unique<CudaDeviceRuntime>(index);
}

std::unique_ptr<DeviceRuntime> make_cuda_pinned_runtime() {
  if (!cuda_available()) {
    throw DeviceError(fmt::format("make_cuda_pinned_runtime: pinned memory needs CUDA, which is unavailable ({})",
                                  cuda_unavailable_reason()));
  }
  return std::make_unique<CudaPinnedRuntime>();
}

#else  // CPU-only build

std::unique_ptr<DeviceRuntime> make_cuda_device_runtime(int index) {
  ::tessel::detail::throw_cuda_not_built(fmt::format("make_cuda_device_runtime: cuda:{} requested", index));
}

std::unique_ptr<DeviceRuntime> make_cuda_pinned_runtime() {
  ::tessel::detail::throw_cuda_not_built("make_cuda_pinned_runtime: pinned memory needs CUDA");
}

#endif

}  // namespace tessel
