#pragma once
// Array: an N-d view (shape, strides in elements, offset in elements, dtype) of shared storage
// on a device. Views share storage and never copy; copies say so in their names.
//
// Asynchronous work: an operation that writes an array asynchronously (a transfer, a copy on a
// stream) records a "pending write" event in the storage shared by all views. Host reads
// (to_host, item, to_vector, str) wait for it; device work on another stream waits on it.
#include <atomic>
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tessel/array/dtype.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/array/scalar.hpp"
#include "tessel/array/shape.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel {

// Python's slice(start, stop, step); an absent bound means "from the end in step's direction".
struct Slice {
  std::optional<std::int64_t> start;
  std::optional<std::int64_t> stop;
  std::int64_t step = 1;

  Slice() = default;
  Slice(std::optional<std::int64_t> start_, std::optional<std::int64_t> stop_, std::int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}

  // The number of elements and the first index this slice selects from an axis of `size`
  // (Python's slice.indices). ValueError for step 0.
  struct Resolved {
    std::int64_t start;
    std::int64_t step;
    std::int64_t length;
  };
  Resolved resolve(std::int64_t size) const;
};
inline constexpr std::nullopt_t none = std::nullopt;  // Slice(none, none, -1) is [::-1]

struct NewAxis {};
struct Ellipsis {};
inline constexpr NewAxis newaxis{};
inline constexpr Ellipsis ellipsis{};

class Array;
// One entry of an index expression: an integer, a Slice, newaxis, ellipsis, or an array of
// integers or bools (advanced indexing, which copies: tessel::getitem / setitem in
// tessel/ops/indexing.hpp; Array::index takes the basic entries only).
class IndexItem {
 public:
  using Value = std::variant<std::int64_t, Slice, NewAxis, Ellipsis>;
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  IndexItem(T index) : value_(static_cast<std::int64_t>(index)) {}  // NOLINT: implicit
  IndexItem(Slice slice) : value_(slice) {}                        // NOLINT
  IndexItem(NewAxis) : value_(NewAxis{}) {}                        // NOLINT
  IndexItem(Ellipsis) : value_(Ellipsis{}) {}                      // NOLINT
  IndexItem(const Array& array);                                   // NOLINT
  // The basic entry; meaningless when array() is set (check that first).
  const Value& value() const { return value_; }
  // The index array, or nullptr for a basic entry.
  const Array* array() const { return array_.get(); }

 private:
  Value value_;
  // Kept beside the variant rather than in it: the variant of trivial types stays trivial.
  std::shared_ptr<const Array> array_;
};

namespace detail {
// Storage shared by an array and all its views: the buffer, the last asynchronous write and
// whether writes are refused.
class Storage : public std::enable_shared_from_this<Storage> {
 public:
  explicit Storage(std::shared_ptr<Buffer> buffer, bool read_only = false)
      : buffer_(std::move(buffer)), read_only_(read_only) {}
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  bool read_only() const { return read_only_.load(std::memory_order_relaxed); }
  void set_read_only() { read_only_.store(true, std::memory_order_relaxed); }
  // Records that work queued on `stream` writes this storage; later host reads wait for it.
  void record_pending_write(const Stream& stream);
  // The host waits for the pending write, if any.
  void wait_on_host();
  // Later work on `stream` waits for the pending write (no-op for the same stream or the CPU).
  void wait_on_stream(const Stream& stream);
  bool has_pending_write();

 private:
  // The event marking the last write, made on demand: an op only notes its stream (creating and
  // recording an event per op cost microseconds of host time), and the first reader that must
  // wait records an event on that stream then. That event may cover later work on the stream
  // too, so a reader can wait longer than needed, never too little.
  std::shared_ptr<Event> pending_event_locked();

  std::shared_ptr<Buffer> buffer_;
  std::shared_ptr<Event> pending_write_;
  std::optional<Stream> pending_stream_;  // written by work on this stream, no event yet
  // The stream of the last recorded write (0: never written). Atomic so that wait_on_stream can
  // skip the lock when the waiter is that stream, the common case of back-to-back ops.
  std::atomic<std::uint64_t> pending_stream_id_{0};
  std::atomic<bool> read_only_{false};
  std::mutex mutex_;
};
}  // namespace detail

using OptionalStream = std::optional<Stream>;

