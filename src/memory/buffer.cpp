#include "tessel/memory/buffer.hpp"

#include <fmt/format.h>

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "tessel/core/error.hpp"
#include "tessel/core/log.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/memory/capture.hpp"
#include "tessel/memory/host_allocator.hpp"

namespace tessel {

std::shared_ptr<Buffer> Buffer::allocate(Device device, std::int64_t bytes) {
  if (device.is_cpu()) return allocate(device, bytes, Stream::cpu());
  check_device_index(device.index, "Buffer.allocate");
  return allocate(device, bytes, current_stream(device));
}

std::shared_ptr<Buffer> Buffer::allocate(Device device, std::int64_t bytes, const Stream& stream) {
  if (bytes < 0) throw ValueError(fmt::format("Buffer.allocate: negative size {} bytes", bytes));
  if (device.is_cuda() && stream.device() != device) {
    throw DeviceError(fmt::format("Buffer.allocate: stream #{} is on {}, but the buffer is for {}", stream.id(),
                                  stream.device().str(), device.str()));
  }
  auto b = std::make_shared<Buffer>(ConstructionKey{}, stream);
  b->size_ = bytes;
  b->device_ = device;
  if (device.is_cpu()) {
    b->kind_ = MemoryKind::host;
    b->data_ = host_allocate(bytes);
  } else {
    b->kind_ = MemoryKind::device;
    b->data_ = device_allocator(device.index).allocate(bytes, stream_ref(stream));
  }
  b->owned_ = true;
  // Replays of a captured graph write to this memory: the capture (then its Graph) keeps it.
  if (detail::CaptureState* capture = detail::active_capture(); capture && device.is_cuda()) {
    capture->allocations.push_back(b);
  }
  return b;
}

std::shared_ptr<Buffer> Buffer::allocate_pinned(std::int64_t bytes) {
  return allocate_pinned(bytes, cuda_available() ? current_stream(current_device()) : Stream::cpu());
}

std::shared_ptr<Buffer> Buffer::allocate_pinned(std::int64_t bytes, const Stream& stream) {
  if (bytes < 0) throw ValueError(fmt::format("Buffer.allocate_pinned: negative size {} bytes", bytes));
  const bool page_locked = cuda_available();
  if (page_locked && !stream.device().is_cuda()) {
    throw DeviceError("Buffer.allocate_pinned: the stream must be a CUDA stream, got one on " + stream.device().str());
  }
  auto b = std::make_shared<Buffer>(ConstructionKey{}, page_locked ? stream : Stream::cpu());
  b->size_ = bytes;
  b->device_ = Device::cpu();
  if (page_locked) {
    b->kind_ = MemoryKind::pinned_host;
    b->data_ = pinned_allocator().allocate(bytes, stream_ref(b->stream_));
  } else {
    b->kind_ = MemoryKind::host;
    b->data_ = host_allocate(bytes);
  }
  b->owned_ = true;
  return b;
}

std::shared_ptr<Buffer> Buffer::wrap(void* data, std::int64_t bytes, Device device, MemoryKind kind,
                                     std::shared_ptr<void> keep_alive) {
  if (bytes < 0) throw ValueError(fmt::format("Buffer.wrap: negative size {} bytes", bytes));
  if (device.is_cuda()) check_device_index(device.index, "Buffer.wrap");
  auto b = std::make_shared<Buffer>(ConstructionKey{}, device.is_cuda() ? current_stream(device) : Stream::cpu());
  b->data_ = data;
  b->size_ = bytes;
  b->device_ = device;
  b->kind_ = kind;
  b->keep_alive_ = std::move(keep_alive);
  b->owned_ = false;
  return b;
}

bool Buffer::page_locked() const {
  if (kind_ == MemoryKind::pinned_host) return true;
  if (kind_ != MemoryKind::host || owned_ || data_ == nullptr) return false;
#if defined(TESSEL_HAVE_CUDA)
  if (!cuda_available()) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data_) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer is pageable, not an error
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
#else
  return false;
#endif
}

Buffer::~Buffer() {
  if (!owned_ || data_ == nullptr) return;
  try {
    switch (kind_) {
      case MemoryKind::device:
        device_allocator(device_.index).free(data_);
        break;
      case MemoryKind::pinned_host:
        pinned_allocator().free(data_);
        break;
      case MemoryKind::host:
        host_free(data_);
        break;
    }
  } catch (const std::exception& e) {
    TESSEL_LOG_WARN(fmt::format("Buffer: freeing {} bytes at {} on {} failed: {}", size_, data_, device_.str(),
                                e.what()));
  } catch (...) {
    TESSEL_LOG_WARN(fmt::format("Buffer: freeing {} bytes at {} on {} failed", size_, data_, device_.str()));
  }
}

void Buffer::record_stream(const Stream& stream) {
  if (!owned_) return;  // the owner of wrapped memory orders its own reuse
  switch (kind_) {
    case MemoryKind::device:
      if (stream.device() != device_) {
        throw DeviceError(fmt::format("Buffer.record_stream: stream #{} is on {}, but the buffer is on {}",
                                      stream.id(), stream.device().str(), device_.str()));
      }
      device_allocator(device_.index).record_stream(data_, stream_ref(stream));
      break;
    case MemoryKind::pinned_host:
      if (stream.device().is_cuda()) pinned_allocator().record_stream(data_, stream_ref(stream));
      break;
    case MemoryKind::host:
      break;
  }
}

}  // namespace tessel
