#pragma once
// The BLAS's threads under tessel's one CPU thread setting (threads.hpp): OpenBLAS runs
// num_threads() threads for a call made outside an OpenMP region and one thread inside one, so its
// pool and OpenMP's never run at once. Implemented in matmul.cpp.

namespace tessel::backend::cpu {

// Before a BLAS or LAPACK call: sets the BLAS's threads to num_threads(), or to 1 when called inside
// an OpenMP region. Cheap when nothing changed (matmul.cpp).
void use_blas_threads();

// While alive, BLAS calls run single-threaded: hold it around an OpenMP region whose threads call
// the BLAS (one matrix per thread), so that its threads do not each wake the BLAS's pool. Nests.
class BlasSerialRegion {
 public:
  BlasSerialRegion();
  ~BlasSerialRegion();
  BlasSerialRegion(const BlasSerialRegion&) = delete;
  BlasSerialRegion& operator=(const BlasSerialRegion&) = delete;
};

// Which threading the linked OpenBLAS was built with: "pthreads", "openmp" or "sequential"; and its
// current thread count (tessel info, tests).
const char* blas_threading();
int blas_num_threads();

}  // namespace tessel::backend::cpu
