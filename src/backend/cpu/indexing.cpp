// CPU gathers, scatters, index checks, mask compaction and nonzero (see backend/indexing.hpp).
// Elements move as raw bytes of the dtype's size, so one loop serves every dtype. Gathers and
// checks run in parallel blocks over the launch shape; scatters run in order on one thread, so
// that with repeated indices the last value wins, as in NumPy.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/threads.hpp"
#include "backend/indexing.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

constexpr std::int64_t block_elements = 16384;
constexpr std::int64_t parallel_threshold = 1 << 16;

// The value of an integer index element; false when it does not fit int64 (a uint64 above 2^63).
bool read_index(const void* p, DType dtype, std::int64_t& value) {
  switch (dtype) {
    case DType::int8: value = *static_cast<const std::int8_t*>(p); return true;
    case DType::int16: value = *static_cast<const std::int16_t*>(p); return true;
    case DType::int32: value = *static_cast<const std::int32_t*>(p); return true;
    case DType::int64: value = *static_cast<const std::int64_t*>(p); return true;
    case DType::uint8: value = *static_cast<const std::uint8_t*>(p); return true;
    case DType::uint16: value = *static_cast<const std::uint16_t*>(p); return true;
    case DType::uint32: value = *static_cast<const std::uint32_t*>(p); return true;
    case DType::uint64: {
      const std::uint64_t u = *static_cast<const std::uint64_t*>(p);
      value = static_cast<std::int64_t>(u);
      return u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    }
    default: throw DTypeError(std::string("indexing: internal error, index dtype ") + dtype_name(dtype));
  }
}

// The running offsets of every operand while walking the launch shape in C order.
struct Walker {
  const std::vector<std::int64_t>& shape;
  std::vector<const std::vector<std::int64_t>*> strides;  // per operand, over the launch shape
  std::vector<std::int64_t> coord;
  std::vector<std::int64_t> offset;

  Walker(const std::vector<std::int64_t>& shape_, std::vector<const std::vector<std::int64_t>*> strides_)
      : shape(shape_), strides(std::move(strides_)), coord(shape_.size(), 0), offset(strides.size(), 0) {}

  void seek(std::int64_t linear) {
    std::fill(offset.begin(), offset.end(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
      const std::int64_t extent = shape[d];
      coord[d] = extent == 0 ? 0 : linear % extent;
      linear = extent == 0 ? 0 : linear / extent;
      for (std::size_t op = 0; op < strides.size(); ++op) offset[op] += coord[d] * (*strides[op])[d];
    }
  }
  void next() {
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++coord[d] < shape[d]) {
        for (std::size_t op = 0; op < strides.size(); ++op) offset[op] += (*strides[op])[d];
        return;
      }
      for (std::size_t op = 0; op < strides.size(); ++op) offset[op] -= (coord[d] - 1) * (*strides[op])[d];
      coord[d] = 0;
    }
  }
};