class Array {
 public:
  Array() = default;  // undefined: defined() is false
  Array(std::shared_ptr<detail::Storage> storage, Shape shape, Strides strides, std::int64_t offset,
        DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }  // elements
  std::int64_t offset() const { return offset_; }       // elements from the buffer start
  DType dtype() const { return dtype_; }
  Device device() const;
  std::int64_t ndim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t size() const { return size_; }  // number of elements
  std::int64_t itemsize() const { return tessel::itemsize(dtype_); }
  std::int64_t nbytes() const { return size_ * itemsize(); }
  std::int64_t dim(std::int64_t axis) const;  // negative axes count from the end
  bool is_contiguous() const { return tessel::is_contiguous(shape_, strides_); }
  const std::shared_ptr<Buffer>& buffer() const;
  const std::shared_ptr<detail::Storage>& storage() const { return storage_; }
  // Address of element (0, ..., 0). Raw: does not wait for pending writes (see wait()).
  void* data() const;
  template <class T>
  T* data_as() const { return static_cast<T*>(data()); }

  // ---- read-only ----
  // A read-only array refuses writes: every op that writes into a caller's array (out=, copyto,
  // fill, in-place operators, item assignment) raises ValueError. The flag belongs to the
  // storage, so every view of a read-only array is read-only too. Memory imported read-only
  // (a non-writeable NumPy array, a read-only DLPack capsule or __cuda_array_interface__) comes
  // in read-only.
  bool is_read_only() const { return storage_ && storage_->read_only(); }
  // Marks the storage read-only: this array and all its views, earlier and later. One way: a
  // writable array is a copy (copy()).
  void set_read_only();

  // ---- views (no copy) ----
  // NumPy basic indexing: integers, slices, newaxis and one ellipsis; missing trailing axes
  // are taken whole. IndexError names the axis, the index and the size. Index arrays
  // (advanced indexing) are tessel::getitem's (IndexError here).
  Array index(const std::vector<IndexItem>& items) const;
  Array index(std::initializer_list<IndexItem> items) const { return index(std::vector<IndexItem>(items)); }
  Array operator[](std::int64_t i) const { return index({i}); }
  Array slice(std::int64_t axis, Slice slice) const;
  Array T() const;  // reverses the axes
  Array permute(const std::vector<std::int64_t>& axes) const;
  Array transpose(const std::vector<std::int64_t>& axes) const { return permute(axes); }
  Array swapaxes(std::int64_t axis1, std::int64_t axis2) const;
  // A view when the strides allow it, else a contiguous copy (on `stream`). One -1 is inferred.
  Array reshape(const Shape& shape, const OptionalStream& stream = std::nullopt) const;
  // Only a view: ShapeError when the layout does not allow one.
  Array view(const Shape& shape) const;
  Array broadcast_to(const Shape& shape) const;
  Array squeeze() const;
  Array squeeze(const std::vector<std::int64_t>& axes) const;  // ShapeError if an axis is not 1
  Array expand_dims(std::int64_t axis) const;
  Array ravel(const OptionalStream& stream = std::nullopt) const;    // view when contiguous
  Array flatten(const OptionalStream& stream = std::nullopt) const;  // always a copy
  // Reinterpret the same storage with new layout (checked to stay inside the buffer).
  Array as_strided(const Shape& shape, const Strides& strides, std::int64_t offset) const;

  // ---- copies ----
  Array contiguous(const OptionalStream& stream = std::nullopt) const;  // this when already contiguous
  Array copy(const OptionalStream& stream = std::nullopt) const;
  // A contiguous copy on `device` (this array itself when it is already there, as PyTorch's
  // Tensor.to does). Asynchronous on `stream` (default: the current stream of the
  // CUDA device involved); host reads of the result wait for it. Host -> device from pageable
  // memory is staged through the pinned pool; device -> host lands in pinned memory.
  Array to(Device device, const OptionalStream& stream = std::nullopt) const;

  // ---- host reads (wait for pending writes) ----
  // Copies the elements in C order into dst (nbytes() bytes).
  void to_host(void* dst) const;
  // The same copy on `stream` (the current stream of the array's device when none). Into
  // page-locked memory it is asynchronous, as cudaMemcpyAsync: dst holds the elements once the
  // stream has passed the copy. Into pageable memory, and from a CPU array, it waits.
  void to_host_async(void* dst, const OptionalStream& stream = std::nullopt) const;
  template <class T>
  std::vector<T> to_vector() const;  // T must be the array's host type (checked)
  template <class T>
  T item() const;  // one-element arrays; converts to T with a C++ cast
  std::string str() const;  // like NumPy's repr
  // The host waits for the pending write of this array's storage.
  void wait() const;

