// CUDA linear algebra: tessel's own batched small-matrix kernels (linalg_small.cpp) where their
// rows of tuning/linalg_routes.hpp pick them, else the libraries' batched entry points
// (cusolverDn<t>potrfBatched, cuBLAS <t>getrfBatched / <t>getrsBatched / <t>geqrfBatched with
// tessel's batched Q, cusolverDn<t>syevjBatched, cusolverDnXsyevBatched, cusolverDn<t>gesvdjBatched)
// or cuSOLVER's 64-bit cusolverDnX* API one matrix per call with the batch split over streams,
// as that file's kLibraryRoutes says. One large matrix: Cholesky always runs potrf LOWER (the fast one) and
// SVD picks its driver from the SVD table (linalg_route.hpp: QR first for tall matrices, then Jacobi).
// Device workspaces come from the caching allocator (stream-ordered frees); handles come from a
// per-(device, stream) cache (linalg_handles.hpp), so a call never rebinds a handle another stream
// is using. A batched call may be split over the caller's stream and side streams
// (TESSEL_LINALG_STREAMS, in_parts), joined back with events. Nothing here synchronizes:
// info values stay on the device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdlib>
#include <string>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/linalg_cusolver.hpp"
#include "backend/cuda/linalg_handles.hpp"
#include "backend/cuda/linalg_route.hpp"
#include "backend/cuda/tuning/linalg_routes.hpp"
#include "backend/linalg.hpp"
#include "backend/linalg_small.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/cublas_check.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/buffer.hpp"

namespace tessel::backend::cuda {
namespace {

// Jacobi sweeps are capped, so NaN/Inf input ends with info > 0 or NaN results, never a hang.
constexpr int kJacobiMaxSweeps = 100;

// A gesvdjInfo_t with tessel's sweep cap and a tolerance of the dtype's epsilon (cuSOLVER's
// default, stated here): converged sweeps stop early, NaN/Inf input stops at the cap with info > 0.
struct GesvdjParams {
  gesvdjInfo_t params = nullptr;
  GesvdjParams(DType dtype, const char* op) {
    TESSEL_CUSOLVER_CHECK(cusolverDnCreateGesvdjInfo(&params), op);
    const double tol = to_real(dtype) == DType::float32 ? static_cast<double>(FLT_EPSILON) : DBL_EPSILON;
    try {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdjSetMaxSweeps(params, kJacobiMaxSweeps), op);
      TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdjSetTolerance(params, tol), op);
    } catch (...) {
      cusolverDnDestroyGesvdjInfo(params);
      throw;
    }
  }
  ~GesvdjParams() { (void)cusolverDnDestroyGesvdjInfo(params); }
  GesvdjParams(const GesvdjParams&) = delete;
  GesvdjParams& operator=(const GesvdjParams&) = delete;
};

// cuSOLVER's Jacobi iterations take a NaN or Inf for converged (every comparison with NaN is
// false) and return finite results for such a matrix (syevjBatched at n = 17 on the H100). The
// library paths of eigh and svd flag those matrices before the call overwrites the input, and
// after it make their results NaN and their info 1 (the plain functions raise LinAlgError).
class NonfiniteInput {
 public:
  NonfiniteInput(const LinalgBatch& p, const void* a, const Stream& stream) : batch_(p.batch), stream_(stream) {
    DeviceGuard guard(stream.device());
    flags_ = Buffer::allocate(stream.device(), std::max<std::int64_t>(p.batch, 1) * 4, stream);
    flag_nonfinite(p.dtype, a, p.m * p.n, p.batch, flags(), detail::cuda_stream(stream));
  }
  // out: `per` elements of dtype per matrix; info (or null) set to 1 where it is 0.
  void poison(DType dtype, void* out, std::int64_t per, std::int32_t* info) const {
    DeviceGuard guard(stream_.device());
    poison_flagged(dtype, flags(), per, batch_, out, info, detail::cuda_stream(stream_));
  }

 private:
  std::int32_t* flags() const { return static_cast<std::int32_t*>(flags_->data()); }
  std::int64_t batch_;
  Stream stream_;
  std::shared_ptr<Buffer> flags_;
};

}  // namespace

