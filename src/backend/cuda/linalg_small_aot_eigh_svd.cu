// Ahead-of-time instantiations (linalg_small_aot.hpp): the one-matrix-per-thread eigh kernels
// (jacobi_eigh to 7 in float and 6 in double; tridiagonal_eigh 1-8 and 12) and the square
// one-matrix-per-thread jacobi_svd, orders 1-8.
#include <utility>

#include "backend/cuda/device/linalg_small.cuh"
#include "backend/cuda/linalg_small_aot.hpp"

namespace tessel::backend::cuda {
namespace {
template <class T, int... I>
void add_jacobi(std::vector<AotSmallKernel>& out, std::integer_sequence<int, I...>) {
  (out.push_back({SmallKernel::eigh, aot_dtype<T>(), I + 1, I + 1, false,
                  reinterpret_cast<const void*>(&tessel_linalg_small::jacobi_eigh<T, I + 1>)}),
   ...);
}
template <class T, int... N>
void add_tridiagonal(std::vector<AotSmallKernel>& out, std::integer_sequence<int, N...>) {
  (out.push_back({SmallKernel::eigh_tridiagonal, aot_dtype<T>(), N, N, false,
                  reinterpret_cast<const void*>(&tessel_linalg_small::tridiagonal_eigh<T, N>)}),
   ...);
}
template <class T, int... I>
void add_svd(std::vector<AotSmallKernel>& out, std::integer_sequence<int, I...>) {
  (out.push_back({SmallKernel::svd, aot_dtype<T>(), I + 1, I + 1, false,
                  reinterpret_cast<const void*>(&tessel_linalg_small::jacobi_svd<T, I + 1, I + 1>)}),
   ...);
}
}  // namespace

void add_aot_eigh_svd(std::vector<AotSmallKernel>& out) {
  add_jacobi<float>(out, std::make_integer_sequence<int, 7>{});
  add_jacobi<double>(out, std::make_integer_sequence<int, 6>{});
  add_tridiagonal<float>(out, std::integer_sequence<int, 1, 2, 3, 4, 5, 6, 7, 8, 12>{});
  add_tridiagonal<double>(out, std::integer_sequence<int, 1, 2, 3, 4, 5, 6, 7, 8, 12>{});
  add_svd<float>(out, std::make_integer_sequence<int, 8>{});
  add_svd<double>(out, std::make_integer_sequence<int, 8>{});
}

}  // namespace tessel::backend::cuda
