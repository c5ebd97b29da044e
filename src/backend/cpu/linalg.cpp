// CPU linear algebra: LAPACK (the one in OpenBLAS) per matrix. Batches of small matrices run
// over OpenMP threads, one matrix per thread with its own workspace; large matrices run one at a
// time and leave the threading to OpenBLAS.
//
// Matrices holding NaN or Inf never reach the iterative routines (syevd, gesdd, geev): their
// results are NaN and info 0, so a bad input can neither hang nor read as a convergence failure.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/blas_threads.hpp"
#include "backend/cpu/threads.hpp"
#include "backend/linalg.hpp"
#include "tessel/core/error.hpp"

// LAPACK's Fortran interface (gfortran ABI: a hidden length argument per character argument).
extern "C" {
using lapack_int = int;
using fchar = std::size_t;
using cf = std::complex<float>;
using cd = std::complex<double>;
#define TESSEL_LAPACK_POTRF(p, T) void p##potrf_(const char*, const lapack_int*, T*, const lapack_int*, lapack_int*, fchar);
TESSEL_LAPACK_POTRF(s, float) TESSEL_LAPACK_POTRF(d, double) TESSEL_LAPACK_POTRF(c, cf) TESSEL_LAPACK_POTRF(z, cd)
#define TESSEL_LAPACK_GETRF(p, T) \
  void p##getrf_(const lapack_int*, const lapack_int*, T*, const lapack_int*, lapack_int*, lapack_int*);
TESSEL_LAPACK_GETRF(s, float) TESSEL_LAPACK_GETRF(d, double) TESSEL_LAPACK_GETRF(c, cf) TESSEL_LAPACK_GETRF(z, cd)
#define TESSEL_LAPACK_GETRS(p, T)                                                                              \
  void p##getrs_(const char*, const lapack_int*, const lapack_int*, const T*, const lapack_int*, const lapack_int*, \
                 T*, const lapack_int*, lapack_int*, fchar);
TESSEL_LAPACK_GETRS(s, float) TESSEL_LAPACK_GETRS(d, double) TESSEL_LAPACK_GETRS(c, cf) TESSEL_LAPACK_GETRS(z, cd)
void ssyevd_(const char*, const char*, const lapack_int*, float*, const lapack_int*, float*, float*, const lapack_int*,
             lapack_int*, const lapack_int*, lapack_int*, fchar, fchar);
void dsyevd_(const char*, const char*, const lapack_int*, double*, const lapack_int*, double*, double*,
             const lapack_int*, lapack_int*, const lapack_int*, lapack_int*, fchar, fchar);
void cheevd_(const char*, const char*, const lapack_int*, cf*, const lapack_int*, float*, cf*, const lapack_int*, float*,
             const lapack_int*, lapack_int*, const lapack_int*, lapack_int*, fchar, fchar);
void zheevd_(const char*, const char*, const lapack_int*, cd*, const lapack_int*, double*, cd*, const lapack_int*,
             double*, const lapack_int*, lapack_int*, const lapack_int*, lapack_int*, fchar, fchar);
void sgesdd_(const char*, const lapack_int*, const lapack_int*, float*, const lapack_int*, float*, float*,
             const lapack_int*, float*, const lapack_int*, float*, const lapack_int*, lapack_int*, lapack_int*, fchar);
void dgesdd_(const char*, const lapack_int*, const lapack_int*, double*, const lapack_int*, double*, double*,
             const lapack_int*, double*, const lapack_int*, double*, const lapack_int*, lapack_int*, lapack_int*, fchar);
void cgesdd_(const char*, const lapack_int*, const lapack_int*, cf*, const lapack_int*, float*, cf*, const lapack_int*,
             cf*, const lapack_int*, cf*, const lapack_int*, float*, lapack_int*, lapack_int*, fchar);
