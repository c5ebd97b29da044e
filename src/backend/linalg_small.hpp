#pragma once
// tessel's batched small-matrix kernels for the CUDA backend (backend/cuda/linalg_small.cpp,
// device code in backend/cuda/device/linalg_small.cuh, specialized on the order; the orders the
// route table sends them are compiled ahead of time, backend/cuda/linalg_small_aot.hpp, others by
// NVRTC). The route table: backend/cuda/tuning/linalg_routes.hpp. The layout is that of backend/linalg.hpp; float32 and float64.
#include <cstdint>
#include <vector>

#include "backend/linalg.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/jit/compiler.hpp"

namespace tessel::backend::cuda {

// eigh and svd: one matrix per thread, in registers; eigh_warp: a group of lanes per matrix, a
// column per lane in registers (n <= 32); svd_block: a team of threads (a warp or a block) per
// matrix, in shared memory, for the orders above svd's; eigh_tridiagonal: one matrix per thread,
// Householder tridiagonalization and implicit QR (n <= 16; its table rows take large batches to
// n 8, and 12).
enum class SmallKernel : std::uint8_t { cholesky, lu_solve, eigh, svd, inv, svd_block, eigh_warp, eigh_tridiagonal };

// One row of the dispatcher's tuning table: tessel's kernel runs when min_n <= max(m, n) <= max_n
// and batch >= min_batch; `measurement` names the run that chose the crossover.
struct SmallKernelTuning {
  SmallKernel kind;
  DType dtype;
  std::int64_t min_n;
  std::int64_t max_n;
  std::int64_t min_batch;
  const char* measurement;
};

// The table's rows of one kind and dtype (empty: no kernel for this dtype), in order of orders.
std::vector<SmallKernelTuning> small_kernel_rows(SmallKernel kind, DType dtype);
// The largest order a kernel takes when TESSEL_LINALG_SMALL forces it: its rows' largest, except
// eigh_tridiagonal's, the largest it is built for (16, above its rows); 0: none for this dtype.
std::int64_t small_kernel_max_n(SmallKernel kind, DType dtype);
// Whether the dispatcher takes tessel's kernel for p (TESSEL_LINALG_SMALL=0 turns them off, for
// timing the cuSOLVER path against them).
bool small_kernel_applies(SmallKernel kind, const LinalgBatch& p);
// Whether eigh (kind eigh) or svd (kind svd) of p takes one of tessel's kernels: the
// one-matrix-per-thread Jacobi kernel where its row applies, else eigh_tridiagonal or eigh_warp
// (eigh) or svd_block (svd) where it applies and, for svd_block, its shared memory
// (block_kernel_bytes) fits `device`.
bool small_jacobi_applies(SmallKernel kind, const LinalgBatch& p, bool vectors, Device device);
// The threads per team of a block kernel (svd_block, eigh_warp) of order n: 32 (a warp; several
// teams per block; eigh_warp's warp holds one or more matrices) or the whole block.
int block_kernel_team(SmallKernel kind, std::int64_t n);
// A block kernel's shared memory per team (the layouts in device/linalg_small.cuh: a matrix, or
// eigh_warp's matrices of one warp), a multiple of 16 bytes.
std::int64_t block_kernel_bytes(SmallKernel kind, DType dtype, std::int64_t m, std::int64_t n, bool vectors);
// The NVRTC request of one specialization (svd, svd_block: m x n with m >= n; others: n x n).
// variant: cholesky's `upper`; lu_solve's row-major input; unused by the others.
jit::CompileRequest small_kernel_request(SmallKernel kind, DType dtype, std::int64_t m, std::int64_t n, bool variant);

// The launches (asynchronous on `stream`), with the contracts of backend/linalg.hpp; pivots are
// int32 (1-based). svd writes the thin factors: u (m x n), vh (n x n); it needs m >= n.
void small_cholesky(const LinalgBatch& p, void* a, bool upper, std::int32_t* info, const Stream& stream);
// small_solve reads a (column-major, or row-major when row_major: then it solves with the matrix
// of that C-order buffer, which is backend solve's `transposed`) and leaves it as it is; it reads
// the right-hand sides b (n x nrhs, column-major) and writes the solution to out (the same
// layout; out may be b). Every info entry is written.
void small_solve(const LinalgBatch& p, const void* a, const void* b, void* out, std::int64_t nrhs, bool row_major,
                 std::int32_t* info, const Stream& stream);
// out (n x n per matrix) = the inverse of a (n x n, read only; out must not alias it), by
// Gauss-Jordan with partial pivoting, one group of lanes of a warp per matrix (n <= 32); info as
// getrf's (the inverse of a singular matrix is inf/NaN). Every info entry is written.
void small_inv(const LinalgBatch& p, const void* a, void* out, std::int32_t* info, const Stream& stream);
// small_eigh and small_svd run the kernel small_jacobi_applies chose (the per-thread Jacobi one
// where it applies, else eigh_tridiagonal or eigh_warp where it applies, else the block one).
// small_eigh's matrices are row-major (the caller's C order, no transposing copy): it reads the
// lower triangle of a and writes the eigenvectors (v: the columns of each row-major n x n; unused
// without `vectors`; v may be a) and the ascending eigenvalues w. Every info entry is written.
void small_eigh(const LinalgBatch& p, const void* a, void* v, void* w, bool vectors, std::int32_t* info,
                const Stream& stream);
void small_svd(const LinalgBatch& p, const void* a, void* s, void* u, void* vh, bool vectors, std::int32_t* info,
               const Stream& stream);

}  // namespace tessel::backend::cuda
