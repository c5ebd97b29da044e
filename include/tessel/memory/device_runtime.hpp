#pragma once
// What the caching allocators need from the CUDA runtime, behind an interface so the caching
// logic is tested without a GPU (tests inject a fake).
#include <cstddef>
#include <cstdint>
#include <memory>

namespace tessel {

// A stream as the allocators see it: a process-unique id, the raw cudaStream_t and its device
// (a null handle is the legacy default stream of that device; -1: not known, the current one).
struct StreamRef {
  std::uint64_t id = 0;
  void* handle = nullptr;
  int device = -1;
  friend bool operator==(StreamRef a, StreamRef b) { return a.id == b.id; }
  friend bool operator<(StreamRef a, StreamRef b) { return a.id < b.id; }
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual void* malloc(std::size_t bytes) = 0;  // nullptr when out of memory, never throws for OOM
  virtual void free(void* ptr) = 0;
  virtual void mem_info(std::size_t* free_bytes, std::size_t* total_bytes) = 0;
  virtual void* event_create() = 0;
  virtual void event_destroy(void* event) = 0;
  virtual void event_record(void* event, StreamRef stream) = 0;
  virtual bool event_query(void* event) = 0;  // true when finished
  virtual void event_synchronize(void* event) = 0;
};

// The real runtime for device `index` (cudaMalloc / cudaFree / events), every call checked.
std::unique_ptr<DeviceRuntime> make_cuda_device_runtime(int index);
// The real pinned-host runtime (cudaHostAlloc / cudaFreeHost).
std::unique_ptr<DeviceRuntime> make_cuda_pinned_runtime();

}  // namespace tessel
