// Array: layout, views and indexing (no data movement here).
#include "tessel/array/array.hpp"
#include "tessel/memory/capture.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "array/backend.hpp"
#include "tessel/core/error.hpp"

namespace tessel {

// ---- Storage ----
namespace detail {

void Storage::record_pending_write(const Stream& stream) {
  if (!stream.device().is_cuda()) return;  // CPU work is synchronous
  if (CaptureState* capture = active_capture(); capture && capturing_on(stream)) {
    // An event recorded during capture cannot be waited on by the host later; each replay marks
    // the write instead (Graph::replay runs after_replay on its stream).
    capture->note_use(buffer_);
    auto& keys = capture->after_replay_keys;
    for (const auto& key : keys) {
      if (auto live = key.lock(); live && live.get() == static_cast<const void*>(this)) return;
    }
    std::weak_ptr<Storage> self = weak_from_this();
    keys.push_back(self);
    capture->after_replay.push_back([self](const Stream& replay_stream) {
      if (auto storage = self.lock()) storage->record_pending_write(replay_stream);
    });
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Back-to-back writes on one stream (the common case): already recorded, no Stream copy.
  if (!pending_write_ && pending_stream_ && pending_stream_id_.load(std::memory_order_relaxed) == stream.id()) return;
  pending_write_.reset();
  pending_stream_ = stream;
  pending_stream_id_.store(stream.id(), std::memory_order_release);
}

std::shared_ptr<Event> Storage::pending_event_locked() {
  if (!pending_write_ && pending_stream_) {
    auto event = std::make_shared<Event>(pending_stream_->device(), /*timing=*/false);
    event->record(*pending_stream_);
    pending_write_ = std::move(event);
    pending_stream_.reset();
  }
  return pending_write_;
}

void Storage::wait_on_host() {
  std::shared_ptr<Event> event;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    event = pending_event_locked();
  }
  if (!event) return;
  event->synchronize();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_write_ == event) pending_write_.reset();
  }
  collect_finished_releases();
}

void Storage::wait_on_stream(const Stream& stream) {
  const bool capturing = capturing_on(stream);
  if (capturing) active_capture()->note_use(buffer_);  // replay checks it is still alive
  // No write yet, or the last one was on this stream (stream order covers it): no lock needed.
  // A write only ever comes with its stream id, so id 0 means nothing to wait for.
  const std::uint64_t last_writer = pending_stream_id_.load(std::memory_order_acquire);
  if (last_writer == 0 || last_writer == stream.id()) return;
  std::shared_ptr<Event> event;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pending_write_ && !pending_stream_) return;  // the write finished and a host wait cleared it
    if (capturing) return;  // see below: no event may be recorded for a capture to wait on
    event = pending_event_locked();
  }
  if (capturing) {
    // A capture cannot wait on an event recorded outside it, nor synchronize with one; the capture
    // began after a device synchronization (GraphCapture), so that earlier write has finished.
    return;
  }
  if (stream.device().is_cuda()) {
    stream.wait(*event);
  } else {
    wait_on_host();
  }
}

bool Storage::has_pending_write() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pending_event_locked() && pending_write_->query()) pending_write_.reset();
  return pending_write_ != nullptr;
}

void check_host_type(const Array& array, DType requested, const char* op) {
  if (array.dtype() != requested) {
    throw DTypeError(std::string(op) + ": requested element type " + dtype_name(requested) +
                     " but the array has dtype " + dtype_name(array.dtype()));
  }
}

void throw_read_only(const Array& array, const char* op) {
  throw ValueError(std::string(op) + ": output array is read-only (" + dtype_name(array.dtype()) + " " +
                   shape_str(array.shape()) + " on " + array.device().str() +
                   "); write into a copy (x.copy()) instead");
}

StridedRef strided_ref(const Array& array) {
  return StridedRef{array.data(), array.dtype(), array.shape(), array.strides()};
}

Stream resolve_stream(Device device, const OptionalStream& stream) {
  if (stream) return *stream;
  return device.is_cuda() ? current_stream(device) : Stream::cpu();
}

}  // namespace detail

