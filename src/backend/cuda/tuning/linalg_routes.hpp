#pragma once
// The route tables of the CUDA linear algebra: which implementation each batched op takes, by
// dtype, order and batch size. linalg.cpp (the library routes) and linalg_small.cpp (tessel's own
// kernels) read them; nothing else decides a route.
//
// Every row cites the benchmark and the result file whose measurement set it. Rows marked
// "initial" are reasoned from the measurements they name, not yet measured over the grid:
// `python3 bench/peers/linalg_grid.py` sweeps the grid (n 2-512, batches 1 to the memory limit in
// powers of 4, four dtypes, every op, against PyTorch and CuPy) into bench/results/<device>-<date>.json
// (key linalg_grid) and prints a suggested kLibraryRoutes / kSmallKernelRows to paste here.
#include <cstdint>
#include <limits>

#include "backend/linalg_small.hpp"
#include "tessel/array/dtype.hpp"

namespace tessel::backend::cuda::tuning {

// ---- dtype masks of a row ----
constexpr std::uint8_t kF32 = 1, kF64 = 2, kC64 = 4, kC128 = 8;
constexpr std::uint8_t kReal = kF32 | kF64, kAllDtypes = kF32 | kF64 | kC64 | kC128;
constexpr std::uint8_t dtype_bit(DType dtype) {
  return dtype == DType::float32 ? kF32 : dtype == DType::float64 ? kF64 : dtype == DType::complex64 ? kC64
                                      : dtype == DType::complex128 ? kC128 : 0;
}

// A batch size no batch reaches: the row never takes its batched route.
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// ---- library routes (after tessel's kernels, kSmallKernelRows, have declined a batch) ----
// op: the backend function; its batched entry points:
//   cholesky  cusolverDn<t>potrfBatched
//   lu        cublas<t>getrfBatched (lu, det, slogdet)
//   solve     cublas<t>getrfBatched + cublas<t>getrsBatched (solve, inv, matrix_power with n < 0)
//   qr        cublas<t>geqrfBatched + tessel's batched Q kernel (householder_q, linalg.cu)
//   eigh      cusolverDn<t>syevjBatched (n <= 32), cusolverDnXsyevBatched above
//   svd       cusolverDn<t>gesvdjBatched (m, n <= 32; svd, svdvals, lstsq, pinv, matrix_rank)
// The other route is one 64-bit cusolverDnX* call chain per matrix, the batch split over
// config().linalg_streams streams of the stream cache (in_parts in linalg.cpp): for large orders,
// where a batched call is slower than whole-matrix library calls, and for batches below the row's
// crossover. A batch takes the first row of its op and dtype with n <= max_n (n: the larger
// dimension); the batched route from min_batch matrices on.
enum class LinalgOp : std::uint8_t { cholesky, lu, solve, qr, eigh, svd };
struct LibraryRoute {
  LinalgOp op;
  std::uint8_t dtypes;
  std::int64_t max_n;
  std::int64_t min_batch;
  const char* source;
};

// The orders above which a batched entry point does not exist (cuSOLVER's syevjBatched and
// gesvdjBatched take n <= 32; XsyevBatched is taken to 512, the largest order measured).
constexpr std::int64_t kSyevjBatchedMaxN = 32;
constexpr std::int64_t kGesvdjBatchedMaxN = 32;

inline constexpr LibraryRoute kLibraryRoutes[] = {
    // potrfBatched: PyTorch and CuPy call it for every batch and took 0.20-0.46 ms at 4,000 x 33
    // to 100 x 256 where the per-matrix loop took 8.9-45 ms (bench/peers/python_linalg.py, H100;
    // the table); initial above 256.
    {LinalgOp::cholesky, kAllDtypes, 256, 2, "initial: python_linalg.py peers' potrfBatched, n 33-256"},
    {LinalgOp::cholesky, kAllDtypes, 512, 8, "initial: no measurement; Xpotrf per matrix below 8"},
    {LinalgOp::cholesky, kAllDtypes, kNever, kNever, "initial: potrf per matrix on streams above 512"},
    // getrfBatched (+ getrsBatched): CuPy's det, inv and solve at 4,000-8,000 x 33-64 took
    // 0.93-3.95 ms against 210-1,192 ms for the per-matrix loop (python_linalg.py, H100).
    {LinalgOp::lu, kAllDtypes, 128, 2, "initial: python_linalg.py CuPy det 4,000 x 33-64"},
    {LinalgOp::lu, kAllDtypes, 256, 16, "initial: no measurement"},
    {LinalgOp::lu, kAllDtypes, kNever, kNever, "initial: getrf per matrix on streams above 256"},
    {LinalgOp::solve, kAllDtypes, 128, 2, "initial: python_linalg.py CuPy inv/solve 8,000 x 33-64"},
    {LinalgOp::solve, kAllDtypes, 256, 16, "initial: no measurement"},
    {LinalgOp::solve, kAllDtypes, kNever, kNever, "initial: getrf/getrs per matrix on streams above 256"},
    // geqrfBatched + householder_q: the per-matrix geqrf/orgqr loop ran at 0.11-0.76x PyTorch's
    // (python_linalg.py, H100, 20,000 x 16 to 100 x 256).
    {LinalgOp::qr, kAllDtypes, 128, 2, "initial: python_linalg.py qr 20,000 x 16 to 500 x 128"},
    {LinalgOp::qr, kAllDtypes, 512, 16, "initial: no measurement"},
    {LinalgOp::qr, kAllDtypes, kNever, kNever, "initial: geqrf/orgqr per matrix on streams above 512"},
    // syevjBatched to 32, XsyevBatched to 512 (eigh at 1.1-9x the faster peer from n 48 to 256,
    // python_linalg.py, H100).
    {LinalgOp::eigh, kAllDtypes, 512, 2, "initial: python_linalg.py eigh 4,000 x 33 to 100 x 256"},
    {LinalgOp::eigh, kAllDtypes, kNever, kNever, "initial: syevd per matrix on streams above 512"},
    // gesvdjBatched to 32; above, svd_block (kSmallKernelRows) or the per-matrix SVD table.
    {LinalgOp::svd, kAllDtypes, 32, 2, "initial: gesvdjBatched, PyTorch's route to n 32"},
    {LinalgOp::svd, kAllDtypes, kNever, kNever, "initial: the SVD table per matrix on streams above 32"},
};

// ---- tessel's kernels (device/linalg_small.cuh, compiled ahead of time: linalg_small_aot*.cu) ----
// A batch takes tessel's kernel when a row of its kind and dtype has min_n <= n <= max_n and
// batch >= min_batch. The per-thread kernels keep a matrix in registers (max_n bounded by spills);
// the inverse keeps a row per lane (n <= 32). Each `source` names the benchmark and result file.
// The per-thread svd kernel takes square matrices only (the ahead-of-time set, linalg_small_aot.hpp).
inline constexpr SmallKernelTuning kSmallKernelRows[] = {
    {SmallKernel::cholesky, DType::float32, 1, 16, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::cholesky, DType::float64, 1, 16, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::lu_solve, DType::float32, 1, 8, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::lu_solve, DType::float32, 9, 16, 256, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::lu_solve, DType::float64, 1, 8, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::lu_solve, DType::float64, 9, 16, 256, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    // eigh_tridiagonal is checked before eigh: it takes the batches of its rows, eigh the smaller ones.
    {SmallKernel::eigh_tridiagonal, DType::float32, 1, 8, 4096, "linalg_crossover.py, nvidia-h200-2026-12-01.json"},
    {SmallKernel::eigh_tridiagonal, DType::float32, 12, 12, 100000, "linalg_crossover.py, nvidia-h200-2026-12-01.json"},
    {SmallKernel::eigh_tridiagonal, DType::float64, 1, 6, 4096, "linalg_crossover.py, nvidia-h200-2026-12-01.json"},
    {SmallKernel::eigh_tridiagonal, DType::float64, 7, 8, 100000, "linalg_crossover.py, nvidia-h200-2026-12-01.json"},
    {SmallKernel::eigh_tridiagonal, DType::float64, 12, 12, 100000, "linalg_crossover.py, nvidia-h200-2026-12-01.json"},
    {SmallKernel::eigh, DType::float32, 1, 4, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::eigh, DType::float32, 5, 7, 256, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::eigh, DType::float64, 1, 4, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::eigh, DType::float64, 5, 6, 256, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    // The per-thread svd stops at 8: its 9-16 instantiations took up to 28 s to compile
    // (gesvdjBatched takes those orders, PyTorch's route there).
    {SmallKernel::svd, DType::float32, 1, 8, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::svd, DType::float64, 1, 4, 64, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::svd, DType::float64, 5, 8, 256, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::inv, DType::float32, 1, 32, 1, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::inv, DType::float64, 1, 32, 1, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::eigh_warp, DType::float32, 8, 8, 256, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::eigh_warp, DType::float64, 7, 8, 256, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::eigh_warp, DType::float32, 9, 32, 1024, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::eigh_warp, DType::float64, 9, 32, 1024, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-28.json"},
    // svd_block: max_n 128 in float32, 112 in float64 (the matrix and V in the H100's 227 KB of
    // shared memory per block).
    {SmallKernel::svd_block, DType::float32, 17, 32, 20000, "linalg_crossover.py (block rows), nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::svd_block, DType::float32, 33, 128, 32, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-27.json"},
    {SmallKernel::svd_block, DType::float64, 17, 24, 1024, "linalg_crossover.py (block rows), nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::svd_block, DType::float64, 25, 32, 20000, "linalg_crossover.py (block rows), nvidia-h100-80gb-hbm3-2026-11-28.json"},
    {SmallKernel::svd_block, DType::float64, 33, 112, 32, "linalg_crossover.py, nvidia-h100-80gb-hbm3-2026-11-27.json"},
};

// The smallest part of a batched library call split over streams (an unmeasured guess), and of a
// per-matrix route's batch (one matrix: each part is a whole library call chain per matrix).
constexpr std::int64_t kMinPartBatch = 64;
constexpr std::int64_t kMinPartPerMatrix = 1;

}  // namespace tessel::backend::cuda::tuning