void zgesdd_(const char*, const lapack_int*, const lapack_int*, cd*, const lapack_int*, double*, cd*,
             const lapack_int*, cd*, const lapack_int*, cd*, const lapack_int*, double*, lapack_int*, lapack_int*, fchar);
#define TESSEL_LAPACK_GEQRF(p, T) \
  void p##geqrf_(const lapack_int*, const lapack_int*, T*, const lapack_int*, T*, T*, const lapack_int*, lapack_int*);
TESSEL_LAPACK_GEQRF(s, float) TESSEL_LAPACK_GEQRF(d, double) TESSEL_LAPACK_GEQRF(c, cf) TESSEL_LAPACK_GEQRF(z, cd)
void sorgqr_(const lapack_int*, const lapack_int*, const lapack_int*, float*, const lapack_int*, const float*, float*,
             const lapack_int*, lapack_int*);
void dorgqr_(const lapack_int*, const lapack_int*, const lapack_int*, double*, const lapack_int*, const double*,
             double*, const lapack_int*, lapack_int*);
void cungqr_(const lapack_int*, const lapack_int*, const lapack_int*, cf*, const lapack_int*, const cf*, cf*,
             const lapack_int*, lapack_int*);
void zungqr_(const lapack_int*, const lapack_int*, const lapack_int*, cd*, const lapack_int*, const cd*, cd*,
             const lapack_int*, lapack_int*);
void cgeev_(const char*, const char*, const lapack_int*, cf*, const lapack_int*, cf*, cf*, const lapack_int*, cf*,
            const lapack_int*, cf*, const lapack_int*, float*, lapack_int*, fchar, fchar);
void zgeev_(const char*, const char*, const lapack_int*, cd*, const lapack_int*, cd*, cd*, const lapack_int*, cd*,
            const lapack_int*, cd*, const lapack_int*, double*, lapack_int*, fchar, fchar);
#undef TESSEL_LAPACK_POTRF
#undef TESSEL_LAPACK_GETRF
#undef TESSEL_LAPACK_GETRS
#undef TESSEL_LAPACK_GEQRF
}

