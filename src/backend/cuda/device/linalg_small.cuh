#pragma once
// tessel's batched small-matrix kernels, compiled at run time by NVRTC and specialized on the
// matrix order (src/backend/cuda/linalg_small.cpp builds the requests; the dispatcher in
// linalg.cpp chooses them over cuSOLVER by its tuning table). One matrix per thread, held in
// registers (except gauss_jordan_inv: a group of lanes per matrix, a row per lane; and the team
// kernels at the end: jacobi_svd_block, a warp or a block per matrix in shared memory, and
// jacobi_eigh_warp, a group of lanes per matrix, a column per lane; their host build in
// tests/cpp/ops/linalg_small_host_test.cpp defines TESSEL_SMALL_HOST_TEAMS and emulates the
// barriers, shuffles and votes): every loop over matrix indices has compile-time bounds and is
// unrolled, so indices are constants and the arrays stay in registers (row swaps and sorts use
// selects, not dynamic indexing). Matrices are column-major, one after another (the layout of
// backend/linalg.hpp), except the eigh kernels': row-major, the caller's C order.
// Real float and double only; complex batches go to cuSOLVER.
//
// Iterative kernels (Jacobi eigh and SVD, tridiagonal QR eigh) stop after max_sweeps sweeps or
// max_iterations QR steps; NaN or Inf input never iterates: its results are NaN and its info 0,
// as the CPU backend's.
//
// One header per algorithm family; this one includes them all (NVRTC requests and the
// ahead-of-time files include it) and then undefines the helper macros.
#include "linalg_small_common.cuh"
#include "linalg_small_cholesky.cuh"
#include "linalg_small_lu.cuh"
#include "linalg_small_inv.cuh"
#include "linalg_small_eigh.cuh"
#include "linalg_small_tridiagonal.cuh"
#include "linalg_small_svd.cuh"
#include "linalg_small_team.cuh"

#undef TESSEL_FOR_EACH_MATRIX

#undef TESSEL_SMALL
#undef TESSEL_UNROLL