// ---- Slice ----
Slice::Resolved Slice::resolve(std::int64_t size) const {
  if (step == 0) throw ValueError("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto clamp_bound = [&](std::optional<std::int64_t> bound, std::int64_t if_missing) {
    if (!bound) return if_missing;
    std::int64_t value = *bound;
    if (value < 0) {
      value += size;
      if (value < 0) value = step < 0 ? -1 : 0;
    } else if (value >= size) {
      value = step < 0 ? size - 1 : size;
    }
    return value;
  };
  const std::int64_t first = clamp_bound(start, step < 0 ? size - 1 : 0);
  const std::int64_t end = clamp_bound(stop, step < 0 ? -1 : size);
  std::int64_t length = 0;
  if (step > 0 && first < end) length = (end - first - 1) / step + 1;
  if (step < 0 && first > end) length = (first - end - 1) / (-step) + 1;
  return Resolved{first, step, length};
}

// ---- Array ----
Array::Array(std::shared_ptr<detail::Storage> storage, Shape shape, Strides strides, std::int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      size_(numel(shape_)),
      dtype_(dtype) {
  if (shape_.size() != strides_.size()) {
    throw ShapeError("Array: shape " + shape_str(shape_) + " and strides " + shape_str(strides_) +
                     " have different lengths");
  }
  if (storage_ && size_ > 0) {
    const ElementExtent extent = element_extent(shape_, strides_);
    const std::int64_t capacity = storage_->buffer()->size() / tessel::itemsize(dtype_);
    if (offset_ + extent.lowest < 0 || offset_ + extent.highest >= capacity) {
      throw ValueError("Array: layout shape " + shape_str(shape_) + ", strides " + shape_str(strides_) +
                       ", offset " + std::to_string(offset_) + " reaches outside its buffer of " +
                       std::to_string(capacity) + " elements");
    }
  }
}

Device Array::device() const {
  // Pinned host memory belongs to the CPU backend, whatever device pinned it.
  if (!storage_ || storage_->buffer()->kind() != MemoryKind::device) return Device::cpu();
  return storage_->buffer()->device();
}

const std::shared_ptr<Buffer>& Array::buffer() const {
  if (!storage_) throw ValueError("buffer: the array is undefined");
  return storage_->buffer();
}

void* Array::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->buffer()->data()) + offset_ * itemsize();
}

void Array::set_read_only() {
  if (!storage_) throw ValueError("set_read_only: the array is undefined");
  storage_->set_read_only();
}

std::int64_t Array::dim(std::int64_t axis) const {
  return shape_[static_cast<std::size_t>(normalize_axis(axis, ndim(), "dim"))];
}

void Array::wait() const {
  if (storage_ && device().is_cuda()) detail::check_not_capturing("Array.wait");
  if (storage_) storage_->wait_on_host();
}

Array Array::as_strided(const Shape& shape, const Strides& strides, std::int64_t offset) const {
  return Array(storage_, shape, strides, offset, dtype_);
}

IndexItem::IndexItem(const Array& array) : value_(Ellipsis{}), array_(std::make_shared<const Array>(array)) {}