namespace tessel::backend::cpu {
namespace {

template <class T>
struct RealOf {
  using type = T;
};
template <class R>
struct RealOf<std::complex<R>> {
  using type = R;
};
template <class T>
using real_t = typename RealOf<T>::type;
template <class T>
constexpr bool is_complex_v = !std::is_same_v<T, real_t<T>>;

lapack_int to_int(std::int64_t v, const char* op) {
  if (v > std::numeric_limits<lapack_int>::max()) {
    throw ValueError(fmt::format("{}: dimension {} exceeds LAPACK's 32-bit integers", op, v));
  }
  return static_cast<lapack_int>(v);
}

// LAPACK reports workspace sizes as a floating-point value in work[0].
template <class T>
lapack_int work_size(T w) {
  return static_cast<lapack_int>(std::real(w)) + 1;
}

// Batches of small matrices go over threads; one large matrix uses OpenBLAS's own threads.
bool threaded(const LinalgBatch& p) { return p.batch > 1 && std::max(p.m, p.n) <= 256; }

template <class T>
bool all_finite(const T* a, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    if constexpr (is_complex_v<T>) {
      if (!std::isfinite(a[i].real()) || !std::isfinite(a[i].imag())) return false;
    } else {
      if (!std::isfinite(a[i])) return false;
    }
  }
  return true;
}
template <class T>
void fill_nan(T* a, std::int64_t count) {
  const real_t<T> nan = std::numeric_limits<real_t<T>>::quiet_NaN();
  std::fill(a, a + count, T(nan));
}

// ---- LAPACK by type ----
template <class T>
void potrf(char uplo, lapack_int n, T* a, lapack_int* info) {
  if constexpr (std::is_same_v<T, float>) spotrf_(&uplo, &n, a, &n, info, 1);
  else if constexpr (std::is_same_v<T, double>) dpotrf_(&uplo, &n, a, &n, info, 1);
  else if constexpr (std::is_same_v<T, cf>) cpotrf_(&uplo, &n, a, &n, info, 1);
  else zpotrf_(&uplo, &n, a, &n, info, 1);
}
template <class T>
void getrf(lapack_int n, T* a, lapack_int* ipiv, lapack_int* info) {
  if constexpr (std::is_same_v<T, float>) sgetrf_(&n, &n, a, &n, ipiv, info);
  else if constexpr (std::is_same_v<T, double>) dgetrf_(&n, &n, a, &n, ipiv, info);
  else if constexpr (std::is_same_v<T, cf>) cgetrf_(&n, &n, a, &n, ipiv, info);
  else zgetrf_(&n, &n, a, &n, ipiv, info);
}
template <class T>
void getrs(bool transposed, lapack_int n, lapack_int nrhs, const T* a, const lapack_int* ipiv, T* b, lapack_int* info) {
  const char t = transposed ? 'T' : 'N';
  if constexpr (std::is_same_v<T, float>) sgetrs_(&t, &n, &nrhs, a, &n, ipiv, b, &n, info, 1);
  else if constexpr (std::is_same_v<T, double>) dgetrs_(&t, &n, &nrhs, a, &n, ipiv, b, &n, info, 1);
  else if constexpr (std::is_same_v<T, cf>) cgetrs_(&t, &n, &nrhs, a, &n, ipiv, b, &n, info, 1);
  else zgetrs_(&t, &n, &nrhs, a, &n, ipiv, b, &n, info, 1);
}

// syevd / heevd with its workspaces (queried once per thread and reused).
template <class T>
struct Eigh {
  using R = real_t<T>;
  char jobz, uplo = 'L';
  lapack_int n;
  std::vector<T> work;
  std::vector<R> rwork;
  std::vector<lapack_int> iwork;
  lapack_int lwork = -1, lrwork = -1, liwork = -1;

  Eigh(lapack_int n_, bool vectors) : jobz(vectors ? 'V' : 'N'), n(n_) {
    T wq{};
    R rq{};
    lapack_int iq = 0, info = 0;
    call(nullptr, nullptr, &wq, &rq, &iq, &info);
    lwork = work_size(wq);
    liwork = std::max<lapack_int>(iq, 1);
    work.resize(static_cast<std::size_t>(lwork));
    iwork.resize(static_cast<std::size_t>(liwork));
    if constexpr (is_complex_v<T>) {
      lrwork = work_size(rq);
      rwork.resize(static_cast<std::size_t>(lrwork));
    }
  }
  void call(T* a, R* w, T* wk, R* rwk, lapack_int* iwk, lapack_int* info) {
    const lapack_int lda = std::max<lapack_int>(n, 1);
    if constexpr (std::is_same_v<T, float>) ssyevd_(&jobz, &uplo, &n, a, &lda, w, wk, &lwork, iwk, &liwork, info, 1, 1);
    else if constexpr (std::is_same_v<T, double>) dsyevd_(&jobz, &uplo, &n, a, &lda, w, wk, &lwork, iwk, &liwork, info, 1, 1);
    else if constexpr (std::is_same_v<T, cf>)
      cheevd_(&jobz, &uplo, &n, a, &lda, w, wk, &lwork, rwk, &lrwork, iwk, &liwork, info, 1, 1);
    else zheevd_(&jobz, &uplo, &n, a, &lda, w, wk, &lwork, rwk, &lrwork, iwk, &liwork, info, 1, 1);
  }
  lapack_int run(T* a, R* w) {
    lapack_int info = 0;
    call(a, w, work.data(), rwork.data(), iwork.data(), &info);
    return info;
  }
};

// gesdd: jobz 'A' (full), 'S' (reduced) or 'N' (values only).
template <class T>
struct Gesdd {
  using R = real_t<T>;
  char jobz;
  lapack_int m, n, k, ldu, ldvt;
  std::vector<T> work;
  std::vector<R> rwork;
  std::vector<lapack_int> iwork;
  lapack_int lwork = -1;

