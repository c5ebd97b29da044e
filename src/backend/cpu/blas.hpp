// The CPU backend's BLAS and LAPACK: OpenBLAS, either PyPI's scipy-openblas32 (the build NumPy and
// SciPy ship; its symbols carry the prefix scipy_, TESSEL_BLAS_SCIPY_PREFIX) or the system's.
// Include this instead of <cblas.h>: the calls keep OpenBLAS's plain names.
#pragma once

#if defined(TESSEL_BLAS_SCIPY_PREFIX)
#define openblas_set_num_threads scipy_openblas_set_num_threads
#define openblas_get_num_threads scipy_openblas_get_num_threads
#define openblas_get_parallel scipy_openblas_get_parallel
#define openblas_get_config scipy_openblas_get_config
#define cblas_sgemm scipy_cblas_sgemm
#define cblas_dgemm scipy_cblas_dgemm
#define cblas_cgemm scipy_cblas_cgemm
#define cblas_zgemm scipy_cblas_zgemm
#define spotrf_ scipy_spotrf_
#define dpotrf_ scipy_dpotrf_
#define cpotrf_ scipy_cpotrf_
#define zpotrf_ scipy_zpotrf_
#define sgetrf_ scipy_sgetrf_
#define dgetrf_ scipy_dgetrf_
#define cgetrf_ scipy_cgetrf_
#define zgetrf_ scipy_zgetrf_
#define sgetrs_ scipy_sgetrs_
#define dgetrs_ scipy_dgetrs_
#define cgetrs_ scipy_cgetrs_
#define zgetrs_ scipy_zgetrs_
#define ssyevd_ scipy_ssyevd_
#define dsyevd_ scipy_dsyevd_
#define cheevd_ scipy_cheevd_
#define zheevd_ scipy_zheevd_
#define sgesdd_ scipy_sgesdd_
#define dgesdd_ scipy_dgesdd_
#define cgesdd_ scipy_cgesdd_
#define zgesdd_ scipy_zgesdd_
#define sgeqrf_ scipy_sgeqrf_
#define dgeqrf_ scipy_dgeqrf_
#define cgeqrf_ scipy_cgeqrf_
#define zgeqrf_ scipy_zgeqrf_
#define sorgqr_ scipy_sorgqr_
#define dorgqr_ scipy_dorgqr_
#define cungqr_ scipy_cungqr_
#define zungqr_ scipy_zungqr_
#define cgeev_ scipy_cgeev_
#define zgeev_ scipy_zgeev_
#endif

#include <cblas.h>
