#pragma once
// cuBLASLt, cuBLAS, cuSOLVER and cuFFT, opened on first use, so that importing tessel loads none of
// them (they take most of a CUDA build's load time) and a machine without them imports tessel.
//
// Every function of theirs that the backend calls is listed below once. The list declares, in
// namespace tessel::backend::cuda, an object of the same name that calls the library's function:
// the backend's code is in that namespace, so an unqualified `cublasLtMatmul(...)` finds the object,
// not the global declaration, and nothing links the libraries. A call missing from the list refers
// to the library's own symbol, which fails the link of every test program.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cufft.h>
#include <cusolverDn.h>

#include <atomic>

namespace tessel::backend::cuda {

// The libraries, each with those it needs opened first (cuSOLVER needs cuBLAS and cuSPARSE).
enum class CudaLibrary { cublasLt, cublas, cusolver, cufft };

// Opens lib (once per process) or throws Error naming op, the library, where it was looked for and
// what to install. Ops call it before their first library call, so that a missing library is
// reported with the op's name.
void require_cuda_library(CudaLibrary lib, const char* op);

// The address of a function of lib; throws Error as require_cuda_library does, or when lib lacks it.
void* cuda_library_function(CudaLibrary lib, const char* name);

template <class Fn>
class LibraryFunction;

template <class R, class... Args>
class LibraryFunction<R (*)(Args...)> {
 public:
  constexpr LibraryFunction(CudaLibrary lib, const char* name) : lib_(lib), name_(name) {}
  R operator()(Args... args) const {
    R (*fn)(Args...) = fn_.load(std::memory_order_acquire);
    if (fn == nullptr) {
      fn = reinterpret_cast<R (*)(Args...)>(cuda_library_function(lib_, name_));
      fn_.store(fn, std::memory_order_release);
    }
    return fn(args...);
  }

 private:
  CudaLibrary lib_;
  const char* name_;
  mutable std::atomic<R (*)(Args...)> fn_{nullptr};
};

// The symbols' own names: cublas_v2.h's macros map cublasCreate to cublasCreate_v2 and so on.
#define TESSEL_CUBLASLT_FUNCTIONS(X)                                                                       \
  X(cublasLtCreate) X(cublasLtGetStatusName) X(cublasLtGetVersion) X(cublasLtMatmul)                      \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)              \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)  \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)    \
  X(cublasLtMatrixLayoutSetAttribute)

#define TESSEL_CUBLAS_FUNCTIONS(X)                                                                         \
  X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasGetStatusName)                     \
  X(cublasSgemm_v2) X(cublasDgemm_v2) X(cublasCgemm_v2) X(cublasZgemm_v2)                                 \
  X(cublasSgeam) X(cublasDgeam) X(cublasCgeam) X(cublasZgeam)                                             \
  X(cublasStrsm_v2) X(cublasDtrsm_v2) X(cublasCtrsm_v2) X(cublasZtrsm_v2)                                 \
  X(cublasSgetrfBatched) X(cublasDgetrfBatched) X(cublasCgetrfBatched) X(cublasZgetrfBatched)             \
  X(cublasSgetrsBatched) X(cublasDgetrsBatched) X(cublasCgetrsBatched) X(cublasZgetrsBatched)             \
  X(cublasSgeqrfBatched) X(cublasDgeqrfBatched) X(cublasCgeqrfBatched) X(cublasZgeqrfBatched)