  Gesdd(lapack_int m_, lapack_int n_, bool vectors, bool full)
      : jobz(!vectors ? 'N' : (full ? 'A' : 'S')), m(m_), n(n_), k(std::min(m_, n_)) {
    ldu = m;
    ldvt = jobz == 'A' ? n : (jobz == 'S' ? k : 1);
    iwork.resize(static_cast<std::size_t>(8 * k));
    if constexpr (is_complex_v<T>) {
      const std::int64_t mx = std::max(m, n), mn = k;
      const std::int64_t lr = jobz == 'N' ? 7 * mn : std::max<std::int64_t>(5 * mn * mn + 5 * mn, 2 * mx * mn + 2 * mn * mn + mn);
      rwork.resize(static_cast<std::size_t>(std::max<std::int64_t>(lr, 1)));
    }
    T wq{};
    lapack_int info = 0;
    std::vector<R> s(static_cast<std::size_t>(k));
    call(nullptr, s.data(), nullptr, nullptr, &wq, &info);
    lwork = work_size(wq);
    work.resize(static_cast<std::size_t>(lwork));
  }
  void call(T* a, R* s, T* u, T* vt, T* wk, lapack_int* info) {
    const lapack_int lda = std::max<lapack_int>(m, 1);
    if constexpr (std::is_same_v<T, float>)
      sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, wk, &lwork, iwork.data(), info, 1);
    else if constexpr (std::is_same_v<T, double>)
      dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, wk, &lwork, iwork.data(), info, 1);
    else if constexpr (std::is_same_v<T, cf>)
      cgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, wk, &lwork, rwork.data(), iwork.data(), info, 1);
    else zgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, wk, &lwork, rwork.data(), iwork.data(), info, 1);
  }
  lapack_int run(T* a, R* s, T* u, T* vt) {
    lapack_int info = 0;
    // jobz 'N' never touches u / vt, but LAPACK wants valid pointers.
    T dummy{};
    call(a, s, u ? u : &dummy, vt ? vt : &dummy, work.data(), &info);
    return info;
  }
};

template <class T>
struct Qr {
  lapack_int m, n, k, qcols;
  std::vector<T> tau, work;
  lapack_int lwork = 1;

  Qr(lapack_int m_, lapack_int n_, lapack_int qcols_) : m(m_), n(n_), k(std::min(m_, n_)), qcols(qcols_) {
    tau.resize(static_cast<std::size_t>(std::max<lapack_int>(k, 1)));
    T q1{}, q2{};
    lapack_int info = 0, query = -1;
    geqrf(nullptr, &q1, query, &info);
    orgqr(nullptr, &q2, query, &info);
    lwork = std::max(work_size(q1), work_size(q2));
    work.resize(static_cast<std::size_t>(lwork));
  }
  void geqrf(T* a, T* wk, lapack_int lw, lapack_int* info) {
    if constexpr (std::is_same_v<T, float>) sgeqrf_(&m, &n, a, &m, tau.data(), wk, &lw, info);
    else if constexpr (std::is_same_v<T, double>) dgeqrf_(&m, &n, a, &m, tau.data(), wk, &lw, info);
    else if constexpr (std::is_same_v<T, cf>) cgeqrf_(&m, &n, a, &m, tau.data(), wk, &lw, info);
    else zgeqrf_(&m, &n, a, &m, tau.data(), wk, &lw, info);
  }
  void orgqr(T* q, T* wk, lapack_int lw, lapack_int* info) {
    if constexpr (std::is_same_v<T, float>) sorgqr_(&m, &qcols, &k, q, &m, tau.data(), wk, &lw, info);
    else if constexpr (std::is_same_v<T, double>) dorgqr_(&m, &qcols, &k, q, &m, tau.data(), wk, &lw, info);
    else if constexpr (std::is_same_v<T, cf>) cungqr_(&m, &qcols, &k, q, &m, tau.data(), wk, &lw, info);
    else zungqr_(&m, &qcols, &k, q, &m, tau.data(), wk, &lw, info);
  }
  void run(T* a, T* q) {
    lapack_int info = 0;
    geqrf(a, work.data(), lwork, &info);
    // Q's first min(k, qcols) columns start as the Householder vectors; the rest is overwritten by orgqr.
    for (lapack_int j = 0; j < std::min(n, qcols); ++j) {
      std::copy(a + static_cast<std::int64_t>(j) * m, a + static_cast<std::int64_t>(j + 1) * m,
                q + static_cast<std::int64_t>(j) * m);
    }
    orgqr(q, work.data(), lwork, &info);
  }
};

