#pragma once
// The typed cuSOLVER and cuBLAS routines of the CUDA linear algebra (linalg.cpp), selected by the
// element type: the legacy API's batched and single-matrix routines, and the cuBLAS calls the
// drivers make (geam, gemm, trsm).
#include <cublas_v2.h>
#include <cuComplex.h>
#include <cusolverDn.h>

#include <type_traits>

#include <fmt/format.h>

#include "backend/cuda/cuda_libraries.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cuda {

// by_dtype: f(T{}) for the element type of dtype.
template <class F>
void by_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::complex64: return f(cuFloatComplex{});
    case DType::complex128: return f(cuDoubleComplex{});
    default: throw DTypeError(fmt::format("{}: no CUDA routine for {}", op, dtype_name(dtype)));
  }
}
template <class T>
using Real = std::conditional_t<std::is_same_v<T, cuFloatComplex>, float,
                                std::conditional_t<std::is_same_v<T, cuDoubleComplex>, double, T>>;

template <class T>
cusolverStatus_t potrf_batched(cusolverDnHandle_t h, cublasFillMode_t uplo, int n, T** a, int lda, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSpotrfBatched(h, uplo, n, a, lda, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDpotrfBatched(h, uplo, n, a, lda, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCpotrfBatched(h, uplo, n, a, lda, info, batch);
  else return cusolverDnZpotrfBatched(h, uplo, n, a, lda, info, batch);
}
template <class T>
cublasStatus_t getrf_batched(cublasHandle_t h, int n, T** a, int lda, int* piv, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cublasSgetrfBatched(h, n, a, lda, piv, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cublasDgetrfBatched(h, n, a, lda, piv, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgetrfBatched(h, n, a, lda, piv, info, batch);
  else return cublasZgetrfBatched(h, n, a, lda, piv, info, batch);
}
template <class T>
cublasStatus_t getrs_batched(cublasHandle_t h, cublasOperation_t op, int n, int nrhs, T** a, int lda, const int* piv,
                             T** b, int ldb, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cublasSgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cublasDgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>)
    return cublasCgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
  else return cublasZgetrsBatched(h, op, n, nrhs, a, lda, piv, b, ldb, info, batch);
}
template <class T>
cublasStatus_t geqrf_batched(cublasHandle_t h, int m, int n, T** a, int lda, T** tau, int* info, int batch) {
  if constexpr (std::is_same_v<T, float>) return cublasSgeqrfBatched(h, m, n, a, lda, tau, info, batch);
  else if constexpr (std::is_same_v<T, double>) return cublasDgeqrfBatched(h, m, n, a, lda, tau, info, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgeqrfBatched(h, m, n, a, lda, tau, info, batch);
  else return cublasZgeqrfBatched(h, m, n, a, lda, tau, info, batch);
}
template <class T>
cusolverStatus_t syevj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, const T* a, const Real<T>* w,
                                    int* lwork, syevjInfo_t params, int batch) {
  const cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  if constexpr (std::is_same_v<T, float>) return cusolverDnSsyevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDsyevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCheevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
  else return cusolverDnZheevjBatched_bufferSize(h, jobz, uplo, n, a, n, w, lwork, params, batch);
}
template <class T>
cusolverStatus_t syevj_batched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int n, T* a, Real<T>* w, T* work,
                               int lwork, int* info, syevjInfo_t params, int batch) {
  const cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  if constexpr (std::is_same_v<T, float>) return cusolverDnSsyevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDsyevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCheevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
  else return cusolverDnZheevjBatched(h, jobz, uplo, n, a, n, w, work, lwork, info, params, batch);
}
template <class T>
cusolverStatus_t gesvdj_batched_size(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, const T* a,
                                     const Real<T>* s, const T* u, const T* v, int* lwork, gesvdjInfo_t params,
                                     int batch) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
  else return cusolverDnZgesvdjBatched_bufferSize(h, jobz, m, n, a, m, s, u, m, v, n, lwork, params, batch);
}
template <class T>
cusolverStatus_t gesvdj_batched(cusolverDnHandle_t h, cusolverEigMode_t jobz, int m, int n, T* a, Real<T>* s, T* u,
                                T* v, T* work, int lwork, int* info, gesvdjInfo_t params, int batch) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
  else return cusolverDnZgesvdjBatched(h, jobz, m, n, a, m, s, u, m, v, n, work, lwork, info, params, batch);
}
template <class T>
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, const T* a, const T* tau, int* lwork) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSorgqr_bufferSize(h, m, n, k, a, m, tau, lwork);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDorgqr_bufferSize(h, m, n, k, a, m, tau, lwork);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCungqr_bufferSize(h, m, n, k, a, m, tau, lwork);
  else return cusolverDnZungqr_bufferSize(h, m, n, k, a, m, tau, lwork);
}
template <class T>
cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, T* a, const T* tau, T* work, int lwork, int* info) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSorgqr(h, m, n, k, a, m, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDorgqr(h, m, n, k, a, m, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCungqr(h, m, n, k, a, m, tau, work, lwork, info);
  else return cusolverDnZungqr(h, m, n, k, a, m, tau, work, lwork, info);
}

template <class T>
T scalar_one() {
  if constexpr (std::is_same_v<T, cuFloatComplex>) return make_cuFloatComplex(1.0f, 0.0f);
  else if constexpr (std::is_same_v<T, cuDoubleComplex>) return make_cuDoubleComplex(1.0, 0.0);
  else return T(1);
}
template <class T>
T scalar_zero() {
  if constexpr (std::is_same_v<T, cuFloatComplex>) return make_cuFloatComplex(0.0f, 0.0f);
  else if constexpr (std::is_same_v<T, cuDoubleComplex>) return make_cuDoubleComplex(0.0, 0.0);
  else return T(0);
}
// c (m x n, column-major) = a^H (a: n x m), out of place: cuBLAS geam with beta = 0. B is a again
// (op(B) = a^H has the right shape), so every pointer is valid whatever cuBLAS reads.
template <class T>
cublasStatus_t adjoint_geam(cublasHandle_t h, int m, int n, const T* a, int lda, T* c, int ldc) {
  const T one = scalar_one<T>(), zero = scalar_zero<T>();
  const cublasOperation_t op = CUBLAS_OP_C;  // CUBLAS_OP_T for real types
  if constexpr (std::is_same_v<T, float>) return cublasSgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
  else if constexpr (std::is_same_v<T, double>) return cublasDgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
  else return cublasZgeam(h, op, op, m, n, &one, a, lda, &zero, a, lda, c, ldc);
}
// c (m x n) = a (m x k) b (k x n), all column-major.
template <class T>
cublasStatus_t gemm_nn(cublasHandle_t h, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc) {
  const T one = scalar_one<T>(), zero = scalar_zero<T>();
  const cublasOperation_t nn = CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>) return cublasSgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  else if constexpr (std::is_same_v<T, double>) return cublasDgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cublasCgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
  else return cublasZgemm(h, nn, nn, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc);
}
// gesvdj of one matrix (legacy 32-bit API; the X API has no gesvdj): econ = 1 writes U (m x k)
// and V (n x k), k = min(m, n); econ = 0 the square ones.
template <class T>
cusolverStatus_t gesvdj_size(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n, const T* a, int lda,
                             const Real<T>* s, const T* u, int ldu, const T* v, int ldv, int* lwork, gesvdjInfo_t params) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
  else return cusolverDnZgesvdj_bufferSize(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, lwork, params);
}
template <class T>
cusolverStatus_t gesvdj(cusolverDnHandle_t h, cusolverEigMode_t jobz, int econ, int m, int n, T* a, int lda, Real<T>* s,
                        T* u, int ldu, T* v, int ldv, T* work, int lwork, int* info, gesvdjInfo_t params) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
  else return cusolverDnZgesvdj(h, jobz, econ, m, n, a, lda, s, u, ldu, v, ldv, work, lwork, info, params);
}