// ---- Cholesky ----
void cholesky(const LinalgBatch& p, void* a, bool upper, std::int32_t* info, const Stream& stream) {
  const char* op = "cholesky";
  if (small_kernel_applies(SmallKernel::cholesky, p)) return small_cholesky(p, a, upper, info, stream);
  Call c(stream, op);
  const cublasFillMode_t uplo = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  if (batched_route(LinalgOp::cholesky, p)) {  // either triangle (cuSOLVER documents both fill modes)
    const int n = to_int(p.n, op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto ptrs = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
        TESSEL_CUSOLVER_CHECK(potrf_batched<T>(c.h.solver, uplo, n, static_cast<T**>(ptrs->data()), n, info + first,
                                               static_cast<int>(count)),
                              op);
      });
    });
    return;
  }
  // One matrix at a time, the batch split over streams: cuSOLVER's potrf is much faster with
  // CUBLAS_FILL_MODE_LOWER (PyTorch factors LOWER), so an UPPER request factors the conjugate
  // transpose instead:
  //   C = A^H (geam). C's lower triangle is the conjugate transpose of A's upper one, so it
  //   defines the same Hermitian H that UPPER would read; potrf LOWER gives H = Lc Lc^H, and
  //   U = Lc^H is the upper factor (H = U^H U). A = C^H (geam) puts U in A's upper triangle and
  //   gives back A's strict lower triangle exactly as it was (it is C's untouched upper one).
  const cudaDataType t = data_type(p.dtype);
  const cublasFillMode_t lower = CUBLAS_FILL_MODE_LOWER;
  const int n = upper ? to_int(p.n, op) : 0;
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXpotrf_bufferSize(part.h.solver, part.h.params, lower, p.n, t, a, p.n, t, &dev_bytes,
                                                      &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    auto adjoint = upper ? part.device_buffer(bytes) : nullptr;
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      void* ab = at(a, b, bytes);
      void* factored = upper ? adjoint->data() : ab;
      if (upper) {
        by_dtype(p.dtype, op, [&](auto tag) {
          using T = decltype(tag);
          TESSEL_CUBLAS_CHECK(adjoint_geam<T>(part.h.blas, n, n, static_cast<const T*>(ab), n, static_cast<T*>(factored), n),
                              op);
        });
      }
      TESSEL_CUSOLVER_CHECK(cusolverDnXpotrf(part.h.solver, part.h.params, lower, p.n, t, factored, p.n, t, work->data(),
                                             dev_bytes, hw, host_bytes, info + b),
                            op);
      if (upper) {
        by_dtype(p.dtype, op, [&](auto tag) {
          using T = decltype(tag);
          TESSEL_CUBLAS_CHECK(adjoint_geam<T>(part.h.blas, n, n, static_cast<const T*>(factored), n, static_cast<T*>(ab), n),
                              op);
        });
      }
    }
  });
}

// ---- LU ----
namespace {
// getrfBatched over the whole batch: int32 pivots (batch, n), 1-based.
void getrf_batched_all(Call& c, const LinalgBatch& p, void* a, int* piv, std::int32_t* info, const char* op) {
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  const int n = to_int(p.n, op);
  by_dtype(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
      auto ptrs = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
      TESSEL_CUBLAS_CHECK(getrf_batched<T>(c.h.blas, n, static_cast<T**>(ptrs->data()), n, piv + first * p.n,
                                           info + first, static_cast<int>(count)),
                          op);
    });
  });
}
}  // namespace

void lu(const LinalgBatch& p, void* a, Array& pivots, std::int32_t* info, const Stream& stream) {
  const char* op = "lu";
  Call c(stream, op);
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  if (batched_route(LinalgOp::lu, p)) {
    pivots = empty({p.batch, p.n}, DType::int32, stream.device(), stream);
    getrf_batched_all(c, p, a, static_cast<int*>(pivots.data()), info, op);
    return;
  }
  pivots = empty({p.batch, p.n}, DType::int64, stream.device(), stream);
  auto* piv = static_cast<std::int64_t*>(pivots.data());
  const cudaDataType t = data_type(p.dtype);
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf_bufferSize(part.h.solver, part.h.params, p.n, p.n, t, a, p.n, t, &dev_bytes,
                                                      &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf(part.h.solver, part.h.params, p.n, p.n, t, at(a, b, bytes), p.n,
                                             piv + b * p.n, t, work->data(), dev_bytes, hw, host_bytes, info + b),
                            op);
    }
  });
}

