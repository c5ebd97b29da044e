#pragma once
// Linear algebra, implemented by backend/cpu/linalg.cpp (LAPACK) and backend/cuda/linalg.cpp
// (cuSOLVER/cuBLAS, with the helper kernels of backend/cuda/linalg.cu). src/ops/linalg.cpp
// validates, casts and copies the operands into the layout below.
//
// Layout: `batch` matrices, each column-major and contiguous (leading dimension = rows), one
// after another (batch stride = rows * cols). Matrices are overwritten in place where noted.
// dtype is float32, float64, complex64 or complex128; "real" below is its real counterpart.
// info: `batch` int32 values, LAPACK's info of each matrix. Everything runs on `stream` and is
// asynchronous on CUDA. batch >= 1 and every dimension >= 1 (ops/linalg.cpp skips empty work).
#include <cstdint>
#include <initializer_list>

#include "backend/dispatch.hpp"
#include "tessel/array/array.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

// solve takes row-major matrices (solving with the transpose of what LAPACK sees) from this order
// on: below it the batched and small-matrix paths take column-major copies.
constexpr std::int64_t kTransposedSolveMinN = 64;

struct LinalgBatch {
  DType dtype = DType::float64;
  std::int64_t batch = 1;
  std::int64_t m = 0, n = 0;  // rows, columns of the input matrices
};

// The results of eigh: w (batch..., n) real, ascending; v (batch..., n, n), the eigenvectors as
// columns, a view of whatever layout the backend wrote (undefined without vectors); info
// (batch...) int32.
struct EighArrays {
  Array w, v, info;
};
// The results of inv: the inverses (batch..., n, n), a view of whatever layout the backend wrote,
// and info (batch...) int32, getrf's.
struct InvArrays {
  Array inverse, info;
};
// The results of solve: the solutions (batch..., n, nrhs), a view of whatever layout the backend
// wrote, and info (batch...) int32, getrf's.
struct SolveArrays {
  Array x, info;
};