template <class T>
struct Geev {
  using R = real_t<T>;
  char jobvr;
  lapack_int n;
  std::vector<T> work;
  std::vector<R> rwork;
  lapack_int lwork = -1;
  Geev(lapack_int n_, bool vectors) : jobvr(vectors ? 'V' : 'N'), n(n_) {
    rwork.resize(static_cast<std::size_t>(2 * n));
    T wq{};
    lapack_int info = 0;
    T dummy{};
    call(nullptr, nullptr, &dummy, &wq, &info);
    lwork = work_size(wq);
    work.resize(static_cast<std::size_t>(lwork));
  }
  void call(T* a, T* w, T* vr, T* wk, lapack_int* info) {
    const char jobvl = 'N';
    const lapack_int one = 1, ldvr = jobvr == 'V' ? n : 1;
    T vl{};
    if constexpr (std::is_same_v<T, cf>)
      cgeev_(&jobvl, &jobvr, &n, a, &n, w, &vl, &one, vr, &ldvr, wk, &lwork, rwork.data(), info, 1, 1);
    else zgeev_(&jobvl, &jobvr, &n, a, &n, w, &vl, &one, vr, &ldvr, wk, &lwork, rwork.data(), info, 1, 1);
  }
  lapack_int run(T* a, T* w, T* vr) {
    lapack_int info = 0;
    T dummy{};
    call(a, w, vr ? vr : &dummy, work.data(), &info);
    return info;
  }
};

// ---- dispatch on dtype ----
template <class F>
void dispatch(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::complex64: return f(cf{});
    case DType::complex128: return f(cd{});
    default: throw DTypeError(fmt::format("{}: no LAPACK routine for {}", op, dtype_name(dtype)));
  }
}

// Runs body(b, state) for every batch index, with one `State` (workspaces) per thread. A batch
// of small matrices runs one matrix per OpenMP thread with the BLAS serial; otherwise the matrices
// run in order and LAPACK's BLAS calls take the threads (threads.hpp).
template <class State, class Make, class Body>
void for_each_matrix(const LinalgBatch& p, Make&& make, Body&& body) {
  const int threads = threaded(p) ? loop_threads(p.batch, 1) : 1;
  if (threads <= 1) {
    use_blas_threads();
    State state = make();
    for (std::int64_t b = 0; b < p.batch; ++b) body(b, state);
    return;
  }
  BlasSerialRegion serial;
#pragma omp parallel num_threads(threads)
  {
    State state = make();
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t b = 0; b < p.batch; ++b) body(b, state);
  }
}

struct NoState {};

}  // namespace

void cholesky(const LinalgBatch& p, void* a, bool upper, std::int32_t* info, const Stream&) {
  const lapack_int n = to_int(p.n, "cholesky");
  dispatch(p.dtype, "cholesky", [&](auto tag) {
    using T = decltype(tag);
    T* base = static_cast<T*>(a);
    for_each_matrix<NoState>(p, [] { return NoState{}; }, [&](std::int64_t b, NoState&) {
      lapack_int i = 0;
      potrf<T>(upper ? 'U' : 'L', n, base + b * p.n * p.n, &i);
      info[b] = i;
    });
  });
}