Array Array::index(const std::vector<IndexItem>& items) const {
  // Count the axes consumed by integers and slices, and find the ellipsis.
  std::int64_t consumed = 0;
  std::int64_t ellipses = 0;
  for (const IndexItem& item : items) {
    if (item.array() != nullptr) {
      throw IndexError("index: integer and boolean array indices copy the selected elements; use tessel::getitem "
                       "(tessel/ops/indexing.hpp) for them");
    }
    if (std::holds_alternative<std::int64_t>(item.value()) || std::holds_alternative<Slice>(item.value())) ++consumed;
    if (std::holds_alternative<Ellipsis>(item.value())) ++ellipses;
  }
  if (ellipses > 1) throw IndexError("index: an index can only have a single ellipsis");
  if (consumed > ndim()) {
    throw IndexError("index: too many indices for array: array is " + std::to_string(ndim()) +
                     "-dimensional, but " + std::to_string(consumed) + " were indexed");
  }
  Shape shape;
  Strides strides;
  std::int64_t offset = offset_;
  std::size_t axis = 0;
  auto take_whole_axes = [&](std::int64_t count) {
    for (std::int64_t i = 0; i < count; ++i, ++axis) {
      shape.push_back(shape_[axis]);
      strides.push_back(strides_[axis]);
    }
  };
  for (const IndexItem& item : items) {
    const auto& value = item.value();
    if (const auto* integer = std::get_if<std::int64_t>(&value)) {
      const std::int64_t size = shape_[axis];
      const std::int64_t position = *integer < 0 ? *integer + size : *integer;
      if (position < 0 || position >= size) {
        throw IndexError("index " + std::to_string(*integer) + " is out of bounds for axis " + std::to_string(axis) +
                         " with size " + std::to_string(size));
      }
      offset += position * strides_[axis];
      ++axis;
    } else if (const auto* slice = std::get_if<Slice>(&value)) {
      const Slice::Resolved range = slice->resolve(shape_[axis]);
      if (range.length > 0) offset += range.start * strides_[axis];
      shape.push_back(range.length);
      strides.push_back(range.length > 1 ? strides_[axis] * range.step : strides_[axis]);
      ++axis;
    } else if (std::holds_alternative<NewAxis>(value)) {
      shape.push_back(1);
      strides.push_back(0);
    } else {
      take_whole_axes(ndim() - consumed);
    }
  }
  take_whole_axes(ndim() - static_cast<std::int64_t>(axis));
  return Array(storage_, std::move(shape), std::move(strides), offset, dtype_);
}

Array Array::slice(std::int64_t axis, Slice slice) const {
  const std::int64_t normalized = normalize_axis(axis, ndim(), "slice");
  std::vector<IndexItem> items(static_cast<std::size_t>(normalized), IndexItem(Slice()));
  items.emplace_back(slice);
  return index(items);
}

Array Array::permute(const std::vector<std::int64_t>& axes) const {
  if (static_cast<std::int64_t>(axes.size()) != ndim()) {
    throw ValueError("permute: axes " + shape_str(axes) + " don't match an array of dimension " + std::to_string(ndim()));
  }
  std::vector<bool> seen(shape_.size(), false);
  Shape shape(shape_.size());
  Strides strides(shape_.size());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto axis = static_cast<std::size_t>(normalize_axis(axes[i], ndim(), "permute"));
    if (seen[axis]) throw ValueError("permute: repeated axis in " + shape_str(axes));
    seen[axis] = true;
    shape[i] = shape_[axis];
    strides[i] = strides_[axis];
  }
  return Array(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Array Array::T() const {
  std::vector<std::int64_t> axes(shape_.size());
  std::iota(axes.rbegin(), axes.rend(), 0);
  return permute(axes);
}

Array Array::swapaxes(std::int64_t axis1, std::int64_t axis2) const {
  std::vector<std::int64_t> axes(shape_.size());
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[static_cast<std::size_t>(normalize_axis(axis1, ndim(), "swapaxes"))],
            axes[static_cast<std::size_t>(normalize_axis(axis2, ndim(), "swapaxes"))]);
  return permute(axes);
}

namespace {

Shape infer_reshape(const Shape& from, std::int64_t size, const Shape& requested) {
  Shape shape = requested;
  std::int64_t known = 1;
  std::int64_t unknown_axis = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (unknown_axis >= 0) throw ShapeError("reshape: can only specify one unknown dimension, got " + shape_str(requested));
      unknown_axis = static_cast<std::int64_t>(i);
    } else if (shape[i] < 0) {
      throw ShapeError("reshape: negative dimension in " + shape_str(requested));
    } else {
      known *= shape[i];
    }
  }
  if (unknown_axis >= 0) {
    if (known == 0 || size % known != 0) {
      throw ShapeError("reshape: cannot reshape array of size " + std::to_string(size) + " (shape " + shape_str(from) +
                       ") into shape " + shape_str(requested));
    }
    shape[static_cast<std::size_t>(unknown_axis)] = size / known;
  }
  if (numel(shape) != size) {
    throw ShapeError("reshape: cannot reshape array of size " + std::to_string(size) + " (shape " + shape_str(from) +
                     ") into shape " + shape_str(requested));
  }
  return shape;
}