 private:
  std::shared_ptr<detail::Storage> storage_;
  Shape shape_;
  Strides strides_;
  std::int64_t offset_ = 0;
  std::int64_t size_ = 0;
  DType dtype_ = DType::float32;
};

// ---- creation (the stream is the last argument; default: current stream of the device) ----
Array empty(const Shape& shape, DType dtype = DType::float32, Device device = default_device(),
            const OptionalStream& stream = std::nullopt);
// A C-contiguous CPU array in page-locked memory from the pinned pool, so host<->device copies
// of it are direct DMA (pageable memory when there is no CUDA).
Array empty_pinned(const Shape& shape, DType dtype = DType::float32);
Array zeros(const Shape& shape, DType dtype = DType::float32, Device device = default_device(),
            const OptionalStream& stream = std::nullopt);
Array ones(const Shape& shape, DType dtype = DType::float32, Device device = default_device(),
           const OptionalStream& stream = std::nullopt);
Array full(const Shape& shape, Scalar value, DType dtype, Device device = default_device(),
           const OptionalStream& stream = std::nullopt);
// n x m (m defaults to n) with ones on diagonal k (k > 0 above the main diagonal).
Array eye(std::int64_t n, std::optional<std::int64_t> m = std::nullopt, std::int64_t k = 0,
          DType dtype = DType::float64, Device device = default_device(),
          const OptionalStream& stream = std::nullopt);
Array empty_like(const Array& other, std::optional<DType> dtype = std::nullopt,
                 std::optional<Device> device = std::nullopt, const OptionalStream& stream = std::nullopt);
Array zeros_like(const Array& other, std::optional<DType> dtype = std::nullopt,
                 std::optional<Device> device = std::nullopt, const OptionalStream& stream = std::nullopt);
Array ones_like(const Array& other, std::optional<DType> dtype = std::nullopt,
                std::optional<Device> device = std::nullopt, const OptionalStream& stream = std::nullopt);
Array full_like(const Array& other, Scalar value, std::optional<DType> dtype = std::nullopt,
                std::optional<Device> device = std::nullopt, const OptionalStream& stream = std::nullopt);
// Copies numel(shape) C-ordered elements from host memory (pageable or pinned). For a CUDA
// device the host data is staged through the pinned pool before this returns, so `data` may be
// reused at once; the device copy is asynchronous on `stream`.
Array from_host(const void* data, const Shape& shape, DType dtype, Device device = default_device(),
                const OptionalStream& stream = std::nullopt);
template <class T>
Array from_vector(const std::vector<T>& values, const Shape& shape, Device device = default_device(),
                  const OptionalStream& stream = std::nullopt) {
  return from_host(values.data(), shape, dtype_of<T>, device, stream);
}

// Sets every element of dst (a view is fine) to value cast to dst's dtype.
void fill(const Array& dst, Scalar value, const OptionalStream& stream = std::nullopt);

namespace detail {
[[noreturn]] void throw_read_only(const Array& array, const char* op);
}
// ValueError "<op>: output array is read-only (...)" when `array` is read-only. Every op that
// writes into an array it did not allocate calls it before writing.
inline void check_writable(const Array& array, const char* op) {
  if (array.is_read_only()) detail::throw_read_only(array, op);
}

// ---- template definitions ----
namespace detail {
void check_host_type(const Array& array, DType requested, const char* op);
}

template <class T>
std::vector<T> Array::to_vector() const {
  detail::check_host_type(*this, dtype_of<T>, "to_vector");
  if constexpr (std::is_same_v<T, bool>) {
    // std::vector<bool> packs bits: read bytes, then unpack.
    std::vector<unsigned char> bytes(static_cast<std::size_t>(size_));
    to_host(bytes.data());
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> result(static_cast<std::size_t>(size_));
    to_host(result.data());
    return result;
  }
}

template <class T>
T Array::item() const {
  if (size_ != 1) {
    throw ValueError("item: can only convert an array of size 1 to a scalar, got shape " + shape_str(shape_));
  }
  return dispatch_dtype(dtype_, [&](auto tag) -> T {
    using Stored = typename decltype(tag)::type;
    Stored value;
    to_host(&value);
    if constexpr (std::is_same_v<Stored, float16> || std::is_same_v<Stored, bfloat16>) {
      return static_cast<T>(static_cast<float>(value));
    } else if constexpr (std::is_same_v<Stored, std::complex<float>> || std::is_same_v<Stored, std::complex<double>>) {
      if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        return T(value);
      } else {
        return static_cast<T>(value.real());
      }
    } else {
      return static_cast<T>(value);
    }
  });
}

}  // namespace tessel
