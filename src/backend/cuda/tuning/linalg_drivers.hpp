#pragma once
// The crossovers of the CUDA linear algebra's one-matrix drivers (linalg.cpp): which cuSOLVER /
// cuBLAS call chain one matrix takes, where the batched routes of linalg_routes.hpp do not apply.
// Each constant names the benchmark that set it; bench/peers/cuda_drivers.py runs them all and
// records them under "cuda_drivers" (last: bench/results/nvidia-h100-80gb-hbm3-2026-12-08.json).
#include <cstdint>

namespace tessel::backend::cuda::tuning {

// solve of one matrix: the legacy API (<t>getrf / <t>getrs, int sizes and pivots, which PyTorch
// and CuPy call) wherever a matrix's n * n elements fit an int, the 64-bit X API above. The legacy
// API was 1% faster at n 4096 (bench/peers/getrf_apis.cu; H100, 2026-12-08).
constexpr std::int64_t kSolveLegacyMaxN = 46340;  // 46340^2 < 2^31

// solve of one matrix: after getrf, two cuBLAS triangular solves and one row permutation instead of
// getrs from this order on (to linalg.hpp's kMaxPermutedRows). Faster at every order measured,
// 256 to 8192, by 4-15% (bench/peers/solve_routes.cu; H200, and H100 2026-12-08); below 256 not
// measured.
constexpr std::int64_t kTrsmSolveMinN = 256;

// svd of one tall m x n matrix (m >= n): cusolverDnXgesvdp (polar decomposition) of the matrix
// itself where 2m >= 3n and n >= kPolarMinN, else QR and then gesvdj of R (square matrices:
// gesvdj). gesvdp was 1.3-1.9x faster from 2048 x 256 to 4096 x 1024 and slower at n 128
// (bench/peers/svd_routes.cu; H200, and H100 2026-12-08); it perturbed square Gaussian matrices,
// so square and nearly square ones stay on gesvdj.
constexpr std::int64_t kPolarMinN = 256;

}  // namespace tessel::backend::cuda::tuning
