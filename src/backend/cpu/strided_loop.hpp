#pragma once
// The CPU backends' loop over strided operands: runs of the innermost collapsed dimension, spread
// over OpenMP threads. Shared by the array layer's copy and fill and the ops layer's cast.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "array/backend.hpp"
#include "array/cast.hpp"

namespace tessel::backend::cpu {

using detail::cast_value;
using detail::StridedRef;

// Elements per unit of parallel work: large enough to amortize the scheduling, small enough to
// split a single long row across threads.
constexpr std::int64_t block_elements = 16384;
// Below this many elements the work runs on the calling thread.
constexpr std::int64_t parallel_threshold = 1 << 16;

// Calls body(unit_offsets..., count) over the collapsed layout: for each run of `count`
// elements along the innermost axis, the element offsets of every operand at the run's start.
// Runs are independent, so they are spread over OpenMP threads.
template <std::size_t N, class Body>
void for_each_inner_run(const CollapsedDims& dims, Body&& body) {
  const std::int64_t ndim = dims.ndim();
  const std::int64_t inner = dims.shape.back();
  if (inner == 0) return;
  std::int64_t rows = 1;
  for (std::int64_t axis = 0; axis + 1 < ndim; ++axis) rows *= dims.shape[static_cast<std::size_t>(axis)];
  const std::int64_t blocks_per_row = (inner + block_elements - 1) / block_elements;
  const std::int64_t units = rows * blocks_per_row;
  const bool parallel = rows * inner >= parallel_threshold;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t unit = 0; unit < units; ++unit) {
    const std::int64_t row = unit / blocks_per_row;
    const std::int64_t first = (unit % blocks_per_row) * block_elements;
    const std::int64_t count = std::min(block_elements, inner - first);
    std::int64_t offsets[N];
    for (std::size_t op = 0; op < N; ++op) offsets[op] = first * dims.strides[op].back();
    // Decompose the row index over the outer axes, innermost outer axis first.
    std::int64_t rest = row;
    for (std::int64_t axis = ndim - 2; axis >= 0; --axis) {
      const std::int64_t extent = dims.shape[static_cast<std::size_t>(axis)];
      const std::int64_t coordinate = rest % extent;
      rest /= extent;
      for (std::size_t op = 0; op < N; ++op) offsets[op] += coordinate * dims.strides[op][static_cast<std::size_t>(axis)];
    }
    body(offsets, count);
  }
}

// dst = src converted element by element (cast_value: NumPy's unsafe casting).
template <class Dst, class Src>
void cast_copy(const StridedRef& dst, const StridedRef& src, const CollapsedDims& dims) {
  Dst* const dst_base = static_cast<Dst*>(dst.data);
  const Src* const src_base = static_cast<const Src*>(src.data);
  const std::int64_t dst_stride = dims.strides[0].back();
  const std::int64_t src_stride = dims.strides[1].back();
  for_each_inner_run<2>(dims, [&](const std::int64_t* offsets, std::int64_t count) {
    Dst* out = dst_base + offsets[0];
    const Src* in = src_base + offsets[1];
    if (dst_stride == 1 && src_stride == 1) {
      for (std::int64_t i = 0; i < count; ++i) out[i] = cast_value<Dst>(in[i]);  // vectorizable
    } else {
      for (std::int64_t i = 0; i < count; ++i) out[i * dst_stride] = cast_value<Dst>(in[i * src_stride]);
    }
  });
}

}  // namespace tessel::backend::cpu