#define TESSEL_CUSOLVER_FUNCTIONS(X)                                                                       \
  X(cusolverDnCreate) X(cusolverDnDestroy) X(cusolverDnSetStream) X(cusolverDnCreateParams)               \
  X(cusolverDnDestroyParams) X(cusolverDnCreateGesvdjInfo) X(cusolverDnDestroyGesvdjInfo)                 \
  X(cusolverDnCreateSyevjInfo) X(cusolverDnDestroySyevjInfo) X(cusolverDnXgesvdjSetMaxSweeps)             \
  X(cusolverDnXgesvdjSetTolerance) X(cusolverDnXsyevjSetMaxSweeps)                                        \
  X(cusolverDnSgetrf) X(cusolverDnDgetrf) X(cusolverDnCgetrf) X(cusolverDnZgetrf)                         \
  X(cusolverDnSgetrf_bufferSize) X(cusolverDnDgetrf_bufferSize) X(cusolverDnCgetrf_bufferSize)            \
  X(cusolverDnZgetrf_bufferSize) X(cusolverDnSgetrs) X(cusolverDnDgetrs) X(cusolverDnCgetrs)              \
  X(cusolverDnZgetrs) X(cusolverDnSpotrfBatched) X(cusolverDnDpotrfBatched) X(cusolverDnCpotrfBatched)    \
  X(cusolverDnZpotrfBatched) X(cusolverDnSorgqr) X(cusolverDnDorgqr) X(cusolverDnCungqr)                  \
  X(cusolverDnZungqr) X(cusolverDnSorgqr_bufferSize) X(cusolverDnDorgqr_bufferSize)                       \
  X(cusolverDnCungqr_bufferSize) X(cusolverDnZungqr_bufferSize)                                           \
  X(cusolverDnSgesvdj) X(cusolverDnDgesvdj) X(cusolverDnCgesvdj) X(cusolverDnZgesvdj)                     \
  X(cusolverDnSgesvdj_bufferSize) X(cusolverDnDgesvdj_bufferSize) X(cusolverDnCgesvdj_bufferSize)         \
  X(cusolverDnZgesvdj_bufferSize) X(cusolverDnSgesvdjBatched) X(cusolverDnDgesvdjBatched)                 \
  X(cusolverDnCgesvdjBatched) X(cusolverDnZgesvdjBatched) X(cusolverDnSgesvdjBatched_bufferSize)          \
  X(cusolverDnDgesvdjBatched_bufferSize) X(cusolverDnCgesvdjBatched_bufferSize)                           \
  X(cusolverDnZgesvdjBatched_bufferSize) X(cusolverDnSsyevjBatched) X(cusolverDnDsyevjBatched)            \
  X(cusolverDnCheevjBatched) X(cusolverDnZheevjBatched) X(cusolverDnSsyevjBatched_bufferSize)             \
  X(cusolverDnDsyevjBatched_bufferSize) X(cusolverDnCheevjBatched_bufferSize)                             \
  X(cusolverDnZheevjBatched_bufferSize) X(cusolverDnXgeev) X(cusolverDnXgeev_bufferSize)                  \
  X(cusolverDnXgeqrf) X(cusolverDnXgeqrf_bufferSize) X(cusolverDnXgesvd) X(cusolverDnXgesvd_bufferSize)   \
  X(cusolverDnXgesvdp) X(cusolverDnXgesvdp_bufferSize) X(cusolverDnXgetrf) X(cusolverDnXgetrf_bufferSize) \
  X(cusolverDnXgetrs) X(cusolverDnXpotrf) X(cusolverDnXpotrf_bufferSize) X(cusolverDnXsyevBatched)        \
  X(cusolverDnXsyevBatched_bufferSize) X(cusolverDnXsyevd) X(cusolverDnXsyevd_bufferSize)

#define TESSEL_CUFFT_FUNCTIONS(X)                                                                          \
  X(cufftCreate) X(cufftDestroy) X(cufftSetAutoAllocation) X(cufftMakePlanMany64) X(cufftSetWorkArea)     \
  X(cufftSetStream) X(cufftExecC2C) X(cufftExecZ2Z) X(cufftExecR2C) X(cufftExecD2Z) X(cufftExecC2R)       \
  X(cufftExecZ2D)

#define TESSEL_LIBRARY_FUNCTION(lib, name) \
  inline const LibraryFunction<decltype(&::name)> name{CudaLibrary::lib, #name};
#define TESSEL_CUBLASLT_FUNCTION(name) TESSEL_LIBRARY_FUNCTION(cublasLt, name)
#define TESSEL_CUBLAS_FUNCTION(name) TESSEL_LIBRARY_FUNCTION(cublas, name)
#define TESSEL_CUSOLVER_FUNCTION(name) TESSEL_LIBRARY_FUNCTION(cusolver, name)
#define TESSEL_CUFFT_FUNCTION(name) TESSEL_LIBRARY_FUNCTION(cufft, name)
TESSEL_CUBLASLT_FUNCTIONS(TESSEL_CUBLASLT_FUNCTION)
TESSEL_CUBLAS_FUNCTIONS(TESSEL_CUBLAS_FUNCTION)
TESSEL_CUSOLVER_FUNCTIONS(TESSEL_CUSOLVER_FUNCTION)
TESSEL_CUFFT_FUNCTIONS(TESSEL_CUFFT_FUNCTION)
#undef TESSEL_CUBLASLT_FUNCTION
#undef TESSEL_CUBLAS_FUNCTION
#undef TESSEL_CUSOLVER_FUNCTION
#undef TESSEL_CUFFT_FUNCTION
#undef TESSEL_LIBRARY_FUNCTION

}  // namespace tessel::backend::cuda