std::int64_t launch_size(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

// The element offset the index operands select at one launch position, or false with the failing
// operand and value in `slot` / `bad`.
bool index_offset(const GatherProblem& p, const std::vector<std::int64_t>& offsets, std::int64_t& result,
                  std::size_t& slot, std::int64_t& bad) {
  result = 0;
  for (std::size_t k = 0; k < p.indices.size(); ++k) {
    const IndexOperand& op = p.indices[k];
    const auto* at = static_cast<const unsigned char*>(op.data) + offsets[k] * itemsize(op.dtype);
    std::int64_t v = 0;
    const bool fits = read_index(at, op.dtype, v);
    if (op.from_mask) {
      for (std::size_t a = op.axes.size(); a-- > 1;) {
        result += (v % op.axes[a].size) * op.axes[a].stride;
        v /= op.axes[a].size;
      }
      result += v * op.axes[0].stride;
      continue;
    }
    const IndexAxis& axis = op.axes[0];
    std::int64_t j = v < 0 ? v + axis.size : v;
    if (!fits || j < 0 || j >= axis.size) {
      slot = k;
      bad = v;
      return false;
    }
    result += j * axis.stride;
  }
  return true;
}

void copy_element(void* dst, const void* src, std::int64_t bytes) {
  switch (bytes) {
    case 1: *static_cast<std::uint8_t*>(dst) = *static_cast<const std::uint8_t*>(src); break;
    case 2: *static_cast<std::uint16_t*>(dst) = *static_cast<const std::uint16_t*>(src); break;
    case 4: *static_cast<std::uint32_t*>(dst) = *static_cast<const std::uint32_t*>(src); break;
    case 8: *static_cast<std::uint64_t*>(dst) = *static_cast<const std::uint64_t*>(src); break;
    default: std::memcpy(dst, src, static_cast<std::size_t>(bytes));
  }
}

// Walks the launch shape in parallel blocks: visit(walker offsets) per element (operand order:
// index operands, then the extra operands given). Stops early once `stop` is set.
template <class Visit>
void walk(const GatherProblem& p, const std::vector<const std::vector<std::int64_t>*>& extra, bool parallel_ok,
          std::atomic<bool>& stop, Visit&& visit) {
  std::vector<const std::vector<std::int64_t>*> strides;
  for (const IndexOperand& op : p.indices) strides.push_back(&op.strides);
  for (const auto* s : extra) strides.push_back(s);
  const std::int64_t n = launch_size(p.shape);
  if (n == 0) return;
  const std::int64_t blocks = (n + block_elements - 1) / block_elements;
  const int threads = parallel_ok && n >= parallel_threshold ? loop_threads(n, block_elements) : 1;
  parallel_pieces(blocks, threads, [&](std::int64_t b) {
    if (stop.load(std::memory_order_relaxed)) return;
    Walker w(p.shape, strides);
    const std::int64_t first = b * block_elements;
    const std::int64_t last = std::min(n, first + block_elements);
    w.seek(first);
    for (std::int64_t i = first; i < last; ++i) {
      if (!visit(i, w.offset)) {
        stop.store(true, std::memory_order_relaxed);
        break;
      }
      if (i + 1 < last) w.next();
    }
  });
}

std::mutex report_mutex;

void report(const GatherProblem& p, std::size_t slot, std::int64_t bad) {
  if (p.status == nullptr) return;  // unchecked: the element is skipped (undefined, as on CUDA)
  std::lock_guard<std::mutex> lock(report_mutex);
  if (p.status[1] == 0) {
    p.status[1] = static_cast<std::int64_t>(slot) + 1;
    p.status[2] = bad;
  }
}

constexpr std::int64_t kAhead = 32;  // elements between a row's prefetch and its load

template <class I, class E>
bool gather_1d_typed(const GatherProblem& p) {
  const IndexOperand& op = p.indices[0];
  const auto* idx = static_cast<const I*>(op.data);
  const auto* base = static_cast<const E*>(p.base);
  auto* out = static_cast<E*>(p.out);
  const std::int64_t n = p.shape[0], istride = op.strides[0], size = op.axes[0].size, stride = op.axes[0].stride;
  std::atomic<bool> failed{false};
  const int threads = n >= parallel_threshold ? loop_threads(n, block_elements) : 1;
  const std::int64_t blocks = (n + block_elements - 1) / block_elements;
  parallel_pieces(blocks, threads, [&](std::int64_t b) {
    const std::int64_t last = std::min(n, (b + 1) * block_elements);
    for (std::int64_t i = b * block_elements; i < last; ++i) {
      // Random rows of a large table miss every cache: ask for the row kAhead elements ahead early
      // (a prefetch of a bad address does not fault).
      if (i + kAhead < last) {
        std::int64_t ahead = static_cast<std::int64_t>(idx[(i + kAhead) * istride]);
        if (ahead < 0) ahead += size;
        __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(base) +
                                                         static_cast<std::uintptr_t>(ahead * stride) * sizeof(E)));
      }
      const I raw = idx[i * istride];
      std::int64_t j = static_cast<std::int64_t>(raw);
      if constexpr (std::is_signed_v<I>) {
        if (j < 0) j += size;
      }
      if (j < 0 || j >= size) {  // a uint64 above 2^63 is negative here
        if (!failed.exchange(true)) report(p, 0, static_cast<std::int64_t>(raw));
        continue;
      }
      out[i] = base[j * stride];
    }
  });
  return true;
}