// The legacy 32-bit getrf/getrs (int pivots), the ones PyTorch and CuPy call.
template <class T>
cusolverStatus_t getrf_size(cusolverDnHandle_t h, int n, T* a, int* lwork) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgetrf_bufferSize(h, n, n, a, n, lwork);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgetrf_bufferSize(h, n, n, a, n, lwork);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgetrf_bufferSize(h, n, n, a, n, lwork);
  else return cusolverDnZgetrf_bufferSize(h, n, n, a, n, lwork);
}
template <class T>
cusolverStatus_t getrf(cusolverDnHandle_t h, int n, T* a, T* work, int* piv, int* info) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgetrf(h, n, n, a, n, work, piv, info);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgetrf(h, n, n, a, n, work, piv, info);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgetrf(h, n, n, a, n, work, piv, info);
  else return cusolverDnZgetrf(h, n, n, a, n, work, piv, info);
}
template <class T>
cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const T* a, const int* piv, T* b,
                       int* info) {
  if constexpr (std::is_same_v<T, float>) return cusolverDnSgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
  else if constexpr (std::is_same_v<T, double>) return cusolverDnDgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
  else if constexpr (std::is_same_v<T, cuFloatComplex>) return cusolverDnCgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
  else return cusolverDnZgetrs(h, op, n, nrhs, a, n, piv, b, n, info);
}

template <class T>
cublasStatus_t trsm_left_transposed(cublasHandle_t h, bool upper, int n, int k, const T* a, T* b) {
  const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const cublasDiagType_t diag = upper ? CUBLAS_DIAG_NON_UNIT : CUBLAS_DIAG_UNIT;  // L of getrf has a unit diagonal
  const cublasSideMode_t left = CUBLAS_SIDE_LEFT;
  const cublasOperation_t op = CUBLAS_OP_T;
  if constexpr (std::is_same_v<T, float>) {
    const float one = 1.0f;
    return cublasStrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  } else if constexpr (std::is_same_v<T, double>) {
    const double one = 1.0;
    return cublasDtrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  } else if constexpr (std::is_same_v<T, cuFloatComplex>) {
    const cuFloatComplex one = make_cuFloatComplex(1.0f, 0.0f);
    return cublasCtrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  } else {
    const cuDoubleComplex one = make_cuDoubleComplex(1.0, 0.0);
    return cublasZtrsm(h, left, fill, op, diag, n, k, &one, a, n, b, n);
  }
}


}  // namespace tessel::backend::cuda
