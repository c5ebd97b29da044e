#pragma once
// Buffer: one owned allocation on a device (cuda:N, pinned host or plain host). It returns the
// memory to its allocator when the last reference goes, and keeps its allocation stream alive
// until then, so the free is stream-ordered on that stream.
#include <cstddef>
#include <memory>
#include <utility>

#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"

namespace tessel {

enum class MemoryKind { host, pinned_host, device };

class Buffer {
 public:
  // Device memory on stream's device for a CUDA device (stream defaults to its current stream);
  // aligned host memory for the CPU.
  static std::shared_ptr<Buffer> allocate(Device device, std::int64_t bytes);
  static std::shared_ptr<Buffer> allocate(Device device, std::int64_t bytes, const Stream& stream);
  // Page-locked host memory from the pinned pool; plain aligned host memory without CUDA. The
  // block belongs to `stream`'s pool (a CUDA stream of any device; default: the current stream
  // of the current device), where it is reused first once freed.
  static std::shared_ptr<Buffer> allocate_pinned(std::int64_t bytes);
  static std::shared_ptr<Buffer> allocate_pinned(std::int64_t bytes, const Stream& stream);
  // Wraps memory tessel does not own; keep_alive (may be empty) is released when the last
  // reference goes, so its deleter frees the memory.
  static std::shared_ptr<Buffer> wrap(void* data, std::int64_t bytes, Device device,
                                      MemoryKind kind, std::shared_ptr<void> keep_alive);

  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::int64_t size() const { return size_; }
  Device device() const { return device_; }
  MemoryKind kind() const { return kind_; }
  // Host memory the GPU can copy from/to asynchronously: tessel's pinned pool, or wrapped host
  // memory that its owner page-locked (torch's pin_memory(), cudaHostRegister, ...), which CUDA
  // is asked about.
  bool page_locked() const;
  const Stream& stream() const { return stream_; }
  // The memory is used on another stream: reuse after free waits for that stream's work.
  // A no-op for plain host and wrapped memory.
  void record_stream(const Stream& stream);

 private:
  // Only the factories construct a Buffer; the key is public-constructor plumbing so that they can
  // use make_shared (one heap allocation for the Buffer and its reference count, not two). The
  // stream is a constructor argument: a default-constructed Stream would look up the current
  // device through the runtime on every allocation, only to be overwritten.
  struct ConstructionKey {};

 public:
  Buffer(ConstructionKey, Stream stream) : stream_(std::move(stream)) {}

 private:
  void* data_ = nullptr;
  std::int64_t size_ = 0;
  Device device_;
  MemoryKind kind_ = MemoryKind::host;
  Stream stream_;
  std::shared_ptr<void> keep_alive_;  // set for wrapped memory only
  bool owned_ = false;                // false for wrapped memory: never returned to an allocator
};

}  // namespace tessel