// x[idx] along one axis into a 1-d result (take of a 1-d array, x[idx] with one index array and
// no other axes): one typed loop instead of the general walk.
bool gather_1d(const GatherProblem& p) {
  if (p.indices.size() != 1 || p.indices[0].from_mask || p.shape.size() != 1 || p.base_strides[0] != 0) return false;
  const std::int64_t width = itemsize(p.dtype);
  auto by_width = [&](auto index_tag) {
    using I = decltype(index_tag);
    switch (width) {
      case 1: return gather_1d_typed<I, std::uint8_t>(p);
      case 2: return gather_1d_typed<I, std::uint16_t>(p);
      case 4: return gather_1d_typed<I, std::uint32_t>(p);
      case 8: return gather_1d_typed<I, std::uint64_t>(p);
      default: return false;
    }
  };
  switch (p.indices[0].dtype) {
    case DType::int32: return by_width(std::int32_t{});
    case DType::int64: return by_width(std::int64_t{});
    case DType::uint64: return by_width(std::uint64_t{});
    default: return false;
  }
}

}  // namespace

void gather(const GatherProblem& p, const Stream&) {
  if (gather_1d(p)) return;
  const std::int64_t width = itemsize(p.dtype);
  const auto* base = static_cast<const unsigned char*>(p.base);
  auto* out = static_cast<unsigned char*>(p.out);
  const std::size_t k = p.indices.size();
  std::atomic<bool> stop{false};
  walk(p, {&p.base_strides}, true, stop, [&](std::int64_t i, const std::vector<std::int64_t>& offsets) {
    std::int64_t off = 0;
    std::size_t slot = 0;
    std::int64_t bad = 0;
    if (!index_offset(p, offsets, off, slot, bad)) {
      report(p, slot, bad);
      return false;
    }
    copy_element(out + i * width, base + (offsets[k] + off) * width, width);
    return true;
  });
}

void scatter(const GatherProblem& p, const Stream&) {
  const std::int64_t width = itemsize(p.dtype);
  auto* base = static_cast<unsigned char*>(p.base);
  const auto* values = static_cast<const unsigned char*>(p.values);
  const std::size_t k = p.indices.size();
  std::vector<std::int64_t> scalar_strides(p.shape.size(), 0);
  std::atomic<bool> stop{false};
  walk(p, {&p.base_strides, p.value_is_scalar ? &scalar_strides : &p.value_strides}, false, stop,
       [&](std::int64_t, const std::vector<std::int64_t>& offsets) {
         std::int64_t off = 0;
         std::size_t slot = 0;
         std::int64_t bad = 0;
         if (!index_offset(p, offsets, off, slot, bad)) {  // checked before: cannot happen
           report(p, slot, bad);
           return false;
         }
         const void* value = p.value_is_scalar ? static_cast<const void*>(p.scalar) : values + offsets[k + 1] * width;
         copy_element(base + (offsets[k] + off) * width, value, width);
         return true;
       });
}

void check_indices(const GatherProblem& p, const Stream&) {
  std::atomic<bool> stop{false};
  walk(p, {}, true, stop, [&](std::int64_t, const std::vector<std::int64_t>& offsets) {
    std::int64_t off = 0;
    std::size_t slot = 0;
    std::int64_t bad = 0;
    if (!index_offset(p, offsets, off, slot, bad)) {
      report(p, slot, bad);
      return false;
    }
    return true;
  });
}