// Strides that view (shape, strides) as new_shape without moving data, or nothing. Works over
// runs of the old axes that are contiguous relative to each other (NumPy's _attempt_nocopy_reshape).
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& new_shape) {
  if (numel(shape) == 0) return contiguous_strides(new_shape);
  // Ignore size-one axes of the old layout.
  Shape old_shape;
  Strides old_strides;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) {
      old_shape.push_back(shape[i]);
      old_strides.push_back(strides[i]);
    }
  }
  Strides result(new_shape.size(), 0);
  std::size_t old_begin = 0, new_begin = 0;
  while (old_begin < old_shape.size() && new_begin < new_shape.size()) {
    std::size_t old_end = old_begin + 1, new_end = new_begin + 1;
    std::int64_t old_product = old_shape[old_begin], new_product = new_shape[new_begin];
    // Grow both groups until they cover the same number of elements.
    while (old_product != new_product) {
      if (old_product < new_product) {
        old_product *= old_shape[old_end++];
      } else {
        new_product *= new_shape[new_end++];
      }
    }
    // The old group must be one contiguous run.
    for (std::size_t i = old_begin; i + 1 < old_end; ++i) {
      if (old_strides[i] != old_strides[i + 1] * old_shape[i + 1]) return std::nullopt;
    }
    // Lay the new group over the run, innermost first.
    result[new_end - 1] = old_strides[old_end - 1];
    for (std::size_t i = new_end - 1; i > new_begin; --i) result[i - 1] = result[i] * new_shape[i];
    old_begin = old_end;
    new_begin = new_end;
  }
  // Trailing new axes are size one; give them a harmless stride.
  for (std::size_t i = new_begin; i < new_shape.size(); ++i) result[i] = 1;
  return result;
}

}  // namespace

Array Array::view(const Shape& shape) const {
  const Shape resolved = infer_reshape(shape_, size_, shape);
  const std::optional<Strides> strides = view_strides(shape_, strides_, resolved);
  if (!strides) {
    throw ShapeError("view: cannot view an array of shape " + shape_str(shape_) + " and strides " +
                     shape_str(strides_) + " as shape " + shape_str(resolved) + " without a copy");
  }
  return Array(storage_, resolved, *strides, offset_, dtype_);
}

Array Array::reshape(const Shape& shape, const OptionalStream& stream) const {
  const Shape resolved = infer_reshape(shape_, size_, shape);
  if (const std::optional<Strides> strides = view_strides(shape_, strides_, resolved)) {
    return Array(storage_, resolved, *strides, offset_, dtype_);
  }
  return copy(stream).view(resolved);
}

Array Array::broadcast_to(const Shape& shape) const {
  return Array(storage_, shape, broadcast_strides(shape_, strides_, shape, "broadcast_to"), offset_, dtype_);
}

Array Array::squeeze() const {
  Shape shape;
  Strides strides;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] != 1) {
      shape.push_back(shape_[i]);
      strides.push_back(strides_[i]);
    }
  }
  return Array(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Array Array::squeeze(const std::vector<std::int64_t>& axes) const {
  std::vector<bool> drop(shape_.size(), false);
  for (std::int64_t axis : axes) {
    const auto normalized = static_cast<std::size_t>(normalize_axis(axis, ndim(), "squeeze"));
    if (shape_[normalized] != 1) {
      throw ShapeError("squeeze: cannot select an axis to squeeze out which has size not equal to one: axis " +
                       std::to_string(axis) + " of shape " + shape_str(shape_));
    }
    drop[normalized] = true;
  }
  Shape shape;
  Strides strides;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    if (!drop[i]) {
      shape.push_back(shape_[i]);
      strides.push_back(strides_[i]);
    }
  }
  return Array(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Array Array::expand_dims(std::int64_t axis) const {
  const auto position = static_cast<std::size_t>(normalize_axis(axis, ndim() + 1, "expand_dims"));
  Shape shape = shape_;
  Strides strides = strides_;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(position), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(position), 0);
  return Array(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Array Array::ravel(const OptionalStream& stream) const { return reshape({size_}, stream); }

Array Array::flatten(const OptionalStream& stream) const { return copy(stream).view({size_}); }

}  // namespace tessel