void lu(const LinalgBatch& p, void* a, Array& pivots, std::int32_t* info, const Stream& stream) {
  const lapack_int n = to_int(p.n, "lu");
  pivots = empty({p.batch, p.n}, DType::int32, Device::cpu(), stream);
  auto* piv = static_cast<lapack_int*>(pivots.data());
  dispatch(p.dtype, "lu", [&](auto tag) {
    using T = decltype(tag);
    T* base = static_cast<T*>(a);
    for_each_matrix<NoState>(p, [] { return NoState{}; }, [&](std::int64_t b, NoState&) {
      lapack_int i = 0;
      getrf<T>(n, base + b * p.n * p.n, piv + b * p.n, &i);
      info[b] = i;
    });
  });
}

void solve(const LinalgBatch& p, void* a, void* b_data, std::int64_t nrhs, bool transposed, std::int32_t* info,
           const Stream&) {
  const lapack_int n = to_int(p.n, "solve"), k = to_int(nrhs, "solve");
  dispatch(p.dtype, "solve", [&](auto tag) {
    using T = decltype(tag);
    T* base = static_cast<T*>(a);
    T* rhs = static_cast<T*>(b_data);
    for_each_matrix<std::vector<lapack_int>>(
        p, [&] { return std::vector<lapack_int>(static_cast<std::size_t>(n)); },
        [&](std::int64_t b, std::vector<lapack_int>& ipiv) {
          lapack_int i = 0;
          T* m = base + b * p.n * p.n;
          getrf<T>(n, m, ipiv.data(), &i);
          info[b] = i;
          if (i > 0) {
            // A singular matrix gives NaN solutions. getrs is not called: with a zero pivot,
            // OpenBLAS 0.3.21 (Debian 12) leaves state behind that makes later ssyevd calls fail
            // to converge (tests/python/test_linalg.py ran eigh after a singular inv).
            fill_nan(rhs + b * p.n * nrhs, p.n * nrhs);
            return;
          }
          lapack_int j = 0;
          getrs<T>(transposed, n, k, m, ipiv.data(), rhs + b * p.n * nrhs, &j);
        });
  });
}

namespace {
// a: column-major matrices, overwritten with the eigenvectors (columns) when `vectors`.
void eigh_in_place(const LinalgBatch& p, void* a, void* w, bool vectors, std::int32_t* info) {
  const lapack_int n = to_int(p.n, "eigh");
  dispatch(p.dtype, "eigh", [&](auto tag) {
    using T = decltype(tag);
    using R = real_t<T>;
    T* base = static_cast<T*>(a);
    R* wb = static_cast<R*>(w);
    for_each_matrix<Eigh<T>>(p, [&] { return Eigh<T>(n, vectors); }, [&](std::int64_t b, Eigh<T>& e) {
      T* m = base + b * p.n * p.n;
      if (!all_finite(m, p.n * p.n)) {
        fill_nan(wb + b * p.n, p.n);
        if (vectors) fill_nan(m, p.n * p.n);
        info[b] = 0;
        return;
      }
      info[b] = e.run(m, wb + b * p.n);
    });
  });
}
}  // namespace

// LAPACK works in place on a column-major copy (x's transpose, copied C-order).
EighArrays eigh(const LinalgBatch& p, const Array& x, bool vectors, const Stream& stream) {
  const Shape batch_shape(x.shape().begin(), x.shape().end() - 2);
  Array work = x.swapaxes(-1, -2).copy(stream);
  Shape w_shape = batch_shape;
  w_shape.push_back(p.n);
  Array w = empty(w_shape, to_real(p.dtype), x.device(), stream);
  Array info = zeros(batch_shape, DType::int32, x.device(), stream);
  wait_for_writes(stream, {&work, &w, &info});
  eigh_in_place(p, work.data(), w.data(), vectors, static_cast<std::int32_t*>(info.data()));
  mark_written(stream, {&work, &w, &info});
  return {w, vectors ? work.swapaxes(-1, -2) : Array(), info};
}