namespace {

// Mask compaction in chunks: the flags of each chunk are counted in parallel, an exclusive scan of
// the counts gives each chunk its first output slot, then the chunks are compacted in parallel.
constexpr std::int64_t kCompactChunk = std::int64_t{1} << 16;

// emit(begin, end, first) writes the flagged elements of [begin, end) from output slot `first`.
template <class Emit>
std::int64_t compact_in_chunks(const bool* flags, std::int64_t n, Emit&& emit) {
  const std::int64_t chunks = (n + kCompactChunk - 1) / kCompactChunk;
  const int threads = n >= parallel_threshold ? loop_threads(n, kMinElementsPerThread) : 1;
  if (threads <= 1 || chunks <= 1) {
    emit(0, n, 0);
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) count += flags[i];
    return count;
  }
  std::vector<std::int64_t> first(static_cast<std::size_t>(chunks) + 1, 0);
  parallel_pieces(chunks, threads, [&](std::int64_t c) {
    const std::int64_t begin = c * kCompactChunk, end = std::min(n, begin + kCompactChunk);
    std::int64_t count = 0;
    for (std::int64_t i = begin; i < end; ++i) count += flags[i];
    first[static_cast<std::size_t>(c) + 1] = count;
  });
  for (std::size_t c = 0; c < static_cast<std::size_t>(chunks); ++c) first[c + 1] += first[c];
  parallel_pieces(chunks, threads, [&](std::int64_t c) {
    const std::int64_t begin = c * kCompactChunk;
    emit(begin, std::min(n, begin + kCompactChunk), first[static_cast<std::size_t>(c)]);
  });
  return first.back();
}

// The last flagged position of [begin, end), or begin - 1. Up to it, a store of every element at
// the running count (kept or not: no branch to mispredict) stays inside the range's own slots.
std::int64_t last_flagged(const bool* flags, std::int64_t begin, std::int64_t end) {
  std::int64_t last = end - 1;
  while (last >= begin && !flags[last]) --last;
  return last;
}

template <class T>
void select_range(const T* src, const bool* flags, std::int64_t begin, std::int64_t end, T* dst) {
  const std::int64_t last = last_flagged(flags, begin, end);
  std::int64_t k = 0;
  for (std::int64_t i = begin; i <= last; ++i) {
    dst[k] = src[i];
    k += flags[i];
  }
}

struct Bytes16 {
  std::uint64_t lo, hi;
};

}  // namespace

void select_flagged(const void* in, std::int64_t width, const bool* flags, std::int64_t n, void* out,
                    std::int64_t* status, const Stream&) {
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  const auto typed = [&](auto tag) {
    using T = decltype(tag);
    return compact_in_chunks(flags, n, [&](std::int64_t begin, std::int64_t end, std::int64_t first) {
      select_range(reinterpret_cast<const T*>(src), flags, begin, end, reinterpret_cast<T*>(dst) + first);
    });
  };
  switch (width) {
    case 1: status[0] = typed(std::uint8_t{}); return;
    case 2: status[0] = typed(std::uint16_t{}); return;
    case 4: status[0] = typed(std::uint32_t{}); return;
    case 8: status[0] = typed(std::uint64_t{}); return;
    case 16: status[0] = typed(Bytes16{}); return;
    default: break;
  }
  status[0] = compact_in_chunks(flags, n, [&](std::int64_t begin, std::int64_t end, std::int64_t first) {
    std::int64_t k = first;
    for (std::int64_t i = begin; i < end; ++i) {
      if (flags[i]) copy_element(dst + (k++) * width, src + i * width, width);
    }
  });
}

void flat_nonzero(const bool* flags, std::int64_t n, std::int64_t* out, std::int64_t* status, const Stream&) {
  status[0] = compact_in_chunks(flags, n, [&](std::int64_t begin, std::int64_t end, std::int64_t first) {
    const std::int64_t last = last_flagged(flags, begin, end);
    std::int64_t* dst = out + first;
    std::int64_t k = 0;
    for (std::int64_t i = begin; i <= last; ++i) {
      dst[k] = i;
      k += flags[i];
    }
  });
}

void unravel(const std::int64_t* flat, std::int64_t n, const std::vector<std::int64_t>& shape,
             const std::vector<std::int64_t*>& out, const Stream&) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = flat[i];
    for (std::size_t d = shape.size(); d-- > 1;) {
      out[d][i] = rest % shape[d];
      rest /= shape[d];
    }
    out[0][i] = rest;
  }
}

}  // namespace tessel::backend::cpu