// ---- solve: LU, then the triangular solves ----
void solve(const LinalgBatch& p, void* a, void* b_data, std::int64_t nrhs, bool transposed, std::int32_t* info,
           const Stream& stream) {
  const char* op = "solve";
  // tessel's kernel takes either layout and leaves a as it is (ops/linalg.cpp passes it x1's own
  // C-order buffer, `transposed`, when the kernel applies).
  if (small_kernel_applies(SmallKernel::lu_solve, p)) return small_solve(p, a, b_data, b_data, nrhs, transposed, info, stream);
  if (transposed && p.n <= kTransposedSolveMinN) throw Error("solve: internal error: a transposed solve of small matrices");
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  const std::size_t b_bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * nrhs);
  const cublasOperation_t trans = transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  Call c(stream, op);
  if (batched_route(LinalgOp::solve, p)) {
    // getrfBatched, then getrsBatched (a transposed solve: a holds A^T = P L U, op T solves A x = b).
    auto pivots = c.device_buffer(static_cast<std::size_t>(p.batch * p.n) * sizeof(int));
    auto* piv = static_cast<int*>(pivots->data());
    getrf_batched_all(c, p, a, piv, info, op);
    const int n = to_int(p.n, op), k = to_int(nrhs, op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto ap = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
        auto bp = c.pointers(at(b_data, first, b_bytes), static_cast<std::int64_t>(b_bytes), count);
        int arg_info = 0;  // host: argument validity only
        TESSEL_CUBLAS_CHECK(getrs_batched<T>(c.h.blas, trans, n, k, static_cast<T**>(ap->data()), n, piv + first * p.n,
                                             static_cast<T**>(bp->data()), n, &arg_info, static_cast<int>(count)),
                            op);
        if (arg_info != 0) throw Error(fmt::format("solve: internal error: getrsBatched rejected argument {}", -arg_info));
      });
    });
    // pivots is released here; its buffer is reused only after this stream's work (stream-ordered free).
    return;
  }
  const int parts = batch_parts(c, p.batch, tuning::kMinPartPerMatrix);
  if (solve_legacy_api(p.n)) {
    const int n = to_int(p.n, op), k = to_int(nrhs, op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_parts(c, parts, p.batch, op, [&](Call& part, std::int64_t first, std::int64_t count) {
        int lwork = 0;
        TESSEL_CUSOLVER_CHECK(getrf_size<T>(part.h.solver, n, static_cast<T*>(a), &lwork), op);
        auto work = part.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
        auto piv = part.device_buffer(static_cast<std::size_t>(p.n) * sizeof(int));
        auto solve_info = part.device_buffer(sizeof(int));  // getrs's: argument checks only
        // The triangular route (transposed: a holds A^T = P L U, so A x = b is x = P L^-T U^-T b):
        // the solves run on a copy z of b, and the permutation writes x back into b.
        const bool triangular = transposed && solve_by_triangular_solves(p.n);
        auto z = part.device_buffer(triangular ? b_bytes : 0);
        auto rows = part.device_buffer(triangular ? static_cast<std::size_t>(p.n) * sizeof(int) : 0);
        for (std::int64_t b = first; b < first + count; ++b) {
          T* ab = reinterpret_cast<T*>(at(a, b, bytes));
          TESSEL_CUSOLVER_CHECK(getrf<T>(part.h.solver, n, ab, static_cast<T*>(work->data()),
                                         static_cast<int*>(piv->data()), info + b),
                                op);
          if (triangular) {
            void* bb = at(b_data, b, b_bytes);
            T* zb = static_cast<T*>(z->data());
            TESSEL_CUDA_CHECK(cudaMemcpyAsync(zb, bb, b_bytes, cudaMemcpyDeviceToDevice, part.s), op);
            TESSEL_CUBLAS_CHECK(trsm_left_transposed<T>(part.h.blas, true, n, k, ab, zb), op);
            TESSEL_CUBLAS_CHECK(trsm_left_transposed<T>(part.h.blas, false, n, k, ab, zb), op);
            permute_rows_by_pivots(p.dtype, static_cast<const std::int32_t*>(piv->data()), p.n, zb, nrhs, bb,
                                   static_cast<std::int32_t*>(rows->data()), part.s);
            continue;
          }
          TESSEL_CUSOLVER_CHECK(getrs<T>(part.h.solver, trans, n, k, ab, static_cast<const int*>(piv->data()),
                                         reinterpret_cast<T*>(at(b_data, b, b_bytes)),
                                         static_cast<int*>(solve_info->data())),
                                op);
        }
      });
    });
    return;
  }
  const cudaDataType t = data_type(p.dtype);
  in_parts(c, parts, p.batch, op, [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf_bufferSize(part.h.solver, part.h.params, p.n, p.n, t, a, p.n, t, &dev_bytes,
                                                      &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    auto piv = part.device_buffer(static_cast<std::size_t>(p.n) * sizeof(std::int64_t));
    auto solve_info = part.device_buffer(sizeof(int));  // getrs's: argument checks only
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgetrf(part.h.solver, part.h.params, p.n, p.n, t, at(a, b, bytes), p.n,
                                             static_cast<std::int64_t*>(piv->data()), t, work->data(), dev_bytes, hw,
                                             host_bytes, info + b),
                            op);
      TESSEL_CUSOLVER_CHECK(cusolverDnXgetrs(part.h.solver, part.h.params, trans, p.n, nrhs, t, at(a, b, bytes), p.n,
                                             static_cast<const std::int64_t*>(piv->data()), t, at(b_data, b, b_bytes),
                                             p.n, static_cast<int*>(solve_info->data())),
                            op);
    }
  });
}

// ---- inv ----
// tessel's Gauss-Jordan kernel where its rows apply (linalg_small.cpp): it reads x itself when x
// is contiguous (else one plain copy) and writes the inverse elsewhere, with no identity to solve
// against. inv(x^T) = inv(x)^T: x's row-major buffer, read column-major, is x^T, whose column-major
// inverse is inv(x) row-major, the result's layout. Else LU and the solve against the identity.
InvArrays inv(const LinalgBatch& p, const Array& x, const Stream& stream) {
  if (small_kernel_applies(SmallKernel::inv, p)) {
    const Array in = x.contiguous(stream);
    Array inverse = empty(x.shape(), p.dtype, x.device(), stream);
    Array info = empty(Shape(x.shape().begin(), x.shape().end() - 2), DType::int32, x.device(), stream);  // all written
    wait_for_writes(stream, {&in, &inverse, &info});
    small_inv(p, in.data(), inverse.data(), static_cast<std::int32_t*>(info.data()), stream);
    mark_written(stream, {&inverse, &info});
    return {inverse, info};
  }
  return inv_by_solve(p, x, stream, solve);
}

// ---- solve_systems ----
// tessel's LU kernel where its rows apply (linalg_small.cpp): it reads a row-major (a itself when
// contiguous, else one plain copy, no strided transpose) and b column-major (b itself when that
// is its layout: single columns (..., n, 1) in C order) and writes the solutions elsewhere. Else
// LU and the solve in place on column-major copies.
SolveArrays solve_systems(const LinalgBatch& p, const Array& a, const Array& b, const Stream& stream) {
  if (small_kernel_applies(SmallKernel::lu_solve, p)) {
    const Array in = a.contiguous(stream);
    const Array rhs = b.swapaxes(-1, -2).contiguous(stream);
    Array out = empty(rhs.shape(), p.dtype, a.device(), stream);
    Array info = empty(Shape(a.shape().begin(), a.shape().end() - 2), DType::int32, a.device(), stream);  // all written
    wait_for_writes(stream, {&in, &rhs, &out, &info});
    small_solve(p, in.data(), rhs.data(), out.data(), b.dim(-1), /*row_major=*/true,
                static_cast<std::int32_t*>(info.data()), stream);
    mark_written(stream, {&out, &info});
    return {out.swapaxes(-1, -2), info};
  }
  return solve_by_lu(p, a, b, stream, solve);
}