void svd(const LinalgBatch& p, void* a, void* s, void* u, void* vh, bool vectors, bool full, std::int32_t* info,
         const Stream&) {
  const lapack_int m = to_int(p.m, "svd"), n = to_int(p.n, "svd");
  const std::int64_t k = std::min(p.m, p.n);
  const std::int64_t ucols = full ? p.m : k, vrows = full ? p.n : k;
  dispatch(p.dtype, "svd", [&](auto tag) {
    using T = decltype(tag);
    using R = real_t<T>;
    T* base = static_cast<T*>(a);
    R* sb = static_cast<R*>(s);
    T* ub = static_cast<T*>(u);
    T* vb = static_cast<T*>(vh);
    for_each_matrix<Gesdd<T>>(p, [&] { return Gesdd<T>(m, n, vectors, full); }, [&](std::int64_t b, Gesdd<T>& g) {
      T* x = base + b * p.m * p.n;
      T* ui = vectors ? ub + b * p.m * ucols : nullptr;
      T* vi = vectors ? vb + b * vrows * p.n : nullptr;
      if (!all_finite(x, p.m * p.n)) {
        fill_nan(sb + b * k, k);
        if (vectors) {
          fill_nan(ui, p.m * ucols);
          fill_nan(vi, vrows * p.n);
        }
        info[b] = 0;
        return;
      }
      info[b] = g.run(x, sb + b * k, ui, vi);
    });
  });
}

void qr(const LinalgBatch& p, void* a, void* q, std::int64_t qcols, const Stream&) {
  const lapack_int m = to_int(p.m, "qr"), n = to_int(p.n, "qr"), qc = to_int(qcols, "qr");
  dispatch(p.dtype, "qr", [&](auto tag) {
    using T = decltype(tag);
    T* base = static_cast<T*>(a);
    T* qb = static_cast<T*>(q);
    for_each_matrix<Qr<T>>(p, [&] { return Qr<T>(m, n, qc); },
                           [&](std::int64_t b, Qr<T>& r) { r.run(base + b * p.m * p.n, qb + b * p.m * qcols); });
  });
}

void eig(const LinalgBatch& p, void* a, void* w, void* v, bool vectors, std::int32_t* info, const Stream&) {
  const lapack_int n = to_int(p.n, "eig");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* base = static_cast<T*>(a);
    T* wb = static_cast<T*>(w);
    T* vb = static_cast<T*>(v);
    for_each_matrix<Geev<T>>(p, [&] { return Geev<T>(n, vectors); }, [&](std::int64_t b, Geev<T>& g) {
      T* x = base + b * p.n * p.n;
      T* vi = vectors ? vb + b * p.n * p.n : nullptr;
      if (!all_finite(x, p.n * p.n)) {
        fill_nan(wb + b * p.n, p.n);
        if (vectors) fill_nan(vi, p.n * p.n);
        info[b] = 0;
        return;
      }
      info[b] = g.run(x, wb + b * p.n, vi);
    });
  };
  if (p.dtype == DType::complex64) return run(cf{});
  if (p.dtype == DType::complex128) return run(cd{});
  throw DTypeError(fmt::format("eig: the backend takes complex64 or complex128, got {}", dtype_name(p.dtype)));
}

InvArrays inv(const LinalgBatch& p, const Array& x, const Stream& stream) {
  return inv_by_solve(p, x, stream, solve);
}

SolveArrays solve_systems(const LinalgBatch& p, const Array& a, const Array& b, const Stream& stream) {
  return solve_by_lu(p, a, b, stream, solve);
}

}  // namespace tessel::backend::cpu
