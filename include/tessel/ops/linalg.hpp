#pragma once
// Linear algebra on stacks of matrices (..., M, N): the decompositions and solvers of the Array
// API linalg extension, plus eig/eigvals (general matrices, complex results).
//
// Dtypes: float32, float64, complex64 and complex128 run as they are; integers are promoted to
// float64 as NumPy does; bool, float16 and bfloat16 are a DTypeError naming the op.
// CPU: LAPACK (OpenBLAS's), batched over OpenMP threads. CUDA: cuSOLVER's 64-bit cusolverDnX*
// API per matrix, and its batched routines (potrfBatched, cuBLAS getrf/getrsBatched,
// syevjBatched, gesvdjBatched) for many small matrices; workspaces come from the caching
// allocator and handles from a per-(device, stream) cache.
//
// The matrix results of inv, solve, eigh, eig, svd and qr's Q are views of column-major buffers
// (the layout LAPACK and cuSOLVER write): their last two strides are (1, rows). Every function
// takes the stream last.
//
// Errors without a synchronization: the *_ex functions return LAPACK's `info` per matrix (int32,
// the batch shape, on the input's device) and never read it. The plain functions read it (a
// synchronization on CUDA) and raise LinAlgError naming the first failing matrix.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessel/array/array.hpp"
#include "tessel/core/error.hpp"

namespace tessel::linalg {

// A numerical failure (a singular matrix, one that is not positive definite, no convergence).
// Also a ValueError, as numpy.linalg.LinAlgError is.
class LinAlgError : public ValueError {
 public:
  LinAlgError(const std::string& message, std::int64_t batch_index, std::int32_t info)
      : ValueError(message), batch_index_(batch_index), info_(info) {}
  // The flat (C-order) index of the first failing matrix in the batch, and its info value.
  std::int64_t batch_index() const { return batch_index_; }
  std::int32_t info() const { return info_; }

 private:
  std::int64_t batch_index_;
  std::int32_t info_;
};

// ---- Cholesky: x = L L^H (upper: x = U^H U), x Hermitian positive definite ----
// Reads the lower triangle (upper: the upper one) of x, as LAPACK does.
struct CholeskyExResult {
  Array factor;
  Array info;  // > 0: the order of the leading minor that is not positive definite
};
Array cholesky(const Array& x, bool upper = false, const OptionalStream& stream = std::nullopt);
CholeskyExResult cholesky_ex(const Array& x, bool upper = false, const OptionalStream& stream = std::nullopt);

// ---- LU-based: inv, solve, det, slogdet ----
struct InvExResult {
  Array inverse;
  Array info;  // > 0: U[info-1, info-1] is exactly zero (singular)
};
Array inv(const Array& x, const OptionalStream& stream = std::nullopt);
InvExResult inv_ex(const Array& x, const OptionalStream& stream = std::nullopt);

// x1 (..., M, M) @ result = x2. x2 is a vector (M,) when it is 1-D (broadcast against x1's
// batch; result (..., M)), else (..., M, K) with batch dimensions broadcast against x1's.
struct SolveExResult {
  Array result;
  Array info;  // of the broadcast batch
};
Array solve(const Array& x1, const Array& x2, const OptionalStream& stream = std::nullopt);
SolveExResult solve_ex(const Array& x1, const Array& x2, const OptionalStream& stream = std::nullopt);

// Singular matrices give det 0 and slogdet (0, -inf), as NumPy's.
Array det(const Array& x, const OptionalStream& stream = std::nullopt);
struct SlogdetResult {
  Array sign;       // the input dtype: +-1 or 0 (real), |sign| = 1 or 0 (complex)
  Array logabsdet;  // real
};
SlogdetResult slogdet(const Array& x, const OptionalStream& stream = std::nullopt);

// ---- Hermitian eigenproblems (the lower triangle is read, as NumPy's eigh does) ----
struct EighResult {
  Array eigenvalues;   // real, ascending, (..., M)
  Array eigenvectors;  // (..., M, M), columns
};
struct EighExResult {
  Array eigenvalues;
  Array eigenvectors;
  Array info;  // > 0: no convergence
};
EighResult eigh(const Array& x, const OptionalStream& stream = std::nullopt);
EighExResult eigh_ex(const Array& x, const OptionalStream& stream = std::nullopt);
Array eigvalsh(const Array& x, const OptionalStream& stream = std::nullopt);

// ---- general eigenproblems: complex eigenvalues and unit-norm eigenvectors, any order ----
struct EigResult {
  Array eigenvalues;   // complex, (..., M)
  Array eigenvectors;  // complex, (..., M, M), columns
};
EigResult eig(const Array& x, const OptionalStream& stream = std::nullopt);
Array eigvals(const Array& x, const OptionalStream& stream = std::nullopt);

// ---- QR: x (..., M, N) = Q R; K = min(M, N) ----
enum class QRMode : std::uint8_t { reduced, complete };
// "reduced" or "complete"; ValueError naming `op` otherwise.
QRMode parse_qr_mode(std::string_view mode, const char* op = "qr");
struct QRResult {
  Array Q;  // (..., M, K) reduced, (..., M, M) complete
  Array R;  // (..., K, N) reduced, (..., M, N) complete
};
QRResult qr(const Array& x, std::string_view mode = "reduced", const OptionalStream& stream = std::nullopt);

// ---- SVD: x (..., M, N) = U diag(S) Vh; K = min(M, N); S descending ----
struct SVDResult {
  Array U;   // (..., M, M) full, (..., M, K) otherwise
  Array S;   // real, (..., K)
  Array Vh;  // (..., N, N) full, (..., K, N) otherwise
};
SVDResult svd(const Array& x, bool full_matrices = true, const OptionalStream& stream = std::nullopt);
Array svdvals(const Array& x, const OptionalStream& stream = std::nullopt);

// ---- helpers shared with the Python layer ----
// The dtype the linalg functions compute in for `dtype` (see above); DTypeError naming `op`.
DType compute_dtype(DType dtype, const char* op);

}  // namespace tessel::linalg