// ---- eigh ----
namespace {
void eigh_library(const LinalgBatch& p, void* a, void* w, bool vectors, std::int32_t* info, const Stream& stream) {
  const char* op = "eigh";
  Call c(stream, op);
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const std::size_t bytes = elem(p.dtype) * static_cast<std::size_t>(p.n * p.n);
  const std::size_t w_bytes = elem(to_real(p.dtype)) * static_cast<std::size_t>(p.n);
  const bool batched = batched_route(LinalgOp::eigh, p);
  if (batched && p.n <= tuning::kSyevjBatchedMaxN) {
    const int n = to_int(p.n, op);
    syevjInfo_t params = nullptr;
    TESSEL_CUSOLVER_CHECK(cusolverDnCreateSyevjInfo(&params), op);
    std::unique_ptr<std::remove_pointer_t<syevjInfo_t>, void (*)(syevjInfo_t)> guard(
        params, [](syevjInfo_t q) { cusolverDnDestroySyevjInfo(q); });
    TESSEL_CUSOLVER_CHECK(cusolverDnXsyevjSetMaxSweeps(params, kJacobiMaxSweeps), op);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        T* ab = reinterpret_cast<T*>(at(a, first, bytes));
        auto* wb = reinterpret_cast<Real<T>*>(at(w, first, w_bytes));
        int lwork = 0;
        TESSEL_CUSOLVER_CHECK(syevj_batched_size<T>(c.h.solver, jobz, n, ab, wb, &lwork, params, static_cast<int>(count)), op);
        auto work = c.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
        TESSEL_CUSOLVER_CHECK(syevj_batched<T>(c.h.solver, jobz, n, ab, wb, static_cast<T*>(work->data()), lwork,
                                               info + first, params, static_cast<int>(count)),
                              op);
      });
    });
    return;
  }
  const cudaDataType t = data_type(p.dtype), rt = real_type(p.dtype);
  if (batched) {
    // One call per part, each on its own stream and handle set (in_parts): XsyevBatched launches
    // many small kernels, and parts on several streams may overlap them and their tails.
    in_parts(c, batch_parts(c, p.batch), p.batch, op, [&](Call& part, std::int64_t first, std::int64_t count) {
      void* ap = at(a, first, bytes);
      void* wp = at(w, first, w_bytes);
      std::size_t part_bytes = 0, part_host_bytes = 0;
      TESSEL_CUSOLVER_CHECK(cusolverDnXsyevBatched_bufferSize(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER,
                                                              p.n, t, ap, p.n, rt, wp, t, &part_bytes, &part_host_bytes,
                                                              count),
                            op);
      auto work = part.device_buffer(part_bytes);
      HostWork host;
      TESSEL_CUSOLVER_CHECK(cusolverDnXsyevBatched(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER, p.n, t, ap,
                                                   p.n, rt, wp, t, work->data(), part_bytes, host.get(part_host_bytes),
                                                   part_host_bytes, info + first, count),
                            op);
    });
    return;
  }
  // One syevd per matrix, the batch split over streams.
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXsyevd_bufferSize(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER, p.n, t, a,
                                                      p.n, rt, w, t, &dev_bytes, &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    HostWork host;
    void* hw = host.get(host_bytes);
    for (std::int64_t b = first; b < first + count; ++b) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXsyevd(part.h.solver, part.h.params, jobz, CUBLAS_FILL_MODE_LOWER, p.n, t,
                                             at(a, b, bytes), p.n, rt, at(w, b, w_bytes), t, work->data(), dev_bytes, hw,
                                             host_bytes, info + b),
                            op);
    }
  });
}

}  // namespace

// The route: tessel's small kernels where their rows apply (small_jacobi_applies, linalg_small.cpp):
// they read x itself when it is contiguous (else one plain copy, no strided transpose) and write
// row-major eigenvectors elsewhere; at 100,000 matrices of 8 x 8 the transposing copies in and out
// moved twice the kernel's bytes. Else cuSOLVER, in place on a column-major copy of x.
EighArrays eigh(const LinalgBatch& p, const Array& x, bool vectors, const Stream& stream) {
  const Shape batch_shape(x.shape().begin(), x.shape().end() - 2);
  Shape w_shape = batch_shape;
  w_shape.push_back(p.n);
  Array w = empty(w_shape, to_real(p.dtype), x.device(), stream);
  if (small_jacobi_applies(SmallKernel::eigh, p, vectors, stream.device())) {
    const Array in = x.contiguous(stream);
    Array v = vectors ? empty(x.shape(), p.dtype, x.device(), stream) : Array();
    Array info = empty(batch_shape, DType::int32, x.device(), stream);  // the kernel writes every entry
    wait_for_writes(stream, {&in, &v, &w, &info});
    small_eigh(p, in.data(), vectors ? v.data() : nullptr, w.data(), vectors, static_cast<std::int32_t*>(info.data()),
               stream);
    mark_written(stream, {&v, &w, &info});
    return {w, v, info};
  }
  Array work = x.swapaxes(-1, -2).copy(stream);  // column-major
  Array info = zeros(batch_shape, DType::int32, x.device(), stream);
  wait_for_writes(stream, {&work, &w, &info});
  void* a = work.data();
  auto* info_data = static_cast<std::int32_t*>(info.data());
  const NonfiniteInput nonfinite(p, a, stream);
  eigh_library(p, a, w.data(), vectors, info_data, stream);
  nonfinite.poison(to_real(p.dtype), w.data(), p.n, info_data);
  if (vectors) nonfinite.poison(p.dtype, a, p.n * p.n, nullptr);
  mark_written(stream, {&work, &w, &info});
  return {w, vectors ? work.swapaxes(-1, -2) : Array(), info};
}

