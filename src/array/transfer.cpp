// Moving data: copies and casts within a device (through the backends), transfers between
// devices, host reads, and the deferred release of staging buffers.
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include "array/backend.hpp"
#include "tessel/array/array.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/core/error.hpp"

namespace tessel {

namespace detail {

namespace {

struct PendingRelease {
  std::shared_ptr<Event> done;
  std::shared_ptr<void> keep_alive;
};

struct ReleaseQueue {
  std::mutex mutex;
  std::deque<PendingRelease> pending;
};

// Never destroyed: buffers still queued at exit must not be returned to allocators that static
// destruction may already have torn down.
ReleaseQueue& release_queue() {
  static ReleaseQueue* queue = new ReleaseQueue();
  return *queue;
}

[[noreturn, maybe_unused]] void throw_no_cuda_backend(const char* op) {
  throw DeviceError(std::string(op) + ": this build of tessel has no CUDA backend");
}

}  // namespace

void release_after(const Stream& stream, std::shared_ptr<void> keep_alive) {
  collect_finished_releases();
  if (!stream.device().is_cuda()) return;  // CPU work has already finished
  auto done = std::make_shared<Event>(stream.device(), /*timing=*/false);
  done->record(stream);
  ReleaseQueue& queue = release_queue();
  std::lock_guard<std::mutex> lock(queue.mutex);
  queue.pending.push_back(PendingRelease{std::move(done), std::move(keep_alive)});
}

void collect_finished_releases() {
  if (thread_capture_stream() != 0) return;  // cudaEventQuery is not allowed during a graph capture
  std::deque<PendingRelease> finished;
  ReleaseQueue& queue = release_queue();
  {
    std::lock_guard<std::mutex> lock(queue.mutex);
    for (auto it = queue.pending.begin(); it != queue.pending.end();) {
      if (it->done->query()) {
        finished.push_back(std::move(*it));
        it = queue.pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  // `finished` releases its buffers here, outside the lock.
}

namespace {

std::shared_ptr<Buffer> allocate_on(Device device, std::int64_t bytes, const Stream& stream) {
  return device.is_cuda() ? Buffer::allocate(device, bytes, stream) : Buffer::allocate(device, bytes);
}

// Device work on `stream` reads or writes this array: order it after the array's pending write
// and tell the allocator the buffer is in use there.
[[maybe_unused]] void use_on_stream(const Array& array, const Stream& stream) {
  array.storage()->wait_on_stream(stream);
  const std::shared_ptr<Buffer>& buffer = array.buffer();
  if (stream.device().is_cuda() && buffer->kind() == MemoryKind::device && buffer->stream() != stream) {
    buffer->record_stream(stream);
  }
}

void check_defined(const Array& array, const char* op, const char* name) {
  if (!array.defined()) throw ValueError(std::string(op) + ": " + name + " is an undefined array");
}

// Both arrays on the same device; dst has src's shape.
void copy_same_device(const Array& dst, const Array& src, const Stream& stream) {
  if (dst.size() == 0) return;
  if (dst.device().is_cpu()) {
    src.wait();
    dst.wait();
    backend::cpu::copy(strided_ref(dst), strided_ref(src), Stream::cpu());
    return;
  }
#if defined(TESSEL_HAVE_CUDA)
  check_stream_device(stream, dst.device(), "copy");
  use_on_stream(src, stream);
  use_on_stream(dst, stream);
  backend::cuda::copy(strided_ref(dst), strided_ref(src), stream);
  dst.storage()->record_pending_write(stream);
#else
  (void)stream;
  throw_no_cuda_backend("copy");
#endif
}

}  // namespace

Array allocate_array(const Shape& shape, DType dtype, Device device, const Stream& stream) {
  if (device.is_cuda()) check_device_index(device.index, "empty");
  const std::int64_t bytes = numel(shape) * itemsize(dtype);
  auto storage = std::make_shared<Storage>(allocate_on(device, bytes, stream));
  return Array(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

#if defined(TESSEL_HAVE_CUDA)
// Host -> device. Pageable memory is staged through the pinned pool first, so the copy is truly
// asynchronous and the caller may reuse its memory at once. The staging block (or a pinned
// source) is held until the copy has finished, so freeing the source meanwhile loses nothing.
Array transfer_from_host(const Array& source, Device device, const Stream& stream) {
  const std::int64_t bytes = source.nbytes();
  source.wait();
  Array result = allocate_array(source.shape(), source.dtype(), device, stream);
  std::shared_ptr<Buffer> staging = source.buffer();
  const void* from = source.data();
  if (!staging->page_locked()) {
    staging = Buffer::allocate_pinned(bytes, stream);
    if (bytes > 0) std::memcpy(staging->data(), source.data(), static_cast<std::size_t>(bytes));
    from = staging->data();
  }
  backend::cuda::memcpy_async(result.data(), device, from, Device::cpu(), bytes, stream);
  result.storage()->record_pending_write(stream);
  release_after(stream, std::move(staging));
  return result;
}

// Device -> host, into pinned memory so that the copy stays asynchronous; host reads of the
// result wait for it.
Array transfer_to_host(const Array& source, const Stream& stream) {
  use_on_stream(source, stream);
  Array result(std::make_shared<Storage>(Buffer::allocate_pinned(source.nbytes(), stream)), source.shape(),
               contiguous_strides(source.shape()), 0, source.dtype());
  backend::cuda::memcpy_async(result.data(), Device::cpu(), source.data(), source.device(), source.nbytes(), stream);
  result.storage()->record_pending_write(stream);
  release_after(stream, result.buffer());  // the pinned block outlives the copy even if dropped
  return result;
}

// Between GPUs (peer to peer, or staged by the driver). The copy runs on a stream of the source
// device, so the source's later writers there come after it, between two event barriers: it
// starts after the destination stream's earlier work (the new block may have just been freed
// there), and the destination stream's later work, the block's reuse included, starts after it.
// Each device's memory is thus only ever ordered on its own device's streams.
Array transfer_between_devices(const Array& source, Device device, const Stream& stream) {
  const Device from = source.device();
  const Stream source_stream = stream.device() == from ? stream : current_stream(from);
  const Stream destination_stream = stream.device() == device ? stream : current_stream(device);
  Array result = allocate_array(source.shape(), source.dtype(), device, destination_stream);
  if (source.nbytes() == 0) return result;
  Event destination_ready(device, /*timing=*/false);
  destination_ready.record(destination_stream);
  source_stream.wait(destination_ready);
  use_on_stream(source, source_stream);
  backend::cuda::memcpy_async(result.data(), device, source.data(), from, source.nbytes(), source_stream);
  Event copied(from, /*timing=*/false);
  copied.record(source_stream);
  destination_stream.wait(copied);
  result.storage()->record_pending_write(destination_stream);
  return result;
}
#endif

// A contiguous copy of `source` (contiguous, any device) on `device`; `stream` is on one of the
// two devices.
Array transfer(const Array& source, Device device, const Stream& stream) {
#if defined(TESSEL_HAVE_CUDA)
  // Host staging and its deferred release need the host: not capturable.
  if (source.device().is_cpu() || device.is_cpu()) check_not_capturing("to (a transfer between host and device)");
  if (source.device().is_cpu()) return transfer_from_host(source, device, stream);
  if (device.is_cpu()) return transfer_to_host(source, stream);
  return transfer_between_devices(source, device, stream);
#else
  (void)source;
  (void)device;
  (void)stream;
  throw_no_cuda_backend("to");
#endif
}

void check_stream_device(const Stream& stream, Device device, const char* op) {
  if (stream.device() != device) {
    throw DeviceError(std::string(op) + ": the stream is on " + stream.device().str() + " but the array is on " +
                      device.str());
  }
}

// `preferred` when it runs on `device`, else the device's current stream (cross-stream order is
// kept by the pending-write events).
Stream stream_on(Device device, const Stream& preferred) {
  if (preferred.device() == device) return preferred;
  return resolve_stream(device, std::nullopt);
}

// The given stream (on either device), else the destination's current stream; a CPU stream for a
// transfer that involves a GPU means the GPU's current stream.
Stream transfer_stream(Device from, Device to, const OptionalStream& stream) {
  if (stream && stream->device().is_cuda()) {
    if (stream->device() != from && stream->device() != to) {
      throw DeviceError("to: the stream is on " + stream->device().str() + ", not on " + from.str() + " or " + to.str());
    }
    return *stream;
  }
  if (stream && from.is_cpu() && to.is_cpu()) return *stream;
  return current_stream(to.is_cuda() ? to : from);
}

}  // namespace detail

using detail::allocate_array;

namespace detail {

void copy_into(const Array& dst, const Array& src, const OptionalStream& stream) {
  TESSEL_RANGE("copy", dst, src, stream);
  check_defined(dst, "copy", "dst");
  check_defined(src, "copy", "src");
  check_writable(dst, "copy");
  if (dst.dtype() != src.dtype()) {
    throw DTypeError(std::string("copy: the array layer copies one dtype; got ") + dtype_name(src.dtype()) + " into " +
                     dtype_name(dst.dtype()) + " (casts are tessel::copyto and tessel::astype)");
  }
  const Array broadcast_source = src.broadcast_to(dst.shape());
  if (dst.size() == 0) return;
  if (src.device() == dst.device()) {
    copy_same_device(dst, broadcast_source, resolve_stream(dst.device(), stream));
    return;
  }
  // Move the (un-broadcast) source over first, then broadcast on dst's device.
  const Stream moving = transfer_stream(src.device(), dst.device(), stream);
  const Array packed = src.contiguous(stream_on(src.device(), moving));
  const Array moved = transfer(packed, dst.device(), moving);
  copy_same_device(dst, moved.broadcast_to(dst.shape()), stream_on(dst.device(), moving));
}

}  // namespace detail

void fill(const Array& dst, Scalar value, const OptionalStream& stream) {
  TESSEL_RANGE("fill", dst, stream);
  detail::check_defined(dst, "fill", "dst");
  check_writable(dst, "fill");
  if (dst.size() == 0) return;
  alignas(16) unsigned char bytes[16];
  value.store(dst.dtype(), bytes);
  if (dst.device().is_cpu()) {
    dst.wait();
    backend::cpu::fill(detail::strided_ref(dst), bytes, Stream::cpu());
    return;
  }
#if defined(TESSEL_HAVE_CUDA)
  const Stream s = detail::resolve_stream(dst.device(), stream);
  detail::check_stream_device(s, dst.device(), "fill");
  detail::use_on_stream(dst, s);
  backend::cuda::fill(detail::strided_ref(dst), bytes, s);
  dst.storage()->record_pending_write(s);
#else
  (void)stream;
  detail::throw_no_cuda_backend("fill");
#endif
}

Array Array::copy(const OptionalStream& stream) const {
  detail::check_defined(*this, "copy", "the array");
  const Stream s = detail::resolve_stream(device(), stream);
  Array result = allocate_array(shape_, dtype_, device(), s);
  detail::copy_into(result, *this, s);
  return result;
}

Array Array::contiguous(const OptionalStream& stream) const {
  if (defined() && is_contiguous()) return *this;
  return copy(stream);
}

Array Array::to(Device device, const OptionalStream& stream) const {
  detail::check_defined(*this, "to", "the array");
  if (device == this->device()) return *this;
  TESSEL_RANGE("Array.to", *this, stream);
  if (device.is_cuda()) check_device_index(device.index, "to");
  const Stream s = detail::transfer_stream(this->device(), device, stream);
  return detail::transfer(contiguous(detail::stream_on(this->device(), s)), device, s);
}

void Array::to_host(void* dst) const {
  detail::check_defined(*this, "to_host", "the array");
  if (size_ == 0) return;
  TESSEL_RANGE("Array.to_host", *this);
  if (device().is_cuda()) detail::check_not_capturing("to_host");
  const Strides packed = contiguous_strides(shape_);
  if (device().is_cpu()) {
    wait();
    backend::cpu::copy(detail::StridedRef{dst, dtype_, shape_, packed}, detail::strided_ref(*this), Stream::cpu());
    return;
  }
#if defined(TESSEL_HAVE_CUDA)
  const Stream s = current_stream(device());
  const Array source = contiguous(s);
  detail::use_on_stream(source, s);
  // A synchronous read: the copy into the caller's (possibly pageable) memory, then the wait.
  backend::cuda::memcpy_async(dst, Device::cpu(), source.data(), device(), nbytes(), s);
  s.synchronize();
  detail::collect_finished_releases();
#else
  detail::throw_no_cuda_backend("to_host");
#endif
}

void Array::to_host_async(void* dst, const OptionalStream& stream) const {
  detail::check_defined(*this, "to_host_async", "the array");
  if (size_ == 0) return;
  if (device().is_cpu()) {
    to_host(dst);
    return;
  }
#if defined(TESSEL_HAVE_CUDA)
  TESSEL_RANGE("Array.to_host_async", *this);
  detail::check_not_capturing("to_host_async");
  const Stream s = stream ? *stream : current_stream(device());
  detail::check_stream_device(s, device(), "to_host_async");
  const Array source = contiguous(s);
  detail::use_on_stream(source, s);
  backend::cuda::memcpy_async(dst, Device::cpu(), source.data(), device(), nbytes(), s);
  if (Buffer::wrap(dst, nbytes(), Device::cpu(), MemoryKind::host, nullptr)->page_locked()) {
    detail::release_after(s, source.buffer());  // the device block outlives the copy
    return;
  }
  s.synchronize();
  detail::collect_finished_releases();
#else
  (void)dst;
  (void)stream;
  detail::throw_no_cuda_backend("to_host_async");
#endif
}

Array from_host(const void* data, const Shape& shape, DType dtype, Device device, const OptionalStream& stream) {
  const std::int64_t bytes = numel(shape) * itemsize(dtype);
  if (data == nullptr && bytes > 0) throw ValueError("from_host: data is null for shape " + shape_str(shape));
  TESSEL_RANGE("from_host", dtype_name(dtype), stream);
  // Wrap the caller's memory (no copy yet) as a host array, then copy it where it belongs.
  auto view = std::make_shared<detail::Storage>(
      Buffer::wrap(const_cast<void*>(data), bytes, Device::cpu(), MemoryKind::host, nullptr));
  const Array host(std::move(view), shape, contiguous_strides(shape), 0, dtype);
  if (device.is_cpu()) return host.copy();
  check_device_index(device.index, "from_host");
  return detail::transfer(host, device, detail::transfer_stream(Device::cpu(), device, stream));
}

}  // namespace tessel