#define TESSEL_LINALG_BACKEND(X)                                                                              \
  /* a (n x n): the triangle `upper` receives the factor; the other one is left as it was. */                  \
  X(void, cholesky, (const LinalgBatch& p, void* a, bool upper, std::int32_t* info, const Stream& stream))      \
  /* a (n x n) -> its LU factors; pivots: a fresh int array (batch, n) of 1-based row swaps, in */              \
  /* the backend's int type (int32 or int64). */                                                               \
  X(void, lu, (const LinalgBatch& p, void* a, Array& pivots, std::int32_t* info, const Stream& stream))         \
  /* a (n x n) -> LU; b (n x nrhs, batch matrices) -> the solution of a x = b, or of a^T x = b when */      \
  /* `transposed` (a then holds the row-major matrix; for n > kTransposedSolveMinN): the in-place LU */     \
  /* solve of the library route (solve_by_lu, inv_by_solve below). */                                        \
  X(void, solve, (const LinalgBatch& p, void* a, void* b, std::int64_t nrhs, bool transposed, std::int32_t* info, \
                  const Stream& stream))                                                                       \
  /* x: the matrices (batch..., n, n) in the compute dtype, any strides, read only (the lower triangle */     \
  /* counts); batch, n >= 1. The backend chooses its route and lays x out for it. */                          \
  X(EighArrays, eigh, (const LinalgBatch& p, const Array& x, bool vectors, const Stream& stream))              \
  /* a (m x n) destroyed; s (batch, k) real, k = min(m, n); when `vectors`: u (m x ucols) and */               \
  /* vh (vrows x n) with ucols = vrows = m / n (full) or k. */                                                 \
  X(void, svd, (const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full,           \
                std::int32_t* info, const Stream& stream))                                                     \
  /* a (m x n) -> R in its upper trapezoid (below it: Householder vectors); q (m x qcols), */                  \
  /* qcols = k or m, receives Q. */                                                                            \
  X(void, qr, (const LinalgBatch& p, void* a, void* q, std::int64_t qcols, const Stream& stream))              \
  /* complex dtypes only. a (n x n) destroyed; w (batch, n); v (n x n) when `vectors`. */                      \
  X(void, eig, (const LinalgBatch& p, void* a, void* w, void* v, bool vectors, std::int32_t* info,             \
                const Stream& stream))                                                                         \
  /* x: the matrices (batch..., n, n) in the compute dtype, any strides, read only; batch, n >= 1. */         \
  X(InvArrays, inv, (const LinalgBatch& p, const Array& x, const Stream& stream))                              \
  /* a (batch..., n, n) and b (batch..., n, nrhs): the systems a x = b in the compute dtype, any strides */     \
  /* (broadcast views too), read only; batch, n, nrhs >= 1. */                                                \
  X(SolveArrays, solve_systems, (const LinalgBatch& p, const Array& a, const Array& b, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_LINALG_BACKEND)

// The backends' entries that take Arrays (eigh): make `stream` wait for the pending writes of
// the arrays they use, and mark the ones they wrote as written on `stream` afterwards.
inline void wait_for_writes(const Stream& stream, std::initializer_list<const Array*> arrays) {
  for (const Array* a : arrays) {
    if (a && a->defined()) a->storage()->wait_on_stream(stream);
  }
}
inline void mark_written(const Stream& stream, std::initializer_list<const Array*> arrays) {
  for (const Array* a : arrays) {
    if (a && a->defined()) a->storage()->record_pending_write(stream);
  }
}

// inv through the backend's LU solve (`solve`, its entry above) against the identity: x copied
// column-major, or row-major from kTransposedSolveMinN on (LAPACK's transposed solve: no strided
// transpose of a large x). The backends' route where no kernel of their own applies.
template <class Solve>
InvArrays inv_by_solve(const LinalgBatch& p, const Array& x, const Stream& stream, Solve&& solve) {
  const bool transposed = p.n > kTransposedSolveMinN;
  Array work = transposed ? x.copy(stream) : x.swapaxes(-1, -2).copy(stream);
  const Shape batch_shape(x.shape().begin(), x.shape().end() - 2);
  Array result = eye(p.n, p.n, 0, p.dtype, x.device(), stream).broadcast_to(x.shape()).copy(stream);
  Array info = zeros(batch_shape, DType::int32, x.device(), stream);
  wait_for_writes(stream, {&work, &result, &info});
  solve(p, work.data(), result.data(), p.n, transposed, static_cast<std::int32_t*>(info.data()), stream);
  mark_written(stream, {&work, &result, &info});
  return {result.swapaxes(-1, -2), info};
}

// solve_systems through the backend's LU solve (`solve`): a copied column-major, or row-major
// from kTransposedSolveMinN on, and b column-major, solved in place.
template <class Solve>
SolveArrays solve_by_lu(const LinalgBatch& p, const Array& a, const Array& b, const Stream& stream, Solve&& solve) {
  const bool transposed = p.n > kTransposedSolveMinN;
  Array work = transposed ? a.copy(stream) : a.swapaxes(-1, -2).copy(stream);
  Array x = b.swapaxes(-1, -2).copy(stream);
  const Shape batch_shape(a.shape().begin(), a.shape().end() - 2);
  Array info = zeros(batch_shape, DType::int32, a.device(), stream);
  wait_for_writes(stream, {&work, &x, &info});
  solve(p, work.data(), x.data(), b.dim(-1), transposed, static_cast<std::int32_t*>(info.data()), stream);
  mark_written(stream, {&work, &x, &info});
  return {x.swapaxes(-1, -2), info};
}

// The error check of the CUDA entries without reading the info array back: one reduction on
// `stream` writes status[1] = (the first i with info[i] != 0) + 1, and leaves status[1] as it is
// (0) when every info is 0. status: the stream's status words (backend/indexing.hpp).
// Its scratch: two device words per stream (a StreamCache, backend/cuda/stream_cache.hpp).
#define TESSEL_LINALG_CUDA_ONLY(X) \
  X(void, first_failure, (const std::int32_t* info, std::int64_t n, std::int64_t* status, const Stream& stream))
TESSEL_BACKEND_CUDA_ONLY(TESSEL_LINALG_CUDA_ONLY)

namespace cuda {

// Helper kernels of linalg.cu; `stream` is a cudaStream_t. All launches are checked.
// pointers[i] = base + i * stride_bytes, for the cuSOLVER/cuBLAS batched routines.
void fill_pointers(void** pointers, void* base, std::int64_t stride_bytes, std::int64_t count, void* stream);
// dst (rows x cols) = the first `rows` columns of src (cols x src_cols, src_cols >= rows),
// conjugate-transposed (transposed for real dtypes); both column-major batches.
void adjoint_batch(DType dtype, const void* src, std::int64_t src_cols, void* dst, std::int64_t rows,
                   std::int64_t cols, std::int64_t batch, void* stream);
// dst (n x n, leading dimension n) = the upper triangle of src's leading n x n block (leading
// dimension lda), zeros below the diagonal: R of a geqrf, for the QR-first SVD.
void copy_upper_triangle(DType dtype, const void* src, std::int64_t lda, void* dst, std::int64_t n, void* stream);
// x = P z for the permutation P of getrf's pivots piv (1-based, row k swapped with row piv[k] - 1
// in order: P^T A = L U): row rows[i] of x is row i of z, for the n x k column-major z and x (no
// aliasing). rows: n ints of scratch. n at most kMaxPermutedRows (its index is held in shared memory).
constexpr std::int64_t kMaxPermutedRows = 12288;  // 48 KB of ints
void permute_rows_by_pivots(DType dtype, const std::int32_t* piv, std::int64_t n, const void* z, std::int64_t k,
                            void* x, std::int32_t* rows, void* stream);
// flags[b] = 1 where matrix b of `a` (`per` consecutive elements of dtype, batch matrices) holds a
// NaN or Inf, else 0.
void flag_nonfinite(DType dtype, const void* a, std::int64_t per, std::int64_t batch, std::int32_t* flags, void* stream);
// Every element of the flagged matrices of `out` (`per` elements of dtype each) becomes NaN, and
// their info (when not null) 0: non-finite input gives NaN results without an error, as on the CPU.
void poison_flagged(DType dtype, const std::int32_t* flags, std::int64_t per, std::int64_t batch, void* out,
                    std::int32_t* info, void* stream);
// q (m x qcols per matrix, column-major) = the first qcols columns of H_1 ... H_k, the reflectors
// of a geqrf of the m x n matrices v (leading dimension m, the vectors below the diagonal) with
// tau (k per matrix), k = min(m, n): LAPACK's orgqr / ungqr for a whole batch, a warp per column.
void householder_q(DType dtype, const void* v, std::int64_t m, std::int64_t n, const void* tau, std::int64_t qcols,
                   void* q, std::int64_t batch, void* stream);
}  // namespace cuda

}  // namespace tessel::backend