// ---- SVD (ops/linalg.cpp passes m >= n on CUDA) ----
namespace {
// The per-matrix path, on the route of the SVD table: a (m x n, m >= n) destroyed; s; when
// `vectors`: u (m x ucols, ucols = m when `full`, else n) and vh (n x n).
template <class T>
void svd_one_by_one(Call& c, const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full,
                    const SvdRoute& route, std::int32_t* info, const char* op) {
  const std::int64_t m = p.m, n = p.n;
  if (route.driver == SvdDriver::gesvdp) throw Error("svd: internal error: the gesvdp route is svd_by_polar's");
  const bool qr = route.qr_first;  // svd_route leaves the full U of a tall matrix to the direct route
  if (qr && vectors && full && m > n) throw Error("svd: internal error: QR first for the full U of a tall matrix");
  const std::int64_t ucols = full ? m : n;
  const std::size_t es = sizeof(T);
  const std::size_t a_bytes = es * static_cast<std::size_t>(m * n), s_bytes = sizeof(Real<T>) * static_cast<std::size_t>(n);
  const std::size_t u_bytes = es * static_cast<std::size_t>(m * ucols), vh_bytes = es * static_cast<std::size_t>(n * n);
  const cudaDataType t = data_type(p.dtype), rt = real_type(p.dtype);
  // The driver factors R (n x n) after geqrf, or a itself: dm rows, leading dimension dm.
  const std::int64_t dm = qr ? n : m;
  const bool full_u = full && !qr && m > n;  // the driver writes the square U of a tall matrix
  const int im = to_int(m, op), in = to_int(n, op), idm = to_int(dm, op);

  std::shared_ptr<Buffer> tau, r, ur, qr_info, geqrf_work, orgqr_work;
  std::size_t geqrf_bytes = 0, geqrf_host_bytes = 0;
  HostWork geqrf_host;
  int orgqr_lwork = 0;
  if (qr) {
    tau = c.device_buffer(es * static_cast<std::size_t>(n));
    r = c.device_buffer(es * static_cast<std::size_t>(n * n));
    qr_info = c.device_buffer(sizeof(int));  // geqrf's and orgqr's: argument checks only
    TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf_bufferSize(c.h.solver, c.h.params, m, n, t, a, m, t, tau->data(), t,
                                                      &geqrf_bytes, &geqrf_host_bytes),
                          op);
    geqrf_work = c.device_buffer(geqrf_bytes);
    if (vectors) {
      ur = c.device_buffer(es * static_cast<std::size_t>(n * n));
      TESSEL_CUSOLVER_CHECK(orgqr_size<T>(c.h.solver, im, in, in, static_cast<T*>(a), static_cast<T*>(tau->data()),
                                          &orgqr_lwork),
                            op);
      orgqr_work = c.device_buffer(static_cast<std::size_t>(orgqr_lwork) * es);
    }
  }
  void* first_u = vectors ? (qr ? ur->data() : u) : nullptr;  // the driver's U, leading dimension dm
  void* hgw = geqrf_host.get(geqrf_host_bytes);

  // The driver's workspace.
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const int econ = full_u ? 0 : 1;
  std::unique_ptr<GesvdjParams> jparams;
  std::shared_ptr<Buffer> v, work;  // gesvdj's V (n x n), then conjugate-transposed into vh
  int lwork = 0;
  const signed char job = !vectors ? 'N' : (full_u ? 'A' : 'S');
  const std::int64_t ldvt = vectors ? n : 1;
  std::size_t dev_bytes = 0, host_bytes = 0;
  HostWork host;
  void* first_a = qr ? r->data() : a;
  if (route.driver == SvdDriver::gesvdj) {
    jparams = std::make_unique<GesvdjParams>(p.dtype, op);
    if (vectors) v = c.device_buffer(es * static_cast<std::size_t>(n * n));
    TESSEL_CUSOLVER_CHECK(gesvdj_size<T>(c.h.solver, jobz, econ, idm, in, static_cast<const T*>(first_a), idm,
                                         static_cast<const Real<T>*>(s), static_cast<const T*>(first_u), idm,
                                         vectors ? static_cast<const T*>(v->data()) : nullptr, in, &lwork,
                                         jparams->params),
                          op);
    work = c.device_buffer(static_cast<std::size_t>(lwork) * es);
  } else {
    TESSEL_CUSOLVER_CHECK(cusolverDnXgesvd_bufferSize(c.h.solver, c.h.params, job, job, dm, n, t, first_a, dm, rt, s, t,
                                                      first_u, dm, t, vh, ldvt, t, &dev_bytes, &host_bytes),
                          op);
    work = c.device_buffer(dev_bytes);
  }
  void* hw = host.get(host_bytes);

