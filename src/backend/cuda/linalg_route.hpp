#pragma once
// The route choices of the CUDA linear algebra's library paths (linalg.cpp), read from the tables
// of tuning/linalg_routes.hpp and tuning/linalg_drivers.hpp; TESSEL_LINALG_ROUTE and
// TESSEL_LINALG_SVD force a route for the benchmarks. tessel's own small-matrix kernels are chosen
// in linalg_small.cpp.
#include <cstdint>

#include "backend/cuda/tuning/linalg_routes.hpp"
#include "backend/linalg.hpp"

namespace tessel::backend::cuda {

using tuning::LinalgOp;

// Whether the batch takes op's batched entry point (else one call chain per matrix, on streams),
// by kLibraryRoutes, or as TESSEL_LINALG_ROUTE forces: unset or "auto", the table; "batched", the
// batched entry point wherever one exists; "matrix", one library call chain per matrix (on
// streams) everywhere: for bench/peers/linalg_grid.py, which times both to suggest the table's
// crossovers.
bool batched_route(LinalgOp op, const LinalgBatch& p);

// ---- solve of one matrix at a time: which cuSOLVER API ----
// The legacy API where a matrix's elements fit an int, the 64-bit X API above; then the triangular
// solves instead of getrs (tuning/linalg_drivers.hpp).
bool solve_legacy_api(std::int64_t n);
bool solve_by_triangular_solves(std::int64_t n);


// ---- SVD table: the route of one large m x n matrix (m >= n; wide ones come transposed) ----
// Taken where neither tessel's kernels nor gesvdjBatched apply.
//  - gesvdp: cusolverDnXgesvdp (a polar decomposition, then syevd of its Hermitian factor) of a
//    itself, U thin: for tall matrices, 2m >= 3n and n >= kPolarMinN. Near a zero singular value
//    it perturbs the matrix and reports by how much (h_err_sigma), and the singular values move by
//    that much, so such a matrix (and any call that fails) is solved again from a saved copy on
//    the gesvdj route.
//  - gesvdj: cusolverDn<t>gesvdj (Jacobi) of a square matrix, after a QR of a tall one (geqrf,
//    then the SVD of the n x n R, U = Q U_r through orgqr/ungqr and one gemm; values only: no Q).
//  - gesvd: cusolverDnXgesvd (bidiagonalization, QR iteration): the full U of a tall matrix (an
//    m x m U that neither R's SVD nor gesvdp's thin U gives).
// The crossover (kPolarMinN) and its measurements: tuning/linalg_drivers.hpp.
// TESSEL_LINALG_SVD=gesvdp | gesvdj | gesvd | qr+gesvd forces a driver (gesvdp and gesvdj leave the
// full U of a tall matrix to gesvd), to compare and to test; auto is this table.
enum class SvdDriver { gesvd, gesvdj, gesvdp };
struct SvdRoute {
  bool qr_first;
  SvdDriver driver;
};
SvdRoute svd_route(const LinalgBatch& p, bool vectors, bool full);

}  // namespace tessel::backend::cuda
