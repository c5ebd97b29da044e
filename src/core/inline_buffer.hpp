#pragma once
// A fixed-size scratch array, on the stack up to N elements and on the heap beyond: the per-launch
// parameter storage of a tiny op must not cost a heap allocation (each is tens of nanoseconds on a
// path whose whole budget is a few microseconds), yet launches with many operands must still work.
#include <cstddef>
#include <memory>

namespace tessel::detail {

template <class T, std::size_t N>
class InlineBuffer {
 public:
  explicit InlineBuffer(std::size_t size) : size_(size) {
    if (size > N) {
      heap_ = std::make_unique<T[]>(size);
      data_ = heap_.get();
    }
  }
  InlineBuffer(const InlineBuffer&) = delete;  // data_ may point into this object
  InlineBuffer& operator=(const InlineBuffer&) = delete;

  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T* data() { return data_; }
  std::size_t size() const { return size_; }

 private:
  T inline_[N];  // left uninitialized: callers write what they read
  std::unique_ptr<T[]> heap_;
  T* data_ = inline_;
  std::size_t size_;
};

}  // namespace tessel::detail