  for (std::int64_t b = 0; b < p.batch; ++b) {
    T* ab = reinterpret_cast<T*>(at(a, b, a_bytes));
    auto* sb = reinterpret_cast<Real<T>*>(at(s, b, s_bytes));
    T* ub = vectors ? reinterpret_cast<T*>(at(u, b, u_bytes)) : nullptr;
    T* vhb = vectors ? reinterpret_cast<T*>(at(vh, b, vh_bytes)) : nullptr;
    T* da = ab;  // what the driver factors
    T* dub = ub;
    if (qr) {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf(c.h.solver, c.h.params, m, n, t, ab, m, t, tau->data(), t,
                                             geqrf_work->data(), geqrf_bytes, hgw, geqrf_host_bytes,
                                             static_cast<int*>(qr_info->data())),
                            op);
      copy_upper_triangle(p.dtype, ab, m, r->data(), n, c.s);
      da = static_cast<T*>(r->data());
      dub = vectors ? static_cast<T*>(ur->data()) : nullptr;
    }
    if (route.driver == SvdDriver::gesvdj) {
      TESSEL_CUSOLVER_CHECK(gesvdj<T>(c.h.solver, jobz, econ, idm, in, da, idm, sb, dub, idm,
                                      vectors ? static_cast<T*>(v->data()) : nullptr, in, static_cast<T*>(work->data()),
                                      lwork, info + b, jparams->params),
                            op);
      if (vectors) adjoint_batch(p.dtype, v->data(), n, vhb, n, n, 1, c.s);
    } else {
      TESSEL_CUSOLVER_CHECK(cusolverDnXgesvd(c.h.solver, c.h.params, job, job, dm, n, t, da, dm, rt, sb, t, dub, dm, t,
                                             vhb, ldvt, t, work->data(), dev_bytes, hw, host_bytes, info + b),
                            op);
    }
    if (qr && vectors) {  // U = Q U_r: Q (m x n) formed in place of the Householder vectors
      TESSEL_CUSOLVER_CHECK(orgqr<T>(c.h.solver, im, in, in, ab, static_cast<const T*>(tau->data()),
                                     static_cast<T*>(orgqr_work->data()), orgqr_lwork,
                                     static_cast<int*>(qr_info->data())),
                            op);
      TESSEL_CUBLAS_CHECK(gemm_nn<T>(c.h.blas, im, in, in, ab, im, static_cast<const T*>(ur->data()), in, ub, im), op);
    }
  }
}
// The gesvdp route (the SVD table): the thin U. Each matrix is copied first; one that gesvdp
// perturbed (h_err_sigma above the dtype's epsilon times its largest singular value) or failed on
// is restored from the copy and solved again on the gesvdj route. gesvdp returns h_err_sigma to
// the host, so each call waits for its matrix.
template <class T>
void svd_by_polar(Call& c, const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, std::int32_t* info,
                  const char* op) {
  const std::int64_t m = p.m, n = p.n;
  const std::size_t es = sizeof(T);
  const std::size_t a_bytes = es * static_cast<std::size_t>(m * n), s_bytes = sizeof(Real<T>) * static_cast<std::size_t>(n);
  const std::size_t u_bytes = a_bytes, vh_bytes = es * static_cast<std::size_t>(n * n);
  const cudaDataType t = data_type(p.dtype), rt = real_type(p.dtype);
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  // Without vectors U and V are still given (m x n and n x n scratch): the documentation does not
  // say gesvdp leaves them unreferenced.
  auto scratch_u = vectors ? nullptr : c.device_buffer(u_bytes);
  auto v = c.device_buffer(vh_bytes);
  auto saved = c.device_buffer(a_bytes);
  std::size_t dev_bytes = 0, host_bytes = 0;
  void* first_u = vectors ? u : scratch_u->data();
  TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdp_bufferSize(c.h.solver, c.h.params, jobz, 1, m, n, t, a, m, rt, s, t, first_u, m,
                                                     t, v->data(), n, t, &dev_bytes, &host_bytes),
                        op);
  auto work = c.device_buffer(dev_bytes);
  HostWork host;
  void* hw = host.get(host_bytes);
  const double eps = to_real(p.dtype) == DType::float32 ? static_cast<double>(FLT_EPSILON) : DBL_EPSILON;
  const SvdRoute fallback{m > n, SvdDriver::gesvdj};
  for (std::int64_t b = 0; b < p.batch; ++b) {
    void* ab = at(a, b, a_bytes);
    void* sb = at(s, b, s_bytes);
    void* ub = vectors ? at(u, b, u_bytes) : scratch_u->data();
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(saved->data(), ab, a_bytes, cudaMemcpyDeviceToDevice, c.s), op);
    double perturbation = 0.0;
    const cusolverStatus_t status =
        cusolverDnXgesvdp(c.h.solver, c.h.params, jobz, 1, m, n, t, ab, m, rt, sb, t, ub, m, t, v->data(), n, t,
                          work->data(), dev_bytes, hw, host_bytes, info + b, &perturbation);
    Real<T> largest = 0;
    if (status == CUSOLVER_STATUS_SUCCESS) {
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(&largest, sb, sizeof(largest), cudaMemcpyDeviceToHost, c.s), op);
      TESSEL_CUDA_CHECK(cudaStreamSynchronize(c.s), op);
    }
    // NaN compares false: a NaN perturbation or largest value also goes to the fallback.
    const bool accepted = status == CUSOLVER_STATUS_SUCCESS && perturbation <= eps * static_cast<double>(largest);
    if (!accepted) {
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(ab, saved->data(), a_bytes, cudaMemcpyDeviceToDevice, c.s), op);
      LinalgBatch one = p;
      one.batch = 1;
      svd_one_by_one<T>(c, one, ab, sb, vectors ? ub : nullptr, vectors ? at(vh, b, vh_bytes) : nullptr, vectors,
                        /*full=*/false, fallback, info + b, op);
      continue;
    }
    if (vectors) adjoint_batch(p.dtype, v->data(), n, at(vh, b, vh_bytes), n, n, 1, c.s);
  }
}

