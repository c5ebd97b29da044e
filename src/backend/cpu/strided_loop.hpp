#pragma once
// The CPU backends' loop over strided operands: runs of the innermost collapsed dimension, the
// whole iteration cut into one contiguous share per thread (num_threads() of them at most,
// threads.hpp). Shared by the array layer's copy and fill and the ops layer's cast and elementwise
// ops.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "array/backend.hpp"
#include "array/cast.hpp"
#include "backend/cpu/threads.hpp"

namespace tessel::backend::cpu {

using detail::cast_value;
using detail::StridedRef;

// Calls body(offsets, count) for the runs of elements [first, last) of the collapsed iteration
// (row-major over dims.shape): each run lies in one row of the innermost axis, and offsets[op] is
// operand op's element offset at the run's first element, for the first `nops` <= Cap operands. The
// outer index advances as an odometer, so many short rows cost no division each.
template <std::size_t Cap, class Body>
void walk_runs(const CollapsedDims& dims, std::size_t nops, std::int64_t first, std::int64_t last, Body& body) {
  if (first >= last) return;
  const std::size_t ndim = dims.shape.size();
  const std::int64_t inner = dims.shape.back();
  std::int64_t index_small[16];  // the outer axes' indices (collapse_dims leaves few axes)
  std::vector<std::int64_t> index_large;
  std::int64_t* index = index_small;
  if (ndim > 16) {
    index_large.resize(ndim);
    index = index_large.data();
  }
  std::int64_t offsets[Cap] = {};
  std::int64_t row = first / inner, col = first % inner;
  for (std::size_t op = 0; op < nops; ++op) offsets[op] = 0;
  for (std::size_t axis = ndim - 1; axis-- > 0;) {
    const std::int64_t extent = dims.shape[axis];
    index[axis] = row % extent;
    row /= extent;
    for (std::size_t op = 0; op < nops; ++op) offsets[op] += index[axis] * dims.strides[op][axis];
  }
  std::int64_t at = first;
  while (true) {
    const std::int64_t count = std::min(inner - col, last - at);
    std::int64_t run[Cap] = {};
    for (std::size_t op = 0; op < nops; ++op) run[op] = offsets[op] + col * dims.strides[op][ndim - 1];
    body(static_cast<const std::int64_t*>(run), count);
    at += count;
    if (at >= last) return;
    col = 0;
    // Next row: the odometer over the outer axes.
    for (std::size_t axis = ndim - 1; axis-- > 0;) {
      for (std::size_t op = 0; op < nops; ++op) offsets[op] += dims.strides[op][axis];
      if (++index[axis] < dims.shape[axis]) break;
      for (std::size_t op = 0; op < nops; ++op) offsets[op] -= index[axis] * dims.strides[op][axis];
      index[axis] = 0;
    }
  }
}

// The runs of the whole collapsed layout (see walk_runs) for its first `nops` <= Cap operands, on
// `threads` threads (threads <= 1: on the calling thread). The elements are cut into pieces of
// whole multiples of 16 elements (so no two threads write one cache line of a contiguous output),
// about kPiecesPerThread per thread, which the calling thread and tessel's CPU workers take as they
// come free (run_pieces, threads.hpp): a thread that the OS runs late (another process on its
// core) leaves its pieces to the others instead of holding up the whole op.
constexpr std::int64_t kPiecesPerThread = 8;
constexpr std::int64_t kMinPieceElements = 8192;

template <std::size_t Cap, class Body>
void for_each_run_of(const CollapsedDims& dims, std::size_t nops, int threads, Body&& body) {
  std::int64_t total = 1;
  for (const std::int64_t extent : dims.shape) total *= extent;
  if (total <= 0) return;
  if (threads <= 1) {
    walk_runs<Cap>(dims, nops, 0, total, body);
    return;
  }
  const std::int64_t piece =
      (std::max(kMinPieceElements, total / (threads * kPiecesPerThread)) + 15) & ~std::int64_t{15};
  const std::int64_t pieces = (total + piece - 1) / piece;
  parallel_pieces(pieces, threads, [&](std::int64_t p) {
    walk_runs<Cap>(dims, nops, p * piece, std::min(total, (p + 1) * piece), body);
  });
}

// The same for all of dims' N operands.
template <std::size_t N, class Body>
void for_each_run(const CollapsedDims& dims, int threads, Body&& body) {
  for_each_run_of<N>(dims, N, threads, body);
}

// Threads for a loop over the collapsed layout of a cheap per-element body (a copy or a cast).
inline int copy_threads(const CollapsedDims& dims) {
  std::int64_t total = 1;
  for (const std::int64_t extent : dims.shape) total *= extent;
  return loop_threads(total, kMinElementsPerThread);
}

// dst = src converted element by element (cast_value: NumPy's unsafe casting).
template <class Dst, class Src>
void cast_copy(const StridedRef& dst, const StridedRef& src, const CollapsedDims& dims) {
  Dst* const dst_base = static_cast<Dst*>(dst.data);
  const Src* const src_base = static_cast<const Src*>(src.data);
  const std::int64_t dst_stride = dims.strides[0].back();
  const std::int64_t src_stride = dims.strides[1].back();
  const int threads = copy_threads(dims);
  if (dst_stride == 1 && src_stride == 1) {
    for_each_run<2>(dims, threads, [&](const std::int64_t* offsets, std::int64_t count) {
      Dst* out = dst_base + offsets[0];
      const Src* in = src_base + offsets[1];
      if constexpr (std::is_same_v<Dst, Src>) {
        if (out != in) std::memmove(static_cast<void*>(out), static_cast<const void*>(in), static_cast<std::size_t>(count) * sizeof(Dst));
      } else {
#pragma omp simd
        for (std::int64_t i = 0; i < count; ++i) out[i] = cast_value<Dst>(in[i]);
      }
    });
  } else if (dst_stride == 1 && src_stride == 0) {
    for_each_run<2>(dims, threads, [&](const std::int64_t* offsets, std::int64_t count) {
      Dst* out = dst_base + offsets[0];
      const Dst value = cast_value<Dst>(src_base[offsets[1]]);
#pragma omp simd
      for (std::int64_t i = 0; i < count; ++i) out[i] = value;
    });
  } else {
    for_each_run<2>(dims, threads, [&](const std::int64_t* offsets, std::int64_t count) {
      Dst* out = dst_base + offsets[0];
      const Src* in = src_base + offsets[1];
      for (std::int64_t i = 0; i < count; ++i) out[i * dst_stride] = cast_value<Dst>(in[i * src_stride]);
    });
  }
}

}  // namespace tessel::backend::cpu