void svd_library(const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full, std::int32_t* info,
                 const Stream& stream) {
  const char* op = "svd";
  Call c(stream, op);
  const std::int64_t k = p.n;
  const std::int64_t ucols = full ? p.m : k, vrows = full ? p.n : k;
  const std::size_t es = elem(p.dtype);
  const std::size_t bytes = es * static_cast<std::size_t>(p.m * p.n);
  const std::size_t s_bytes = elem(to_real(p.dtype)) * static_cast<std::size_t>(k);
  if (batched_route(LinalgOp::svd, p)) {
    const int m = to_int(p.m, op), n = to_int(p.n, op);
    const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    gesvdjInfo_t params = nullptr;
    TESSEL_CUSOLVER_CHECK(cusolverDnCreateGesvdjInfo(&params), op);
    std::unique_ptr<std::remove_pointer_t<gesvdjInfo_t>, void (*)(gesvdjInfo_t)> guard(
        params, [](gesvdjInfo_t q) { cusolverDnDestroyGesvdjInfo(q); });
    TESSEL_CUSOLVER_CHECK(cusolverDnXgesvdjSetMaxSweeps(params, kJacobiMaxSweeps), op);
    // gesvdjBatched writes full U (m x m) and V (n x n): Vh and the reduced U are taken from them.
    const bool direct_u = vectors && ucols == p.m;
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto full_u = direct_u ? nullptr : c.device_buffer(es * static_cast<std::size_t>(p.m * p.m * count));
        auto full_v = c.device_buffer(es * static_cast<std::size_t>(p.n * p.n * count));
        T* ab = reinterpret_cast<T*>(at(a, first, bytes));
        auto* sb = reinterpret_cast<Real<T>*>(at(s, first, s_bytes));
        T* ub = direct_u ? reinterpret_cast<T*>(at(u, first, es * static_cast<std::size_t>(p.m * p.m)))
                         : static_cast<T*>(full_u->data());
        T* vb = static_cast<T*>(full_v->data());
        int lwork = 0;
        TESSEL_CUSOLVER_CHECK(gesvdj_batched_size<T>(c.h.solver, jobz, m, n, ab, sb, ub, vb, &lwork, params,
                                                     static_cast<int>(count)),
                              op);
        auto work = c.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
        TESSEL_CUSOLVER_CHECK(gesvdj_batched<T>(c.h.solver, jobz, m, n, ab, sb, ub, vb, static_cast<T*>(work->data()),
                                                lwork, info + first, params, static_cast<int>(count)),
                              op);
        if (!vectors) return;
        if (!direct_u) {  // the first ucols columns of each U
          TESSEL_CUDA_CHECK(cudaMemcpy2DAsync(at(u, first, es * static_cast<std::size_t>(p.m * ucols)),
                                              es * static_cast<std::size_t>(p.m * ucols), ub,
                                              es * static_cast<std::size_t>(p.m * p.m),
                                              es * static_cast<std::size_t>(p.m * ucols), static_cast<std::size_t>(count),
                                              cudaMemcpyDeviceToDevice, c.s),
                            op);
        }
        adjoint_batch(p.dtype, vb, p.n, at(vh, first, es * static_cast<std::size_t>(vrows * p.n)), vrows, p.n, count, c.s);
      });
    });
    return;
  }
  const SvdRoute route = svd_route(p, vectors, full);
  by_dtype(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    if (route.driver == SvdDriver::gesvdp) return svd_by_polar<T>(c, p, a, s, u, vh, vectors, info, op);
    // One matrix at a time, the batch split over streams.
    const std::size_t u_bytes = es * static_cast<std::size_t>(p.m * ucols);
    const std::size_t vh_bytes = es * static_cast<std::size_t>(vrows * p.n);
    in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
             [&](Call& part, std::int64_t first, std::int64_t count) {
      LinalgBatch sub = p;
      sub.batch = count;
      svd_one_by_one<T>(part, sub, at(a, first, bytes), at(s, first, s_bytes), vectors ? at(u, first, u_bytes) : nullptr,
                        vectors ? at(vh, first, vh_bytes) : nullptr, vectors, full, route, info + first, op);
    });
  });
}
}  // namespace

void svd(const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full, std::int32_t* info,
         const Stream& stream) {
  if (p.m < p.n) throw Error("svd: internal error: the CUDA backend takes m >= n");
  // tessel's kernel writes the thin U: it serves everything but the full U of a tall matrix.
  if (small_jacobi_applies(SmallKernel::svd, p, vectors, stream.device()) && (p.m == p.n || !full || !vectors)) {
    return small_svd(p, a, s, u, vh, vectors, info, stream);
  }
  const NonfiniteInput nonfinite(p, a, stream);
  svd_library(p, a, s, u, vh, vectors, full, info, stream);
  nonfinite.poison(to_real(p.dtype), s, p.n, info);
  if (vectors) {
    nonfinite.poison(p.dtype, u, p.m * (full ? p.m : p.n), nullptr);
    nonfinite.poison(p.dtype, vh, p.n * p.n, nullptr);
  }
}

// ---- QR: geqrf, then Q from the Householder vectors ----
// Batched: cuBLAS geqrfBatched, then householder_q (linalg.cu) for the whole batch. Per matrix
// (the batch split over streams): Xgeqrf, then orgqr/ungqr on a copy of the Householder vectors.
void qr(const LinalgBatch& p, void* a, void* q, std::int64_t qcols, const Stream& stream) {
  const char* op = "qr";
  Call c(stream, op);
  const std::int64_t k = std::min(p.m, p.n);
  const std::size_t es = elem(p.dtype);
  const std::size_t bytes = es * static_cast<std::size_t>(p.m * p.n);
  const std::size_t q_bytes = es * static_cast<std::size_t>(p.m * qcols);
  const std::size_t copied = es * static_cast<std::size_t>(p.m * std::min(p.n, qcols));
  const cudaDataType t = data_type(p.dtype);
  const int m = to_int(p.m, op), qc = to_int(qcols, op), kk = to_int(k, op);
  if (batched_route(LinalgOp::qr, p)) {
    const int n = to_int(p.n, op);
    auto tau = c.device_buffer(es * static_cast<std::size_t>(k * p.batch));
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      in_chunks(p.batch, [&](std::int64_t first, std::int64_t count) {
        auto ap = c.pointers(at(a, first, bytes), static_cast<std::int64_t>(bytes), count);
        auto tp = c.pointers(at(tau->data(), first * k, es), static_cast<std::int64_t>(es) * k, count);
        int arg_info = 0;  // host: argument validity only
        TESSEL_CUBLAS_CHECK(geqrf_batched<T>(c.h.blas, m, n, static_cast<T**>(ap->data()), m,
                                             static_cast<T**>(tp->data()), &arg_info, static_cast<int>(count)),
                            op);
        if (arg_info != 0) throw Error(fmt::format("qr: internal error: geqrfBatched rejected argument {}", -arg_info));
      });
    });
    householder_q(p.dtype, a, p.m, p.n, tau->data(), qcols, q, p.batch, c.s);
    return;
  }
  in_parts(c, batch_parts(c, p.batch, tuning::kMinPartPerMatrix), p.batch, op,
           [&](Call& part, std::int64_t first, std::int64_t count) {
    auto tau = part.device_buffer(es * static_cast<std::size_t>(k));
    auto scratch_info = part.device_buffer(sizeof(int));
    std::size_t dev_bytes = 0, host_bytes = 0;
    TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf_bufferSize(part.h.solver, part.h.params, p.m, p.n, t, a, p.m, t, tau->data(), t,
                                                      &dev_bytes, &host_bytes),
                          op);
    auto work = part.device_buffer(dev_bytes);
    HostWork host;
    void* hw = host.get(host_bytes);
    by_dtype(p.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      int lwork = 0;
      TESSEL_CUSOLVER_CHECK(orgqr_size<T>(part.h.solver, m, qc, kk, static_cast<T*>(q), static_cast<T*>(tau->data()), &lwork),
                            op);
      auto qwork = part.device_buffer(static_cast<std::size_t>(lwork) * sizeof(T));
      for (std::int64_t b = first; b < first + count; ++b) {
        TESSEL_CUSOLVER_CHECK(cusolverDnXgeqrf(part.h.solver, part.h.params, p.m, p.n, t, at(a, b, bytes), p.m, t,
                                               tau->data(), t, work->data(), dev_bytes, hw, host_bytes,
                                               static_cast<int*>(scratch_info->data())),
                              op);
        TESSEL_CUDA_CHECK(cudaMemcpyAsync(at(q, b, q_bytes), at(a, b, bytes), copied, cudaMemcpyDeviceToDevice, part.s), op);
        TESSEL_CUSOLVER_CHECK(orgqr<T>(part.h.solver, m, qc, kk, reinterpret_cast<T*>(at(q, b, q_bytes)),
                                       static_cast<const T*>(tau->data()), static_cast<T*>(qwork->data()), lwork,
                                       static_cast<int*>(scratch_info->data())),
                              op);
      }
    });
  });
}

// ---- eig: cusolverDnXgeev (right eigenvectors) ----
void eig(const LinalgBatch& p, void* a, void* w, void* v, bool vectors, std::int32_t* info, const Stream& stream) {
  const char* op = "eig";
  if (!is_complex(p.dtype)) throw Error("eig: internal error: the CUDA backend takes complex input");
  Call c(stream, op);
  const cudaDataType t = data_type(p.dtype);
  const cusolverEigMode_t jobvr = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const std::size_t es = elem(p.dtype);
  const std::size_t bytes = es * static_cast<std::size_t>(p.n * p.n);
  const std::size_t w_bytes = es * static_cast<std::size_t>(p.n);
  const std::int64_t ldvr = vectors ? p.n : 1;
  std::size_t dev_bytes = 0, host_bytes = 0;
  TESSEL_CUSOLVER_CHECK(cusolverDnXgeev_bufferSize(c.h.solver, c.h.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr, p.n, t, a,
                                                   p.n, t, w, t, nullptr, 1, t, v, ldvr, t, &dev_bytes, &host_bytes),
                        op);
  auto work = c.device_buffer(dev_bytes);
  HostWork host;
  void* hw = host.get(host_bytes);
  for (std::int64_t b = 0; b < p.batch; ++b) {
    TESSEL_CUSOLVER_CHECK(cusolverDnXgeev(c.h.solver, c.h.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr, p.n, t, at(a, b, bytes),
                                          p.n, t, at(w, b, w_bytes), t, nullptr, 1, t,
                                          vectors ? at(v, b, bytes) : nullptr, ldvr, t, work->data(), dev_bytes, hw,
                                          host_bytes, info + b),
                          op);
  }
}

}  // namespace tessel::backend::cuda
